"""The unfused `irfuse::` library ops: RMSNorm, add + RMSNorm, SiLU·Mul and the quants.

Models call them as custom ops (the "custom ops on" spellings the raising passes also match);
each has its torch reference on the CPU and irfuse's Triton kernel on CUDA. `x` is [..., H],
leading dims flattened to rows; `weight_offset != 0` is Gemma's RMSNorm form; `add_rms_norm`
normalizes the float32 sum; `silu_mul` takes `[gate | up]` or gate and `up` apart; the static
quant multiplies by `1 / s`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from irfuse.fusions.kernel_decl import Call, Kernel
from irfuse.kernels import act_quant_ref, dispatch, norm_quant_ref, quant_ref
from irfuse.kernels.dispatch import FP8, check_fp8, contiguous, empty, fake_nvfp4, kernels


def rms_norm(x: Tensor, weight: Tensor, eps: float, weight_offset: float = 0.0) -> Tensor:
    return contiguous(norm_quant_ref.rms_norm(x, weight, eps, weight_offset)[0])


def _rms_norm_cuda(c: Call) -> Tensor:
    if dispatch.use_triton(RMS_NORM, c.x):
        return kernels("norm_quant").rms_norm(**c)[0]
    return rms_norm(**c)


def _rms_norm_fake(c: Call) -> Tensor:
    norm_quant_ref.check_norm_args(c.x, c.weight, None)
    return empty(c.x, c.x.shape, c.x.dtype)


RMS_NORM = Kernel(rms_norm, _rms_norm_fake, _rms_norm_cuda)


def add_rms_norm(x: Tensor, residual: Tensor, weight: Tensor, eps: float,
                 weight_offset: float = 0.0) -> tuple[Tensor, Tensor]:
    y, r = norm_quant_ref.rms_norm(x, weight, eps, weight_offset, residual)
    return contiguous(y), contiguous(r)


def _add_rms_norm_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if dispatch.use_triton(ADD_RMS_NORM, c.x):
        return kernels("norm_quant").rms_norm(**c)
    return add_rms_norm(**c)


def _add_rms_norm_fake(c: Call) -> tuple[Tensor, Tensor]:
    norm_quant_ref.check_norm_args(c.x, c.weight, c.residual)
    return empty(c.x, c.x.shape, c.x.dtype), empty(c.x, c.x.shape, c.x.dtype)


ADD_RMS_NORM = Kernel(add_rms_norm, _add_rms_norm_fake, _add_rms_norm_cuda)


def silu_mul(x: Tensor, up: Tensor | None = None) -> Tensor:
    return contiguous(act_quant_ref.silu_mul(x, up))


def _silu_mul_cuda(c: Call) -> Tensor:
    if dispatch.use_triton(SILU_MUL, c.x):
        return kernels("act_quant").silu_mul(**c)
    return silu_mul(**c)


def silu_mul_fake(x: Tensor, up: Tensor | None = None) -> Tensor:
    """SiLU·Mul's output: [..., d] for x = [gate | up] [..., 2d], or gate and up [..., d]."""
    width = act_quant_ref.silu_mul_width(x, up)
    return empty(x, (*x.shape[:-1], width), x.dtype)


SILU_MUL = Kernel(silu_mul, lambda c: silu_mul_fake(**c), _silu_mul_cuda)


def quant_fp8_static(x: Tensor, scale: Tensor, out_dtype: torch.dtype = FP8) -> Tensor:
    return contiguous(quant_ref.quant_fp8_static(x, scale, out_dtype))


def _quant_fp8_static_cuda(c: Call) -> Tensor:
    if dispatch.use_triton(QUANT_FP8_STATIC, c.x, c.out_dtype):
        return kernels("act_quant").quant_fp8_static(**c)
    return quant_fp8_static(**c)


def _quant_fp8_static_fake(c: Call) -> Tensor:
    check_fp8(c.x, c.out_dtype)
    return empty(c.x, c.x.shape, c.out_dtype)


QUANT_FP8_STATIC = Kernel(quant_fp8_static, _quant_fp8_static_fake, _quant_fp8_static_cuda)


def quant_fp8_per_token(x: Tensor, scale_ub: Tensor | None = None,
                        out_dtype: torch.dtype = FP8) -> tuple[Tensor, Tensor]:
    q, s = quant_ref.quant_fp8_per_token(x, scale_ub, out_dtype)
    return contiguous(q), contiguous(s)


def _quant_fp8_per_token_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if dispatch.use_triton(QUANT_FP8_PER_TOKEN, c.x, c.out_dtype):
        return kernels("norm_quant").quant_fp8_per_token(**c)
    return quant_fp8_per_token(**c)


def _quant_fp8_per_token_fake(c: Call) -> tuple[Tensor, Tensor]:
    check_fp8(c.x, c.out_dtype)
    return empty(c.x, c.x.shape, c.out_dtype), empty(c.x, (*c.x.shape[:-1], 1), torch.float32)


QUANT_FP8_PER_TOKEN = Kernel(quant_fp8_per_token, _quant_fp8_per_token_fake,
                             _quant_fp8_per_token_cuda)


def quant_fp8_per_tensor(x: Tensor, out_dtype: torch.dtype = FP8) -> tuple[Tensor, Tensor]:
    q, s = quant_ref.quant_fp8_per_tensor(x, out_dtype)
    return contiguous(q), contiguous(s)


def _quant_fp8_per_tensor_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if dispatch.use_triton(QUANT_FP8_PER_TENSOR, c.x, c.out_dtype):
        return kernels("act_quant").quant_fp8_per_tensor(**c)
    return quant_fp8_per_tensor(**c)


def _quant_fp8_per_tensor_fake(c: Call) -> tuple[Tensor, Tensor]:
    check_fp8(c.x, c.out_dtype)
    return empty(c.x, c.x.shape, c.out_dtype), empty(c.x, (1,), torch.float32)


QUANT_FP8_PER_TENSOR = Kernel(quant_fp8_per_tensor, _quant_fp8_per_tensor_fake,
                              _quant_fp8_per_tensor_cuda)


def quant_fp8_group(x: Tensor, group_size: int, col_major: bool = False, ue8m0: bool = False,
                    out_dtype: torch.dtype = FP8) -> tuple[Tensor, Tensor]:
    q, s = quant_ref.quant_fp8_group(x, group_size, col_major, ue8m0, out_dtype)
    return contiguous(q), s


def _quant_fp8_group_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if (dispatch.use_triton(QUANT_FP8_GROUP, c.x, c.out_dtype)
            and c.group_size & (c.group_size - 1) == 0):
        return kernels("act_quant").quant_fp8_group(**c)
    return quant_fp8_group(**c)


def _quant_fp8_group_fake(c: Call) -> tuple[Tensor, Tensor]:
    check_fp8(c.x, c.out_dtype)
    quant_ref.check_group_size(c.x.shape[-1], c.group_size)
    return (empty(c.x, c.x.shape, c.out_dtype),
            quant_ref.empty_group_scales(c.x, c.group_size, c.col_major))


QUANT_FP8_GROUP = Kernel(quant_fp8_group, _quant_fp8_group_fake, _quant_fp8_group_cuda)


def quant_nvfp4(x: Tensor, global_scale: Tensor) -> tuple[Tensor, Tensor]:
    return quant_ref.quant_nvfp4(x, global_scale)


def _quant_nvfp4_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if dispatch.use_triton(QUANT_NVFP4, c.x):
        return kernels("nvfp4").quant_nvfp4(**c)
    return quant_nvfp4(**c)


def _quant_nvfp4_fake(c: Call) -> tuple[Tensor, Tensor]:
    quant_ref.check_model_dtype(c.x)
    return fake_nvfp4(c.x, c.x.shape[-1])


QUANT_NVFP4 = Kernel(quant_nvfp4, _quant_nvfp4_fake, _quant_nvfp4_cuda)


# NVFP4 as float values and float scales (vLLM's emulation keeps them so): exact conversions
# to and from `quant.nvfp4`'s packed codes and swizzled fp8 scales, around the raised op.


def nvfp4_pack(values: Tensor, scales: Tensor) -> tuple[Tensor, Tensor]:
    """e2m1 values (f32 [M, N]) and their block scales (f32 holding fp8 values, [M, N/16] or
    [M, N/16, 1]) -> NVFP4's packed codes and swizzled fp8 scales."""
    rows, n = values.shape
    codes = quant_ref.e2m1_encode(values.float())
    packed = quant_ref.pack_e2m1(codes)
    swizzled = quant_ref.swizzle_block_scales(scales.float().reshape(rows, n // 16))
    return packed, swizzled.to(quant_ref.NVFP4_SCALE_DTYPE)


def _nvfp4_values(shape: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Sample e2m1 values and fp8-exact block scales of `shape`'s rows and width."""
    rows, n = math.prod(shape[:-1]), shape[-1]
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 16, (rows, n), generator=g, dtype=torch.uint8)
    scales = (torch.rand(rows, n // 16, generator=g) * 400).to(quant_ref.NVFP4_SCALE_DTYPE)
    return quant_ref.e2m1_decode(codes), scales.float()


NVFP4_PACK = Kernel(nvfp4_pack, lambda c: fake_nvfp4(c.values, c.values.shape[-1]),
                    examples=lambda shape: [_nvfp4_values(shape)])


def nvfp4_unpack(packed: Tensor, block_scale: Tensor,
                 scale_rank: int = 2) -> tuple[Tensor, Tensor]:
    """The inverse of `nvfp4_pack`: f32 values [M, N] and f32 block scales of rank
    `scale_rank`. The swizzled scales may come as fp8 or as their bytes (uint8: the examples,
    since opcheck's schema check cannot compute on fp8 inputs)."""
    if block_scale.dtype == torch.uint8:  # the scales' bytes
        block_scale = block_scale.view(quant_ref.NVFP4_SCALE_DTYPE)
    rows, half = packed.shape
    values = quant_ref.e2m1_decode(quant_ref.unpack_e2m1(packed))
    scales = quant_ref.unswizzle_block_scales(block_scale, rows, half * 2 // 16).float()
    return values, scales.reshape(rows, half * 2 // 16, *([1] * (scale_rank - 2)))


def _nvfp4_unpack_fake(c: Call) -> tuple[Tensor, Tensor]:
    rows, half = c.packed.shape
    return (empty(c.packed, (rows, half * 2), torch.float32),
            empty(c.packed, (rows, half * 2 // 16, *([1] * (c.scale_rank - 2))), torch.float32))


def _unpack_example(shape: tuple[int, ...], rank: int) -> tuple:
    packed, swizzled = nvfp4_pack(*_nvfp4_values(shape))
    return packed, swizzled.view(torch.uint8), rank


NVFP4_UNPACK = Kernel(nvfp4_unpack, _nvfp4_unpack_fake,
                      examples=lambda shape: [_unpack_example(shape, rank) for rank in (2, 3)])


LIBRARY_OPS: tuple[Kernel, ...] = (
    RMS_NORM, ADD_RMS_NORM, SILU_MUL, QUANT_FP8_STATIC, QUANT_FP8_PER_TOKEN,
    QUANT_FP8_PER_TENSOR, QUANT_FP8_GROUP, QUANT_NVFP4, NVFP4_PACK, NVFP4_UNPACK,
)
