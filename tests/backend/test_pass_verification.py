"""Debug runs verify the IR after every pass that changed it: a pass that leaves the IR as it was
is not verified again (MLIR's pass manager does the same), a pass that changes only a property
or an operand in place is, and invalid IR after it names the pass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from xdsl.dialects.builtin import Float64Type, FloatAttr, ModuleOp
from xdsl.passes import ModulePass

from irfuse import passes, pipeline
from irfuse.dialects import norm


@dataclass(frozen=True)
class _Edit(ModulePass):
    """A test pass: runs `EDIT` on the module."""

    name = "test-edit"
    EDIT: ClassVar[list[Callable[[ModuleOp], None]]] = []

    def apply(self, ctx, op: ModuleOp) -> None:
        self.EDIT[0](op)


@pytest.fixture
def run_edit(monkeypatch: pytest.MonkeyPatch):
    """Run `edit` as a pass on a raised RMSNorm graph in debug mode; return how often the module
    was verified during the pass."""
    monkeypatch.setitem(passes.PASSES, _Edit.name, _Edit)
    x, w = torch.randn(4, 16), torch.randn(16)
    gm = make_fx(lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w)(x, w)
    options = pipeline.PipelineOptions(platform="cpu", debug=True)
    prepared = pipeline.prepare(gm, options)
    verified = []
    original = ModuleOp.verify
    monkeypatch.setattr(ModuleOp, "verify",
                        lambda self, *a, **k: (verified.append(1), original(self, *a, **k))[1])

    def run(edit: Callable[[ModuleOp], None]) -> int:
        _Edit.EDIT[:] = [edit]
        pipeline._run_pass(prepared, _Edit.name, options)
        return len(verified)

    return run


def _norm(module: ModuleOp) -> norm.RmsNormOp:
    return next(op for op in module.walk() if isinstance(op, norm.RmsNormOp))


def test_a_pass_that_changes_nothing_is_not_verified_again(run_edit) -> None:
    assert run_edit(lambda module: None) == 0


def test_an_operand_changed_in_place_is_verified(run_edit) -> None:
    def swap(module: ModuleOp) -> None:
        op = _norm(module)
        op.operands = [op.operands[0], op.operands[1]]  # the same values: nothing changed
    assert run_edit(swap) == 0

    def rewire(module: ModuleOp) -> None:
        op = _norm(module)
        op.operands = [op.operands[0], op.operands[0]]  # x as the weight: an invalid norm
    with pytest.raises(pipeline.PipelineError, match="test-edit: the IR is invalid after"):
        run_edit(rewire)


def test_a_property_changed_in_place_is_verified(run_edit) -> None:
    def bad_eps(module: ModuleOp) -> None:
        _norm(module).properties["eps"] = FloatAttr(-1.0, Float64Type())

    with pytest.raises(pipeline.PipelineError, match="the IR is invalid after the pass"):
        run_edit(bad_eps)
