"""fuse-gemm-comms: async TP. A GEMM whose only user is a reduce-scatter of its rows becomes
`fused.gemm_reduce_scatter`; an all-gather of rows whose only user is a GEMM (as its `a`)
becomes `fused.all_gather_gemm`. Plain (`gemm.matmul`) and FP8-scaled (`gemm.scaled_matmul`)
products; the collectives are the ones enable-sp leaves around the norms (this pass runs after
it, and the config turns enable_sp on with it, as vLLM does).

Between the GEMM and the collective a model may reshape the rows and back (a `[B, S, H]` model:
the linear's `view` to `[B, S, H]`, enable-sp's `reshape(-1, H)` to rows): a chain of reshapes,
each read only by the next, whose ends have the same type, is looked through and dropped.

Remarks: a GEMM with a bias (torch's plain fused op takes none), a GEMM or gather with other
users, a collective along another dim than the rows, a reduction other than sum or avg (the
symmetric-memory ops do those two), and a gathered FP8 operand with row-wise scales (the scales
would have to be gathered too).
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from irfuse.dialects import aten
from irfuse.dialects.coll import AllGatherOp, ReduceScatterOp
from irfuse.dialects.fused import AllGatherGemmOp, GemmReduceScatterOp
from irfuse.dialects.gemm import MatmulOp, ScaledMatmulOp
from irfuse.dialects.irfuse import TensorType
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


def _back_through_reshapes(value: SSAValue) -> tuple[SSAValue, list[Operation]]:
    """The value a chain of reshapes (each read only by the next) started from, when it has
    `value`'s type, and the chain (last first); else `value` and no chain."""
    chain: list[Operation] = []
    start = value
    while _reshape(start.owner) and len(users(start)) == 1:
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


class GemmReduceScatterPattern(AnchorPattern):
    """A GEMM -> reduce-scatter of its rows."""

    op_types = (ReduceScatterOp,)
    remark = "GEMM + reduce-scatter not fused"

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, ReduceScatterOp)
        produced, reshapes = _back_through_reshapes(op.x)
        gemm = produced.owner
        if not isinstance(gemm, MatmulOp | ScaledMatmulOp):
            raise NoMatch("the reduce-scatter's input is not a GEMM")
        _rows(op)
        if op.reduce_op.data not in REDUCE_OPS:
            raise NoMatch(f"the reduction is {op.reduce_op.data}, not sum or avg")
        if len(users(gemm.c)) != 1:
            raise NoMatch("the GEMM's result has other users")
        scale_a, scale_b, out_dtype = _gemm_parts(gemm)
        site.require_kernel(GEMM_REDUCE_SCATTER)
        fused = GemmReduceScatterOp(
            gemm.a, gemm.b, scale_a, scale_b, group=op.group.data,
            world_size=op.world_size.value.data, reduce_op=op.reduce_op.data,
            out_dtype=out_dtype, result_type=op.y.type)
        _replace(op, op.y, fused, rewriter)
        _drop(reshapes, rewriter)
        rewriter.erase(gemm)
        return REWROTE


class AllGatherGemmPattern(AnchorPattern):
    """An all-gather of rows -> the GEMM that reads it as `a`."""

    op_types = (AllGatherOp,)
    remark = "all-gather + GEMM not fused"

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, AllGatherOp)
        _rows(op)
        gathered, reshapes = _forward_through_reshapes(op.y)
        found = users(gathered)
        if len(found) != 1 or not isinstance(found[0], MatmulOp | ScaledMatmulOp):
            if any(isinstance(u, MatmulOp | ScaledMatmulOp) for u in found):
                raise NoMatch("the gathered tensor has users besides one GEMM")
            raise NoMatch("the gathered tensor does not feed a GEMM")
        gemm = found[0]
        if gemm.a is not gathered or gemm.b is gathered:
            raise NoMatch("the gathered tensor is the GEMM's b, not its a")
        scale_a, scale_b, out_dtype = _gemm_parts(gemm)
        if scale_a is not None:
            sa = scale_a.type
            assert isinstance(sa, TensorType)
            if not is_one_element(sa.dims):
                raise NoMatch("the gathered FP8 operand has row-wise scales")
        site.require_kernel(ALL_GATHER_GEMM)
        fused = AllGatherGemmOp(
            op.x, gemm.b, scale_a, scale_b, group=op.group.data,
            world_size=op.world_size.value.data, out_dtype=out_dtype,
            result_type=gemm.c.type)
        _replace(gemm, gemm.c, fused, rewriter)
        _drop(list(reversed(reshapes)), rewriter)
        rewriter.erase(op)
        return REWROTE
