"""fuse-rope-kvcache: RoPE of q and k -> the paged KV-cache write of k and v -> one kernel that
writes the rotated k and v into the caches and returns the rotated q.

Anchored at `attn.kv_cache_write` whose k is the rotated k of an `attn.rope`, or of a
`fused.qk_norm_rope` (enable-qk-norm-rope-fusion runs first here, so with both passes on the
per-head norms, the rope and the write become one kernel: vLLM has that only on ROCm). The rotated
k may have other readers after the write (k returned, or attended to besides the cache): the
fused op then returns it too (the `_k` kernels). q and k must be `[T, heads, head_dim]` (the
paged layout). The caches' new values are the fused op's results; its kernel writes them in
place. The slot mapping's length may be a symbol of its own (vLLM marks it dynamic apart from
the tokens): one slot per token is checked when the kernel runs. An FP8 cache write whose k
and v are static per-tensor FP8 quants (`x / s`) fuses with the scales: the kernel stores the
quantized rows (vLLM's fp8 kv_cache_dtype with k_scale / v_scale). A write into vLLM's
FlashAttention layout (one `[2, blocks, block_size, heads, dim]` cache as both caches) fuses
alike, its kernel writing the two halves.

vLLM's own cache write (`attn.vllm_kv_cache_update`) has its pattern in `in_vllm.py`
(`VllmRopeKvCachePattern`, one of the patterns the declaration names here).
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects.attn import KvCacheWriteOp, RopeOp
from irfuse.dialects.fused import QkNormRopeOp, RopeKvCacheWriteOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.quant import STATIC_TENSOR, QuantFp8Op
from irfuse.fusions.enable_qk_norm_rope_fusion.pattern import rotates_in_f32
from irfuse.fusions.fuse_rope_kvcache.in_vllm import (
    VllmRopeKvCachePattern as VllmRopeKvCachePattern,  # declared with this fusion's patterns
)
from irfuse.ir.shapes import F8E4M3FN, is_fp8
from irfuse.raising.aten_ops import NEW_EMPTY, NEW_FULL, NEW_ONES, NEW_ZEROS
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, call, users

KERNEL = "rope_kv_cache_write"
FLASH_KERNEL = "rope_kv_cache_write_flash"  # one [2, blocks, block_size, heads, dim] cache
KERNEL_K, FLASH_KERNEL_K = f"{KERNEL}_k", f"{FLASH_KERNEL}_k"  # the rotated k returned too

METADATA_READERS = (NEW_EMPTY, NEW_FULL, NEW_ONES, NEW_ZEROS)
"""Ops that read only a tensor's device (and dtype): the rotated k may feed them; they read
the unrotated k instead, which has both."""


class RopeKvCachePattern(AnchorPattern):
    """A KV-cache write of a freshly rotated k."""

    op_types = (KvCacheWriteOp,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, KvCacheWriteOp)
        return _fuse(op, rewriter, site)


def _fuse(write: KvCacheWriteOp, rewriter: PatternRewriter, site: Site) -> Outcome:
    k, v, quants = write.k, write.v, None
    if _quantized_rotated_k(k):
        quants = _cache_quants(write)
        k, v = quants[0].x, quants[1].x
    rope = k.owner
    if not isinstance(rope, RopeOp | QkNormRopeOp) or k is not rope.k_out:
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
    late = [u.operation for u in rope.q_out.uses if u.operation.is_before_in_block(write)]
    if late:
        raise NoMatch("the rotated q is read before the cache write; the fused op takes the "
                      "write's place")
    flash = write.k_cache.type.rank == 5
    if k_readers:
        site.require_kernel(FLASH_KERNEL_K if flash else KERNEL_K)
    else:
        site.require_kernel(FLASH_KERNEL if flash else KERNEL)

    normed = isinstance(rope, QkNormRopeOp)
    fused = RopeKvCacheWriteOp(
        rope.q, rope.k, v, write.k_cache, write.v_cache, write.slot_mapping,  # type: ignore[arg-type]
        q_weight=rope.q_weight if normed else None,
        k_weight=rope.k_weight if normed else None,
        positions=rope.positions, cos_sin_cache=rope.cos_sin_cache, cos=rope.cos, sin=rope.sin,
        is_neox=bool(rope.is_neox.value.data), rotary_dim=rope.rotary_dim.value.data,
        head_dim=rope.head_dim.value.data,
        eps=rope.eps.value.data if normed else None,
        weight_offset=rope.weight_offset.value.data if normed else 0.0,
        weight_f32=normed and rope.weight_f32 is not None,
        rope_f32=_rope_f32(rope),
        k_scale=None if quants is None else quants[0].scale,
        v_scale=None if quants is None else quants[1].scale,
        result_types=[rope.q_out.type, write.k_cache_out.type, write.v_cache_out.type,
                      rope.k_out.type if k_readers else None],
    )
    fused.location = write.location
    rewriter.insert(fused, InsertPoint.before(write))
    for reader in metadata:  # a fresh tensor made like k (the slots of a slice write)
        reader.operands = [rope.k, *reader.operands[1:]]
    pairs = [(rope.q_out, fused.q_out), (write.k_cache_out, fused.k_cache_out),
             (write.v_cache_out, fused.v_cache_out)]
    if fused.k_out is not None:
        pairs.append((rope.k_out, fused.k_out))
    for old, new in pairs:
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    rewriter.erase(write)
    if quants is not None:
        for quant in quants:
            if not quant.q.uses:
                rewriter.erase(quant)
    rewriter.erase(rope)
    return REWROTE


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


def _rope_f32(rope: RopeOp | QkNormRopeOp) -> bool:
    if isinstance(rope, QkNormRopeOp):
        return rope.rope_f32 is not None
    return rotates_in_f32(rope)
