"""What the Triton kernels share: device checks, interpreter fixes, and small helpers.

Under `TRITON_INTERPRET=1` (set before triton is imported) the kernels run on CPU tensors. The
interpreter's float conversions are wrong in two ways that matter here (triton #8322 and kin):
float32 → bfloat16 truncates instead of rounding to nearest even, and float → fp8 drops the
carry when rounding overflows the mantissa (31.6 → 16). `patch_interpreter_casts` routes those
conversions through torch, whose casts round to nearest even, so the interpreted kernels compute
what the compiled ones compute on the GPU. Nothing here changes compiled (GPU) behaviour.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import torch
import triton
import triton.language as tl


def interpreting() -> bool:
    """True when triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.cache
def patch_interpreter_casts() -> None:
    """Make the interpreter's float conversions round to nearest even through torch (once)."""
    from triton.runtime import interpreter

    original = interpreter._convert_float
    to_torch = {
        tl.float32: torch.float32, tl.float16: torch.float16, tl.bfloat16: torch.bfloat16,
        tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2,
        tl.float8e4b8: torch.float8_e4m3fnuz, tl.float8e5b16: torch.float8_e5m2fnuz,
    }
    bits = {8: torch.uint8, 16: torch.uint16, 32: torch.uint32}
    nearest_even = (None, interpreter._ir.ROUNDING_MODE.RTNE)

    def convert(data, src_ty, dst_ty, rounding_mode):
        if src_ty in to_torch and dst_ty in to_torch and rounding_mode in nearest_even:
            src = torch.from_numpy(np.ascontiguousarray(data)).view(to_torch[src_ty])
            out = src.to(to_torch[dst_ty]).view(bits[dst_ty.primitive_bitwidth])
            return out.numpy().reshape(data.shape)
        return original(data, src_ty, dst_ty, rounding_mode)

    interpreter._convert_float = convert


def check_device(*tensors: torch.Tensor) -> None:
    """Raise unless the tensors can run a Triton kernel here (CUDA, or the interpreter)."""
    if interpreting():
        patch_interpreter_casts()
        return
    for t in tensors:
        if not t.is_cuda:
            raise RuntimeError("irfuse: the Triton kernels need CUDA tensors (or "
                               "TRITON_INTERPRET=1 set before triton is imported, for CPU "
                               "tensors); use the torch references on the CPU")


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (and >= 1)."""
    return 1 << max(0, (n - 1).bit_length())


def cache_hints(evict: bool) -> dict[str, str]:
    """The kernels' STREAM / KEEP constexprs for a config's `evict`: the eviction policies of the
    streamed inputs and of the reused weight, or no hints at all ("")."""
    return {"STREAM": "evict_first" if evict else "", "KEEP": "evict_last" if evict else ""}


def rows_2d(x: torch.Tensor) -> torch.Tensor:
    """`x` as [rows, last] with a unit last stride (a copy only when that needs one)."""
    x2 = x.reshape(-1, x.shape[-1])
    return x2 if x2.stride(-1) == 1 else x2.contiguous()


def triton_fp8_supported(dtype: torch.dtype, device: torch.device) -> bool:
    """Whether Triton can emit this FP8 dtype here (e4m3fnuz only on ROCm or interpreted)."""
    if dtype == torch.float8_e4m3fn:
        return True
    if dtype == torch.float8_e4m3fnuz:
        return interpreting() or (device.type == "cuda" and torch.version.hip is not None)
    return False
