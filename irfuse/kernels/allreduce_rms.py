"""CUDA implementations of the fused all-reduce + (residual add +) RMSNorm (+ quant).

Two paths, chosen per call:
- FlashInfer's `flashinfer.comm.allreduce_fusion` on a `trtllm` workspace (never `mnnvl`, `auto`
  or multicast), for the plain norm, static FP8 and NVFP4 (`kARResidualRMSNorm`,
  `kARResidualRMSNormFP8Quant`, `kARResidualRMSNormFP4Quant`) where `flashinfer_reason` finds
  nothing against it (2, 4 or 8 ranks, the tokens within the size cap of `irfuse.thresholds`,
  bf16/fp16, NVFP4 only from sm100, ...). FlashInfer normalizes in float32 and rounds once:
  within the fused-kernel tolerance of the reference, not bit for bit.
- Otherwise: the all-reduce through NCCL or torch's symmetric memory (`reduce`), then irfuse's
  fused (add +) RMSNorm (+ quant) Triton kernel, or its reference where the caller says Triton
  does not run.

Every decision reads only shapes, dtypes and the installed FlashInfer, the same on every rank, so
the ranks take the same path (a collective and a workspace creation are made by all or none).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
from types import ModuleType

import torch

from irfuse import thresholds, user_warnings
from irfuse.kernels import allreduce_rms_ref as ref
from irfuse.kernels import quant_ref
from irfuse.platform import Platform

FI_WORLD_SIZES = thresholds.FI_ALLREDUCE_WORLD_SIZES
FI_DTYPES = (torch.bfloat16, torch.float16)
FLASHINFER_FALLBACKS: dict[str, str] = {}
"""Kernel name -> the last reason FlashInfer could not run it (warned once per reason)."""
_WARNED: set[tuple[str, str]] = set()
_WORKSPACES: dict[tuple[str, int, int, torch.dtype], object] = {}


@functools.cache
def flashinfer_comm() -> ModuleType | None:
    """`flashinfer.comm` when it imports and has the unified fusion API; else None."""
    if importlib.util.find_spec("flashinfer") is None:
        return None
    try:
        comm = importlib.import_module("flashinfer.comm")
    except Exception:  # noqa: BLE001 (a broken install or a missing CUDA toolkit: no FlashInfer)
        return None
    if not (hasattr(comm, "allreduce_fusion") and hasattr(comm,
                                                          "create_allreduce_fusion_workspace")):
        return None
    return comm


def capability(x: torch.Tensor) -> tuple[int, int] | None:
    """The compute capability of x's CUDA device; None off CUDA."""
    if x.device.type != "cuda":
        return None
    return torch.cuda.get_device_capability(x.device)


def max_tokens(x: torch.Tensor, world_size: int, hidden: int, itemsize: int) -> int | None:
    """The workspace's token capacity: FlashInfer's size cap for x's GPU and the world size, in
    tokens of `hidden` x `itemsize` bytes; None where there is no cap (no fused kernel)."""
    cc = capability(x)
    if cc is None:
        return None
    major, minor = cc
    platform = Platform.parse(f"cuda:sm{major}{minor}")
    mb = thresholds.fi_allreduce_max_size_mb(platform, world_size)
    return thresholds.fi_allreduce_max_tokens(mb, hidden, itemsize) if mb else None


def note_fallback(kernel: str, reason: str) -> None:
    FLASHINFER_FALLBACKS[kernel] = reason
    if (kernel, reason) not in _WARNED:
        _WARNED.add((kernel, reason))
        user_warnings.warn(f"irfuse: {kernel} does not use FlashInfer's fused all-reduce: "
                           f"{reason}; NCCL and the Triton kernel run")


NVFP4_BELOW_SM100 = ("FlashInfer's NVFP4 all-reduce fusion needs sm100+ (below, its FP4 "
                     "conversion is compiled out and writes zero codes)")
DIVIDED_FP8 = ("the quant divides by its scale (x / s); FlashInfer multiplies by 1 / s, which "
               "can round differently")


def flashinfer_reason(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor,
                      group: str, weight_offset: float, weight_f32: bool,
                      quant: str | None = None, divide: bool = False) -> str | None:
    """Why FlashInfer's fused all-reduce cannot run this call, or None when it can. `quant`:
    None, "fp8" (static, `divide` as the op's) or "nvfp4"."""
    comm = flashinfer_comm()
    if comm is None:
        return "flashinfer.comm (with allreduce_fusion) does not import"
    cc = capability(x)
    if cc is None:
        return "the input is not on a CUDA device"
    if quant == "nvfp4" and cc[0] < 10:
        return f"{NVFP4_BELOW_SM100}; this GPU is sm{cc[0]}{cc[1]}"
    if quant == "fp8" and divide:
        return DIVIDED_FP8
    if x.dtype not in FI_DTYPES or weight.dtype != x.dtype:
        return f"it takes bf16/fp16 inputs with a weight of that dtype ({x.dtype}, {weight.dtype})"
    if residual is not None and residual.dtype != x.dtype:
        return "the residual's dtype differs from the input's"
    if weight_f32 and weight_offset == 0.0:
        return "the norm multiplies the weight in float32 with no offset (no FlashInfer form)"
    if weight_offset not in (0.0, 1.0) or (weight_offset and not _takes(comm.allreduce_fusion,
                                                                         "weight_bias")):
        return f"weight offset {weight_offset} (FlashInfer takes 0 or, with weight_bias, 1)"
    hidden = x.shape[-1]
    if hidden % (16 // x.element_size()):
        return f"hidden {hidden} is not a multiple of a 16-byte vector"
    pg = ref.resolve_group(group)
    world = pg.size()
    if world not in FI_WORLD_SIZES:
        return f"the group has {world} ranks (FlashInfer's fusion: {FI_WORLD_SIZES})"
    if pg is not _world() and not _takes(comm.create_allreduce_fusion_workspace, "group"):
        return "this FlashInfer cannot create a workspace for a group other than WORLD"
    cap = max_tokens(x, world, hidden, x.element_size())
    tokens = x.numel() // hidden
    if cap is None or tokens > cap:
        return f"{tokens} tokens exceed the size cap ({cap} tokens)"
    return None


def _world() -> object:
    return torch.distributed.group.WORLD


def _takes(fn: object, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def workspace(comm: ModuleType, group: str, x: torch.Tensor) -> object:
    """The `trtllm` workspace of (group, max tokens, hidden, dtype), created at the first call
    that uses it: every rank makes the same call, so every rank creates it together."""
    pg = ref.resolve_group(group)
    hidden = x.shape[-1]
    cap = max_tokens(x, pg.size(), hidden, x.element_size())
    assert cap is not None
    key = (group, cap, hidden, x.dtype)
    ws = _WORKSPACES.get(key)
    if ws is None:
        kwargs: dict[str, object] = {}
        if _takes(comm.create_allreduce_fusion_workspace, "group"):
            coordinator = ref.vllm_coordinator(group)
            kwargs["group"] = getattr(coordinator, "cpu_group", None) or pg
        ws = comm.create_allreduce_fusion_workspace(
            backend="trtllm", world_size=pg.size(), rank=pg.rank(), max_token_num=cap,
            hidden_dim=hidden, dtype=x.dtype, **kwargs)
        _WORKSPACES[key] = ws
    return ws


def flashinfer_fused(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor,
                     group: str, eps: float, weight_offset: float, pattern: str,
                     quant_out: torch.Tensor | None = None,
                     scale_out: torch.Tensor | None = None,
                     scale_factor: torch.Tensor | None = None,
                     ) -> tuple[torch.Tensor | None, torch.Tensor]:
    """One `allreduce_fusion` call with the `AllReduceFusionPattern` named `pattern`: (norm_out
    or None where a quant is written, residual_out), both shaped like x.

    `scale_factor` as FlashInfer's kernel reads it (include/flashinfer/comm/
    trtllm_allreduce_fusion.cuh): static FP8 takes the dequantization scale s and computes
    `fp8(y * (1.f / s))` (docs/numerics.md's reciprocal spelling, saturating); NVFP4 takes the
    global scale gs and multiplies by it, so s and gs are passed as they are. Without a residual
    the residual input is zeros and the residual output is the all-reduced value (vLLM's
    spelling)."""
    comm = flashinfer_comm()
    assert comm is not None
    shape = x.shape
    x2 = x.reshape(-1, shape[-1]).contiguous()
    res_in = (torch.zeros_like(x2) if residual is None
              else residual.reshape(-1, shape[-1]).contiguous())
    res_out = torch.empty_like(x2)
    norm_out = torch.empty_like(x2) if quant_out is None else None
    extra: dict[str, object] = {}
    if weight_offset:
        extra["weight_bias"] = weight_offset
    if pattern == "kARResidualRMSNormFP4Quant":
        extra["layout_code"] = comm.QuantizationSFLayout.SWIZZLED_128x4
    comm.allreduce_fusion(
        input=x2, workspace=workspace(comm, group, x2),
        pattern=getattr(comm.AllReduceFusionPattern, pattern),
        launch_with_pdl=(capability(x) or (0, 0))[0] >= 9,
        trigger_completion_at_end=True, output=None, residual_out=res_out, norm_out=norm_out,
        quant_out=quant_out, scale_out=scale_out, residual_in=res_in, rms_gamma=weight.contiguous(),
        rms_eps=eps, scale_factor=scale_factor, use_oneshot=None, fp32_acc=True, **extra)
    return (None if norm_out is None else norm_out.reshape(shape)), res_out.reshape(shape)


# --- the NCCL (or symmetric-memory) + Triton path -----------------------------------------------


def reduce(x: torch.Tensor, group: str, symm: str | None = None) -> torch.Tensor:
    """The all-reduce of x over `group`: torch's symmetric memory where `symm` (the kernel's
    name) asks for it and it can run, else NCCL (the reason warned once per reason)."""
    if symm is not None:
        sm = _kernels("allreduce_symm_mem")
        why = sm.reason(x, group)
        if why is None:
            out = sm.all_reduce(x, group)
            if out is not None:
                return out
            why = sm.reason(x, group)
        sm.note_fallback(symm, group, why)
    return ref.all_reduce(x, group)


def _kernels(name: str) -> ModuleType:
    return importlib.import_module(f"irfuse.kernels.{name}")


def norm(reduced: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float,
         weight_offset: float, round_sum: bool, weight_f32: bool, triton: bool,
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, residual_out) of the all-reduced value: irfuse's Triton norm or the reference, with
    the model's readings (`round_sum`, `weight_f32`)."""
    if not triton:
        return ref.rms_norm(reduced, residual, weight, eps, weight_offset, round_sum, weight_f32)
    y, r = _kernels("norm_quant").rms_norm(reduced, weight, eps, weight_offset, residual,
                                           round_sum=round_sum, weight_f32=weight_f32)
    return y, reduced if r is None else r


def nccl_norm(x, residual, weight, group, eps, weight_offset, round_sum, weight_f32, triton,
              symm=None):
    return norm(reduce(x, group, symm), residual, weight, eps, weight_offset, round_sum,
                weight_f32, triton)


def nccl_static(x, residual, weight, scale, group, eps, weight_offset, out_dtype, divide,
                round_sum, weight_f32, triton, symm=None):
    reduced = reduce(x, group, symm)
    if triton:
        qs, r = _kernels("norm_quant").rms_norm_quant_fp8_static(
            reduced, weight, [scale], eps, weight_offset, out_dtype, residual, divide=divide,
            round_sum=round_sum, weight_f32=weight_f32)
        return qs[0], reduced if r is None else r
    y, r = norm(reduced, residual, weight, eps, weight_offset, round_sum, weight_f32, triton)
    return quant_ref.quant_fp8_static(y, scale, out_dtype, divide), r


def nccl_per_token(x, residual, weight, scale_ub, group, eps, weight_offset, out_dtype,
                   round_sum, weight_f32, triton, symm=None):
    reduced = reduce(x, group, symm)
    if triton:
        q, s, r = _kernels("norm_quant").rms_norm_quant_fp8_per_token(
            reduced, weight, scale_ub, eps, weight_offset, out_dtype, residual,
            round_sum=round_sum, weight_f32=weight_f32)
        return q, s, reduced if r is None else r
    y, r = norm(reduced, residual, weight, eps, weight_offset, round_sum, weight_f32, triton)
    q, s = quant_ref.quant_fp8_per_token(y, scale_ub, out_dtype)
    return q, s, r


def nccl_group(x, residual, weight, group, eps, weight_offset, group_size, col_major, ue8m0,
               out_dtype, round_sum, weight_f32, triton, symm=None):
    reduced = reduce(x, group, symm)
    if triton and group_size & (group_size - 1) == 0:
        q, s, r = _kernels("norm_quant").rms_norm_quant_fp8_group(
            reduced, weight, eps, weight_offset, group_size, col_major, ue8m0, out_dtype,
            residual, round_sum=round_sum, weight_f32=weight_f32)
        return q, s, reduced if r is None else r
    y, r = norm(reduced, residual, weight, eps, weight_offset, round_sum, weight_f32, triton)
    q, s = quant_ref.quant_fp8_group(y, group_size, col_major, ue8m0, out_dtype)
    return q, s, r


def nccl_nvfp4(x, residual, weight, global_scale, group, eps, weight_offset, round_sum,
               weight_f32, triton, symm=None):
    y, r = nccl_norm(x, residual, weight, group, eps, weight_offset, round_sum, weight_f32,
                     triton, symm)
    if triton and y.shape[-1] % quant_ref.NVFP4_BLOCK == 0:
        q, s = _kernels("nvfp4").quant_nvfp4(y, global_scale)
    else:
        q, s = quant_ref.quant_nvfp4(y, global_scale)
    return q, s, r
