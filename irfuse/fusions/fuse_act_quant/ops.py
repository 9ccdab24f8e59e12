"""The kernels of SiLU·Mul -> quant: `silu_mul_quant_fp8_static`, `silu_mul_quant_fp8_group`,
`silu_mul_quant_nvfp4`, and how `fused.silu_mul_quant` / `fused.silu_mul_quant_nvfp4` lower to
them. They take `x = [gate | up]` [..., 2d], or gate `x` and `up` [..., d] apart (the optional
last `up`); the static one takes `divide` like the norm kernels.

GeGLU (the fused op's `activation` gelu_tanh or gelu) lowers to the `gelu_mul_*` kernels: the same
references and Triton launchers with the gate's activation as a parameter (a constexpr branch in
the Triton kernel), declared apart so that each has its own measured choice
(`irfuse/fusions/choices/`: Triton on sm90, measured; unmeasured GPUs leave them to Inductor).
"""

from __future__ import annotations

from collections.abc import Callable

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


# --- GeGLU: the kernels above with `activation` gelu_tanh (Gemma's MLP) or gelu -----------------


def _gelu(activation: str) -> str:
    if activation not in ("gelu_tanh", "gelu"):
        raise ValueError(f"irfuse: a GeGLU kernel takes activation gelu_tanh or gelu, "
                         f"not {activation!r}")
    return activation


def gelu_mul_quant_fp8_static(x: Tensor, scale: Tensor, out_dtype: torch.dtype,
                              up: Tensor | None = None, divide: bool = False,
                              activation: str = "gelu") -> Tensor:
    return contiguous(act_quant_ref.silu_mul_quant_fp8_static(
        x, scale, out_dtype, up, divide=divide, activation=_gelu(activation)))


def _gelu_static_cuda(c: Call) -> Tensor:
    if dispatch.use_triton(GELU_STATIC, c.x, c.out_dtype):
        return kernels("act_quant").silu_mul_quant_fp8_static(**c)
    return gelu_mul_quant_fp8_static(**c)


def gelu_mul_quant_fp8_group(x: Tensor, group_size: int, col_major: bool, ue8m0: bool,
                             out_dtype: torch.dtype, up: Tensor | None = None,
                             reciprocal: bool = False,
                             activation: str = "gelu") -> tuple[Tensor, Tensor]:
    q, s = act_quant_ref.silu_mul_quant_fp8_group(x, group_size, col_major, ue8m0, out_dtype,
                                                  up, reciprocal, _gelu(activation))
    return contiguous(q), s


def _gelu_group_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if dispatch.use_triton(GELU_GROUP, c.x, c.out_dtype) and c.group_size & (c.group_size - 1) == 0:
        return kernels("act_quant").silu_mul_quant_fp8_group(**c)
    return gelu_mul_quant_fp8_group(**c)


def gelu_mul_quant_nvfp4(x: Tensor, global_scale: Tensor, up: Tensor | None = None,
                         activation: str = "gelu") -> tuple[Tensor, Tensor]:
    return act_quant_ref.silu_mul_quant_nvfp4(x, global_scale, up, _gelu(activation))


def _gelu_nvfp4_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if dispatch.use_triton(GELU_NVFP4, c.x):
        return kernels("nvfp4").silu_mul_quant_nvfp4(**c)
    return gelu_mul_quant_nvfp4(**c)


def _examples(**fixed: object) -> Callable[[tuple[int, ...]], list[dict]]:
    """A GeGLU kernel's example calls for an x of `shape` [..., h]: `[gate | up]` [..., 2h] in
    bf16, in each activation, with the arguments `fixed`."""
    def calls(shape: tuple[int, ...]) -> list[dict]:
        g = torch.Generator().manual_seed(3)
        x = torch.randn(*shape[:-1], 2 * shape[-1], generator=g).to(torch.bfloat16)
        return [{"x": x, **fixed, "activation": a} for a in ("gelu_tanh", "gelu")]
    return calls


FP8 = torch.float8_e4m3fn
GELU_STATIC = Kernel(gelu_mul_quant_fp8_static, _static_fake, _gelu_static_cuda,
                     examples=_examples(scale=torch.tensor([0.03]), out_dtype=FP8))
GELU_GROUP = Kernel(gelu_mul_quant_fp8_group, _group_fake, _gelu_group_cuda,
                    examples=_examples(group_size=64, col_major=False, ue8m0=False,
                                       out_dtype=FP8))
GELU_NVFP4 = Kernel(gelu_mul_quant_nvfp4, _nvfp4_fake, _gelu_nvfp4_cuda,
                    examples=_examples(global_scale=torch.tensor([40.0])))

KERNELS = (STATIC, GROUP, NVFP4, GELU_STATIC, GELU_GROUP, GELU_NVFP4)


def _gelu_op(op: Operation) -> bool:
    return op.activation.data != "silu"  # type: ignore[attr-defined]


def _fp8_kernel(op: Operation) -> Kernel:
    assert isinstance(op, fused.SiluMulQuantOp)
    if _gelu_op(op):
        return GELU_STATIC if op.scheme.is_static else GELU_GROUP
    return STATIC if op.scheme.is_static else GROUP


def _nvfp4_kernel(op: Operation) -> Kernel:
    return GELU_NVFP4 if _gelu_op(op) else NVFP4


def _fp8_values(op: Operation) -> dict[str, object]:
    assert isinstance(op, fused.SiluMulQuantOp)
    return {**scheme_values(op.scheme), "out_dtype": op.q.type.dtype}  # type: ignore[attr-defined]


LOWERINGS = {
    fused.SiluMulQuantOp.name: Lowering(_fp8_kernel, _fp8_values),
    fused.SiluMulQuantNvfp4Op.name: Lowering(_nvfp4_kernel),
}
