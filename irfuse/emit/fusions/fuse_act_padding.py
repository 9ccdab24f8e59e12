"""fuse_act_padding (not implemented yet): residual add + RMSNorm -> zero pad of the hidden dim
(GPT-OSS pads hidden 2880 for its router GEMM). vLLM runs it only on ROCm with AITER."""

from __future__ import annotations

from irfuse.emit.declare import Fusion, Support

FUSION = Fusion(
    name="fuse-act-padding",
    flag="fuse_act_padding",
    kind="fusion",
    fuses="residual add + RMSNorm -> pad (router GEMM input of GPT-OSS, hidden 2880)",
    quant="independent",
    schemes=(),
    range_rule="all",
    platforms={"rocm": Support("aiter", None)},
    unsupported="fuse-act-padding needs ROCm AITER kernels (vLLM runs it only on ROCm "
    "with AITER, for hidden size 2880)",
    vllm_pass="RocmAiterTritonAddRMSNormPadFusionPass",
    note="vLLM turns it on at O1 only with ROCm AITER; irfuse has no AITER binding",
)
