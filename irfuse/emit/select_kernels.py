"""select-kernels: lower each fused op to a `kernel.call` of the custom op that implements it.

The lowering of each fused op comes from its fusion's declaration (`irfuse.emit.fusions`); the
implementation a call runs (`triton`, `flashinfer`, `reference`) is its kernel's declared choice
for the module's platform, recorded on the call so dumps show which kernel each fused site got.
Ops with no lowering are left as they are: raised ops that did not fuse emit as their
decomposition; anything else is an emit error that names the op.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irfuse.dialects.irfuse import module_platform
from irfuse.emit.declare import Lowering
from irfuse.emit.fusions import FUSIONS

LOWERINGS: dict[str, Lowering] = {
    name: lower for fusion in FUSIONS for name, lower in fusion.lowerings.items()
}
"""Fused op name -> its lowering, from every fusion's declaration."""


@dataclass(frozen=True)
class SelectKernels(ModulePass):
    """Replace fused ops by calls to their kernels for the module's platform."""

    name = "select-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        platform = module_platform(op)
        for fused in [o for o in op.walk() if o.name in LOWERINGS]:
            call = LOWERINGS[fused.name](fused, platform)
            call.location = fused.location
            for old, new in zip(fused.results, call.results, strict=True):
                new.name_hint = old.name_hint
            Rewriter.replace_op(fused, call)
