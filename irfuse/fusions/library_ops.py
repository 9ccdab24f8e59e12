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

from irfuse.fusions.declare import Kernel
from irfuse.kernels import act_quant_ref, dispatch, norm_quant_ref, quant_ref
from irfuse.kernels.dispatch import FP8, check_fp8, contiguous, empty, fake_nvfp4, kernels


def _rms_norm_ref(x, weight, eps, weight_offset=0.0):
    return contiguous(norm_quant_ref.rms_norm(x, weight, eps, weight_offset)[0])


def _rms_norm_cuda(x, weight, eps, weight_offset=0.0):
    if dispatch.use_triton(RMS_NORM, x):
        return kernels("norm_quant").rms_norm(x, weight, eps, weight_offset)[0]
    return _rms_norm_ref(x, weight, eps, weight_offset)


def _rms_norm_fake(x, weight, eps, weight_offset=0.0):
    norm_quant_ref.check_norm_args(x, weight, None)
    return empty(x, x.shape, x.dtype)


RMS_NORM = Kernel(
    "rms_norm", "(Tensor x, Tensor weight, float eps, float weight_offset=0.0) -> Tensor",
    _rms_norm_ref, _rms_norm_cuda, _rms_norm_fake, single_tensor=True)


def _add_rms_norm_ref(x, residual, weight, eps, weight_offset=0.0):
    y, r = norm_quant_ref.rms_norm(x, weight, eps, weight_offset, residual)
    return contiguous(y), contiguous(r)


def _add_rms_norm_cuda(x, residual, weight, eps, weight_offset=0.0):
    if dispatch.use_triton(ADD_RMS_NORM, x):
        return kernels("norm_quant").rms_norm(x, weight, eps, weight_offset, residual)
    return _add_rms_norm_ref(x, residual, weight, eps, weight_offset)


def _add_rms_norm_fake(x, residual, weight, eps, weight_offset=0.0):
    norm_quant_ref.check_norm_args(x, weight, residual)
    return empty(x, x.shape, x.dtype), empty(x, x.shape, x.dtype)


ADD_RMS_NORM = Kernel(
    "add_rms_norm", "(Tensor x, Tensor residual, Tensor weight, float eps, "
    "float weight_offset=0.0) -> (Tensor, Tensor)",
    _add_rms_norm_ref, _add_rms_norm_cuda, _add_rms_norm_fake)


def _silu_mul_ref(x, up=None):
    return contiguous(act_quant_ref.silu_mul(x, up))


def _silu_mul_cuda(x, up=None):
    if dispatch.use_triton(SILU_MUL, x):
        return kernels("act_quant").silu_mul(x, up)
    return _silu_mul_ref(x, up)


def silu_mul_fake(x, up=None):
    """SiLU·Mul's output: [..., d] for x = [gate | up] [..., 2d], or gate and up [..., d]."""
    width = act_quant_ref.silu_mul_width(x, up)
    return empty(x, (*x.shape[:-1], width), x.dtype)


SILU_MUL = Kernel("silu_mul", "(Tensor x, Tensor? up=None) -> Tensor",
                  _silu_mul_ref, _silu_mul_cuda, silu_mul_fake, single_tensor=True)


def _quant_fp8_static_ref(x, scale, out_dtype=FP8):
    return contiguous(quant_ref.quant_fp8_static(x, scale, out_dtype))


def _quant_fp8_static_cuda(x, scale, out_dtype=FP8):
    if dispatch.use_triton(QUANT_FP8_STATIC, x, out_dtype):
        return kernels("act_quant").quant_fp8_static(x, scale, out_dtype)
    return _quant_fp8_static_ref(x, scale, out_dtype)


def _quant_fp8_static_fake(x, scale, out_dtype=FP8):
    check_fp8(x, out_dtype)
    return empty(x, x.shape, out_dtype)


QUANT_FP8_STATIC = Kernel(
    "quant_fp8_static", "(Tensor x, Tensor scale, ScalarType out_dtype=float8_e4m3fn) -> Tensor",
    _quant_fp8_static_ref, _quant_fp8_static_cuda, _quant_fp8_static_fake, single_tensor=True)


def _quant_fp8_per_token_ref(x, scale_ub=None, out_dtype=FP8):
    q, s = quant_ref.quant_fp8_per_token(x, scale_ub, out_dtype)
    return contiguous(q), contiguous(s)


def _quant_fp8_per_token_cuda(x, scale_ub=None, out_dtype=FP8):
    if dispatch.use_triton(QUANT_FP8_PER_TOKEN, x, out_dtype):
        return kernels("norm_quant").quant_fp8_per_token(x, scale_ub, out_dtype)
    return _quant_fp8_per_token_ref(x, scale_ub, out_dtype)


def _quant_fp8_per_token_fake(x, scale_ub=None, out_dtype=FP8):
    check_fp8(x, out_dtype)
    return empty(x, x.shape, out_dtype), empty(x, (*x.shape[:-1], 1), torch.float32)


QUANT_FP8_PER_TOKEN = Kernel(
    "quant_fp8_per_token", "(Tensor x, Tensor? scale_ub=None, "
    "ScalarType out_dtype=float8_e4m3fn) -> (Tensor, Tensor)",
    _quant_fp8_per_token_ref, _quant_fp8_per_token_cuda, _quant_fp8_per_token_fake)


def _quant_fp8_per_tensor_ref(x, out_dtype=FP8):
    q, s = quant_ref.quant_fp8_per_tensor(x, out_dtype)
    return contiguous(q), contiguous(s)


def _quant_fp8_per_tensor_cuda(x, out_dtype=FP8):
    if dispatch.use_triton(QUANT_FP8_PER_TENSOR, x, out_dtype):
        return kernels("act_quant").quant_fp8_per_tensor(x, out_dtype)
    return _quant_fp8_per_tensor_ref(x, out_dtype)


def _quant_fp8_per_tensor_fake(x, out_dtype=FP8):
    check_fp8(x, out_dtype)
    return empty(x, x.shape, out_dtype), empty(x, (1,), torch.float32)


QUANT_FP8_PER_TENSOR = Kernel(
    "quant_fp8_per_tensor", "(Tensor x, ScalarType out_dtype=float8_e4m3fn) -> (Tensor, Tensor)",
    _quant_fp8_per_tensor_ref, _quant_fp8_per_tensor_cuda, _quant_fp8_per_tensor_fake)


def _quant_fp8_group_ref(x, group_size, col_major=False, ue8m0=False, out_dtype=FP8):
    q, s = quant_ref.quant_fp8_group(x, group_size, col_major, ue8m0, out_dtype)
    return contiguous(q), s


def _quant_fp8_group_cuda(x, group_size, col_major=False, ue8m0=False, out_dtype=FP8):
    if dispatch.use_triton(QUANT_FP8_GROUP, x, out_dtype) and group_size & (group_size - 1) == 0:
        return kernels("act_quant").quant_fp8_group(x, group_size, col_major, ue8m0, out_dtype)
    return _quant_fp8_group_ref(x, group_size, col_major, ue8m0, out_dtype)


def _quant_fp8_group_fake(x, group_size, col_major=False, ue8m0=False, out_dtype=FP8):
    check_fp8(x, out_dtype)
    quant_ref.check_group_size(x.shape[-1], group_size)
    return empty(x, x.shape, out_dtype), quant_ref.empty_group_scales(x, group_size, col_major)


QUANT_FP8_GROUP = Kernel(
    "quant_fp8_group", "(Tensor x, int group_size, bool col_major=False, bool ue8m0=False, "
    "ScalarType out_dtype=float8_e4m3fn) -> (Tensor, Tensor)",
    _quant_fp8_group_ref, _quant_fp8_group_cuda, _quant_fp8_group_fake)


def _quant_nvfp4_ref(x, global_scale):
    return quant_ref.quant_nvfp4(x, global_scale)


def _quant_nvfp4_cuda(x, global_scale):
    if dispatch.use_triton(QUANT_NVFP4, x):
        return kernels("nvfp4").quant_nvfp4(x, global_scale)
    return _quant_nvfp4_ref(x, global_scale)


def _quant_nvfp4_fake(x, global_scale):
    quant_ref.check_model_dtype(x)
    return fake_nvfp4(x, x.shape[-1])


QUANT_NVFP4 = Kernel("quant_nvfp4", "(Tensor x, Tensor global_scale) -> (Tensor, Tensor)",
                     _quant_nvfp4_ref, _quant_nvfp4_cuda, _quant_nvfp4_fake)



# NVFP4 as float values and float scales (vLLM's emulation keeps them so): exact conversions
# to and from `quant.nvfp4`'s packed codes and swizzled fp8 scales, around the raised op.


def _nvfp4_pack_ref(values, scales):
    rows, n = values.shape
    codes = quant_ref.e2m1_encode(values.float())
    packed = quant_ref.pack_e2m1(codes)
    swizzled = quant_ref.swizzle_block_scales(scales.float().reshape(rows, n // 16))
    return packed, swizzled.to(quant_ref.NVFP4_SCALE_DTYPE)


def _nvfp4_pack_fake(values, scales):
    return fake_nvfp4(values, values.shape[-1])


def _nvfp4_values(shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample e2m1 values and fp8-exact block scales of `shape`'s rows and width."""
    rows, n = math.prod(shape[:-1]), shape[-1]
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 16, (rows, n), generator=g, dtype=torch.uint8)
    scales = (torch.rand(rows, n // 16, generator=g) * 400).to(quant_ref.NVFP4_SCALE_DTYPE)
    return quant_ref.e2m1_decode(codes), scales.float()


NVFP4_PACK = Kernel(
    "nvfp4_pack", "(Tensor values, Tensor scales) -> (Tensor, Tensor)",
    _nvfp4_pack_ref, _nvfp4_pack_ref, _nvfp4_pack_fake,
    examples=lambda shape: [_nvfp4_values(shape)])
"""e2m1 values (f32 [M, N]) and their block scales (f32 holding fp8 values, [M, N/16] or
[M, N/16, 1]) -> NVFP4's packed codes and swizzled fp8 scales."""


def _nvfp4_unpack_ref(packed, block_scale, scale_rank=2):
    if block_scale.dtype == torch.uint8:  # the scales' bytes
        block_scale = block_scale.view(quant_ref.NVFP4_SCALE_DTYPE)
    rows, half = packed.shape
    values = quant_ref.e2m1_decode(quant_ref.unpack_e2m1(packed))
    scales = quant_ref.unswizzle_block_scales(block_scale, rows, half * 2 // 16).float()
    return values, scales.reshape(rows, half * 2 // 16, *([1] * (scale_rank - 2)))


def _nvfp4_unpack_fake(packed, block_scale, scale_rank=2):
    rows, half = packed.shape
    return (empty(packed, (rows, half * 2), torch.float32),
            empty(packed, (rows, half * 2 // 16, *([1] * (scale_rank - 2))), torch.float32))


NVFP4_UNPACK = Kernel(
    "nvfp4_unpack", "(Tensor packed, Tensor block_scale, int scale_rank=2) -> (Tensor, Tensor)",
    _nvfp4_unpack_ref, _nvfp4_unpack_ref, _nvfp4_unpack_fake,
    examples=lambda shape: [_unpack_example(shape, rank) for rank in (2, 3)])
"""The inverse of `nvfp4_pack`: f32 values [M, N] and f32 block scales of rank `scale_rank`.
The swizzled scales may come as fp8 or as their bytes (uint8: the examples, since opcheck's
schema check cannot compute on fp8 inputs)."""


def _unpack_example(shape: tuple[int, ...], rank: int) -> tuple:
    packed, swizzled = _nvfp4_pack_ref(*_nvfp4_values(shape))
    return packed, swizzled.view(torch.uint8), rank

LIBRARY_OPS: tuple[Kernel, ...] = (
    RMS_NORM, ADD_RMS_NORM, SILU_MUL, QUANT_FP8_STATIC, QUANT_FP8_PER_TOKEN,
    QUANT_FP8_PER_TENSOR, QUANT_FP8_GROUP, QUANT_NVFP4, NVFP4_PACK, NVFP4_UNPACK,
)
