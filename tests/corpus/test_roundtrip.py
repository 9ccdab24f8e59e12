"""The empty pipeline is exact: with fusions and Inductor off, every model in the corpus gives
bit-identical outputs to eager, including with dynamic num_tokens and at a second size."""

from __future__ import annotations

import pytest
import torch
from hf_corpus import FAMILIES, build_hf, input_ids, quantize_linears

from irfuse import backend, models
from irfuse.models.dist import fake_process_group
from irfuse.testing import assert_bit_exact, compile_and_run


def _check(compiled) -> None:
    (out, compiled_inputs), (eager, eager_inputs) = compiled.outputs, compiled.eager
    assert_bit_exact(out, eager)
    assert_bit_exact(compiled_inputs, eager_inputs, "mutated inputs")
    assert all(r.error is None for r in compiled.reports), [r.error for r in compiled.reports]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
def test_hf_models_exact(family: str, fp8: bool) -> None:
    model = build_hf(family)
    if fp8:
        assert quantize_linears(model) == 14
    compiled = compile_and_run(model, [input_ids()], dynamic_dims=[(0, 1)])
    _check(compiled)
    # A second num_tokens runs the same (dynamic) compiled graph, without a recompile: exact.
    other = input_ids(5, seed=2)
    with torch.no_grad():
        again = compiled.module(other)
        assert_bit_exact(again, model(other))
    assert len(backend.reports()) == len(compiled.reports), "a second num_tokens recompiled"


def _builtin_names() -> list[str]:
    return sorted(models.MODELS)


@pytest.mark.parametrize("name", _builtin_names())
def test_builtin_models_exact(name: str) -> None:
    spec = models.MODELS[name]
    if spec.distributed:
        with fake_process_group(2):
            built = models.build(name, size="tiny")
            compiled = compile_and_run(
                built.model, list(built.example_inputs), dynamic_dims=list(built.dynamic_dims.items())
            )
    else:
        try:
            built = models.build(name, size="tiny")
        except models.CustomOpsUnavailable as err:
            pytest.skip(str(err))
        compiled = compile_and_run(
            built.model, list(built.example_inputs), dynamic_dims=list(built.dynamic_dims.items())
        )
    _check(compiled)
