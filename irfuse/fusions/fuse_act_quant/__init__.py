"""fuse_act_quant: SiLU·Mul -> FP8 (static, per-group) or NVFP4 quant in one kernel, on by
default from O1 everywhere: irfuse's Triton kernels beat Inductor's code for the pattern at every
size measured on the H200 (docs/benchmarks.md).

Kernels: `silu_mul_quant_fp8_static`, `silu_mul_quant_fp8_group`, `silu_mul_quant_nvfp4`. They
take `x = [gate | up]` [..., 2d], or gate `x` and `up` [..., d] apart (the optional last `up`);
the static one takes `divide` like the norm kernels.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntAttr

from irfuse.dialects import aten, fused, kernel
from irfuse.fusions.declare import Choice, Fusion, Kernel, everywhere
from irfuse.fusions.fuse_act_quant.pattern import ActQuantPattern
from irfuse.fusions.kernel_call import Args, flag, kernel_call
from irfuse.fusions.library_ops import silu_mul_fake
from irfuse.kernels import act_quant_ref, dispatch, quant_ref
from irfuse.kernels.dispatch import check_fp8, contiguous, empty, fake_nvfp4, kernels

_BENCH = "docs/benchmarks.md"


def _sm90(text: str) -> dict[str, tuple[tuple[int, Choice], ...]]:
    return {"cuda:sm90": ((1, Choice("triton", f"{_BENCH} (H200): {text}")),)}


def _static_ref(x, scale, out_dtype, up=None, divide=False):
    return contiguous(act_quant_ref.silu_mul_quant_fp8_static(x, scale, out_dtype, up,
                                                              divide=divide))


def _static_cuda(x, scale, out_dtype, up=None, divide=False):
    if dispatch.use_triton(STATIC, x, out_dtype):
        return kernels("act_quant").silu_mul_quant_fp8_static(x, scale, out_dtype, up,
                                                              divide=divide)
    return _static_ref(x, scale, out_dtype, up, divide)


def _static_fake(x, scale, out_dtype, up=None, divide=False):
    check_fp8(x, out_dtype)
    return empty(x, silu_mul_fake(x, up).shape, out_dtype)


STATIC = Kernel(
    "silu_mul_quant_fp8_static",
    "(Tensor x, Tensor scale, ScalarType out_dtype, Tensor? up=None, bool divide=False) "
    "-> Tensor",
    _static_ref, _static_cuda, _static_fake,
    _sm90("0.61-0.86x Inductor's time at every size (I 14336 / 28672, T 1-16384; 2026-12-04)"),
    single_tensor=True)


def _group_ref(x, group_size, col_major, ue8m0, out_dtype, up=None, reciprocal=False):
    q, s = act_quant_ref.silu_mul_quant_fp8_group(x, group_size, col_major, ue8m0, out_dtype,
                                                  up, reciprocal)
    return contiguous(q), s


def _group_cuda(x, group_size, col_major, ue8m0, out_dtype, up=None, reciprocal=False):
    if dispatch.use_triton(GROUP, x, out_dtype) and group_size & (group_size - 1) == 0:
        return kernels("act_quant").silu_mul_quant_fp8_group(
            x, group_size, col_major, ue8m0, out_dtype, up, reciprocal=reciprocal)
    return _group_ref(x, group_size, col_major, ue8m0, out_dtype, up, reciprocal)


def _group_fake(x, group_size, col_major, ue8m0, out_dtype, up=None, reciprocal=False):
    check_fp8(x, out_dtype)
    y = silu_mul_fake(x, up)
    quant_ref.check_group_size(y.shape[-1], group_size)
    return empty(x, y.shape, out_dtype), quant_ref.empty_group_scales(y, group_size, col_major)


GROUP = Kernel(
    "silu_mul_quant_fp8_group",
    "(Tensor x, int group_size, bool col_major, bool ue8m0, ScalarType out_dtype, "
    "Tensor? up=None, bool reciprocal=False) -> (Tensor, Tensor)",
    _group_ref, _group_cuda, _group_fake,
    _sm90("0.23-0.58x Inductor's time at every size (group 128; I 14336 / 28672, "
          "T 1-16384; 2026-12-04)"))


def _nvfp4_ref(x, global_scale, up=None):
    return act_quant_ref.silu_mul_quant_nvfp4(x, global_scale, up)


def _nvfp4_cuda(x, global_scale, up=None):
    if dispatch.use_triton(NVFP4, x):
        return kernels("nvfp4").silu_mul_quant_nvfp4(x, global_scale, up)
    return _nvfp4_ref(x, global_scale, up)


def _nvfp4_fake(x, global_scale, up=None):
    return fake_nvfp4(x, silu_mul_fake(x, up).shape[-1])


NVFP4 = Kernel(
    "silu_mul_quant_nvfp4", "(Tensor x, Tensor global_scale, Tensor? up=None) -> (Tensor, Tensor)",
    _nvfp4_ref, _nvfp4_cuda, _nvfp4_fake,
    _sm90("0.25-0.40x Inductor's time at every size (I 14336 / 28672, T 1-16384; 2026-12-04)"))


def _lower(op: fused.SiluMulQuantOp, platform: str) -> kernel.CallOp:
    scheme = op.scheme
    a = Args()
    fp8 = op.q.type.dtype  # type: ignore[union-attr]
    if scheme.is_static:
        assert op.scale is not None
        template = [a.tensor(op.x), a.tensor(op.scale), fp8]
        keywords = a.keyword("up", op.up)
        if op.divide is not None:
            keywords["divide"] = aten.TRUE
        return kernel_call(STATIC, a, template, op, platform, keywords)
    template = [a.tensor(op.x), IntAttr(scheme.group_size), flag(scheme.is_col_major),
                flag(scheme.is_ue8m0), fp8]
    keywords = a.keyword("up", op.up)
    if op.reciprocal is not None:
        keywords["reciprocal"] = aten.TRUE
    return kernel_call(GROUP, a, template, op, platform, keywords)


def _lower_nvfp4(op: fused.SiluMulQuantNvfp4Op, platform: str) -> kernel.CallOp:
    a = Args()
    template = [a.tensor(op.x), a.tensor(op.global_scale)]
    return kernel_call(NVFP4, a, template, op, platform, a.keyword("up", op.up))


FUSION = Fusion(
    name="fuse-act-quant",
    flag="fuse_act_quant",
    kind="fusion",
    fuses="SiLU*Mul -> FP8 or NVFP4 quant",
    quant="required",
    schemes=("fp8-static-tensor", "fp8-group-128", "fp8-group-64", "nvfp4"),
    range_rule="all",
    platforms=everywhere("triton", 1),
    vllm_pass="ActivationQuantFusionPass",
    patterns=(ActQuantPattern(),),
    lowerings={
        fused.SiluMulQuantOp.name: _lower,  # type: ignore[dict-item]
        fused.SiluMulQuantNvfp4Op.name: _lower_nvfp4,  # type: ignore[dict-item]
    },
    kernels=(STATIC, GROUP, NVFP4),
    size_aware=True,
)
