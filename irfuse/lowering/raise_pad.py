"""raise-pad: find constant padding of the last dim (`F.pad(x, (lo, hi), value=v)`).

Matches, anchored at each pad call: `aten.constant_pad_nd(x, pad, value)` (what `F.pad` with
mode "constant" becomes) and `aten.pad(x, pad, "constant", value)` (the composite, where it
survives), whose pad list pads only the last dim: `[lo, hi]`, or `[lo, hi, 0, 0, ...]` (zero
amounts on the other dims pad nothing).

Produces `act.pad` with `low`, `high` and `value` (any constant; None means 0) as properties and
the pad call in its decomposition region.

Does not raise, with a remark: a pad of another dim than the last (vLLM's fusion pads the GEMM
input's hidden dim only), negative amounts (a crop), a mode other than constant, a value that is
not a number.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from irfuse import remarks
from irfuse.dialects.act import PadOp
from irfuse.dialects.raised import in_decomposition
from irfuse.lowering.match import (
    Call,
    NoMatch,
    block_ops,
    call,
    func_blocks,
    raise_chain,
    tensor_type,
)

CONSTANT_PAD = "aten::constant_pad_nd.default"
PAD = "aten::pad.default"


def _amounts(found: Call) -> tuple[int, int, float]:
    """(low, high, value) of a last-dim constant pad."""
    x = found.arg(0)
    t = tensor_type(x)
    if t is None or t.rank == 0:
        raise NoMatch("the padded value is not a tensor of rank >= 1")
    pad = found.arg(1, "pad")
    if found.target == PAD:
        mode = found.arg(2, "mode", "constant")
        if mode != "constant":
            raise NoMatch(f"pad mode {mode!r} is not a constant pad")
        value = found.arg(3, "value")
    else:
        value = found.arg(2, "value", 0)
    if not isinstance(pad, list) or len(pad) < 2 or len(pad) % 2:
        raise NoMatch(f"pad amounts {pad} are not (low, high) pairs")
    if not all(isinstance(p, int) for p in pad):
        raise NoMatch("pad amounts are not constants")
    other = [i for i, p in enumerate(pad[2:]) if p != 0]
    if other:
        dim = -2 - other[0] // 2
        raise NoMatch(f"pads dim {dim}, not only the last dim")
    low, high = pad[0], pad[1]
    if low < 0 or high < 0:
        raise NoMatch(f"negative pad amounts ({low}, {high}) crop")
    value = 0.0 if value is None else value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NoMatch("the pad value is not a constant number")
    return low, high, float(value)


def _raise(found: Call) -> Operation:
    low, high, value = _amounts(found)
    raised = PadOp(found.arg(0), low=low, high=high, value=value, result_type=found.result.type)
    raise_chain(raised, [found.op], [found.result], "pad")
    return raised


class RaisePad(ModulePass):
    """Raise last-dim constant pads to `act.pad`. No options."""

    name = "raise-pad"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for block in func_blocks(op):
            for candidate in block_ops(block):
                if candidate.parent is not block or in_decomposition(candidate):
                    continue
                found = call(candidate, CONSTANT_PAD, PAD)
                if found is None:
                    continue
                try:
                    _raise(found)
                except NoMatch as miss:
                    remarks.missed(candidate, f"not a last-dim pad: {miss}")
                    continue
                remarks.fused()
