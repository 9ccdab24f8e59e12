"""fuse_rope_kvcache_cat_mla (vLLM 0.32): MLA's RoPE of q_pe and k_pe -> the latent-cache write
of `[kv_c | rotated k_pe]`, in one kernel, in every compile range: irfuse's write
(`attn.mla_kv_cache_write`, raised by raise-mla-kv-cache-write; a cache in the model dtype) and
vLLM's (`attn.vllm_mla_kv_cache_update`, the layer's cache found through vLLM's forward context
at run time; any cache dtype, an FP8 one written by vLLM's own op after irfuse's rope). vLLM's
pass (CUDA and ROCm, `concat_and_cache_mla_rope_fused`) is on from O2 where the KV-cache update
is inside the compiled graph; irfuse's from O2 on sm90, where its launch was measured faster
than Inductor at every size, opt-in on other GPUs.
Pattern: `pattern.py`; kernels (writing the cache in place) and lowerings: `ops.py`.
"""

from __future__ import annotations

from irfuse.fusions.declare import Fusion, Support, everywhere

FUSION = Fusion(
    flag="fuse_rope_kvcache_cat_mla",
    kind="fusion",
    doc="(vLLM 0.32) fuse MLA's RoPE of q_pe and k_pe with the MLA KV-cache write of "
    "[kv_c | rotated k_pe].",
    fuses="MLA's RoPE of q_pe / k_pe -> [kv_c | k_pe] latent-cache write",
    quant="independent",
    schemes=(),
    platforms={**everywhere("triton", None), "cuda:sm90": Support("triton", 2)},
    vllm_pass="MLARoPEKVCacheCatFusionPass",
    note="vLLM 0.32; on from O2 on sm90 (measured faster than Inductor at every size there), "
    "as vLLM on CUDA and ROCm where the KV-cache update is inside the compiled graph "
    "(splitting_ops without it, or Inductor's graph partition); opt-in elsewhere until "
    "measured; irfuse's own latent-cache write in the model dtype only; vLLM's in any cache "
    "dtype, in one launch for the model dtype (per-tensor FP8 too once measured; else "
    "vLLM's write after the rope)",
    patterns=("RopeMlaKvCachePattern",),
    candidate="latent_cache_write_of_rotated_k_pe",
)
