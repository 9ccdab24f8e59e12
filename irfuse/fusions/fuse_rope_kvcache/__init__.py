"""fuse_rope_kvcache: RoPE of q and k (after their per-head norms, when the QK-norm + RoPE fusion
has fused them) -> the paged KV-cache write, in one kernel, for ranges up to
rope_kvcache_fusion_max_token_num tokens (vLLM's rule: decode-sized batches, where the separate
write is a launch of its own). vLLM has it only on ROCm with AITER; irfuse's default per platform
follows its kernel's measurement (choices/cuda_sm90.toml, docs/benchmarks.md). Pattern:
`pattern.py`; kernels (writing the caches in place) and lowering: `ops.py`.

Inside vLLM, its own cache write (`attn.vllm_kv_cache_update`, the cache found through the
forward context at run time) fuses with the rope before it, its kernel in `ops.py` too. The
rewrites (`irfuse/fusions/rope_paged_write.py`, `rope_vllm_write.py`) are shared with the
QK-norm + RoPE + KV-cache fusion.
"""

from __future__ import annotations

from irfuse import thresholds
from irfuse.fusions.declare import Fusion, RangeRule, Support, Threshold, everywhere

MAX_TOKENS = Threshold(
    "rope_kvcache_fusion_max_token_num", int,
    "largest num_tokens for the RoPE + KV-cache fusion.",
    default=thresholds.ROPE_KVCACHE_MAX_TOKEN_NUM)

FUSION = Fusion(
    flag="fuse_rope_kvcache",
    kind="fusion",
    doc="fuse RoPE with the KV-cache write.",
    fuses="RoPE on q/k (after their norms) -> KV-cache write",
    quant="independent",
    schemes=(),
    platforms={**everywhere("triton", None), "cuda:sm90": Support("triton", 1)},
    range_rule=RangeRule("up-to", MAX_TOKENS.name),
    thresholds=(MAX_TOKENS,),
    vllm_pass="RopeKVCacheFusionPass",
    note="on from O1 where measured faster than Inductor (sm90); vLLM turns it on at O1 only "
    "with ROCm AITER",
    patterns=("RopeKvCachePattern", "VllmRopeKvCachePattern"),
    candidate="cache_write_of_rotated_k",
)
