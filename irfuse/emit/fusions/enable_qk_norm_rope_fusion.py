"""enable_qk_norm_rope_fusion (not implemented yet): split QKV -> per-head RMSNorm of q and k ->
RoPE in one kernel. Off at every level, as in vLLM (slower than Inductor on H100, #34391)."""

from __future__ import annotations

from irfuse.emit.declare import Fusion, everywhere

FUSION = Fusion(
    name="enable-qk-norm-rope-fusion",
    flag="enable_qk_norm_rope_fusion",
    kind="fusion",
    fuses="split qkv -> per-head RMSNorm of q and k -> RoPE",
    quant="independent",
    schemes=(),
    range_rule="all",
    platforms=everywhere("triton", None),
    vllm_pass="QKNormRoPEFusionPass",
    note="vLLM leaves it off too: slower than Inductor on H100 (#34391)",
)
