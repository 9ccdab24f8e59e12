"""What the kernels' CUDA implementations share: the platform of a tensor, whether the Triton
kernel (or FlashInfer's) runs for a call, and the fakes' empty outputs.

Importing this module imports torch only: Triton and the kernel modules load on the first CUDA
call (`kernels(name)`), FlashInfer on the first call that selects it.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Protocol

import torch

from irfuse.kernels import quant_ref


class Kernel(Protocol):
    """What dispatch reads of an op's declaration (`irfuse.fusions.kernel_decl.Kernel`, a layer
    above): its name, whether it has a FlashInfer launcher, and its choice per platform."""

    name: str
    flashinfer: bool

    def choose(self, platform: str, num_tokens: int | None = None) -> Any: ...


FP8 = torch.float8_e4m3fn
MAX_TRITON_WIDTH = 65536
"""Rows wider than this run the reference (the kernels hold a row in registers)."""


def kernels(name: str) -> ModuleType:
    """`irfuse.kernels.<name>`, imported on first use (it imports Triton)."""
    return importlib.import_module(f"irfuse.kernels.{name}")


def platform_of(device: torch.device | str) -> str:
    """The platform string of a device: `cpu`, `cuda:sm90`, `rocm`, ..."""
    device = torch.device(device)
    if device.type != "cuda":
        return device.type
    return _cuda_platform(device.index if device.index is not None else
                          torch.cuda.current_device())


@functools.cache
def _cuda_platform(index: int) -> str:
    if torch.version.hip is not None:
        return "rocm"
    major, minor = torch.cuda.get_device_capability(index)
    return f"cuda:sm{major}{minor}"


def flashinfer_status() -> tuple[bool, str]:
    """Whether FlashInfer can be used here, and why not (without importing it)."""
    if importlib.util.find_spec("flashinfer") is None:
        return False, "flashinfer is not installed (optional extra irfuse[gpu])"
    if not torch.cuda.is_available():
        return False, "flashinfer is installed but there is no CUDA device"
    return True, "flashinfer is installed"


def rows(x: torch.Tensor) -> int:
    return x.numel() // max(1, x.shape[-1])


def flashinfer(kernel: Kernel, x: torch.Tensor, *args, **kwargs) -> ModuleType | None:
    """FlashInfer's launchers when `kernel`'s choice at x's token count is FlashInfer and
    FlashInfer can run this call (`flashinfer_norm.fallback_reason`'s arguments after x); else
    None (the reason, where FlashInfer was chosen, is warned once)."""
    if kernel.choose(platform_of(x.device), rows(x)).impl != "flashinfer":
        return None
    fi = kernels("flashinfer_norm")
    reason = fi.fallback_reason(x, *args, **kwargs)
    if reason is None:
        return fi
    fi.note_fallback(kernel.name, reason)
    return None


def use_triton(kernel: Kernel, x: torch.Tensor, out_dtype: torch.dtype | None = None) -> bool:
    """Whether the CUDA implementation of `kernel` runs its Triton kernel for `x`: not where its
    choice is the reference, a row is too wide, or Triton cannot emit `out_dtype` on this GPU
    (float8_e4m3fnuz on NVIDIA). `flashinfer` (where FlashInfer could not run the call) and
    `inductor` (the pass should not have emitted the op) run the Triton kernel."""
    impl = kernel.choose(platform_of(x.device)).impl
    if impl == "reference":
        return False
    if impl == "flashinfer" and not kernel.flashinfer:
        raise NotImplementedError(f"irfuse: the choice for {kernel.name} is FlashInfer, but "
                                  "irfuse has no FlashInfer adapter for it")
    if x.shape[-1] > MAX_TRITON_WIDTH:
        return False
    if out_dtype is not None:
        return kernels("triton_support").triton_fp8_supported(out_dtype, x.device)
    return True


def contiguous(t: torch.Tensor) -> torch.Tensor:
    """Outputs are contiguous (the fakes promise it), whatever layout the input had."""
    return t.contiguous()


def check_fp8(x: torch.Tensor, out_dtype: torch.dtype) -> None:
    quant_ref.check_model_dtype(x)
    quant_ref.check_fp8_dtype(out_dtype)


def empty(x: torch.Tensor, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(tuple(shape), dtype=dtype, device=x.device)


def fake_nvfp4(x: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4's outputs: packed codes [..., width/2] uint8 and the swizzled 128x4 block scales."""
    if width % quant_ref.NVFP4_BLOCK != 0:
        raise ValueError(f"irfuse: NVFP4 needs the last dimension ({width}) to be a multiple "
                         "of 16")
    n = 1
    for d in x.shape[:-1]:
        n = n * d
    mp, kp = quant_ref.nvfp4_scale_shape(n, width)
    return (empty(x, (*x.shape[:-1], width // 2), torch.uint8),
            empty(x, (mp, kp), quant_ref.NVFP4_SCALE_DTYPE))
