"""raise-quant on real graphs: every FP8 / NVFP4 spelling is raised (exact counts), raising
changes no output bit, near misses are left alone with the expected remark.

The modules below write each quantization the way model code does: irfuse's built-in models
(`irfuse/models/quant.py`), the forms of vLLM's native quantizer (per-token amax by `max(dim=-1)`
in the model dtype then cast, `x * s.reciprocal()`, a `clamp(max=ub)` cap, per-group scales by
`max(-1, keepdim)`, `2 ** ceil(log2(s))`, a `transpose(-2, -1).contiguous().transpose(-1, -2)`
layout), and irfuse's custom ops.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from irfuse import models
from irfuse.dialects.quant import QuantScheme
from irfuse.lowering.raise_quant import (
    quant_op_scheme,
    support_matrix_scheme,
)
from irfuse.models import quant as Q
from irfuse.testing import assert_bit_exact, compile_and_run

FN, FNUZ = torch.float8_e4m3fn, torch.float8_e4m3fnuz
MIN_SCALE = 1.0 / (448.0 * 512.0)


class Quantize(nn.Module):
    """Runs `fn(self, x)`; holds the scales a quantizer may read as buffers (graph inputs)."""

    def __init__(self, fn, hidden: int = 256):
        super().__init__()
        self.fn = fn
        self.register_buffer("scale", torch.tensor([0.02]))
        self.register_buffer("inv_scale", torch.tensor([50.0]))
        self.register_buffer("scale_ub", torch.tensor([2.5]))
        self.register_buffer("channel_scale", torch.full((hidden,), 0.02))

    def forward(self, x):
        return self.fn(self, x)


def _x(*shape: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).mul(3).to(dtype)


def _run(fn, x: torch.Tensor | None = None):
    x = _x(16, 256) if x is None else x
    return compile_and_run(Quantize(fn, x.shape[-1]), [x])


def _quant_report(compiled):
    (report,) = {r.graph: r for r in compiled.reports}.values()
    (record,) = [p for p in report.raise_passes if p.name == "raise-quant"]
    return record


def _assert_raised(fn, count: int = 1, x: torch.Tensor | None = None, kind: str = "quant_fp8"):
    compiled = _run(fn, x)
    assert compiled.raised()[kind] == count, _quant_report(compiled).missed
    assert_bit_exact(compiled.outputs, compiled.eager)
    return compiled


def _assert_missed(fn, reason: str, x: torch.Tensor | None = None):
    compiled = _run(fn, x)
    assert compiled.raised()["quant_fp8"] == 0
    reasons = [m.reason for m in _quant_report(compiled).missed]
    assert any(reason in r for r in reasons), reasons
    assert_bit_exact(compiled.outputs, compiled.eager)


# --- spellings of vLLM's native quantizer, written out here --------------------------------------


def per_token_vllm_style(x, ub=None, bound=448.0, dtype=FN):
    amax, _ = x.abs().max(dim=-1)
    amax = amax.unsqueeze(-1).to(torch.float32)
    if ub is not None:
        amax = amax.clamp(max=ub)
    s = (amax / bound).clamp(min=1.0 / (bound * 512.0))
    return (x.to(torch.float32) * s.reciprocal()).clamp(-bound, bound).to(dtype), s


def per_tensor_vllm_style(x):
    amax = x.abs().max().unsqueeze(-1).to(torch.float32)
    s = (amax / 448.0).clamp(min=MIN_SCALE)
    return (x.to(torch.float32) * s.reciprocal()).clamp(-448.0, 448.0).to(FN), s


def group_vllm_style(x, g: int, col_major: bool, ue8m0: bool):
    t, h = x.shape
    xg = x.view(-1, h // g, g)
    amax = xg.abs().max(dim=-1, keepdim=True)[0].float()
    s = amax / 448.0
    if ue8m0:
        s = 2 ** torch.ceil(torch.log2(s))
    s = s.clamp(min=MIN_SCALE)
    q = (xg / s).clamp(-448.0, 448.0).to(FN).view(-1, h).view(x.shape)
    s = s.squeeze(-1).reshape(t, h // g)
    if col_major:
        s = s.transpose(-2, -1).contiguous().transpose(-1, -2)
    return q, s


def group_without_floor(x):
    """Per-group scales as vLLM's Triton kernel computes them: no MIN_SCALE floor."""
    xg = x.float().view(-1, 2, 128)
    s = xg.abs().amax(-1, keepdim=True).clamp_min(1e-10) / 448.0
    return (xg / s).clamp(-448.0, 448.0).to(FN).view(-1, 256)


STATIC = {
    "div-clamp": lambda m, x: Q.quant_fp8_static(x, m.scale),
    "reciprocal-clamp_minmax": lambda m, x: Q.quant_fp8_static(
        x, m.scale, scale_spelling="reciprocal", clamp_spelling="clamp_minmax"),
    "inv-scale-torch_max_min": lambda m, x: Q.quant_fp8_static(
        x, m.scale, inv_scale=m.inv_scale, scale_spelling="inv_scale", clamp_spelling="minmax"),
    "div-reversed-clamps": lambda m, x: (x.float() / m.scale).clamp_max(448.0).clamp_min(-448.0)
    .to(FN),
    "constant-in-forward": lambda m, x: (x.float() * torch.tensor([25.0], device=x.device))
    .clamp(-448.0, 448.0).to(FN),
    "promoted-by-scale": lambda m, x: (x / m.scale).clamp(-448.0, 448.0).to(FN),
}


def _bundle(table):
    """One module computing every quantizer of `table` (one compile for all of them)."""
    return lambda m, x: tuple(fn(m, x) for _, fn in sorted(table.items()))


def test_static_per_tensor():
    """Every static spelling, in f32 or cast to it, e4m3fn and e4m3fnuz; and an f32 model."""
    table = {**STATIC, "fnuz": lambda m, x: (x.float() / m.scale).clamp(-224.0, 224.0).to(FNUZ)}
    _assert_raised(_bundle(table), count=len(table))
    _assert_raised(lambda m, x: Q.quant_fp8_static(x, m.scale), x=_x(8, 64, dtype=torch.float32))


DYNAMIC = {
    "per-token": lambda m, x: Q.quant_fp8_per_token(x),
    "per-token-ub": lambda m, x: Q.quant_fp8_per_token(x, m.scale_ub),
    "per-token-vllm": lambda m, x: per_token_vllm_style(x),
    "per-token-vllm-ub": lambda m, x: per_token_vllm_style(x, m.scale_ub),
    "per-token-fnuz": lambda m, x: per_token_vllm_style(x, bound=224.0, dtype=FNUZ),
    "per-tensor": lambda m, x: Q.quant_fp8_per_tensor(x),
    "per-tensor-vllm": lambda m, x: per_tensor_vllm_style(x),
    "group128": lambda m, x: Q.quant_fp8_group(x, 128),
    "group64-col-ue8m0": lambda m, x: Q.quant_fp8_group(x, 64, col_major=True, ue8m0=True),
    "group128-vllm-col": lambda m, x: group_vllm_style(x, 128, True, False),
    "group64-vllm-ue8m0": lambda m, x: group_vllm_style(x, 64, False, True),
}


def test_dynamic():
    """Per-token (with and without scale_ub, e4m3fnuz), per-tensor and per-group spellings."""
    _assert_raised(_bundle(DYNAMIC), count=len(DYNAMIC))


def test_per_token_of_a_3d_activation():
    _assert_raised(lambda m, x: Q.quant_fp8_per_token(x, m.scale_ub), x=_x(2, 8, 256))


def test_schemes_in_the_ir():
    """The scheme attributes say what the chains do (read through the support-matrix names)."""
    import irfuse.pipeline as pipeline

    seen: list[str] = []
    original = pipeline.count_raised

    def spy(module):
        for op in module.walk():
            if op.name in ("quant.fp8", "quant.nvfp4"):
                scheme = quant_op_scheme(op)
                flags = [f for f in ("col_major", "ue8m0") if getattr(scheme, f"is_{f}")]
                seen.append("+".join([support_matrix_scheme(scheme), *flags]))
        return original(module)

    pipeline.count_raised = spy
    try:
        for fn in (DYNAMIC["per-token-ub"], DYNAMIC["per-tensor-vllm"],
                   DYNAMIC["group64-col-ue8m0"], DYNAMIC["group128-vllm-col"],
                   STATIC["inv-scale-torch_max_min"]):
            _run(fn)
    finally:
        pipeline.count_raised = original
    assert seen == ["fp8-dynamic-token", "fp8-dynamic-tensor", "fp8-group-64+col_major+ue8m0",
                    "fp8-group-128+col_major", "fp8-static-tensor"]


def test_support_matrix_names():
    assert support_matrix_scheme(QuantScheme.static_tensor()) == "fp8-static-tensor"
    assert support_matrix_scheme(QuantScheme.per_group(64, ue8m0=True)) == "fp8-group-64"
    assert support_matrix_scheme(QuantScheme.nvfp4()) == "nvfp4"


# --- custom ops ------------------------------------------------------------------------------------


def test_custom_ops():
    pytest.importorskip("irfuse.emit.custom_ops")
    ops = torch.ops.irfuse

    def all_fp8(m, x):
        return (ops.quant_fp8_static(x, m.scale), ops.quant_fp8_per_token(x, m.scale_ub),
                ops.quant_fp8_per_tensor(x), ops.quant_fp8_group(x, 128, True, True),
                ops.quant_fp8_group(x, 64))

    _assert_raised(all_fp8, count=5)
    _assert_raised(lambda m, x: ops.quant_nvfp4(x, m.scale), kind="quant_nvfp4")


# --- near misses ----------------------------------------------------------------------------------


MISSES = {
    "scale-computed-in-graph": (
        lambda m, x: Q.quant_fp8_static(x, m.scale * 2), "quant scale is not a graph input or constant"),
    "wrong-bound": (
        lambda m, x: (x.float() / m.scale).clamp(-240.0, 240.0).to(FN), "not ±448"),
    "fnuz-with-the-fn-bound": (
        lambda m, x: (x.float() / m.scale).clamp(-448.0, 448.0).to(FNUZ), "not ±224"),
    "no-clamp": (lambda m, x: (x.float() / m.scale).to(FN), "no clamp"),
    "cast-to-bf16": (
        lambda m, x: (x.float() / m.scale).clamp(-448.0, 448.0).to(torch.bfloat16),
        "but cast to bf16"),
    "per-channel-scale": (
        lambda m, x: (x.float() / m.channel_scale).clamp(-448.0, 448.0).to(FN),
        "quant scale has shape [256], not one element"),
    "scaled-in-bf16": (
        lambda m, x: (x / m.scale.reshape(())).clamp(-448.0, 448.0).to(FN), "not f32"),
    "per-token-without-floor": (
        lambda m, x: (x.float() / (x.float().abs().amax(-1, keepdim=True) / 448.0))
        .clamp(-448.0, 448.0).to(FN), "the per-token scale is computed as div"),
    "per-token-wrong-floor": (
        lambda m, x: (x.float() / (x.float().abs().amax(-1, keepdim=True) / 224.0)
                      .clamp_min(MIN_SCALE)).clamp(-224.0, 224.0).to(FNUZ),
        "not MIN_SCALE = 1 / (224 * 512)"),
    "group-without-floor": (lambda m, x: group_without_floor(x), "computed as div <- floor"),
    "amax-over-dim-0": (
        lambda m, x: (x.float() / (x.float().abs().amax(0, keepdim=True) / 448.0)
                      .clamp_min(MIN_SCALE)).clamp(-448.0, 448.0).to(FN),
        "reduces over dims [0]"),
    "scale-of-another-tensor": (
        lambda m, x: Q.quant_fp8_static(x, m.channel_scale.abs().amax().reshape(1)),
        "quant scale is not a graph input or constant"),
    "intermediate-used": (
        lambda m, x: (lambda y: (y.clamp(-448.0, 448.0).to(FN), y))(x.float() / m.scale),
        "is used outside it"),
}


def test_near_misses():
    """Each near miss is left alone (no quant raised, outputs exact) with its reason."""
    compiled = _run(_bundle({k: fn for k, (fn, _) in MISSES.items()}))
    assert compiled.raised()["quant_fp8"] == 0
    assert_bit_exact(compiled.outputs, compiled.eager)
    reasons = [m.reason for m in _quant_report(compiled).missed]
    for case, (_, reason) in MISSES.items():
        assert any(reason in r for r in reasons), (case, reason, reasons)


# --- built-in models -------------------------------------------------------------------------------

MODELS = ["llama-fp8-group64", "paged-index-copy", "llama-nvfp4"]  # more in test_raise_gemm
KINDS = ("quant_fp8", "quant_nvfp4", "gemm", "scaled_gemm")


@pytest.mark.parametrize("name", MODELS)
def test_models(name):
    """The raised quant and GEMM counts equal the model's own (one layer, to keep it quick)."""
    if models.MODELS[name].uses_custom_ops:
        pytest.importorskip("irfuse.emit.custom_ops")
    built = models.build(name, num_layers=1)
    compiled = compile_and_run(built.model, built.clone_inputs(),
                               dynamic_dims=tuple(built.dynamic_dims.items()))
    raised = compiled.raised()
    assert {k: raised[k] for k in KINDS} == {k: built.expected[k] for k in KINDS}
    assert built.expected["quant_fp8"] + built.expected["quant_nvfp4"] > 0
    assert_bit_exact(compiled.outputs, compiled.eager)
