"""Per-head RMSNorm of q and k -> RoPE -> the KV-cache write of the rotated k and v -> one kernel
carrying the norm weights (the kernel that the QK-norm + RoPE fusion followed by the RoPE +
KV-cache one builds, selected by one flag).

    %qn = norm.rms_norm %q, weight %qw          %qo, %kc2, %vc2 = fused.rope_kv_cache_write
    %kn = norm.rms_norm %k, weight %kw    ->        %q, %k, %v, %qw, %kw, positions %pos,
    %qr, %kr = attn.rope %qn, k %kn, ...            cos_sin_cache %cache, %kc, %vc, %slots
    %kc2, %vc2 = attn.kv_cache_write %kr, %v, ...   {eps = ..., is_neox = ..., ...}

Anchored at irfuse's `attn.kv_cache_write` (`rope_paged_write.py`) or vLLM's
`attn.vllm_kv_cache_update` (`rope_vllm_write.py`) whose k is the rotated k of a plain
`attn.rope` whose q and k are both per-head norm outputs (`rope_readings.qk_norms`). Every
condition of the norms, the rope and the write is checked before anything changes: a site becomes
the one kernel or stays as it was, with a remark, never half fused. A write of a rope whose q and k
have no per-head norm is no candidate here (vLLM's pass matches only layers with QK norm).
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter

from irfuse.dialects.attn import KvCacheWriteOp, VllmKvCacheUpdateOp
from irfuse.fusions.rope_paged_write import fuse_paged_write
from irfuse.fusions.rope_vllm_write import fuse_vllm_write_of_rope
from irfuse.raising.driver import AnchorPattern, Outcome, Site


class QkNormRopeKvCachePattern(AnchorPattern):
    """A KV-cache write of a k that per-head norms and a rope just made."""

    op_types = (KvCacheWriteOp,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, KvCacheWriteOp)
        return fuse_paged_write(op, rewriter, site, with_norms=True)


class VllmQkNormRopeKvCachePattern(AnchorPattern):
    """vLLM's cache write of a k that per-head norms and a rope just made."""

    op_types = (VllmKvCacheUpdateOp,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, VllmKvCacheUpdateOp)
        return fuse_vllm_write_of_rope(op, rewriter, site, with_norms=True)
