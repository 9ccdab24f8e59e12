"""enable_sp (not implemented yet): sequence parallelism, all-reduce -> RMSNorm (+ FP8 quant)
becomes reduce-scatter -> local RMSNorm -> all-gather. Off at every level, as in vLLM (its O2
leaves it off, vLLM #25689)."""

from __future__ import annotations

from irfuse.emit.declare import PLATFORM_CLASSES, Fusion, Support

FUSION = Fusion(
    name="enable-sp",
    flag="enable_sp",
    kind="fusion",
    fuses="all-reduce -> RMSNorm (+ FP8 quant) becomes reduce-scatter -> RMSNorm -> all-gather",
    quant="optional",
    schemes=("fp8-static-tensor",),
    range_rule="from-sp-min",
    platforms={c: Support("torch", None) for c in PLATFORM_CLASSES},
    needs_tp=True,
    vllm_pass="SequenceParallelismPass",
    note="vLLM's O2 leaves it off too (#25689)",
)
