"""irfuse-opt --verify-roundtrip (mlir-opt's flag): the parsed IR, printed in its generic and its
custom form and parsed back, must be the same IR; and the call template's floats and `none`
parse back from the generic form (`#aten.float`, `#aten.none`: xDSL's `FloatData` and `NoneAttr`
do not)."""

from __future__ import annotations

import math

import pytest
from test_probe_opt import assert_one_error, run_opt

from irfuse.ir import call_args

CALL = """\
func.func @f(%x: !irfuse.tensor<[s0, 8], f32>) {
  %c = aten.call "aten::clamp.default"(%x, ninf, 1.0e-06) : (!irfuse.tensor<[s0, 8], f32>) -> !irfuse.tensor<[s0, 8], f32>
  %n = aten.call "aten::sum.dim_IntList"(%c, [1], false, dtype = none) : (!irfuse.tensor<[s0, 8], f32>) -> !irfuse.tensor<[s0], f32>
  %a = aten.call "aten::add.Tensor"(%c, 0.1) : (!irfuse.tensor<[s0, 8], f32>) -> !irfuse.tensor<[s0, 8], f32>
  %b = aten.call "aten::clamp.default"(%a, -0.0, -2.5e-07) : (!irfuse.tensor<[s0, 8], f32>) -> !irfuse.tensor<[s0, 8], f32>
  %z = aten.call "aten::add.Tensor"(%b, nan) : (!irfuse.tensor<[s0, 8], f32>) -> !irfuse.tensor<[s0, 8], f32>
  func.return
}
"""


@pytest.fixture
def call_ir(tmp_path):
    path = tmp_path / "call.mlir"
    path.write_text(CALL)
    return path


def test_the_generic_form_of_float_and_none_arguments_parses_back(call_ir, tmp_path):
    status, generic, err = run_opt([str(call_ir), "--print-op-generic"])
    assert status == 0, err
    assert "#aten.float<ninf>" in generic and "#aten.float<1.0e-06>" in generic
    assert "#aten.float<0.1>" in generic and "#aten.none" in generic
    assert "#aten.float<-0.0>, #aten.float<-2.5e-07>" in generic and "#aten.float<nan>" in generic
    again = tmp_path / "generic.mlir"
    again.write_text(generic)
    _, custom, _ = run_opt([str(call_ir)])
    assert run_opt([str(again)])[1] == custom
    assert run_opt([str(call_ir), "--verify-roundtrip"])[:2] == (0, custom)


def test_float_arguments_are_equal_by_their_bits():
    f = call_args.FloatArgAttr
    assert f(math.nan) == f(math.nan) and f(0.0) != f(-0.0) and f(0.1) == f(0.1)
    assert len({f(0.5), f(0.5), f(-0.0)}) == 2


def test_a_parser_that_changes_the_ir_is_caught(call_ir, monkeypatch):
    # Parsing back a float rounded to 1 decimal: the IR changes, and the error shows the line.
    parse = call_args.FloatArgAttr.parse_parameter.__func__
    monkeypatch.setattr(call_args.FloatArgAttr, "parse_parameter",
                        classmethod(lambda cls, parser: round(parse(cls, parser), 1)))
    status, _, err = run_opt([str(call_ir), "--verify-roundtrip"])
    assert_one_error(status, err, 1, "does not round-trip through its generic form",
                     "-", "#aten.float<1.0e-06>", "+", "#aten.float<0.0>")
    assert run_opt([str(call_ir)])[0] == 0  # without the flag nothing is checked


def test_a_printer_that_rounds_is_caught(call_ir, monkeypatch):
    # Both forms print 0.1 as 0.0: the text reads back the same, the IR does not.
    monkeypatch.setattr(call_args, "float_text", lambda value: "0.0")
    monkeypatch.setattr("irfuse.ir.call_syntax.float_text", lambda value: "0.0")
    status, _, err = run_opt([str(call_ir), "--verify-roundtrip"])
    assert_one_error(status, err, 1, "does not round-trip through its generic form",
                     "prints the same but is not the same IR")


def test_a_form_that_does_not_parse_back_is_named(call_ir, monkeypatch):
    monkeypatch.setattr("irfuse.ir.call_syntax.float_text", lambda value: "?")
    status, _, err = run_opt([str(call_ir), "--verify-roundtrip"])
    assert_one_error(status, err, 1, "does not round-trip through its custom form",
                     "printed, it does not parse back")
