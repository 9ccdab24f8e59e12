"""The fast paths of `irfuse.raising.match`: `call` builds its `Call` without the dataclass
`__init__` (the hot path of every matcher) and it is still equal to, and as frozen as, one built
by it; `walk_ops` lists what `walk()` yields, in the same order, nested regions included."""

from __future__ import annotations

import dataclasses

import pytest
from xdsl.parser import Parser

from irfuse import remarks
from irfuse.context import make_context
from irfuse.raising.match import Call, call, walk_ops
from irfuse.raising.raise_rms_norm import RaiseRmsNorm

T = "!irfuse.tensor<[s0, 64], f32>"
IR = f"""
func.func @f(%x: {T}) -> {T} {{
  %m = aten.call "aten::mean.dim"(%x, [-1], true, dtype=f32) : ({T}) -> {T}
  %s = aten.call "aten::add.Tensor"(%m, 1.0e-06, alpha=1) : ({T}) -> {T}
  %c = aten.call "aten::clamp.default"(%s, none, 448.0) : ({T}) -> {T}
  func.return %c : {T}
}}
"""


def test_call_decodes_like_the_dataclass_and_stays_frozen() -> None:
    module = Parser(make_context(), IR).parse_module()
    block = module.ops.first.body.block
    x = block.args[0]
    mean, add, clamp, _ = list(block.ops)
    expected = [
        Call(mean, "aten::mean.dim", (x, [-1], True), {"dtype": mean.properties["kw_template"]
                                                       .data["dtype"]}),
        Call(add, "aten::add.Tensor", (mean.results[0], 1e-06), {"alpha": 1}),
        Call(clamp, "aten::clamp.default", (add.results[0], None, 448.0), {}),
    ]
    for op, want in zip((mean, add, clamp), expected, strict=True):
        found = call(op)
        assert type(found) is Call and found == want and repr(found) == repr(want)
        with pytest.raises(dataclasses.FrozenInstanceError):
            found.target = "other"  # type: ignore[misc]
    assert call(add, "aten::mul.Tensor") is None and call(add, "aten::add.Tensor") == expected[1]
    assert call(block.last_op) is None  # func.return is no aten.call


NORM = f"""
func.func @f(%x: {T}, %w: !irfuse.tensor<[64], f32>) -> {T} {{
  %sq = aten.call "aten::pow.Tensor_Scalar"(%x, 2) : ({T}) -> {T}
  %var = aten.call "aten::mean.dim"(%sq, [-1], true) : ({T}) -> {T}
  %ve = aten.call "aten::add.Tensor"(%var, 1.0e-06) : ({T}) -> {T}
  %rstd = aten.call "aten::rsqrt.default"(%ve) : ({T}) -> {T}
  %n = aten.call "aten::mul.Tensor"(%x, %rstd) : ({T}, {T}) -> {T}
  %y = aten.call "aten::mul.Tensor"(%n, %w) : ({T}, !irfuse.tensor<[64], f32>) -> {T}
  %z = aten.call "aten::neg.default"(%y) : ({T}) -> {T}
  func.return %z : {T}
}}
"""


def test_walk_ops_is_walk_as_a_list_with_regions() -> None:
    module = Parser(make_context(), NORM).parse_module()
    with remarks.collecting() as sink:
        RaiseRmsNorm().apply(make_context(), module)
    assert sink.fused == 1  # the norm now holds its chain in a decomposition region
    assert walk_ops(module) == list(module.walk())
    assert len(walk_ops(module)) == 1 + 1 + 3 + 7  # module, func, norm + neg + return, region
