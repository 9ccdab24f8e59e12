"""fuse_act_padding: (residual add +) RMSNorm -> constant pad of the hidden dim in one kernel, on
by default from O1 everywhere: on the H200 irfuse's Triton kernel took 0.43-0.67x Inductor's time
for the unfused pattern at every size measured (docs/benchmarks.md). vLLM has this fusion only
on ROCm with AITER, for hidden 2880; here any hidden size, pad amount and value. Pattern:
`pattern.py`; kernels and lowering: `ops.py`.
"""

from __future__ import annotations

from irfuse.fusions.declare import Fusion, everywhere

FUSION = Fusion(
    flag="fuse_act_padding",
    kind="fusion",
    doc="fuse (residual add +) RMSNorm with the padding of the router input (vLLM: ROCm "
    "AITER only).",
    fuses="(residual add +) RMSNorm -> constant pad of the hidden dim",
    quant="independent",
    schemes=(),
    platforms=everywhere("triton", 1),
    noops_hide_matches=True,
    vllm_pass="RocmAiterTritonAddRMSNormPadFusionPass",
    note="vLLM runs it only on ROCm with AITER, for hidden 2880",
    patterns=("NormPadPattern",),
    candidate="norm_output_padded",
)
