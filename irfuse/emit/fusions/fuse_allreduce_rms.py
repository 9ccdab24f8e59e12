"""fuse_allreduce_rms (not implemented yet): all-reduce -> (residual add +) RMSNorm (+ FP8 static
/ NVFP4 quant) in one FlashInfer kernel. O2 on sm90/sm100 with FlashInfer and TP 2, 4 or 8, as in
vLLM; on the CPU its reference is for tests only (opt-in)."""

from __future__ import annotations

from irfuse.emit.declare import Fusion, Support

FUSION = Fusion(
    name="fuse-allreduce-rms",
    flag="fuse_allreduce_rms",
    kind="fusion",
    fuses="all-reduce -> (residual add +) RMSNorm (+ FP8 static / NVFP4 quant)",
    quant="optional",
    schemes=("fp8-static-tensor", "nvfp4"),
    range_rule="below-fi-cap",
    platforms={
        "cpu": Support("reference", None),
        "cuda:sm90": Support("flashinfer", 2, schemes=("fp8-static-tensor",)),
        "cuda:sm100": Support("flashinfer", 2),
    },
    unsupported="FlashInfer's fused all-reduce kernels are built for sm90 and sm100 only, "
    "and irfuse has no ROCm kernel for it",
    needs_tp=True,
    vllm_pass="AllReduceFusionPass",
    note="O2 needs FlashInfer and TP 2, 4 or 8; the CPU reference is for tests (opt-in)",
)
