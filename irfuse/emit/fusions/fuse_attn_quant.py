"""fuse_attn_quant (not implemented yet): attention (and MLA) output -> FP8 / NVFP4 quant,
written by the attention kernel. Off at every level, as in vLLM (#25689)."""

from __future__ import annotations

from irfuse.emit.declare import Fusion, everywhere

FUSION = Fusion(
    name="fuse-attn-quant",
    flag="fuse_attn_quant",
    kind="fusion",
    fuses="attention (and MLA attention) -> FP8 or NVFP4 quant of its output",
    quant="required",
    schemes=("fp8-static-tensor", "fp8-group-128", "fp8-group-64", "nvfp4"),
    range_rule="all",
    platforms=everywhere("triton", None),
    vllm_pass="AttnFusionPass",
    note="vLLM's O2 leaves it off too (#25689)",
)
