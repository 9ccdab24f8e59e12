"""select-kernels: lower each fused op to a `kernel.call` of the custom op that implements it.

The implementation a call runs (`triton`, `flashinfer`, `reference`) is chosen per platform by
`irfuse.emit.kernel_choice` (measured, in one table) and recorded on the call, so dumps show
which kernel each fused site got. Ops with no lowering are left as they are: raised ops that did
not fuse emit as their decomposition; anything else is an emit error that names the op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irfuse.dialects import kernel
from irfuse.dialects.irfuse import module_platform

Lowering = Callable[[Operation, str], kernel.CallOp]
"""Builds the kernel call for a fused op on a platform."""

LOWERINGS: dict[str, Lowering] = {}
"""Fused op name -> its lowering (filled by `irfuse.emit.lowerings`)."""


@dataclass(frozen=True)
class SelectKernels(ModulePass):
    """Replace fused ops by calls to their kernels for the module's platform."""

    name = "select-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from irfuse.emit import lowerings  # noqa: F401  (fills LOWERINGS)

        platform = module_platform(op)
        targets = [o for o in op.walk() if o.name in LOWERINGS]
        for fused in targets:
            call = LOWERINGS[fused.name](fused, platform)
            call.location = fused.location
            for old, new in zip(fused.results, call.results, strict=True):
                new.name_hint = old.name_hint
            Rewriter.replace_op(fused, call)
