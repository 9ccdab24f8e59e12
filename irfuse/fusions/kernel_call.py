"""Building a fused op's `kernel.call`: how select-kernels lowers each fused op.

The lowering is generic (`lower`): it reads each parameter of the kernel by name off the fused
op: an operand (a tensor, an optional one, a variadic list; a graph input for an `Opaque`
argument), a property (a float, int or string attribute, a bool attribute, a unit attribute read
as a bool, a type for a dtype) or, where the op has none of that name, the parameter's default. `values` gives what the op holds under
another name or derives (the output dtype from a result type, a quant scheme's group size).
Parameters without a default are positional; the others go by keyword, and only when they
differ from the default (`divide = true`), so a call without them reads as the schema's
defaults. A fusion's `ops.LOWERINGS` maps each fused op to a `Lowering` (which kernel, and those
values), or to a function of its own where the op does not map onto one kernel call by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Operation, SSAValue, TypeAttribute
from xdsl.irdl import IRDLOperation

from irfuse.dialects import kernel
from irfuse.fusions.kernel_decl import Kernel, Param
from irfuse.ir import call_args


class LoweringError(ValueError):
    """A fused op that does not give its kernel a value it needs."""


class Args:
    """A call's argument template and operand list, built together. `first`: operands placed
    before all others, each taken by the first argument that passes it."""

    def __init__(self, first: Sequence[SSAValue] = ()) -> None:
        self.operands: list[SSAValue] = list(first)
        self._unclaimed = list(range(len(self.operands)))

    def tensor(self, value: SSAValue) -> Attribute:
        for i in self._unclaimed:
            if self.operands[i] is value:
                self._unclaimed.remove(i)
                return call_args.OperandRefAttr(IntAttr(i))
        self.operands.append(value)
        return call_args.OperandRefAttr(IntAttr(len(self.operands) - 1))

    def tensors(self, values: Sequence[SSAValue]) -> Attribute:
        return ArrayAttr([self.tensor(v) for v in values])


def flag(value: bool) -> Attribute:
    return call_args.TRUE if value else call_args.FALSE


def _python(value: Any) -> Any:
    """A property's Python value (a unit attribute is True), to compare with a default."""
    if isinstance(value, UnitAttr):
        return True
    if isinstance(value, FloatAttr | IntegerAttr):
        return value.value.data
    if isinstance(value, StringAttr):
        return value.data
    return value


def _argument(args: Args, value: Any, p: Param, where: str) -> Attribute:
    """The template entry for `value` as the kernel's parameter `p`."""
    if p.opaque:  # a graph input (vLLM's hoisted LayerName), or a constant string
        if isinstance(value, SSAValue):
            return args.tensor(value)
        if isinstance(_python(value), str):
            return StringAttr(_python(value))
    elif p.type in ("Tensor", "Tensor?"):
        if value is None and p.type == "Tensor?":
            return call_args.NONE
        if isinstance(value, SSAValue):
            return args.tensor(value)
    elif p.type == "Tensor[]":
        if isinstance(value, Sequence) and all(isinstance(v, SSAValue) for v in value):
            return args.tensors(value)
    elif p.type in ("ScalarType", "ScalarType?"):
        if value is None and p.type == "ScalarType?":
            return call_args.NONE
        if isinstance(value, TypeAttribute):
            return value
    elif p.type in ("int[]", "int[]?"):
        if value is None and p.type == "int[]?":
            return call_args.NONE
        if isinstance(value, DenseArrayBase):
            value = value.get_values()
        if isinstance(value, Sequence) and all(isinstance(_python(v), int) for v in value):
            return ArrayAttr([IntAttr(_python(v)) for v in value])
    elif p.type == "bool":
        if value is None or isinstance(value, UnitAttr):  # an optional unit property
            return flag(value is not None)
        return flag(bool(_python(value)))
    elif value is not None:
        plain = _python(value)
        if p.type == "float" and isinstance(plain, int | float):
            return call_args.FloatArgAttr(float(plain))
        if p.type == "int" and isinstance(plain, int):
            return IntAttr(plain)
        if p.type == "str" and isinstance(plain, str):
            return StringAttr(plain)
    raise LoweringError(f"{where}: {value!r} is no value for `{p.type} {p.name}`")


def lower(
    k: Kernel,
    op: Operation,
    platform: str,
    values: Mapping[str, Any] | None = None,
    result_types: Sequence[Attribute] | None = None,
) -> kernel.CallOp:
    """The call of `k` replacing `op`, each parameter read off the op by name (or `values`),
    with the implementation chosen for `platform`; it returns `op`'s result types unless
    `result_types` says otherwise (a kernel writing in place). The tensors the kernel writes
    are the call's first operands."""
    assert isinstance(op, IRDLOperation)
    definition = type(op).get_irdl_definition()
    on_op = {name for name, _ in definition.operands} | set(definition.properties)
    values = values or {}
    where = f"{op.name} -> irfuse::{k.name}"

    def value_of(p: Param) -> Any:
        if p.name in values:
            return values[p.name]
        if p.name in on_op:
            return getattr(op, p.name)
        if p.has_default:
            return None
        raise LoweringError(f"{where}: the op has no `{p.name}`")

    args = Args([value_of(p) for p in k.params if p.written])
    template: list[Attribute] = []
    keywords: dict[str, Attribute] = {}
    for p in k.params:
        value = value_of(p)
        if not p.has_default:
            template.append(_argument(args, value, p, where))
        elif value is not None and _python(value) != p.default:
            keywords[p.name] = _argument(args, value, p, where)
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


def scheme_values(scheme: Any) -> dict[str, object]:
    """A per-group quant scheme's parameters (`group_size`, `col_major`, `ue8m0`) for the
    kernels that take them; {} for another scheme or none."""
    if scheme is None or not scheme.is_group:
        return {}
    return {"group_size": scheme.group_size, "col_major": scheme.is_col_major,
            "ue8m0": scheme.is_ue8m0}


@dataclass(frozen=True)
class Lowering:
    """The generic lowering of a fused op: its `kernel`, or a function of the op that picks one
    by the op's form (a residual, a quant scheme); `values(op)`: the parameters the op holds
    under another name or derives (see `lower`)."""

    kernel: Kernel | Callable[[Operation], Kernel]
    values: Callable[[Operation], Mapping[str, Any]] | None = None

    def __call__(self, op: Operation, platform: str) -> kernel.CallOp:
        k = self.kernel if isinstance(self.kernel, Kernel) else self.kernel(op)
        return lower(k, op, platform, None if self.values is None else self.values(op))


@dataclass(frozen=True)
class InPlace:
    """A lowering whose kernel writes some of the fused op's operands in place (a KV cache):
    `call` returns the op's other results; `results` are the values that replace each result of
    the op, in order (a call result, or the operand the kernel wrote)."""

    call: kernel.CallOp
    results: tuple[SSAValue, ...]


LowerFn = Callable[[Operation, str], "kernel.CallOp | InPlace"]
"""Builds the kernel call of a fused op on a platform: a `Lowering`, or a fusion's own."""
