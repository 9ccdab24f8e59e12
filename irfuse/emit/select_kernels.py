"""select-kernels: lower each fused op to a `kernel.call` of the custom op that implements it.

The lowering of each fused op comes from its fusion (`ops.LOWERINGS`, `irfuse.fusions`): the
generic one reads each kernel parameter by name off the op (`irfuse.fusions.kernel_call`); the
implementation a call runs (`triton`, `flashinfer`, `reference`) is its kernel's declared choice
for the module's platform, recorded on the call so dumps show which kernel each fused site got.
Ops with no lowering are left as they are: raised ops that did not fuse emit as their
decomposition; anything else is an emit error that names the op.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from irfuse.dialects.irfuse import module_platform
from irfuse.fusions import FUSIONS
from irfuse.fusions.kernel_call import InPlace, LowerFn
from irfuse.raising.aten_ops import COPY_INPLACE
from irfuse.raising.match import call as call_of
from irfuse.raising.match import walk_ops

LOWERINGS: dict[str, LowerFn] = {
    name: lower for fusion in FUSIONS for name, lower in fusion.lowerings.items()
}
"""Fused op name -> its lowering, from every fusion's declaration."""


@dataclass(frozen=True)
class SelectKernels(ModulePass):
    """Replace fused ops by calls to their kernels for the module's platform."""

    name = "select-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        platform = module_platform(op)
        for fused in [o for o in walk_ops(op) if o.name in LOWERINGS]:
            lowered = LOWERINGS[fused.name](fused, platform)
            if isinstance(lowered, InPlace):
                _replace_in_place(fused, lowered)
                continue
            lowered.location = fused.location
            for old, new in zip(fused.results, lowered.results, strict=True):
                new.name_hint = old.name_hint
            Rewriter.replace_op(fused, lowered)


def _replace_in_place(fused: Operation, lowered: InPlace) -> None:
    """The call before the fused op; its results, and the operands it writes, in the op's
    place. The graph's copy of a written input back into itself (`copy_(x, x)`) goes: the
    kernel has written it."""
    call = lowered.call
    call.location = fused.location
    Rewriter.insert_op(call, InsertPoint.before(fused))
    written = [new for new in lowered.results if new.owner is not call]
    for old, new in zip(fused.results, lowered.results, strict=True):
        if new.owner is call:
            new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    Rewriter.erase_op(fused)
    for value in written:
        for use in list(value.uses):
            found = call_of(use.operation, COPY_INPLACE)
            if found is not None and found.arg(0) is value and found.arg(1) is value \
                    and not found.result.uses:
                Rewriter.erase_op(found.op)
