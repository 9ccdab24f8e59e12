"""What the quant raising passes read: ATen targets, shapes and dtypes, clamps, grouped views.

Shared by `raise_quant` (FP8 and the NVFP4 custom op) and `raise_nvfp4` (NVFP4 written in torch).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from xdsl.dialects.builtin import f32
from xdsl.ir import Attribute, Operation, SSAValue

from irfuse.dialects import aten
from irfuse.ir.shapes import is_float, is_one_element
from irfuse.raising.aten_ops import (
    CLAMP,
    CLAMP_MAX,
    CLAMP_MAX_TENSOR,
    CLAMP_MIN,
    CLAMP_MIN_TENSOR,
    CLAMP_TENSOR,
    CLIP,
    CLONE,
    DETACH,
    EQ_SCALAR,
    EQ_TENSOR,
    FULL_LIKE,
    LIFT_FRESH_COPY,
    MASKED_FILL_SCALAR,
    MASKED_FILL_TENSOR,
    MAXIMUM,
    MINIMUM,
    NEW_FULL,
    NEW_ONES,
    NEW_ZEROS,
    ONES_LIKE,
    VIEWS,
    WHERE_SCALAR,
    WHERE_SCALAR_OTHER,
    WHERE_SCALAR_SELF,
    WHERE_SELF,
    ZEROS_LIKE,
)
from irfuse.raising.match import (
    NoMatch,
    as_cast,
    producer,
    scalar_of,
    tensor_type,
)

CLAMPS_BOTH = (CLAMP, CLAMP_TENSOR, CLIP)
CLAMPS_BELOW = (CLAMP_MIN, CLAMP_MIN_TENSOR)
CLAMPS_ABOVE = (CLAMP_MAX, CLAMP_MAX_TENSOR)
CLAMPS = (*CLAMPS_BOTH, *CLAMPS_BELOW, *CLAMPS_ABOVE, MAXIMUM, MINIMUM)
COPIES = (LIFT_FRESH_COPY, CLONE, DETACH)
NVFP4_BLOCK = 16
E2M1_MAX = 6.0
NVFP4_SCALE_BOUND = 448.0

WHERE = (WHERE_SELF, WHERE_SCALAR_OTHER, WHERE_SCALAR_SELF,
         WHERE_SCALAR)
MASKED_FILL = (MASKED_FILL_SCALAR, MASKED_FILL_TENSOR)
EQ = (EQ_SCALAR, EQ_TENSOR)
FILLS = {ONES_LIKE: 1.0, ZEROS_LIKE: 0.0,
         NEW_ONES: 1.0, NEW_ZEROS: 0.0}
FILL_WITH = (FULL_LIKE, NEW_FULL)


# --- small readers -----------------------------------------------------------------------------------

def to_f32(value: float) -> float:
    """`value` rounded to float32, as a clamp bound on an f32 tensor is."""
    return struct.unpack("f", struct.pack("f", value))[0]


def shape_of(value: object) -> tuple:
    t = tensor_type(value)
    return () if t is None else t.dims


def dtype_of(value: object) -> Attribute | None:
    t = tensor_type(value)
    return None if t is None else t.dtype


def fmt_dims(dims: tuple) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def bound_value(value: object) -> float | None:
    number = scalar_of(value)
    return None if number is None else float(number)


def describe_op(op: Operation) -> str:
    return op.target.data if isinstance(op, aten.CallOp) else op.name


def outside_users(ops: list[Operation], outputs: set[SSAValue]) -> list[Operation]:
    """The chain ops with a result used outside the chain that is not an output."""
    chain = set(ops)
    return [
        o for o in ops
        if any(r not in outputs and any(u.operation not in chain for u in r.uses)
               for r in o.results)
    ]


# --- the clamp -------------------------------------------------------------------------------------


def peel_clamps(value: SSAValue, ops: list[Operation]) -> tuple[SSAValue, float | None, float | None]:
    """Peel the clamp ops producing `value`: (clamped value, lower bound, upper bound)."""
    lo: float | None = None
    hi: float | None = None
    for _ in range(2):
        if lo is not None and hi is not None:
            break
        found = producer(value, *CLAMPS)
        if found is None:
            break
        new_lo = new_hi = None
        if found.target in CLAMPS_BOTH:
            new_lo = found.arg(1, "min")
            new_hi = found.arg(2, "max")
            new_lo = None if new_lo is None else bound_value(new_lo)
            new_hi = None if new_hi is None else bound_value(new_hi)
            source = found.arg(0)
            if (found.arg(1, "min") is not None and new_lo is None) or (
                found.arg(2, "max") is not None and new_hi is None
            ):
                raise NoMatch("a clamp bound is not a constant")
        elif found.target in CLAMPS_BELOW or found.target in CLAMPS_ABOVE:
            bound = bound_value(found.arg(1, "min" if found.target in CLAMPS_BELOW else "max"))
            if bound is None:
                raise NoMatch("a clamp bound is not a constant")
            if found.target in CLAMPS_BELOW:
                new_lo = bound
            else:
                new_hi = bound
            source = found.arg(0)
        else:
            a, b = found.arg(0), found.arg(1, "other")
            bound = bound_value(b)
            source = a
            if bound is None:
                bound, source = bound_value(a), b
            if bound is None or shape_of(source) != shape_of(found.result):
                raise NoMatch(f"{found.target} with a tensor that is not a constant bound")
            if found.target == MAXIMUM:
                new_lo = bound
            else:
                new_hi = bound
        if (new_lo is not None and lo is not None) or (new_hi is not None and hi is not None):
            raise NoMatch("clamped twice on one side")
        lo = new_lo if new_lo is not None else lo
        hi = new_hi if new_hi is not None else hi
        ops.append(found.op)
        value = source
    return value, lo, hi


# --- x and its grouped view ---------------------------------------------------------------------------


def strip_f32_casts(value: SSAValue, ops: list[Operation]) -> SSAValue:
    """Follow exact casts to f32 (from a float dtype) up; add them to `ops`."""
    while (cast := as_cast(value)) is not None:
        source, dtype = cast
        if dtype != f32 or not is_float(dtype_of(source)):
            break
        ops.append(value.owner)  # type: ignore[arg-type]
        value = source
    return value


@dataclass(frozen=True)
class GroupedView:
    """A value read as x split into groups along its last dim: `x.view(..., G, g)`, cast to f32
    before or after the view or not at all."""

    x: SSAValue
    groups: int
    size: int
    ops: tuple[Operation, ...]


def grouped_view(value: SSAValue) -> GroupedView | None:
    ops: list[Operation] = []
    base = strip_f32_casts(value, ops)
    view = producer(base, *VIEWS)
    if view is None:
        return None
    inner = view.arg(0)
    dims, inner_dims = shape_of(base), shape_of(inner)
    if (
        len(dims) < 2
        or not inner_dims
        or not isinstance(dims[-1], int)
        or not isinstance(dims[-2], int)
        or inner_dims[-1] != dims[-1] * dims[-2]
    ):
        return None
    ops.append(view.op)
    x = strip_f32_casts(inner, ops)
    return GroupedView(x, dims[-2], dims[-1], tuple(ops))


# --- block quants ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Blocks:
    """The shapes of a block quant of x [*lead, N] in blocks of `size`: blocked x
    [*lead, G, size] ("x"), per-block values [*lead, G] or [*lead, G, 1] ("block")."""

    lead: tuple
    n: int
    size: int

    @property
    def g(self) -> int:
        return self.n // self.size

    def role(self, dims: tuple) -> str | None:
        if dims == (*self.lead, self.g, self.size):
            return "x"
        if dims in ((*self.lead, self.g), (*self.lead, self.g, 1)):
            return "block"
        if is_one_element(dims):
            return "one"
        return None

    def elementwise(self, dims: tuple) -> bool:
        """Whether `dims` hold x's elements in x's order: [*lead, ...] with N more per row."""
        k = len(self.lead)
        rest = dims[k:]
        return (tuple(dims[:k]) == self.lead and all(isinstance(d, int) for d in rest)
                and math.prod(rest) == self.n)


