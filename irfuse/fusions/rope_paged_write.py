"""RoPE of q and k (with the per-head norms before it, when a fusion takes them too) and the
paged KV-cache write of the rotated k and v -> one `fused.rope_kv_cache_write` that writes the
caches in place and returns the rotated q: the rewrite shared by the RoPE + KV-cache fusion
(a plain rope, or the QK-norm + RoPE op) and the QK-norm + RoPE + KV-cache one (a plain rope's
norms, `rope_readings.QkNorms`).

The rotated k may have other readers after the write (k returned, or attended to besides the
cache): the fused op then returns it too (the `_k` kernels). q and k must be `[T, heads,
head_dim]` (the paged layout). The slot mapping's length may be a symbol of its own (vLLM marks it
dynamic apart from the tokens): one slot per token is checked when the kernel runs. An FP8 cache
write whose k and v are static per-tensor FP8 quants (`x / s`) fuses with the scales (vLLM's fp8
kv_cache_dtype with k_scale / v_scale). A write into vLLM's FlashAttention layout (one
`[2, blocks, block_size, heads, dim]` cache as both caches) fuses alike, its kernel writing the
two halves.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects.attn import KvCacheWriteOp, RopeOp
from irfuse.dialects.fused import QkNormRopeOp, RopeKvCacheWriteOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.quant import STATIC_TENSOR, QuantFp8Op
from irfuse.fusions.rope_readings import (
    has_qk_norms,
    qk_norms,
    refuse_derived_k,
    rotates_in_f32,
)
from irfuse.ir.shapes import F8E4M3FN, is_fp8
from irfuse.raising.aten_ops import NEW_EMPTY, NEW_FULL, NEW_ONES, NEW_ZEROS
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, Outcome, Site
from irfuse.raising.match import NoMatch, call, users

KERNEL = "rope_kv_cache_write"
FLASH_KERNEL = "rope_kv_cache_write_flash"  # one [2, blocks, block_size, heads, dim] cache
KERNEL_K, FLASH_KERNEL_K = f"{KERNEL}_k", f"{FLASH_KERNEL}_k"  # the rotated k returned too

DIRECTLY = "the rope's result itself"
"""What the paged write's rewrite looks through to find the rope: nothing."""

METADATA_READERS = (NEW_EMPTY, NEW_FULL, NEW_ONES, NEW_ZEROS)
"""Ops that read only a tensor's device (and dtype): the rotated k may feed them; they read
the unrotated k instead, which has both."""


def fuse_paged_write(write: KvCacheWriteOp, rewriter: PatternRewriter, site: Site, *,
                     with_norms: bool = False) -> Outcome:
    """The rope whose rotated k `write` stores and the write -> one fused op at the write's
    place. `with_norms`: only a plain rope whose q and k are normalized per head is a candidate,
    and its norms go into the op too."""
    norms = None
    if with_norms:
        rope = _rope_of(write)
        if rope is None:
            refuse_derived_k(write.k, DIRECTLY, has_qk_norms)
        if not isinstance(rope, RopeOp):
            return NO_CANDIDATE
        norms = qk_norms(rope)
        if norms is None:
            return NO_CANDIDATE
    k, v, quants = write.k, write.v, None
    if _quantized_rotated_k(k):
        quants = _cache_quants(write)
        k, v = quants[0].x, quants[1].x
    rope = k.owner
    if not isinstance(rope, RopeOp | QkNormRopeOp) or k is not rope.k_out:
        refuse_derived_k(k, DIRECTLY)
        return NO_CANDIDATE
    skip = write if quants is None else quants[0]
    readers = [u for u in users(k) if u is not skip]
    # Readers of k's device alone take the unrotated k; any other reader (k returned, or
    # attended to besides the cache) gets the rotated k from the fused op (`k_out`).
    metadata = [u for u in readers if call(u, *METADATA_READERS) is not None]
    k_readers = [u for u in readers if u not in metadata]
    if k_readers and any(u.is_before_in_block(write) for u in k_readers):
        raise NoMatch("the rotated k is read before the cache write; the fused op takes the "
                      "write's place")
    q_type = rope.q.type
    assert isinstance(q_type, TensorType)
    if q_type.rank != 3:
        raise NoMatch(f"q is {q_type.rank}-D; the fused kernel takes q and k as [tokens, heads, "
                      "head_dim]")
    if any(u.operation.is_before_in_block(write) for u in rope.q_out.uses):
        raise NoMatch("the rotated q is read before the cache write; the fused op takes the "
                      "write's place")
    rope_f32 = rope.rope_f32 is not None if isinstance(rope, QkNormRopeOp) \
        else rotates_in_f32(rope)
    flash = write.k_cache.type.rank == 5
    if k_readers:
        site.require_kernel(FLASH_KERNEL_K if flash else KERNEL_K)
    else:
        site.require_kernel(FLASH_KERNEL if flash else KERNEL)

    q_in, k_in = rope.q, rope.k
    weights, eps, offset, weight_f32 = (None, None), None, 0.0, False
    if isinstance(rope, QkNormRopeOp):
        weights, eps = (rope.q_weight, rope.k_weight), rope.eps.value.data
        offset, weight_f32 = rope.weight_offset.value.data, rope.weight_f32 is not None
    elif norms is not None:
        q_in, k_in = norms.inputs()
        weights = (norms.q.weight, norms.k.weight)
        eps, offset, weight_f32 = norms.eps, norms.weight_offset, norms.weight_f32
    fused = RopeKvCacheWriteOp(
        q_in, k_in, v, write.k_cache, write.v_cache, write.slot_mapping,  # type: ignore[arg-type]
        q_weight=weights[0], k_weight=weights[1],
        **rope.table_args(), eps=eps, weight_offset=offset,
        weight_f32=weight_f32, rope_f32=rope_f32,
        k_scale=None if quants is None else quants[0].scale,
        v_scale=None if quants is None else quants[1].scale,
        result_types=[rope.q_out.type, write.k_cache_out.type, write.v_cache_out.type,
                      rope.k_out.type if k_readers else None],
    )
    fused.location = write.location
    rewriter.insert(fused, InsertPoint.before(write))
    for reader in metadata:  # a fresh tensor made like k (the slots of a slice write)
        reader.operands = [k_in, *reader.operands[1:]]
    pairs = [(rope.q_out, fused.q_out), (write.k_cache_out, fused.k_cache_out),
             (write.v_cache_out, fused.v_cache_out)]
    if fused.k_out is not None:
        pairs.append((rope.k_out, fused.k_out))
    for old, new in pairs:
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    rewriter.erase(write)
    for quant in quants or ():
        if not quant.q.uses:
            rewriter.erase(quant)
    rewriter.erase(rope)
    if norms is not None:
        rewriter.erase(norms.q)
        rewriter.erase(norms.k)
    return REWROTE


def _rope_of(write: KvCacheWriteOp) -> RopeOp | QkNormRopeOp | None:
    """The rope whose rotated k the write stores (directly, or quantized for an FP8 cache)."""
    k = write.k
    if _quantized_rotated_k(k):
        quant = k.owner
        if not isinstance(quant, QuantFp8Op):
            return None
        k = quant.x
    rope = k.owner
    if isinstance(rope, RopeOp | QkNormRopeOp) and rope.k is not None and k is rope.k_out:
        return rope
    return None


def _cache_quants(write: KvCacheWriteOp) -> tuple[QuantFp8Op, QuantFp8Op]:
    """The static FP8 quants of the rotated k and of v that an FP8 cache write stores: the
    kernel stores `clamp(x / scale)`, so each must be the per-tensor static quant spelled
    `x / s` (the `divide` reading), to f8E4M3FN, read by the write alone (k's)."""
    quants = []
    for name, value in (("k", write.k), ("v", write.v)):
        quant = value.owner
        if not isinstance(quant, QuantFp8Op) or quant.scheme.kind.data != STATIC_TENSOR:
            raise NoMatch(f"the FP8 cache's {name} is not a static per-tensor FP8 quant; the "
                          "fused kernel stores clamp(x / scale)")
        if quant.divide is None:
            raise NoMatch(f"the FP8 cache's {name} is quantized as x * (1 / s); the fused "
                          "kernel divides (x / s), which can round differently")
        if value.type.dtype != F8E4M3FN:
            raise NoMatch(f"the FP8 cache holds {value.type.dtype}; the fused kernel writes "
                          "f8E4M3FN")
        quants.append(quant)
    if any(u is not write for u in users(write.k)):
        raise NoMatch("the quantized k is also read outside the cache write")
    return quants[0], quants[1]


def _quantized_rotated_k(value: SSAValue, steps: int = 6) -> bool:
    """An FP8 k that a few elementwise ops made from a rope's rotated k."""
    t = value.type
    if not isinstance(t, TensorType) or not is_fp8(t.dtype):
        return False
    for _ in range(steps):
        owner = value.owner
        if isinstance(owner, RopeOp | QkNormRopeOp):
            return True
        if not isinstance(owner, Operation) or not owner.operands:
            return False
        value = owner.operands[0]
    return False
