"""raise-quant: FP8 and NVFP4 activation quantization, in every scheme and spelling.

Anchored at the cast to an fp8 dtype (f8E4M3FN with the bound 448, ROCm's f8E4M3FNUZ with 224)
and read back through the clamp, the scaling and the scale, which decides the scheme: static
per-tensor (a graph input or constant), dynamic per-token or per-tensor (an amax), per-group of
128 / 64 (row- or column-major scales, optional UE8M0). Produces `quant.fp8`; irfuse's custom
quant ops are raised whole. An fp8 cast that reads as NVFP4's block scale goes to `raise_nvfp4`,
which produces `quant.nvfp4`. The matched ops stay in the decomposition region (no result bit
changes); the spelling of the scaling is kept where two spellings round differently (a static
`x / s`: `divide`; a dynamic `x * s.reciprocal()`: `reciprocal`); near misses (a clamp bound that is not the dtype's, a scale that is not static) are
remarks. `filecheck/raise/raise-quant.mlir` shows the spellings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects.builtin import IntAttr, f32
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects import aten
from irfuse.dialects.quant import (
    DYNAMIC_TENSOR,
    DYNAMIC_TOKEN,
    GROUP,
    GROUP_SIZES,
    NVFP4,
    STATIC_TENSOR,
    QuantFp8Op,
    QuantNvfp4Op,
    QuantScheme,
)
from irfuse.ir import call_args
from irfuse.ir.shapes import F8E4M3FN, F8E4M3FNUZ, is_float, is_one_element
from irfuse.raising.aten_ops import (
    ABS,
    AMAX,
    CASTS,
    CEIL,
    DIV_SCALAR,
    DIV_TENSOR,
    EXP2,
    FULL,
    IRFUSE_QUANT_FP8_GROUP,
    IRFUSE_QUANT_FP8_PER_TENSOR,
    IRFUSE_QUANT_FP8_PER_TOKEN,
    IRFUSE_QUANT_FP8_STATIC,
    IRFUSE_QUANT_NVFP4,
    LAYOUTS,
    LIFT_FRESH_COPY,
    LOG2,
    MATRIX_T,
    MAX,
    MAX_DIM,
    MAXIMUM,
    MINIMUM,
    MUL_SCALAR,
    MUL_TENSOR,
    POW_SCALAR,
    RECIPROCAL,
    SCALAR_MAKERS,
    SCALAR_TENSOR,
    TRANSPOSE_INT,
    TRANSPOSES,
    VIEWS,
)
from irfuse.raising.driver import (
    NO_CANDIDATE,
    REWROTE,
    AnchorPattern,
    CallPattern,
    Outcome,
    PatternPass,
    Site,
)
from irfuse.raising.match import (
    Call,
    NoMatch,
    as_cast,
    call,
    discard,
    is_pure,
    normalize_dim,
    only_user,
    producer,
    raise_chain,
    scalar_of,
    users,
)
from irfuse.raising.quant_common import (
    CLAMPS,
    CLAMPS_ABOVE,
    CLAMPS_BELOW,
    CLAMPS_BOTH,
    COPIES,
    bound_value,
    dtype_of,
    fmt_dims,
    grouped_view,
    outside_users,
    peel_clamps,
    shape_of,
    strip_f32_casts,
    to_f32,
)
from irfuse.raising.raise_nvfp4 import (
    Nvfp4CastPattern,
)

FP8_BOUND: dict[Attribute, float] = {F8E4M3FN: 448.0, F8E4M3FNUZ: 224.0}
"""The clamp bound M of each FP8 dtype irfuse quantizes to (vLLM's: 224 for fnuz)."""
_NEAR_MISS_BOUNDS = (448.0, 224.0, 240.0, 57344.0)

CUSTOM_OPS = (IRFUSE_QUANT_FP8_STATIC, IRFUSE_QUANT_FP8_PER_TOKEN, IRFUSE_QUANT_FP8_PER_TENSOR, IRFUSE_QUANT_FP8_GROUP, IRFUSE_QUANT_NVFP4)


# --- the scheme names of the support matrix ---------------------------------------------------------

_MATRIX_NAMES = {
    STATIC_TENSOR: "fp8-static-tensor",
    DYNAMIC_TOKEN: "fp8-dynamic-token",
    DYNAMIC_TENSOR: "fp8-dynamic-tensor",
    NVFP4: "nvfp4",
}


def support_matrix_scheme(scheme: QuantScheme) -> str:
    """The `irfuse.support_matrix.SCHEMES` name of a `#quant.scheme` (`fp8-static-tensor`,
    `fp8-dynamic-token`, `fp8-dynamic-tensor`, `fp8-group-128`, `fp8-group-64`, `nvfp4`).
    A group scheme's flags (col_major, ue8m0, tma_aligned) do not change the name."""
    kind = scheme.kind.data
    if kind == GROUP:
        return f"fp8-group-{scheme.group.data}"
    return _MATRIX_NAMES[kind]


def quant_op_scheme(op: Operation) -> QuantScheme:
    """The scheme of a raised quant op: its `scheme` property, or NVFP4 for `quant.nvfp4`
    (which has none)."""
    if isinstance(op, QuantNvfp4Op):
        return QuantScheme.nvfp4()
    scheme = op.properties.get("scheme")
    if not isinstance(scheme, QuantScheme):
        raise ValueError(f"{op.name} carries no quant scheme")
    return scheme


# --- small readers -----------------------------------------------------------------------------------

def min_scale(bound: float) -> float:
    """MIN_SCALE, the floor of every dynamic FP8 scale: `1 / (M * 512)`."""
    return 1.0 / (bound * 512.0)


def _static_source(value: object) -> bool:
    """Whether `value` is a graph input or a constant, maybe reshaped, copied or cast."""
    while isinstance(value, SSAValue):
        if isinstance(value, BlockArgument):
            return True
        owner = value.owner
        if isinstance(owner, aten.GetAttrOp):
            return True
        found = producer(value, *VIEWS, *CASTS, *COPIES, *SCALAR_MAKERS)
        if found is None:
            return False
        if found.target in SCALAR_MAKERS and found.target != LIFT_FRESH_COPY:
            return scalar_of(value) is not None
        value = found.arg(0)
    return False


def _static_scale(value: SSAValue, what: str) -> None:
    """Raise NoMatch unless `value` can be a static scale operand: a graph input or constant of
    one f32 element."""
    if not _static_source(value):
        raise NoMatch(f"{what} is not a graph input or constant")
    if not is_one_element(shape_of(value)):
        raise NoMatch(f"{what} has shape {fmt_dims(shape_of(value))}, not one element")
    if dtype_of(value) != f32:
        raise NoMatch(f"{what} is {dtype_of(value)}, not f32")


# --- the scaling -------------------------------------------------------------------------------------


@dataclass
class _Scaling:
    """`y = data / scale` or `y = data * (1 / scale)`: how the value to quantize is scaled."""

    data: SSAValue
    op: Operation
    divisor: SSAValue  # the value whose reciprocal multiplies data (s, or m's reciprocal's input)
    kind: str  # "div", "reciprocal" (data * reciprocal(s)) or "inverse" (data * m)
    reciprocal: Operation | None = None


def _scaling(value: SSAValue) -> _Scaling:
    found = producer(value, DIV_TENSOR, MUL_TENSOR)
    if found is None:
        scalar = producer(value, DIV_SCALAR, MUL_SCALAR)
        if scalar is not None:
            raise NoMatch(f"x is scaled by the number {scalar.arg(1)}, not by a scale tensor")
        owner = value.owner
        what = owner.target.data if isinstance(owner, aten.CallOp) else "no op"
        raise NoMatch(f"the clamped value is made by {what}, not by a scaling of x")
    a, b = found.arg(0), found.arg(1, "other")
    out_dims = shape_of(value)
    if found.target == DIV_TENSOR:
        if not isinstance(b, SSAValue):
            raise NoMatch(f"x is divided by the number {b}, not by a scale tensor")
        if shape_of(a) != out_dims:
            raise NoMatch("the scale broadcasts x to another shape")
        return _Scaling(a, found.op, b, "div")
    if not isinstance(a, SSAValue) or not isinstance(b, SSAValue):
        number = b if isinstance(a, SSAValue) else a
        raise NoMatch(f"x is multiplied by the number {number}, not by a scale tensor")
    if shape_of(a) == out_dims and shape_of(b) != out_dims:
        data, factor = a, b
    elif shape_of(b) == out_dims and shape_of(a) != out_dims:
        data, factor = b, a
    else:
        raise NoMatch("x is multiplied by a tensor of its own shape, not by a scale")
    recip = producer(factor, RECIPROCAL)
    if recip is not None:
        return _Scaling(data, found.op, recip.arg(0), "reciprocal", recip.op)
    return _Scaling(data, found.op, factor, "inverse")


# --- dynamic scales -----------------------------------------------------------------------------------


class _NotDerived(Exception):
    """The scale is not computed from an abs-max: it may be static, or no quant scale at all."""


@dataclass
class _ScaleChain:
    """A scale computed from an abs-max, parsed from the divisor of x down to the reduction."""

    core: SSAValue  # the top arithmetic step's result (the MIN_SCALE floor)
    path: list[Operation]  # reshapes from the core to the divisor, in order
    steps: list[tuple[str, object]]  # arithmetic, top first: floor, cap, div, ue8m0
    ops: list[Operation]  # every op of the scale computation (path included)
    abs_source: SSAValue  # the amax is of abs(abs_source)
    reduced: str  # "last" or "all"


def _floor_of(found: Call) -> tuple[SSAValue, float] | None:
    """(value, c) when `found` is `max(value, c)` in one of its spellings, else None."""
    if found.target in CLAMPS_BELOW:
        c = bound_value(found.arg(1, "min"))
        return None if c is None else (found.arg(0), c)
    if found.target in CLAMPS_BOTH:
        if found.arg(2, "max") is not None:
            return None
        c = bound_value(found.arg(1, "min"))
        return None if c is None else (found.arg(0), c)
    if found.target == MAXIMUM:
        for v, c in ((found.arg(0), found.arg(1)), (found.arg(1), found.arg(0))):
            bound = bound_value(c)
            if bound is not None and shape_of(v) == shape_of(found.result):
                return v, bound
    return None


def _cap_of(found: Call) -> tuple[SSAValue, SSAValue] | None:
    """(value, ub) when `found` is `min(value, ub)` with a one-element tensor ub, else None."""
    value = ub = None
    if found.target in CLAMPS_ABOVE:
        value, ub = found.arg(0), found.arg(1, "max")
    elif found.target in CLAMPS_BOTH and found.arg(1, "min") is None:
        value, ub = found.arg(0), found.arg(2, "max")
    elif found.target == MINIMUM:
        a, b = found.arg(0), found.arg(1, "other")
        value, ub = (a, b) if shape_of(a) == shape_of(found.result) else (b, a)
    if not isinstance(ub, SSAValue) or not isinstance(value, SSAValue):
        return None
    if shape_of(value) != shape_of(found.result) or not is_one_element(shape_of(ub)):
        return None
    return value, ub


def _ue8m0_of(value: SSAValue) -> tuple[SSAValue, list[Operation]] | None:
    """(s, ops) when `value` is `2 ** ceil(log2(s))` (`exp2` or `pow(2, ..)`), else None."""
    top = producer(value, EXP2, POW_SCALAR)
    if top is None:
        return None
    if top.target == POW_SCALAR:
        if scalar_of(top.arg(0)) != 2:
            return None
        exponent = top.arg(1, "exponent")
    else:
        exponent = top.arg(0)
    ceil = producer(exponent, CEIL)
    log2 = producer(ceil.arg(0), LOG2) if ceil is not None else None
    if ceil is None or log2 is None:
        return None
    return log2.arg(0), [top.op, ceil.op, log2.op]


def _divisor_number(found: Call) -> float | None:
    if found.target not in (DIV_TENSOR, DIV_SCALAR):
        return None
    number = bound_value(found.arg(1, "other"))
    return number


def _scale_chain(divisor: SSAValue) -> _ScaleChain:
    """Parse the divisor of x as arithmetic on an abs-max; _NotDerived when it is not one."""
    path: list[Operation] = []
    core = divisor
    while (view := producer(core, *VIEWS)) is not None:
        path.insert(0, view.op)
        core = view.arg(0)
    ops = list(path)
    steps: list[tuple[str, object]] = []
    current = core
    while True:
        found = producer(current)
        if found is None:
            raise _NotDerived
        if found.target in (AMAX, MAX, MAX_DIM):
            break
        if found.target in VIEWS:
            ops.append(found.op)
            current = found.arg(0)
            continue
        cast = as_cast(current)
        if cast is not None:
            if cast[1] != f32 or not is_float(dtype_of(cast[0])):
                raise _NotDerived
            ops.append(found.op)
            current = cast[0]
            continue
        step_ops = [found.op]
        if (floor := _floor_of(found)) is not None:
            steps.append(("floor", floor[1]))
            current = floor[0]
        elif (cap := _cap_of(found)) is not None:
            steps.append(("cap", cap[1]))
            current = cap[0]
        elif (number := _divisor_number(found)) is not None:
            steps.append(("div", number))
            current = found.arg(0)
        elif (ue8m0 := _ue8m0_of(current)) is not None:
            steps.append(("ue8m0", None))
            current, step_ops = ue8m0
        else:
            raise _NotDerived
        if dtype_of(step_ops[0].results[0]) != f32:
            raise NoMatch(f"the scale is computed in {dtype_of(step_ops[0].results[0])}, not f32")
        ops.extend(step_ops)
    found = producer(current)
    assert found is not None
    if found.target == MAX_DIM and current is not found.op.results[0]:
        raise _NotDerived
    absolute = producer(found.arg(0), ABS)
    if absolute is None:
        raise NoMatch("the scale is the max of x, not of |x|")
    ops.extend([found.op, absolute.op])
    src = absolute.arg(0)
    r = len(shape_of(src))
    if found.target == MAX:
        dims: list[int] = list(range(r))
    else:
        dim = found.arg(1, "dim", [])
        dims = [dim] if isinstance(dim, int) else list(dim) or list(range(r))
    if not all(isinstance(d, int) and -r <= d < r for d in dims):
        raise NoMatch(f"the amax reduces over {dims}")
    reduced = sorted({normalize_dim(d, r) for d in dims})
    if reduced == list(range(r)):
        kind = "all"
    elif reduced == [r - 1]:
        kind = "last"
    else:
        raise NoMatch(f"the amax reduces over dims {reduced}, not the last dim or all of x")
    return _ScaleChain(core, path, steps, ops, src, kind)


_GRAMMARS = {
    DYNAMIC_TENSOR: (("floor", "div"),),
    DYNAMIC_TOKEN: (("floor", "div"), ("floor", "div", "cap")),
    GROUP: (("floor", "div"), ("floor", "div", "floor"), ("floor", "ue8m0", "div"),
            ("floor", "ue8m0", "div", "floor")),
}
_SCHEME_WORDS = {DYNAMIC_TENSOR: "per-tensor", DYNAMIC_TOKEN: "per-token", GROUP: "per-group"}


def _check_arithmetic(kind: str, chain: _ScaleChain, bound: float) -> None:
    """The scale arithmetic is the scheme's: `max(min(amax, ub) / M, MIN_SCALE)` (per token),
    `max(amax / M, MIN_SCALE)` (per tensor), `max(ue8m0(max(amax, eps) / M), MIN_SCALE)`
    (per group, eps and UE8M0 optional)."""
    names = tuple(name for name, _ in chain.steps)
    what = _SCHEME_WORDS[kind]
    if names not in _GRAMMARS[kind]:
        shown = " <- ".join(names) if names else "the bare amax"
        raise NoMatch(f"the {what} scale is computed as {shown}, not as the scheme computes it "
                      "(max(amax / M, MIN_SCALE))")
    floor = float(chain.steps[0][1])  # type: ignore[arg-type]
    if to_f32(floor) != to_f32(min_scale(bound)):
        raise NoMatch(f"the {what} scale floor is {floor:g}, not MIN_SCALE = 1 / ({bound:g} * 512)")
    div = next(float(v) for n, v in chain.steps if n == "div")  # type: ignore[arg-type]
    if div != bound:
        raise NoMatch(f"the {what} scale is amax / {div:g}, not amax / {bound:g}")
    if kind == GROUP and names[-1] == "floor":
        eps = float(chain.steps[-1][1])  # type: ignore[arg-type]
        floored = eps / bound
        if "ue8m0" in names and floored > 0:
            mantissa, exponent = math.frexp(floored)
            floored = 2.0 ** (exponent - 1) if mantissa == 0.5 else 2.0**exponent
        if floored > min_scale(bound):
            raise NoMatch(f"the per-group amax floor {eps:g} is not absorbed by MIN_SCALE")


# --- the whole decomposed chain ----------------------------------------------------------------------


@dataclass
class _Quant:
    x: SSAValue
    q: SSAValue
    scheme: QuantScheme
    ops: list[Operation]
    scale: SSAValue | None = None
    scale_ub: SSAValue | None = None
    scale_out: SSAValue | None = None
    front: list[Operation] = field(default_factory=list)  # casts of x that may stay outside
    scale_is_inverse: bool = False  # `scale` holds 1 / s: the op takes a new reciprocal of it
    divide: bool = False  # a static quant spelled `x / s` (the raised op's `divide`)
    reciprocal: bool = False  # a dynamic quant spelled `x * s.reciprocal()` (`reciprocal`)


def _match_decomposed(cast_op: Operation, fp8: Attribute) -> _Quant:
    bound = FP8_BOUND[fp8]
    ops: list[Operation] = [cast_op]
    cast = as_cast(cast_op.results[0])
    assert cast is not None
    clamped, lo, hi = peel_clamps(cast[0], ops)
    if lo is None and hi is None:
        raise NoMatch(f"no clamp to ±{bound:g} before the cast to {fp8}")
    if lo != -bound or hi != bound:
        raise NoMatch(f"clamped to [{lo}, {hi}], not ±{bound:g} for {fp8}")
    if dtype_of(clamped) != f32:
        raise NoMatch(f"x is scaled in {dtype_of(clamped)}, not f32")
    scaling = _scaling(clamped)
    ops.append(scaling.op)
    if scaling.reciprocal is not None and only_user(scaling.reciprocal.results[0]) is scaling.op:
        ops.append(scaling.reciprocal)  # a shared reciprocal stays outside, read from above
    if scaling.kind == "inverse":
        return _static_quant(cast_op, ops, scaling)
    try:
        chain = _scale_chain(scaling.divisor)
    except _NotDerived:
        return _static_quant(cast_op, ops, scaling)
    return _dynamic_quant(cast_op, bound, ops, scaling, chain)


def _static_quant(cast_op: Operation, ops: list[Operation], scaling: _Scaling) -> _Quant:
    _static_scale(scaling.divisor, "quant scale")
    front: list[Operation] = []
    x = strip_f32_casts(scaling.data, front)
    q = cast_op.results[0]
    # q = fp8(clamp(x * m)): the scale is 1 / m, made before the raised op (see _raise).
    inverse = scaling.kind == "inverse"
    return _Quant(x, q, QuantScheme.static_tensor(), [*ops, *front], scale=scaling.divisor,
                  front=front, scale_is_inverse=inverse, divide=scaling.kind == "div")


def _reshaped_back(q: SSAValue, dims: tuple) -> tuple[SSAValue, list[Operation]] | None:
    """Follow single-user reshapes of q until it has `dims` (None if it never does)."""
    ops: list[Operation] = []
    while shape_of(q) != dims:
        found = users(q)
        if len(found) != 1 or call(found[0], *VIEWS) is None:
            return None
        ops.append(found[0])
        q = found[0].results[0]
    return q, ops


def _dynamic_quant(cast_op: Operation, bound: float, ops: list[Operation], scaling: _Scaling,
                   chain: _ScaleChain) -> _Quant:
    """A dynamic scale: decide the scheme from what the amax is taken over, check the
    arithmetic, find q (reshaped back for groups) and the scale result."""
    q = cast_op.results[0]
    divisor_dims = shape_of(scaling.divisor)
    front: list[Operation] = []
    q_ops: list[Operation] = []
    kind = DYNAMIC_TENSOR if chain.reduced == "all" else DYNAMIC_TOKEN
    grouped = grouped_view(scaling.data) if chain.reduced == "last" else None
    if grouped is not None:
        source = grouped_view(chain.abs_source)
        back = _reshaped_back(q, shape_of(grouped.x))
        if (
            source is not None
            and source.x is grouped.x
            and (source.groups, source.size) == (grouped.groups, grouped.size)
            and grouped.size in GROUP_SIZES
            and back is not None
        ):
            kind = GROUP
            x = grouped.x
            front = list(dict.fromkeys((*grouped.ops, *source.ops)))
            q, q_ops = back
        elif grouped.size not in GROUP_SIZES and back is not None:
            raise NoMatch(f"group size {grouped.size}: irfuse quantizes groups of 128 or 64")
    if kind != GROUP:
        x = strip_f32_casts(scaling.data, front)
        if strip_f32_casts(chain.abs_source, front) is not x:
            raise NoMatch("quant scale is not a graph input or constant (it is the amax of "
                          "another tensor)")
    x_dims = shape_of(x)
    _check_arithmetic(kind, chain, bound)
    if kind == DYNAMIC_TENSOR:
        if not is_one_element(divisor_dims):
            raise NoMatch(f"the per-tensor scale has shape {fmt_dims(divisor_dims)}")
        expected = None
    elif kind == DYNAMIC_TOKEN:
        expected = (*x_dims[:-1], 1)
        if divisor_dims != expected:
            raise NoMatch(f"the per-token scale has shape {fmt_dims(divisor_dims)}, not "
                          f"{fmt_dims(expected)}")
    else:
        if divisor_dims != (*shape_of(scaling.data)[:-1], 1):
            raise NoMatch(f"the per-group scale has shape {fmt_dims(divisor_dims)}")
        expected = (*x_dims[:-1], grouped.groups)  # type: ignore[union-attr]
    if shape_of(q) != x_dims:
        raise NoMatch("the quantized value does not have x's shape")
    inside = {*ops, *front, *chain.ops, *q_ops}
    scale_out, col_major, layout_ops = _scale_result(chain, inside, expected, len(x_dims))
    ub = next((v for n, v in chain.steps if n == "cap"), None)
    if ub is not None:
        _static_scale(ub, "scale_ub")  # type: ignore[arg-type]
    if kind == GROUP:
        scheme = QuantScheme.per_group(grouped.size, col_major=col_major,  # type: ignore[union-attr]
                                       ue8m0=any(n == "ue8m0" for n, _ in chain.steps))
    else:
        scheme = QuantScheme.get(kind)
    all_ops = list(dict.fromkeys((*ops, *front, *chain.ops, *q_ops, *layout_ops)))
    return _Quant(x, q, scheme, all_ops, scale_ub=ub, scale_out=scale_out,  # type: ignore[arg-type]
                  front=front, reciprocal=scaling.kind == "reciprocal" and kind != DYNAMIC_TENSOR)


def _scale_result(chain: _ScaleChain, inside: set[Operation], expected: tuple | None,
                  rank: int) -> tuple[SSAValue, bool, list[Operation]]:
    """The value the raised op's scale result stands for, whether it is column-major, and the
    layout ops from the scale's core to it. `expected` is the scheme's scale shape (None: any
    one-element shape)."""

    def fits(value: SSAValue) -> bool:
        dims = shape_of(value)
        return is_one_element(dims) if expected is None else dims == expected

    path_values = [chain.core, *(op.results[0] for op in chain.path)]
    exits = [v for v in path_values if any(u not in inside for u in users(v))]
    if len(exits) > 1:
        raise NoMatch("the scale is used in more than one layout")
    if not exits:  # the scale is not used outside: any value of the scheme's shape will do
        for value in path_values:
            if fits(value):
                return value, False, []
        raise NoMatch("the scale is never in its scheme's shape")
    start = exits[0]
    block = chain.core.owner.parent_block()  # type: ignore[union-attr]
    trail, path = [start], []
    value = start
    while True:
        outside = [u for u in users(value) if u not in inside]
        if (
            len(outside) != 1
            or call(outside[0], *LAYOUTS) is None
            or outside[0].parent_block() is not block
        ):
            break
        path.append(outside[0])
        value = outside[0].results[0]
        trail.append(value)
    for end in range(len(trail) - 1, -1, -1):
        if not fits(trail[end]):
            continue
        col_major = _column_major(path[:end])
        if col_major is None:
            continue
        if col_major and (expected is None or expected[-1] == 1):
            continue  # per-token / per-tensor scales have no column-major form
        if col_major and rank != 2:
            raise NoMatch("column-major scales of an input of rank > 2")
        return trail[end], col_major, path[:end]
    # Used outside only in a reshape the chain also divides by (cse-pure merged the quant's
    # `scale.unsqueeze(-1)` with a dequant's): the scale result is the value before those
    # reshapes, which raise_chain clones into the region, the originals reading the result.
    for value in reversed(path_values[:path_values.index(start)]):
        if fits(value):
            return value, False, []
    shape = "one-element" if expected is None else fmt_dims(expected)
    raise NoMatch(f"the scale is not used in its {shape} shape")


def _column_major(path: list[Operation]) -> bool | None:
    """False for reshapes only; True for `transpose, contiguous copy, transpose` (reshapes
    around them allowed); None for any other layout."""
    kinds = []
    for op in path:
        found = call(op)
        assert found is not None
        if found.target in VIEWS:
            continue
        if found.target in TRANSPOSES:
            if not _swaps_last_two(found):
                return None
            kinds.append("T")
        else:  # a clone
            fmt = found.kwargs.get("memory_format")
            text = getattr(getattr(fmt, "text", None), "data", None)
            kinds.append("C" if text == "torch.contiguous_format" else "copy")
    if not kinds:
        return False
    return True if kinds == ["T", "C", "T"] else None


def _swaps_last_two(found: Call) -> bool:
    r = len(shape_of(found.arg(0)))
    if r < 2:
        return False
    if found.target == MATRIX_T:
        return r == 2
    if found.target == TRANSPOSE_INT:
        d0, d1 = found.arg(1, "dim0"), found.arg(2, "dim1")
        if not isinstance(d0, int) or not isinstance(d1, int):
            return False
        return {normalize_dim(d0, r), normalize_dim(d1, r)} == {r - 2, r - 1}
    perm = found.arg(1, "dims")
    if not isinstance(perm, list) or not all(isinstance(p, int) for p in perm):
        return False
    return [normalize_dim(p, r) for p in perm] == [*range(r - 2), r - 1, r - 2]


# --- custom ops --------------------------------------------------------------------------------------


def _match_custom(found: Call) -> _Quant | Operation:
    x = found.arg(0)
    if found.target == IRFUSE_QUANT_NVFP4:
        gs = found.arg(1, "global_scale")
        dims = shape_of(x)
        if len(dims) != 2 or not isinstance(dims[1], int) or dims[1] % 16:
            raise NoMatch(f"NVFP4 of an input of shape {fmt_dims(dims)}, not [M, N] with N a "
                          "multiple of 16")
        if not is_one_element(shape_of(gs)) or dtype_of(gs) != f32:
            raise NoMatch("the NVFP4 global scale is not one f32 element")
        q, block_scale = found.op.results
        return QuantNvfp4Op(x, gs, result_types=[q.type, block_scale.type])
    results = list(found.op.results)
    if found.target == IRFUSE_QUANT_FP8_STATIC:
        scale = found.arg(1, "scale")
        _static_scale(scale, "quant scale")
        return _Quant(x, results[0], QuantScheme.static_tensor(), [found.op], scale=scale)
    if found.target == IRFUSE_QUANT_FP8_PER_TOKEN:
        ub = found.arg(1, "scale_ub")
        if ub is not None:
            _static_scale(ub, "scale_ub")
        return _Quant(x, results[0], QuantScheme.dynamic_token(), [found.op], scale_ub=ub,
                      scale_out=results[1])
    if found.target == IRFUSE_QUANT_FP8_PER_TENSOR:
        return _Quant(x, results[0], QuantScheme.dynamic_tensor(), [found.op],
                      scale_out=results[1])
    group, col_major, ue8m0 = (found.arg(1, "group_size"), found.arg(2, "col_major", False),
                               found.arg(3, "ue8m0", False))
    if group not in GROUP_SIZES:
        raise NoMatch(f"group size {group}: irfuse quantizes groups of 128 or 64")
    hidden = shape_of(x)[-1] if shape_of(x) else None
    if isinstance(hidden, int) and hidden % group:
        raise NoMatch(f"group size {group} does not divide the hidden size {hidden}")
    if col_major and len(shape_of(x)) != 2:
        raise NoMatch("column-major scales of an input of rank > 2")
    scheme = QuantScheme.per_group(group, col_major=bool(col_major), ue8m0=bool(ue8m0))
    return _Quant(x, results[0], scheme, [found.op], scale_out=results[1])


# --- raising -----------------------------------------------------------------------------------------


def _settle_chain(quant: _Quant) -> None:
    """Make the chain outlinable: leading casts of x whose results are also used elsewhere stay
    outside when they are not pure (the raised op takes the cast value as its x); constant bounds
    (`full`) used by the chain alone move in. Other values used outside the chain are
    `raise_chain`'s to settle: a pure one (a leading `x.float()` that cse-pure made one for the
    q, k and v quants of a norm's output, say) is cloned into the region, so the op still takes
    x itself; anything else is a NoMatch."""
    outputs = {quant.q, *([quant.scale_out] if quant.scale_out is not None else [])}
    for op in list(reversed(quant.front)):  # nearest to x first
        if op.operands[0] is not quant.x or as_cast(op.results[0]) is None:
            break
        if op not in outside_users(quant.ops, outputs) or is_pure(op):
            break
        quant.ops.remove(op)
        quant.x = op.results[0]
    chain = set(quant.ops)
    for op in list(quant.ops):
        for operand in op.operands:
            maker = operand.owner
            if (
                isinstance(maker, aten.CallOp)
                and maker.target.data in (FULL, SCALAR_TENSOR)
                and maker not in chain
                and all(u.operation in chain for u in operand.uses)
            ):
                chain.add(maker)
                quant.ops.append(maker)


def _reciprocal(m: SSAValue, location: Attribute) -> Operation:
    """A new `reciprocal(m)`: the scale of a quant written `x * m`."""
    op = aten.CallOp(RECIPROCAL, [m], [call_args.OperandRefAttr(IntAttr(0))], [m.type])
    op.location = location
    op.results[0].name_hint = "quant_scale"
    return op


def _build(quant: _Quant, location: Attribute) -> tuple[Operation, list[Operation]]:
    """The raised op, and the new ops it takes as operands (to insert before it)."""
    if not is_float(dtype_of(quant.x)):
        raise NoMatch(f"x is {dtype_of(quant.x)}, not a float tensor")
    if not quant.scheme.is_static:
        assert quant.scale_out is not None
        raised = QuantFp8Op(quant.x, None, quant.scale_ub, scheme=quant.scheme,
                            reciprocal=quant.reciprocal,
                            result_types=[quant.q.type, quant.scale_out.type])
        return raised, []
    assert quant.scale is not None
    before = [_reciprocal(quant.scale, location)] if quant.scale_is_inverse else []
    scale = before[0].results[0] if before else quant.scale
    raised = QuantFp8Op(quant.x, scale, scheme=quant.scheme, divide=quant.divide,
                        result_types=[quant.q.type, None])
    return raised, before


def _raise(quant: _Quant | Operation, anchor: Operation, order: dict[Operation, int]) -> None:
    if isinstance(quant, Operation):  # quant.nvfp4 from the custom op
        raised = quant
        ops = [anchor]
        outputs = list(anchor.results)
        before: list[Operation] = []
    else:
        _settle_chain(quant)
        if any(o not in order for o in quant.ops):
            raise NoMatch("the chain reaches an op made by this pass")
        ops = sorted(set(quant.ops), key=lambda o: order[o])
        outputs = [quant.q] + ([quant.scale_out] if quant.scale_out is not None else [])
        raised, before = _build(quant, anchor.location)
    try:
        raised.verify()
    except VerifyException as err:
        discard(raised, *before)
        raise NoMatch(f"the raised op would not verify: {err}") from None
    raise_chain(raised, ops, outputs, "quant", prelude=before)


def _near_miss_cast(found: Call, dtype: Attribute) -> str | None:
    """A remark for a clamp to an fp8 bound followed by a cast to another dtype."""
    source = found.arg(0)
    if producer(source, *CLAMPS) is None:
        return None
    try:
        _, lo, hi = peel_clamps(source, [])
    except NoMatch:
        return None
    if hi is None or lo != -hi or hi not in _NEAR_MISS_BOUNDS:
        return None
    return f"clamped to ±{hi:g} but cast to {dtype}, not to f8E4M3FN or f8E4M3FNUZ"


class CustomFp8QuantPattern(CallPattern):
    """irfuse's FP8 quant custom ops, whole."""

    targets = (IRFUSE_QUANT_FP8_STATIC, IRFUSE_QUANT_FP8_PER_TOKEN, IRFUSE_QUANT_FP8_PER_TENSOR, IRFUSE_QUANT_FP8_GROUP)
    remark = "not an FP8 quant"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        _raise(_match_custom(found), found.op, site.order)
        return REWROTE


class CustomNvfp4QuantPattern(CustomFp8QuantPattern):
    """irfuse's NVFP4 quant custom op, whole."""

    targets = (IRFUSE_QUANT_NVFP4,)
    remark = "not an NVFP4 quant"


class Fp8CastPattern(AnchorPattern):
    """FP8 quant, anchored at its fp8 cast (after `Nvfp4CastPattern` declined it)."""

    targets = CASTS
    remark = "not an FP8 quant"

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        if dtype_of(op.results[0]) not in FP8_BOUND:
            # Most casts are bf16 <-> f32 and lead nowhere; a clamp before one is a near miss.
            clamp = op.operands[0].owner if op.operands else None
            if isinstance(clamp, aten.CallOp) and clamp.target.data in CLAMPS:
                cast = as_cast(op.results[0])
                reason = _near_miss_cast(call(op), cast[1]) if cast else None
                if reason is not None:
                    raise NoMatch(reason)
            return NO_CANDIDATE
        cast = as_cast(op.results[0])
        if cast is None:
            return NO_CANDIDATE
        _raise(_match_decomposed(op, cast[1]), op, site.order)
        return REWROTE


class RaiseQuant(PatternPass):
    """Raise FP8 (static per-tensor, dynamic per-token / per-tensor, per-group) and NVFP4
    quantization to `quant` ops. No options."""

    name = "raise-quant"
    patterns = (CustomFp8QuantPattern(), CustomNvfp4QuantPattern(), Nvfp4CastPattern(),
                Fp8CastPattern())
