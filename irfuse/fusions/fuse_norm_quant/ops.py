"""The kernels of (residual add +) RMSNorm -> FP8 quant: `[add_]rms_norm_quant_fp8_{static,
per_token,group}`, and how `fused.rms_norm_quant` lowers to them.

The static ones return the quantized outputs, one per scale, then the new residual, as one flat
list (emit unpacks one level deep). The residual ones take `round_sum` (normalize the sum
rounded to the model dtype, as models that add in the model dtype do); the static ones `divide`
(scale by `y / s` in float32, for models that divide), the per-token and per-group ones
`reciprocal` (scale by `y * (1 / s)`, for models that multiply by the scale's reciprocal);
every one `weight_f32` (the weight product in float32, rounded once: `F.rms_norm` and models
that spell `(normed * w.float()).to(dtype)`). FlashInfer's rmsnorm_quant is not chosen: it took 1.03-2.88x irfuse's time and does not round y
to the model dtype before the quant.
"""

from __future__ import annotations

import torch
from torch import Tensor
from xdsl.ir import Operation

from irfuse.dialects import fused
from irfuse.fusions.kernel_call import Lowering, scheme_values
from irfuse.fusions.kernel_decl import Call, Kernel
from irfuse.kernels import dispatch, norm_quant_ref, quant_ref
from irfuse.kernels.dispatch import check_fp8, contiguous, empty, kernels

from .pattern import kernel_name

# --- static per-tensor -------------------------------------------------------------------------


def rms_norm_quant_fp8_static(x: Tensor, weight: Tensor, scales: list[Tensor], eps: float,
                              weight_offset: float, out_dtype: torch.dtype,
                              divide: bool = False, weight_f32: bool = False) -> list[Tensor]:
    qs, _ = norm_quant_ref.rms_norm_quant_fp8_static(x, weight, scales, eps, weight_offset,
                                                     out_dtype, divide=divide,
                                                     weight_f32=weight_f32)
    return [contiguous(q) for q in qs]


def _static_cuda(c: Call) -> list[Tensor]:
    fi = dispatch.flashinfer(STATIC, c.x, c.weight, c.scales, c.weight_offset, c.out_dtype,
                             divide=c.divide, weight_f32=c.weight_f32)
    if fi is not None:
        return fi.rms_norm_quant_fp8_static(**c)[0]
    if dispatch.use_triton(STATIC, c.x, c.out_dtype):
        return kernels("norm_quant").rms_norm_quant_fp8_static(**c)[0]
    return rms_norm_quant_fp8_static(**c)


def _static_fake(c: Call) -> list[Tensor]:
    norm_quant_ref.check_norm_args(c.x, c.weight, None)
    check_fp8(c.x, c.out_dtype)
    return [empty(c.x, c.x.shape, c.out_dtype) for _ in c.scales]


STATIC = Kernel(rms_norm_quant_fp8_static, _static_fake, _static_cuda, flashinfer=True)


def add_rms_norm_quant_fp8_static(x: Tensor, residual: Tensor, weight: Tensor,
                                  scales: list[Tensor], eps: float, weight_offset: float,
                                  out_dtype: torch.dtype, divide: bool = False,
                                  round_sum: bool = False,
                                  weight_f32: bool = False) -> list[Tensor]:
    qs, r = norm_quant_ref.rms_norm_quant_fp8_static(x, weight, scales, eps, weight_offset,
                                                     out_dtype, residual, divide=divide,
                                                     round_sum=round_sum, weight_f32=weight_f32)
    return [*(contiguous(q) for q in qs), contiguous(r)]


def _add_static_cuda(c: Call) -> list[Tensor]:
    fi = dispatch.flashinfer(ADD_STATIC, c.x, c.weight, c.scales, c.weight_offset, c.out_dtype,
                             c.residual, divide=c.divide, round_sum=c.round_sum,
                             weight_f32=c.weight_f32)
    if fi is not None:
        qs, r = fi.rms_norm_quant_fp8_static(**c)
        return [*qs, r]
    if dispatch.use_triton(ADD_STATIC, c.x, c.out_dtype):
        qs, r = kernels("norm_quant").rms_norm_quant_fp8_static(**c)
        return [*qs, r]
    return add_rms_norm_quant_fp8_static(**c)


def _add_static_fake(c: Call) -> list[Tensor]:
    norm_quant_ref.check_norm_args(c.x, c.weight, c.residual)
    check_fp8(c.x, c.out_dtype)
    return [*(empty(c.x, c.x.shape, c.out_dtype) for _ in c.scales),
            empty(c.x, c.x.shape, c.x.dtype)]


ADD_STATIC = Kernel(add_rms_norm_quant_fp8_static, _add_static_fake, _add_static_cuda,
                    flashinfer=True)


# --- dynamic per-token -------------------------------------------------------------------------
# `reciprocal`: the quant scales by `y * (1 / s)` (a model that spells it so), else `y / s`.


def rms_norm_quant_fp8_per_token(x: Tensor, weight: Tensor, scale_ub: Tensor | None, eps: float,
                                 weight_offset: float, out_dtype: torch.dtype,
                                 reciprocal: bool = False,
                                 weight_f32: bool = False) -> tuple[Tensor, Tensor]:
    q, s, _ = norm_quant_ref.rms_norm_quant_fp8_per_token(x, weight, scale_ub, eps,
                                                          weight_offset, out_dtype,
                                                          reciprocal=reciprocal,
                                                          weight_f32=weight_f32)
    return contiguous(q), contiguous(s)


def _token_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if dispatch.use_triton(PER_TOKEN, c.x, c.out_dtype):
        return kernels("norm_quant").rms_norm_quant_fp8_per_token(**c)[:2]
    return rms_norm_quant_fp8_per_token(**c)


def _token_fake(c: Call) -> tuple[Tensor, Tensor]:
    norm_quant_ref.check_norm_args(c.x, c.weight, None)
    check_fp8(c.x, c.out_dtype)
    return empty(c.x, c.x.shape, c.out_dtype), empty(c.x, (*c.x.shape[:-1], 1), torch.float32)


PER_TOKEN = Kernel(rms_norm_quant_fp8_per_token, _token_fake, _token_cuda)


def add_rms_norm_quant_fp8_per_token(x: Tensor, residual: Tensor, weight: Tensor,
                                     scale_ub: Tensor | None, eps: float, weight_offset: float,
                                     out_dtype: torch.dtype, round_sum: bool = False,
                                     reciprocal: bool = False, weight_f32: bool = False
                                     ) -> tuple[Tensor, Tensor, Tensor]:
    q, s, r = norm_quant_ref.rms_norm_quant_fp8_per_token(x, weight, scale_ub, eps,
                                                          weight_offset, out_dtype, residual,
                                                          round_sum=round_sum,
                                                          reciprocal=reciprocal,
                                                          weight_f32=weight_f32)
    return contiguous(q), contiguous(s), contiguous(r)


def _add_token_cuda(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    if dispatch.use_triton(ADD_PER_TOKEN, c.x, c.out_dtype):
        return kernels("norm_quant").rms_norm_quant_fp8_per_token(**c)
    return add_rms_norm_quant_fp8_per_token(**c)


def _add_token_fake(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    norm_quant_ref.check_norm_args(c.x, c.weight, c.residual)
    check_fp8(c.x, c.out_dtype)
    return (empty(c.x, c.x.shape, c.out_dtype), empty(c.x, (*c.x.shape[:-1], 1), torch.float32),
            empty(c.x, c.x.shape, c.x.dtype))


ADD_PER_TOKEN = Kernel(add_rms_norm_quant_fp8_per_token, _add_token_fake, _add_token_cuda)


# --- dynamic per-group -------------------------------------------------------------------------


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


def rms_norm_quant_fp8_group(x: Tensor, weight: Tensor, eps: float, weight_offset: float,
                             group_size: int, col_major: bool, ue8m0: bool,
                             out_dtype: torch.dtype, reciprocal: bool = False,
                             weight_f32: bool = False) -> tuple[Tensor, Tensor]:
    q, s, _ = norm_quant_ref.rms_norm_quant_fp8_group(x, weight, eps, weight_offset,
                                                      group_size, col_major, ue8m0, out_dtype,
                                                      reciprocal=reciprocal,
                                                      weight_f32=weight_f32)
    return contiguous(q), s


def _group_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if dispatch.use_triton(GROUP, c.x, c.out_dtype) and _pow2(c.group_size):
        return kernels("norm_quant").rms_norm_quant_fp8_group(**c)[:2]
    return rms_norm_quant_fp8_group(**c)


def _group_fake(c: Call) -> tuple[Tensor, Tensor]:
    norm_quant_ref.check_norm_args(c.x, c.weight, None)
    check_fp8(c.x, c.out_dtype)
    quant_ref.check_group_size(c.x.shape[-1], c.group_size)
    return (empty(c.x, c.x.shape, c.out_dtype),
            quant_ref.empty_group_scales(c.x, c.group_size, c.col_major))


GROUP = Kernel(rms_norm_quant_fp8_group, _group_fake, _group_cuda)


def add_rms_norm_quant_fp8_group(x: Tensor, residual: Tensor, weight: Tensor, eps: float,
                                 weight_offset: float, group_size: int, col_major: bool,
                                 ue8m0: bool, out_dtype: torch.dtype, round_sum: bool = False,
                                 reciprocal: bool = False, weight_f32: bool = False
                                 ) -> tuple[Tensor, Tensor, Tensor]:
    q, s, r = norm_quant_ref.rms_norm_quant_fp8_group(x, weight, eps, weight_offset, group_size,
                                                      col_major, ue8m0, out_dtype, residual,
                                                      round_sum=round_sum, reciprocal=reciprocal,
                                                      weight_f32=weight_f32)
    return contiguous(q), s, contiguous(r)


def _add_group_cuda(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    if dispatch.use_triton(ADD_GROUP, c.x, c.out_dtype) and _pow2(c.group_size):
        return kernels("norm_quant").rms_norm_quant_fp8_group(**c)
    return add_rms_norm_quant_fp8_group(**c)


def _add_group_fake(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    norm_quant_ref.check_norm_args(c.x, c.weight, c.residual)
    check_fp8(c.x, c.out_dtype)
    quant_ref.check_group_size(c.x.shape[-1], c.group_size)
    return (empty(c.x, c.x.shape, c.out_dtype),
            quant_ref.empty_group_scales(c.x, c.group_size, c.col_major),
            empty(c.x, c.x.shape, c.x.dtype))


ADD_GROUP = Kernel(add_rms_norm_quant_fp8_group, _add_group_fake, _add_group_cuda)

KERNELS = (STATIC, ADD_STATIC, PER_TOKEN, ADD_PER_TOKEN, GROUP, ADD_GROUP)
_BY_NAME = {k.name: k for k in KERNELS}


def _kernel(op: Operation) -> Kernel:
    assert isinstance(op, fused.RmsNormQuantOp)
    return _BY_NAME[kernel_name(op.residual is not None, op.scheme.kind.data)]


def _values(op: Operation) -> dict[str, object]:
    assert isinstance(op, fused.RmsNormQuantOp)
    return {**scheme_values(op.scheme), "out_dtype": op.qs[0].type.dtype}  # type: ignore[attr-defined]


LOWERINGS = {fused.RmsNormQuantOp.name: Lowering(_kernel, _values)}
