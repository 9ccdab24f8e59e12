"""fuse_norm_quant: (residual add +) RMSNorm -> FP8 quant (static, per-token, per-group) in one
kernel, on by default from O1 everywhere: irfuse's Triton kernels beat Inductor's code for the
pattern at every size measured on the H200 (docs/benchmarks.md).

Kernels: `[add_]rms_norm_quant_fp8_{static,per_token,group}`. The static ones return the quantized
outputs, one per scale, then the new residual, as one flat list (emit unpacks one level deep). The
residual ones take `round_sum` (normalize the sum rounded to the model dtype, as models that add
in the model dtype do); the static ones `divide` (scale by `y / s` in float32, for models that
divide), the per-token and per-group ones `reciprocal` (scale by `y * (1 / s)`, for models that
multiply by the scale's reciprocal); every one `weight_f32` (the weight product in float32,
rounded once: `F.rms_norm` and models that spell `(normed * w.float()).to(dtype)`).
FlashInfer's rmsnorm_quant is not chosen: it took 1.03-2.88x irfuse's time and does not round y
to the model dtype before the quant.
"""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import FloatData, IntAttr
from xdsl.ir import Attribute

from irfuse.dialects import aten, fused, kernel
from irfuse.fusions.declare import FP8_SCHEMES, Choice, Fusion, Kernel, everywhere
from irfuse.fusions.fuse_norm_quant.pattern import NormQuantPattern, kernel_name
from irfuse.fusions.kernel_call import Args, flag, kernel_call
from irfuse.kernels import dispatch, norm_quant_ref, quant_ref
from irfuse.kernels.dispatch import check_fp8, contiguous, empty, kernels

_BENCH = "docs/benchmarks.md"


def _sm90(text: str) -> dict[str, tuple[tuple[int, Choice], ...]]:
    """A Triton choice on Hopper at every size, with its measurement."""
    return {"cuda:sm90": ((1, Choice("triton", f"{_BENCH} (H200): {text}")),)}


# --- static per-tensor -------------------------------------------------------------------------
# Every kernel takes the norm's readings as keywords: `round_sum` (residual forms), `weight_f32`
# (the weight product in float32, rounded once), and the quant's spelling (`divide` for the
# static ones, `reciprocal` for the dynamic ones).


def _static_ref(x, weight, scales, eps, weight_offset, out_dtype, divide=False,
                weight_f32=False):
    qs, _ = norm_quant_ref.rms_norm_quant_fp8_static(x, weight, scales, eps, weight_offset,
                                                     out_dtype, divide=divide,
                                                     weight_f32=weight_f32)
    return [contiguous(q) for q in qs]


def _static_cuda(x, weight, scales, eps, weight_offset, out_dtype, divide=False,
                 weight_f32=False):
    fi = dispatch.flashinfer(STATIC, x, weight, scales, weight_offset, out_dtype, divide=divide,
                             weight_f32=weight_f32)
    if fi is not None:
        return fi.rms_norm_quant_fp8_static(x, weight, scales, eps, weight_offset, out_dtype,
                                            divide=divide, weight_f32=weight_f32)[0]
    if dispatch.use_triton(STATIC, x, out_dtype):
        return kernels("norm_quant").rms_norm_quant_fp8_static(
            x, weight, scales, eps, weight_offset, out_dtype, divide=divide,
            weight_f32=weight_f32)[0]
    return _static_ref(x, weight, scales, eps, weight_offset, out_dtype, divide, weight_f32)


def _static_fake(x, weight, scales, eps, weight_offset, out_dtype, divide=False,
                 weight_f32=False):
    norm_quant_ref.check_norm_args(x, weight, None)
    check_fp8(x, out_dtype)
    return [empty(x, x.shape, out_dtype) for _ in scales]


STATIC = Kernel(
    "rms_norm_quant_fp8_static",
    "(Tensor x, Tensor weight, Tensor[] scales, float eps, float weight_offset, "
    "ScalarType out_dtype, bool divide=False, bool weight_f32=False) -> Tensor[]",
    _static_ref, _static_cuda, _static_fake,
    _sm90("0.57-0.79x Inductor's time at every size (H 4096 / 8192, T 1-16384; 2026-12-04)"),
    flashinfer=True)


def _add_static_ref(x, residual, weight, scales, eps, weight_offset, out_dtype, divide=False,
                    round_sum=False, weight_f32=False):
    qs, r = norm_quant_ref.rms_norm_quant_fp8_static(x, weight, scales, eps, weight_offset,
                                                     out_dtype, residual, divide=divide,
                                                     round_sum=round_sum, weight_f32=weight_f32)
    return [*(contiguous(q) for q in qs), contiguous(r)]


def _add_static_cuda(x, residual, weight, scales, eps, weight_offset, out_dtype, divide=False,
                     round_sum=False, weight_f32=False):
    fi = dispatch.flashinfer(ADD_STATIC, x, weight, scales, weight_offset, out_dtype, residual,
                             divide=divide, round_sum=round_sum, weight_f32=weight_f32)
    if fi is not None:
        qs, r = fi.rms_norm_quant_fp8_static(x, weight, scales, eps, weight_offset, out_dtype,
                                             residual, divide=divide, round_sum=round_sum,
                                             weight_f32=weight_f32)
        return [*qs, r]
    if dispatch.use_triton(ADD_STATIC, x, out_dtype):
        qs, r = kernels("norm_quant").rms_norm_quant_fp8_static(
            x, weight, scales, eps, weight_offset, out_dtype, residual, divide=divide,
            round_sum=round_sum, weight_f32=weight_f32)
        return [*qs, r]
    return _add_static_ref(x, residual, weight, scales, eps, weight_offset, out_dtype, divide,
                           round_sum, weight_f32)


def _add_static_fake(x, residual, weight, scales, eps, weight_offset, out_dtype, divide=False,
                     round_sum=False, weight_f32=False):
    norm_quant_ref.check_norm_args(x, weight, residual)
    check_fp8(x, out_dtype)
    return [*(empty(x, x.shape, out_dtype) for _ in scales), empty(x, x.shape, x.dtype)]


ADD_STATIC = Kernel(
    "add_rms_norm_quant_fp8_static",
    "(Tensor x, Tensor residual, Tensor weight, Tensor[] scales, float eps, "
    "float weight_offset, ScalarType out_dtype, bool divide=False, bool round_sum=False, "
    "bool weight_f32=False) -> Tensor[]",
    _add_static_ref, _add_static_cuda, _add_static_fake,
    _sm90("0.54-0.99x Inductor's time at every size (H 4096 / 8192, T 1-16384; 2026-12-04)"),
    flashinfer=True)


# --- dynamic per-token -------------------------------------------------------------------------
# `reciprocal`: the quant scales by `y * (1 / s)` (a model that spells it so), else `y / s`.


def _token_ref(x, weight, scale_ub, eps, weight_offset, out_dtype, reciprocal=False,
               weight_f32=False):
    q, s, _ = norm_quant_ref.rms_norm_quant_fp8_per_token(x, weight, scale_ub, eps,
                                                          weight_offset, out_dtype,
                                                          reciprocal=reciprocal,
                                                          weight_f32=weight_f32)
    return contiguous(q), contiguous(s)


def _token_cuda(x, weight, scale_ub, eps, weight_offset, out_dtype, reciprocal=False,
                weight_f32=False):
    if dispatch.use_triton(PER_TOKEN, x, out_dtype):
        return kernels("norm_quant").rms_norm_quant_fp8_per_token(
            x, weight, scale_ub, eps, weight_offset, out_dtype, reciprocal=reciprocal,
            weight_f32=weight_f32)[:2]
    return _token_ref(x, weight, scale_ub, eps, weight_offset, out_dtype, reciprocal,
                      weight_f32)


def _token_fake(x, weight, scale_ub, eps, weight_offset, out_dtype, reciprocal=False,
                weight_f32=False):
    norm_quant_ref.check_norm_args(x, weight, None)
    check_fp8(x, out_dtype)
    return empty(x, x.shape, out_dtype), empty(x, (*x.shape[:-1], 1), torch.float32)


PER_TOKEN = Kernel(
    "rms_norm_quant_fp8_per_token",
    "(Tensor x, Tensor weight, Tensor? scale_ub, float eps, float weight_offset, "
    "ScalarType out_dtype, bool reciprocal=False, bool weight_f32=False) -> (Tensor, Tensor)",
    _token_ref, _token_cuda, _token_fake,
    _sm90("the residual form's kernel without the residual (measured there: 0.55-0.88x "
          "Inductor); not measured alone"))


def _add_token_ref(x, residual, weight, scale_ub, eps, weight_offset, out_dtype,
                   round_sum=False, reciprocal=False, weight_f32=False):
    q, s, r = norm_quant_ref.rms_norm_quant_fp8_per_token(x, weight, scale_ub, eps,
                                                          weight_offset, out_dtype, residual,
                                                          round_sum=round_sum,
                                                          reciprocal=reciprocal,
                                                          weight_f32=weight_f32)
    return contiguous(q), contiguous(s), contiguous(r)


def _add_token_cuda(x, residual, weight, scale_ub, eps, weight_offset, out_dtype,
                    round_sum=False, reciprocal=False, weight_f32=False):
    if dispatch.use_triton(ADD_PER_TOKEN, x, out_dtype):
        return kernels("norm_quant").rms_norm_quant_fp8_per_token(
            x, weight, scale_ub, eps, weight_offset, out_dtype, residual, round_sum=round_sum,
            reciprocal=reciprocal, weight_f32=weight_f32)
    return _add_token_ref(x, residual, weight, scale_ub, eps, weight_offset, out_dtype,
                          round_sum, reciprocal, weight_f32)


def _add_token_fake(x, residual, weight, scale_ub, eps, weight_offset, out_dtype,
                    round_sum=False, reciprocal=False, weight_f32=False):
    norm_quant_ref.check_norm_args(x, weight, residual)
    check_fp8(x, out_dtype)
    return (empty(x, x.shape, out_dtype), empty(x, (*x.shape[:-1], 1), torch.float32),
            empty(x, x.shape, x.dtype))


ADD_PER_TOKEN = Kernel(
    "add_rms_norm_quant_fp8_per_token",
    "(Tensor x, Tensor residual, Tensor weight, Tensor? scale_ub, float eps, "
    "float weight_offset, ScalarType out_dtype, bool round_sum=False, bool reciprocal=False, "
    "bool weight_f32=False) -> (Tensor, Tensor, Tensor)",
    _add_token_ref, _add_token_cuda, _add_token_fake,
    _sm90("0.55-0.88x Inductor's time at every size (H 4096 / 8192, T 1-16384; 2026-12-04)"))


# --- dynamic per-group -------------------------------------------------------------------------


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


def _group_ref(x, weight, eps, weight_offset, group_size, col_major, ue8m0, out_dtype,
               reciprocal=False, weight_f32=False):
    q, s, _ = norm_quant_ref.rms_norm_quant_fp8_group(x, weight, eps, weight_offset,
                                                      group_size, col_major, ue8m0, out_dtype,
                                                      reciprocal=reciprocal,
                                                      weight_f32=weight_f32)
    return contiguous(q), s


def _group_cuda(x, weight, eps, weight_offset, group_size, col_major, ue8m0, out_dtype,
                reciprocal=False, weight_f32=False):
    if dispatch.use_triton(GROUP, x, out_dtype) and _pow2(group_size):
        return kernels("norm_quant").rms_norm_quant_fp8_group(
            x, weight, eps, weight_offset, group_size, col_major, ue8m0, out_dtype,
            reciprocal=reciprocal, weight_f32=weight_f32)[:2]
    return _group_ref(x, weight, eps, weight_offset, group_size, col_major, ue8m0, out_dtype,
                      reciprocal, weight_f32)


def _group_fake(x, weight, eps, weight_offset, group_size, col_major, ue8m0, out_dtype,
                reciprocal=False, weight_f32=False):
    norm_quant_ref.check_norm_args(x, weight, None)
    check_fp8(x, out_dtype)
    quant_ref.check_group_size(x.shape[-1], group_size)
    return empty(x, x.shape, out_dtype), quant_ref.empty_group_scales(x, group_size, col_major)


GROUP = Kernel(
    "rms_norm_quant_fp8_group",
    "(Tensor x, Tensor weight, float eps, float weight_offset, int group_size, bool col_major, "
    "bool ue8m0, ScalarType out_dtype, bool reciprocal=False, bool weight_f32=False) "
    "-> (Tensor, Tensor)",
    _group_ref, _group_cuda, _group_fake,
    _sm90("the residual form's kernel without the residual (measured there: 0.30-0.70x "
          "Inductor); not measured alone"))


def _add_group_ref(x, residual, weight, eps, weight_offset, group_size, col_major, ue8m0,
                   out_dtype, round_sum=False, reciprocal=False, weight_f32=False):
    q, s, r = norm_quant_ref.rms_norm_quant_fp8_group(x, weight, eps, weight_offset, group_size,
                                                      col_major, ue8m0, out_dtype, residual,
                                                      round_sum=round_sum, reciprocal=reciprocal,
                                                      weight_f32=weight_f32)
    return contiguous(q), s, contiguous(r)


def _add_group_cuda(x, residual, weight, eps, weight_offset, group_size, col_major, ue8m0,
                    out_dtype, round_sum=False, reciprocal=False, weight_f32=False):
    if dispatch.use_triton(ADD_GROUP, x, out_dtype) and _pow2(group_size):
        return kernels("norm_quant").rms_norm_quant_fp8_group(
            x, weight, eps, weight_offset, group_size, col_major, ue8m0, out_dtype, residual,
            round_sum=round_sum, reciprocal=reciprocal, weight_f32=weight_f32)
    return _add_group_ref(x, residual, weight, eps, weight_offset, group_size, col_major, ue8m0,
                          out_dtype, round_sum, reciprocal, weight_f32)


def _add_group_fake(x, residual, weight, eps, weight_offset, group_size, col_major, ue8m0,
                    out_dtype, round_sum=False, reciprocal=False, weight_f32=False):
    norm_quant_ref.check_norm_args(x, weight, residual)
    check_fp8(x, out_dtype)
    quant_ref.check_group_size(x.shape[-1], group_size)
    return (empty(x, x.shape, out_dtype), quant_ref.empty_group_scales(x, group_size, col_major),
            empty(x, x.shape, x.dtype))


ADD_GROUP = Kernel(
    "add_rms_norm_quant_fp8_group",
    "(Tensor x, Tensor residual, Tensor weight, float eps, float weight_offset, int group_size, "
    "bool col_major, bool ue8m0, ScalarType out_dtype, bool round_sum=False, "
    "bool reciprocal=False, bool weight_f32=False) -> (Tensor, Tensor, Tensor)",
    _add_group_ref, _add_group_cuda, _add_group_fake,
    _sm90("0.30-0.70x Inductor's time at every size (group 128; H 4096 / 8192, T 1-16384; "
          "2026-12-04)"))

KERNELS = (STATIC, ADD_STATIC, PER_TOKEN, ADD_PER_TOKEN, GROUP, ADD_GROUP)


# --- lowering ------------------------------------------------------------------------------------


def _lower(op: fused.RmsNormQuantOp, platform: str) -> kernel.CallOp:
    scheme = op.scheme
    residual = op.residual
    k = FUSION.kernel_by_name[kernel_name(residual is not None, scheme.kind.data)]
    a = Args()
    template = [a.tensor(op.x)]
    if residual is not None:
        template.append(a.tensor(residual))
    assert op.weight is not None, "fuse-norm-quant only fuses norms with a weight"
    template.append(a.tensor(op.weight))
    eps, offset = FloatData(op.eps.value.data), FloatData(op.weight_offset.value.data)
    fp8 = op.qs[0].type.dtype  # type: ignore[union-attr]
    keywords: dict[str, Attribute] = {}
    if scheme.is_static:
        template += [a.tensors(list(op.scales)), eps, offset, fp8]
        if op.divide is not None:
            keywords["divide"] = aten.TRUE
    elif scheme.is_per_token:
        template += [a.optional(op.scale_ub), eps, offset, fp8]
    else:
        template += [eps, offset, IntAttr(scheme.group_size), flag(scheme.is_col_major),
                     flag(scheme.is_ue8m0), fp8]
    if op.round_sum is not None:
        keywords["round_sum"] = aten.TRUE
    if op.reciprocal is not None:
        keywords["reciprocal"] = aten.TRUE
    if op.weight_f32 is not None:
        keywords["weight_f32"] = aten.TRUE
    return kernel_call(k, a, template, op, platform, keywords)


FUSION = Fusion(
    name="fuse-norm-quant",
    flag="fuse_norm_quant",
    kind="fusion",
    fuses="(residual add +) RMSNorm -> FP8 quant",
    quant="required",
    schemes=FP8_SCHEMES,
    range_rule="all",
    platforms=everywhere("triton", 1),
    vllm_pass="RMSNormQuantFusionPass",
    patterns=(NormQuantPattern(),),
    lowerings={fused.RmsNormQuantOp.name: _lower},  # type: ignore[dict-item]
    kernels=KERNELS,
    size_aware=True,
)
