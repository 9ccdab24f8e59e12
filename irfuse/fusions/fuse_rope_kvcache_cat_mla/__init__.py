"""fuse_rope_kvcache_cat_mla (vLLM 0.32): MLA's RoPE of q_pe and k_pe -> the latent-cache write
of `[kv_c | rotated k_pe]` (`attn.mla_kv_cache_write`, raised by raise-mla-kv-cache-write), in
one kernel, in every compile range. vLLM's pass (CUDA and ROCm,
`concat_and_cache_mla_rope_fused`) is on from O2 where the KV-cache update is inside the
compiled graph; irfuse takes a latent cache in the model dtype (an FP8 one is not fused yet).
Opt-in everywhere until its kernel is measured on a GPU. Pattern: `pattern.py`; kernel (writing
the cache in place) and lowering: `ops.py`.
"""

from __future__ import annotations

from irfuse.fusions.declare import Fusion, everywhere

FUSION = Fusion(
    flag="fuse_rope_kvcache_cat_mla",
    kind="fusion",
    doc="(vLLM 0.32) fuse MLA's RoPE of q_pe and k_pe with the MLA KV-cache write of "
    "[kv_c | rotated k_pe].",
    fuses="MLA's RoPE of q_pe / k_pe -> [kv_c | k_pe] latent-cache write",
    quant="independent",
    schemes=(),
    platforms=everywhere("triton", None),
    vllm_pass="MLARoPEKVCacheCatFusionPass",
    note="vLLM 0.32; opt-in until measured on a GPU; vLLM turns it on from O2 on CUDA and ROCm "
    "where the KV-cache update is inside the compiled graph (splitting_ops without it, or "
    "Inductor's graph partition); a cache in the model dtype only (vLLM also fuses FP8)",
    patterns=("RopeMlaKvCachePattern",),
    candidate="latent_cache_write_of_rotated_k_pe",
)
