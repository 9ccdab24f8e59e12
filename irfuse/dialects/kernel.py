"""The `kernel` dialect: a fused op after kernel selection, a call to one irfuse custom op.

Emit's first step lowers every fused op to the `torch.ops.irfuse.*` custom op that implements it
and records which implementation the platform runs (`triton`, `flashinfer`, `reference`); the
custom op dispatches to that implementation at run time. The call carries its arguments like
`aten.call` does (tensors as operands, everything else inline).

`kernel.call`'s textual form: `filecheck/dialects/aten/ops.mlir`.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import StringAttr
from xdsl.irdl import irdl_op_definition, prop_def
from xdsl.utils.exceptions import VerifyException

from irfuse.ir.call_syntax import CallLikeOp
from irfuse.ir.dialect import declared_dialect

IMPLS = ("reference", "triton", "flashinfer", "symm_mem")
"""What a call runs: the torch reference (always right, never fast), irfuse's Triton kernel,
FlashInfer's kernel, or `symm_mem` (a collective through torch's symmetric memory, then irfuse's
Triton kernel). The one vocabulary of implementations: kernel choice adds `inductor` (leave the
pattern unfused), which no call records."""


@irdl_op_definition
class CallOp(CallLikeOp):
    """A call to an irfuse kernel (a `torch.ops.irfuse.*` custom op) with its implementation."""

    name = "kernel.call"

    impl = prop_def(StringAttr)

    EXTRA_PROPS: ClassVar[tuple[str, ...]] = ("impl",)

    def verify_(self) -> None:
        super().verify_()
        if not self.target.data.startswith("irfuse::"):
            raise VerifyException(
                f"kernel.call must call an irfuse custom op, got '{self.target.data}'"
            )
        if self.impl.data not in IMPLS:
            raise VerifyException(f"unknown kernel implementation '{self.impl.data}'")


Kernel = declared_dialect("kernel", globals())
