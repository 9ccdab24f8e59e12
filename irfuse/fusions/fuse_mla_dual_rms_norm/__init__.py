"""fuse_mla_dual_rms_norm (vLLM 0.32): MLA's paired RMSNorms, of the q latent (`q_a_layernorm`)
and of the kv latent (`kv_a_layernorm`), slices of one fused projection, in one kernel. vLLM runs
it only on ROCm with AITER (`fused_qk_rmsnorm`, on from O1 there), also with the q side's FP8
per-token or per-group quant folded in; irfuse fuses the two norms in the model dtype on every
platform, and leaves a q norm that fuse-norm-quant fused with its quant to that fusion. Opt-in
everywhere until its kernel is measured on a GPU. Pattern: `pattern.py`; kernel and lowering:
`ops.py`.
"""

from __future__ import annotations

from irfuse.fusions.declare import Fusion, everywhere

FUSION = Fusion(
    flag="fuse_mla_dual_rms_norm",
    kind="fusion",
    doc="(vLLM 0.32) fuse MLA's paired q_a / kv_a RMSNorms (two slices of one projection).",
    fuses="MLA's q_a and kv_a RMSNorms (slices of one projection)",
    quant="independent",
    schemes=(),
    platforms=everywhere("triton", None),
    vllm_pass="MLADualRMSNormFusionPass",
    note="vLLM 0.32; opt-in until measured on a GPU; vLLM turns it on from O1 only on ROCm "
    "with AITER (also with the q side's FP8 per-token/group quant, which irfuse leaves to "
    "fuse-norm-quant)",
    patterns=("MlaDualRmsNormPattern",),
    candidate="first_of_norms_on_one_projection",
)
