"""fuse_gemm_comms: async TP. GEMM -> reduce-scatter of its rows and all-gather of rows -> GEMM,
plain or FP8-scaled, each one op (`pattern.py`), on the collectives that sequence parallelism
leaves (the config turns it on with this pass, as vLLM does: `implies`). Off at every level, as
in vLLM (#25689). Kernels (torch's symmetric-memory ops on CUDA, the reference on the CPU) and
lowerings: `ops.py`. Not measured yet (the multi-GPU issue measures it:
`benchmarks/bench_tp_e2e.py`).
"""

from __future__ import annotations

from irfuse.fusions.declare import Fusion, RangeRule, Support

FUSION = Fusion(
    flag="fuse_gemm_comms",
    kind="fusion",
    doc="async TP (GEMM + reduce-scatter / all-gather + GEMM overlapped through symmetric "
    "memory); implies enable_sp.",
    fuses="GEMM -> reduce-scatter and all-gather -> GEMM become symmetric-memory "
    "overlapped ops (async TP); implies enable_sp",
    quant="optional",
    schemes=("fp8-static-tensor", "fp8-dynamic-token"),
    platforms={"cpu": Support("reference", None),
               **{c: Support("symm_mem", None) for c in ("cuda:sm80", "cuda:sm90",
                                                          "cuda:sm100")}},
    range_rule=RangeRule("from", "sp_min_token_num"),
    unsupported="torch's symmetric-memory fused GEMM + collective ops need CUDA GPUs "
    "with peer-to-peer access",
    needs_tp=True,
    implies="enable_sp",
    vllm_pass="AsyncTPPass",
    note="vLLM's O2 leaves it off too (#25689); the CPU runs the reference (the GEMM and the "
    "functional collective, unoverlapped)",
    patterns=("GemmReduceScatterPattern", "AllGatherGemmPattern"),
    candidate="gemm_beside_collective",
)
