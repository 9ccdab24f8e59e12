"""fuse_rope_kvcache (not implemented yet): RoPE on q/k -> KV-cache write in one kernel, for
ranges up to rope_kvcache_fusion_max_token_num tokens. vLLM turns it on only with ROCm AITER."""

from __future__ import annotations

from irfuse.emit.declare import Fusion, everywhere

FUSION = Fusion(
    name="fuse-rope-kvcache",
    flag="fuse_rope_kvcache",
    kind="fusion",
    fuses="RoPE on q/k -> KV-cache write",
    quant="independent",
    schemes=(),
    range_rule="up-to-rope-kvcache-max",
    platforms=everywhere("triton", None),
    vllm_pass="RopeKVCacheFusionPass",
    note="vLLM turns it on at O1 only with ROCm AITER; irfuse has not measured its kernel",
)
