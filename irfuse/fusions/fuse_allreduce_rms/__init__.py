"""fuse_allreduce_rms: all-reduce -> (residual add +) RMSNorm (-> FP8 static / per-token /
per-group or NVFP4 quant) in one op. O2 on sm90/sm100 with FlashInfer and TP 2, 4 or 8, as in
vLLM; on the CPU its reference is for tests only (opt-in). The range rule keeps it below
FlashInfer's size cap (`fi_allreduce_fusion_max_size_mb`), where vLLM runs it.

Kernels (`all_reduce_rms_norm[_quant_{fp8_static,fp8_per_token,fp8_group,nvfp4}]`) take the
process group by name (the op's own group: TP beside DP or PP reduces over TP, never WORLD), the
optional residual, and the norm's readings (`round_sum`, `weight_offset`, `weight_f32`). Each
returns its outputs then the new residual (the all-reduced value without a residual).

- CPU: the reference (`allreduce_rms_ref`): torch's functional all-reduce on the group (gloo),
  then the norm and quant references: the bits of the unfused graph.
- CUDA: FlashInfer's `allreduce_fusion` on a `trtllm` workspace for the plain norm, static FP8
  (a quant by `x * (1 / s)`, FlashInfer's spelling) and NVFP4 from sm100 (below, FlashInfer
  writes zero codes: the NVFP4 kernel's choice there is NCCL + Triton, with that reason) where it
  can run the call (`allreduce_rms.flashinfer_reason`), else NCCL (the
  functional all-reduce) + irfuse's fused norm (+ quant) Triton kernel; per-token and per-group
  FP8, which FlashInfer's fused kernel lacks, always take the second path. FlashInfer first is
  vLLM's rule, not yet measured by irfuse (benchmarks/bench_allreduce_rms.py); the kernels'
  choice tables say Triton (not measured), which runs wherever FlashInfer cannot.
- `symm_mem`, a choice a platform's table may declare (none does: not measured yet), or forced
  with IRFUSE_ALLREDUCE_SYMM_MEM=1 for benchmarks: the all-reduce through torch's symmetric
  memory (`allreduce_symm_mem`, one-/two-shot by size), then the same Triton kernels; NCCL with
  a warned reason where symmetric memory cannot run the call.
"""

from __future__ import annotations

import os

import torch
from xdsl.dialects.builtin import FloatData, IntAttr, StringAttr
from xdsl.ir import Attribute

from irfuse.dialects import aten, fused, kernel
from irfuse.fusions.declare import Choice, Fusion, Kernel, Support
from irfuse.fusions.fuse_allreduce_rms.pattern import AllReduceRmsPattern, kernel_name
from irfuse.fusions.kernel_call import Args, flag, kernel_call
from irfuse.kernels import allreduce_rms_ref as ref
from irfuse.kernels import dispatch, quant_ref
from irfuse.kernels.allreduce_rms import NVFP4_BELOW_SM100
from irfuse.kernels.dispatch import check_fp8, contiguous, empty, fake_nvfp4, kernels


def _flashinfer_can(k: Kernel, x, residual, weight, group, weight_offset, weight_f32,
                    quant: str | None = None, divide: bool = False) -> bool:
    """Whether FlashInfer runs this call: wherever the kernel's choice is neither the reference
    nor Triton for a recorded reason (NVFP4 below sm100) and FlashInfer can run it (vLLM's rule;
    irfuse has not measured it against NCCL + Triton yet). Otherwise the reason is warned once
    and NCCL + Triton run."""
    choice = k.choose(dispatch.platform_of(x.device), dispatch.rows(x))
    if choice.impl == "reference":
        return False
    reason = NVFP4_BELOW_SM100 if choice == NVFP4_CHOICE else kernels(
        "allreduce_rms").flashinfer_reason(x, residual, weight, group, weight_offset,
                                           weight_f32, quant, divide)
    if reason is not None:
        kernels("allreduce_rms").note_fallback(k.name, reason)
    return reason is None


SYMM_MEM_ENV = "IRFUSE_ALLREDUCE_SYMM_MEM"
"""1: every fused all-reduce kernel takes the `symm_mem` path whatever its choice (benchmarks)."""


def _symm(k: Kernel, x) -> str | None:
    """k's name where its all-reduce goes through torch's symmetric memory (its choice at x's
    size is `symm_mem`, or SYMM_MEM_ENV forces it); else None (FlashInfer or NCCL)."""
    env = os.environ.get(SYMM_MEM_ENV, "")
    if env not in ("", "0", "1"):
        raise ValueError(f"irfuse: {SYMM_MEM_ENV} must be 0 or 1, got {env!r}")
    if env == "1" or k.choose(dispatch.platform_of(x.device), dispatch.rows(x)).impl \
            == "symm_mem":
        return k.name
    return None


SM90_FUSED = Choice("triton", "FlashInfer where it can run the call, else NCCL + Triton "
                    "(vLLM's rule); symm_mem not measured yet")
SM90_UNFUSED = Choice("triton", "NCCL + Triton (FlashInfer's fused kernel lacks this quant); "
                      "symm_mem not measured yet")


def _fake_common(x, residual, weight):
    ref.check_args(x, residual, weight)


# --- all-reduce + norm --------------------------------------------------------------------------


def _plain_ref(x, residual, weight, group, eps, weight_offset, round_sum=False,
               weight_f32=False):
    y, r = ref.all_reduce_rms_norm(x, residual, weight, group, eps, weight_offset, round_sum,
                                   weight_f32)
    return contiguous(y), contiguous(r)


def _plain_cuda(x, residual, weight, group, eps, weight_offset, round_sum=False,
                weight_f32=False):
    ar = kernels("allreduce_rms")
    symm = _symm(PLAIN, x)
    if symm is None and _flashinfer_can(PLAIN, x, residual, weight, group, weight_offset,
                                        weight_f32):
        return ar.flashinfer_fused(x, residual, weight, group, eps, weight_offset,
                                   "kARResidualRMSNorm")
    return ar.nccl_norm(x, residual, weight, group, eps, weight_offset, round_sum, weight_f32,
                        dispatch.use_triton(PLAIN, x), symm)


def _plain_fake(x, residual, weight, group, eps, weight_offset, round_sum=False,
                weight_f32=False):
    _fake_common(x, residual, weight)
    return empty(x, x.shape, x.dtype), empty(x, x.shape, x.dtype)


PLAIN = Kernel(
    "all_reduce_rms_norm",
    "(Tensor x, Tensor? residual, Tensor weight, str group, float eps, float weight_offset, "
    "bool round_sum=False, bool weight_f32=False) -> (Tensor, Tensor)",
    _plain_ref, _plain_cuda, _plain_fake, choices={"cuda:sm90": ((1, SM90_FUSED),)},
    flashinfer=True)


# --- + static FP8 -------------------------------------------------------------------------------


def _static_ref(x, residual, weight, scale, group, eps, weight_offset, out_dtype, divide=False,
                round_sum=False, weight_f32=False):
    q, r = ref.all_reduce_rms_norm_quant_fp8_static(x, residual, weight, scale, group, eps,
                                                    weight_offset, out_dtype, divide, round_sum,
                                                    weight_f32)
    return contiguous(q), contiguous(r)


def _static_cuda(x, residual, weight, scale, group, eps, weight_offset, out_dtype, divide=False,
                 round_sum=False, weight_f32=False):
    ar = kernels("allreduce_rms")
    symm = _symm(STATIC, x)
    if symm is None and out_dtype == torch.float8_e4m3fn and _flashinfer_can(
            STATIC, x, residual, weight, group, weight_offset, weight_f32, "fp8", divide):
        q = torch.empty(x.shape, dtype=out_dtype, device=x.device)
        _, r = ar.flashinfer_fused(x, residual, weight, group, eps, weight_offset,
                                   "kARResidualRMSNormFP8Quant", quant_out=q,
                                   scale_factor=scale.reshape(()).float())
        return q, r
    return ar.nccl_static(x, residual, weight, scale, group, eps, weight_offset, out_dtype,
                          divide, round_sum, weight_f32, dispatch.use_triton(STATIC, x, out_dtype),
                          symm)


def _static_fake(x, residual, weight, scale, group, eps, weight_offset, out_dtype, divide=False,
                 round_sum=False, weight_f32=False):
    _fake_common(x, residual, weight)
    check_fp8(x, out_dtype)
    return empty(x, x.shape, out_dtype), empty(x, x.shape, x.dtype)


STATIC = Kernel(
    "all_reduce_rms_norm_quant_fp8_static",
    "(Tensor x, Tensor? residual, Tensor weight, Tensor scale, str group, float eps, "
    "float weight_offset, ScalarType out_dtype, bool divide=False, bool round_sum=False, "
    "bool weight_f32=False) -> (Tensor, Tensor)",
    _static_ref, _static_cuda, _static_fake, choices={"cuda:sm90": ((1, SM90_FUSED),)},
    flashinfer=True)


# --- + per-token FP8 ----------------------------------------------------------------------------


def _token_ref(x, residual, weight, scale_ub, group, eps, weight_offset, out_dtype,
               round_sum=False, weight_f32=False):
    q, s, r = ref.all_reduce_rms_norm_quant_fp8_per_token(
        x, residual, weight, scale_ub, group, eps, weight_offset, out_dtype, round_sum,
        weight_f32)
    return contiguous(q), contiguous(s), contiguous(r)


def _token_cuda(x, residual, weight, scale_ub, group, eps, weight_offset, out_dtype,
                round_sum=False, weight_f32=False):
    return kernels("allreduce_rms").nccl_per_token(
        x, residual, weight, scale_ub, group, eps, weight_offset, out_dtype, round_sum,
        weight_f32, dispatch.use_triton(PER_TOKEN, x, out_dtype), _symm(PER_TOKEN, x))


def _token_fake(x, residual, weight, scale_ub, group, eps, weight_offset, out_dtype,
                round_sum=False, weight_f32=False):
    _fake_common(x, residual, weight)
    check_fp8(x, out_dtype)
    return (empty(x, x.shape, out_dtype), empty(x, (*x.shape[:-1], 1), torch.float32),
            empty(x, x.shape, x.dtype))


PER_TOKEN = Kernel(
    "all_reduce_rms_norm_quant_fp8_per_token",
    "(Tensor x, Tensor? residual, Tensor weight, Tensor? scale_ub, str group, float eps, "
    "float weight_offset, ScalarType out_dtype, bool round_sum=False, bool weight_f32=False) "
    "-> (Tensor, Tensor, Tensor)",
    _token_ref, _token_cuda, _token_fake, choices={"cuda:sm90": ((1, SM90_UNFUSED),)})


# --- + per-group FP8 ----------------------------------------------------------------------------


def _group_ref(x, residual, weight, group, eps, weight_offset, group_size, col_major, ue8m0,
               out_dtype, round_sum=False, weight_f32=False):
    q, s, r = ref.all_reduce_rms_norm_quant_fp8_group(
        x, residual, weight, group, eps, weight_offset, group_size, col_major, ue8m0, out_dtype,
        round_sum, weight_f32)
    return contiguous(q), s, contiguous(r)


def _group_cuda(x, residual, weight, group, eps, weight_offset, group_size, col_major, ue8m0,
                out_dtype, round_sum=False, weight_f32=False):
    return kernels("allreduce_rms").nccl_group(
        x, residual, weight, group, eps, weight_offset, group_size, col_major, ue8m0, out_dtype,
        round_sum, weight_f32, dispatch.use_triton(GROUP, x, out_dtype), _symm(GROUP, x))


def _group_fake(x, residual, weight, group, eps, weight_offset, group_size, col_major, ue8m0,
                out_dtype, round_sum=False, weight_f32=False):
    _fake_common(x, residual, weight)
    check_fp8(x, out_dtype)
    quant_ref.check_group_size(x.shape[-1], group_size)
    return (empty(x, x.shape, out_dtype), quant_ref.empty_group_scales(x, group_size, col_major),
            empty(x, x.shape, x.dtype))


GROUP = Kernel(
    "all_reduce_rms_norm_quant_fp8_group",
    "(Tensor x, Tensor? residual, Tensor weight, str group, float eps, float weight_offset, "
    "int group_size, bool col_major, bool ue8m0, ScalarType out_dtype, bool round_sum=False, "
    "bool weight_f32=False) -> (Tensor, Tensor, Tensor)",
    _group_ref, _group_cuda, _group_fake, choices={"cuda:sm90": ((1, SM90_UNFUSED),)})


# --- + NVFP4 ------------------------------------------------------------------------------------


def _nvfp4_ref(x, residual, weight, global_scale, group, eps, weight_offset, round_sum=False,
               weight_f32=False):
    q, s, r = ref.all_reduce_rms_norm_quant_nvfp4(x, residual, weight, global_scale, group, eps,
                                                  weight_offset, round_sum, weight_f32)
    return contiguous(q), s, contiguous(r)


def _nvfp4_cuda(x, residual, weight, global_scale, group, eps, weight_offset, round_sum=False,
                weight_f32=False):
    ar = kernels("allreduce_rms")
    symm = _symm(NVFP4, x)
    if symm is None and x.dim() == 2 and _flashinfer_can(NVFP4, x, residual, weight, group, weight_offset,
                                        weight_f32, "nvfp4"):
        q, s = fake_nvfp4(x, x.shape[-1])
        _, r = ar.flashinfer_fused(x, residual, weight, group, eps, weight_offset,
                                   "kARResidualRMSNormFP4Quant", quant_out=q, scale_out=s,
                                   scale_factor=global_scale.reshape(()).float())
        return q, s, r
    return ar.nccl_nvfp4(x, residual, weight, global_scale, group, eps, weight_offset,
                         round_sum, weight_f32, dispatch.use_triton(NVFP4, x), symm)


def _nvfp4_fake(x, residual, weight, global_scale, group, eps, weight_offset, round_sum=False,
                weight_f32=False):
    _fake_common(x, residual, weight)
    q, s = fake_nvfp4(x, x.shape[-1])
    return q, s, empty(x, x.shape, x.dtype)


NVFP4_CHOICE = Choice("triton", "NCCL + Triton: " + NVFP4_BELOW_SM100)
"""NVFP4 below sm100: FlashInfer's fused kernel writes zero codes there (allreduce_rms)."""

NVFP4 = Kernel(
    "all_reduce_rms_norm_quant_nvfp4",
    "(Tensor x, Tensor? residual, Tensor weight, Tensor global_scale, str group, float eps, "
    "float weight_offset, bool round_sum=False, bool weight_f32=False) "
    "-> (Tensor, Tensor, Tensor)",
    _nvfp4_ref, _nvfp4_cuda, _nvfp4_fake,
    choices={p: ((1, NVFP4_CHOICE),) for p in ("cuda:sm80", "cuda:sm86", "cuda:sm89",
                                                 "cuda:sm90")},
    flashinfer=True)

KERNELS = (PLAIN, STATIC, PER_TOKEN, GROUP, NVFP4)


# --- lowering -----------------------------------------------------------------------------------


def _lower(op: fused.AllReduceRmsNormOp, platform: str) -> kernel.CallOp:
    scheme = op.scheme
    kind = None if scheme is None else scheme.kind.data
    k = FUSION.kernel_by_name[kernel_name(kind)]
    a = Args()
    template: list[Attribute] = [a.tensor(op.x), a.optional(op.residual), a.tensor(op.weight)]
    if kind in ("static_tensor", "nvfp4"):
        assert op.scale is not None
        template.append(a.tensor(op.scale))
    elif kind == "dynamic_token":
        template.append(a.optional(op.scale_ub))
    template += [StringAttr(op.group.data), FloatData(op.eps.value.data),
                 FloatData(op.weight_offset.value.data)]
    if kind == "group":
        assert scheme is not None
        template += [IntAttr(scheme.group_size), flag(scheme.is_col_major),
                     flag(scheme.is_ue8m0)]
    if kind in ("static_tensor", "dynamic_token", "group"):
        template.append(op.out.type.dtype)  # type: ignore[attr-defined]
    keywords: dict[str, Attribute] = {}
    if op.divide is not None:
        keywords["divide"] = aten.TRUE
    if op.round_sum is not None:
        keywords["round_sum"] = aten.TRUE
    if op.weight_f32 is not None:
        keywords["weight_f32"] = aten.TRUE
    return kernel_call(k, a, template, op, platform, keywords)


FUSION = Fusion(
    name="fuse-allreduce-rms",
    flag="fuse_allreduce_rms",
    kind="fusion",
    fuses="all-reduce -> (residual add +) RMSNorm (+ FP8 static / per-token / per-group or "
    "NVFP4 quant)",
    quant="optional",
    schemes=("fp8-static-tensor", "fp8-dynamic-token", "fp8-group-128", "fp8-group-64",
             "nvfp4"),
    range_rule="below-fi-cap",
    platforms={
        "cpu": Support("reference", None),
        "cuda:sm90": Support("flashinfer", 2, schemes=("fp8-static-tensor", "fp8-dynamic-token",
                                                       "fp8-group-128", "fp8-group-64")),
        "cuda:sm100": Support("flashinfer", 2),
    },
    unsupported="FlashInfer's fused all-reduce kernels are built for sm90 and sm100 only, "
    "and irfuse has no ROCm kernel for it",
    needs_tp=True,
    vllm_pass="AllReduceFusionPass",
    note="O2 needs FlashInfer and TP 2, 4 or 8; the CPU reference is for tests (opt-in); "
    "per-token and per-group FP8 run NCCL + irfuse's fused norm kernel",
    patterns=(AllReduceRmsPattern(),),
    lowerings={fused.AllReduceRmsNormOp.name: _lower},  # type: ignore[dict-item]
    kernels=KERNELS,
    size_aware=True,
)
