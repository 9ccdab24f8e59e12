"""fuse_mla_dual_rms_norm (vLLM 0.32): MLA's paired RMSNorms, of the q latent (`q_a_layernorm`)
and of the kv latent (`kv_a_layernorm`), slices of one fused projection, in one kernel.

vLLM runs it only on ROCm with AITER (`MLADualRMSNormFusionPass`, `fused_qk_rmsnorm`; on from O1
there), also with the q side's FP8 per-token or per-group quant folded in. irfuse fuses the two
norms in the model dtype on every platform: the Triton kernel `mla_dual_rms_norm`
(`irfuse/kernels/mla_dual_norm.py`) and its torch reference (`mla_dual_norm_ref.py`, the CPU
path). A q norm that fuse-norm-quant has fused with its quant (an FP8 q_b_proj) is left to that
fusion. Opt-in everywhere until the kernel is measured on a GPU.

Kernel `mla_dual_rms_norm`: q and kv (strided slices allowed), their weights, one eps each, and
the shared readings of the weight product (`weight_offset`, `weight_f32`); returns the two normed
tensors, contiguous.
"""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import FloatData

from irfuse.dialects import aten, fused, kernel
from irfuse.fusions.declare import Fusion, Kernel, everywhere
from irfuse.fusions.fuse_mla_dual_rms_norm.pattern import KERNEL, MlaDualRmsNormPattern
from irfuse.fusions.kernel_call import Args, kernel_call
from irfuse.kernels import dispatch, mla_dual_norm_ref
from irfuse.kernels.dispatch import kernels

SCHEMA = ("(Tensor q, Tensor q_weight, Tensor kv, Tensor kv_weight, float q_eps, float kv_eps, "
          "float weight_offset=0., bool weight_f32=False) -> (Tensor, Tensor)")


def _ref(q, q_weight, kv, kv_weight, q_eps, kv_eps, weight_offset=0.0, weight_f32=False):
    return mla_dual_norm_ref.mla_dual_rms_norm(q, q_weight, kv, kv_weight, q_eps, kv_eps,
                                               weight_offset, weight_f32)


def _cuda(q, q_weight, kv, kv_weight, q_eps, kv_eps, weight_offset=0.0, weight_f32=False):
    if dispatch.use_triton(DUAL_NORM, q):
        return kernels("mla_dual_norm").mla_dual_rms_norm(
            q, q_weight, kv, kv_weight, q_eps, kv_eps, weight_offset, weight_f32)
    return _ref(q, q_weight, kv, kv_weight, q_eps, kv_eps, weight_offset, weight_f32)


def _fake(q, q_weight, kv, kv_weight, q_eps, kv_eps, weight_offset=0.0, weight_f32=False):
    mla_dual_norm_ref.check_args(q, q_weight, kv, kv_weight)
    return q.new_empty(q.shape), kv.new_empty(kv.shape)


def _examples(shape: tuple[int, ...]) -> list[tuple]:
    """q and kv as slices of one `[T, 3 * D]` projection for `shape` `(T, D)`: q the first
    2 * D columns, kv the next D / 2 (the rest is k_pe)."""
    t, d = shape[0], shape[-1]
    g = torch.Generator().manual_seed(0)
    proj = torch.randn(t, 3 * d, generator=g).to(torch.bfloat16)
    q, kv = proj[:, : 2 * d], proj[:, 2 * d: 2 * d + d // 2]
    qw = (torch.rand(2 * d, generator=g) + 0.5).to(torch.bfloat16)
    kvw = (torch.rand(d // 2, generator=g) + 0.5).to(torch.bfloat16)
    return [(q, qw, kv, kvw, 1e-6, 1e-6), (q, qw, kv, kvw, 1e-5, 1e-6, 1.0, True)]


DUAL_NORM = Kernel(KERNEL, SCHEMA, _ref, _cuda, _fake, examples=_examples)


def _lower(op: fused.MlaDualRmsNormOp, platform: str) -> kernel.CallOp:
    a = Args()
    template = [a.tensor(op.q), a.tensor(op.q_weight), a.tensor(op.kv), a.tensor(op.kv_weight),
                FloatData(op.q_eps.value.data), FloatData(op.kv_eps.value.data)]
    keywords = {}
    if op.weight_offset.value.data != 0.0:
        keywords["weight_offset"] = FloatData(op.weight_offset.value.data)
    if op.weight_f32 is not None:
        keywords["weight_f32"] = aten.TRUE
    return kernel_call(DUAL_NORM, a, template, op, platform, keywords)


FUSION = Fusion(
    name="fuse-mla-dual-rms-norm",
    flag="fuse_mla_dual_rms_norm",
    kind="fusion",
    fuses="MLA's q_a and kv_a RMSNorms (slices of one projection)",
    quant="independent",
    schemes=(),
    range_rule="all",
    platforms=everywhere("triton", None),
    vllm_pass="MLADualRMSNormFusionPass",
    note="vLLM 0.32; opt-in until measured on a GPU; vLLM turns it on from O1 only on ROCm "
    "with AITER (also with the q side's FP8 per-token/group quant, which irfuse leaves to "
    "fuse-norm-quant)",
    patterns=(MlaDualRmsNormPattern(),),
    lowerings={fused.MlaDualRmsNormOp.name: _lower},  # type: ignore[dict-item]
    kernels=(DUAL_NORM,),
)
