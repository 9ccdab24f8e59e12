"""FlashInfer's static-FP8 RMSNorm kernels behind irfuse's launcher signature (optional package).

FlashInfer's `rmsnorm_quant` and `fused_add_rmsnorm_quant` are candidates for the fused ops
`rms_norm_quant_fp8_static` and `add_rms_norm_quant_fp8_static`; whether they run on a platform
is `kernel_choice`'s decision (by measurement). Importing this module imports torch only:
FlashInfer is imported at the first launch (about 2.5 s), and its kernels are compiled with nvcc
at the first launch on a machine (about a minute; `warm()` does it ahead of time).

FlashInfer keeps the normalized value in float32 up to the quant, where docs/numerics.md rounds
it to the model dtype, and uses approximate rsqrt and reciprocal: within vLLM's tolerance, not
irfuse's bits (`flashinfer_numerics` models it and says how far). A call it cannot compute with
irfuse's numerics is refused (`unsupported` names the reason) and the Triton kernel runs instead.
FlashInfer updates its residual in place, so the functional launcher copies it first
(`rms_norm_quant_fp8_static`; `residual_in_place=True` skips the copy).
"""

from __future__ import annotations

import functools
import importlib
import math
import sys
import time
from collections.abc import Sequence
from types import ModuleType

import torch

from irfuse import user_warnings
from irfuse.kernels import dispatch, norm_quant_ref, quant_ref

FP8 = torch.float8_e4m3fn
INPUT_DTYPES = (torch.bfloat16, torch.float16)
INDEX_LIMIT = 2**32  # FlashInfer's element offsets are uint32
_VEC_BYTES = 16  # FlashInfer's vector loads: 16 bytes, or gcd(8, H) elements when H is odd-sized
_DEFAULT_SMEM = 99 * 1024  # per-block shared memory assumed when the device is not a GPU

FALLBACKS: dict[str, str] = {}
"""op -> the last reason FlashInfer was selected for it but could not run (Triton ran)."""
_WARNED: set[tuple[str, str]] = set()


class FlashInferUnsupported(ValueError):
    """A call FlashInfer's kernels cannot compute with irfuse's numerics (see `unsupported`)."""


def _span(t: torch.Tensor) -> int:
    """One past the largest element offset of `t` (its storage extent in elements)."""
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))


def _max_residual_hidden(device: torch.device) -> int:
    """The widest row FlashInfer's residual kernel can hold: (H + 32) float32 in shared memory."""
    smem = _DEFAULT_SMEM
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        smem = getattr(props, "shared_memory_per_block_optin", smem)
    return smem // 4 - 32


def unsupported(x: torch.Tensor, weight: torch.Tensor, scales: Sequence[torch.Tensor],
                weight_offset: float, out_dtype: torch.dtype,
                residual: torch.Tensor | None = None, divide: bool = False,
                round_sum: bool = False, weight_f32: bool = False) -> str | None:
    """Why FlashInfer's kernels cannot compute this call as irfuse defines it, or None."""
    if len(scales) != 1:
        return (f"{len(scales)} output scales: FlashInfer's kernel writes one output (irfuse's "
                "kernel writes them all in one launch)")
    if scales[0].numel() != 1:
        return "a static scale with more than one element"
    if weight_offset != 0.0:
        return "Gemma's weight offset: FlashInfer's rmsnorm_quant has no weight bias"
    if weight_f32:
        return ("weight_f32 (the weight product in float32, rounded once to the model dtype): "
                "FlashInfer quantizes that product without the rounding")
    if out_dtype != FP8:
        return f"output dtype {out_dtype}: FlashInfer's kernel is wired here for float8_e4m3fn"
    if x.dtype not in INPUT_DTYPES:
        return f"input dtype {x.dtype}: FlashInfer's norm kernels take float16 or bfloat16"
    if divide:
        return ("divide (the model spells its quant y / s): FlashInfer multiplies by an "
                "approximate 1 / s")
    if residual is not None and round_sum:
        return ("round_sum (the norm reads the sum rounded to the model dtype): FlashInfer "
                "normalizes the float32 sum")
    hidden = x.shape[-1]
    if hidden == 0:
        return "an empty row"
    if residual is not None and hidden > _max_residual_hidden(x.device):
        return (f"hidden size {hidden}: FlashInfer's residual kernel keeps the float32 row in "
                f"shared memory (at most {_max_residual_hidden(x.device)} elements here)")
    if max(_span(t) for t in (x, residual) if t is not None) >= INDEX_LIMIT:
        return "more than 2**32 elements: FlashInfer indexes with 32-bit unsigned offsets"
    return None


def flashinfer_scale(scale: torch.Tensor) -> torch.Tensor:
    """irfuse's static scale as FlashInfer's `scale` argument.

    Both are the dequantization scale (the kernel multiplies by `1 / scale`), so the value is
    unchanged: only the form changes, to a float32 tensor of shape (1,) (a view when it already
    is float32 and contiguous, so nothing is allocated under a CUDA graph).
    """
    if scale.numel() != 1:
        raise FlashInferUnsupported("irfuse: a static FP8 scale must have one element")
    return scale.reshape(1).to(torch.float32).contiguous()


def flashinfer_numerics(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, eps: float,
                        residual: torch.Tensor | None = None,
                        ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A torch model of FlashInfer's arithmetic (exact rsqrt and reciprocal, where FlashInfer's
    are approximate): (q, residual_out). Used to measure how far it is from docs/numerics.md.

    What FlashInfer computes (flashinfer-python 0.6.18.post1: its CUDA JIT kernels in
    `csrc/norm.cu` / `include/flashinfer/norm.cuh`, which run when nvidia-cutlass-dsl is absent;
    its CuTe DSL kernels do the same arithmetic): with a residual, `h = x + r` in float32, `r`
    overwritten with `h.to(dtype)`, the norm reading the float32 `h` (irfuse's
    `round_sum=False`); then `q = fp8(clamp(h * rsqrt(mean(h²) + eps) * w * (1 / s), -448, 448))`
    all in float32, the weight read in the input's dtype (FlashInfer reinterprets the weight's
    memory as the input's dtype without checking, so the launcher casts it) and `s` the
    dequantization scale, as irfuse's. It is built with `-use_fast_math`: rsqrt and `1 / s` are
    approximate instructions. How that differs from docs/numerics.md:
    1. `y` is never rounded to the model dtype (the reference rounds `x * rstd`, multiplies by
       the weight and rounds again). This model against the reference (T 64, H 4096/8192,
       scales 0.015-0.04): bf16 2.1-2.4% of the codes one step off (mean dequantized error 2e-3;
       vLLM's tolerance 1e-2), fp16 0.3% (2.5e-4; tolerance 2e-3), none more than one step off.
       irfuse holds its own kernels to at most 1% of codes off, so in bf16 FlashInfer meets
       vLLM's tolerance, not irfuse's mismatch budget.
    2. The approximate `1 / s` moves a code only on a near-tie, far rarer than (1).
    3. A NaN becomes ±448 (the clamp is fminf/fmaxf), where torch keeps the NaN.
    """
    h = x.float()
    residual_out = None
    if residual is not None:
        h = h + residual.float()
        residual_out = h.to(x.dtype)
    rstd = torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps)
    inv = 1.0 / flashinfer_scale(scale)
    y = h * rstd * weight.to(x.dtype).float() * inv
    m = quant_ref.fp8_max(FP8)
    return y.clamp(-m, m).to(FP8), residual_out


@functools.cache
def _import() -> ModuleType | str:
    """flashinfer.norm, or why it does not import (once per process)."""
    try:  # FlashInfer is optional: loaded here, on the first call that selects it
        norm = importlib.import_module("flashinfer.norm")
    except Exception as e:  # noqa: BLE001 (any import failure means: not usable here)
        return f"flashinfer does not import: {type(e).__name__}: {e}"
    return norm


def fallback_reason(x: torch.Tensor, weight: torch.Tensor, scales: Sequence[torch.Tensor],
                    weight_offset: float, out_dtype: torch.dtype,
                    residual: torch.Tensor | None = None, divide: bool = False,
                    round_sum: bool = False, weight_f32: bool = False) -> str | None:
    """Why a call selected for FlashInfer must run elsewhere (absent, no GPU, does not import,
    or `unsupported`), or None when FlashInfer can run it."""
    available, why = dispatch.flashinfer_status()
    if not available:
        return why
    reason = unsupported(x, weight, scales, weight_offset, out_dtype, residual, divide,
                         round_sum, weight_f32)
    if reason is not None:
        return reason
    if x.device.type != "cuda":
        return f"FlashInfer needs CUDA tensors, got {x.device}"
    module = _import()
    return module if isinstance(module, str) else None


def note_fallback(op: str, reason: str) -> None:
    """Record (and warn once per op and reason) that FlashInfer was selected but Triton ran."""
    FALLBACKS[op] = reason
    if (op, reason) not in _WARNED:
        _WARNED.add((op, reason))
        user_warnings.warn(f"irfuse: kernel_choice selects FlashInfer for {op}, but {reason}; "
                           "the Triton kernel runs")


def _rows(t: torch.Tensor) -> torch.Tensor:
    """`t` as [rows, H] that FlashInfer's vector loads accept: unit last stride, start and row
    pitch aligned to a vector (a copy only when needed)."""
    t2 = t.reshape(-1, t.shape[-1])
    need = math.gcd(_VEC_BYTES // t2.element_size(), t2.shape[-1]) * t2.element_size()
    if (t2.stride(-1) != 1 or t2.data_ptr() % need
            or (t2.shape[0] > 1 and (t2.stride(0) * t2.element_size()) % need)):
        t2 = t2.clone(memory_format=torch.contiguous_format)
    return t2


def rms_norm_quant_fp8_static(x: torch.Tensor, weight: torch.Tensor,
                              scales: Sequence[torch.Tensor], eps: float, weight_offset: float,
                              out_dtype: torch.dtype, residual: torch.Tensor | None = None,
                              divide: bool = False, round_sum: bool = False,
                              weight_f32: bool = False, residual_in_place: bool = False,
                              enable_pdl: bool | None = None,
                              ) -> tuple[list[torch.Tensor], torch.Tensor | None]:
    """(Residual add +) RMSNorm → static FP8 through FlashInfer: ([q], residual_out), as
    `norm_quant.rms_norm_quant_fp8_static` returns them.

    Raises FlashInferUnsupported for a call `unsupported` refuses. The caller's tensors are not
    modified, except `residual` with `residual_in_place=True` (it then holds the new residual and
    is returned as residual_out: no copy). `enable_pdl` is FlashInfer's (None: on from sm90).

    FlashInfer writes the sum into its residual argument and irfuse's ops are functional, so
    without `residual_in_place` the residual is copied into the new residual output and
    FlashInfer updates that copy: one more read and write of T×H model-dtype elements (in bf16
    4 bytes an element on top of the fused kernel's 7: 1.57× the traffic) and one more launch.
    An irfuse op that declared the mutation would need functionalization to re-inplace it.
    """
    norm_quant_ref.check_norm_args(x, weight, residual)
    reason = unsupported(x, weight, scales, weight_offset, out_dtype, residual, divide,
                         round_sum, weight_f32)
    if reason is not None:
        raise FlashInferUnsupported(f"irfuse: FlashInfer cannot run this call: {reason}")
    module = _import()
    if isinstance(module, str):
        raise ImportError(f"irfuse: {module}")
    hidden = x.shape[-1]
    q = torch.empty(x.shape, dtype=out_dtype, device=x.device)
    scale = flashinfer_scale(scales[0]).to(x.device)
    w = _rows(weight.to(x.dtype).reshape(1, hidden)).reshape(hidden)
    if residual is None:
        if q.numel():
            module.rmsnorm_quant(q.view(-1, hidden), _rows(x), w, scale, eps, enable_pdl)
        return [q], None
    if residual_in_place:
        res_out = residual
        target = residual.view(-1, hidden)  # must be a view: FlashInfer writes through it
        if _rows(target).data_ptr() != target.data_ptr():
            raise FlashInferUnsupported("irfuse: residual_in_place needs a residual that "
                                        "FlashInfer can write directly (aligned, unit stride)")
    else:
        # FlashInfer overwrites its residual argument with the sum: give it the output's copy.
        res_out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        res_out.copy_(residual)
        target = res_out.view(-1, hidden)
    if q.numel():
        module.fused_add_rmsnorm_quant(q.view(-1, hidden), _rows(x), target, w, scale, eps,
                                       enable_pdl)
    return [q], res_out


def warm(device: str = "cuda") -> str:
    """Import FlashInfer and build (nvcc, on a fresh machine) and load its norm kernels by one
    small launch of each form; returns what happened, or why FlashInfer is not usable."""
    t0 = time.time()
    x = torch.randn(4, 4096, device=device, dtype=torch.bfloat16)
    w = torch.ones(4096, device=device, dtype=torch.bfloat16)
    s = torch.tensor([0.02], device=device)
    reason = fallback_reason(x, w, [s], 0.0, FP8, x)
    if reason is not None:
        return f"FlashInfer not usable: {reason}"
    rms_norm_quant_fp8_static(x, w, [s], 1e-6, 0.0, FP8)
    rms_norm_quant_fp8_static(x, w, [s], 1e-6, 0.0, FP8, torch.randn_like(x))
    torch.cuda.synchronize()
    version = sys.modules["flashinfer"].__version__  # imported by `_import`
    return (f"FlashInfer {version} norm kernels ({module_kind()}) ready in "
            f"{time.time() - t0:.0f}s")


def module_kind() -> str:
    """Which of FlashInfer's norm implementations its dispatch uses: 'cuda-jit' or 'cute-dsl'."""
    module = _import()
    if isinstance(module, str):
        return "none"
    return "cuda-jit" if getattr(module, "_USE_CUDA_NORM", True) else "cute-dsl"
