"""fuse_act_padding: (residual add +) RMSNorm -> constant pad of the hidden dim in one kernel, on
by default from O1 everywhere: on the H200 irfuse's Triton kernel took 0.43-0.67x Inductor's time
for the unfused pattern at every size measured (docs/benchmarks.md). vLLM has this fusion only
on ROCm with AITER, for hidden 2880; here any hidden size, pad amount and value.

Kernels: `add_rms_norm_pad` (returns the padded norm and the new residual) and `rms_norm_pad`.
Both take the pad as (low, high, value) and the norm's readings: `round_sum` (the sum rounded to
the model dtype) and `weight_f32` (the weight product in float32, rounded once).
"""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import FloatData, IntAttr

from irfuse.dialects import aten, fused, kernel
from irfuse.fusions.declare import Choice, Fusion, Kernel, everywhere
from irfuse.fusions.fuse_act_padding.pattern import NormPadPattern, kernel_name
from irfuse.fusions.kernel_call import Args, kernel_call
from irfuse.kernels import dispatch, norm_pad_ref, norm_quant_ref
from irfuse.kernels.dispatch import empty, kernels


def _samples(shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g).to(torch.bfloat16)
    return x, (torch.randn(*shape, generator=g) * 0.5).to(torch.bfloat16), \
        (torch.rand(shape[-1], generator=g) + 0.5).to(torch.bfloat16)


def _add_examples(shape: tuple[int, ...]) -> list[tuple]:
    x, r, w = _samples(shape)
    return [(x, r, w, 1e-5, 0, 64, 0.0, 0.0), (x, r, w, 1e-6, 8, 24, -1.0, 1.0, True, True)]


def _examples(shape: tuple[int, ...]) -> list[tuple]:
    x, _, w = _samples(shape)
    return [(x, w, 1e-5, 0, 64, 0.0, 0.0), (x, w, 1e-6, 3, 5, 2.0, 0.0, True)]


_SM90 = {"cuda:sm90": ((1, Choice("triton", (
    "docs/benchmarks.md (H200): 0.43-0.67x Inductor's time at every size (H 2880 / 3000 / 5760, "
    "T 1-16384; 2026-12-04)"))),)}


def _add_ref(x, residual, weight, eps, low, high, value, weight_offset, round_sum=False,
             weight_f32=False):
    return norm_pad_ref.add_rms_norm_pad(
        x, residual, weight, eps, low=low, high=high, value=value, weight_offset=weight_offset,
        round_sum=round_sum, weight_f32=weight_f32)


def _add_cuda(x, residual, weight, eps, low, high, value, weight_offset, round_sum=False,
              weight_f32=False):
    if dispatch.use_triton(ADD, x):
        return kernels("norm_pad").add_rms_norm_pad(
            x, residual, weight, eps, low=low, high=high, value=value,
            weight_offset=weight_offset, round_sum=round_sum, weight_f32=weight_f32)
    return _add_ref(x, residual, weight, eps, low, high, value, weight_offset, round_sum,
                    weight_f32)


def _add_fake(x, residual, weight, eps, low, high, value, weight_offset, round_sum=False,
              weight_f32=False):
    norm_quant_ref.check_norm_args(x, weight, residual)
    norm_pad_ref.check_pad_value(value)
    shape = norm_pad_ref.padded_shape(x.shape, *norm_pad_ref.pad_amounts(
        x.shape[-1], low=low, high=high))
    return empty(x, shape, x.dtype), empty(x, x.shape, x.dtype)


ADD = Kernel(
    "add_rms_norm_pad",
    "(Tensor x, Tensor residual, Tensor weight, float eps, int low, int high, float value, "
    "float weight_offset, bool round_sum=False, bool weight_f32=False) -> (Tensor, Tensor)",
    _add_ref, _add_cuda, _add_fake, _SM90, examples=_add_examples)


def _ref(x, weight, eps, low, high, value, weight_offset, weight_f32=False):
    return norm_pad_ref.rms_norm_pad(x, weight, eps, low=low, high=high, value=value,
                                     weight_offset=weight_offset, weight_f32=weight_f32)


def _cuda(x, weight, eps, low, high, value, weight_offset, weight_f32=False):
    if dispatch.use_triton(PLAIN, x):
        return kernels("norm_pad").rms_norm_pad(x, weight, eps, low=low, high=high, value=value,
                                                weight_offset=weight_offset,
                                                weight_f32=weight_f32)
    return _ref(x, weight, eps, low, high, value, weight_offset, weight_f32)


def _fake(x, weight, eps, low, high, value, weight_offset, weight_f32=False):
    norm_quant_ref.check_norm_args(x, weight, None)
    norm_pad_ref.check_pad_value(value)
    shape = norm_pad_ref.padded_shape(x.shape, *norm_pad_ref.pad_amounts(
        x.shape[-1], low=low, high=high))
    return empty(x, shape, x.dtype)


PLAIN = Kernel(
    "rms_norm_pad",
    "(Tensor x, Tensor weight, float eps, int low, int high, float value, float weight_offset, "
    "bool weight_f32=False) -> Tensor",
    _ref, _cuda, _fake,
    {"cuda:sm90": ((1, Choice("triton", "the residual form's kernel without the residual "
                              "(measured there: 0.43-0.67x Inductor); not measured alone")),)},
    single_tensor=True, examples=_examples)


def _lower(op: fused.RmsNormPadOp, platform: str) -> kernel.CallOp:
    residual = op.residual
    k = FUSION.kernel_by_name[kernel_name(residual is not None)]
    a = Args()
    template = [a.tensor(op.x)]
    if residual is not None:
        template.append(a.tensor(residual))
    template += [a.tensor(op.weight), FloatData(op.eps.value.data), IntAttr(op.low.value.data),
                 IntAttr(op.high.value.data), FloatData(op.value.value.data),
                 FloatData(op.weight_offset.value.data)]
    keywords = {}
    if op.round_sum is not None:
        keywords["round_sum"] = aten.TRUE
    if op.weight_f32 is not None:
        keywords["weight_f32"] = aten.TRUE
    return kernel_call(k, a, template, op, platform, keywords)


FUSION = Fusion(
    name="fuse-act-padding",
    flag="fuse_act_padding",
    kind="fusion",
    fuses="(residual add +) RMSNorm -> constant pad of the hidden dim",
    quant="independent",
    schemes=(),
    range_rule="all",
    platforms=everywhere("triton", 1),
    vllm_pass="RocmAiterTritonAddRMSNormPadFusionPass",
    note="vLLM runs it only on ROCm with AITER, for hidden 2880",
    patterns=(NormPadPattern(),),
    lowerings={fused.RmsNormPadOp.name: _lower},  # type: ignore[dict-item]
    kernels=(ADD, PLAIN),
)
