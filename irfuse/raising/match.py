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

import torch
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
)
from xdsl.ir import Attribute, Block, Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects import aten
from irfuse.dialects.irfuse import SymType, TensorType
from irfuse.dtypes import is_float, is_ir_dtype, to_torch
from irfuse.ir import call_args
from irfuse.ir.decomposition import outline
from irfuse.raising.aten_ops import (
    CASTS,
    FULL,
    LIFT_FRESH_COPY,
    SCALAR_MAKERS,
    SCALAR_TENSOR,
    SLICE_TENSOR,
    SPLITS,
    TO_COPY,
    VIEWS,
)
from irfuse.raising.purity import PURE, UNMERGEABLE, target_info


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
    # By exact type first: matchers decode thousands of templates per model, and `isinstance`
    # on xDSL's attribute classes (ABCs) costs a Python call each. Types that decode to
    # themselves (dtypes, devices, ...) are remembered once the checks below have seen them.
    kind = type(attr)
    if kind is call_args.OperandRefAttr:
        return operands[attr.index.data]
    if kind is IntAttr or kind is call_args.FloatArgAttr:
        return attr.data
    if kind is ArrayAttr:
        return [_decode(a, operands) for a in attr.data]
    if kind is call_args.BoolArgAttr:
        return bool(attr.value.data)
    if kind is call_args.NoneArgAttr:
        return None
    if kind in _AS_IS:
        return attr
    if isinstance(attr, call_args.OperandRefAttr):
        return operands[attr.index.data]
    if isinstance(attr, IntAttr | call_args.FloatArgAttr):
        return attr.data
    if isinstance(attr, call_args.BoolArgAttr):
        return bool(attr.value.data)
    if isinstance(attr, call_args.NoneArgAttr):
        return None
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, ArrayAttr):
        return [_decode(a, operands) for a in attr.data]
    if isinstance(attr, call_args.TupleAttr):
        return tuple(_decode(a, operands) for a in attr.items.data)
    if isinstance(attr, DictionaryAttr):
        return {k: _decode(a, operands) for k, a in attr.data.items()}
    if isinstance(attr, call_args.TargetAttr):
        return attr.text.data
    _AS_IS.add(kind)
    return attr  # dtypes (IR element types), devices, layouts, memory formats


_AS_IS: set[type[Attribute]] = set()


def call(op: Operation | None, *targets: str) -> Call | None:
    """`op` read as a call, if it is an `aten.call` (with one of `targets`, when given)."""
    if type(op) is not aten.CallOp:  # (exact type: `isinstance` on xDSL's ABCs costs a call)
        return None
    props = op.properties
    target = props["target"].data
    if targets and target not in targets:
        return None
    operands = tuple(op.operands)
    args = tuple([_decode(a, operands) for a in props["template"].data])
    kw = props.get("kw_template")
    kwargs = {k: _decode(a, operands) for k, a in kw.data.items()} if kw is not None else {}
    # `Call(op, target, args, kwargs)` without the frozen dataclass's `__init__` (an
    # `object.__setattr__` per field): matchers decode tens of thousands of calls per model.
    found = _new(Call)
    fields = found.__dict__
    fields["op"], fields["target"], fields["args"], fields["kwargs"] = op, target, args, kwargs
    return found


_new = object.__new__


def producer(value: Any, *targets: str) -> Call | None:
    """The call that defines `value`, if `value` is an op result (of one of `targets`)."""
    if type(value) is OpResult:  # the common case, without an ABC isinstance check
        return call(value.owner, *targets)
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
    if type(value) is OpResult or isinstance(value, SSAValue):
        t = value.type
        if type(t) is TensorType or isinstance(t, TensorType):
            return t
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


def as_cast(value: Any) -> tuple[SSAValue, Attribute] | None:
    """(source, dtype) if `value` is a pure dtype cast of `source`."""
    found = producer(value, *CASTS)
    if found is None:
        return None
    source = found.arg(0)
    if found.target == TO_COPY:
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


def scalar_of(value: Any) -> float | int | None:
    """The number `value` is: a Python scalar, or a constant scalar tensor made in the graph,
    maybe cast to a float dtype (the number as that dtype rounds it; a lifted scalar the import
    read as its traced value is such a tensor, cast to f32 where the model adds it to one)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    cast = as_cast(value)
    if cast is not None:
        if not (isinstance(value, SSAValue) and rank(value) == 0 and is_ir_dtype(cast[1])
                and is_float(cast[1])):
            return None
        inner = scalar_of(cast[0])
        if inner is None:
            return None
        return torch.tensor(inner, dtype=to_torch(cast[1])).item()
    made = producer(value, *SCALAR_MAKERS)
    if made is None:
        return None
    if made.target == LIFT_FRESH_COPY:  # a 0-d tensor constant, as import read it
        source = made.arg(0)
        owner = source.owner if isinstance(source, SSAValue) else None
        number = owner.attributes.get(aten.SCALAR_VALUE_ATTR) if isinstance(
            owner, aten.GetAttrOp) else None
        return number.value.data if isinstance(number, FloatAttr | IntegerAttr) else None
    if made.target == FULL:
        shape = made.arg(0)
        return made.arg(1) if shape in ([], [1]) else None
    if made.target == SCALAR_TENSOR:
        return made.arg(0)
    return None


def commutative_operands(found: Call) -> Iterable[tuple[Any, Any]]:
    """Both orders of a binary call's two operands."""
    a, b = found.arg(0), found.arg(1, "other")
    yield a, b
    yield b, a


def block_ops(block: Block) -> list[Operation]:
    """The ops of a block, as a list that stays valid while a pass rewrites the block (read
    off the op list's links: `list(block.ops)` walks the block twice, once to size the list,
    and its iterator costs a Python call per op)."""
    ops: list[Operation] = []
    op = block.first_op
    while op is not None:
        ops.append(op)
        op = op.next_op
    return ops


def walk_ops(root: Operation) -> list[Operation]:
    """`root` and every op nested in it, in `root.walk()`'s order (pre-order), as a list: read
    off the op lists' links, without the generator per nesting level `walk` stacks up."""
    found = [root]
    for region in root.regions:
        for block in region.blocks:
            _collect(block, found)
    return found


def _collect(block: Block, found: list[Operation]) -> None:
    op = block.first_op
    while op is not None:
        found.append(op)
        if op.regions:
            for region in op.regions:
                for inner in region.blocks:
                    _collect(inner, found)
        op = op.next_op


def func_blocks(module: Operation) -> list[Block]:
    """The body block of every function in the module (raising works on top-level ops)."""
    blocks: list[Block] = []
    for op in module.regions[0].blocks[0].ops:
        if op.regions and op.regions[0].blocks:
            blocks.append(op.regions[0].blocks[0])
    return blocks


class NoMatch(Exception):
    """Raised by a matcher to give up on a candidate; the message is the remark's reason."""


# --- pieces of the last dim and structural equality (raise-silu-mul, raise-rope) -------------

INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Piece:
    """`value == source[..., start:stop]` along the last dim (step 1), made by `op` (after the
    no-op full slices in `skipped`, which `x[:, :, :, :d]` spellings add on the other dims)."""

    source: SSAValue
    start: int
    stop: int
    op: Operation
    skipped: tuple[Operation, ...] = ()

    @property
    def ops(self) -> tuple[Operation, ...]:
        return (*self.skipped, self.op)


def strip_full_slices(value: SSAValue) -> tuple[SSAValue, tuple[Operation, ...]]:
    """Follow `x[:, 0:]`-style slices that keep every element up to the value they start from."""
    skipped: list[Operation] = []
    while (found := producer(value, SLICE_TENSOR)) is not None:
        source = found.arg(0)
        if found.arg(4, "step", 1) != 1 or tensor_type(source) != tensor_type(value):
            break
        skipped.append(found.op)
        value = source
    return value, tuple(reversed(skipped))


def last_dim_piece(value: Any) -> Piece | None:
    """The contiguous piece of its source's last dim that `value` is: a step-1 `slice` (bounds
    clamped as torch clamps them, so `x[..., d:]` ends at the size), or one result of
    `split` / `split_with_sizes` (what `chunk` and `torch.split` become). None otherwise, or when
    the last dim is symbolic."""
    found = producer(value)
    if found is None or (found.target != SLICE_TENSOR and found.target not in SPLITS):
        return None
    source = found.arg(0)
    t = tensor_type(source)
    if t is None or t.rank == 0 or not isinstance(t.dims[-1], int):
        return None
    size = t.dims[-1]
    source, skipped = strip_full_slices(source)
    if found.target == SLICE_TENSOR:
        dim = found.arg(1, "dim", 0)
        start, stop = found.arg(2, "start"), found.arg(3, "end")
        step = found.arg(4, "step", 1)
        if not isinstance(dim, int) or normalize_dim(dim, t.rank) != t.rank - 1 or step != 1:
            return None
        start = 0 if start is None else start
        stop = size if stop is None else stop
        if not isinstance(start, int) or not isinstance(stop, int):
            return None
        start = max(0, min(start + size if start < 0 else start, size))
        stop = max(start, min(stop + size if stop < 0 else stop, size))
        return Piece(source, start, stop, found.op, skipped)
    if found.target in SPLITS:
        dim = found.arg(2, "dim", 0)
        if not isinstance(dim, int) or normalize_dim(dim, t.rank) != t.rank - 1:
            return None
        sizes = found.arg(1)
        if isinstance(sizes, int):
            if sizes <= 0:
                return None
            sizes = [sizes] * (-(-size // sizes))
            sizes[-1] = size - sizes[0] * (len(sizes) - 1)
        if not isinstance(sizes, list) or not all(isinstance(s, int) for s in sizes):
            return None
        if sum(sizes) != size or len(sizes) != len(found.op.results):
            return None
        index = value.index  # type: ignore[union-attr]
        start = sum(sizes[:index])
        return Piece(source, start, start + sizes[index], found.op, skipped)
    return None


def same_value(a: Any, b: Any, depth: int = 8) -> bool:
    """Whether `a` and `b` are the same value: identical, equal constants, or results of the
    same call on arguments that are themselves the same (up to `depth` calls deep). Lets a pass
    see that two lookups of one cache by one positions tensor agree when nothing CSE'd them."""
    if a is b:
        return True
    if isinstance(a, SSAValue) != isinstance(b, SSAValue):
        return False
    if not isinstance(a, SSAValue):
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            return len(a) == len(b) and all(
                same_value(x, y, depth) for x, y in zip(a, b, strict=True)
            )
        return type(a) is type(b) and a == b
    if depth == 0:
        return False
    ca, cb = producer(a), producer(b)
    if ca is None or cb is None or ca.target != cb.target:
        return False
    if a.index != b.index or ca.kwargs.keys() != cb.kwargs.keys():  # type: ignore[union-attr]
        return False
    return same_value(list(ca.args), list(cb.args), depth - 1) and all(
        same_value(ca.kwargs[k], cb.kwargs[k], depth - 1) for k in ca.kwargs
    )


# --- reshapes (raise-gemm, raise-quant, and the fusions that look through a linear's views) ---


def strip_views(value: Any) -> tuple[Any, list[Call]]:
    """Follow reshapes (`VIEWS`) up to the value they start from; return it and the reshapes
    passed, nearest first. A linear layer on a 3-D activation puts `view(-1, K)` between the
    quant that makes its input and the GEMM: `strip_views(gemm.a)` finds the quant's result."""
    views: list[Call] = []
    while (found := producer(value, *VIEWS)) is not None:
        views.append(found)
        value = found.arg(0)
    return value, views


def view_users(value: SSAValue) -> tuple[SSAValue, list[Operation]]:
    """Follow single-user reshapes down from `value`; return the last value reached and the
    reshapes passed, in order (the forward twin of `strip_views`)."""
    ops: list[Operation] = []
    while (user := only_user(value)) is not None and call(user, *VIEWS) is not None:
        ops.append(user)
        value = user.results[0]
    return value, ops


# --- sizes, privacy and placement (raise-collectives, raise-attention, raise-kv-cache-write) --


def size_matches(size: Any, dim: Any) -> bool:
    """Whether a size argument (an int, or a symbolic size value `!irfuse.sym<s0>`) is `dim` (an
    int, or a symbol as tensor types print it): `split(x, s0)` splits into pieces of `x`'s `s0`
    rows, `expand(x, [1, 4, s0, 64])` keeps a `[1, 4, s0, 64]` tensor as it is."""
    if isinstance(size, bool):
        return False
    if isinstance(size, int):
        return size == dim
    if isinstance(size, SSAValue) and isinstance(size.type, SymType):
        return size.type.expr.data == dim
    return False


def private_to(op: Operation, inside: set[Operation]) -> bool:
    """Whether every result of `op` is used only by ops in `inside` (so `op` may move with
    them into a region). An unused result counts as private."""
    return all(use.operation in inside for r in op.results for use in r.uses)


def with_private(required: Sequence[Operation], optional: Sequence[Operation]
                 ) -> list[Operation]:
    """`required` plus the `optional` ops that nothing outside the two uses, to a fixed point: a
    raised op's region takes the helpers it alone needs (a mask it builds, a weight transpose)
    and leaves shared ones where they are, to be read from above."""
    chosen = dict.fromkeys(required)
    kept = [o for o in dict.fromkeys(optional) if o not in chosen]
    while True:
        inside = set(chosen) | set(kept)
        still = [o for o in kept if private_to(o, inside)]
        if len(still) == len(kept):
            return [*chosen, *kept]
        kept = still


def users_follow(
    outputs: Sequence[SSAValue], ops: Sequence[Operation], order: dict[Operation, int]
) -> bool:
    """Whether every use of `outputs` outside `ops` comes after the last of `ops` in block
    order: `outline` puts the raised op there, so an earlier user would see its operand defined
    after it. `order` numbers the block's ops (ops missing from it, created since, count as
    later)."""
    chain = set(ops)
    last = max(order[o] for o in ops)
    block = ops[0].parent_block()
    for v in outputs:
        for use in v.uses:
            user: Operation | None = use.operation
            while user is not None and user.parent_block() is not block:
                user = user.parent_op()  # a use inside a region: its op in this block
            if user is not None and user not in chain and order.get(user, last + 1) <= last:
                return False
    return True


# --- building the raised op --------------------------------------------------------------------


def discard(*ops: Operation) -> None:
    """Erase ops a pass built and does not keep: a built op holds uses of its operands, which
    would otherwise stay on those values (and mislead `users`, `only_user`)."""
    for op in ops:
        if op.parent is not None:
            op.detach()
        op.erase()


def erase_unused(ops: Sequence[Operation], rewriter: PatternRewriter) -> None:
    """Erase those of `ops` (users before producers) that nothing reads any more and that write
    nothing: what a rewrite left behind, such as a gather its fused op no longer needs."""
    for op in ops:
        if (isinstance(op, aten.CallOp) and op.parent is not None
                and target_info(op.target.data).kind in (PURE, UNMERGEABLE)
                and not any(r.uses for r in op.results)):
            rewriter.erase(op)


def is_pure(op: Operation) -> bool:
    """Whether `op` is an ATen call that cse-pure would merge (so a copy of it is the same
    value): the one purity rule, `irfuse.raising.purity.target_info`."""
    return isinstance(op, aten.CallOp) and target_info(op.target.data).kind == PURE


def _describe(op: Operation) -> str:
    return op.target.data if isinstance(op, aten.CallOp) else op.name


def clone_shared(
    ops: Sequence[Operation], outputs: Sequence[SSAValue], *, late_ok: bool = True
) -> tuple[list[Operation], list[tuple[Operation, Operation]]]:
    """Give a chain its own copy of every pure value it shares with code outside it.

    A chain op whose result (not one of `outputs`) is also used outside the chain cannot move
    into a region as it is. When the op is pure (cse-pure's rule) the chain takes a clone of it
    instead, inserted right after it, and the original stays where it is for the outside users:
    both compute the same value, so nothing changes a bit. The original's operands must be
    available outside too: an operand made by another chain op keeps that op outside as well
    (cloned the same way); an operand that is one of `outputs` is the raised op's result once
    outlined, and `outline` puts the raised op before the original (its first outside user among
    the chain's ops), or refuses when it cannot (`late_ok=False`: refuse here, for callers that
    place the raised op after the chain's last op). Anything else shared (an impure op, an op
    whose other result is an output) is a NoMatch saying which op.

    Returns the chain with the clones in place of the shared ops (same order) and the
    (original, clone) pairs, for `unclone` should the raise fail later."""
    chain = set(ops)
    outs = set(outputs)
    shared = [
        o for o in ops
        if any(r not in outs and any(u.operation not in chain for u in r.uses) for r in o.results)
    ]
    if not shared:
        return list(ops), []
    stay: dict[Operation, None] = {}
    while shared:
        op = shared.pop()
        if op in stay:
            continue
        if not is_pure(op):
            raise NoMatch(f"{_describe(op)} is not pure")
        if any(r in outs for r in op.results):
            raise NoMatch(f"{_describe(op)} also makes an output of the chain")
        stay[op] = None
        for v in op.operands:
            owner = v.owner
            if not isinstance(owner, Operation) or owner not in chain or owner in stay:
                continue
            if v in outs:
                if not late_ok:
                    raise NoMatch(f"{_describe(op)} reads an output of the chain")
                continue
            shared.append(owner)
    mapping: dict[SSAValue, SSAValue] = {}
    pairs: list[tuple[Operation, Operation]] = []
    new_ops: list[Operation] = []
    for op in ops:
        if op not in stay:
            new_ops.append(op)
            continue
        copy = op.clone(value_mapper=mapping)
        Rewriter.insert_op(copy, InsertPoint.after(op))
        for old, new in zip(op.results, copy.results, strict=True):
            mapping[old] = new
        pairs.append((op, copy))
        new_ops.append(copy)
    for op, copy in pairs:
        for old, new in zip(op.results, copy.results, strict=True):
            old.replace_uses_with_if(
                new, lambda use: use.operation in chain and use.operation not in stay
            )
    return new_ops, pairs


def unclone(pairs: Sequence[tuple[Operation, Operation]]) -> None:
    """Undo `clone_shared`: the chain reads the originals again and the clones are erased."""
    for op, copy in reversed(pairs):
        for old, new in zip(op.results, copy.results, strict=True):
            new.replace_all_uses_with(old)
        discard(copy)


def raise_chain(
    raised: Operation,
    ops: Sequence[Operation],
    outputs: Sequence[SSAValue],
    what: str,
    *,
    prelude: Sequence[Operation] = (),
    made: Sequence[Operation] = (),
    verify: bool = False,
    sink_early_users: bool = False,
) -> None:
    """Replace a matched chain by the semantic op `raised` (built, not yet inserted): optionally
    verify it, give the chain its own copy of the pure values it shares with code outside it
    (`clone_shared`), move the chain into its decomposition region (`raised.outline`, with
    `prelude` ops inserted before it), and give it the chain's location and names. On failure
    every op the pass built (`raised`, `prelude`, `made`, the copies) is erased and NoMatch says
    why, naming `what`."""
    if verify:
        try:
            raised.verify()
        except VerifyException as err:
            discard(raised, *prelude, *reversed(made))
            raise NoMatch(f"the matched values do not make a valid {raised.name}: {err}") from None
    try:
        ops, pairs = clone_shared(ops, outputs, late_ok=not sink_early_users)
    except NoMatch as err:
        discard(raised, *prelude, *reversed(made))
        raise NoMatch(f"an intermediate value of the {what} is used outside it ({err})") from None
    try:
        outline(raised, ops, outputs, prelude=prelude, sink_early_users=sink_early_users)
    except ValueError as err:
        unclone(pairs)
        discard(raised, *prelude, *reversed(made))
        raise NoMatch(f"an intermediate value of the {what} is used outside it ({err})") from None
    raised.location = ops[-1].location
    for old, new in zip(outputs, raised.results, strict=True):
        new.name_hint = old.name_hint
