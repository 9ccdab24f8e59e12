"""fuse_norm_quant: (residual add +) RMSNorm -> FP8 quant (static, per-token, per-group) in one
kernel, on by default from O1 everywhere: irfuse's Triton kernels beat Inductor's code for the
pattern at every size measured on the H200 (docs/benchmarks.md). Pattern: `pattern.py`;
kernels and lowering: `ops.py`.
"""

from __future__ import annotations

from irfuse.fusions.declare import FP8_SCHEMES, Fusion, everywhere

FUSION = Fusion(
    flag="fuse_norm_quant",
    kind="fusion",
    doc="fuse (residual add +) RMSNorm with the FP8 quant that follows it.",
    fuses="(residual add +) RMSNorm -> FP8 quant",
    quant="required",
    schemes=FP8_SCHEMES,
    platforms=everywhere("triton", 1),
    noops_hide_matches=True,
    vllm_pass="RMSNormQuantFusionPass",
    patterns=("NormQuantPattern",),
    candidate="norm_output_quantized",
    size_aware=True,
)
