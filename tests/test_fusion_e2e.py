"""fuse-norm-quant and fuse-act-quant end to end: FP8 models (built-in, and Hugging Face models
with FP8 linears written outside irfuse) fuse every norm -> quant and SiLU·Mul -> quant site at
O2, the report says why the rest did not fuse, and the outputs stay close to eager."""

from __future__ import annotations

import pytest
from hf_corpus import build_hf, input_ids, quantize_linears

from irfuse import models
from irfuse.testing import compile_and_run

LAYERS = 2  # the tiny size


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
