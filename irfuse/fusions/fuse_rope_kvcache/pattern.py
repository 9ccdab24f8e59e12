"""RoPE of q and k -> the KV-cache write of the rotated k and v -> one kernel that writes the
caches in place and returns the rotated q (and k, where something else reads it).

Two anchors, one per cache write:
- irfuse's paged `attn.kv_cache_write` whose k is the rotated k of an `attn.rope`, or of a
  `fused.qk_norm_rope` (the QK-norm + RoPE fusion runs first, so with both passes on the per-head
  norms, the rope and the write become one kernel: vLLM has that only on ROCm). The rewrite, its
  conditions and the FP8 and FlashAttention-layout caches: `irfuse/fusions/rope_paged_write.py`.
- vLLM's own `attn.vllm_kv_cache_update` of a rotated k (the cache found through the forward
  context at run time): `irfuse/fusions/rope_vllm_write.py`.
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter

from irfuse.dialects.attn import KvCacheWriteOp, VllmKvCacheUpdateOp
from irfuse.fusions.rope_paged_write import fuse_paged_write
from irfuse.fusions.rope_vllm_write import fuse_vllm_write_of_rope
from irfuse.raising.driver import AnchorPattern, Outcome, Site


class RopeKvCachePattern(AnchorPattern):
    """A KV-cache write of a freshly rotated k."""

    op_types = (KvCacheWriteOp,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, KvCacheWriteOp)
        return fuse_paged_write(op, rewriter, site)


class VllmRopeKvCachePattern(AnchorPattern):
    """vLLM's cache write of a freshly rotated k."""

    op_types = (VllmKvCacheUpdateOp,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, VllmKvCacheUpdateOp)
        return fuse_vllm_write_of_rope(op, rewriter, site)
