"""The paged decode behind an `attn.attention`: what this fusion reads to hand a decode step
to a kernel that reads the KV cache's pages in place instead of attending over a gathered copy.

Matched (`paged_decode`): the torch spelling of a paged decode (`irfuse/models/paged.py`), one
query per sequence attending, without a causal mask, over its pages gathered through its
block-table row and masked to its first `seq_lens[b]` positions. Under this pattern the
attention equals the paged kernel's, which reads positions `[0, min(seq_lens[b], MB * BS))` of
sequence b through its block-table row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from irfuse.dialects.attn import AttentionOp
from irfuse.ir.shapes import is_integer
from irfuse.raising import aten_ops as A
from irfuse.raising.match import Call, producer, scalar_of, size_matches, tensor_type

LARGEST_FINITE_FILL = -65504.0
"""The largest additive fill read as "masked": fp16's lowest (bf16 rounds it to -65536)."""

_MASK_VIEWS = A.VIEWS_AND_EXPAND
_WHERES = (A.WHERE_SELF, A.WHERE_SCALAR, A.WHERE_SCALAR_OTHER, A.WHERE_SCALAR_SELF)


@dataclass
class PagedDecode:
    """The paged caches, block table and sequence lengths an attention's operands come from,
    and the ops that built the gathered keys, values and mask (erased once unused)."""

    k_cache: SSAValue
    v_cache: SSAValue
    block_table: SSAValue
    seq_lens: SSAValue
    ops: list[Operation]


def paged_decode(attn: AttentionOp) -> PagedDecode | str | None:
    """The paged decode `attn` attends over; None when it is no decode over gathered pages (no
    mask, causal, more than one query, or keys not gathered from a paged cache); a str saying
    why when it is one but not the pattern the paged kernel takes (it then attends over the
    gathered copy, and the report says why).

    The pattern: q holds one query per sequence, `[B, Hq, 1, D]`, and the attention is not
    causal; k and v are each sequence's pages gathered through its block-table row and laid end
    to end, `transpose(view(cache[block_table], [B, MB * BS, Hk, D]), 1, 2)` (or the `permute`),
    the two caches `[num_blocks, BS, Hk, D]` of one shape, gathered by the same table `[B, MB]`;
    the mask keeps each sequence's first `seq_lens[b]` positions (`_lengths`)."""
    if attn.mask is None or bool(attn.causal.value.data):
        return None
    q = tensor_type(attn.q)
    if q is None or q.rank != 4 or q.dims[2] != 1:
        return None
    keys = _gathered(attn.k)
    if keys is None:
        return None
    values = _gathered(attn.v)
    if values is None:
        return "the values are not gathered from a paged cache as the keys are"
    (k_cache, table, k_ops), (v_cache, v_table, v_ops) = keys, values
    kt, vt = tensor_type(k_cache), tensor_type(v_cache)
    if v_table is not table:
        return "the keys and values are gathered by different block tables"
    if kt is None or vt is None or kt.dims[1:] != vt.dims[1:]:
        return "the key and value caches have different block shapes"
    if kt.dims[0] != vt.dims[0] and (isinstance(kt.dims[0], int) or isinstance(vt.dims[0], int)):
        # Two symbolic block counts (Dynamo's automatic dynamic gives each cache its own) may
        # differ: each cache is read by its own strides. Two different numbers are a mistake.
        return "the key and value caches have different block counts"
    batch, span = tensor_type(attn.k).dims[0], tensor_type(attn.k).dims[2]  # type: ignore[union-attr]
    found = _lengths(attn.mask, batch, span)
    if found is None:
        return ("the mask is not `arange(S) < seq_lens[:, None]` over the gathered positions "
                "(each sequence's first seq_lens[b])")
    seq_lens, mask_ops = found
    return PagedDecode(k_cache, v_cache, table, seq_lens, [*k_ops, *v_ops, *mask_ops])


def _gathered(value: SSAValue) -> tuple[SSAValue, SSAValue, list[Operation]] | None:
    """(cache, block_table, ops) for `value` = the pages of `cache` gathered by `block_table`,
    flattened to positions and transposed to `[B, Hk, S, D]`."""
    swap = producer(value, A.TRANSPOSE_INT, A.PERMUTE)
    if swap is None or not _swaps_1_2(swap):
        return None
    flat = producer(swap.arg(0), *A.RESHAPES, A.FLATTEN_USING_INTS)
    if flat is None:
        return None
    index = producer(flat.arg(0), A.INDEX_TENSOR)
    if index is None:
        return None
    cache, indices = index.arg(0), index.arg(1)
    if not isinstance(indices, list) or len(indices) != 1 or not isinstance(indices[0], SSAValue):
        return None
    table = indices[0]
    ct, tt = tensor_type(cache), tensor_type(table)
    pages, flat_t = tensor_type(flat.arg(0)), tensor_type(flat.result)
    if ct is None or tt is None or pages is None or flat_t is None:
        return None
    if ct.rank != 4 or tt.rank != 2 or not _is_int(tt) or flat_t.rank != 4:
        return None
    b, mb = tt.dims
    _, bs, hk, d = ct.dims
    if not (isinstance(mb, int) and isinstance(bs, int)):
        return None
    if tuple(pages.dims) != (b, mb, bs, hk, d) or tuple(flat_t.dims) != (b, mb * bs, hk, d):
        return None
    return cache, table, [swap.op, flat.op, index.op]


def _swaps_1_2(found: Call) -> bool:
    if found.target == A.TRANSPOSE_INT:
        return sorted(d % 4 for d in (found.arg(1), found.arg(2))) == [1, 2]
    return [d % 4 for d in found.arg(1)] == [0, 2, 1, 3]


def _lengths(mask: SSAValue, batch: object, span: object
             ) -> tuple[SSAValue, list[Operation]] | None:
    """(seq_lens, ops) for a mask `[B, 1, 1, S]` keeping each row's first seq_lens[b]
    positions: `arange(MB * BS)[None, :] < seq_lens[:, None]` (or `seq_lens[:, None] >
    arange(...)`), brought to `[B, 1, 1, S]` by views and broadcasts; as a bool mask, or as the
    additive mask `where(m, 0, c)` that SDPA's CUDA path makes of it, for a fill c of -inf or at
    most -65504 (fp16's lowest). With a finite c the graph gives masked positions the weight
    `exp(s_masked + c - max)` instead of 0: a difference only where a masked score exceeds the
    row's largest valid one by more than |c| - 104 (float32's exp underflow), which scores of
    activations scaled by 1 / sqrt(D) never reach."""
    mt = tensor_type(mask)
    if mt is None or mt.rank != 4 or mt.dims[0] != batch or mt.dims[3] != span:
        return None
    ops: list[Operation] = []
    value = _through(mask, _MASK_VIEWS, ops)
    where = producer(value, *_WHERES)
    if where is not None:
        fill = scalar_of(where.arg(2))
        if scalar_of(where.arg(1)) != 0 or fill is None or not (
                fill == -math.inf or fill <= LARGEST_FINITE_FILL):
            return None
        ops.append(where.op)
        value = _through(where.arg(0), _MASK_VIEWS, ops)
    compare = producer(value, A.LT_TENSOR, A.GT_TENSOR)
    if compare is None:
        return None
    positions, lengths = ((compare.arg(0), compare.arg(1)) if compare.target == A.LT_TENSOR
                          else (compare.arg(1), compare.arg(0)))
    ct = tensor_type(compare.result)
    if ct is None or tuple(ct.dims) != (batch, span):
        return None
    ops.append(compare.op)
    if not _is_arange(_through(positions, A.VIEWS, ops), span, ops):
        return None
    seq_lens = _through(lengths, A.VIEWS, ops)
    lt, pt = tensor_type(seq_lens), tensor_type(positions)
    if lt is None or pt is None or not _is_int(lt) or tuple(lt.dims) != (batch,):
        return None
    # Positions run along the last dim, lengths along the first: [1, S] against [B, 1].
    if pt.dims[-1] != span or tuple(tensor_type(lengths).dims) != (batch, 1):  # type: ignore[union-attr]
        return None
    return seq_lens, ops


def _through(value: SSAValue, targets: tuple[str, ...], ops: list[Operation]) -> SSAValue:
    while (found := producer(value, *targets)) is not None:
        ops.append(found.op)
        value = found.arg(0)
    return value


def _is_arange(value: SSAValue, span: object, ops: list[Operation]) -> bool:
    """Whether `value` is `arange(span)` (0, 1, ..., span - 1)."""
    found = producer(value, A.ARANGE, A.ARANGE_START, A.ARANGE_START_STEP)
    if found is None:
        return False
    if found.target == A.ARANGE:
        start, end, step = 0, found.arg(0, "end"), 1
    else:
        start, end = found.arg(0, "start"), found.arg(1, "end")
        step = found.arg(2, "step", 1) if found.target == A.ARANGE_START_STEP else 1
    if start != 0 or step != 1 or not size_matches(end, span):
        return False
    ops.append(found.op)
    return True


def _is_int(t) -> bool:
    return is_integer(t.dtype)
