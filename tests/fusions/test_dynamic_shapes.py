"""`torch.compile(..., dynamic=True)` fuses what static shapes fuse.

Under `dynamic=True` Dynamo passes the Python floats a model reads (an RMSNorm's eps, a quant's
FP8 bound and minimum scale) as 0-d tensor inputs, and makes every size symbolic. irfuse reads a
lifted float as its traced value (the backend checks it on every call and runs the unrewritten
graph when it changes), so the Hugging Face decoders with FP8 linears and the built-in FP8 models
fuse every norm -> quant and SiLU·Mul -> quant site they fuse with static shapes, bit for bit
with eager.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hf_corpus import build_hf, input_ids, quantize_linears

from irfuse import models, support_matrix
from irfuse.testing import assert_bit_exact, compile_and_run

LAYERS = 2
BOTH = ("fuse_norm_quant", "fuse_act_quant")
OPTIONS = {"optimization_level": 2,
           "pass_config": {f: f in BOTH for f in support_matrix.FLAGS}}

pytestmark = pytest.mark.filterwarnings("ignore:irfuse.*eliminate_noops off")


def _hf(family: str) -> torch.nn.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_hf(family)
    quantize_linears(model)
    for module in model.modules():
        if hasattr(module, "input_scale"):
            module.input_scale.fill_(0.015)  # 1 / s inexact: a `y * (1 / s)` would show
    return model


def _fused(compiled) -> tuple[int, int]:
    (report,) = compiled.reports
    assert report.error is None
    return report.fused("fuse-norm-quant"), report.fused("fuse-act-quant")


@pytest.mark.parametrize("family", ["llama", "qwen3", "mistral"])
def test_hf_fp8_dynamic_true_fuses_like_static(family: str) -> None:
    model = _hf(family)
    static = compile_and_run(model, [input_ids()], dynamic=False, options=OPTIONS)
    dynamic = compile_and_run(model, [input_ids()], dynamic=True, options=OPTIONS)
    assert _fused(static) == (2 * LAYERS, LAYERS)
    assert _fused(dynamic) == _fused(static)
    (report,) = dynamic.reports
    assert report.raised["rms_norm"] + report.raised["add_rms_norm"] == (
        static.reports[0].raised["rms_norm"] + static.reports[0].raised["add_rms_norm"])
    assert_bit_exact(dynamic.outputs, dynamic.eager)
    assert_bit_exact(static.outputs, static.eager)


@pytest.mark.parametrize("name", ["llama-fp8", "llama-fp8-per-token", "qwen3-fp8-group128"])
def test_builtin_fp8_dynamic_true_fuses_like_mark_dynamic(name: str) -> None:
    built = models.build(name, size="tiny")
    inputs = list(built.example_inputs)
    opts = {"optimization_level": 2}
    marked = compile_and_run(built.model, inputs, options=opts,
                             dynamic_dims=list(built.dynamic_dims.items()))
    dynamic = compile_and_run(built.model, inputs, options=opts, dynamic=True)
    assert _fused(dynamic) == _fused(marked)
    assert _fused(dynamic)[0] == 2 * LAYERS
    (report,) = dynamic.reports
    assert report.raised == marked.reports[0].raised


def test_changed_lifted_eps_runs_the_unrewritten_graph() -> None:
    """The fused kernels read eps as traced; a new value at run time (Dynamo passes it without
    recompiling) must not be ignored: that call runs the graph as captured, with a warning."""
    model = _hf("llama")
    compiled = torch.compile(model, backend="irfuse", dynamic=True,
                             options={"inductor": False, "strict": True, **OPTIONS})
    ids = input_ids()
    with torch.no_grad():
        assert_bit_exact(compiled(ids), model(ids))
        norms = [m for m in model.modules() if hasattr(m, "variance_epsilon")]
        assert norms
        for norm in norms:
            norm.variance_epsilon = 0.5  # large enough to move every output
        with pytest.warns(UserWarning, match="traced as 1e-06"):
            out = compiled(ids)
        expected = model(ids)
        assert_bit_exact(out, expected)
        for norm in norms:
            norm.variance_epsilon = 1e-6
        again = compiled(ids)
        assert_bit_exact(again, model(ids))
        assert not torch.equal(out, again)
