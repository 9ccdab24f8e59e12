"""fuse_allreduce_rms: all-reduce -> (residual add +) RMSNorm (-> FP8 static / per-token /
per-group or NVFP4 quant) in one op. O2 on sm90/sm100 with FlashInfer and TP 2, 4 or 8, as in
vLLM; on the CPU its reference is for tests only (opt-in). The range rule keeps it below
FlashInfer's size cap (`fi_allreduce_fusion_max_size_mb`), where vLLM runs it. Pattern:
`pattern.py`; kernels (FlashInfer, NCCL + Triton, symmetric memory) and lowering: `ops.py`.
"""

from __future__ import annotations

from irfuse import thresholds
from irfuse.fusions.declare import Fusion, RangeRule, Support, Threshold

FI_CAP = Threshold(
    "fi_allreduce_fusion_max_size_mb", float,
    "largest all-reduced tensor (MB) for that fusion; None: FlashInfer's default for the "
    "capability and TP size.",
    fill=lambda platform, hidden, tp, itemsize: thresholds.fi_allreduce_max_size_mb(platform,
                                                                                    tp),
    source="FlashInfer's size cap")

FUSION = Fusion(
    flag="fuse_allreduce_rms",
    kind="fusion",
    doc="fuse all-reduce with the (residual add +) RMSNorm (+ quant) after it.",
    fuses="all-reduce -> (residual add +) RMSNorm (+ FP8 static / per-token / per-group or "
    "NVFP4 quant)",
    quant="optional",
    schemes=("fp8-static-tensor", "fp8-dynamic-token", "fp8-group-128", "fp8-group-64",
             "nvfp4"),
    platforms={
        "cpu": Support("reference", None),
        "cuda:sm90": Support("flashinfer", 2, schemes=("fp8-static-tensor", "fp8-dynamic-token",
                                                       "fp8-group-128", "fp8-group-64")),
        "cuda:sm100": Support("flashinfer", 2),
    },
    range_rule=RangeRule("up-to-mb", FI_CAP.name),
    thresholds=(FI_CAP,),
    unsupported="FlashInfer's fused all-reduce kernels are built for sm90 and sm100 only, "
    "and irfuse has no ROCm kernel for it",
    needs_tp=True,
    noops_hide_matches=True,
    vllm_pass="AllReduceFusionPass",
    note="O2 needs FlashInfer and TP 2, 4 or 8; the CPU reference is for tests (opt-in); "
    "per-token and per-group FP8 run NCCL + irfuse's fused norm kernel",
    patterns=("AllReduceRmsPattern",),
    candidate="all_reduce_into_norm",
    size_aware=True,
)
