"""fuse-qk-norm-rope-kvcache: per-head RMSNorm of q and k -> RoPE -> the paged KV-cache write of
the rotated k and v -> one `fused.rope_kv_cache_write` carrying the norm weights (the kernel that
enable-qk-norm-rope-fusion followed by fuse-rope-kvcache builds, selected by one flag).

    %qn = norm.rms_norm %q, weight %qw          %qo, %kc2, %vc2 = fused.rope_kv_cache_write
    %kn = norm.rms_norm %k, weight %kw    ->        %q, %k, %v, %qw, %kw, positions %pos,
    %qr, %kr = attn.rope %qn, k %kn, ...            cos_sin_cache %cache, %kc, %vc, %slots
    %kc2, %vc2 = attn.kv_cache_write %kr, %v, ...   {eps = ..., is_neox = ..., ...}

Anchored at `attn.kv_cache_write` whose k is the rotated k of an `attn.rope` (or its static
per-tensor FP8 quant, an FP8 cache) whose q and k are both per-head norm outputs. Every condition
of the two passes it stands for (enable-qk-norm-rope-fusion's on the norms and the rope,
fuse-rope-kvcache's on the rope and the write) is checked before anything changes: a site becomes
the one kernel or stays as it was, with a remark, never half fused. A write of a rope whose q and k
have no per-head norm is no candidate (vLLM's pass matches only layers with QK norm; fuse-rope-
kvcache takes those where it is on).

Inside vLLM the write is its own, `attn.vllm_kv_cache_update` (the cache found through the
forward context at run time): the norms, the rope and that write become one
`fused.rope_vllm_kv_cache_update` with the norm weights, at the rope's place, as
fuse-rope-kvcache builds it from `fused.qk_norm_rope` (`fuse_rope_kvcache/in_vllm.py`; its
conditions hold here too, checked before anything changes).
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects.attn import KvCacheWriteOp, RopeOp, VllmKvCacheUpdateOp
from irfuse.dialects.fused import RopeKvCacheWriteOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.quant import QuantFp8Op
from irfuse.fusions.enable_qk_norm_rope_fusion.pattern import (
    _normed,
    _reading,
    _rebase,
    rotates_in_f32,
)
from irfuse.fusions.fuse_rope_kvcache.in_vllm import (
    QkNorms,
    fuse_write,
    refuse_unfollowed,
    rotated_source,
)
from irfuse.fusions.fuse_rope_kvcache.pattern import (
    FLASH_KERNEL,
    KERNEL,
    METADATA_READERS,
    _cache_quants,
    _quantized_rotated_k,
)
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, call, users


class QkNormRopeKvCachePattern(AnchorPattern):
    """A KV-cache write of a k that per-head norms and a rope just made."""

    op_types = (KvCacheWriteOp,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, KvCacheWriteOp)
        return _fuse(op, rewriter, site)


class VllmQkNormRopeKvCachePattern(AnchorPattern):
    """vLLM's cache write of a k that per-head norms and a rope just made."""

    op_types = (VllmKvCacheUpdateOp,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, VllmKvCacheUpdateOp)
        path: list[Operation] = []
        rope = rotated_source(op.k, path)
        if rope is None:
            refuse_unfollowed(op.k, lambda r: isinstance(r, RopeOp) and r.k is not None
                              and _norms(r) is not None)
        if not isinstance(rope, RopeOp):
            return NO_CANDIDATE  # no rope, or norms + rope fused already: fuse-rope-kvcache's
        norms = _norms(rope)
        if norms is None:
            return NO_CANDIDATE
        return fuse_write(op, rope, path, rewriter, site, norms)


def _norms(rope: RopeOp) -> QkNorms | None:
    """The per-head norms of the rope's q and k and their one reading; None where neither is
    normed (RoPE + KV write without QK norm: fuse-rope-kvcache's); NoMatch where the kernel
    cannot take them."""
    assert rope.k is not None
    q_norm, q_views = _normed(rope.q, rope)
    k_norm, k_views = _normed(rope.k, rope)
    if q_norm is None and k_norm is None:
        return None
    if q_norm is None or k_norm is None:
        raise NoMatch(f"only {'k' if q_norm is None else 'q'} is normalized per head before the "
                      "rope; the kernel normalizes both")
    readings = {_reading(n, rope.head_dim.value.data) for n in (q_norm, k_norm)}
    if len(readings) != 1:
        raise NoMatch("q and k are normalized with different eps, weight offsets or weight "
                      "rounding; the kernel reads one")
    return QkNorms(q_norm, q_views, k_norm, k_views, *readings.pop())


def _rope_of(write: KvCacheWriteOp) -> RopeOp | None:
    """The rope whose rotated k the write stores (directly, or quantized for an FP8 cache)."""
    k = write.k
    if _quantized_rotated_k(k):
        quant = k.owner
        if not isinstance(quant, QuantFp8Op):
            return None
        k = quant.x
    rope = k.owner
    if isinstance(rope, RopeOp) and rope.k is not None and k is rope.k_out:
        return rope
    return None


def _fuse(write: KvCacheWriteOp, rewriter: PatternRewriter, site: Site) -> Outcome:
    rope = _rope_of(write)
    if rope is None:
        return NO_CANDIDATE
    assert rope.k is not None and rope.k_out is not None
    norms = _norms(rope)
    if norms is None:
        return NO_CANDIDATE
    q_norm, k_norm = norms.q, norms.k
    head_dim = rope.head_dim.value.data
    rope_f32 = rotates_in_f32(rope)

    quants = _cache_quants(write) if write.k is not rope.k_out else None
    v = write.v if quants is None else quants[1].x
    skip = write if quants is None else quants[0]
    readers = [u for u in users(rope.k_out) if u is not skip]
    if any(call(u, *METADATA_READERS) is None for u in readers):
        raise NoMatch("the rotated k is also read outside the cache write; the fused kernel "
                      "returns only the rotated q")
    q_type = rope.q.type
    assert isinstance(q_type, TensorType)
    if q_type.rank != 3:
        raise NoMatch(f"q is {q_type.rank}-D; the fused kernel takes q and k as [tokens, heads, "
                      "head_dim]")
    if any(u.operation.is_before_in_block(write) for u in rope.q_out.uses):
        raise NoMatch("the rotated q is read before the cache write; the fused op takes the "
                      "write's place")
    site.require_kernel(FLASH_KERNEL if write.k_cache.type.rank == 5 else KERNEL)

    q_in, k_in = _rebase(q_norm, norms.q_views), _rebase(k_norm, norms.k_views)
    fused = RopeKvCacheWriteOp(
        q_in, k_in, v, write.k_cache, write.v_cache, write.slot_mapping,
        q_weight=q_norm.weight, k_weight=k_norm.weight,
        positions=rope.positions, cos_sin_cache=rope.cos_sin_cache, cos=rope.cos, sin=rope.sin,
        is_neox=bool(rope.is_neox.value.data), rotary_dim=rope.rotary_dim.value.data,
        head_dim=head_dim, eps=norms.eps, weight_offset=norms.weight_offset,
        weight_f32=norms.weight_f32,
        rope_f32=rope_f32,
        k_scale=None if quants is None else quants[0].scale,
        v_scale=None if quants is None else quants[1].scale,
        result_types=[rope.q_out.type, write.k_cache_out.type, write.v_cache_out.type, None],
    )
    fused.location = write.location
    rewriter.insert(fused, InsertPoint.before(write))
    for reader in readers:  # a fresh tensor made like k (the slots of a slice write)
        reader.operands = [k_in, *reader.operands[1:]]
    for old, new in ((rope.q_out, fused.q_out), (write.k_cache_out, fused.k_cache_out),
                     (write.v_cache_out, fused.v_cache_out)):
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    rewriter.erase(write)
    for quant in quants or ():
        if not quant.q.uses:
            rewriter.erase(quant)
    rewriter.erase(rope)
    for norm in (q_norm, k_norm):
        _erase_unused(norm, rewriter)
    return REWROTE


def _erase_unused(op: Operation, rewriter: PatternRewriter) -> None:
    if not any(r.uses for r in op.results):
        rewriter.erase(op)

