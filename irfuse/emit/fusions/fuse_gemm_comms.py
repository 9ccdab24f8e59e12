"""fuse_gemm_comms (not implemented yet): async TP, GEMM -> reduce-scatter and all-gather -> GEMM
as torch's symmetric-memory overlapped ops. Off at every level, as in vLLM (#25689)."""

from __future__ import annotations

from irfuse.emit.declare import Fusion, Support

FUSION = Fusion(
    name="fuse-gemm-comms",
    flag="fuse_gemm_comms",
    kind="fusion",
    fuses="GEMM -> reduce-scatter and all-gather -> GEMM become symmetric-memory "
    "overlapped ops (async TP); implies enable_sp",
    quant="optional",
    schemes=("fp8-static-tensor", "fp8-dynamic-token"),
    range_rule="from-sp-min",
    platforms={c: Support("symm_mem", None) for c in ("cuda:sm80", "cuda:sm90", "cuda:sm100")},
    unsupported="torch's symmetric-memory fused GEMM + collective ops need CUDA GPUs "
    "with peer-to-peer access",
    needs_tp=True,
    vllm_pass="AsyncTPPass",
    note="vLLM's O2 leaves it off too (#25689)",
)
