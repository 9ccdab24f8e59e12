"""What the Triton kernels share: device checks, interpreter fixes, and small helpers.

Under `TRITON_INTERPRET=1` (set before triton is imported) the kernels run on CPU tensors. The
interpreter's float conversions are wrong in two ways that matter here (triton #8322 and kin):
float32 → bfloat16 truncates instead of rounding to nearest even, and float → fp8 drops the
carry when rounding overflows the mantissa (31.6 → 16). `patch_interpreter_casts` routes those
conversions through torch, whose casts round to nearest even, so the interpreted kernels compute
what the compiled ones compute on the GPU. Nothing here changes compiled (GPU) behaviour.

`pdl_launch` / `await_previous_kernel`: programmatic dependent launch (PDL, sm90 and later),
which a config turns on with its `pdl` field.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
from triton.runtime import interpreter


def interpreting() -> bool:
    """True when triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.cache
def patch_interpreter_casts() -> None:
    """Make the interpreter's float conversions round to nearest even through torch (once)."""
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


@functools.cache
def _has_pdl(index: int) -> bool:
    return torch.version.hip is None and torch.cuda.get_device_capability(index) >= (9, 0)


def pdl_override() -> bool | None:
    """`IRFUSE_PDL`: 1 launches every kernel with PDL (where the device has it), 0 none; unset
    (None), each config's `pdl` decides."""
    env = os.environ.get("IRFUSE_PDL", "")
    if env not in ("", "0", "1"):
        raise ValueError(f"irfuse: IRFUSE_PDL must be 0 or 1, got {env!r}")
    return None if env == "" else env == "1"


def pdl_launch(requested: bool, device: torch.device) -> dict[str, bool]:
    """The launch arguments of programmatic dependent launch (PDL): the kernels' `PDL`
    constexpr and Triton's `launch_pdl`, on when the config asks for it (`requested`, unless
    `pdl_override()` says otherwise) and the device has it (NVIDIA sm90 and later; never in the
    interpreter).

    Launched so, a kernel's programs are scheduled while the kernel before it still drains: its
    launch latency and the programs' set-up overlap the previous kernel's tail instead of
    following it. `await_previous_kernel` then holds every program before its first access to
    global memory until the previous kernel has finished and its writes are visible, so inputs
    are never read early and no buffer the previous kernel reads is written early.
    """
    override = pdl_override()
    wanted = requested if override is None else override
    if not wanted or interpreting() or device.type != "cuda":
        return {"PDL": False}
    if not _has_pdl(device.index if device.index is not None else torch.cuda.current_device()):
        return {"PDL": False}
    return {"PDL": True, "launch_pdl": True}


@triton.jit
def await_previous_kernel(PDL: tl.constexpr):
    """With PDL (`pdl_launch`): wait until the previous kernel's writes are visible, then let
    the next kernel's programs be scheduled (it waits for this one's the same way). Called
    before a kernel's first load or store."""
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
