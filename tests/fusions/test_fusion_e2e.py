"""fuse-norm-quant and fuse-act-quant end to end at O2: FP8 models (built-in, and Hugging Face
models with FP8 linears written outside irfuse) fuse every norm -> quant and SiLU·Mul -> quant
site, the report says why the rest did not fuse, and the outputs match eager bit for bit.

They match because the fused ops keep the model's arithmetic: a static quant spelled `x / s` gives
`divide`, and a residual added in the model dtype before the norm (Hugging Face's
`hidden = residual + hidden`, the built-in "hf" norm style) gives `round_sum` (the norm reads the
bf16 sum; vLLM's f32 add feeds it the f32 sum, docs/numerics.md). So the built-in FP8 models
(vLLM-style and HF-style norms; static, per-token and per-group quants; NVFP4; MLA) and the Hugging
Face Llama, Qwen3, Mistral and Gemma (GeGLU) models with FP8 linears match eager exactly. (Without
`round_sum` the Hugging Face logits moved by 0.4-2% RMS, llama-fp8-group64's and
qwen3-fp8-per-token's outputs by 3.5-3.8%.)"""

from __future__ import annotations

import pytest
from hf_corpus import build_hf, input_ids, quantize_linears

from irfuse import models
from irfuse.testing import (
    EVERY_PASS,
    assert_bit_exact,
    assert_nothing_silent,
    compile_and_run,
)

LAYERS = 2  # the tiny size


def _reasons(report, pass_name: str) -> list[str]:
    return [m.reason for p in report.passes if p.name == pass_name for m in p.missed]


# model -> (norm -> quant sites fused, SiLU·Mul -> quant sites fused, reason the act pass is off)
CASES = {
    # Per layer: the input norm feeds the qkv quant, the post-attention norm the gate_up quant.
    # vLLM-style norms (f32 residual add), static quant spelled `x / s` (qwen3-fp8:
    # `x * s.reciprocal()`). Multiplying by 1 / s instead moved llama-fp8 by 3% RMS.
    "llama-fp8": (2 * LAYERS, LAYERS, None),
    "llama-fp8-group128": (2 * LAYERS, LAYERS, None),
    # HF-style norms (bf16 residual add: `round_sum`) into the per-group kernels.
    "llama-fp8-group64": (2 * LAYERS, LAYERS, None),
    "qwen3-fp8": (2 * LAYERS, LAYERS, None),
    "qwen3-fp8-group128": (2 * LAYERS, LAYERS, None),
    # Per-token activation quant after SiLU·Mul has no fused kernel (vLLM has none either).
    "llama-fp8-per-token": (2 * LAYERS, 0, "fuse-act-quant does not fuse fp8-dynamic-token"),
    "qwen3-fp8-per-token": (2 * LAYERS, 0, "fuse-act-quant does not fuse fp8-dynamic-token"),
    # NVFP4: no norm + NVFP4 kernel; SiLU·Mul + NVFP4 fuses.
    "llama-nvfp4": (0, LAYERS, None),
    # The same, quantized in plain torch (raise-nvfp4 proves the chain NVFP4).
    "llama-nvfp4-native": (0, LAYERS, None),
    # MLA: the input norm and the q_a norm feed quants in each layer, twice per layer more.
    "mla-fp8-group128": (4 * LAYERS, LAYERS, None),
}


def _compile_o2(name: str, **overrides):
    built = models.build(name, size="tiny", **overrides)
    assert built.config.num_layers == LAYERS
    return compile_and_run(built.model, list(built.example_inputs),
                           dynamic_dims=list(built.dynamic_dims.items()),
                           options={"optimization_level": 2})


@pytest.mark.parametrize("name", sorted(CASES))
def test_builtin_fp8_models_fuse_every_site_bit_exact(name: str) -> None:
    norm_sites, act_sites, act_off = CASES[name]
    compiled = _compile_o2(name)
    (report,) = compiled.reports
    assert report.fused("fuse-norm-quant") == norm_sites
    assert report.fused("fuse-act-quant") == act_sites
    if act_off is not None:
        assert any(act_off in r for r in _reasons(report, "fuse-act-quant"))
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_o0_fuses_nothing() -> None:
    built = models.build("llama-fp8", size="tiny")
    compiled = compile_and_run(
        built.model, list(built.example_inputs), dynamic_dims=list(built.dynamic_dims.items())
    )
    (report,) = compiled.reports
    assert report.fused("fuse-norm-quant") == 0 and report.fused("fuse-act-quant") == 0
    assert report.raised["quant_fp8"] == 4 * LAYERS


@pytest.mark.parametrize("style", ["square", "functional", "hf"])  # "vllm": llama-fp8 above
def test_builtin_llama_fp8_is_bit_exact_in_every_norm_style(style: str) -> None:
    # "square" and "functional" multiply by the weight in float32 (rounded once): before the
    # fused kernels carried that reading (`weight_f32`), llama-fp8 with "square" moved by 0.129.
    compiled = _compile_o2("llama-fp8", norm_style=style)
    (report,) = compiled.reports
    assert report.fused("fuse-norm-quant") == 2 * LAYERS
    assert_bit_exact(compiled.outputs, compiled.eager)


@pytest.mark.filterwarnings("ignore:irfuse.*has no effect")  # the TP passes, on one process
@pytest.mark.parametrize("family", ["llama", "qwen3", "mistral", "gemma"])
def test_hf_fp8_models_fuse_every_site_bit_exact_with_nothing_silent(family: str) -> None:
    # Every pass on (O2's and every other fusion flag), so the corpus's no-silent-miss check
    # (tests/corpus/test_no_silent_miss.py) reads this compile too.
    model = build_hf(family)
    quantize_linears(model)
    # A scale whose reciprocal is inexact in float32 (1 / 0.05 rounds to 20 exactly, hiding the
    # spelling): with 0.015, quantizing `y * (1 / s)` instead of `y / s` changes the logits.
    for module in model.modules():
        if hasattr(module, "input_scale"):
            module.input_scale.fill_(0.015)
    compiled = compile_and_run(model, [input_ids()], dynamic_dims=[(0, 1)], options=EVERY_PASS)
    assert_nothing_silent(compiled)
    (report,) = compiled.reports
    # q/k/v (and gate/up) are separate FP8 linears: one residual add + norm feeds 3 (2) static
    # quants, which fuse into one kernel with 3 (2) outputs and `round_sum`; SiLU·Mul reads
    # separate gate and up tensors. Gemma's MLP is GeGLU (tanh GELU), which fuses as SiLU·Mul
    # does.
    assert report.fused("fuse-norm-quant") == 2 * LAYERS
    assert report.fused("fuse-act-quant") == LAYERS
    assert_bit_exact(compiled.outputs, compiled.eager)
