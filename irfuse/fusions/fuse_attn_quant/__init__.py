"""fuse_attn_quant: attention -> static FP8 or NVFP4 quant of its output, the quantized output
written by the attention kernel (prefill, causal or masked; paged decode, reading the KV cache's
pages in place, `paged_decode.py`; MLA). On from O2 on sm90 where measured faster (H100,
choices/cuda_sm90.toml, docs/benchmarks.md): prefill below 4096 tokens (FP8 and NVFP4), MLA
prefill (FP8), paged decode (FP8 and NVFP4); from 4096 tokens kernel choice leaves prefill to
SDPA. vLLM's O2 leaves the fusion off (#25689). Per-group output quants are not fused (remarks).
Pattern: `pattern.py`; kernels and lowerings: `ops.py`.

Inside vLLM, its own attention call (`attn.vllm_attention`, `attn.vllm_mla_attention`) takes the
quant as vLLM does (`output_scale`, where the layer's backend writes it) or through irfuse's
kernels that read vLLM's cache through the forward context: the pattern in `in_vllm.py`, its
kernels in `ops.py`.
"""

from __future__ import annotations

from irfuse.fusions.declare import Fusion, Support, everywhere

FUSION = Fusion(
    flag="fuse_attn_quant",
    kind="fusion",
    doc="fuse attention with the quant of its output.",
    fuses="attention or MLA -> static FP8 or NVFP4 quant of its output",
    quant="required",
    schemes=("fp8-static-tensor", "nvfp4"),
    platforms={**everywhere("triton", None), "cuda:sm90": Support("triton", 2)},
    noops_hide_matches=True,
    vllm_pass="AttnFusionPass",
    note="on from O2 where measured (sm90): prefill below 4096 tokens, paged decode (read in "
    "place), MLA prefill; vLLM's O2 leaves it off (#25689); NVFP4 outputs fused on the CPU and "
    "for sm90 prefill and paged decode; per-group not fused",
    patterns=("AttnQuantPattern", "VllmAttnQuantPattern"),
    candidate="attention_output_quantized",
    size_aware=True,
)
