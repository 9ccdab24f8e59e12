"""The kernels of all-reduce -> (residual add +) RMSNorm (-> quant):
`all_reduce_rms_norm[_quant_{fp8_static,fp8_per_token,fp8_group,nvfp4}]`, and how
`fused.all_reduce_rms_norm` lowers to them.

They take the process group by name (the op's own group: TP beside DP or PP reduces over TP,
never WORLD), the optional residual, and the norm's readings (`round_sum`, `weight_offset`,
`weight_f32`). Each returns its outputs then the new residual (the all-reduced value without a
residual). The CPU runs the reference (`allreduce_rms_ref`: torch's functional all-reduce on the
group, gloo, then the norm and quant references: the bits of the unfused graph). On CUDA
FlashInfer's fused kernel runs where it can (`_flashinfer_can`: the plain norm, static FP8, NVFP4
from sm100; vLLM's rule, not yet measured by irfuse: benchmarks/bench_allreduce_rms.py), else
NCCL + irfuse's fused norm (+ quant) Triton kernel, which per-token and per-group FP8 always
take. The all-reduce goes through torch's symmetric memory where a kernel's choice is `symm_mem`
(no table declares it: not measured) or IRFUSE_ALLREDUCE_SYMM_MEM=1 forces it (`_symm`).
"""

from __future__ import annotations

import os

import torch
from torch import Tensor
from xdsl.ir import Operation

from irfuse.dialects import fused
from irfuse.fusions.kernel_call import Lowering, scheme_values
from irfuse.fusions.kernel_decl import Call, Choice, Kernel
from irfuse.kernels import allreduce_rms_ref as ref
from irfuse.kernels import dispatch, quant_ref
from irfuse.kernels.allreduce_rms import NVFP4_BELOW_SM100
from irfuse.kernels.dispatch import check_fp8, contiguous, empty, fake_nvfp4, kernels

from .pattern import kernel_name


def _flashinfer_can(k: Kernel, c: Call, quant: str | None = None) -> bool:
    """Whether FlashInfer runs this call: wherever the kernel's choice is neither the reference
    nor Triton for a recorded reason (NVFP4 below sm100) and FlashInfer can run it (vLLM's rule;
    irfuse has not measured it against NCCL + Triton yet). Otherwise the reason is warned once
    and NCCL + Triton run."""
    choice = k.choose(dispatch.platform_of(c.x.device), dispatch.rows(c.x))
    if choice.impl == "reference":
        return False
    reason = NVFP4_BELOW_SM100 if choice == NVFP4_CHOICE else kernels(
        "allreduce_rms").flashinfer_reason(c.x, c.residual, c.weight, c.group, c.weight_offset,
                                           c.weight_f32, quant, c.get("divide", False))
    if reason is not None:
        kernels("allreduce_rms").note_fallback(k.name, reason)
    return reason is None


SYMM_MEM_ENV = "IRFUSE_ALLREDUCE_SYMM_MEM"
"""1: every fused all-reduce kernel takes the `symm_mem` path whatever its choice (benchmarks)."""


def _symm(k: Kernel, x: Tensor) -> str | None:
    """k's name where its all-reduce goes through torch's symmetric memory (its choice at x's
    size is `symm_mem`, or SYMM_MEM_ENV forces it); else None (FlashInfer or NCCL)."""
    env = os.environ.get(SYMM_MEM_ENV, "")
    if env not in ("", "0", "1"):
        raise ValueError(f"irfuse: {SYMM_MEM_ENV} must be 0 or 1, got {env!r}")
    if env == "1" or k.choose(dispatch.platform_of(x.device), dispatch.rows(x)).impl \
            == "symm_mem":
        return k.name
    return None


def _nccl(k: Kernel, c: Call, symm: str | None, out_dtype: torch.dtype | None = None) -> dict:
    """The NCCL path's switches: whether its norm runs the Triton kernel, and the symmetric
    memory's kernel name (or None)."""
    return {"triton": dispatch.use_triton(k, c.x, out_dtype), "symm": symm}


SM90_FUSED = Choice("triton", "FlashInfer where it can run the call, else NCCL + Triton "
                    "(vLLM's rule); symm_mem not measured yet")
SM90_UNFUSED = Choice("triton", "NCCL + Triton (FlashInfer's fused kernel lacks this quant); "
                      "symm_mem not measured yet")


def _empty_like(x: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    return empty(x, x.shape, x.dtype if dtype is None else dtype)


# --- all-reduce + norm --------------------------------------------------------------------------


def all_reduce_rms_norm(x: Tensor, residual: Tensor | None, weight: Tensor, group: str,
                        eps: float, weight_offset: float, round_sum: bool = False,
                        weight_f32: bool = False) -> tuple[Tensor, Tensor]:
    y, r = ref.all_reduce_rms_norm(x, residual, weight, group, eps, weight_offset, round_sum,
                                   weight_f32)
    return contiguous(y), contiguous(r)


def _plain_cuda(c: Call) -> tuple[Tensor, Tensor]:
    symm = _symm(PLAIN, c.x)
    if symm is None and _flashinfer_can(PLAIN, c):
        return kernels("allreduce_rms").flashinfer_fused(
            c.x, c.residual, c.weight, c.group, c.eps, c.weight_offset, "kARResidualRMSNorm")
    return kernels("allreduce_rms").nccl_norm(**c, **_nccl(PLAIN, c, symm))


def _plain_fake(c: Call) -> tuple[Tensor, Tensor]:
    ref.check_args(c.x, c.residual, c.weight)
    return _empty_like(c.x), _empty_like(c.x)


PLAIN = Kernel(all_reduce_rms_norm, _plain_fake, _plain_cuda,
               rules={"cuda:sm90": ((1, SM90_FUSED),)}, flashinfer=True)


# --- + static FP8 -------------------------------------------------------------------------------


def all_reduce_rms_norm_quant_fp8_static(
        x: Tensor, residual: Tensor | None, weight: Tensor, scale: Tensor, group: str,
        eps: float, weight_offset: float, out_dtype: torch.dtype, divide: bool = False,
        round_sum: bool = False, weight_f32: bool = False) -> tuple[Tensor, Tensor]:
    q, r = ref.all_reduce_rms_norm_quant_fp8_static(x, residual, weight, scale, group, eps,
                                                    weight_offset, out_dtype, divide, round_sum,
                                                    weight_f32)
    return contiguous(q), contiguous(r)


def _static_cuda(c: Call) -> tuple[Tensor, Tensor]:
    ar = kernels("allreduce_rms")
    symm = _symm(STATIC, c.x)
    if symm is None and c.out_dtype == torch.float8_e4m3fn and _flashinfer_can(STATIC, c, "fp8"):
        q = torch.empty(c.x.shape, dtype=c.out_dtype, device=c.x.device)
        _, r = ar.flashinfer_fused(c.x, c.residual, c.weight, c.group, c.eps, c.weight_offset,
                                   "kARResidualRMSNormFP8Quant", quant_out=q,
                                   scale_factor=c.scale.reshape(()).float())
        return q, r
    return ar.nccl_static(**c, **_nccl(STATIC, c, symm, c.out_dtype))


def _static_fake(c: Call) -> tuple[Tensor, Tensor]:
    ref.check_args(c.x, c.residual, c.weight)
    check_fp8(c.x, c.out_dtype)
    return _empty_like(c.x, c.out_dtype), _empty_like(c.x)


STATIC = Kernel(all_reduce_rms_norm_quant_fp8_static, _static_fake, _static_cuda,
                rules={"cuda:sm90": ((1, SM90_FUSED),)}, flashinfer=True)


# --- + per-token FP8 ----------------------------------------------------------------------------


def all_reduce_rms_norm_quant_fp8_per_token(
        x: Tensor, residual: Tensor | None, weight: Tensor, scale_ub: Tensor | None, group: str,
        eps: float, weight_offset: float, out_dtype: torch.dtype, round_sum: bool = False,
        weight_f32: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    q, s, r = ref.all_reduce_rms_norm_quant_fp8_per_token(
        x, residual, weight, scale_ub, group, eps, weight_offset, out_dtype, round_sum,
        weight_f32)
    return contiguous(q), contiguous(s), contiguous(r)


def _token_cuda(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    return kernels("allreduce_rms").nccl_per_token(
        **c, **_nccl(PER_TOKEN, c, _symm(PER_TOKEN, c.x), c.out_dtype))


def _token_fake(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    ref.check_args(c.x, c.residual, c.weight)
    check_fp8(c.x, c.out_dtype)
    return (_empty_like(c.x, c.out_dtype), empty(c.x, (*c.x.shape[:-1], 1), torch.float32),
            _empty_like(c.x))


PER_TOKEN = Kernel(all_reduce_rms_norm_quant_fp8_per_token, _token_fake, _token_cuda,
                   rules={"cuda:sm90": ((1, SM90_UNFUSED),)})


# --- + per-group FP8 ----------------------------------------------------------------------------


def all_reduce_rms_norm_quant_fp8_group(
        x: Tensor, residual: Tensor | None, weight: Tensor, group: str, eps: float,
        weight_offset: float, group_size: int, col_major: bool, ue8m0: bool,
        out_dtype: torch.dtype, round_sum: bool = False, weight_f32: bool = False
) -> tuple[Tensor, Tensor, Tensor]:
    q, s, r = ref.all_reduce_rms_norm_quant_fp8_group(
        x, residual, weight, group, eps, weight_offset, group_size, col_major, ue8m0, out_dtype,
        round_sum, weight_f32)
    return contiguous(q), s, contiguous(r)


def _group_cuda(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    return kernels("allreduce_rms").nccl_group(
        **c, **_nccl(GROUP, c, _symm(GROUP, c.x), c.out_dtype))


def _group_fake(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    ref.check_args(c.x, c.residual, c.weight)
    check_fp8(c.x, c.out_dtype)
    quant_ref.check_group_size(c.x.shape[-1], c.group_size)
    return (_empty_like(c.x, c.out_dtype),
            quant_ref.empty_group_scales(c.x, c.group_size, c.col_major), _empty_like(c.x))


GROUP = Kernel(all_reduce_rms_norm_quant_fp8_group, _group_fake, _group_cuda,
               rules={"cuda:sm90": ((1, SM90_UNFUSED),)})


# --- + NVFP4 ------------------------------------------------------------------------------------


def all_reduce_rms_norm_quant_nvfp4(
        x: Tensor, residual: Tensor | None, weight: Tensor, global_scale: Tensor, group: str,
        eps: float, weight_offset: float, round_sum: bool = False, weight_f32: bool = False
) -> tuple[Tensor, Tensor, Tensor]:
    q, s, r = ref.all_reduce_rms_norm_quant_nvfp4(x, residual, weight, global_scale, group, eps,
                                                  weight_offset, round_sum, weight_f32)
    return contiguous(q), s, contiguous(r)


def _nvfp4_cuda(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    ar = kernels("allreduce_rms")
    symm = _symm(NVFP4, c.x)
    if symm is None and c.x.dim() == 2 and _flashinfer_can(NVFP4, c, "nvfp4"):
        q, s = fake_nvfp4(c.x, c.x.shape[-1])
        _, r = ar.flashinfer_fused(c.x, c.residual, c.weight, c.group, c.eps, c.weight_offset,
                                   "kARResidualRMSNormFP4Quant", quant_out=q, scale_out=s,
                                   scale_factor=c.global_scale.reshape(()).float())
        return q, s, r
    return ar.nccl_nvfp4(**c, **_nccl(NVFP4, c, symm))


def _nvfp4_fake(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    ref.check_args(c.x, c.residual, c.weight)
    q, s = fake_nvfp4(c.x, c.x.shape[-1])
    return q, s, _empty_like(c.x)


NVFP4_CHOICE = Choice("triton", "NCCL + Triton: " + NVFP4_BELOW_SM100)
"""NVFP4 below sm100: FlashInfer's fused kernel writes zero codes there (allreduce_rms)."""

NVFP4 = Kernel(all_reduce_rms_norm_quant_nvfp4, _nvfp4_fake, _nvfp4_cuda,
               rules={p: ((1, NVFP4_CHOICE),) for p in ("cuda:sm80", "cuda:sm86", "cuda:sm89",
                                                          "cuda:sm90")},
               flashinfer=True)

KERNELS = (PLAIN, STATIC, PER_TOKEN, GROUP, NVFP4)
_BY_NAME = {k.name: k for k in KERNELS}


# --- lowering -----------------------------------------------------------------------------------


def _kernel(op: Operation) -> Kernel:
    assert isinstance(op, fused.AllReduceRmsNormOp)
    return _BY_NAME[kernel_name(None if op.scheme is None else op.scheme.kind.data)]


def _values(op: Operation) -> dict[str, object]:
    """The quant's: NVFP4's global scale is the op's `scale`; FP8's dtype is the output's."""
    assert isinstance(op, fused.AllReduceRmsNormOp)
    return {**scheme_values(op.scheme), "global_scale": op.scale,
            "out_dtype": op.out.type.dtype}  # type: ignore[attr-defined]


LOWERINGS = {fused.AllReduceRmsNormOp.name: Lowering(_kernel, _values)}
