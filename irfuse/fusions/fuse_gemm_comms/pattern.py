"""fuse-gemm-comms: async TP. A GEMM whose only user is a reduce-scatter of its rows becomes
`fused.gemm_reduce_scatter`; an all-gather of rows whose only user is a GEMM (as its `a`)
becomes `fused.all_gather_gemm`. Plain (`gemm.matmul`) and FP8-scaled (`gemm.scaled_matmul`,
per-tensor or row-wise scale_a) products; the collectives are the ones sequence parallelism
leaves around the norms (this pass runs after it, and the config turns it on with this one, as
vLLM does).

Between the GEMM and the collective a model may reshape the rows and back (a `[B, S, H]` model):
a chain of reshapes, each read only by the next, whose ends have the same type, is looked
through and dropped. Rows sequence parallelism padded for TP stay padded through the fused op
(each pattern's docstring says how).

Remarks: a GEMM with a bias (torch's plain fused op takes none), a GEMM or gather with other
users, a collective along another dim than the rows, a reduction other than sum or avg (the
symmetric-memory ops do those two), a scale_a neither per-tensor nor `[M, 1]`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects import aten
from irfuse.dialects.coll import AllGatherOp, ReduceScatterOp
from irfuse.dialects.fused import AllGatherGemmOp, GemmReduceScatterOp
from irfuse.dialects.gemm import MatmulOp, ScaledMatmulOp
from irfuse.dialects.irfuse import TensorType, tensor_type
from irfuse.fusions.sharding import (
    SYM_SIZE,
    drop_unread,
    pad_chain,
    pad_rows,
    padded_from,
    row_count_value,
    slice_end,
    slice_rows,
    sliced_from,
)
from irfuse.ir.shapes import is_one_element, normalize_dim
from irfuse.raising.aten_ops import RESHAPES
from irfuse.raising.driver import REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, users

REDUCE_OPS = ("sum", "avg")
GEMM_REDUCE_SCATTER = "gemm_reduce_scatter"
ALL_GATHER_GEMM = "all_gather_gemm"


def _rows(op: ReduceScatterOp | AllGatherOp) -> None:
    x = op.x.type
    assert isinstance(x, TensorType)
    if x.rank != 2 or normalize_dim(op.dim.value.data, x.rank, "dim") != 0:
        raise NoMatch(f"the {op.name} is not along the rows of a 2-D tensor")


def _reshape(op: Operation | None) -> bool:
    return isinstance(op, aten.CallOp) and op.target.data in RESHAPES


def _back_through_reshapes(value: SSAValue, ignore: Sequence[Operation] = ()
                           ) -> tuple[SSAValue, list[Operation]]:
    """The value a chain of reshapes (each read only by the next, `value` besides `ignore`)
    started from, when it has `value`'s type, and the chain (last first); else `value` and no
    chain."""
    chain: list[Operation] = []
    start = value
    while _reshape(start.owner) and len([u for u in users(start) if u not in ignore]) == 1:
        chain.append(start.owner)  # type: ignore[arg-type]
        start = start.owner.operands[0]  # type: ignore[union-attr]
        if start.type == value.type and len(users(start)) == 1:
            return start, chain
    return value, []


def _forward_through_reshapes(value: SSAValue) -> tuple[SSAValue, list[Operation]]:
    """The value a chain of reshapes of `value` (each the only user of the one before) ends in,
    when it has `value`'s type, and the chain (first first); else `value` and no chain."""
    chain: list[Operation] = []
    end = value
    while len(found := users(end)) == 1 and _reshape(found[0]):
        chain.append(found[0])
        end = found[0].results[0]
        if end.type == value.type:
            return end, chain
    return value, []


def _drop(chain: list[Operation], rewriter: PatternRewriter) -> None:
    """Erase a looked-through chain of reshapes, last reader first."""
    for op in chain:
        rewriter.erase(op)


def _gemm_parts(gemm: MatmulOp | ScaledMatmulOp):
    if gemm.bias is not None:
        raise NoMatch("the GEMM has a bias")
    if isinstance(gemm, ScaledMatmulOp):
        return gemm.scale_a, gemm.scale_b, gemm.out_dtype
    return None, None, None


def _replace(old: Operation, result: SSAValue, new: Operation,
             rewriter: PatternRewriter) -> None:
    new.location = old.location
    new.results[0].name_hint = result.name_hint
    rewriter.replace(old, new)


def _row_wise(scale: SSAValue | None) -> bool:
    if scale is None:
        return False
    t = scale.type
    assert isinstance(t, TensorType)
    return not is_one_element(t.dims)


class GemmReduceScatterPattern(AnchorPattern):
    """A GEMM -> reduce-scatter of its rows (through rows of zeros padded for TP, which move
    onto the GEMM's a: zero rows give zero rows)."""

    op_types = (ReduceScatterOp,)
    remark = "GEMM + reduce-scatter not fused"

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, ReduceScatterOp)
        x = op.x
        padded = padded_from(x)
        sizes: list[Operation] = []  # `sym_size` reads of the GEMM's rows (the pad's count)
        if padded is not None:
            readers = users(padded[0])
            sizes = [u for u in readers if isinstance(u, aten.CallOp)
                     and u.target.data == SYM_SIZE]
            if len(readers) - len(sizes) != 1 or len(users(x)) != 1:
                raise NoMatch("the padded rows are read besides the reduce-scatter")
            x = padded[0]
        produced, reshapes = _back_through_reshapes(x, sizes)
        gemm = produced.owner
        if not isinstance(gemm, MatmulOp | ScaledMatmulOp):
            raise NoMatch("the reduce-scatter's input is not a GEMM")
        _rows(op)
        if op.reduce_op.data not in REDUCE_OPS:
            raise NoMatch(f"the reduction is {op.reduce_op.data}, not sum or avg")
        if len([u for u in users(gemm.c) if u not in sizes]) != 1:
            raise NoMatch("the GEMM's result has other users")
        scale_a, scale_b, out_dtype = _gemm_parts(gemm)
        site.require_kernel(GEMM_REDUCE_SCATTER)
        a = gemm.a
        ws = op.world_size.value.data
        moved: list[Operation] = []  # the pad moved onto a (and a row-wise scale_a)
        if padded is not None:
            counted, n = row_count_value(a)
            moved += counted
            for size in sizes:  # the count read off a instead (the same rows)
                assert not isinstance(n, int)
                rewriter.replace_all_uses_with(size.results[0], n)
            moved += pad_rows(a, n, ws)
            a = moved[-1].results[0]
            if _row_wise(scale_a):
                assert scale_a is not None
                moved += pad_rows(scale_a, n, ws, value=1.0)
                scale_a = moved[-1].results[0]
        rewriter.insert(moved, InsertPoint.before(op))
        fused = GemmReduceScatterOp(
            a, gemm.b, scale_a, scale_b, group=op.group.data,
            world_size=ws, reduce_op=op.reduce_op.data,
            out_dtype=out_dtype, result_type=op.y.type)
        _replace(op, op.y, fused, rewriter)
        if padded is not None:
            drop_unread([*pad_chain(padded[1]), *sizes], rewriter)
        _drop(reshapes, rewriter)
        rewriter.erase(gemm)
        return REWROTE


def _gathered_scale(scale: SSAValue, op: AllGatherOp) -> tuple[SSAValue, list[Operation]] | None:
    """The shard's row-wise scale where `scale` is its dim-0 all-gather over op's group (sliced
    back to the token count where op's rows were padded), and the ops that gathered it."""
    chain: list[Operation] = []
    value = scale
    sliced = sliced_from(value)
    if sliced is not None:
        chain.append(value.owner)  # type: ignore[arg-type]
        value = sliced
    gather = value.owner
    if not isinstance(gather, AllGatherOp) or gather.group.data != op.group.data \
            or gather.world_size.value.data != op.world_size.value.data:
        return None
    xt = gather.x.type
    at = op.x.type
    assert isinstance(xt, TensorType) and isinstance(at, TensorType)
    if normalize_dim(gather.dim.value.data, xt.rank, "dim") != 0 or xt.dims[0] != at.dims[0]:
        return None
    return gather.x, [*chain, gather]


class AllGatherGemmPattern(AnchorPattern):
    """An all-gather of rows -> the GEMM that reads it as `a` (through the slice back to the
    token count where the rows were padded for TP: the GEMM runs on the padded rows and its
    result is sliced). An FP8-scaled GEMM's row-wise scale_a comes in either form torch's
    `fused_all_gather_scaled_matmul` takes: the shard's rows (where the scale is itself the
    all-gather of the shard's scales over the same group, that gather goes and the fused op
    gathers the scales with a: row-wise sharded, `_gathered_scale`) or the gathered rows'
    `[M, 1]` (row-wise replicated, padded like the rows where they were padded)."""

    op_types = (AllGatherOp,)
    remark = "all-gather + GEMM not fused"

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, AllGatherOp)
        _rows(op)
        start = op.y
        sliced = None
        found = users(op.y)
        if len(found) == 1 and isinstance(found[0], aten.CallOp) and found[0].results \
                and sliced_from(found[0].results[0]) is op.y:
            sliced = found[0]
            start = sliced.results[0]
        gathered, reshapes = _forward_through_reshapes(start)
        found = users(gathered)
        if len(found) != 1 or not isinstance(found[0], MatmulOp | ScaledMatmulOp):
            if any(isinstance(u, MatmulOp | ScaledMatmulOp) for u in found):
                raise NoMatch("the gathered tensor has users besides one GEMM")
            raise NoMatch("the gathered tensor does not feed a GEMM")
        gemm = found[0]
        if gemm.a is not gathered or gemm.b is gathered:
            raise NoMatch("the gathered tensor is the GEMM's b, not its a")
        scale_a, scale_b, out_dtype = _gemm_parts(gemm)
        ws = op.world_size.value.data
        scale_gather: list[Operation] = []  # a gather of the shard's scales, now unread
        moved: list[Operation] = []  # the replicated row-wise scale padded like the rows
        if _row_wise(scale_a):
            assert scale_a is not None
            sa = scale_a.type
            assert isinstance(sa, TensorType)
            if sa.rank != 2 or sa.dims[-1] != 1:
                raise NoMatch(f"scale_a of shape {list(sa.dims)} is neither per-tensor nor "
                              "row-wise [M, 1]")
            shard = _gathered_scale(scale_a, op)
            if shard is not None:  # row-wise sharded: the fused op gathers it with a
                scale_a, scale_gather = shard[0], shard[1]
            elif sliced is not None:  # row-wise replicated, of the token rows: pad it too
                counted, n = row_count_value(scale_a)
                moved += counted
                moved += pad_rows(scale_a, n, ws, value=1.0)
                scale_a = moved[-1].results[0]
        site.require_kernel(ALL_GATHER_GEMM)
        ct = gemm.c.type
        yt = op.y.type
        assert isinstance(ct, TensorType) and isinstance(yt, TensorType)
        rows = yt.dims[0]
        rewriter.insert(moved, InsertPoint.before(gemm))
        fused = AllGatherGemmOp(
            op.x, gemm.b, scale_a, scale_b, group=op.group.data,
            world_size=ws, out_dtype=out_dtype,
            result_type=tensor_type((rows, *ct.dims[1:]), ct.dtype))
        if sliced is None:
            _replace(gemm, gemm.c, fused, rewriter)
        else:  # the product of the padded rows, sliced back to the token count
            fused.location = gemm.location
            back = slice_rows(fused.c, slice_end(sliced), ct.dims[0])  # type: ignore[arg-type]
            back.results[0].name_hint = gemm.c.name_hint
            rewriter.insert([fused, back], InsertPoint.before(gemm))
            rewriter.replace_all_uses_with(gemm.c, back.results[0])
            rewriter.erase(gemm)
        _drop(list(reversed(reshapes)), rewriter)
        if sliced is not None:
            rewriter.erase(sliced)
        rewriter.erase(op)
        drop_unread(scale_gather, rewriter)
        return REWROTE
