"""raise-kv-cache-write: the writes of new keys and values into a paged KV cache.

Anchored at each functional write of new rows into the cache (`index_put` by slot mapping on the
flat or the 4-D cache, `index_copy`, or the block-size-1 `slice_scatter`), each followed by its
`copy_` back into the cache input. In vLLM's FlashAttention layout the caches are the two halves
of one `[2, blocks, block_size, heads, head_dim]` input (split by indexing or `unbind`): each
half's write is scattered back (`select_scatter`) and the pair's second result copied back; the
raised op then takes that input as both caches. Writes are collected during the walk and paired after it (k
with v: the same slots); each pair raises to one `attn.kv_cache_write` returning the updated
caches in SSA form, the `copy_` staying outside as the in-place store. A write with no partner is
a remark.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects.builtin import ArrayAttr, IntAttr, i64
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects import aten
from irfuse.dialects.attn import KvCacheWriteOp, RopeOp
from irfuse.dialects.irfuse import SymType, tensor_type
from irfuse.ir import call_args
from irfuse.ir.shapes import is_integer
from irfuse.raising.aten_ops import (
    ADD_SCALAR,
    COPY,
    COPY_INPLACE,
    CUMSUM,
    DIV_SCALAR_MODE,
    DIV_TENSOR_MODE,
    FLOOR_DIVIDE,
    INDEX_COPY,
    INDEX_PUT,
    INDEX_PUT_HACKED_TWIN,
    NEW_ONES,
    REMAINDER_SCALAR,
    REMAINDER_TENSOR,
    RESHAPES,
    SELECT_INT,
    SELECT_SCATTER,
    SLICE_SCATTER,
    SLICE_TENSOR,
    UNBIND_INT,
    UNSAFE_INDEX_PUT,
)
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, CallPattern, Outcome, PatternPass, Site
from irfuse.raising.match import (
    Call,
    NoMatch,
    call,
    discard,
    only_user,
    producer,
    raise_chain,
    size_matches,
    users,
    users_follow,
    with_private,
)
from irfuse.raising.match import tensor_type as type_of

INDEX_PUTS = (
    INDEX_PUT,
    INDEX_PUT_HACKED_TWIN,
    UNSAFE_INDEX_PUT,
)
ANCHORS = (*INDEX_PUTS, INDEX_COPY, SLICE_SCATTER)
FLOOR_DIV = (DIV_TENSOR_MODE, FLOOR_DIVIDE, DIV_SCALAR_MODE)
REMAINDER = (REMAINDER_SCALAR, REMAINDER_TENSOR)


@dataclass
class _Write:
    """One matched cache write."""

    cache: SSAValue  # the 4-D graph input
    new: SSAValue  # the rows written, [T, kv_heads, head_dim]
    updated: SSAValue  # the cache's new value, 4-D
    anchor: Operation
    slots: SSAValue | None = None  # the slot mapping, or None for a slice range
    start: int = 0  # slice form: the first slot
    end: object = None  # slice form: the end argument (T's size value, or an int)
    ops: list[Operation] = field(default_factory=list)
    optional: list[Operation] = field(default_factory=list)
    half: _Half | None = None  # a write into one half of a FlashAttention-layout cache


@dataclass
class _Half:
    """`kv[i]` (select or unbind along dim 0) of a 5-D `[2, blocks, block_size, heads, dim]`
    cache `kv`: the graph input itself or its copy with the other half already written."""

    root: SSAValue  # the 5-D graph input
    base: SSAValue  # the 5-D value the half is read from
    index: int  # 0: the key half, 1: the value half
    op: Operation  # the select / unbind


def _dims(value: object) -> tuple:
    t = type_of(value)
    return () if t is None else t.dims


def _norm_dim(dim: object, rank: int) -> int | None:
    if not isinstance(dim, int) or not -rank <= dim < rank:
        return None
    return dim % rank


def _is_cache(value: object) -> bool:
    """A 4-D graph input: what a paged cache is (anything else is not looked at)."""
    return isinstance(value, BlockArgument) and len(_dims(value)) == 4


def _flattened_cache(flat: SSAValue) -> tuple[SSAValue, Operation] | None:
    """(cache, view) when `flat` is a view of a cache or of one half of a FlashAttention-layout
    cache (then `cache` is the 4-D half); None when it is not."""
    view = producer(flat, *RESHAPES)
    if view is None or not (_is_cache(view.arg(0)) or _half_of(view.arg(0)) is not None):
        return None
    return view.arg(0), view.op


def _half_of(value: object) -> _Half | None:
    """`kv[i]` / `kv.unbind(0)[i]` of a 5-D `[2, ...]` graph input `kv`, or of the value of `kv`
    after the other half's write (a `select_scatter` along dim 0 of it)."""
    found = producer(value, SELECT_INT, UNBIND_INT)
    if found is None or not isinstance(value, SSAValue):
        return None
    base = found.arg(0)
    dims = _dims(base)
    if len(dims) != 5 or dims[0] != 2:
        return None
    if found.target == SELECT_INT:
        dim, index = found.arg(1), found.arg(2)
    else:
        dim, index = found.arg(1, "dim", 0), value.index  # type: ignore[attr-defined]
    if _norm_dim(dim, 5) != 0 or _norm_dim(index, 2) is None:
        return None
    root = base
    while not isinstance(root, BlockArgument):
        scatter = producer(root, SELECT_SCATTER)
        if scatter is None:
            return None
        root = scatter.arg(0)
    return _Half(root, base, index % 2, found.op)


def _into_half(write: _Write, half: _Half) -> None:
    """A write into a half: its new 4-D value must be scattered back into the 5-D value it was
    read from, at the same index; the 5-D result is the write's updated cache."""
    scatter = call(only_user(write.updated), SELECT_SCATTER)
    if (scatter is None or scatter.arg(0) is not half.base or scatter.arg(1, "src")
            is not write.updated or _norm_dim(scatter.arg(2, "dim"), 5) != 0
            or _norm_dim(scatter.arg(3, "index"), 2) != half.index):
        raise NoMatch("the written half of the [2, blocks, block_size, heads, head_dim] cache is "
                      "not scattered back into the half it was read from")
    write.ops.append(scatter.op)
    write.optional.append(half.op)
    write.cache, write.updated, write.half = half.root, scatter.result, half


def _check_flat(cache: SSAValue, flat: SSAValue) -> None:
    nb, bs, heads, head_dim = _dims(cache)
    fd = _dims(flat)
    slots = nb * bs if isinstance(nb, int) and isinstance(bs, int) else None
    if len(fd) != 3 or fd[1:] != (heads, head_dim) or (slots is not None and fd[0] != slots):
        raise NoMatch(
            f"the cache {list(_dims(cache))} is viewed as {list(fd)}, not as "
            "[num_blocks * block_size, kv_heads, head_dim]"
        )


def _check_rows(new: SSAValue, row_dims: tuple, cache: SSAValue) -> None:
    t, c = type_of(new), type_of(cache)
    if t is None or c is None or t.rank != 3 or t.dims[1:] != tuple(row_dims):
        raise NoMatch(f"the rows written are {list(_dims(new))}, not [T, {row_dims[0]}, "
                      f"{row_dims[1]}]")
    if t.dtype != c.dtype:
        raise NoMatch(f"the rows written are {t.dtype}, the cache holds {c.dtype}")


def _check_slots(slots: object, new: SSAValue) -> SSAValue:
    """The index is a slot mapping: 1-D integers, one per new row. Two symbolic lengths need not
    be the same symbol (vLLM marks the slot mapping dynamic apart from the tokens): the write
    itself fails at run time unless they agree, and so does the fused kernel."""
    t = type_of(slots)
    if t is None or t.rank != 1 or not is_integer(t.dtype):
        raise NoMatch("the write's index is not a 1-D integer slot mapping")
    n, tokens = t.dims[0], _dims(new)[0]
    if n != tokens and (isinstance(n, int) or isinstance(tokens, int)):
        raise NoMatch(f"the write's index has {t.dims[0]} slots for {_dims(new)[0]} new tokens "
                      "(not the slot mapping of the current tokens)")
    return slots  # type: ignore[return-value]


def _view_back(write: _Write, flat_new: SSAValue) -> None:
    back = call(only_user(flat_new), *RESHAPES)
    if back is None or _dims(back.result) != _dims(write.cache):
        raise NoMatch("the updated rows are not viewed back to the cache's shape (or are used "
                      "elsewhere)")
    write.ops.append(back.op)
    write.updated = back.result


def _block_index(blk: object, off: object, block_size: object,
                 optional: list[Operation]) -> SSAValue:
    """slots for (slots // block_size, slots % block_size)."""
    div, rem = producer(blk, *FLOOR_DIV), producer(off, *REMAINDER)
    if div is None or rem is None or div.arg(0) is not rem.arg(0):
        raise NoMatch("the 4-D cache write's indices are not (slots // block_size, "
                      "slots % block_size) of one slot mapping")
    if div.target != FLOOR_DIVIDE and div.kwargs.get(
            "rounding_mode", div.arg(2)) != "floor":
        raise NoMatch("the block index is not a floor division")
    if not (size_matches(div.arg(1), block_size) and size_matches(rem.arg(1), block_size)):
        raise NoMatch(f"the block index divides by {div.arg(1)}, not the block size "
                      f"{block_size}")
    optional.extend([div.op, rem.op])
    return div.arg(0)


def _match_index_put(found: Call) -> _Write | None:
    dest, indices, new = found.arg(0), found.arg(1, "indices"), found.arg(2, "values")
    if not isinstance(indices, list):
        return None
    flattened = _flattened_cache(dest)
    four_d = _is_cache(dest)
    if flattened is None and not four_d:
        return None
    if found.arg(3, "accumulate", False):
        raise NoMatch("an accumulating index_put is not a cache write")
    if flattened is not None:
        cache, view = flattened
        _check_flat(cache, dest)
        if len(indices) != 1 or indices[0] is None:
            raise NoMatch(f"the write indexes {['slot' if i is not None else ':' for i in indices]}"
                          ": not the rows of the flattened cache (wrong dim)")
        write = _Write(cache, new, found.result, found.op, ops=[view, found.op])
        _check_rows(new, _dims(dest)[1:], cache)
        write.slots = _check_slots(indices[0], new)
        _view_back(write, found.result)
        return write
    if len(indices) != 2 or any(i is None for i in indices):
        raise NoMatch("a 4-D cache write that does not index (block, offset)")
    write = _Write(dest, new, found.result, found.op, ops=[found.op])
    _check_rows(new, _dims(dest)[2:], dest)
    slots = _block_index(indices[0], indices[1], _dims(dest)[1], write.optional)
    write.slots = _check_slots(slots, new)
    return write


def _match_index_copy(found: Call) -> _Write | None:
    dest, dim, index, new = found.arg(0), found.arg(1), found.arg(2), found.arg(3, "source")
    flattened = _flattened_cache(dest)
    if flattened is None:
        return None
    cache, view = flattened
    _check_flat(cache, dest)
    if _norm_dim(dim, 3) != 0:
        raise NoMatch(f"index_copy along dim {dim}, not along the slots")
    _check_rows(new, _dims(dest)[1:], cache)
    write = _Write(cache, new, found.result, found.op, ops=[view, found.op])
    write.slots = _check_slots(index, new)
    _view_back(write, found.result)
    return write


def _slice_source(src: SSAValue, write: _Write) -> SSAValue:
    """The rows a slice assignment stores: `copy(slice(view(cache)), rows)` -> rows."""
    copy = producer(src, COPY)
    if copy is None:
        return src
    target, rows = copy.arg(0), copy.arg(1, "src")
    if type_of(rows) != type_of(target):
        return src  # a copy that broadcasts or casts: the copy's result is what is stored
    sliced = producer(target, SLICE_TENSOR)
    if sliced is None:
        return src
    write.ops.append(copy.op)
    write.optional.append(sliced.op)
    view = producer(sliced.arg(0), *RESHAPES)
    if view is not None and view.arg(0) is write.cache:
        write.optional.append(view.op)
    return rows


def _match_slice_scatter(found: Call) -> _Write | None:
    dest, src = found.arg(0), found.arg(1, "src")
    flattened = _flattened_cache(dest)
    if flattened is None:
        return None
    cache, view = flattened
    _check_flat(cache, dest)
    dim, start = found.arg(2, "dim", 0), found.arg(3, "start")
    end, step = found.arg(4, "end"), found.arg(5, "step", 1)
    if _norm_dim(dim, 3) != 0:
        raise NoMatch(f"slice_scatter along dim {dim}, not along the slots")
    if step != 1:
        raise NoMatch(f"a strided slice write (step {step})")
    start = 0 if start is None else start
    write = _Write(cache, src, found.result, found.op, ops=[view, found.op])
    new = _slice_source(src, write)
    _check_rows(new, _dims(dest)[1:], cache)
    tokens = _dims(new)[0]
    if not isinstance(start, int) or start < 0:
        raise NoMatch(f"the slice starts at {start!r}, not at a constant slot")
    if start == 0 and size_matches(end, tokens):
        pass
    elif not (isinstance(end, int) and isinstance(tokens, int) and end - start == tokens):
        raise NoMatch(f"the slice [{start}:{end}] is not the slots of the {tokens} new tokens")
    write.new, write.start, write.end = new, start, end if end is not None else tokens
    _view_back(write, found.result)
    return write


def _match(found: Call) -> _Write | None:
    if found.target in INDEX_PUTS:
        write = _match_index_put(found)
    elif found.target == INDEX_COPY:
        write = _match_index_copy(found)
    else:
        write = _match_slice_scatter(found)
    if write is None:
        return None
    half = _half_of(write.cache)
    if half is not None:
        _into_half(write, half)
        return write  # the copy back follows the second half's write (checked when paired)
    back = [u for u in users(write.updated)
            if (c := call(u, COPY_INPLACE)) is not None and c.arg(0) is write.cache
            and c.arg(1, "src") is write.updated]
    if not back:
        raise NoMatch("the updated cache is not copied back into the cache input")
    return write


# --- pairing and raising ------------------------------------------------------------------------


def _same_slots(a: _Write, b: _Write) -> bool:
    if a.slots is not None or b.slots is not None:
        return a.slots is b.slots
    return a.start == b.start and (a.end is b.end or a.end == b.end) and (
        _dims(a.new)[0] == _dims(b.new)[0])


def _partners(a: _Write, b: _Write) -> bool:
    if a.half is not None or b.half is not None:
        return _half_partners(a, b)
    return (
        a.cache is not b.cache
        and _same_slots(a, b)
        and _dims(a.cache)[1:3] == _dims(b.cache)[1:3]
        and _may_agree(_dims(a.cache)[0], _dims(b.cache)[0])
        and _may_agree(_dims(a.new)[0], _dims(b.new)[0])
        and _dims(a.new)[1] == _dims(b.new)[1]
    )


def _half_partners(a: _Write, b: _Write) -> bool:
    """The two halves of one FlashAttention-layout cache, one written after the other."""
    if a.half is None or b.half is None or a.cache is not b.cache:
        return False
    return (
        a.half.index != b.half.index
        and (b.half.base is a.updated or a.half.base is b.updated)
        and _same_slots(a, b)
        and _may_agree(_dims(a.new)[0], _dims(b.new)[0])
        and _dims(a.new)[1] == _dims(b.new)[1]
    )


def _may_agree(a: object, b: object) -> bool:
    """Equal, or two symbols: vLLM marks k and v dynamic apart (they agree when the graph runs,
    since both index the same slot mapping), and Dynamo's automatic dynamic gives each cache's
    block count a symbol of its own (each cache is written and read by its own row offsets,
    so the two counts need not agree)."""
    return a == b or not (isinstance(a, int) or isinstance(b, int))


def _is_rotated_key(value: SSAValue) -> bool:
    owner = value.owner
    return isinstance(owner, RopeOp) and owner.k_out is value


def _pairs(writes: list[_Write]) -> tuple[list[tuple[_Write, _Write]], list[_Write]]:
    pairs: list[tuple[_Write, _Write]] = []
    alone: list[_Write] = []
    pending = list(writes)
    while pending:
        first = pending.pop(0)
        partner = next((w for w in pending if _partners(first, w)), None)
        if partner is None:
            alone.append(first)
            continue
        pending.remove(partner)
        if first.half is not None:
            if first.half.index == 1:  # kv[0] holds the keys, kv[1] the values
                first, partner = partner, first
        elif _is_rotated_key(partner.new) and not _is_rotated_key(first.new):
            first, partner = partner, first
        pairs.append((first, partner))
    return pairs, alone


def _size_value(end: object, tokens: object) -> Attribute | SSAValue:
    if isinstance(end, SSAValue) and isinstance(end.type, SymType):
        return end
    assert isinstance(tokens, int)
    return IntAttr(tokens)


def _slot_range(write: _Write) -> list[aten.CallOp]:
    """Ops making `start .. start + T - 1` as an i64 [T] tensor on `write.new`'s device."""
    tokens = _dims(write.new)[0]
    size = _size_value(write.end, tokens)
    ref = call_args.OperandRefAttr
    slots_type = tensor_type((tokens,), i64)
    operands: list[SSAValue] = [write.new]
    if isinstance(size, SSAValue):
        operands.append(size)
        size_template: Attribute = ArrayAttr([ref(IntAttr(1))])
    else:
        size_template = ArrayAttr([size])
    ones = aten.CallOp(NEW_ONES, operands, [ref(IntAttr(0)), size_template],
                       [slots_type], kw_template={"dtype": i64})
    counted = aten.CallOp(CUMSUM, [ones.results[0]],
                          [ref(IntAttr(0)), IntAttr(0)], [slots_type])
    made = [ones, counted]
    if write.start != 1:
        made.append(aten.CallOp(ADD_SCALAR, [counted.results[0]],
                                [ref(IntAttr(0)), IntAttr(write.start - 1)], [slots_type]))
    for op, hint in zip(made, ("slot_ones", "slot_count", "slot_range"), strict=False):
        op.location = write.anchor.location
        op.results[0].name_hint = hint
    return made


def _raise_pair(k: _Write, v: _Write, block: Block, order: dict[Operation, int]) -> Outcome:
    _raise(k, v, block, order)
    return REWROTE


def _raise(k: _Write, v: _Write, block: Block, order: dict[Operation, int]) -> Operation:
    ops = sorted(with_private([*k.ops, *v.ops], [*k.optional, *v.optional]),
                 key=lambda o: order[o])
    outputs = [k.updated, v.updated]
    if k.half is not None:  # one 5-D cache: both results are it after the second write
        last = v if v.half.base is k.updated else k  # type: ignore[union-attr]
        if not any(call(u, COPY_INPLACE) is not None and call(u, COPY_INPLACE).arg(0) is k.cache
                   for u in users(last.updated)):
            raise NoMatch("the updated cache is not copied back into the cache input")
        outputs = [last.updated, last.updated]
    if not users_follow(outputs, ops, order):
        raise NoMatch("the k cache's new value is used before the v cache is written")
    made: list[aten.CallOp] = _slot_range(k) if k.slots is None else []
    slots = made[-1].results[0] if made else k.slots
    assert slots is not None
    raised = KvCacheWriteOp(k.new, v.new, k.cache, v.cache, slots)
    try:
        raised.verify()
    except VerifyException as err:
        discard(raised, *reversed(made))
        raise NoMatch(f"the writes do not make a valid {raised.name}: {err}") from None
    anchor = ops[-1]
    for new in [*made, raised]:
        block.insert_op_after(new, anchor)
        anchor = new
    raise_chain(raised, ops, outputs, "cache write", made=made)
    return raised


class KvCacheWritePattern(CallPattern):
    """Cache writes collected in the walk, raised in pairs (k with v) when it ends."""

    targets = ANCHORS
    remark = "not a KV-cache write"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        write = _match(found)
        if write is not None:
            site.scratch.setdefault(self, []).append(write)
        return NO_CANDIDATE

    def finish(self, site: Site) -> None:
        pairs, alone = _pairs(site.scratch.get(self, []))
        for write in alone:
            self.missed(write.anchor, "no write of the matching k or v cache at the same slots "
                        "(one kv_cache_write takes both)")
        for k, v in pairs:
            self.attempt(k.anchor, _raise_pair, k, v, site.block, site.order)


class RaiseKvCacheWrite(PatternPass):
    """Raise paged KV-cache writes (index_put / index_copy / slice_scatter + copy_ back), k and v
    together, to `attn.kv_cache_write`. No options."""

    name = "raise-kv-cache-write"
    patterns = (KvCacheWritePattern(),)
