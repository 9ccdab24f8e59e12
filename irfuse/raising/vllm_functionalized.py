"""vLLM's custom ops as aot_autograd functionalizes them: an `auto_functionalized[_v2]` call
(or a user Triton kernel's functional call) read back as the op call it stands for.

`read_functionalized` gives the op's arguments by schema name, the values its mutable arguments
hold after the call, the fresh buffers only the call writes, and (v2) how each mutable argument
that is a view is regenerated from its base (`View`, torch's `ViewInfo`). The helpers check and
read arguments and build the `aten.call`s that raising puts around a raised op. Used by
raise-vllm-ops and raise-vllm-attention.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import Attribute, Operation, SSAValue

from irfuse.dialects import aten
from irfuse.dialects.irfuse import SymType
from irfuse.dialects.irfuse import tensor_type as make_tensor_type
from irfuse.ir import call_args
from irfuse.ir.shapes import F8E4M3FN, F8E4M3FNUZ, is_float
from irfuse.raising.aten_ops import (
    AS_STRIDED,
    AUTO_FUNCTIONALIZED,
    EMPTY_LIKE,
    EMPTY_MEMORY_FORMAT,
    EMPTY_STRIDED,
    FULL,
    NEW_EMPTY,
    NEW_EMPTY_STRIDED,
    NEW_ZEROS,
    SLICE_TENSOR,
    ZEROS,
    ZEROS_LIKE,
)
from irfuse.raising.match import (
    Call,
    NoMatch,
    call,
    tensor_type,
)

FP8_DTYPES = (F8E4M3FN, F8E4M3FNUZ)


ALLOCS = (
    EMPTY_MEMORY_FORMAT,
    EMPTY_LIKE,
    EMPTY_STRIDED,
    NEW_EMPTY,
    NEW_EMPTY_STRIDED,
    ZEROS,
    ZEROS_LIKE,
    NEW_ZEROS,
    FULL,
)
"""Ops that make a fresh buffer: an output buffer made by one of these and used by the call
alone moves into the region with it."""


_VIEW_KEYS = ("size", "stride", "storage_offset", "slice_dim", "slice_start", "slice_end", "alias")


@dataclass
class View:
    """How auto_functionalized_v2 regenerates a mutable argument from its base (torch's
    `ViewInfo`): the base itself (`base`), `alias(base)`, `base.slice(dim, start, end)` or
    `base.as_strided(size, stride, storage_offset)`."""

    kind: str
    index: int
    base: SSAValue
    new_base: SSAValue
    dim: Any = None
    start: Any = None
    end: Any = None
    size: tuple = ()
    stride: tuple = ()
    offset: Any = None


@dataclass
class Functionalized:
    """An auto_functionalized call read back as the vLLM op call it stands for."""

    found: Call
    target: str
    args: dict[str, Any]
    """Every argument by schema name; a mutable one is the tensor before the call (or None)."""
    outs: dict[str, SSAValue]
    """Mutable argument name -> its value after the call (a result of the call)."""
    buffers: list[Operation]
    """Ops that made the mutable arguments' tensors (candidates to move into the region)."""
    views: dict[str, View] = field(default_factory=dict)
    """v2, ops in VIEWED only: mutable argument name -> how it is regenerated from its base."""
    after: list[Operation] = field(default_factory=list)
    """Ops after the call that belong to what it stands for (a view of a result it wrote)."""
    prelude: list[Operation] = field(default_factory=list)
    """New ops the raised op reads, inserted before it (an operand viewed in its layout)."""


def read_functionalized(found: Call, mutable: tuple[str, ...], viewed: bool) -> Functionalized:
    """Read an `auto_functionalized[_v2]` call of an op whose mutable arguments are `mutable`
    (schema order); NoMatch when a mutable argument is a view of (or shares its base with)
    another tensor, unless `viewed` (the op's views are read)."""
    target = found.arg(0)
    kwargs = found.kwargs
    results = found.op.results
    args = {k: v for k, v in kwargs.items() if not k.startswith("_")}
    outs: dict[str, SSAValue] = {}
    views: dict[str, View] = {}
    if found.target == AUTO_FUNCTIONALIZED:
        if len(results) != 1 + len(mutable):
            raise NoMatch(f"the call has {len(results)} results, not {1 + len(mutable)}")
        for i, name in enumerate(mutable):
            if args.get(name) is not None:
                outs[name] = results[1 + i]
    else:
        bases = kwargs.get("_all_bases")
        if not isinstance(bases, list) or len(results) != 1 + len(bases):
            raise NoMatch("the auto_functionalized_v2 bases do not match its results")
        used: set[int] = set()
        for name in mutable:
            index = kwargs.get(f"_{name}_base_index")
            if index is None:
                args[name] = None
                continue
            if not isinstance(index, int) or not 0 <= index < len(bases):
                raise NoMatch(f"its {name} argument has no base")
            outs[name] = results[1 + index]
            if viewed:
                views[name] = _read_view(kwargs, name, index, bases[index], outs[name])
                args[name] = bases[index] if views[name].kind == "base" else None
                continue
            if any(f"_{name}_{key}" in kwargs for key in _VIEW_KEYS):
                raise NoMatch(f"its {name} argument is a view of a larger tensor")
            if index in used:
                raise NoMatch(f"its {name} argument shares its base with another argument")
            used.add(index)
            args[name] = bases[index]
    buffers = [
        v.owner for name in mutable
        if isinstance(v := args.get(name), SSAValue) and call(v.owner, *ALLOCS) is not None
    ]
    return Functionalized(found, target, args, outs, buffers, views)  # type: ignore[arg-type]


def _read_view(kwargs: dict[str, Any], name: str, index: int, base: SSAValue,
               new_base: SSAValue) -> View:
    """torch's `read_view_information_from_args`, for one tensor argument."""
    view = View("base", index, base, new_base)
    if kwargs.get(f"_{name}_alias"):
        view.kind = "alias"
    elif f"_{name}_storage_offset" in kwargs:
        view.kind = "strided"
        view.size = tuple(kwargs[f"_{name}_size"])
        view.stride = tuple(kwargs[f"_{name}_stride"])
        view.offset = kwargs[f"_{name}_storage_offset"]
    elif f"_{name}_slice_dim" in kwargs:
        view.kind = "slice"
        view.dim = kwargs[f"_{name}_slice_dim"]
        view.start = kwargs[f"_{name}_slice_start"]
        view.end = kwargs[f"_{name}_slice_end"]
    return view


def tensor_arg(fn: Functionalized, name: str) -> SSAValue:
    value = fn.args.get(name)
    if tensor_type(value) is None:
        raise NoMatch(f"its {name} argument is not a tensor")
    return value  # type: ignore[return-value]


def float_input(x: SSAValue) -> None:
    dtype = tensor_type(x).dtype  # type: ignore[union-attr]
    if not is_float(dtype):
        raise NoMatch(f"the input is {dtype}, not a float tensor")


def constant_arg(fn: Functionalized, name: str, kind: type) -> Any:
    value = fn.args.get(name)
    if isinstance(value, bool) and kind is not bool:
        value = None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind):
        raise NoMatch(f"its {name} is not a constant {kind.__name__}")
    return value


def encode(value: Any, operands: list[SSAValue]) -> Attribute:
    """A Python argument as an `aten.call` template (every SSA value a fresh operand)."""
    if isinstance(value, SSAValue):
        operands.append(value)
        return call_args.OperandRefAttr(IntAttr(len(operands) - 1))
    if isinstance(value, bool):
        return call_args.TRUE if value else call_args.FALSE
    if isinstance(value, int):
        return IntAttr(value)
    if isinstance(value, list | tuple):
        return ArrayAttr([encode(v, operands) for v in value])
    raise NoMatch(f"cannot rebuild the argument {value!r}")


def aten_call(target: str, args: Sequence[Any], dims: Sequence[Any], dtype: Attribute
          ) -> aten.CallOp:
    """A new `aten.call` (not inserted) of `target` on `args`, typed `[dims] dtype`."""
    operands: list[SSAValue] = []
    template = [encode(a, operands) for a in args]
    return aten.CallOp(target, operands, template, [make_tensor_type(tuple(dims), dtype)])


def dim_of(size: Any) -> Any:
    """A size argument (an int or a symbolic size value) as a tensor type writes it."""
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    if isinstance(size, SSAValue) and isinstance(size.type, SymType):
        return size.type.expr.data
    raise NoMatch(f"the view size {size!r} is not an int or a symbolic size")


def view_ops(view: View, base: SSAValue) -> list[Operation]:
    """The ops that regenerate the argument from `base` (old or new), as torch does."""
    t = tensor_type(base)
    assert t is not None
    if view.kind == "slice":
        dims = list(t.dims)
        dims[view.dim] = view.end - view.start
        return [aten_call(SLICE_TENSOR, [base, view.dim, view.start, view.end], dims,
                      t.dtype)]
    if view.kind == "strided":
        return [aten_call(AS_STRIDED,
                      [base, list(view.size), list(view.stride), view.offset],
                      [dim_of(d) for d in view.size], t.dtype)]
    return []  # the base itself (or its alias: the same elements)

