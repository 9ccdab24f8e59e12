"""cse-pure on imported graphs: aot_autograd leaves duplicates, the pass merges them exactly, a
duplicated cast that blocks the RMSNorm raise stops blocking it, and the pass shows in the dump
and the report like every pass.

The pipeline runs `CANONICALIZE_PASSES` right before raising; cse-pure is in it by default
(`tests/raising/test_raise_after_cse.py` checks what raising does with the values it makes shared). The
fixtures below set the list explicitly, so each test says which pipeline it runs.
"""

from __future__ import annotations

import json
import pathlib

import pytest
import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from irfuse import models, pipeline, remarks
from irfuse.context import make_context
from irfuse.raising.cse_pure import CsePure
from irfuse.testing import assert_bit_exact, compile_and_run

CSE = ("cse-pure",)


@pytest.fixture
def with_cse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "CANONICALIZE_PASSES", CSE)


@pytest.fixture
def without_cse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "CANONICALIZE_PASSES", ())


class Duplicates(torch.nn.Module):
    """Six duplicate computations, as model code writes them: a cast taken twice, an eps add and
    its rsqrt taken twice, a scale's reciprocal taken twice, the same view twice (and a product
    that only becomes a duplicate once the cast and the rsqrt have merged)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = x.to(torch.float32)
        var = a.pow(2).mean(-1, keepdim=True)
        r1 = torch.rsqrt(var + 1e-6)
        b = x.to(torch.float32)
        r2 = torch.rsqrt(var + 1e-6)
        y = (a * r1).to(torch.bfloat16) + (b * r2 * self.scale.reciprocal()
                                           * self.scale.reciprocal()).to(torch.bfloat16)
        return y.view(-1, 64) + y.view(-1, 64)


class CastTwiceNorm(torch.nn.Module):
    """An RMSNorm that casts its input to float32 twice: once for the variance, once for the
    product (the two casts are two values until cse-pure merges them)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, dtype=torch.bfloat16))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        variance = h.to(torch.float32).pow(2).mean(-1, keepdim=True)
        normed = h.to(torch.float32) * torch.rsqrt(variance + 1e-6)
        return self.weight * normed.to(h.dtype)


def _x() -> torch.Tensor:
    return torch.randn(6, 64, dtype=torch.bfloat16)


def test_aot_autograd_leaves_duplicates_and_the_pass_merges_them(with_cse) -> None:
    compiled = compile_and_run(Duplicates(), [_x()])
    assert_bit_exact(compiled.outputs, compiled.eager)
    # _to_copy, add, rsqrt, mul, reciprocal, view: every duplicate reached the backend.
    assert compiled.fused("cse-pure") == 6


def test_a_duplicated_cast_blocks_the_norm_raise(without_cse) -> None:
    compiled = compile_and_run(CastTwiceNorm(), [_x()])
    assert_bit_exact(compiled.outputs, compiled.eager)
    assert compiled.raised()["rms_norm"] == 0
    (report,) = compiled.reports
    reasons = [m.reason for p in report.raise_passes if p.name == "raise-rms-norm"
               for m in p.missed]
    assert reasons == ["not an RMSNorm: the rstd does not scale the normalized value"]


def test_cse_pure_unblocks_the_norm_raise(with_cse) -> None:
    compiled = compile_and_run(CastTwiceNorm(), [_x()])
    assert_bit_exact(compiled.outputs, compiled.eager)
    assert compiled.raised()["rms_norm"] == 1
    assert compiled.fused("cse-pure") == 1


def _calls(path: pathlib.Path) -> int:
    return path.read_text().count("aten.call ")


def test_built_in_model_dump_and_report(with_cse, tmp_path: pathlib.Path) -> None:
    """Qwen3 unsqueezes the rotary cos and sin in every layer: each layer after the first loses
    those two calls; nothing else is duplicated, and the raised counts stay the model's."""
    built = models.build("qwen3", size="tiny")
    compiled = compile_and_run(built.model, built.example_inputs,
                               dynamic_dims=tuple(built.dynamic_dims.items()),
                               options={"dump_dir": str(tmp_path)})
    assert_bit_exact(compiled.outputs, compiled.eager)
    merged = 2 * (built.config.num_layers - 1)
    assert compiled.fused("cse-pure") == merged
    raised = compiled.raised()
    assert {k: raised[k] for k in built.expected} == built.expected

    (folder,) = [p.parent for p in tmp_path.rglob("report.json")]
    names = sorted(p.name for p in folder.iterdir())
    assert names[2:4] == ["02-import.mlir", "03-cse-pure.mlir"]
    assert names[4] == f"04-{pipeline.RAISE_PASSES[0]}.mlir"
    assert _calls(folder / "02-import.mlir") - _calls(folder / "03-cse-pure.mlir") == merged
    report = json.loads((folder / "report.json").read_text())
    assert report["passes"][0] == {
        "name": "cse-pure", "fused": merged, "not_fused": [], "ms": report["passes"][0]["ms"],
    }


NEAR_MISSES = """
func.func @f(%x: !irfuse.tensor<[4], f32>, %s: !irfuse.tensor<[4], f32>) -> (!irfuse.tensor<[4], f32>, !irfuse.tensor<[4], f32>) {
  %r1 = aten.call "aten::rand_like.default"(%x) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %r2 = aten.call "aten::rand_like.default"(%x) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %e1 = aten.call "aten::empty_like.default"(%x) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %e2 = aten.call "aten::empty_like.default"(%x) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %i1 = aten.call "aten::reciprocal.default"(%s) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %c = aten.call "aten::copy_.default"(%s, %x) : (!irfuse.tensor<[4], f32>, !irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %i2 = aten.call "aten::reciprocal.default"(%s) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %i3 = aten.call "aten::reciprocal.default"(%s) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %n1 = aten.call "aten::neg.default"(%i2) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %n2 = aten.call "aten::neg.default"(%i3) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  func.return %n1, %n2 : !irfuse.tensor<[4], f32>, !irfuse.tensor<[4], f32>
}
"""


def test_near_misses_say_why() -> None:
    module = Parser(make_context(), f"builtin.module {{{NEAR_MISSES}}}").parse_module()
    assert isinstance(module, ModuleOp)
    with remarks.collecting() as sink:
        CsePure().apply(make_context(), module)
    assert [m.reason for m in sink.missed] == [
        "not merged: random op",
        "not merged: result contents are undefined (empty)",
        "not merged: an in-place write between the two may change their inputs",
        "not merged: the graph returns the duplicate",
    ]
    assert sink.fused == 1  # i3 into i2; n2 is then n1's duplicate but returned
    module.verify()
