"""enable-sp: sequence parallelism around the norms of a tensor-parallel model.

Anchored at each `coll.all_reduce` of `[tokens, hidden]` whose result feeds a raised RMSNorm
(`norm.rms_norm`, or `norm.add_rms_norm` as its x). The all-reduce becomes a reduce-scatter along
the tokens, the norm (with its residual add) runs on this rank's rows, and an all-gather brings
the rows back: the norm's output is gathered, or, when its only user is a static FP8 quant, the
quant runs on the shard too and the FP8 values are gathered (a quarter of the bytes of f32, half
of bf16's). fuse-norm-quant, after this pass, fuses the local norm and quant.

What each rank holds: the residual stream between the norms is a shard. A norm's new residual
and the all-reduced value itself (vLLM's first norm, whose residual is the all-reduce output)
are given to every other user as the all-gather of the shard, so every consumer sees the full
tensor it saw before; a later norm of the chain whose residual is such a gather reads the shard
itself, and the gathers nobody reads are dropped at the end of the block. A residual that comes
from elsewhere (the embedding of a model whose embedding is replicated) is taken to be replicated,
as the residual stream of tensor parallelism is, and this rank's rows are sliced from it
(`unflatten(0, [tp, -1]).select(0, rank)`; the rank comes from torch.distributed or the module's
`irfuse.ranks`). So a model of N layers ends with the final norm's output gathered and the
residual shards passed from norm to norm, as vLLM's pass leaves it.

Token counts: a static count that TP does not divide is a remark (irfuse does not pad the
caller's tokens). A symbolic count relies on the compile range (`from-sp-min`: single sizes that
TP divides); at run time the collectives refuse any other size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from irfuse.dialects.coll import AllGatherOp, AllReduceOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.norm import AddRmsNormOp, RmsNormOp
from irfuse.dialects.quant import QuantFp8Op
from irfuse.dialects.shapes import normalize_dim
from irfuse.lowering.driver import AnchorPattern, Site
from irfuse.lowering.match import NoMatch, discard, users
from irfuse.rewrites.sharding import (
    all_gather,
    on_shard,
    rank_in,
    reduce_scatter,
    rows_of_rank,
    shard_dim,
)


@dataclass
class _Gathers:
    """The all-gathers this pass inserted for other users of a shard (dropped if unread)."""

    ops: list[AllGatherOp] = field(default_factory=list)


def shard_of(value: SSAValue, group: str, world_size: int) -> SSAValue | None:
    """The shard a dim-0 all-gather over the same group gathered into `value`, if it is one."""
    gather = value.owner
    if not isinstance(gather, AllGatherOp):
        return None
    x = gather.x.type
    assert isinstance(x, TensorType)
    if (gather.group.data != group or gather.world_size.value.data != world_size
            or normalize_dim(gather.dim.value.data, x.rank, "dim") != 0):
        return None
    return gather.x


class SequenceParallelPattern(AnchorPattern):
    """An all-reduce feeding an RMSNorm -> reduce-scatter, the norm on the shard, all-gather."""

    op_types = (AllReduceOp,)
    remark = "not sequence-parallel"

    def start(self, site: Site) -> None:
        site.scratch[self] = _Gathers()

    def finish(self, site: Site) -> None:
        for gather in site.scratch.pop(self).ops:
            if gather.parent is not None and not gather.y.uses:
                discard(gather)

    def rewrite(self, op: Operation, site: Site) -> bool:
        assert isinstance(op, AllReduceOp)
        return _rewrite(op, site, site.scratch[self])


def _norm_of(ar: AllReduceOp) -> RmsNormOp | AddRmsNormOp:
    norms = [u for u in users(ar.y) if isinstance(u, RmsNormOp | AddRmsNormOp)
             and u.x is ar.y]
    if not norms:
        raise NoMatch("the all-reduce does not feed an RMSNorm")
    if len(norms) > 1:
        raise NoMatch("the all-reduce feeds several RMSNorms")
    norm = norms[0]
    if isinstance(norm, AddRmsNormOp) and norm.residual is ar.y:
        raise NoMatch("the all-reduce is both the norm's x and its residual")
    return norm


def _static_quant(value: SSAValue) -> QuantFp8Op | None:
    """The static FP8 quant that is `value`'s only user, if it is."""
    found = users(value)
    if len(found) != 1 or len({u.operation for u in value.uses}) != 1:
        return None
    quant = found[0]
    if isinstance(quant, QuantFp8Op) and quant.scheme.is_static and quant.x is value:
        return quant
    return None


def _rewrite(ar: AllReduceOp, site: Site, gathers: _Gathers) -> bool:
    x = ar.x.type
    assert isinstance(x, TensorType)
    if x.rank != 2:
        raise NoMatch(f"the all-reduced tensor has rank {x.rank}, not [tokens, hidden]")
    ws = ar.world_size.value.data
    group = ar.group.data
    tokens = x.dims[0]
    if ws == 1:
        raise NoMatch("the group has one rank")
    if isinstance(tokens, int) and tokens % ws:
        raise NoMatch(f"{tokens} tokens are not divisible by TP {ws} (irfuse does not pad)")
    norm = _norm_of(ar)
    rows = shard_dim(tokens, ws)
    residual = norm.residual if isinstance(norm, AddRmsNormOp) else None
    residual_shard = None
    slice_ops: list[Operation] = []
    if residual is not None:
        residual_shard = shard_of(residual, group, ws)
        if residual_shard is None:
            slice_ops = rows_of_rank(residual, rank_in(group, site.module), ws)
            residual_shard = slice_ops[-1].results[0]
    quant = _static_quant(norm.y)

    # Everything that can refuse is built before the IR changes.
    scattered = reduce_scatter(ar.x, group=group, world_size=ws, reduce_op=ar.reduce_op.data)
    operands = [scattered.y] + ([residual_shard] if residual_shard is not None else [])
    if norm.weight is not None:
        operands.append(norm.weight)
    built: list[Operation] = [scattered, *slice_ops]
    try:
        local = on_shard(norm, operands, tokens, rows)
        built.append(local)
        local_quant = None
        if quant is not None:
            rest = [v for i, v in enumerate(quant.operands) if i > 0]
            local_quant = on_shard(quant, [local.results[0], *rest], tokens, rows)
    except NoMatch:
        discard(*reversed(built))
        raise

    Rewriter.insert_op(scattered, InsertPoint.before(ar))
    others = [u for u in ar.y.uses if u.operation is not norm]
    if others:  # the all-reduced value read elsewhere too: its full tensor is the gather
        full = all_gather(scattered.y, tokens, group=group, world_size=ws)
        Rewriter.insert_op(full, InsertPoint.before(ar))
        gathers.ops.append(full)
        ar.y.replace_all_uses_with(full.y)
    Rewriter.insert_op([*slice_ops, local], InsertPoint.before(norm))
    if isinstance(norm, AddRmsNormOp) and norm.residual_out.uses:
        new_residual = all_gather(local.results[1], tokens, group=group, world_size=ws)
        Rewriter.insert_op(new_residual, InsertPoint.before(norm))
        gathers.ops.append(new_residual)
        norm.residual_out.replace_all_uses_with(new_residual.y)
    if quant is not None and local_quant is not None:
        gathered = all_gather(local_quant.results[0], tokens, group=group, world_size=ws)
        Rewriter.insert_op([local_quant, gathered], InsertPoint.before(quant))
        quant.results[0].replace_all_uses_with(gathered.y)
        Rewriter.erase_op(quant)
    else:
        gathered = all_gather(local.results[0], tokens, group=group, world_size=ws)
        Rewriter.insert_op(gathered, InsertPoint.before(norm))
        norm.y.replace_all_uses_with(gathered.y)
    Rewriter.erase_op(norm)
    Rewriter.erase_op(ar)
    return True
