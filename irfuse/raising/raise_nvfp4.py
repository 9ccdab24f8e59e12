"""raise-quant's NVFP4 half: quantization to NVFP4 written in plain torch.

Anchored at the fp8 cast of the block scales (an amax over blocks of 16 times a global scale,
read as a product of powers); every part must be `docs/numerics.md`'s: the block scale, the
scaled and clamped value, the e2m1 codes (`nvfp4_codes`) and their packing, the scales' swizzle
(`nvfp4_swizzle`). Produces `quant.nvfp4` with the chain in its region; a part that differs is a
remark ("not an NVFP4 quant: ..."), so a lookalike is never raised to a kernel that rounds
differently. vLLM's emulation keeps the e2m1 values and the block scales as f32 instead of packed
codes and swizzled fp8 (`nvfp4_codes.e2m1_values` proves that rounding): its chain is raised with
`irfuse::nvfp4_pack` at its end, and `irfuse::nvfp4_unpack` after the raised op gives its users
the same f32 values back (both conversions exact). Reciprocals written as vLLM's
`get_reciprocal`, `1 / (t + (t == 0) * C)`, are read as zero guards (`_bump_guard`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects.builtin import IntAttr, f32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint, Rewriter

from irfuse.dialects import aten
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.quant import (
    QuantNvfp4Op,
)
from irfuse.ir import call_args
from irfuse.ir.shapes import F8E4M3FN, FP8_QUANT_DTYPES, is_float
from irfuse.raising.aten_ops import (
    ABS,
    ADD_TENSOR,
    AMAX,
    CASTS,
    DIV_SCALAR,
    DIV_TENSOR,
    FULL,
    FULL_LIKE,
    IRFUSE_NVFP4_PACK,
    IRFUSE_NVFP4_UNPACK,
    MAX_DIM,
    MUL_SCALAR,
    MUL_TENSOR,
    ONES,
    RECIPROCAL,
    SCALAR_TENSOR,
    VIEWS,
    ZEROS,
)
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import (
    Call,
    NoMatch,
    as_cast,
    call,
    commutative_operands,
    is_last_dim,
    is_pure,
    only_user,
    producer,
    raise_chain,
    same_value,
    scalar_of,
    users,
    with_private,
)
from irfuse.raising.nvfp4_codes import (
    VALUES_MISS_PREFIX,
    codes_and_packing,
    e2m1_values,
)
from irfuse.raising.nvfp4_swizzle import (
    swizzle_scales,
)
from irfuse.raising.quant_common import (
    CLAMPS,
    COPIES,
    E2M1_MAX,
    EQ,
    FILL_WITH,
    FILLS,
    MASKED_FILL,
    NVFP4_BLOCK,
    NVFP4_SCALE_BOUND,
    WHERE,
    Blocks,
    GroupedView,
    dtype_of,
    fmt_dims,
    grouped_view,
    peel_clamps,
    shape_of,
)


@dataclass
class _Walk:
    """What the walks over the scalings collect: the ops passed, optional ops (views and
    reciprocals of the global scale, which other code may share), the zero guards seen."""

    blocks: Blocks
    x: GroupedView
    sb: SSAValue | None = None  # the fp8 block scales (None while the block scale is read)
    ops: list[Operation] = field(default_factory=list)
    optional: list[Operation] = field(default_factory=list)
    guarding: int = 0  # > 0 while a zero guard's branches are read
    unguarded: int = 0  # divisions by sb read outside a zero guard


Powers = dict[object, int]


def _fill_value(value: object, ops: list[Operation]) -> float | None:
    """The number a constant-filled tensor holds (`ones_like`, `zeros_like`, `full_like`, a
    scalar), adding its maker to `ops`."""
    number = scalar_of(value)
    if number is not None:
        return float(number)
    found = producer(value, *FILLS, *FILL_WITH)
    if found is None:
        return None
    if found.target in FILLS:
        ops.append(found.op)
        return FILLS[found.target]
    fill = found.arg(1 if found.target == FULL_LIKE else 2, "fill_value")
    number = scalar_of(fill)
    if number is None:
        return None
    ops.append(found.op)
    return float(number)


def _find_amax(value: SSAValue) -> GroupedView | None:
    """The grouped x of an amax over |x| viewed [..., G, g] among the few ops above `value` (a
    cheap look before the full parse)."""
    frontier, seen = [value], 0
    while frontier and seen < 12:
        found = producer(frontier.pop())
        seen += 1
        if found is None:
            continue
        if found.target in (AMAX, MAX_DIM):
            absolute = producer(found.arg(0), ABS)
            return grouped_view(absolute.arg(0)) if absolute is not None else None
        frontier.extend(o for o in found.op.operands if isinstance(o, SSAValue))
    return None


def _amax_leaf(value: SSAValue, walk: _Walk) -> bool:
    """Whether `value` is the block amax: `amax(|x_b|, -1)` (or `max(-1)[0]`), x_b the walk's
    blocked x, maybe cast to f32 (exact) and reshaped."""
    ops: list[Operation] = []
    while True:
        cast = as_cast(value)
        if cast is not None and is_float(dtype_of(cast[0])):
            ops.append(value.owner)  # type: ignore[arg-type]
            value = cast[0]
            continue
        view = producer(value, *VIEWS)
        if view is not None and walk.blocks.role(shape_of(view.arg(0))) == "block":
            ops.append(view.op)
            value = view.arg(0)
            continue
        break
    found = producer(value, AMAX, MAX_DIM)
    if found is None or (found.target == MAX_DIM and value is not found.op.results[0]):
        return False
    absolute = producer(found.arg(0), ABS)
    grouped = grouped_view(absolute.arg(0)) if absolute is not None else None
    if grouped is None or grouped.x is not walk.x.x:
        return False
    dims = found.arg(1, "dim", [])
    dims = [dims] if isinstance(dims, int) else dims
    if not is_last_dim(dims, len(shape_of(found.arg(0)))):
        raise NoMatch(f"the block amax reduces over {dims}, not the last dim")
    walk.ops.extend([*ops, found.op, absolute.op, *grouped.ops])
    return True


def _x_leaf(value: SSAValue, walk: _Walk) -> bool:
    """Whether `value` is the blocked x (maybe cast to f32 before or after the view)."""
    grouped = grouped_view(value)
    if grouped is None or grouped.x is not walk.x.x or grouped.size != walk.blocks.size:
        return False
    walk.ops.extend(grouped.ops)
    return True


def _sb_leaf(value: SSAValue, walk: _Walk) -> bool:
    """Whether `value` is the fp8 block scales cast to f32, maybe reshaped."""
    ops: list[Operation] = []
    while (view := producer(value, *VIEWS)) is not None:
        ops.append(view.op)
        value = view.arg(0)
    cast = as_cast(value)
    if cast is None or cast[0] is not walk.sb or cast[1] != f32:
        return False
    walk.ops.extend([*ops, value.owner])  # type: ignore[list-item]
    return True


def _powers(value: object, walk: _Walk, sign: int, depth: int = 0) -> tuple[Powers, float]:
    """`value` read as `c * prod(leaf ** k)` over f32 products, quotients and reciprocals:
    ({leaf: k}, c). Leaves: "amax" (while the block scale is read), "x" and "sb" (after), and
    one-element tensors (global scales, keyed by value). `sign` is the power `value` enters the
    whole with (a zero guard is sound only in a numerator). Broadcasts must align blocks."""
    if depth > 24:
        raise NoMatch("the scaling is too deep to read")
    number = scalar_of(value)
    if number is not None:  # a constant tensor joins the chain if the chain alone uses it
        return {}, float(number)
    if not isinstance(value, SSAValue):
        raise NoMatch(f"the scaling reads {value}")
    dims = shape_of(value)
    role = walk.blocks.role(dims)
    if role == "one":
        return _one_element_powers(value, walk, sign, depth)
    if walk.sb is None and role == "block" and _amax_leaf(value, walk):
        return {"amax": 1}, 1.0
    if walk.sb is not None and role == "x" and _x_leaf(value, walk):
        return {"x": 1}, 1.0
    if walk.sb is not None and role == "block" and _sb_leaf(value, walk):
        if sign < 0 and not walk.guarding:
            walk.unguarded += 1
        return {"sb": 1}, 1.0
    found = producer(value)
    if found is None:
        raise NoMatch(f"the scaling reads an input of shape {fmt_dims(dims)}")
    if role is None:
        raise NoMatch(f"{found.target} makes a value of shape {fmt_dims(dims)}")
    if dtype_of(value) != f32:
        raise NoMatch(f"the scaling computes in {dtype_of(value)}, not f32")
    target = found.target
    if target in VIEWS or target in COPIES:
        source = found.arg(0)
        if walk.blocks.role(shape_of(source)) != role:
            raise NoMatch(f"{target} reshapes a scale to {fmt_dims(dims)}")
        walk.ops.append(found.op)
        return _powers(source, walk, sign, depth + 1)
    if as_cast(value) is not None:
        raise NoMatch(f"the scaling casts {dtype_of(found.arg(0))} to f32 on the way")
    if target in (MUL_TENSOR, MUL_SCALAR, DIV_TENSOR, DIV_SCALAR):
        if found.kwargs.get("rounding_mode") is not None:
            raise NoMatch("the scaling divides with a rounding mode")
        a, b = found.arg(0), found.arg(1, "other")
        _check_broadcast(found, role, walk)
        k = -1 if target.startswith("aten::div") else 1
        walk.ops.append(found.op)
        pa, ca = _powers(a, walk, sign, depth + 1)
        pb, cb = _powers(b, walk, sign * k, depth + 1)
        if cb == 0:
            raise NoMatch("the scaling divides by 0")
        return _combine(pa, pb, k), ca * cb**k
    if target == RECIPROCAL:
        walk.ops.append(found.op)
        pa, ca = _powers(found.arg(0), walk, -sign, depth + 1)
        return _combine({}, pa, -1), 1.0 / ca
    if target in WHERE or target in MASKED_FILL:
        _check_broadcast(found, role, walk)
        return _guard(found, walk, sign, depth)
    if target == ADD_TENSOR:
        _check_broadcast(found, role, walk)
        return _bump_guard(found, walk, sign, depth)
    raise NoMatch(f"the scaling is computed with {target}")


def _check_broadcast(found: Call, role: str, walk: _Walk) -> None:
    """Every tensor operand of an op making a `role` value has its shape, one element, or (for
    blocked x) [M, G, 1]: block values broadcast over their own block only."""
    for operand in found.op.operands:
        dims = shape_of(operand)
        if walk.blocks.role(dims) not in (role, "one") and not (
            role == "x" and dims == (*walk.blocks.lead, walk.blocks.g, 1)
        ):
            raise NoMatch(f"{found.target} broadcasts a {fmt_dims(dims)} value over "
                          f"{fmt_dims(shape_of(found.result))}")


def _one_element_powers(value: SSAValue, walk: _Walk, sign: int, depth: int
                        ) -> tuple[Powers, float]:
    """A one-element f32 factor: a global scale (a leaf), or a reciprocal (`1 / s`), view or
    copy of one (optional ops: other code may share them)."""
    found = producer(value, RECIPROCAL, DIV_TENSOR, ADD_TENSOR, *VIEWS, *COPIES)
    if found is not None and found.target == DIV_TENSOR and scalar_of(found.arg(0)) != 1:
        found = None
    if found is None and (times := producer(value, MUL_TENSOR, MUL_SCALAR)) is not None:
        for inner, number in commutative_operands(times):
            c = scalar_of(number)
            if c is not None and isinstance(inner, SSAValue) and c != 0:
                walk.optional.append(times.op)  # `1.0 / t` traces as reciprocal(t) * 1.0
                powers, ci = _powers(inner, walk, sign, depth + 1)
                return powers, ci * c
    if found is not None and found.target == ADD_TENSOR:
        # `gs + (gs == 0) * C` (vLLM's `get_reciprocal(gs)`) is read as gs. They differ only for
        # gs = 0, a degenerate scale that makes every block scale 0: the kernels then give 0,
        # this spelling x / C's codes, nonzero only where |x| > C / 4. Otherwise a leaf.
        bump_ops: list[Operation] = []
        bumped = _bumped(found, bump_ops)
        if bumped is not None:
            walk.optional.extend([found.op, *bump_ops])
            return _powers(bumped, walk, sign, depth + 1)
        found = None
    if found is None:
        if dtype_of(value) != f32:
            raise NoMatch(f"the global scale is {dtype_of(value)}, not f32")
        return {value: 1}, 1.0
    inner = found.arg(1, "other") if found.target == DIV_TENSOR else found.arg(0)
    walk.optional.append(found.op)
    powers, c = _powers(inner, walk, sign, depth + 1)
    if found.target in (RECIPROCAL, DIV_TENSOR):
        return _combine({}, powers, -1), 1.0 / c
    return powers, c


def _combine(a: Powers, b: Powers, k: int) -> Powers:
    out = dict(a)
    for key, e in b.items():
        out[key] = out.get(key, 0) + k * e
    return {key: e for key, e in out.items() if e}


def _guard(found: Call, walk: _Walk, sign: int, depth: int) -> tuple[Powers, float]:
    """`where(w == 0, c, v)` (or `v.masked_fill(w == 0, c)`) for blocks whose scale is 0, `w`
    the block scale times powers of the global scale. Sound, and read as v, when such a block
    quantizes to 0 as docs/numerics.md's kernels quantize it: c = 0 in a numerator, or c = 1 in
    place of the block scale itself in a denominator (`x * gs / 1`, below 0.25 there)."""
    if walk.sb is None:
        raise NoMatch("the block scale is computed with a select")
    if found.target in MASKED_FILL:
        value, cond, fill_arg = found.arg(0), found.arg(1, "mask"), found.arg(2, "value")
    else:
        cond, fill_arg, value = found.arg(0), found.arg(1), found.arg(2, "other")
    eq = producer(cond, *EQ)
    if eq is None or scalar_of(eq.arg(1, "other")) != 0:
        raise NoMatch("a select in the scaling is not a guard for zero block scales")
    walk.ops.extend([found.op, eq.op])
    walk.guarding += 1
    try:
        return _guarded(eq, value, fill_arg, walk, sign, depth)
    finally:
        walk.guarding -= 1


def _guarded(eq: Call, value: object, fill_arg: object, walk: _Walk, sign: int, depth: int
             ) -> tuple[Powers, float]:
    """The branches of a zero guard (see `_guard`)."""
    w_powers, w_const = _powers(eq.arg(0), walk, 1, depth + 1)
    if w_powers.get("sb") != 1 or w_const == 0 or any(
        isinstance(key, str) and key != "sb" for key in w_powers
    ):
        raise NoMatch("the zero guard tests another value than the block scale")
    fill = _fill_value(fill_arg, walk.ops)
    if fill == 0 and sign > 0:
        return _powers(value, walk, sign, depth + 1)
    if fill == 1 and sign < 0 and value is eq.arg(0) and w_powers == {"sb": 1} and w_const == 1:
        return _powers(value, walk, sign, depth + 1)
    where = "multiplies" if sign > 0 else "divides"
    raise NoMatch(f"a zero block scale is replaced by {fill} where it {where} x (such a block "
                  "would not quantize to 0)")


def _bumped(found: Call, ops: list[Operation]) -> SSAValue | None:
    """t for `t + (t == 0) * C` with C >= 1 (vLLM's `get_reciprocal` adds it before dividing,
    where a select would break CUDA graph capture), adding the bump's ops to `ops`."""
    if found.arg(2, "alpha", 1) != 1:
        return None
    for t, bump in commutative_operands(found):
        times = producer(bump, MUL_TENSOR, MUL_SCALAR)
        if times is None or not isinstance(t, SSAValue):
            continue
        for mask, big in commutative_operands(times):
            eq = producer(mask, *EQ)
            c = scalar_of(big)
            if (eq is not None and eq.arg(0) is t and scalar_of(eq.arg(1, "other")) == 0
                    and c is not None and c >= 1):
                ops.extend([times.op, eq.op])
                return t
    return None


def _bump_guard(found: Call, walk: _Walk, sign: int, depth: int) -> tuple[Powers, float]:
    """`t + (t == 0) * C` (C >= 1), t the block scale times powers of the global scale, read as
    t: sound in a denominator only, where a zero block scale then divides x by C instead of 0.
    Such a block has |x| * gs below 6 * 2^-10 (its scale rounds to 0 in fp8), so x * gs / C, and
    x / C for gs >= 1 / C, stays below e2m1's first step: the block quantizes to 0 either way."""
    if walk.sb is None:
        raise NoMatch("the block scale is computed with an add")
    bump_ops: list[Operation] = []
    t = _bumped(found, bump_ops)
    if t is None:
        raise NoMatch("the scaling adds to the block scale (not a guard for zero scales)")
    if sign > 0:
        raise NoMatch("a zero block scale is bumped where it multiplies x (such a block would "
                      "not quantize to 0)")
    walk.ops.extend([found.op, *bump_ops])
    walk.guarding += 1
    try:
        t_powers, t_const = _powers(t, walk, sign, depth + 1)
    finally:
        walk.guarding -= 1
    if t_powers.get("sb") != 1 or t_const == 0 or any(
        isinstance(key, str) and key != "sb" for key in t_powers
    ):
        raise NoMatch("the zero guard tests another value than the block scale")
    return t_powers, t_const


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * abs(b)


def _global_scale(powers: Powers, expected: Powers, what: str) -> SSAValue:
    """The one global-scale leaf of `powers` (to the power 1); the named leaves must be
    `expected`."""
    scales = [key for key in powers if not isinstance(key, str)]
    named = {key: e for key, e in powers.items() if isinstance(key, str)}
    if len(scales) != 1 or powers[scales[0]] != 1 or named != expected:
        shown = " * ".join(f"{k if isinstance(k, str) else 'gs'}^{e}" for k, e in powers.items())
        raise NoMatch(f"{what} is {shown or 'a constant'}, not "
                      + " * ".join(f"{k}^{e}" for k, e in {**expected, "gs": 1}.items()))
    return scales[0]  # type: ignore[return-value]


@dataclass
class _Nvfp4:
    """A matched NVFP4 chain: the raised op's operands and results, the ops it replaces."""

    x: SSAValue
    global_scale: SSAValue
    q: SSAValue
    block_scale: SSAValue
    ops: list[Operation]
    optional: list[Operation]
    undo: tuple[Operation, Operation] | None = None
    """The float form's `nvfp4_pack` and `nvfp4_unpack`, to take out if raising fails."""


def nvfp4_block_scale(cast_op: Operation) -> tuple[_Walk, Powers, float] | None:
    """Read an fp8 cast as NVFP4's block-scale cast: its clamped value as a product of powers
    of a block amax and a global scale. None when it reads otherwise (an FP8 quant, maybe);
    NoMatch when it is a block scale that is not NVFP4's."""
    ops: list[Operation] = [cast_op]
    cast = as_cast(cast_op.results[0])
    if cast is None:
        return None
    try:
        clamped, lo, hi = peel_clamps(cast[0], ops)
    except NoMatch:
        return None
    if producer(clamped, MUL_TENSOR, MUL_SCALAR, DIV_TENSOR, DIV_SCALAR) is None:
        return None
    grouped = _find_amax(clamped)
    if grouped is None:
        return None
    x_dims = shape_of(grouped.x)
    if not x_dims or not isinstance(x_dims[-1], int):
        return None
    walk = _Walk(Blocks(tuple(x_dims[:-1]), x_dims[-1], grouped.size), grouped)
    try:
        powers, const = _powers(clamped, walk, 1)
    except NoMatch:
        return None
    if "amax" not in powers:
        return None
    # A block scale: from here on a mismatch is a near miss of NVFP4.
    if grouped.size != NVFP4_BLOCK:
        raise NoMatch(f"blocks of {grouped.size} values, not NVFP4's 16")
    if len(x_dims) != 2:
        raise NoMatch(f"NVFP4 of an input of shape {fmt_dims(x_dims)}, not [M, N]")
    if hi is None:
        raise NoMatch("the block scale is not clamped to 448 before its fp8 cast")
    if lo not in (None, -NVFP4_SCALE_BOUND) or hi != NVFP4_SCALE_BOUND:
        raise NoMatch(f"the block scale is clamped to [{lo}, {hi}], not to at most 448")
    walk.ops.extend(ops)
    return walk, powers, const


def match_nvfp4(cast_op: Operation, walk: _Walk, powers: Powers, const: float,
                 order: dict[Operation, int]) -> _Nvfp4:
    gs = _global_scale(powers, {"amax": 1}, "the block scale before its fp8 cast")
    if not _close(const, 1.0 / E2M1_MAX):
        raise NoMatch(f"the block scale is gs * amax * {const:g}, not gs * amax / 6")
    if dtype_of(cast_op.results[0]) != F8E4M3FN:
        raise NoMatch(f"the block scales are cast to {dtype_of(cast_op.results[0])}, not "
                      "f8E4M3FN")
    walk.sb = cast_op.results[0]
    y, y_gs = _scaled_value(walk)
    if not same_value(y_gs, gs):
        raise NoMatch("the block scale and the scaled x use different global scales")
    try:
        q, code_ops = codes_and_packing(y, walk.blocks, order)
    except NoMatch:
        found = _as_values(walk, y, gs, order)
        if found is None:
            raise
        return found
    block_scale, swizzle_ops = swizzle_scales(walk.sb, {*walk.ops, *code_ops}, walk.blocks)
    return _Nvfp4(walk.x.x, gs, q, block_scale, [*walk.ops, *code_ops, *swizzle_ops],
                  walk.optional)


def _as_values(walk: _Walk, y: SSAValue, gs: SSAValue, order: dict[Operation, int]
               ) -> _Nvfp4 | None:
    """NVFP4 kept as float values and float block scales (vLLM's emulation: `cast_to_fp4`'s
    e2m1 values as f32 [M, N], the fp8 block scales cast back to f32): the chain then ends in
    `nvfp4_pack` (exact), which the raised op replaces, and `nvfp4_unpack` (exact) gives the
    chain's users their values back. None when the rounding is not written as float values
    (the codes' remark stands)."""
    try:
        values, value_ops = e2m1_values(y, walk.blocks, order)
    except NoMatch as values_miss:
        # A rounding written as float values that is not e2m1's says so; else the codes' remark.
        if str(values_miss).startswith(VALUES_MISS_PREFIX):
            raise values_miss from None
        return None
    blocks = walk.blocks
    if shape_of(values) != (*blocks.lead, blocks.n) or len(blocks.lead) != 1:
        raise NoMatch(f"the e2m1 values have shape {fmt_dims(shape_of(values))}, not [M, N]")
    chain = {*walk.ops, *value_ops}
    casts = [u for u in users(walk.sb) if u in chain and as_cast(u.results[0]) is not None]
    if len(casts) != 1:
        raise NoMatch("the fp8 block scales are not read as f32 once")
    scales = casts[0].results[0]
    if dtype_of(scales) != f32 or shape_of(scales) not in (
        (*blocks.lead, blocks.g), (*blocks.lead, blocks.g, 1)
    ):
        raise NoMatch(f"the f32 block scales have shape {fmt_dims(shape_of(scales))}")
    last = max(chain, key=lambda o: order[o])
    raised = QuantNvfp4Op(walk.x.x, gs)
    q_type, bs_type = (r.type for r in raised.results)
    raised.erase()
    pack = aten.CallOp(IRFUSE_NVFP4_PACK, [values, scales], _refs(2), [q_type, bs_type],
                       tuple_result=True)
    unpack = aten.CallOp(IRFUSE_NVFP4_UNPACK, [pack.results[0], pack.results[1]],
                         [*_refs(2), IntAttr(len(shape_of(scales)))],
                         [values.type, scales.type], tuple_result=True)
    for op in (pack, unpack):
        op.location = last.location
    Rewriter.insert_op([pack, unpack], InsertPoint.after(last))
    order[pack] = order[last]  # sorts after `last` (stable), before anything later
    for old, new in zip((values, scales), unpack.results, strict=True):
        for use in list(old.uses):
            if use.operation not in chain and use.operation is not pack:
                use.operation.operands[use.index] = new
    return _Nvfp4(walk.x.x, gs, pack.results[0], pack.results[1],
                  [*walk.ops, *value_ops, pack], walk.optional, undo=(pack, unpack))


def _refs(n: int) -> list[Attribute]:
    return [call_args.OperandRefAttr(IntAttr(i)) for i in range(n)]


def _scaled_value(walk: _Walk) -> tuple[SSAValue, SSAValue]:
    """The value the e2m1 rounding reads, `clamp(x * gs / sb, -6, 6)` (x blocked; products,
    quotients and reciprocals in any order, a guard for zero blocks), found from the blocked x
    down; and the global scale it uses."""
    blocks = walk.blocks
    starts = [walk.x.x, *(o.results[0] for o in walk.x.ops)]
    taken = set(walk.ops)
    frontier: list[SSAValue] = starts
    clamps: list[Operation] = []
    steps = 0
    while frontier and steps < 64:
        nxt = []
        for value in frontier:
            for user in users(value):
                steps += 1
                found = call(user)
                if found is None or user in taken or not user.results:
                    continue
                taken.add(user)
                result = user.results[0]
                if blocks.role(shape_of(result)) != "x" and not blocks.elementwise(shape_of(result)):
                    continue
                if found.target in CLAMPS:
                    clamps.append(user)
                elif found.target in (MUL_TENSOR, DIV_TENSOR, *WHERE, *MASKED_FILL, *CASTS,
                                      *VIEWS):
                    nxt.append(result)
        frontier = nxt
    tops: dict[Operation, None] = {}
    for clamp in clamps:
        while (user := only_user(clamp.results[0])) is not None and call(user, *CLAMPS):
            clamp = user
        tops[clamp] = None
    # x may be quantized more than once: the clamp of this quant is the one that reads its sb.
    found: list[tuple[SSAValue, SSAValue, _Walk]] = []
    misses: list[str] = []
    for top in tops:
        scratch = _Walk(blocks, walk.x, walk.sb)
        try:
            found.append((*_clamped_scaling(top, scratch), scratch))
        except NoMatch as miss:
            misses.append(str(miss))
    if len(found) != 1:
        raise NoMatch("x is scaled by this block scale more than once" if found
                      else misses[0] if misses else "x * gs / sb is not clamped to ±6")
    y, gs, scratch = found[0]
    walk.ops.extend(scratch.ops)
    walk.optional.extend(scratch.optional)
    return y, gs


def _clamped_scaling(top: Operation, walk: _Walk) -> tuple[SSAValue, SSAValue]:
    """Check that `top` clamps `x * gs / sb` to ±6: (its result, gs)."""
    clamp_ops: list[Operation] = []
    scaled, lo, hi = peel_clamps(top.results[0], clamp_ops)
    if walk.blocks.role(shape_of(scaled)) != "x":
        raise NoMatch(f"the scaled x has shape {fmt_dims(shape_of(scaled))}, not [M, N/16, 16]")
    walk.ops.extend(clamp_ops)
    powers, const = _powers(scaled, walk, 1)
    if "sb" not in powers:
        raise NoMatch("x is clamped without being scaled by its block scale")
    gs = _global_scale(powers, {"x": 1, "sb": -1}, "the scaled x")
    if not _close(const, 1.0):
        raise NoMatch(f"the scaled x is x * gs / sb * {const:g}")
    if lo != -E2M1_MAX or hi != E2M1_MAX:
        raise NoMatch(f"the scaled x is clamped to [{lo}, {hi}], not ±6")
    if walk.unguarded:
        raise NoMatch("blocks whose scale is 0 are not guarded (x * gs / 0 quantizes to ±6, "
                      "NVFP4 to 0)")
    return top.results[0], gs


_CONSTANT_MAKERS = (FULL, SCALAR_TENSOR, ZEROS,
                    ONES)


def _settle_nvfp4(quant: _Nvfp4) -> list[Operation]:
    """The ops to outline: the matched ones, the optional ones nothing else uses, constants
    made for the chain alone; x's leading cast stays outside when it is used elsewhere and is not
    pure. Other values used outside are `raise_chain`'s to settle (a pure one is cloned into the
    region)."""
    ops = with_private(list(dict.fromkeys(quant.ops)), quant.optional)
    chain = set(ops)
    for op in ops:
        if op.operands and op.operands[0] is quant.x and as_cast(op.results[0]) is not None:
            if not is_pure(op) and any(u.operation not in chain for u in op.results[0].uses):
                ops.remove(op)
                chain.discard(op)
                quant.x = op.results[0]
            break
    for op in list(ops):
        for operand in op.operands:
            maker = operand.owner
            if (
                isinstance(maker, aten.CallOp)
                and maker.target.data in _CONSTANT_MAKERS
                and maker not in chain
                and not any(isinstance(o.type, TensorType) for o in maker.operands)
                and all(u.operation in chain for u in operand.uses)
            ):
                chain.add(maker)
                ops.append(maker)
    return ops


def raise_nvfp4(quant: _Nvfp4, order: dict[Operation, int]) -> None:
    try:
        _raise_nvfp4(quant, order)
    except NoMatch:
        if quant.undo is not None:
            pack, unpack = quant.undo
            for new, old in zip(unpack.results, pack.operands, strict=True):
                new.replace_all_uses_with(old)
            Rewriter.erase_op(unpack)
            order.pop(pack, None)
            Rewriter.erase_op(pack)
        raise


def _raise_nvfp4(quant: _Nvfp4, order: dict[Operation, int]) -> None:
    ops = _settle_nvfp4(quant)
    if any(o not in order for o in ops):
        raise NoMatch("the chain reaches an op made by this pass")
    ops.sort(key=lambda o: order[o])
    raised = QuantNvfp4Op(quant.x, quant.global_scale,
                          result_types=[quant.q.type, quant.block_scale.type])
    raise_chain(raised, ops, [quant.q, quant.block_scale], "quant", verify=True)


class Nvfp4CastPattern(AnchorPattern):
    """NVFP4 quant, anchored at the fp8 cast of its block scale."""

    targets = CASTS
    remark = "not an NVFP4 quant"

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        if dtype_of(op.results[0]) not in FP8_QUANT_DTYPES:
            return NO_CANDIDATE
        block_scale = nvfp4_block_scale(op)
        if block_scale is None:
            return NO_CANDIDATE
        raise_nvfp4(match_nvfp4(op, *block_scale, site.order), site.order)
        return REWROTE
