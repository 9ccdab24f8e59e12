"""fuse-norm-quant and fuse-act-quant end to end: FP8 models (built-in, and Hugging Face models
with FP8 linears written outside irfuse) fuse every norm -> quant and SiLU·Mul -> quant site at
O2, the report says why the rest did not fuse, and the outputs stay close to eager.

Fused, the models match eager bit for bit, because the fused ops keep the model's arithmetic: a
static quant spelled `x / s` gives `divide`, and a residual added in the model dtype before the
norm (Hugging Face's `hidden = residual + hidden`, the built-in "hf" norm style) gives `round_sum`
(the norm reads the bf16 sum; vLLM's f32 add feeds it the f32 sum, docs/numerics.md). So the built-in
FP8 models (vLLM-style and HF-style norms; static, per-token and per-group quants) and the Hugging
Face Llama, Qwen3, Mistral and Gemma (GeGLU) models with FP8 linears match eager exactly with the
norm and SiLU·Mul / GeGLU fusions. (Without `round_sum` the Hugging Face logits moved by 0.4-2% RMS,
llama-fp8-group64's and qwen3-fp8-per-token's outputs by 3.5-3.8%.)"""

from __future__ import annotations

import pytest
from hf_corpus import build_hf, input_ids, quantize_linears

from irfuse import models, support_matrix
from irfuse.testing import assert_bit_exact, compile_and_run

LAYERS = 2  # the tiny size


def _only(*flags: str) -> dict[str, bool]:
    """A pass_config with these fusion flags on and every other flag off."""
    return {flag: flag in flags for flag in support_matrix.FLAGS}


def _rel_err(compiled) -> float:
    (out, _), (ref, _) = compiled.outputs, compiled.eager
    return ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


def _reasons(report, pass_name: str) -> list[str]:
    return [m.reason for p in report.passes if p.name == pass_name for m in p.missed]


# model -> (norm -> quant sites fused, SiLU·Mul -> quant sites fused, reason the act pass is off)
CASES = {
    # Per layer: the input norm feeds the qkv quant, the post-attention norm the gate_up quant.
    "llama-fp8": (2 * LAYERS, LAYERS, None),
    "llama-fp8-group128": (2 * LAYERS, LAYERS, None),
    "llama-fp8-group64": (2 * LAYERS, LAYERS, None),
    "qwen3-fp8": (2 * LAYERS, LAYERS, None),
    "qwen3-fp8-group128": (2 * LAYERS, LAYERS, None),
    # Per-token activation quant after SiLU·Mul has no fused kernel (vLLM has none either).
    "llama-fp8-per-token": (2 * LAYERS, 0, "fuse-act-quant does not fuse fp8-dynamic-token"),
    # NVFP4: no norm + NVFP4 kernel; SiLU·Mul + NVFP4 fuses.
    "llama-nvfp4": (0, LAYERS, None),
    # The same, quantized in plain torch (raise-nvfp4 proves the chain NVFP4).
    "llama-nvfp4-native": (0, LAYERS, None),
    # MLA: the input norm and the q_a norm feed quants in each layer, twice per layer more.
    "mla-fp8-group128": (4 * LAYERS, LAYERS, None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_builtin_fp8_models_fuse_every_site(name: str) -> None:
    norm_sites, act_sites, act_off = CASES[name]
    built = models.build(name, size="tiny")
    assert built.config.num_layers == LAYERS
    compiled = compile_and_run(
        built.model,
        list(built.example_inputs),
        dynamic_dims=list(built.dynamic_dims.items()),
        options={"optimization_level": 2},
    )
    (report,) = compiled.reports
    assert report.fused("fuse-norm-quant") == norm_sites
    assert report.fused("fuse-act-quant") == act_sites
    if act_off is not None:
        assert any(act_off in r for r in _reasons(report, "fuse-act-quant"))
    assert _rel_err(compiled) < 5e-2


@pytest.mark.parametrize("family", ["llama", "qwen3", "mistral"])
def test_hf_models_with_fp8_linears_fuse_every_site(family: str) -> None:
    model = build_hf(family)
    quantize_linears(model)
    compiled = compile_and_run(
        model, [input_ids()], dynamic_dims=[(0, 1)], options={"optimization_level": 2}
    )
    (report,) = compiled.reports
    # q/k/v (and gate/up) are separate FP8 linears: one norm feeds 3 (2) static quants, which
    # fuse into one kernel with 3 (2) outputs; SiLU·Mul reads separate gate and up tensors.
    assert report.fused("fuse-norm-quant") == 2 * LAYERS
    assert report.fused("fuse-act-quant") == LAYERS
    assert _rel_err(compiled) < 5e-2


def test_o0_fuses_nothing() -> None:
    built = models.build("llama-fp8", size="tiny")
    compiled = compile_and_run(
        built.model, list(built.example_inputs), dynamic_dims=list(built.dynamic_dims.items())
    )
    (report,) = compiled.reports
    assert report.fused("fuse-norm-quant") == 0 and report.fused("fuse-act-quant") == 0
    assert report.raised["quant_fp8"] == 4 * LAYERS


BOTH = ("fuse_norm_quant", "fuse_act_quant")


# Without eliminate-noops the backend warns that reshapes may hide patterns; none do here.
@pytest.mark.filterwarnings("ignore:irfuse.*eliminate_noops off")
@pytest.mark.parametrize(
    "name,flags,act_sites",
    [
        # vLLM-style norms (f32 residual add), static quant spelled `x / s` (qwen3-fp8:
        # `x * s.reciprocal()`). Multiplying by 1 / s instead moved llama-fp8 by 3% RMS.
        pytest.param("llama-fp8", BOTH, LAYERS, id="llama-fp8"),
        pytest.param("qwen3-fp8", BOTH, LAYERS, id="qwen3-fp8"),
        # HF-style norms (bf16 residual add: `round_sum`) into the per-group kernels ...
        pytest.param("llama-fp8-group64", BOTH, LAYERS, id="llama-fp8-group64"),
        # ... and the per-token kernel (per-token SiLU·Mul quant has no fused kernel).
        pytest.param("qwen3-fp8-per-token", ("fuse_norm_quant",), 0, id="qwen3-fp8-per-token"),
    ],
)
def test_builtin_fp8_models_fused_are_bit_exact(
    name: str, flags: tuple[str, ...], act_sites: int
) -> None:
    built = models.build(name, size="tiny")
    compiled = compile_and_run(
        built.model,
        list(built.example_inputs),
        dynamic_dims=list(built.dynamic_dims.items()),
        options={"optimization_level": 2, "pass_config": _only(*flags)},
    )
    (report,) = compiled.reports
    assert report.fused("fuse-norm-quant") == 2 * LAYERS
    assert report.fused("fuse-act-quant") == act_sites
    assert_bit_exact(compiled.outputs, compiled.eager)


@pytest.mark.filterwarnings("ignore:irfuse.*eliminate_noops off")
@pytest.mark.parametrize("style", ["square", "functional", "hf", "vllm"])
def test_builtin_llama_fp8_is_bit_exact_in_every_norm_style(style: str) -> None:
    # "square" and "functional" multiply by the weight in float32 (rounded once): before the
    # fused kernels carried that reading (`weight_f32`), llama-fp8 with "square" moved by 0.129.
    built = models.build("llama-fp8", size="tiny", norm_style=style)
    compiled = compile_and_run(
        built.model,
        list(built.example_inputs),
        dynamic_dims=list(built.dynamic_dims.items()),
        options={"optimization_level": 2, "pass_config": _only(*BOTH)},
    )
    (report,) = compiled.reports
    assert report.fused("fuse-norm-quant") == 2 * LAYERS
    assert_bit_exact(compiled.outputs, compiled.eager)


@pytest.mark.filterwarnings("ignore:irfuse.*eliminate_noops off")
@pytest.mark.parametrize("family", ["llama", "qwen3", "mistral", "gemma"])
def test_hf_fp8_models_fused_are_bit_exact(family: str) -> None:
    model = build_hf(family)
    quantize_linears(model)
    # A scale whose reciprocal is inexact in float32 (1 / 0.05 rounds to 20 exactly, hiding the
    # spelling): with 0.015, quantizing `y * (1 / s)` instead of `y / s` changes the logits.
    for module in model.modules():
        if hasattr(module, "input_scale"):
            module.input_scale.fill_(0.015)
    compiled = compile_and_run(
        model,
        [input_ids()],
        dynamic_dims=[(0, 1)],
        options={"optimization_level": 2, "pass_config": _only(*BOTH)},
    )
    (report,) = compiled.reports
    # Every residual add + norm feeds quants (q/k/v or gate/up) and fuses with `round_sum`;
    # Gemma's MLP is GeGLU (tanh GELU), which fuses as SiLU·Mul does.
    assert report.fused("fuse-norm-quant") == 2 * LAYERS
    assert report.fused("fuse-act-quant") == LAYERS
    assert_bit_exact(compiled.outputs, compiled.eager)
