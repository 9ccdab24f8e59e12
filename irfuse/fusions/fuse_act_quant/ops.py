"""The kernels of SiLU·Mul -> quant: `silu_mul_quant_fp8_static`, `silu_mul_quant_fp8_group`,
`silu_mul_quant_nvfp4`, and how `fused.silu_mul_quant` / `fused.silu_mul_quant_nvfp4` lower to
them. They take `x = [gate | up]` [..., 2d], or gate `x` and `up` [..., d] apart (the optional
last `up`); the static one takes `divide` like the norm kernels.
"""

from __future__ import annotations

import torch
from torch import Tensor
from xdsl.ir import Operation

from irfuse.dialects import fused
from irfuse.fusions.kernel_call import Lowering, scheme_values
from irfuse.fusions.kernel_decl import Call, Kernel
from irfuse.fusions.library_ops import silu_mul_fake
from irfuse.kernels import act_quant_ref, dispatch, quant_ref
from irfuse.kernels.dispatch import check_fp8, contiguous, empty, fake_nvfp4, kernels


def silu_mul_quant_fp8_static(x: Tensor, scale: Tensor, out_dtype: torch.dtype,
                              up: Tensor | None = None, divide: bool = False) -> Tensor:
    return contiguous(act_quant_ref.silu_mul_quant_fp8_static(x, scale, out_dtype, up,
                                                              divide=divide))


def _static_cuda(c: Call) -> Tensor:
    if dispatch.use_triton(STATIC, c.x, c.out_dtype):
        return kernels("act_quant").silu_mul_quant_fp8_static(**c)
    return silu_mul_quant_fp8_static(**c)


def _static_fake(c: Call) -> Tensor:
    check_fp8(c.x, c.out_dtype)
    return empty(c.x, silu_mul_fake(c.x, c.up).shape, c.out_dtype)


STATIC = Kernel(silu_mul_quant_fp8_static, _static_fake, _static_cuda)


def silu_mul_quant_fp8_group(x: Tensor, group_size: int, col_major: bool, ue8m0: bool,
                             out_dtype: torch.dtype, up: Tensor | None = None,
                             reciprocal: bool = False) -> tuple[Tensor, Tensor]:
    q, s = act_quant_ref.silu_mul_quant_fp8_group(x, group_size, col_major, ue8m0, out_dtype,
                                                  up, reciprocal)
    return contiguous(q), s


def _group_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if dispatch.use_triton(GROUP, c.x, c.out_dtype) and c.group_size & (c.group_size - 1) == 0:
        return kernels("act_quant").silu_mul_quant_fp8_group(**c)
    return silu_mul_quant_fp8_group(**c)


def _group_fake(c: Call) -> tuple[Tensor, Tensor]:
    check_fp8(c.x, c.out_dtype)
    y = silu_mul_fake(c.x, c.up)
    quant_ref.check_group_size(y.shape[-1], c.group_size)
    return (empty(c.x, y.shape, c.out_dtype),
            quant_ref.empty_group_scales(y, c.group_size, c.col_major))


GROUP = Kernel(silu_mul_quant_fp8_group, _group_fake, _group_cuda)


def silu_mul_quant_nvfp4(x: Tensor, global_scale: Tensor,
                         up: Tensor | None = None) -> tuple[Tensor, Tensor]:
    return act_quant_ref.silu_mul_quant_nvfp4(x, global_scale, up)


def _nvfp4_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if dispatch.use_triton(NVFP4, c.x):
        return kernels("nvfp4").silu_mul_quant_nvfp4(**c)
    return silu_mul_quant_nvfp4(**c)


def _nvfp4_fake(c: Call) -> tuple[Tensor, Tensor]:
    return fake_nvfp4(c.x, silu_mul_fake(c.x, c.up).shape[-1])


NVFP4 = Kernel(silu_mul_quant_nvfp4, _nvfp4_fake, _nvfp4_cuda)

KERNELS = (STATIC, GROUP, NVFP4)


def _fp8_kernel(op: Operation) -> Kernel:
    assert isinstance(op, fused.SiluMulQuantOp)
    return STATIC if op.scheme.is_static else GROUP


def _fp8_values(op: Operation) -> dict[str, object]:
    assert isinstance(op, fused.SiluMulQuantOp)
    return {**scheme_values(op.scheme), "out_dtype": op.q.type.dtype}  # type: ignore[attr-defined]


LOWERINGS = {
    fused.SiluMulQuantOp.name: Lowering(_fp8_kernel, _fp8_values),
    fused.SiluMulQuantNvfp4Op.name: Lowering(NVFP4),
}
