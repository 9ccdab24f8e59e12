"""raise-rope: rotary position embeddings, NeoX or GPT-J, raised q and k together.

Anchored at the op that combines a rotation (the `cat` / `stack` of vLLM's pairs form, the `add`
of Hugging Face's `x * cos + rotate_half(x) * sin`, the `view_as_real` of Meta's complex form). A
`stack` may also be its decomposition, a `cat` of last-dim unsqueezes (Inductor's post-grad
graph: vLLM's native GPT-J rope, DeepSeek's).
Rotations are collected during the walk and paired after it (the same cos and sin, style and
rotary dim: q and k of one layer); each pair raises to one `attn.rope` (q_out, k_out), a rotation
with no partner to a q-only one. When cos and sin are the halves of one lookup of a
`[max_positions, rotary_dim]` cache, the op takes `positions` and `cos_sin_cache` (vLLM's form);
otherwise `cos` and `sin`. Properties: is_neox, rotary_dim, head_dim. The matched ops stay in the
decomposition region (no result bit changes); a wrong sign or mismatched cos/sin is a remark.

`is_rotation_sum` lets raise-rms-norm tell a q/k norm after RoPE from a residual add + norm.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ArrayAttr, ComplexType, IntAttr, bf16, f16, f32
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from irfuse.dialects import aten
from irfuse.dialects.attn import RopeOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.irfuse import tensor_type as irfuse_tensor_type
from irfuse.ir import call_args
from irfuse.raising.aten_ops import (
    ADD_TENSOR,
    ALIAS,
    CAT,
    COS,
    EMBEDDING,
    EXPAND,
    INDEX_SELECT,
    INDEX_TENSOR,
    MUL_SCALAR,
    MUL_TENSOR,
    NEG,
    RESHAPES_AND_FLATTENS,
    SELECT_INT,
    SIN,
    SLICE_TENSOR,
    STACK,
    SUB_TENSOR,
    UNBIND_INT,
    UNSQUEEZE,
    VIEW_AS_COMPLEX,
    VIEW_AS_REAL,
)
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, CallPattern, Outcome, PatternPass, Site
from irfuse.raising.match import (
    INT64_MAX,
    Call,
    NoMatch,
    as_cast,
    call,
    commutative_operands,
    last_dim_piece,
    normalize_dim,
    only_user,
    producer,
    raise_chain,
    same_value,
    scalar_of,
    strip_full_slices,
    tensor_type,
)

LOOKUPS = (INDEX_TENSOR, INDEX_SELECT, EMBEDDING)
TRIG = (COS, SIN)
LOW = (bf16, f16)  # dtypes a rotation may be widened from to f32 and cast back to


@dataclass
class _Rotation:
    """One tensor rotated: `out = rope(x)` by `cos` / `sin` as multiplied."""

    x: SSAValue
    out: SSAValue
    cos: SSAValue
    sin: SSAValue
    is_neox: bool
    rotary_dim: int
    half: bool  # cos/sin are rotary_dim / 2 wide (the pairs form)
    ops: set[Operation] = field(default_factory=set)
    anchor: Operation | None = None
    cache: _CacheLookup | None = None

    @property
    def head_dim(self) -> int:
        return tensor_type(self.x).dims[-1]  # type: ignore[union-attr, return-value]


@dataclass
class _Made:
    """cos/sin views this pass made of complex freqs_cis (per freqs value), and their ops."""

    parts: dict[SSAValue, tuple[SSAValue, SSAValue]] = field(default_factory=dict)
    ops: list[Operation] = field(default_factory=list)

    def erase_unused(self) -> None:
        """Erase the views no raised rope ended up using (a k rotation that reuses q's)."""
        for op in reversed(self.ops):
            if not any(r.uses for r in op.results):
                op.detach()
                op.erase()


@dataclass
class _CacheLookup:
    """`cos | sin = cache[positions]` split into halves: what joins the region in vLLM's form."""

    positions: SSAValue
    cache: SSAValue
    ops: set[Operation]


# --- small readers ------------------------------------------------------------------------------


def _operands(found: Call) -> tuple[SSAValue, SSAValue] | None:
    a, b = found.arg(0), found.arg(1, "other")
    if isinstance(a, SSAValue) and isinstance(b, SSAValue):
        return a, b
    return None


def _mul(value: SSAValue) -> tuple[Call, SSAValue, SSAValue] | None:
    found = producer(value, MUL_TENSOR)
    if found is None:
        return None
    pair = _operands(found)
    return None if pair is None else (found, *pair)


def _is_product_of(value: SSAValue, a: SSAValue, b: SSAValue) -> Call | None:
    found = _mul(value)
    if found is None:
        return None
    _, p, q = found
    return found[0] if (p is a and q is b) or (p is b and q is a) else None


def _negated(value: SSAValue) -> tuple[SSAValue, Operation] | None:
    """(v, op) if value is `-v` (`neg`, or a product with -1)."""
    found = producer(value, NEG, MUL_TENSOR, MUL_SCALAR)
    if found is None:
        return None
    if found.target == NEG:
        return found.arg(0), found.op
    for v, c in commutative_operands(found):
        if isinstance(v, SSAValue) and scalar_of(c) == -1:
            return v, found.op
    return None


def _last_dim(found: Call, index: int, name: str, rank: int) -> bool:
    dim = found.arg(index, name, 0)
    return isinstance(dim, int) and normalize_dim(dim, rank) == rank - 1


@dataclass
class _Comb:
    """The two tensors a `cat` puts side by side (NeoX's halves) or a `stack` pairs (GPT-J's),
    the ops that combine them, and the combined value."""

    a: SSAValue
    b: SSAValue
    stacked: bool
    ops: list[Operation]
    result: SSAValue


def _combined(found: Call) -> _Comb | None:
    """The two inputs of a `cat` / `stack` over the last dim (of the inputs' rank, for stack the
    new last dim). A cat of two last-dim unsqueezes is a stack: Inductor's decomposition of
    `stack`, what vLLM's post-grad graph holds."""
    tensors = found.arg(0, "tensors")
    if not isinstance(tensors, list) or len(tensors) != 2:
        return None
    a, b = tensors
    ta = tensor_type(a)
    if ta is None or tensor_type(b) is None:
        return None
    stacked = found.target == STACK
    rank = ta.rank + (1 if stacked else 0)
    if not _last_dim(found, 1, "dim", rank):
        return None
    ops = [found.op]
    ua, ub = (None, None) if stacked else (producer(a, UNSQUEEZE), producer(b, UNSQUEEZE))
    if ua is not None and ub is not None and all(
            _last_dim(u, 1, "dim", rank) and only_user(u.result) is found.op for u in (ua, ub)):
        a, b, stacked, ops = ua.arg(0), ub.arg(0), True, [ua.op, ub.op, found.op]
    return _Comb(a, b, stacked, ops, found.result)  # type: ignore[arg-type]


def _combination(value: SSAValue) -> tuple[_Comb, list[Operation]] | None:
    """(combination, view ops) where `value` is a cat of halves (no view), or a stack of pairs
    flattened back to the head dim (through that view)."""
    found = producer(value, CAT)
    comb = None if found is None else _combined(found)
    if comb is not None and not comb.stacked:
        return comb, []
    view = producer(value, *RESHAPES_AND_FLATTENS)
    found = None if view is None else producer(view.arg(0), STACK, CAT)
    comb = None if found is None else _combined(found)
    if comb is None or not comb.stacked or _flattened(comb.result) is not value:
        return None
    return comb, [view.op]  # type: ignore[union-attr]


def _flattened(stacked: SSAValue) -> SSAValue | None:
    """The `[..., 2h]` view of a `stack(.., -1)` result `[..., h, 2]` (its only user)."""
    user = call(only_user(stacked), *RESHAPES_AND_FLATTENS)
    if user is None:
        return None
    t, r = tensor_type(stacked), tensor_type(user.result)
    if t is None or r is None or r.rank != t.rank - 1 or r.dtype != t.dtype:
        return None
    h = t.dims[-2]
    if not isinstance(h, int) or r.dims[-1] != 2 * h or r.dims[:-1] != t.dims[:-2]:
        return None
    return user.result


# --- the two parts of the rotated tensor ----------------------------------------------------------


def _neox_halves(x1: SSAValue, x2: SSAValue) -> tuple[SSAValue, list[Operation]] | None:
    """(x, ops) if x1 and x2 are the first and second half of x's last dim."""
    p1, p2 = last_dim_piece(x1), last_dim_piece(x2)
    if p1 is None or p2 is None or p1.source is not p2.source:
        return None
    size = tensor_type(p1.source).dims[-1]  # type: ignore[union-attr]
    if size % 2 or (p1.start, p1.stop, p2.start, p2.stop) != (0, size // 2, size // 2, size):
        return None
    return p1.source, list(dict.fromkeys([*p1.ops, *p2.ops]))


def _strided(value: SSAValue) -> tuple[SSAValue, int, list[Operation]] | None:
    """(x, start, ops) if value is `x[..., start::2]` over x's whole (even) last dim."""
    found = producer(value, SLICE_TENSOR)
    if found is None:
        return None
    x = found.arg(0)
    t = tensor_type(x)
    if t is None or not _last_dim(found, 1, "dim", t.rank) or found.arg(4, "step", 1) != 2:
        return None
    size = t.dims[-1]
    start, stop = found.arg(2, "start"), found.arg(3, "end")
    start = 0 if start is None else start
    stop = INT64_MAX if stop is None else stop
    if not isinstance(size, int) or size % 2 or start not in (0, 1):
        return None
    if not isinstance(stop, int) or stop < size - 1 + start:
        return None
    source, skipped = strip_full_slices(x)
    return source, start, [*skipped, found.op]


def _pair_element(value: SSAValue) -> tuple[SSAValue, int, list[Operation]] | None:
    """(x, i, ops) if value is `x.view(..., d/2, 2)[..., i]` (select or unbind)."""
    found = producer(value, SELECT_INT, UNBIND_INT)
    if found is None:
        return None
    pairs = found.arg(0)
    tp = tensor_type(pairs)
    if tp is None or tp.dims[-1:] != (2,) or not _last_dim(found, 1, "dim", tp.rank):
        return None
    index = found.arg(2, "index") if found.target == SELECT_INT else value.index  # type: ignore[attr-defined]
    if index not in (0, 1, -1, -2):
        return None
    view = producer(pairs, *RESHAPES_AND_FLATTENS)
    if view is None:
        return None
    x = view.arg(0)
    tx = tensor_type(x)
    if tx is None or tx.rank != tp.rank - 1 or tx.dims[:-1] != tp.dims[:-2]:
        return None
    if not isinstance(tp.dims[-2], int) or tx.dims[-1] != 2 * tp.dims[-2]:
        return None
    return x, index % 2, [view.op, found.op]


def _gptj_pairs(x1: SSAValue, x2: SSAValue) -> tuple[SSAValue, list[Operation]] | None:
    """(x, ops) if x1 and x2 are the even and odd elements of x's last dim."""
    s1, s2 = _strided(x1), _strided(x2)
    if s1 is not None and s2 is not None:
        if s1[0] is s2[0] and (s1[1], s2[1]) == (0, 1):
            return s1[0], list(dict.fromkeys([*s1[2], *s2[2]]))
        return None
    e1, e2 = _pair_element(x1), _pair_element(x2)
    if e1 is not None and e2 is not None and e1[0] is e2[0] and (e1[1], e2[1]) == (0, 1):
        return e1[0], list(dict.fromkeys([*e1[2], *e2[2]]))
    return None


def _parts(x1: SSAValue, x2: SSAValue, is_neox: bool) -> tuple[SSAValue, list[Operation]]:
    found = _neox_halves(x1, x2) if is_neox else _gptj_pairs(x1, x2)
    if found is not None:
        return found
    if not is_neox and _neox_halves(x1, x2) is not None:
        raise NoMatch("halves of x are recombined by stack (neither NeoX nor GPT-J layout)")
    what = "the two halves" if is_neox else "the even and odd elements"
    raise NoMatch(f"the rotated parts are not {what} of one tensor")


def _deinterleave(x1: SSAValue, x2: SSAValue, muls: list[Operation], after: Operation,
                  order: dict[Operation, float]) -> tuple[SSAValue, list[Operation]]:
    """DeepSeek's Hugging Face form rotates the even (x1) and odd (x2) elements of x and
    concatenates the results as halves: that is NeoX's rotation of `y = cat(x1, x2)`, x
    de-interleaved. Make y (after `after`, outside the rotation) and let the products read its
    halves `y[..., :h]`, `y[..., h:]` (equal to x1, x2 bit for bit): the rotation is then an
    ordinary NeoX one of y. Returns (y, the two half slices)."""
    xt: TensorType = x1.type  # type: ignore[assignment]
    h = xt.dims[-1]
    ref = call_args.OperandRefAttr
    cat = aten.CallOp(CAT, [x1, x2], [ArrayAttr([ref(IntAttr(0)), ref(IntAttr(1))]), IntAttr(-1)],
                      [_with_last(xt, 2 * h)])  # type: ignore[operator]
    halves = [
        aten.CallOp(SLICE_TENSOR, [cat.results[0]], [ref(IntAttr(0)), IntAttr(-1), IntAttr(start),
                                             IntAttr(start + h)], [xt])  # type: ignore[operator]
        for start in (0, h)
    ]
    anchor = after
    base = order[after]
    for i, new in enumerate([cat, *halves], 1):
        new.location = after.location
        after.parent_block().insert_op_after(new, anchor)  # type: ignore[union-attr]
        order[new] = base + i / 10
        anchor = new
    for old, half in zip((x1, x2), halves, strict=True):
        for use in list(old.uses):
            if use.operation in muls:
                use.operation.operands[use.index] = half.results[0]
    return cat.results[0], halves


def _with_last(t: TensorType, last: int) -> TensorType:
    return irfuse_tensor_type((*t.dims[:-1], last), t.dtype)


# --- the pairs form: cat(x1*cos - x2*sin, x2*cos + x1*sin) ---------------------------------------


def _is_pairs_candidate(comb: Call) -> bool:
    """A cat/stack of two sums/differences of products sharing factors: worth a remark."""
    combined = _combined(comb)
    if combined is None:
        return False
    inputs = (combined.a, combined.b)
    factors: list[set[SSAValue]] = []
    for v, targets in zip(inputs, ((SUB_TENSOR, ADD_TENSOR), (ADD_TENSOR,)), strict=True):
        combo = producer(v, *targets)
        pair = None if combo is None else _operands(combo)
        if pair is None:
            return False
        muls = [_mul(p) for p in pair]
        if None in muls:
            return False
        factors.append({f for m in muls for f in m[1:]})  # type: ignore[index]
    return len(factors[0] & factors[1]) >= 2


def _match_pairs(anchor: Call, order: dict[Operation, float] | None = None) -> _Rotation:
    comb = _combined(anchor)
    assert comb is not None
    o1, o2 = comb.a, comb.b
    first = producer(o1, SUB_TENSOR, ADD_TENSOR)
    second = producer(o2, ADD_TENSOR)
    assert first is not None and second is not None
    if first.target == ADD_TENSOR:
        raise NoMatch("o1 = x1 * cos + x2 * sin: the first part has the wrong sign")
    if first.arg(2, "alpha", 1) != 1 or second.arg(2, "alpha", 1) != 1:
        raise NoMatch("a rotation term is scaled by alpha")
    p, q = _operands(first)  # type: ignore[misc]
    r, s = _operands(second)  # type: ignore[misc]
    mp, mq = _mul(p), _mul(q)
    if mp is None or mq is None:
        raise NoMatch("o1 is not a difference of two products")
    solution = None
    for x1, cos in ((mp[1], mp[2]), (mp[2], mp[1])):
        for x2, sin in ((mq[1], mq[2]), (mq[2], mq[1])):
            for cos_term, sin_term in ((r, s), (s, r)):
                m_cos = _is_product_of(cos_term, x2, cos)
                m_sin = _is_product_of(sin_term, x1, sin)
                if m_cos is not None and m_sin is not None and x1 is not x2:
                    solution = (x1, x2, cos, sin, [mp[0].op, mq[0].op, m_cos.op, m_sin.op])
                    break
            if solution:
                break
        if solution:
            break
    if solution is None:
        raise NoMatch("the products are not x1*cos, x2*sin, x2*cos, x1*sin of one cos and sin")
    x1, x2, cos, sin, muls = solution
    _check_cos_sin(cos, sin, {*muls, first.op, second.op})
    is_neox = not comb.stacked
    interleaved = _gptj_pairs(x1, x2) if is_neox else None
    if interleaved is not None and order is not None and _neox_halves(x1, x2) is None:
        _check_types(interleaved[0], comb.result, [x1, x2, o1, o2], cos, sin, half=True)
        last = max(interleaved[1], key=lambda o: order[o])
        x, part_ops = _deinterleave(x1, x2, muls, last, order)
    else:
        x, part_ops = _parts(x1, x2, is_neox)
    out = comb.result
    ops = [*part_ops, *muls, first.op, second.op, *comb.ops]
    if not is_neox:
        flat = _flattened(out)
        if flat is None:
            raise NoMatch("the stacked GPT-J pairs are not flattened back to the head dim")
        ops.append(flat.owner)  # type: ignore[arg-type]
        out = flat
    _check_types(x, out, [x1, x2, o1, o2], cos, sin, half=True)
    rot = _Rotation(x, out, cos, sin, is_neox, tensor_type(x).dims[-1], True,  # type: ignore[union-attr, arg-type]
                    set(ops), anchor.op)
    return rot


# --- the rotate form: x * cos + rotate(x) * sin ---------------------------------------------------


def _rotated(value: SSAValue) -> tuple[SSAValue, bool, list[Operation]] | None:
    """(x, is_neox, ops) if value is rotate_half(x) (NeoX) or the GPT-J pair rotation of x;
    raises NoMatch for a rotation with the wrong sign; None if it is no rotation at all."""
    found = _combination(value)
    if found is None:
        return None
    comb, flat_ops = found
    a, b = comb.a, comb.b
    neg_a, neg_b = _negated(a), _negated(b)
    if neg_a is None:
        if neg_b is not None:
            raise NoMatch("rotate(x) = (x2, -x1) has the wrong sign; RoPE's is (-x2, x1)")
        return None
    x2, neg_op = neg_a
    x1 = b
    is_neox = not comb.stacked
    x, part_ops = _parts(x1, x2, is_neox)
    return x, is_neox, [*part_ops, neg_op, *comb.ops, *flat_ops]


def _is_rotate_candidate(add: Call) -> bool:
    pair = _operands(add)
    if pair is None:
        return False
    for v in pair:
        m = _mul(v)
        if m is None:
            return False
    return any(_looks_rotated(f) for v in pair for f in _mul(v)[1:])  # type: ignore[index]


def is_rotation_sum(add: Call) -> bool:
    """Whether an add looks like the rotate form's `x * cos + rotate(x) * sin` (so that
    raise-rms-norm does not take it for a residual add when a q/k norm follows the RoPE)."""
    return add.target == ADD_TENSOR and _is_rotate_candidate(add)


def _looks_rotated(value: SSAValue) -> bool:
    found = _combination(_unwidened(value)[0])
    return found is not None and any(_negated(v) is not None for v in (found[0].a, found[0].b))


def _match_rotate(add: Call) -> _Rotation:
    if add.arg(2, "alpha", 1) != 1:
        raise NoMatch("the rotation terms are added with an alpha")
    p, r = _operands(add)  # type: ignore[misc]
    last_miss: NoMatch | None = None
    for direct, rot_term in ((p, r), (r, p)):
        md, mr = _mul(direct), _mul(rot_term)
        if md is None or mr is None:
            continue
        for rotated, sin in ((mr[1], mr[2]), (mr[2], mr[1])):
            rotated_src, widen_rot = _unwidened(rotated)
            try:
                found = _rotated(rotated_src)
            except NoMatch as miss:
                last_miss = miss
                continue
            if found is None:
                continue
            x, is_neox, rot_ops = found
            cos, widen_x = None, None
            for factor, other in ((md[1], md[2]), (md[2], md[1])):
                src, widen = _unwidened(factor)
                if src is x:
                    cos, widen_x = other, widen
                    break
            if cos is None:
                raise NoMatch("x * cos does not multiply the tensor that is rotated")
            ops = {*rot_ops, md[0].op, mr[0].op, add.op}
            _check_cos_sin(cos, sin, ops)
            out = add.result
            widened = [w for w in (widen_x, widen_rot) if w is not None]
            if widened or tensor_type(out) != tensor_type(x):
                out, cast_back = _promoted(x, add.result, [direct, rot_term, *widened], cos)
                ops |= {cast_back, *(w.owner for w in widened)}  # type: ignore[misc]
                _check_types(x, out, [rotated_src], cos, sin, half=False, promoted=True)
            else:
                _check_types(x, out, [direct, rot_term, rotated], cos, sin, half=False)
            return _Rotation(x, out, cos, sin, is_neox, tensor_type(x).dims[-1],  # type: ignore[union-attr, arg-type]
                             False, ops, add.op)
    raise last_miss or NoMatch("neither product is of a rotated x")


def _unwidened(value: SSAValue) -> tuple[SSAValue, SSAValue | None]:
    """(source, value) if value is a cast of a bf16 / f16 source to f32 used only once (the
    product it feeds), else (value, None)."""
    cast = as_cast(value)
    if cast is None or len(list(value.uses)) != 1:
        return value, None
    src, dst = tensor_type(cast[0]), tensor_type(value)
    if src is None or dst is None or src.dtype not in LOW or dst.dtype != f32:
        return value, None
    return cast[0], value


def _promoted(x: SSAValue, out: SSAValue, f32_values: list[SSAValue], cos: SSAValue
              ) -> tuple[SSAValue, Operation]:
    """The rotation of a bf16 / f16 x computed in f32 (x or its rotation cast to f32, or
    promoted by f32 cos/sin: the same exact widening) must be cast straight back to x's dtype;
    return the cast's result and op."""
    xt, ot = tensor_type(x), tensor_type(out)
    if xt is None or ot is None or xt.dtype not in LOW or ot.dtype != f32:
        raise NoMatch(f"the rotation yields {ot}, not x's type {xt}")
    if any(tensor_type(v) is None or tensor_type(v).dtype != f32  # type: ignore[union-attr]
           for v in [*f32_values, cos]):
        raise NoMatch("a rotation widened to f32 mixes in values that are not f32")
    user = only_user(out)
    back = as_cast(user.results[0]) if user is not None and user.results else None
    if back is None or back[0] is not out or tensor_type(user.results[0]) != xt:  # type: ignore[union-attr]
        raise NoMatch(f"the rotation is computed in f32 and not cast back to {xt}")
    return user.results[0], user  # type: ignore[union-attr, return-value]


def _check_types(x: SSAValue, out: SSAValue, parts: Iterable[SSAValue], cos: SSAValue,
                 sin: SSAValue, half: bool, promoted: bool = False) -> None:
    xt = tensor_type(x)
    if xt is None or not isinstance(xt.dims[-1], int):
        raise NoMatch("the rotated tensor has a symbolic last dim")
    if tensor_type(out) != xt:
        raise NoMatch(f"the rotation yields {tensor_type(out)}, not x's type {xt}")
    if any(tensor_type(v) is None or tensor_type(v).dtype != xt.dtype for v in parts):  # type: ignore[union-attr]
        raise NoMatch("cos/sin change the dtype of the rotated values")
    ct, st = tensor_type(cos), tensor_type(sin)
    if ct is None or st is None or ct != st:
        raise NoMatch(f"cos ({ct}) and sin ({st}) differ in shape or dtype")
    if promoted and ct.dtype != f32:
        raise NoMatch(f"the rotation is computed in f32 but cos/sin are {ct.dtype}")
    width = xt.dims[-1] // 2 if half else xt.dims[-1]
    if ct.dims[-1:] != (width,):
        raise NoMatch(f"cos/sin are {ct.dims[-1:]} wide, expected {width} for this form")
    if ct.rank > xt.rank:
        raise NoMatch("cos/sin have a higher rank than the rotated tensor")


# --- the complex form: view_as_real(view_as_complex(x.view(.., d/2, 2)) * freqs_cis) ------------


def _is_complex_candidate(found: Call) -> bool:
    product = producer(found.arg(0), MUL_TENSOR)
    pair = None if product is None else _operands(product)
    return pair is not None and any(producer(v, VIEW_AS_COMPLEX) is not None for v in pair)


def _match_complex(anchor: Call, order: dict[Operation, float], made: _Made) -> _Rotation:
    """Meta's and DeepSeek-V2's RoPE: x's (even, odd) pairs as complex numbers times
    `freqs_cis = cos + i sin`, back to reals, flattened: GPT-J's rotation. cos and sin are made
    as views of freqs_cis (`view_as_real(freqs_cis)[..., 0 / 1]`, bit for bit its parts)."""
    product = producer(anchor.arg(0), MUL_TENSOR)
    assert product is not None
    a, b = _operands(product)  # type: ignore[misc]
    as_complex = producer(a, VIEW_AS_COMPLEX)
    freqs = b
    if as_complex is None:
        as_complex, freqs = producer(b, VIEW_AS_COMPLEX), a
    assert as_complex is not None
    pairs = producer(as_complex.arg(0), *RESHAPES_AND_FLATTENS)
    x = None if pairs is None else pairs.arg(0)
    xt, pt, ft = tensor_type(x), tensor_type(as_complex.arg(0)), tensor_type(freqs)
    if pairs is None or xt is None or pt is None or ft is None or xt.rank < 2:
        raise NoMatch("the complex rotation is not of x viewed as (d/2, 2) pairs")
    h = pt.dims[-2]
    if (pt.dims[-1] != 2 or not isinstance(h, int) or xt.dims[-1] != 2 * h
            or pt.dims[:-2] != xt.dims[:-1]):
        raise NoMatch("the complex rotation is not of x viewed as (d/2, 2) pairs")
    if not isinstance(ft.dtype, ComplexType) or ft.dims[-1:] != (h,) or ft.rank > pt.rank - 1:
        raise NoMatch(f"freqs_cis {ft} is not complex [.., {h}] (one angle per pair)")
    if tensor_type(product.result) != tensor_type(as_complex.result):
        raise NoMatch("freqs_cis broadcast changes the shape or dtype of x")
    out = _flattened_real(anchor.result)
    if out is None or tensor_type(out) != xt:
        raise NoMatch("the rotated pairs are not flattened back to x's shape")
    ops = {pairs.op, as_complex.op, product.op, anchor.op, out.owner}
    if freqs.owner in ops:
        raise NoMatch("freqs_cis is computed from the rotated tensor")
    if freqs not in made.parts:
        made.parts[freqs] = _complex_parts(freqs, product.op, order, made.ops)
    cos, sin = made.parts[freqs]
    return _Rotation(x, out, cos, sin, False, xt.dims[-1], True, ops, anchor.op)  # type: ignore[arg-type]


def _flattened_real(real: SSAValue) -> SSAValue | None:
    """The `[..., d]` view of a `view_as_real` result `[..., d/2, 2]` (its only user)."""
    view = call(only_user(real), *RESHAPES_AND_FLATTENS)
    if view is None:
        return None
    t, r = tensor_type(real), tensor_type(view.result)
    if t is None or r is None or r.rank != t.rank - 1 or r.dims[:-1] != t.dims[:-2]:
        return None
    return view.result


def _complex_parts(freqs: SSAValue, before: Operation, order: dict[Operation, float],
                   made: list[Operation]) -> tuple[SSAValue, SSAValue]:
    """cos and sin as views of complex freqs: `view_as_real(freqs)[..., 0]` and `[..., 1]`,
    inserted before `before` (which uses freqs)."""
    ft: TensorType = freqs.type  # type: ignore[assignment]
    real_t = irfuse_tensor_type((*ft.dims, 2), ft.dtype.element_type)  # type: ignore[attr-defined]
    part_t = irfuse_tensor_type(ft.dims, ft.dtype.element_type)  # type: ignore[attr-defined]
    ref = call_args.OperandRefAttr(IntAttr(0))
    real = aten.CallOp(VIEW_AS_REAL, [freqs], [ref], [real_t])
    parts = [aten.CallOp(SELECT_INT, [real.results[0]], [ref, IntAttr(-1), IntAttr(i)], [part_t])
             for i in (0, 1)]
    block = before.parent_block()
    base = order[before]
    for i, new in enumerate([real, *parts], 1):
        new.location = before.location
        block.insert_op_before(new, before)  # type: ignore[union-attr]
        order[new] = base - 1 + i / 10
        made.append(new)
    real.results[0].name_hint = "freqs_real"
    parts[0].results[0].name_hint, parts[1].results[0].name_hint = "cos", "sin"
    return parts[0].results[0], parts[1].results[0]


# --- around the rotation: partial rotary dim, casts -------------------------------------------------


def _extend(rot: _Rotation) -> None:
    """Grow the rotation by the casts around it and the pass-through of a partial rotary dim."""
    while True:
        x, out = rot.x, rot.out
        alias = producer(x, ALIAS)
        if alias is not None and _used_only_by(alias.op, rot.ops):
            rot.ops.add(alias.op)
            rot.x = alias.arg(0)
            continue
        cast_in = as_cast(x)
        user = only_user(out)
        cast_out = as_cast(user.results[0]) if user is not None and user.results else None
        if (cast_in is not None and cast_out is not None and cast_out[0] is out
                and tensor_type(user.results[0]) == tensor_type(cast_in[0])  # type: ignore[union-attr]
                and _used_only_by(x.owner, rot.ops)):  # type: ignore[arg-type]
            rot.ops |= {x.owner, user}  # type: ignore[arg-type]
            rot.x, rot.out = cast_in[0], user.results[0]  # type: ignore[union-attr]
            continue
        piece = last_dim_piece(x)
        cat = call(user, CAT)
        if piece is not None and piece.start == 0 and cat is not None:
            comb = _combined(cat)
            passed = (None if comb is None or comb.stacked or comb.a is not out
                      else last_dim_piece(comb.b))
            size = tensor_type(piece.source).dims[-1]  # type: ignore[union-attr]
            if (passed is not None and passed.source is piece.source
                    and (passed.start, passed.stop) == (piece.stop, size)
                    and tensor_type(cat.result) == tensor_type(piece.source)
                    and all(_used_only_by(o, rot.ops | {*piece.ops, *passed.ops})
                            for o in piece.ops)):
                rot.ops |= {*piece.ops, *passed.ops, cat.op}
                rot.x, rot.out = piece.source, cat.result
                continue
        return


def _used_only_by(op: Operation, inside: set[Operation]) -> bool:
    return all(use.operation in inside for r in op.results for use in r.uses)


# --- where cos and sin come from --------------------------------------------------------------------


def _strip_broadcast(value: SSAValue, ops: list[Operation] | None = None) -> SSAValue:
    """Follow unsqueezes, expands, casts, aliases, full slices and 1-dim views up; record ops."""
    while True:
        found = producer(value)
        if found is None:
            return value
        nxt = None
        if found.target in (UNSQUEEZE, EXPAND, ALIAS) or as_cast(value) is not None:
            nxt = found.arg(0)
        elif found.target == SLICE_TENSOR and found.arg(4, "step", 1) == 1:
            src = tensor_type(found.arg(0))
            if src is not None and tensor_type(value) == src:
                nxt = found.arg(0)
        elif found.target in RESHAPES_AND_FLATTENS:
            src, dst = tensor_type(found.arg(0)), tensor_type(value)
            if src is not None and dst is not None and _non_unit(src) == _non_unit(dst):
                nxt = found.arg(0)
        if not isinstance(nxt, SSAValue):
            return value
        if ops is not None:
            ops.append(found.op)
        value = nxt


def _non_unit(t: TensorType) -> tuple[object, ...]:
    return tuple(d for d in t.dims if d != 1)


def _lookup(value: SSAValue) -> tuple[SSAValue, SSAValue, Operation] | None:
    """(cache, positions, op) if value is `cache[positions]` along dim 0."""
    found = producer(value, *LOOKUPS)
    if found is None:
        return None
    if found.target == INDEX_TENSOR:
        indices = found.arg(1, "indices")
        if not isinstance(indices, list) or len(indices) != 1:
            return None
        cache, positions = found.arg(0), indices[0]
    elif found.target == INDEX_SELECT:
        if found.arg(1, "dim") != 0:
            return None
        cache, positions = found.arg(0), found.arg(2, "index")
    else:
        cache, positions = found.arg(0), found.arg(1, "indices")
    if not isinstance(cache, SSAValue) or not isinstance(positions, SSAValue):
        return None
    return cache, positions, found.op


def _cache_form(rot: _Rotation) -> _CacheLookup | None:
    """vLLM's form: cos and sin are the halves of one `[max_pos, rotary_dim]` cache lookup."""
    if not rot.half:
        return None
    ops: list[Operation] = []
    cos_base = _strip_broadcast(rot.cos, ops)
    sin_base = _strip_broadcast(rot.sin, ops)
    pc, ps = last_dim_piece(cos_base), last_dim_piece(sin_base)
    if pc is None or ps is None:
        return None
    half = rot.rotary_dim // 2
    if (pc.start, pc.stop, ps.start, ps.stop) != (0, half, half, rot.rotary_dim):
        return None
    lc, ls = _lookup(pc.source), _lookup(ps.source)
    if lc is None or ls is None or not same_value(lc[:2], ls[:2]):
        return None
    cache, positions, _ = lc
    ct = tensor_type(cache)
    if ct is None or ct.rank != 2 or ct.dims[-1] != rot.rotary_dim:
        return None
    return _CacheLookup(positions, cache, {*ops, *pc.ops, *ps.ops, lc[2], ls[2]})


def _origin(value: SSAValue) -> tuple[str, object, object] | None:
    """Where a cos or sin comes from: ("lookup", cache, positions) or ("trig", target, angle)."""
    for _ in range(16):
        value = _strip_broadcast(value)
        found = _lookup(value)
        if found is not None:
            return "lookup", found[0], found[1]
        trig = producer(value, *TRIG)
        if trig is not None:
            return "trig", trig.target, trig.arg(0)
        piece = last_dim_piece(value)
        if piece is not None:
            value = piece.source
            continue
        scaled = producer(value, MUL_TENSOR, MUL_SCALAR)  # HF's attention_scaling: cos * s
        if scaled is not None:
            for v, c in commutative_operands(scaled):
                if isinstance(v, SSAValue) and scalar_of(c) is not None:
                    value = v
                    break
            else:
                return None
            continue
        return None
    return None


def _check_cos_sin(cos: SSAValue, sin: SSAValue, ops: set[Operation]) -> None:
    """cos and sin do not come from the rotation itself, and are of one angle and position."""
    if cos.owner in ops or sin.owner in ops:
        raise NoMatch("cos/sin are computed from the rotated tensor")
    oc, os_ = _origin(cos), _origin(sin)
    if oc is None or os_ is None or oc[0] != os_[0]:
        return
    if oc[0] == "lookup":
        if not same_value(oc[2], os_[2]):
            raise NoMatch("cos and sin come from different positions")
        return
    if (oc[1], os_[1]) != TRIG:
        raise NoMatch(f"the cos operand is {oc[1]} and the sin operand {os_[1]}")
    if not same_value(oc[2], os_[2]):
        raise NoMatch("cos and sin are not of the same angles (different positions)")


def _match(anchor: Call, order: dict[Operation, float], made: _Made) -> _Rotation:
    if anchor.target in (CAT, STACK):
        rot = _match_pairs(anchor, order)
    elif anchor.target == VIEW_AS_REAL:
        rot = _match_complex(anchor, order, made)
    else:
        rot = _match_rotate(anchor)
    _extend(rot)
    t = tensor_type(rot.x)
    if t is None or t.rank < 2:
        raise NoMatch("the rotated tensor has rank < 2 (no head dim)")
    if rot.rotary_dim < 2 or rot.rotary_dim % 2:
        raise NoMatch(f"rotary dim {rot.rotary_dim} is not even")
    rot.cache = _cache_form(rot)
    return rot


# --- pairing q and k, raising ---------------------------------------------------------------------


def _same_cos_sin(a: _Rotation, b: _Rotation) -> bool:
    if a.cache is not None and b.cache is not None:
        return same_value(a.cache.positions, b.cache.positions) and same_value(
            a.cache.cache, b.cache.cache)
    return same_value(a.cos, b.cos) and same_value(a.sin, b.sin)


def _depends_on(value: SSAValue, ops: set[Operation], order: dict[Operation, float],
                after: int) -> bool:
    """Whether `value` is computed from a result of `ops`, looking only at ops after `after`."""
    seen: set[Operation] = set()
    stack = [value]
    while stack:
        owner = stack.pop().owner
        if not isinstance(owner, Operation) or owner in seen:
            continue
        seen.add(owner)
        if owner in ops:
            return True
        if order.get(owner, -1) <= after:
            continue
        stack.extend(owner.operands)
    return False


def _pairs(rots: list[_Rotation], order: dict[Operation, float]
           ) -> list[tuple[_Rotation, _Rotation | None]]:
    rots.sort(key=lambda r: order[r.anchor])  # type: ignore[index]
    groups: list[tuple[_Rotation, _Rotation | None]] = []
    i = 0
    while i < len(rots):
        a = rots[i]
        b = rots[i + 1] if i + 1 < len(rots) else None
        if (b is not None and a.is_neox == b.is_neox and a.rotary_dim == b.rotary_dim
                and a.head_dim == b.head_dim and a.x is not b.x
                and tensor_type(a.x).dtype == tensor_type(b.x).dtype  # type: ignore[union-attr]
                and _same_cos_sin(a, b)
                and not _depends_on(b.x, a.ops, order, order[a.anchor] - 1)):  # type: ignore[index]
            q, k = (b, a) if _more_heads(b, a) else (a, b)
            groups.append((q, k))
            i += 2
        else:
            groups.append((a, None))
            i += 1
    return groups


def _more_heads(a: _Rotation, b: _Rotation) -> bool:
    """Whether a's tensor has more heads than b's: the one dim where their shapes differ (the
    head dim, wherever the layout puts it) is larger in a."""
    da, db = tensor_type(a.x).dims, tensor_type(b.x).dims  # type: ignore[union-attr]
    if len(da) != len(db):
        return False
    differ = [(x, y) for x, y in zip(da, db, strict=True) if x != y]
    return (len(differ) == 1 and all(isinstance(d, int) for d in differ[0])
            and differ[0][0] > differ[0][1])  # type: ignore[operator]


def _raise_site(q: _Rotation, k: _Rotation | None, block: Block,
                order: dict[Operation, float]) -> Outcome:
    _raise(q, k, block, order)
    return REWROTE


def _raise(q: _Rotation, k: _Rotation | None, block: Block, order: dict[Operation, float]
           ) -> Operation:
    rots = [q] if k is None else [q, k]
    ops: set[Operation] = set().union(*(r.ops for r in rots))
    cached = all(r.cache is not None for r in rots)
    if cached:
        lookup_ops: set[Operation] = set().union(*(r.cache.ops for r in rots))  # type: ignore[union-attr]
        with_cache = ops | lookup_ops
        if all(_used_only_by(o, with_cache) for o in lookup_ops):
            ops = with_cache
        else:
            cached = False
    chain = sorted(ops, key=lambda o: order[o])
    outputs = [r.out for r in rots]
    movers = _users_to_sink(outputs, ops, chain, order)
    common = dict(is_neox=q.is_neox, rotary_dim=q.rotary_dim, head_dim=q.head_dim,
                  result_types=[r.out.type for r in rots] + ([None] if k is None else []))
    if cached:
        raised = RopeOp(q.x, None if k is None else k.x, positions=q.cache.positions,  # type: ignore[union-attr]
                        cos_sin_cache=q.cache.cache, **common)  # type: ignore[union-attr, arg-type]
    else:
        raised = RopeOp(q.x, None if k is None else k.x, cos=q.cos, sin=q.sin, **common)  # type: ignore[arg-type]
    raise_chain(raised, chain, outputs, "rotation", sink_early_users=True)
    anchor = raised
    for mover in movers:
        mover.detach()
        block.insert_op_after(mover, anchor)
        anchor = mover
    return raised


def _users_to_sink(outputs: list[SSAValue], chain_ops: set[Operation], chain: list[Operation],
                   order: dict[Operation, float]) -> list[Operation]:
    """Ops that use the rotated q before the end of the chain (and what depends on them there):
    they must move after the raised op. NoMatch when the chain itself needs one of them."""
    last = order[chain[-1]]
    early = [u.operation for v in outputs for u in v.uses
             if u.operation not in chain_ops and order.get(u.operation, last + 1) < last]
    if not early:
        return []
    moved: set[Operation] = set()
    movers: list[Operation] = []
    produced = set(outputs)
    for op in _ops_from(min(early, key=lambda o: order[o]), chain[-1]):
        if op in chain_ops:
            if any(v.owner in moved for v in op.operands):
                raise NoMatch("the second rotation depends on the first one's result")
            continue
        if any(v in produced or v.owner in moved for v in op.operands):
            if not isinstance(op, aten.CallOp) or _mutates(op):
                raise NoMatch(f"{op.name} between the two rotations uses the rotated q")
            moved.add(op)
            movers.append(op)
    return movers


def _ops_from(first: Operation, last: Operation) -> Iterable[Operation]:
    """The ops of a block from `first` up to `last`, in order."""
    op: Operation | None = first
    while op is not None and op is not last:
        yield op
        op = op.next_op


def _mutates(op: aten.CallOp) -> bool:
    """Whether `op` may have an effect beyond its results, so it must not move: an in-place ATen
    op, a functionalized custom op, any op outside ATen (vLLM's cache writes). The functional
    `copy` and `slice_scatter` that write a rotated piece back (MLA's `q[..., nope:] = q_pe`)
    may move."""
    namespace, _, rest = op.target.data.partition("::")
    name = rest.split(".")[0]
    return namespace not in ("aten", "prims") or name.endswith("_")


def _is_candidate(found: Call) -> bool:
    if found.target in (CAT, STACK):
        return _is_pairs_candidate(found)
    if found.target == VIEW_AS_REAL:
        return _is_complex_candidate(found)
    return _is_rotate_candidate(found)


@dataclass
class _Walk:
    """What the walk of one block collects: the rotations, their ops, the cos/sin views made."""

    rots: list[_Rotation] = field(default_factory=list)
    taken: set[Operation] = field(default_factory=set)
    made: _Made = field(default_factory=_Made)


class RopePattern(CallPattern):
    """Rotations collected in the walk, paired (q with k) and raised when it ends."""

    targets = (CAT, STACK, ADD_TENSOR, VIEW_AS_REAL)
    remark = "not a RoPE"

    def start(self, site: Site) -> None:
        site.scratch[self] = _Walk()

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        walk: _Walk = site.scratch[self]
        if found.op in walk.taken or not _is_candidate(found):
            return NO_CANDIDATE
        rot = _match(found, site.order, walk.made)
        if not rot.ops & walk.taken:
            walk.taken |= rot.ops
            walk.rots.append(rot)
        return NO_CANDIDATE

    def finish(self, site: Site) -> None:
        walk: _Walk = site.scratch[self]
        for q, k in _pairs(walk.rots, site.order):
            args = (site.block, site.order)
            if k is None:
                self.attempt(q.anchor, _raise_site, q, None, *args)  # type: ignore[arg-type]
                continue
            if self.attempt(q.anchor, _raise_site, q, k, *args,  # type: ignore[arg-type]
                            remark="q and k of one layer raised apart") is REWROTE:
                continue
            for single in (q, k):  # q and k cannot be one op: raise each on its own
                self.attempt(single.anchor, _raise_site, single, None, *args)  # type: ignore[arg-type]
        walk.made.erase_unused()


class RaiseRope(PatternPass):
    """Raise rotary embeddings of q (and k) to `attn.rope`, one per attention layer. No options."""

    name = "raise-rope"
    patterns = (RopePattern(),)
