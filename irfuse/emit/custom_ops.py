"""The `irfuse::` torch.library ops: unfused library ops and the fused ops the passes emit.

All ops are functional (they return new tensors, never views of their inputs). Each has:
- a CPU implementation: the torch reference (`irfuse/emit/kernels/*_ref.py`);
- a CUDA implementation: what `kernel_choice.choose(op, platform)` selects, normally the Triton
  kernel (an FP8 dtype Triton cannot emit on that GPU, e.g. float8_e4m3fnuz on NVIDIA, runs the
  reference); where it selects `flashinfer` (the static FP8 norm ops only:
  `kernels/flashinfer_norm.py`) and FlashInfer cannot run a call (absent, or a case it refuses),
  the Triton kernel runs and the reason is warned once;
- a fake (meta) implementation with the real outputs' shapes, dtypes and strides, so Dynamo,
  aot_autograd, Inductor and CUDA graphs can trace and plan around the op. Outputs are
  contiguous, except per-group scales with `col_major=True` ([..., G] with the token index
  fastest; for 2D, strides (1, T)) and NVFP4 block scales ([round_up(T, 128), round_up(N/16, 4)]
  float8_e4m3fn in the swizzled 128×4 layout).

`x` is [..., H]; leading dims are flattened to rows. Inputs must be bf16, fp16 or fp32; an
unsupported dtype or a group size that does not divide H raises a ValueError (from the fake too, so
a compile fails early). `weight_offset != 0` selects Gemma's RMSNorm form (see `norm_quant_ref`).
The SiLU·Mul ops take `x = [gate | up]` [..., 2d], or, with the optional last argument `up`, the
gate `x` [..., d] and `up` [..., d] apart (same shape and dtype; any row strides): the output is
[..., d] either way. The static fused ops take a last argument `divide` (default False): scale by
`y / s` in float32 instead of `y * (1 / s)`, for models that spell their quant with a division
(`quant_ref.quant_fp8_static`); the library op `quant_fp8_static` always multiplies. The residual
fused ops (`add_rms_norm_quant_fp8_*`) take a last argument `round_sum` (default False): normalize
the sum rounded to the model dtype (the residual output) instead of the float32 sum, as models
that add in the model dtype compute it (`norm_quant_ref.rms_norm`); the library op `add_rms_norm`
normalizes the float32 sum. Importing this module imports torch only: triton and the kernels load
on the first CUDA call; FlashInfer only on the first call that selects it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import ModuleType

import torch
from torch.library import custom_op

from irfuse.emit import kernel_choice
from irfuse.emit.kernels import act_quant_ref, norm_quant_ref, quant_ref

FP8 = torch.float8_e4m3fn
NAMESPACE = "irfuse"

SCHEMAS: dict[str, str] = {
    # Library (unfused) ops.
    "rms_norm": "(Tensor x, Tensor weight, float eps, float weight_offset=0.0) -> Tensor",
    "add_rms_norm": "(Tensor x, Tensor residual, Tensor weight, float eps, "
                    "float weight_offset=0.0) -> (Tensor, Tensor)",
    "silu_mul": "(Tensor x, Tensor? up=None) -> Tensor",
    "quant_fp8_static": "(Tensor x, Tensor scale, ScalarType out_dtype=float8_e4m3fn) -> Tensor",
    "quant_fp8_per_token": "(Tensor x, Tensor? scale_ub=None, "
                           "ScalarType out_dtype=float8_e4m3fn) -> (Tensor, Tensor)",
    "quant_fp8_per_tensor": "(Tensor x, ScalarType out_dtype=float8_e4m3fn) -> (Tensor, Tensor)",
    "quant_fp8_group": "(Tensor x, int group_size, bool col_major=False, bool ue8m0=False, "
                       "ScalarType out_dtype=float8_e4m3fn) -> (Tensor, Tensor)",
    "quant_nvfp4": "(Tensor x, Tensor global_scale) -> (Tensor, Tensor)",
    # Fused ops.
    "rms_norm_quant_fp8_static": "(Tensor x, Tensor weight, Tensor[] scales, float eps, "
                                 "float weight_offset, ScalarType out_dtype, "
                                 "bool divide=False) -> Tensor[]",
    # Returns the quantized outputs, one per scale, then the new residual: one flat list,
    # because emit unpacks a kernel's results one level deep.
    "add_rms_norm_quant_fp8_static": "(Tensor x, Tensor residual, Tensor weight, "
                                     "Tensor[] scales, float eps, float weight_offset, "
                                     "ScalarType out_dtype, bool divide=False, "
                                     "bool round_sum=False) -> Tensor[]",
    "rms_norm_quant_fp8_per_token": "(Tensor x, Tensor weight, Tensor? scale_ub, float eps, "
                                    "float weight_offset, ScalarType out_dtype) "
                                    "-> (Tensor, Tensor)",
    "add_rms_norm_quant_fp8_per_token": "(Tensor x, Tensor residual, Tensor weight, "
                                        "Tensor? scale_ub, float eps, float weight_offset, "
                                        "ScalarType out_dtype, bool round_sum=False) "
                                        "-> (Tensor, Tensor, Tensor)",
    "rms_norm_quant_fp8_group": "(Tensor x, Tensor weight, float eps, float weight_offset, "
                                "int group_size, bool col_major, bool ue8m0, "
                                "ScalarType out_dtype) -> (Tensor, Tensor)",
    "add_rms_norm_quant_fp8_group": "(Tensor x, Tensor residual, Tensor weight, float eps, "
                                    "float weight_offset, int group_size, bool col_major, "
                                    "bool ue8m0, ScalarType out_dtype, bool round_sum=False) "
                                    "-> (Tensor, Tensor, Tensor)",
    "silu_mul_quant_fp8_static": "(Tensor x, Tensor scale, ScalarType out_dtype, "
                                 "Tensor? up=None, bool divide=False) -> Tensor",
    "silu_mul_quant_fp8_group": "(Tensor x, int group_size, bool col_major, bool ue8m0, "
                                "ScalarType out_dtype, Tensor? up=None) -> (Tensor, Tensor)",
    "silu_mul_quant_nvfp4": "(Tensor x, Tensor global_scale, Tensor? up=None) "
                            "-> (Tensor, Tensor)",
}


# ---------------------------------------------------------------------------------------------
# Dispatch helpers


def _kernels(name: str) -> ModuleType:
    return importlib.import_module(f"irfuse.emit.kernels.{name}")


_FLASHINFER_OPS = frozenset({"rms_norm_quant_fp8_static", "add_rms_norm_quant_fp8_static"})
"""Ops with a FlashInfer launcher (`kernels/flashinfer_norm.py`)."""


def _flashinfer(op: str, x: torch.Tensor, *args, **kwargs) -> ModuleType | None:
    """FlashInfer's launchers when `kernel_choice` selects FlashInfer for `op` at x's token count
    and FlashInfer can run this call (`flashinfer_norm.fallback_reason`'s arguments after x);
    else None (the reason, if FlashInfer was selected, is recorded and warned once)."""
    tokens = x.numel() // max(1, x.shape[-1])
    if kernel_choice.choose(op, kernel_choice.platform_of(x.device), tokens).impl != "flashinfer":
        return None
    fi = _kernels("flashinfer_norm")
    reason = fi.fallback_reason(x, *args, **kwargs)
    if reason is None:
        return fi
    fi.note_fallback(op, reason)
    return None


def _use_triton(op: str, x: torch.Tensor, out_dtype: torch.dtype | None = None) -> bool:
    """True when the CUDA implementation of `op` should run the Triton kernel for `x`."""
    choice = kernel_choice.choose(op, kernel_choice.platform_of(x.device))
    if choice.impl == "reference":
        return False
    if choice.impl == "flashinfer" and op not in _FLASHINFER_OPS:
        raise NotImplementedError(f"irfuse: kernel_choice selects FlashInfer for {op}, but "
                                  "irfuse has no FlashInfer adapter for it")
    # "triton"; "flashinfer" where FlashInfer could not run the call (`_flashinfer` said why);
    # or "inductor" (the pass should not have emitted the op; run the kernel anyway).
    if x.shape[-1] > 65536:
        return False
    if out_dtype is not None:
        from irfuse.emit.kernels.triton_support import triton_fp8_supported

        return triton_fp8_supported(out_dtype, x.device)
    return True


def _c(t: torch.Tensor) -> torch.Tensor:
    """Outputs are contiguous (the fakes promise it), whatever layout the input had."""
    return t.contiguous()


def _check_fp8(x: torch.Tensor, out_dtype: torch.dtype) -> None:
    quant_ref.check_model_dtype(x)
    quant_ref.check_fp8_dtype(out_dtype)




def _empty(x: torch.Tensor, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(tuple(shape), dtype=dtype, device=x.device)


def _fake_nvfp4(x: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    if width % quant_ref.NVFP4_BLOCK != 0:
        raise ValueError(f"irfuse: NVFP4 needs the last dimension ({width}) to be a multiple "
                         "of 16")
    rows = 1
    for d in x.shape[:-1]:
        rows = rows * d
    mp, kp = quant_ref.nvfp4_scale_shape(rows, width)
    return (_empty(x, (*x.shape[:-1], width // 2), torch.uint8),
            _empty(x, (mp, kp), quant_ref.NVFP4_SCALE_DTYPE))


def _define(name: str, reference: Callable, cuda: Callable, fake: Callable) -> object:
    op = custom_op(f"{NAMESPACE}::{name}", reference, mutates_args=(), device_types="cpu",
                   schema=SCHEMAS[name])
    op.register_kernel("cuda")(cuda)
    op.register_fake(fake)
    return op


# ---------------------------------------------------------------------------------------------
# Library ops


def _rms_norm_ref(x, weight, eps, weight_offset=0.0):
    return _c(norm_quant_ref.rms_norm(x, weight, eps, weight_offset)[0])


def _rms_norm_cuda(x, weight, eps, weight_offset=0.0):
    if _use_triton("rms_norm", x):
        return _kernels("norm_quant").rms_norm(x, weight, eps, weight_offset)[0]
    return _rms_norm_ref(x, weight, eps, weight_offset)


def _rms_norm_fake(x, weight, eps, weight_offset=0.0):
    norm_quant_ref.check_norm_args(x, weight, None)
    return _empty(x, x.shape, x.dtype)


def _add_rms_norm_ref(x, residual, weight, eps, weight_offset=0.0):
    y, r = norm_quant_ref.rms_norm(x, weight, eps, weight_offset, residual)
    return _c(y), _c(r)


def _add_rms_norm_cuda(x, residual, weight, eps, weight_offset=0.0):
    if _use_triton("add_rms_norm", x):
        return _kernels("norm_quant").rms_norm(x, weight, eps, weight_offset, residual)
    return _add_rms_norm_ref(x, residual, weight, eps, weight_offset)


def _add_rms_norm_fake(x, residual, weight, eps, weight_offset=0.0):
    norm_quant_ref.check_norm_args(x, weight, residual)
    return _empty(x, x.shape, x.dtype), _empty(x, x.shape, x.dtype)


def _silu_mul_ref(x, up=None):
    return _c(act_quant_ref.silu_mul(x, up))


def _silu_mul_cuda(x, up=None):
    if _use_triton("silu_mul", x):
        return _kernels("act_quant").silu_mul(x, up)
    return _silu_mul_ref(x, up)


def _silu_mul_fake(x, up=None):
    width = act_quant_ref.silu_mul_width(x, up)
    return _empty(x, (*x.shape[:-1], width), x.dtype)


def _quant_fp8_static_ref(x, scale, out_dtype=FP8):
    return _c(quant_ref.quant_fp8_static(x, scale, out_dtype))


def _quant_fp8_static_cuda(x, scale, out_dtype=FP8):
    if _use_triton("quant_fp8_static", x, out_dtype):
        return _kernels("act_quant").quant_fp8_static(x, scale, out_dtype)
    return _quant_fp8_static_ref(x, scale, out_dtype)


def _quant_fp8_static_fake(x, scale, out_dtype=FP8):
    _check_fp8(x, out_dtype)
    return _empty(x, x.shape, out_dtype)


def _quant_fp8_per_token_ref(x, scale_ub=None, out_dtype=FP8):
    q, s = quant_ref.quant_fp8_per_token(x, scale_ub, out_dtype)
    return _c(q), _c(s)


def _quant_fp8_per_token_cuda(x, scale_ub=None, out_dtype=FP8):
    if _use_triton("quant_fp8_per_token", x, out_dtype):
        return _kernels("norm_quant").quant_fp8_per_token(x, scale_ub, out_dtype)
    return _quant_fp8_per_token_ref(x, scale_ub, out_dtype)


def _quant_fp8_per_token_fake(x, scale_ub=None, out_dtype=FP8):
    _check_fp8(x, out_dtype)
    return _empty(x, x.shape, out_dtype), _empty(x, (*x.shape[:-1], 1), torch.float32)


def _quant_fp8_per_tensor_ref(x, out_dtype=FP8):
    q, s = quant_ref.quant_fp8_per_tensor(x, out_dtype)
    return _c(q), _c(s)


def _quant_fp8_per_tensor_cuda(x, out_dtype=FP8):
    if _use_triton("quant_fp8_per_tensor", x, out_dtype):
        return _kernels("act_quant").quant_fp8_per_tensor(x, out_dtype)
    return _quant_fp8_per_tensor_ref(x, out_dtype)


def _quant_fp8_per_tensor_fake(x, out_dtype=FP8):
    _check_fp8(x, out_dtype)
    return _empty(x, x.shape, out_dtype), _empty(x, (1,), torch.float32)


def _quant_fp8_group_ref(x, group_size, col_major=False, ue8m0=False, out_dtype=FP8):
    q, s = quant_ref.quant_fp8_group(x, group_size, col_major, ue8m0, out_dtype)
    return _c(q), s


def _quant_fp8_group_cuda(x, group_size, col_major=False, ue8m0=False, out_dtype=FP8):
    if _use_triton("quant_fp8_group", x, out_dtype) and group_size & (group_size - 1) == 0:
        return _kernels("act_quant").quant_fp8_group(x, group_size, col_major, ue8m0, out_dtype)
    return _quant_fp8_group_ref(x, group_size, col_major, ue8m0, out_dtype)


def _quant_fp8_group_fake(x, group_size, col_major=False, ue8m0=False, out_dtype=FP8):
    _check_fp8(x, out_dtype)
    quant_ref.check_group_size(x.shape[-1], group_size)
    return _empty(x, x.shape, out_dtype), quant_ref.empty_group_scales(x, group_size, col_major)


def _quant_nvfp4_ref(x, global_scale):
    return quant_ref.quant_nvfp4(x, global_scale)


def _quant_nvfp4_cuda(x, global_scale):
    if _use_triton("quant_nvfp4", x):
        return _kernels("nvfp4").quant_nvfp4(x, global_scale)
    return _quant_nvfp4_ref(x, global_scale)


def _quant_nvfp4_fake(x, global_scale):
    quant_ref.check_model_dtype(x)
    return _fake_nvfp4(x, x.shape[-1])


# ---------------------------------------------------------------------------------------------
# Fused norm → quant ops


def _rms_norm_quant_fp8_static_ref(x, weight, scales, eps, weight_offset, out_dtype,
                                   divide=False):
    qs, _ = norm_quant_ref.rms_norm_quant_fp8_static(x, weight, scales, eps, weight_offset,
                                                     out_dtype, divide=divide)
    return [_c(q) for q in qs]


def _rms_norm_quant_fp8_static_cuda(x, weight, scales, eps, weight_offset, out_dtype,
                                    divide=False):
    fi = _flashinfer("rms_norm_quant_fp8_static", x, weight, scales, weight_offset, out_dtype,
                     divide=divide)
    if fi is not None:
        return fi.rms_norm_quant_fp8_static(x, weight, scales, eps, weight_offset, out_dtype,
                                            divide=divide)[0]
    if _use_triton("rms_norm_quant_fp8_static", x, out_dtype):
        return _kernels("norm_quant").rms_norm_quant_fp8_static(
            x, weight, scales, eps, weight_offset, out_dtype, divide=divide)[0]
    return _rms_norm_quant_fp8_static_ref(x, weight, scales, eps, weight_offset, out_dtype,
                                          divide)


def _rms_norm_quant_fp8_static_fake(x, weight, scales, eps, weight_offset, out_dtype,
                                    divide=False):
    norm_quant_ref.check_norm_args(x, weight, None)
    _check_fp8(x, out_dtype)
    return [_empty(x, x.shape, out_dtype) for _ in scales]


def _add_rms_norm_quant_fp8_static_ref(x, residual, weight, scales, eps, weight_offset,
                                       out_dtype, divide=False, round_sum=False):
    qs, r = norm_quant_ref.rms_norm_quant_fp8_static(x, weight, scales, eps, weight_offset,
                                                     out_dtype, residual, divide=divide,
                                                     round_sum=round_sum)
    return [*(_c(q) for q in qs), _c(r)]


def _add_rms_norm_quant_fp8_static_cuda(x, residual, weight, scales, eps, weight_offset,
                                        out_dtype, divide=False, round_sum=False):
    fi = _flashinfer("add_rms_norm_quant_fp8_static", x, weight, scales, weight_offset,
                     out_dtype, residual, divide=divide, round_sum=round_sum)
    if fi is not None:
        qs, r = fi.rms_norm_quant_fp8_static(x, weight, scales, eps, weight_offset, out_dtype,
                                             residual, divide=divide, round_sum=round_sum)
        return [*qs, r]
    if _use_triton("add_rms_norm_quant_fp8_static", x, out_dtype):
        qs, r = _kernels("norm_quant").rms_norm_quant_fp8_static(
            x, weight, scales, eps, weight_offset, out_dtype, residual, divide=divide,
            round_sum=round_sum)
        return [*qs, r]
    return _add_rms_norm_quant_fp8_static_ref(x, residual, weight, scales, eps, weight_offset,
                                              out_dtype, divide, round_sum)


def _add_rms_norm_quant_fp8_static_fake(x, residual, weight, scales, eps, weight_offset,
                                        out_dtype, divide=False, round_sum=False):
    norm_quant_ref.check_norm_args(x, weight, residual)
    _check_fp8(x, out_dtype)
    return [*(_empty(x, x.shape, out_dtype) for _ in scales), _empty(x, x.shape, x.dtype)]


def _rms_norm_quant_fp8_per_token_ref(x, weight, scale_ub, eps, weight_offset, out_dtype):
    q, s, _ = norm_quant_ref.rms_norm_quant_fp8_per_token(x, weight, scale_ub, eps,
                                                          weight_offset, out_dtype)
    return _c(q), _c(s)


def _rms_norm_quant_fp8_per_token_cuda(x, weight, scale_ub, eps, weight_offset, out_dtype):
    if _use_triton("rms_norm_quant_fp8_per_token", x, out_dtype):
        return _kernels("norm_quant").rms_norm_quant_fp8_per_token(
            x, weight, scale_ub, eps, weight_offset, out_dtype)[:2]
    return _rms_norm_quant_fp8_per_token_ref(x, weight, scale_ub, eps, weight_offset, out_dtype)


def _rms_norm_quant_fp8_per_token_fake(x, weight, scale_ub, eps, weight_offset, out_dtype):
    norm_quant_ref.check_norm_args(x, weight, None)
    _check_fp8(x, out_dtype)
    return _empty(x, x.shape, out_dtype), _empty(x, (*x.shape[:-1], 1), torch.float32)


def _add_rms_norm_quant_fp8_per_token_ref(x, residual, weight, scale_ub, eps, weight_offset,
                                          out_dtype, round_sum=False):
    q, s, r = norm_quant_ref.rms_norm_quant_fp8_per_token(x, weight, scale_ub, eps,
                                                          weight_offset, out_dtype, residual,
                                                          round_sum=round_sum)
    return _c(q), _c(s), _c(r)


def _add_rms_norm_quant_fp8_per_token_cuda(x, residual, weight, scale_ub, eps, weight_offset,
                                           out_dtype, round_sum=False):
    if _use_triton("add_rms_norm_quant_fp8_per_token", x, out_dtype):
        return _kernels("norm_quant").rms_norm_quant_fp8_per_token(
            x, weight, scale_ub, eps, weight_offset, out_dtype, residual, round_sum=round_sum)
    return _add_rms_norm_quant_fp8_per_token_ref(x, residual, weight, scale_ub, eps,
                                                 weight_offset, out_dtype, round_sum)


def _add_rms_norm_quant_fp8_per_token_fake(x, residual, weight, scale_ub, eps, weight_offset,
                                           out_dtype, round_sum=False):
    norm_quant_ref.check_norm_args(x, weight, residual)
    _check_fp8(x, out_dtype)
    return (_empty(x, x.shape, out_dtype), _empty(x, (*x.shape[:-1], 1), torch.float32),
            _empty(x, x.shape, x.dtype))


def _rms_norm_quant_fp8_group_ref(x, weight, eps, weight_offset, group_size, col_major, ue8m0,
                                  out_dtype):
    q, s, _ = norm_quant_ref.rms_norm_quant_fp8_group(x, weight, eps, weight_offset,
                                                      group_size, col_major, ue8m0, out_dtype)
    return _c(q), s


def _rms_norm_quant_fp8_group_cuda(x, weight, eps, weight_offset, group_size, col_major, ue8m0,
                                   out_dtype):
    if (_use_triton("rms_norm_quant_fp8_group", x, out_dtype)
            and group_size & (group_size - 1) == 0):
        return _kernels("norm_quant").rms_norm_quant_fp8_group(
            x, weight, eps, weight_offset, group_size, col_major, ue8m0, out_dtype)[:2]
    return _rms_norm_quant_fp8_group_ref(x, weight, eps, weight_offset, group_size, col_major,
                                         ue8m0, out_dtype)


def _rms_norm_quant_fp8_group_fake(x, weight, eps, weight_offset, group_size, col_major, ue8m0,
                                   out_dtype):
    norm_quant_ref.check_norm_args(x, weight, None)
    _check_fp8(x, out_dtype)
    quant_ref.check_group_size(x.shape[-1], group_size)
    return _empty(x, x.shape, out_dtype), quant_ref.empty_group_scales(x, group_size, col_major)


def _add_rms_norm_quant_fp8_group_ref(x, residual, weight, eps, weight_offset, group_size,
                                      col_major, ue8m0, out_dtype, round_sum=False):
    q, s, r = norm_quant_ref.rms_norm_quant_fp8_group(x, weight, eps, weight_offset, group_size,
                                                      col_major, ue8m0, out_dtype, residual,
                                                      round_sum=round_sum)
    return _c(q), s, _c(r)


def _add_rms_norm_quant_fp8_group_cuda(x, residual, weight, eps, weight_offset, group_size,
                                       col_major, ue8m0, out_dtype, round_sum=False):
    if (_use_triton("add_rms_norm_quant_fp8_group", x, out_dtype)
            and group_size & (group_size - 1) == 0):
        return _kernels("norm_quant").rms_norm_quant_fp8_group(
            x, weight, eps, weight_offset, group_size, col_major, ue8m0, out_dtype, residual,
            round_sum=round_sum)
    return _add_rms_norm_quant_fp8_group_ref(x, residual, weight, eps, weight_offset, group_size,
                                             col_major, ue8m0, out_dtype, round_sum)


def _add_rms_norm_quant_fp8_group_fake(x, residual, weight, eps, weight_offset, group_size,
                                       col_major, ue8m0, out_dtype, round_sum=False):
    norm_quant_ref.check_norm_args(x, weight, residual)
    _check_fp8(x, out_dtype)
    quant_ref.check_group_size(x.shape[-1], group_size)
    return (_empty(x, x.shape, out_dtype), quant_ref.empty_group_scales(x, group_size, col_major),
            _empty(x, x.shape, x.dtype))


# ---------------------------------------------------------------------------------------------
# Fused SiLU·Mul → quant ops


def _silu_mul_quant_fp8_static_ref(x, scale, out_dtype, up=None, divide=False):
    return _c(act_quant_ref.silu_mul_quant_fp8_static(x, scale, out_dtype, up, divide=divide))


def _silu_mul_quant_fp8_static_cuda(x, scale, out_dtype, up=None, divide=False):
    if _use_triton("silu_mul_quant_fp8_static", x, out_dtype):
        return _kernels("act_quant").silu_mul_quant_fp8_static(x, scale, out_dtype, up,
                                                               divide=divide)
    return _silu_mul_quant_fp8_static_ref(x, scale, out_dtype, up, divide)


def _silu_mul_quant_fp8_static_fake(x, scale, out_dtype, up=None, divide=False):
    _check_fp8(x, out_dtype)
    return _empty(x, _silu_mul_fake(x, up).shape, out_dtype)


def _silu_mul_quant_fp8_group_ref(x, group_size, col_major, ue8m0, out_dtype, up=None):
    q, s = act_quant_ref.silu_mul_quant_fp8_group(x, group_size, col_major, ue8m0, out_dtype,
                                                  up)
    return _c(q), s


def _silu_mul_quant_fp8_group_cuda(x, group_size, col_major, ue8m0, out_dtype, up=None):
    if (_use_triton("silu_mul_quant_fp8_group", x, out_dtype)
            and group_size & (group_size - 1) == 0):
        return _kernels("act_quant").silu_mul_quant_fp8_group(x, group_size, col_major, ue8m0,
                                                              out_dtype, up)
    return _silu_mul_quant_fp8_group_ref(x, group_size, col_major, ue8m0, out_dtype, up)


def _silu_mul_quant_fp8_group_fake(x, group_size, col_major, ue8m0, out_dtype, up=None):
    _check_fp8(x, out_dtype)
    y = _silu_mul_fake(x, up)
    quant_ref.check_group_size(y.shape[-1], group_size)
    return _empty(x, y.shape, out_dtype), quant_ref.empty_group_scales(y, group_size, col_major)


def _silu_mul_quant_nvfp4_ref(x, global_scale, up=None):
    return act_quant_ref.silu_mul_quant_nvfp4(x, global_scale, up)


def _silu_mul_quant_nvfp4_cuda(x, global_scale, up=None):
    if _use_triton("silu_mul_quant_nvfp4", x):
        return _kernels("nvfp4").silu_mul_quant_nvfp4(x, global_scale, up)
    return _silu_mul_quant_nvfp4_ref(x, global_scale, up)


def _silu_mul_quant_nvfp4_fake(x, global_scale, up=None):
    y = _silu_mul_fake(x, up)
    return _fake_nvfp4(x, y.shape[-1])


# ---------------------------------------------------------------------------------------------
# Registration


def _register_all() -> dict[str, object]:
    impls = globals()
    ops = {}
    for name in SCHEMAS:
        ops[name] = _define(name, impls[f"_{name}_ref"], impls[f"_{name}_cuda"],
                            impls[f"_{name}_fake"])
    return ops


OPS = _register_all()
