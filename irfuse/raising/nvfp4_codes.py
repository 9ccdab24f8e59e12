"""The e2m1 codes of NVFP4 written in torch, and their packing two to a byte, proven.

The codes are read from the scaled value v (`clamp(x * gs / sb, -6, 6)`) to the packed bytes. A
spelling built from comparisons of v, -v and |v| with constants, signbit / sign, and anything
elementwise on those piecewise-constant results is constant between its constants, so running it
once (in torch, on the CPU) at each constant, its f32 neighbours and a point between each pair
proves it equal to docs/numerics.md's rounding (to nearest, ties to even, sign bit 0x8). Arithmetic on
v itself (`round(2 * |v|)`, lookup tables, `bucketize`) is not proven and is left alone.
"""

from __future__ import annotations

import math

import torch
from torch.utils._python_dispatch import _disable_current_modes
from xdsl.dialects.builtin import IntegerType, f32
from xdsl.ir import Attribute, Operation, SSAValue

from irfuse import dtypes, targets
from irfuse.ir import call_args
from irfuse.ir.shapes import UI8, is_integer
from irfuse.raising.aten_ops import (
    ABS,
    ADD_SCALAR,
    ADD_TENSOR,
    BITWISE_LEFT_SHIFT_TENSOR,
    BITWISE_LEFT_SHIFT_TENSOR_SCALAR,
    BITWISE_NOT,
    BITWISE_OR_TENSOR,
    BITWISE_RIGHT_SHIFT_TENSOR,
    BITWISE_RIGHT_SHIFT_TENSOR_SCALAR,
    CASTS,
    INDEX_PUT,
    INDEX_PUT_HACKED_TWIN,
    LOGICAL_AND,
    LOGICAL_NOT,
    LOGICAL_OR,
    LOGICAL_XOR,
    LSHIFT_SCALAR,
    MUL_SCALAR,
    MUL_TENSOR,
    NEG,
    OR_TENSOR,
    SELECT_INT,
    SGN,
    SIGN,
    SIGNBIT,
    SLICE_TENSOR,
    SUB_SCALAR,
    SUB_TENSOR,
    VIEWS_AND_CLONE,
)
from irfuse.raising.match import (
    Call,
    NoMatch,
    as_cast,
    call,
    normalize_dim,
    only_user,
    producer,
    scalar_of,
    users,
)
from irfuse.raising.quant_common import (
    E2M1_MAX,
    FILL_WITH,
    FILLS,
    MASKED_FILL,
    WHERE,
    Blocks,
    dtype_of,
    fmt_dims,
    shape_of,
)

# docs/numerics.md's e2m1 rounding: the magnitude code counts the boundaries below |v|; a value on a
# boundary rounds to the even code (`True`: the boundary itself counts).
_E2M1_BOUNDS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False),
                (3.5, True), (5.0, False))

_COMPARISONS = tuple(f"aten::{name}.{overload}" for name in ("gt", "ge", "lt", "le", "eq", "ne")
                     for overload in ("Scalar", "Tensor"))
# Ops the e2m1 code may be computed with: on the scaled value v only abs, neg, sign(bit) and
# comparisons with constants; on their (piecewise-constant) results anything elementwise.
_ON_FLOAT = (ABS, NEG)
_TO_DISCRETE = (SIGNBIT, SIGN, SGN,
                *_COMPARISONS)
_ON_DISCRETE = (
    *_ON_FLOAT, *_TO_DISCRETE, *CASTS, *WHERE, *MASKED_FILL, *FILLS, *FILL_WITH,
    LOGICAL_AND, LOGICAL_OR, LOGICAL_XOR,
    LOGICAL_NOT, BITWISE_NOT,
    *(f"aten::{name}.{overload}" for name in ("bitwise_and", "bitwise_or", "bitwise_xor")
      for overload in ("Tensor", "Scalar")),
    *(f"aten::__{name}__.{overload}" for name in ("and", "or", "xor", "lshift", "rshift")
      for overload in ("Tensor", "Scalar")),
    BITWISE_LEFT_SHIFT_TENSOR_SCALAR, BITWISE_LEFT_SHIFT_TENSOR,
    BITWISE_RIGHT_SHIFT_TENSOR_SCALAR, BITWISE_RIGHT_SHIFT_TENSOR,
    ADD_TENSOR, ADD_SCALAR, SUB_TENSOR, SUB_SCALAR,
    MUL_TENSOR, MUL_SCALAR,
)
_I8 = IntegerType(8)
_TRANSPARENT = VIEWS_AND_CLONE  # same elements: identity when the code is evaluated
_SHIFTS = (LSHIFT_SCALAR, BITWISE_LEFT_SHIFT_TENSOR_SCALAR)
_COMBINES = (BITWISE_OR_TENSOR, OR_TENSOR, ADD_TENSOR)


def _e2m1_reference(v: torch.Tensor) -> torch.Tensor:
    """docs/numerics.md's e2m1 code of f32 values in [-6, 6] (int64; sign bit 0x8 from signbit)."""
    a = v.abs()
    code = torch.zeros_like(v, dtype=torch.int64)
    for bound, tie_up in _E2M1_BOUNDS:
        code += (a >= bound if tie_up else a > bound).to(torch.int64)
    return code | (torch.signbit(v).to(torch.int64) << 3)


def _probes(breakpoints: set[float]) -> torch.Tensor:
    """f32 values that decide a function of v in [-6, 6] built from comparisons of ±v, |v|
    with the `breakpoints`: each breakpoint, its f32 neighbours, a value between each pair, ±0."""
    points = torch.tensor(sorted(breakpoints | {0.0, E2M1_MAX, -E2M1_MAX}), dtype=torch.float32)
    up = torch.nextafter(points, torch.full_like(points, math.inf))
    down = torch.nextafter(points, torch.full_like(points, -math.inf))
    edges = torch.unique(torch.cat([points, up, down]))
    middles = (edges[:-1] + edges[1:]) / 2
    values = torch.unique(torch.cat([edges, middles]))
    values = values[(values >= -E2M1_MAX) & (values <= E2M1_MAX)]
    return torch.cat([values, torch.tensor([-0.0])])


def _evaluate(op: Operation, env: dict[SSAValue, object]) -> object:
    """Run one op of the code on the probes (constants made as 0-d tensors, on the CPU)."""
    def value_of(v: SSAValue) -> object:
        if v in env:
            return env[v]
        number = scalar_of(v)  # a constant: made in the graph, maybe cast, or lifted and read
        if number is None:
            raise NoMatch("the e2m1 code reads a tensor other than the scaled x")
        env[v] = torch.tensor(number, dtype=dtypes.to_torch(dtype_of(v)))
        return env[v]

    operands = [value_of(v) for v in op.operands]
    args = [call_args.decode_template(t, operands) for t in op.template.data]  # type: ignore[attr-defined]
    kwargs = {k: call_args.decode_template(t, operands) for k, t in op.keywords.items()}  # type: ignore[attr-defined]
    kwargs = {k: torch.device("cpu") if isinstance(v, torch.device) else v
              for k, v in kwargs.items() if k != "pin_memory"}
    return targets.resolve(op.target.data)(*args, **kwargs)  # type: ignore[attr-defined]


def _codes(y: SSAValue, blocks: Blocks, order: dict[Operation, int]
           ) -> tuple[SSAValue, list[Operation], list[Call]]:
    """The e2m1 code tensor computed from y elementwise, the ops computing it, and the two
    calls that split it into even and odd elements. The code is proven to be docs/numerics.md's
    (ties to even, sign bit 0x8; -0 may encode as 0 or 0x8): it is built from comparisons of
    ±y and |y| with constants, signbit and sign, and anything elementwise on their results,
    so it is constant between the constants, and it is evaluated at each and between each."""
    kinds: dict[SSAValue, str] = {y: "float"}
    calls: dict[Operation, Call] = {}
    ops: list[Operation] = []
    splits: list[Call] = []
    breakpoints: set[float] = set()
    frontier = [y]
    while frontier:
        value = frontier.pop()
        for user in users(value):
            if user in ops or any(s.op is user for s in splits):
                continue
            found = call(user)
            if found is None:
                raise NoMatch(f"the scaled x is used by {user.name}")
            if found.target in (SELECT_INT, SLICE_TENSOR):
                splits.append(found)
                continue
            if len(user.results) != 1 or not blocks.elementwise(shape_of(user.results[0])):
                raise NoMatch(f"the e2m1 code is computed with {found.target} of shape "
                              f"{fmt_dims(shape_of(user.results[0])) if user.results else '()'}")
            kind = _code_kind(found, kinds, breakpoints)
            kinds[user.results[0]] = kind
            calls[user] = found
            ops.append(user)
            frontier.append(user.results[0])
    if len(splits) != 2 or splits[0].arg(0) is not splits[1].arg(0):
        raise NoMatch("the e2m1 codes are not split into even and odd elements")
    code = splits[0].arg(0)
    if kinds.get(code) != "discrete" or not _is_code_dtype(dtype_of(code)):
        raise NoMatch(f"the packed codes are {dtype_of(code)} values of the scaled x, not integer "
                      "codes")
    if any(o not in order for o in ops):
        raise NoMatch("the e2m1 code reaches an op made by this pass")
    ops.sort(key=lambda o: order[o])
    # Every layer of a model spells its quant alike: check each spelling once.
    key = _code_key([calls[o] for o in ops], y, code)
    verdict = _CODE_VERDICTS.get(key) if key is not None else None
    if verdict is None:
        try:
            # The pass may run under the compiler's fake-tensor mode: the probes are real.
            with _disable_current_modes():
                _check_codes(ops, y, code, breakpoints)
            verdict = ""
        except NoMatch as miss:
            verdict = str(miss)
        if key is not None and len(_CODE_VERDICTS) < 256:
            _CODE_VERDICTS[key] = verdict
    if verdict:
        raise NoMatch(verdict)
    return code, ops, splits


_CODE_VERDICTS: dict[tuple, str] = {}
"""What `_check_codes` said of each spelling of the e2m1 code ("" for a proven one)."""


def _code_key(ops: list[Call], y: SSAValue, code: SSAValue) -> tuple | None:
    """The spelling of the code ops: targets and arguments, with values named by position
    (constants by number). None when an argument is something else."""
    index = {y: 0, **{found.result: i + 1 for i, found in enumerate(ops)}}

    def item(arg: object) -> object:
        if isinstance(arg, SSAValue):
            if arg in index:
                return ("v", index[arg])
            number = scalar_of(arg)
            maker = producer(arg)
            if number is None or maker is None:
                raise KeyError
            return ("c", number, maker.target, item(maker.kwargs.get("dtype")))
        if isinstance(arg, list | tuple):
            return tuple(item(a) for a in arg)
        if arg is None or isinstance(arg, int | float | str | bool | Attribute):
            return arg
        raise KeyError

    try:
        return (index[code], *(
            (found.target, item(found.args[:1]))
            if found.target in _TRANSPARENT  # evaluated as the identity: sizes do not matter
            else (found.target, item(list(found.args)), tuple(sorted(
                (k, item(v)) for k, v in found.kwargs.items())))
            for found in ops
        ))
    except (KeyError, TypeError):
        return None


def _run(ops: list[Operation], y: SSAValue, probes: torch.Tensor, result: SSAValue,
         what: str) -> object:
    """`result` of the ops evaluated with `y` bound to the probes; NoMatch naming `what` when
    torch cannot run one of them on the probes."""
    env: dict[SSAValue, object] = {y: probes}
    try:
        for op in ops:
            if call(op, *_TRANSPARENT) is not None:
                env[op.results[0]] = env[op.operands[0]]
            else:
                env[op.results[0]] = _evaluate(op, env)
    except NoMatch:
        raise
    except Exception as err:  # noqa: BLE001  # an op torch cannot run on the probes
        raise NoMatch(f"{what} could not be evaluated ({type(err).__name__})") from None
    return env[result]


def _check_codes(ops: list[Operation], y: SSAValue, code: SSAValue, breakpoints: set[float]
                 ) -> None:
    """Evaluate the code ops at the probes of `breakpoints`; NoMatch where a code is not
    docs/numerics.md's."""
    probes = _probes(breakpoints)
    got = _run(ops, y, probes, code, "the e2m1 code")
    assert isinstance(got, torch.Tensor)
    got = got.to(torch.int64)
    expected = _e2m1_reference(probes)
    wrong = got != expected
    negative_zero = probes.signbit() & (probes == 0)
    wrong &= ~(negative_zero & (got == 0))  # -0 encoded as +0 (a `v < 0` sign)
    if bool(wrong.any()):
        bad = probes[wrong][0].item()
        raise NoMatch(f"the e2m1 code of {bad!r} is {int(got[wrong][0])}, not "
                      f"{int(expected[wrong][0])} (round to nearest, ties to even)")


def _is_code_dtype(dtype: Attribute | None) -> bool:
    """An integer dtype codes can be shifted in without overflow (not bool, not i8)."""
    return dtype is not None and is_integer(dtype) and dtype != _I8


def _code_kind(found: Call, kinds: dict[SSAValue, str], breakpoints: set[float]) -> str:
    """"float" (±y, |y|) or "discrete" (piecewise constant in y between `breakpoints`)."""
    target = found.target
    inputs = [kinds.get(v, "const") for v in found.op.operands]
    if target in _TRANSPARENT or target in _ON_FLOAT:
        return inputs[0]
    if "float" not in inputs:
        if target not in _ON_DISCRETE:
            raise NoMatch(f"the e2m1 code is computed with {target}")
        return "discrete"
    if target in FILLS or target in FILL_WITH:
        return "discrete"
    if target in _TO_DISCRETE and inputs[0] == "float" and "float" not in inputs[1:]:
        if target in _COMPARISONS:
            bound = scalar_of(found.arg(1, "other"))
            if bound is None:
                raise NoMatch("the e2m1 rounding compares with a value that is not a constant")
            breakpoints.update((float(bound), -float(bound)))
        return "discrete"
    raise NoMatch(f"the e2m1 rounding computes {target} of the scaled value (irfuse proves "
                  "roundings written as comparisons with the boundaries)")


def _split_index(found: Call, code_dims: tuple) -> int | None:
    """0 or 1 when `found` takes the even or odd elements of the code's last dim: `select(-1,
    i)` of a [..., N/2, 2] view, or `slice(-1, i, None, 2)` of [..., N]; else None."""
    r = len(code_dims)
    if found.target == SELECT_INT:
        dim, index = found.arg(1, "dim"), found.arg(2, "index")
        if not isinstance(dim, int) or normalize_dim(dim, r) != r - 1 or code_dims[-1] != 2:
            return None
        return index if index in (0, 1) else None
    dim, start = found.arg(1, "dim", 0), found.arg(2, "start", None)
    end, step = found.arg(3, "end", None), found.arg(4, "step", 1)
    if not isinstance(dim, int) or normalize_dim(dim, r) != r - 1 or step != 2:
        return None
    size = code_dims[-1]
    if not isinstance(size, int) or size % 2 or not (end is None or (isinstance(end, int)
                                                                      and end >= size)):
        return None
    start = 0 if start is None else start
    return start if start in (0, 1) else None


def _packing(splits: list[Call], code: SSAValue, blocks: Blocks
             ) -> tuple[SSAValue, list[Operation]]:
    """`lo | (hi << 4)` (or `+`, or `hi * 16`) of the even and odd codes, maybe cast to ui8:
    element 2i in the low nibble. Returns q (ui8 [M, N/2]) and the ops."""
    halves: dict[int, Call] = {}
    for found in splits:
        index = _split_index(found, shape_of(code))
        if index is None or index in halves:
            raise NoMatch("the e2m1 codes are not split into even and odd elements")
        halves[index] = found
    ops = [halves[0].op, halves[1].op]
    lo, hi = halves[0].result, halves[1].result
    shift = call(only_user(hi), *_SHIFTS, MUL_TENSOR, MUL_SCALAR)
    amount = scalar_of(shift.arg(1, "other")) if shift is not None else None
    if shift is None or shift.arg(0) is not hi or amount != (
        4 if shift.target in _SHIFTS else 16
    ):
        raise NoMatch("the odd codes are not shifted to the high nibble")
    ops.append(shift.op)
    combine = call(only_user(lo), *_COMBINES)
    if combine is None or {combine.arg(0), combine.arg(1, "other")} != {lo, shift.result} or (
        combine.arg(2, "alpha", 1) != 1
    ):
        raise NoMatch("the even and odd codes are not packed into one byte")
    ops.append(combine.op)
    q = combine.result
    if dtype_of(q) != UI8:
        cast_user = only_user(q)
        cast = as_cast(cast_user.results[0]) if cast_user is not None else None
        if cast is None or cast[1] != UI8:
            raise NoMatch(f"the packed codes are {dtype_of(q)}, not ui8")
        ops.append(cast_user)  # type: ignore[arg-type]
        q = cast_user.results[0]  # type: ignore[union-attr]
    if shape_of(q) != (*blocks.lead, blocks.n // 2):
        raise NoMatch(f"the packed codes have shape {fmt_dims(shape_of(q))}")
    return q, ops


def codes_and_packing(y: SSAValue, blocks: Blocks, order: dict[Operation, int]
                       ) -> tuple[SSAValue, list[Operation]]:
    """The e2m1 codes of y and their packing: q and the ops."""
    code, ops, splits = _codes(y, blocks, order)
    q, pack_ops = _packing(splits, code, blocks)
    return q, [*ops, *pack_ops]


# --- e2m1 values as floats (vLLM's emulation) ---------------------------------------------------

INDEX_PUTS = (INDEX_PUT, INDEX_PUT_HACKED_TWIN)
VALUES_MISS_PREFIX = "the rounding to e2m1 values"
"""How a remark about a rounding written as float values starts (the values read, but wrong)."""
_SIGNS = (SIGN, SGN)
_E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _e2m1_value_reference(v: torch.Tensor) -> torch.Tensor:
    """docs/numerics.md's e2m1 rounding of f32 values in [-6, 6], as float32 values."""
    code = _e2m1_reference(v)
    magnitude = torch.tensor(_E2M1_MAGNITUDES)[code & 7]
    return torch.where((code & 8) != 0, -magnitude, magnitude)


def _value_kind(found: Call, kinds: dict[SSAValue, str], signs: set[SSAValue],
                breakpoints: set[float]) -> str:
    """The kind of an op of the rounding written as floats: "float" (±y or |y|), "discrete"
    (piecewise constant in y), "mixed" (on each piece a constant or ±y). Only ops that keep
    these forms are taken; a product keeps them only with a sign of y (-1, 0 or 1)."""
    target = found.target
    operands = list(found.op.operands)
    inputs = [kinds.get(v, "const") for v in operands]
    continuous = [k for k in inputs if k in ("float", "mixed")]
    if target in _TRANSPARENT and inputs[0] == "mixed":
        raise NoMatch("the e2m1 values are reshaped")  # where the rounding ends: its user's
    if target in _TRANSPARENT or target in _ON_FLOAT:
        return inputs[0]
    if not continuous:
        if target not in _ON_DISCRETE and target not in INDEX_PUTS:
            raise NoMatch(f"the e2m1 rounding is computed with {target}")
        return "discrete"
    if target in _SIGNS or target == SIGNBIT:
        return "discrete"
    if target in _COMPARISONS and inputs[0] in ("float", "mixed") and inputs[1:] in ([], ["const"]):
        bound = scalar_of(found.arg(1, "other"))
        if bound is None:
            raise NoMatch("the e2m1 rounding compares with a value that is not a constant")
        breakpoints.update((float(bound), -float(bound)))
        return "discrete"
    if target in INDEX_PUTS:
        indices = found.arg(1, "indices")
        if (len(indices) != 1 or kinds.get(indices[0]) != "discrete"
                or kinds.get(found.arg(2, "values"), "const") != "const"
                or found.arg(3, "accumulate", False)):
            raise NoMatch("the e2m1 rounding writes with an index_put that is not a masked "
                          "write of a constant")
        return "mixed"
    if target in WHERE or target in MASKED_FILL:
        if kinds.get(found.op.operands[0] if target in WHERE else found.arg(1, "mask")) not in (
            "discrete",
        ):
            raise NoMatch("the e2m1 rounding selects on a value that is not piecewise constant")
        return "mixed"
    if target in (MUL_TENSOR,) and len(continuous) == 1 and any(v in signs for v in operands):
        return "mixed"
    raise NoMatch(f"the e2m1 rounding computes {target} of the scaled value (irfuse proves "
                  "roundings written as comparisons with the boundaries)")


def e2m1_values(y: SSAValue, blocks: Blocks, order: dict[Operation, int]
                ) -> tuple[SSAValue, list[Operation]]:
    """The e2m1 values of y as f32 (vLLM's emulation: |y| overwritten band by band with masked
    writes, times sign(y)) and the ops computing them. Proven like the codes: on every piece
    between the constants the result is a constant or ±y, so evaluating it at each constant,
    its neighbours and two points inside each piece decides it."""
    kinds: dict[SSAValue, str] = {y: "float"}
    signs: set[SSAValue] = set()
    breakpoints: set[float] = set()
    # Everything elementwise reachable from y, then kinds in program order (an op's operands
    # are settled before it); an op that keeps no kind ends the rounding there.
    reached: set[Operation] = set()
    frontier = [y]
    while frontier and len(reached) < 512:
        for user in users(frontier.pop()):
            if user in reached or call(user) is None or len(user.results) != 1:
                continue
            if not blocks.elementwise(shape_of(user.results[0])) or user not in order:
                continue
            reached.add(user)
            frontier.append(user.results[0])
    ops: list[Operation] = []
    for user in sorted(reached, key=lambda o: order[o]):
        found = call(user)
        assert found is not None
        if any(o.owner in reached and o not in kinds for o in user.operands):
            continue  # reads a value the rounding did not take
        try:
            kind = _value_kind(found, kinds, signs, breakpoints)
        except NoMatch:
            if all(kinds.get(o) in (None, "discrete") for o in user.operands):
                raise
            continue
        kinds[user.results[0]] = kind
        if found.target in _SIGNS and kinds.get(found.arg(0)) == "float":
            signs.add(user.results[0])
        ops.append(user)
    taken = set(ops)
    ends = list(dict.fromkeys(
        v for v in kinds
        if any(u.operation not in taken for u in v.uses) and kinds[v] != "discrete"
    ))
    ends = [v for v in ends if v is not y]
    if len(ends) != 1 or kinds.get(ends[0]) != "mixed" or dtype_of(ends[0]) != f32:
        raise NoMatch("the e2m1 values are not one f32 tensor computed from the scaled x")
    values = ends[0]
    if any(o not in order for o in ops):
        raise NoMatch("the e2m1 values reach an op made by this pass")
    ops.sort(key=lambda o: order[o])
    ops = _needed(ops, values)
    with _disable_current_modes():
        _check_values(ops, y, values, breakpoints)
    return values, ops


def _needed(ops: list[Operation], values: SSAValue) -> list[Operation]:
    """The ops `values` depends on (in order); a taken op whose result nothing needs is not
    part of the rounding."""
    needed: set[Operation] = set()
    stack = [values.owner]
    chain = set(ops)
    while stack:
        op = stack.pop()
        if op in needed or op not in chain:
            continue
        needed.add(op)  # type: ignore[arg-type]
        stack.extend(o.owner for o in op.operands)  # type: ignore[union-attr]
    return [o for o in ops if o in needed]


def _check_values(ops: list[Operation], y: SSAValue, values: SSAValue,
                  breakpoints: set[float]) -> None:
    points = torch.tensor(sorted(breakpoints | {0.0, E2M1_MAX, -E2M1_MAX}), dtype=torch.float32)
    inner = torch.cat([points[:-1] + (points[1:] - points[:-1]) * k for k in (1 / 3, 2 / 3)])
    probes = torch.unique(torch.cat([_probes(breakpoints), inner]))
    got = _run(ops, y, probes, values, VALUES_MISS_PREFIX)
    assert isinstance(got, torch.Tensor)
    expected = _e2m1_value_reference(probes)
    wrong = got.float() != expected
    if bool(wrong.any()):
        bad = probes[wrong][0].item()
        raise NoMatch(f"{VALUES_MISS_PREFIX} gives {got.float()[wrong][0].item()!r} for "
                      f"{bad!r}, not {expected[wrong][0].item()!r} (round to nearest, ties to "
                      "even)")
