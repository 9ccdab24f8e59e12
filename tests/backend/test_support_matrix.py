"""The support matrix: its rows are complete and consistent, and can_apply says why not."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from irfuse import support_matrix as sm
from irfuse.config import PassConfig
from irfuse.fusions import FUSIONS, declare
from irfuse.passes import PASSES
from irfuse.platform import Platform


def test_rows_are_the_declarations_and_each_flag_a_passconfig_field() -> None:
    rows = sm.passes()
    assert rows == FUSIONS and len({r.flag for r in rows}) == len(rows)
    assert sm.FUSION_FLAGS == tuple(r.flag for r in rows if r.kind == "fusion")
    assert sm.FLAGS == tuple(r.flag for r in rows)
    thresholds = [t.name for r in rows for t in r.thresholds]
    assert [f.name for f in fields(PassConfig)] == [
        name for r in rows for name in (r.flag, *(t.name for t in r.thresholds))]
    assert len(set(thresholds)) == len(thresholds)
    flags = {r.flag for r in rows}
    for row in rows:
        assert row.implies is None or row.implies in flags
        assert row.range_rule.threshold is None or row.range_rule.threshold in thresholds
        assert f"- {row.flag}: {row.doc}" in PassConfig.__doc__
    assert [r.flag for r in rows if r.removes_noops] == [
        r.flag for r in rows if r.kind == "utility"]


def test_rows_are_consistent() -> None:
    for row in sm.passes():
        assert row.name == row.flag.replace("_", "-")
        assert row.range_rule.kind in declare.RANGE_KINDS
        assert set(row.platforms) <= set(declare.PLATFORM_CLASSES) and row.platforms
        assert set(row.schemes) <= set(sm.SCHEMES)
        for sup in row.platforms.values():
            assert sup.default_level in (None, 1, 2, 3)
            assert sup.schemes is None or set(sup.schemes) <= set(row.schemes)
        assert row.quant != "required" or row.schemes
        assert row.fuses and row.unsupported
        # Every row is a pass irfuse-opt knows, with at least one pattern.
        assert row.name in PASSES and row.patterns


def test_pipeline_order_follows_vllm() -> None:
    """vLLM's order, except that QK norm + RoPE runs before RoPE + KV-cache write (which then
    takes the fused norms along); vLLM 0.32's QK norm + RoPE + KV write runs before both."""
    names = [r.name for r in sm.passes()]
    assert names.index("eliminate-noops") < names.index("enable-sp") < \
        names.index("fuse-gemm-comms") < names.index("fuse-allreduce-rms") < \
        names.index("fuse-norm-quant") < names.index("fuse-act-quant") < \
        names.index("fuse-qk-norm-rope-kvcache") < names.index("fuse-mla-dual-rms-norm") < \
        names.index("enable-qk-norm-rope-fusion") < names.index("fuse-rope-kvcache") < \
        names.index("fuse-rope-kvcache-cat-mla") < names.index("fuse-attn-quant")


def test_vllm_032_passes_are_opt_in_until_measured() -> None:
    """vLLM 0.32's three passes are rows, off at every level until measured on a GPU; MLA's
    RoPE + latent-cache write, measured on the H100, is on from O2 on sm90 (as vLLM's)."""
    for flag in ("fuse_qk_norm_rope_kvcache", "fuse_mla_dual_rms_norm",
                 "fuse_rope_kvcache_cat_mla"):
        row = sm.info(flag)
        assert row.vllm_pass
        measured = {"cuda:sm90": 2} if flag == "fuse_rope_kvcache_cat_mla" else {}
        assert {c: s.default_level for c, s in row.platforms.items()
                if s.default_level is not None} == measured


def test_info_by_name_or_flag() -> None:
    assert sm.info("fuse-norm-quant") is sm.info("fuse_norm_quant")
    with pytest.raises(ValueError, match="unknown pass 'fuse-everything'; known passes: "
                                         "eliminate-noops, enable-sp"):
        sm.info("fuse-everything")


@pytest.mark.parametrize(
    ("capability", "cls"),
    [(75, None), (80, "cuda:sm80"), (86, "cuda:sm80"), (89, "cuda:sm80"), (90, "cuda:sm90"),
     (100, "cuda:sm100"), (103, "cuda:sm100"), (120, "cuda:sm100")],
)
def test_platform_class(capability: int, cls: str | None) -> None:
    assert sm.platform_class(Platform("cuda", capability=capability)) == cls


def test_platform_class_cpu_rocm() -> None:
    assert sm.platform_class(Platform("cpu")) == "cpu"
    assert sm.platform_class(Platform("rocm", arch="gfx942")) == "rocm"


P = Platform.parse


@pytest.mark.parametrize(
    ("name", "platform", "scheme", "ok", "fragment"),
    [
        ("fuse-allreduce-rms", "rocm", None, False, "built for sm90 and sm100 only"),
        ("fuse-allreduce-rms", "cuda:sm90", None, True, ""),
        ("fuse-norm-quant", "cuda:sm90", "fp8-static-tensor", True, ""),
        ("fuse-norm-quant", "cuda:sm90", "nvfp4", False, "does not fuse nvfp4"),
        ("fuse-norm-quant", "cuda:sm90", "none", False, "not quantized"),
        ("fuse-norm-quant", "cuda:sm80", "fp8-static-tensor", False, "sm89 or newer"),
        ("fuse-norm-quant", "cuda:sm89", "fp8-dynamic-token", True, ""),
        ("fuse-norm-quant", "rocm:gfx90a", "fp8-group-128", False, "gfx942, gfx950"),
        ("fuse-norm-quant", "rocm:gfx942", "fp8-group-64", True, ""),
        ("fuse-norm-quant", "cpu", "fp8-group-64", True, ""),
        ("fuse-norm-quant", "cuda:sm75", None, False, "supports CUDA from sm80"),
        ("fuse-act-quant", "cuda:sm100", "nvfp4", True, ""),
        ("fuse-act-quant", "rocm", "nvfp4", False, "not supported on ROCm"),
        ("fuse-act-quant", "cuda:sm90", "fp8-dynamic-token", False, "does not fuse"),
        ("fuse-allreduce-rms", "rocm", None, False, "sm90 and sm100 only"),
        ("fuse-allreduce-rms", "cuda:sm80", "none", False, "sm90 and sm100 only"),
        ("fuse-allreduce-rms", "cuda:sm90", "nvfp4", True, "leaves the nvfp4 quant unfused"),
        ("fuse-allreduce-rms", "cuda:sm100", "nvfp4", True, ""),
        ("fuse-allreduce-rms", "cuda:sm90", "fp8-group-128", True, ""),
        ("fuse-allreduce-rms", "cuda:sm90", "fp8-dynamic-token", True, ""),
        ("fuse-allreduce-rms", "cuda:sm90", "none", True, ""),
        ("fuse-gemm-comms", "rocm", None, False, "peer-to-peer"),
        ("fuse-gemm-comms", "cpu", "fp8-static-tensor", True, ""),
        ("enable-sp", "cpu", "fp8-static-tensor", True, ""),
        ("enable-qk-norm-rope-fusion", "cpu", "nvfp4", True, ""),
        ("fuse-attn-quant", "cuda:sm90", "none", False, "not quantized"),
        ("eliminate-noops", "cuda:sm80", "fp8-static-tensor", True, ""),
    ],
)
def test_can_apply(name: str, platform: str, scheme: str | None, ok: bool, fragment: str) -> None:
    got, why = sm.can_apply(name, P(platform), scheme)
    assert got is ok
    if fragment:
        assert fragment in why
    else:
        assert why == ""


def test_can_apply_rejects_unknown_schemes() -> None:
    with pytest.raises(ValueError, match="unknown quant scheme 'int4'; known schemes: none"):
        sm.can_apply("fuse-norm-quant", P("cpu"), "int4")


def test_default_level_lookup() -> None:
    assert sm.default_level("fuse-norm-quant", P("cpu")) == 1
    assert sm.default_level("fuse-allreduce-rms", P("cuda:sm90")) == 2
    assert sm.default_level("fuse-allreduce-rms", P("cpu")) is None
    assert sm.default_level("fuse-allreduce-rms", P("rocm")) is None
    assert sm.support("fuse-allreduce-rms", P("cuda:sm100")).backend == "flashinfer"
    assert sm.support("fuse-norm-quant", P("cpu")).backend == "reference"


def test_a_fusion_without_patterns_is_refused() -> None:
    with pytest.raises(ValueError, match="declares no pattern"):
        replace(sm.info("fuse_norm_quant"), patterns=())
