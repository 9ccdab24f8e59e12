"""Building a fused op's `kernel.call`: its argument template and operands, in the order of the
kernel's schema, and the implementation its platform chooses, recorded on the call.

Optional trailing arguments go by keyword and only when set (`up`, `divide`, `round_sum`), so a
call without them reads as the schema's defaults.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Operation, SSAValue

from irfuse.dialects import aten, kernel
from irfuse.fusions.declare import Kernel


class Args:
    """A call's argument template and operand list, built together."""

    def __init__(self) -> None:
        self.operands: list[SSAValue] = []

    def tensor(self, value: SSAValue) -> Attribute:
        self.operands.append(value)
        return aten.OperandRefAttr(IntAttr(len(self.operands) - 1))

    def optional(self, value: SSAValue | None) -> Attribute:
        return aten.NONE if value is None else self.tensor(value)

    def tensors(self, values: Sequence[SSAValue]) -> Attribute:
        return ArrayAttr([self.tensor(v) for v in values])

    def keyword(self, name: str, value: SSAValue | None) -> dict[str, Attribute]:
        """`{name: value}` for an optional tensor passed by keyword; {} when it is absent."""
        return {} if value is None else {name: self.tensor(value)}


def flag(value: bool) -> Attribute:
    return aten.TRUE if value else aten.FALSE


def kernel_call(
    k: Kernel,
    args: Args,
    template: list[Attribute],
    op: Operation,
    platform: str,
    keywords: dict[str, Attribute] | None = None,
    result_types: Sequence[Attribute] | None = None,
) -> kernel.CallOp:
    """The call of `k` replacing `op`, with the implementation chosen for `platform`; it returns
    `op`'s result types unless `result_types` says otherwise (a kernel writing in place)."""
    impl = k.choose(platform).impl
    if impl == "inductor":  # the pass should have left the pattern alone; run our kernel anyway
        impl = "triton"
    return kernel.CallOp(
        f"irfuse::{k.name}.default",
        args.operands,
        template,
        [r.type for r in op.results] if result_types is None else list(result_types),
        kw_template=keywords or None,
        tuple_result=not k.single_tensor,
        extra={"impl": StringAttr(impl)},
    )
