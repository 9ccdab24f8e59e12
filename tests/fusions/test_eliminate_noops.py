"""eliminate-noops on real graphs, at parity with vLLM's own no-op test: chains of reshapes
collapse to one, a slice of the whole dim (also `b[0:b.shape[0]]` under dynamic shapes) and a
slice_scatter that writes a whole tensor go, and what changes values stays. The counts are read
from the IR after the pass; the outputs must equal eager's bit for bit.
"""

from __future__ import annotations

import pathlib

import pytest
import torch
from torch import nn

from irfuse.testing import assert_bit_exact, compile_and_run

RESHAPES = ('"aten::view.default"', '"aten::reshape.default"', '"aten::_unsafe_view.default"')


class NoopModel(nn.Module):
    """vLLM's test model's shape: reshapes that cancel, full slices and a full slice_scatter,
    then one real reshape and one real slice."""

    def forward(self, x):
        t, h = x.shape
        a = x.view(t, h // 2, 2).view(t, 2, h // 2).reshape(t, h)  # a chain back to x's shape
        b = a[0 : a.shape[0]]  # the whole token dim
        c = torch.slice_scatter(torch.zeros_like(b), b, 0, 0, b.shape[0])  # writes all of b
        d = (c * 2).reshape(-1, 2, h // 2)  # one real reshape
        return d[:, :, : h // 4] + 1  # one real slice


def _after_pass(dump: pathlib.Path) -> list[str]:
    (stage,) = dump.glob("run-*/graph_*/*-eliminate-noops.mlir")
    return [line for line in stage.read_text().splitlines() if "aten.call" in line]


@pytest.mark.parametrize("tokens", [256, 1024])
@pytest.mark.parametrize("hidden", [64, 4096])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_vllm_noop_parity(tmp_path, tokens, hidden, dtype):
    x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(0)).to(dtype)
    compiled = compile_and_run(NoopModel(), [x], options={
        "optimization_level": 1, "dump_dir": str(tmp_path)})
    assert_bit_exact(compiled.outputs, compiled.eager)
    calls = _after_pass(tmp_path)
    assert sum(any(r in c for r in RESHAPES) for c in calls) == 1, calls
    assert sum('"aten::slice.Tensor"' in c for c in calls) == 1, calls
    assert not any('"aten::slice_scatter.default"' in c for c in calls), calls


class VllmNoopModel(nn.Module):
    """vLLM's own no-op test model (tests/compile/test_noop_elimination.py): reshapes, a whole
    slice, and a whole slice_scatter returned: the graph's output is the scatter."""

    def forward(self, x):
        y = x.reshape(-1, 128, 32)
        z = y.reshape(-1, 4096)
        a = z.reshape(-1, 4096)
        b = a.reshape(-1, 128, 32)
        c = b[0:b.shape[0]]
        return torch.slice_scatter(torch.ones_like(c), c, 0, 0, c.shape[0])


class ScatterOfFresh(nn.Module):
    """A returned whole slice_scatter of a computed (fresh) source."""

    def forward(self, x):
        c = x * 2 + 1
        return torch.slice_scatter(torch.zeros_like(c), c, 0, 0, c.shape[0])


@pytest.mark.parametrize("model, copies", [(VllmNoopModel, 1), (ScatterOfFresh, 0)],
                         ids=["source_is_a_view_of_the_input", "fresh_source"])
def test_a_returned_whole_slice_scatter_goes(tmp_path, model, copies):
    # It was kept (a returned value was left alone). A source that is a view of the input is
    # copied (the caller must not get the input's storage), a fresh one is returned itself.
    x = torch.randn(256, 4096, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    compiled = compile_and_run(model(), [x], options={
        "optimization_level": 1, "dump_dir": str(tmp_path)})
    assert_bit_exact(compiled.outputs, compiled.eager)
    (out, (x_in,)) = compiled.outputs
    assert out.data_ptr() != x_in.data_ptr()
    calls = _after_pass(tmp_path)
    assert not any('"aten::slice_scatter.default"' in c for c in calls), calls
    assert sum('"aten::clone.default"' in c for c in calls) == copies, calls
