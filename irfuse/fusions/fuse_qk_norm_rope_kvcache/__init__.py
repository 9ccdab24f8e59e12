"""fuse_qk_norm_rope_kvcache (vLLM 0.32): per-head RMSNorm of q and k -> RoPE -> the KV-cache
write, in one kernel, for ranges up to rope_kvcache_fusion_max_token_num tokens.

vLLM's meaning: it supersedes enable_qk_norm_rope_fusion and fuse_rope_kvcache for the layers
that have all three (its pass runs before theirs and takes those sites); they still apply where
it does not. vLLM runs it only on ROCm with AITER (on from O2 with the rotary_embedding custom
op). Here its patterns emit the RoPE + KV-cache fused ops and kernels with the norm weights
(irfuse's paged cache write: `rope_kv_cache_write`; vLLM's own, `attn.vllm_kv_cache_update`:
`rope_vllm_kv_cache_update`), so this fusion has no kernel of its own and their choices gate it.
Opt-in on every platform (on sm90 O1 turns on the two separate flags, which give the same
kernel). Patterns: `pattern.py`.
"""

from __future__ import annotations

from irfuse.fusions.declare import Fusion, RangeRule, everywhere
from irfuse.fusions.fuse_rope_kvcache import MAX_TOKENS

FUSION = Fusion(
    flag="fuse_qk_norm_rope_kvcache",
    kind="fusion",
    doc="(vLLM 0.32) fuse the per-head q/k RMSNorm, RoPE and the KV-cache write into one "
    "kernel; supersedes enable_qk_norm_rope_fusion and fuse_rope_kvcache where a layer has all "
    "three.",
    fuses="per-head RMSNorm of q and k -> RoPE -> KV-cache write",
    quant="independent",
    schemes=(),
    platforms=everywhere("triton", None),
    range_rule=RangeRule("up-to", MAX_TOKENS.name),
    vllm_pass="QkNormRopeKvCacheFusionPass",
    note="vLLM 0.32; supersedes enable-qk-norm-rope-fusion and fuse-rope-kvcache where a layer "
    "has all three; opt-in (on sm90 O1 turns on those two, which give the same kernel); vLLM "
    "turns it on from O2 only on ROCm with AITER and its rotary_embedding custom op",
    patterns=("QkNormRopeKvCachePattern", "VllmQkNormRopeKvCachePattern"),
    candidate="cache_write_of_rotated_normed_k",
)
