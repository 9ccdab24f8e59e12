"""`match.call`: an `aten.call` read as a Python call, built without the dataclass `__init__`
(the hot path of every matcher) and still equal to, and as frozen as, a `Call` built by it."""

from __future__ import annotations

import dataclasses

import pytest
from xdsl.parser import Parser

from irfuse.context import make_context
from irfuse.lowering.match import Call, call

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
