"""fuse_act_quant: SiLU·Mul or GeGLU -> FP8 (static, per-group) or NVFP4 quant in one kernel, on
by default from O1 everywhere: irfuse's Triton kernels beat Inductor's code for the SiLU·Mul
pattern at every size measured on the H200, and for GeGLU (the same kernels' GELU branch) on
the H100 (docs/benchmarks.md; GPUs where GeGLU is not measured leave it to Inductor: choices/).
Pattern: `pattern.py`; kernels and lowerings: `ops.py`.
"""

from __future__ import annotations

from irfuse.fusions.declare import Fusion, everywhere

FUSION = Fusion(
    flag="fuse_act_quant",
    kind="fusion",
    doc="fuse SiLU*Mul or GeGLU with the FP8 / NVFP4 quant that follows it.",
    fuses="SiLU*Mul or GeGLU -> FP8 or NVFP4 quant",
    quant="required",
    schemes=("fp8-static-tensor", "fp8-group-128", "fp8-group-64", "nvfp4"),
    platforms=everywhere("triton", 1),
    noops_hide_matches=True,
    vllm_pass="ActivationQuantFusionPass",
    patterns=("ActQuantPattern",),
    candidate="act_output_quantized",
    size_aware=True,
)
