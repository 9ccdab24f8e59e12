"""enable_qk_norm_rope_fusion: per-head RMSNorm of q and of k -> RoPE in one kernel (Qwen3,
Qwen3-MoE). vLLM leaves it off at every level (its CUDA kernel is slower than Inductor on the
H100, vLLM #34391, and breaks partial rotary, #51049); irfuse's default per platform follows its
own kernel's measurement (choices/cuda_sm90.toml, docs/benchmarks.md). Pattern: `pattern.py`;
kernel and lowering: `ops.py`.
"""

from __future__ import annotations

from irfuse.fusions.declare import Fusion, Support, everywhere

FUSION = Fusion(
    flag="enable_qk_norm_rope_fusion",
    kind="fusion",
    doc="fuse the per-head q/k RMSNorm with RoPE.",
    fuses="per-head RMSNorm of q and k -> RoPE",
    quant="independent",
    schemes=(),
    platforms={**everywhere("triton", None), "cuda:sm90": Support("triton", 1)},
    vllm_pass="QKNormRoPEFusionPass",
    note="on from O1 where measured faster than Inductor (sm90); vLLM leaves it off: its "
    "kernel is slower than Inductor on H100 (#34391)",
    patterns=("QkNormRopePattern",),
    candidate="rope_of_normed",
)
