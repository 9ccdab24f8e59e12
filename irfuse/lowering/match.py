"""Matching imported ATen code: the vocabulary every raising pass is written in.

A raising pass walks the function once, looks at anchor ops (an `rsqrt`, a `silu`, a
`_scaled_mm`) and follows use-def chains from there with these helpers, which read `aten.call`
ops as Python calls: `call(op)` decodes an op's target and arguments (operands as SSA values,
constants as Python values, dtypes as IR element types); `producer(value, *targets)` is the
call that defines a value if its target is one of `targets`; `users(value)` lists who uses it.

Spellings that differ only in how torch wrote them are folded here once, so that every pass
sees one form: `as_float_cast` (`_to_copy`, `to.dtype`, `convert_element_type`), `scalar_of`
(a Python scalar, or a scalar tensor built by `full`/`scalar_tensor`/`lift_fresh_copy`), dims
given negative or positive.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import (
    ArrayAttr,
    FloatData,
    IntAttr,
    NoneAttr,
    StringAttr,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from irfuse.dialects import aten
from irfuse.dialects.irfuse import TensorType


@dataclass(frozen=True)
class Call:
    """An `aten.call` read as a Python call."""

    op: aten.CallOp
    target: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def arg(self, index: int, name: str | None = None, default: Any = None) -> Any:
        """Positional argument `index`, else keyword `name`, else `default`."""
        if index < len(self.args):
            return self.args[index]
        if name is not None and name in self.kwargs:
            return self.kwargs[name]
        return default

    @property
    def result(self) -> SSAValue:
        return self.op.results[0]


def _decode(attr: Attribute, operands: Sequence[SSAValue]) -> Any:
    if isinstance(attr, aten.OperandRefAttr):
        return operands[attr.index.data]
    if isinstance(attr, IntAttr | FloatData):
        return attr.data
    if isinstance(attr, aten.BoolArgAttr):
        return bool(attr.value.data)
    if isinstance(attr, NoneAttr):
        return None
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, ArrayAttr):
        return [_decode(a, operands) for a in attr.data]
    if isinstance(attr, aten.TupleAttr):
        return tuple(_decode(a, operands) for a in attr.items.data)
    if isinstance(attr, aten.TargetAttr):
        return attr.text.data
    return attr  # dtypes (IR element types), devices, layouts, memory formats


def call(op: Operation | None, *targets: str) -> Call | None:
    """`op` read as a call, if it is an `aten.call` (with one of `targets`, when given)."""
    if not isinstance(op, aten.CallOp):
        return None
    target = op.target.data
    if targets and target not in targets:
        return None
    operands = op.operands
    args = tuple(_decode(a, operands) for a in op.template.data)
    kwargs = {k: _decode(a, operands) for k, a in op.keywords.items()}
    return Call(op, target, args, kwargs)


def producer(value: Any, *targets: str) -> Call | None:
    """The call that defines `value`, if `value` is an op result (of one of `targets`)."""
    if not isinstance(value, SSAValue):
        return None
    owner = value.owner
    return call(owner, *targets) if isinstance(owner, Operation) else None


def users(value: SSAValue) -> list[Operation]:
    """The ops that use `value`, each once, in no particular order."""
    seen: dict[Operation, None] = {}
    for use in value.uses:
        seen.setdefault(use.operation, None)
    return list(seen)


def only_user(value: SSAValue) -> Operation | None:
    found = users(value)
    return found[0] if len(found) == 1 else None


def tensor_type(value: Any) -> TensorType | None:
    if isinstance(value, SSAValue) and isinstance(value.type, TensorType):
        return value.type
    return None


def rank(value: Any) -> int | None:
    t = tensor_type(value)
    return None if t is None else t.rank


def normalize_dim(dim: int, rank_: int) -> int:
    return dim + rank_ if dim < 0 else dim


def is_last_dim(dims: Any, rank_: int) -> bool:
    """Whether a reduction's `dim` argument (an int or a one-element list) is the last dim."""
    if isinstance(dims, int):
        dims = [dims]
    return (
        isinstance(dims, list)
        and len(dims) == 1
        and isinstance(dims[0], int)
        and normalize_dim(dims[0], rank_) == rank_ - 1
    )


CASTS = ("aten::_to_copy.default", "aten::to.dtype", "prims::convert_element_type.default")


def as_cast(value: Any) -> tuple[SSAValue, Attribute] | None:
    """(source, dtype) if `value` is a pure dtype cast of `source`."""
    found = producer(value, *CASTS)
    if found is None:
        return None
    source = found.arg(0)
    if found.target == "aten::_to_copy.default":
        if set(found.kwargs) - {"dtype", "layout", "device"} or len(found.args) != 1:
            return None
        dtype = found.kwargs.get("dtype")
    else:
        dtype = found.arg(1, "dtype")
    if dtype is None:
        return None
    return source, dtype


def strip_casts(value: SSAValue) -> tuple[SSAValue, list[Call]]:
    """Follow dtype casts up to the value they start from; return it and the casts passed."""
    casts: list[Call] = []
    while (cast := as_cast(value)) is not None:
        casts.append(producer(value))  # type: ignore[arg-type]
        value = cast[0]
    return value, casts


SCALAR_MAKERS = ("aten::scalar_tensor.default", "aten::full.default", "aten::lift_fresh_copy.default")


def scalar_of(value: Any) -> float | int | None:
    """The number `value` is: a Python scalar, or a constant scalar tensor made in the graph."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    made = producer(value, *SCALAR_MAKERS)
    if made is None:
        return None
    if made.target == "aten::full.default":
        shape = made.arg(0)
        return made.arg(1) if shape in ([], [1]) else None
    if made.target == "aten::scalar_tensor.default":
        return made.arg(0)
    return None


def commutative_operands(found: Call) -> Iterable[tuple[Any, Any]]:
    """Both orders of a binary call's two operands."""
    a, b = found.arg(0), found.arg(1, "other")
    yield a, b
    yield b, a


def block_ops(block: Block) -> list[Operation]:
    """The ops of a block, as a list that stays valid while a pass rewrites the block."""
    return list(block.ops)


def func_blocks(module: Operation) -> list[Block]:
    """The body block of every function in the module (raising works on top-level ops)."""
    blocks: list[Block] = []
    for op in module.regions[0].blocks[0].ops:
        if op.regions and op.regions[0].blocks:
            blocks.append(op.regions[0].blocks[0])
    return blocks


class NoMatch(Exception):
    """Raised by a matcher to give up on a candidate; the message is the remark's reason."""
