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
import torch.nn.functional as F
from torch import nn

from irfuse import models
from irfuse.dialects.quant import QuantScheme
from irfuse.models import quant as Q
from irfuse.raising.raise_quant import (
    quant_op_scheme,
    support_matrix_scheme,
)
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
        self.register_buffer("global_scale", torch.tensor([300.0]))  # NVFP4: 448 * 6 / amax

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


# --- NVFP4 written in torch ----------------------------------------------------------------------


def _nvfp4_x() -> torch.Tensor:
    """bf16 [16, 256] activations with the corner cases of NVFP4: an all-zero block, a block
    whose scale rounds to 0 (guarded), -0.0, values on the e2m1 rounding boundaries."""
    x = _x(16, 256)
    x[0, :16] = 0.0
    x[1, 16:32] = 1e-6
    x[2, 32:48] = -0.0
    boundaries = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0])
    x[3, :16] = torch.cat([boundaries, -boundaries]) * (2688.0 / 6.0 / 300.0)  # sb = 2688 / 6
    return x


def nvfp4_reciprocal_style(x, gs, *, bound=6.0, block=16, sign_by_signbit=False,
                           round_ties_up=False, guard=True, swizzle=True, hi_low=False,
                           bump=None):
    """NVFP4 spelled another way than the built-in model (after the way vLLM's tests write
    their reference): keepdim `max(-1)[0]` in the model dtype, `gs * (amax * (1 / 6))` clamped
    above only, `x * reciprocal(sb * (1 / gs))` with a zero guard on the reciprocal, the
    rounding as a chain of `where`s on |v| returning int64 codes, the sign as `(v < 0) * 8`,
    step-2 slices packed with `|`, `F.pad` and a 6-d tiling for the swizzle. `bump`: both
    reciprocals as vLLM's `get_reciprocal` computes them, `1 / (t + (t == 0) * bump)` (no
    select; its emulation uses 1e8). The other keyword arguments make the near misses."""
    m, n = x.shape
    k = n // block
    xb = x.reshape(m, k, block)
    amax = torch.max(xb.abs(), dim=-1, keepdim=True)[0].to(torch.float32)
    sb = (gs * (amax * (1.0 / bound))).clamp(max=448.0).to(FN)
    sb32 = sb.to(torch.float32)
    if bump is not None:
        per_gs = sb32 * (1.0 / (gs + (gs == 0) * bump))
        inverse = 1.0 / (per_gs + (per_gs == 0) * bump)
    else:
        per_gs = sb32 * gs.reciprocal()
        inverse = per_gs.reciprocal()
    if guard and bump is None:
        inverse = torch.where(per_gs == 0, torch.zeros_like(per_gs), inverse)
    v = (xb.to(torch.float32) * inverse).clamp(-6.0, 6.0).reshape(m, n)
    a = v.abs()
    below = (lambda t: a < t) if round_ties_up else (lambda t: a <= t)
    code = torch.where(below(0.25), 0, torch.where(a < 0.75, 1, torch.where(a <= 1.25, 2,
           torch.where(a < 1.75, 3, torch.where(a <= 2.5, 4, torch.where(a < 3.5, 5,
           torch.where(a <= 5.0, 6, 7)))))))
    sign = torch.signbit(v) if sign_by_signbit else v < 0
    code = code + sign.to(torch.int64) * 8
    even, odd = code[:, 0::2], code[:, 1::2]
    packed = ((even << 4) | odd if hi_low else even | (odd << 4)).to(torch.uint8)
    if not swizzle:
        return packed, sb
    mp, kp = (m + 127) // 128 * 128, (k + 3) // 4 * 4
    padded = F.pad(sb32.reshape(m, k), (0, kp - k, 0, mp - m))
    tiles = padded.reshape(1, mp // 128, 4, 32, kp // 4, 4).permute(0, 1, 4, 3, 2, 5)
    return packed, tiles.reshape(mp, kp).to(FN)


NVFP4 = {
    "model": lambda m, x: Q.quant_nvfp4(x, m.global_scale),
    "reciprocal-style": lambda m, x: nvfp4_reciprocal_style(x, m.global_scale),
    "reciprocal-style-signbit": lambda m, x: nvfp4_reciprocal_style(
        x, m.global_scale, sign_by_signbit=True),
    "reciprocal-style-get-reciprocal": lambda m, x: nvfp4_reciprocal_style(
        x, m.global_scale, bump=1e8),
}


def test_nvfp4_in_torch():
    """The built-in model's NVFP4 and another spelling raise to quant.nvfp4, bit-exact."""
    compiled = _assert_raised(_bundle(NVFP4), count=len(NVFP4), x=_nvfp4_x(), kind="quant_nvfp4")
    assert compiled.raised()["quant_fp8"] == 0
    # The other spelling rounds `x * (1 / (sb / gs))`, not `x * gs / sb`: on these inputs (ties
    # exact) it gives the same codes (the kernels compute docs/numerics.md's spelling).
    # Only the sign of the -0.0 block differs: `v < 0` encodes -0 as +0, `signbit` as 0x8.
    by_name = dict(zip(sorted(NVFP4), compiled.outputs[0], strict=True))
    q_model, scales_model = by_name["model"]
    for name in ("reciprocal-style", "reciprocal-style-signbit",
                 "reciprocal-style-get-reciprocal"):
        q, scales = by_name[name]
        assert torch.equal(scales.view(torch.uint8), scales_model.view(torch.uint8)), name
        differ = (q != q_model).nonzero().tolist()
        zero_block = [[2, col] for col in range(16, 24)]  # x[2, 32:48] = -0.0, two per byte
        assert differ == ([] if name.endswith("signbit") else zero_block), name


NVFP4_MISSES = {
    "blocks-of-32": (lambda m, x: nvfp4_reciprocal_style(x, m.global_scale, block=32),
                     "blocks of 32 values, not NVFP4's 16"),
    "divided-by-4": (lambda m, x: nvfp4_reciprocal_style(x, m.global_scale, bound=4.0),
                     "not gs * amax / 6"),
    "no-zero-guard": (lambda m, x: nvfp4_reciprocal_style(x, m.global_scale, guard=False),
                      "blocks whose scale is 0 are not guarded"),
    "ties-away-from-zero": (
        lambda m, x: nvfp4_reciprocal_style(x, m.global_scale, round_ties_up=True),
        "(round to nearest, ties to even)"),
    "rounded-arithmetically": (
        lambda m, x: (lambda q, s: (q, s))(*_nvfp4_rounded(x, m.global_scale)),
        "irfuse proves roundings written as comparisons"),
    "high-nibble-first": (lambda m, x: nvfp4_reciprocal_style(x, m.global_scale, hi_low=True),
                          "the odd codes are not shifted to the high nibble"),
    "not-swizzled": (lambda m, x: nvfp4_reciprocal_style(x, m.global_scale, swizzle=False),
                     "the block scales are not swizzled"),
    "small-bump": (lambda m, x: nvfp4_reciprocal_style(x, m.global_scale, bump=0.5),
                   "adds to the block scale (not a guard for zero scales)"),
}


def _nvfp4_rounded(x, gs):
    """The model's NVFP4 with the magnitude rounded arithmetically (`round(2|v|)` below 2,
    ...): right, but not a spelling irfuse proves."""
    m, n = x.shape
    xb = x.float().view(m, n // 16, 16)
    sb = (gs * xb.abs().amax(-1) / 6.0).clamp(-448.0, 448.0).to(FN)
    s32 = sb.float()
    v = (xb * gs / torch.where(s32 == 0, torch.ones_like(s32), s32).unsqueeze(-1)).clamp(-6, 6)
    a = v.abs()
    code = torch.where(a < 2, torch.round(a * 2), torch.where(a < 4, torch.round(a) + 2,
                                                               torch.round(a / 2) + 4))
    code = code.to(torch.uint8) | (torch.signbit(v).to(torch.uint8) << 3)
    pairs = code.view(m, n // 2, 2)
    packed = pairs[..., 0] | (pairs[..., 1] << 4)
    return packed, Q.swizzle_block_scales(sb.float()).to(FN)


def test_nvfp4_near_misses():
    """Each NVFP4 near miss is left alone (outputs exact) with its reason."""
    compiled = _run(_bundle({k: fn for k, (fn, _) in NVFP4_MISSES.items()}), _nvfp4_x())
    assert compiled.raised()["quant_nvfp4"] == 0 and compiled.raised()["quant_fp8"] == 0
    assert_bit_exact(compiled.outputs, compiled.eager)
    reasons = [m.reason for m in _quant_report(compiled).missed]
    for case, (_, reason) in NVFP4_MISSES.items():
        assert any(reason in r for r in reasons), (case, reason, reasons)


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
}
# An intermediate value also used outside the quant is no miss: it is a pure op, cloned into the
# region (tests/raising/test_raise_after_cse.py).


def test_near_misses():
    """Each near miss is left alone (no quant raised, outputs exact) with its reason."""
    compiled = _run(_bundle({k: fn for k, (fn, _) in MISSES.items()}))
    assert compiled.raised()["quant_fp8"] == 0
    assert_bit_exact(compiled.outputs, compiled.eager)
    reasons = [m.reason for m in _quant_report(compiled).missed]
    for case, (_, reason) in MISSES.items():
        assert any(reason in r for r in reasons), (case, reason, reasons)


# --- built-in models -------------------------------------------------------------------------------

MODELS = [  # more in test_raise_gemm
    "llama-fp8-group64", "paged-index-copy", "llama-nvfp4", "llama-nvfp4-native",
]
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
