"""enable_sp: sequence parallelism. all-reduce -> (residual add +) RMSNorm (+ static FP8 quant)
becomes reduce-scatter -> the norm (and quant) on this rank's rows -> all-gather (`pattern.py`).
A graph restructuring with no kernel of its own: the collectives are torch's functional ones
(NCCL on GPUs, gloo on the CPU) and the local norm and quant are the raised ops, which the
norm + quant fusion fuses afterwards; for vLLM's all-reduce they are vLLM's own
`vllm.reduce_scatter` / `vllm.all_gather` on its group coordinator, as vLLM's pass emits. Off at
every level, as in vLLM (its O2 leaves it off, vLLM #25689); the compile range rule runs it from
sp_min_token_num on every range of a full graph (a token count TP does not divide is padded to a
multiple of TP and sliced back) and on single sizes TP divides in a piecewise graph (vLLM's
rule).
"""

from __future__ import annotations

from irfuse import thresholds
from irfuse.fusions.declare import PLATFORM_CLASSES, Fusion, RangeRule, Support, Threshold

SP_MIN = Threshold(
    "sp_min_token_num", int,
    "smallest num_tokens at which SP runs; None: computed from the platform, hidden size, TP "
    "size and dtype (`irfuse.thresholds.sp_threshold`).",
    fill=thresholds.sp_threshold, source="vLLM's sequence-parallelism threshold", required=True)

FUSION = Fusion(
    flag="enable_sp",
    kind="fusion",
    doc="sequence parallelism (all-reduce -> reduce-scatter + all-gather around norms).",
    fuses="all-reduce -> RMSNorm (+ FP8 quant) becomes reduce-scatter -> RMSNorm -> all-gather",
    quant="optional",
    schemes=("fp8-static-tensor",),
    platforms={c: Support("torch", None) for c in PLATFORM_CLASSES},
    range_rule=RangeRule("from", SP_MIN.name),
    thresholds=(SP_MIN,),
    needs_tp=True,
    vllm_pass="SequenceParallelismPass",
    note="vLLM's O2 leaves it off too (#25689)",
    patterns=("SequenceParallelPattern",),
    candidate="all_reduce_into_norm",
)
