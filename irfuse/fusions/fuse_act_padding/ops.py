"""The kernels of (residual add +) RMSNorm -> constant pad: `add_rms_norm_pad` (returns the
padded norm and the new residual) and `rms_norm_pad`, and how `fused.rms_norm_pad` lowers to
them. Both take the pad as (low, high, value) and the norm's readings: `round_sum` (the sum
rounded to the model dtype) and `weight_f32` (the weight product in float32, rounded once).
"""

from __future__ import annotations

import torch
from torch import Tensor
from xdsl.ir import Operation

from irfuse.dialects import fused
from irfuse.fusions.kernel_call import Lowering
from irfuse.fusions.kernel_decl import Call, Kernel
from irfuse.kernels import dispatch, norm_pad_ref, norm_quant_ref
from irfuse.kernels.dispatch import empty, kernels


def _samples(shape: tuple[int, ...]) -> tuple[Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g).to(torch.bfloat16)
    return x, (torch.randn(*shape, generator=g) * 0.5).to(torch.bfloat16), \
        (torch.rand(shape[-1], generator=g) + 0.5).to(torch.bfloat16)


def _padded(c: Call) -> Tensor:
    """The padded norm's fake output (checking what the kernel checks)."""
    norm_quant_ref.check_norm_args(c.x, c.weight, c.get("residual"))
    norm_pad_ref.check_pad_value(c.value)
    shape = norm_pad_ref.padded_shape(c.x.shape, *norm_pad_ref.pad_amounts(
        c.x.shape[-1], low=c.low, high=c.high))
    return empty(c.x, shape, c.x.dtype)


def add_rms_norm_pad(x: Tensor, residual: Tensor, weight: Tensor, eps: float, low: int,
                     high: int, value: float, weight_offset: float, round_sum: bool = False,
                     weight_f32: bool = False) -> tuple[Tensor, Tensor]:
    return norm_pad_ref.add_rms_norm_pad(
        x, residual, weight, eps, low=low, high=high, value=value, weight_offset=weight_offset,
        round_sum=round_sum, weight_f32=weight_f32)


def _add_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if dispatch.use_triton(ADD, c.x):
        return kernels("norm_pad").add_rms_norm_pad(**c)
    return add_rms_norm_pad(**c)


ADD = Kernel(add_rms_norm_pad, lambda c: (_padded(c), empty(c.x, c.x.shape, c.x.dtype)),
             _add_cuda, examples=lambda shape: [
                 (*_samples(shape), 1e-5, 0, 64, 0.0, 0.0),
                 (*_samples(shape), 1e-6, 8, 24, -1.0, 1.0, True, True)])


def rms_norm_pad(x: Tensor, weight: Tensor, eps: float, low: int, high: int, value: float,
                 weight_offset: float, weight_f32: bool = False) -> Tensor:
    return norm_pad_ref.rms_norm_pad(x, weight, eps, low=low, high=high, value=value,
                                     weight_offset=weight_offset, weight_f32=weight_f32)


def _cuda(c: Call) -> Tensor:
    if dispatch.use_triton(PLAIN, c.x):
        return kernels("norm_pad").rms_norm_pad(**c)
    return rms_norm_pad(**c)


def _plain_examples(shape: tuple[int, ...]) -> list[dict]:
    x, _, w = _samples(shape)
    return [dict(x=x, weight=w, eps=1e-5, low=0, high=64, value=0.0, weight_offset=0.0),
            dict(x=x, weight=w, eps=1e-6, low=3, high=5, value=2.0, weight_offset=0.0,
                 weight_f32=True)]


PLAIN = Kernel(rms_norm_pad, _padded, _cuda, examples=_plain_examples)

KERNELS = (ADD, PLAIN)


def _kernel(op: Operation) -> Kernel:
    assert isinstance(op, fused.RmsNormPadOp)
    return ADD if op.residual is not None else PLAIN


LOWERINGS = {fused.RmsNormPadOp.name: Lowering(_kernel)}
