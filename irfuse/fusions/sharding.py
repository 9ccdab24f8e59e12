"""Building blocks of the sequence-parallel rewrites: collectives with their torch decomposition,
a replicated tensor's rows for this rank, a raised op moved onto a row shard, and the reshapes
between a model's `[B, S, H]` hidden states and the `[B*S, H]` rows the collectives split.

A `coll` op built here carries the functional collective it stands for (`_c10d_functional`'s
call and its `wait_tensor`) in its decomposition region, so emit lowers it like a raised one. FP8
is gathered as bytes (`view(uint8)` around the gather): the values move unchanged, and gloo and
older NCCL have no float8 collectives.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
import torch.distributed as dist
from torch.distributed.distributed_c10d import _resolve_process_group
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from irfuse.dialects import aten
from irfuse.dialects.coll import AllGatherOp, ReduceScatterOp
from irfuse.dialects.irfuse import Dim, TensorType, YieldOp, tensor_type
from irfuse.ir.decomposition import decomposition_block
from irfuse.ir.shapes import UI8, is_fp8
from irfuse.raising.aten_ops import (
    C10D_ALL_GATHER_INTO_TENSOR,
    C10D_REDUCE_SCATTER_TENSOR,
    C10D_WAIT_TENSOR,
    RESHAPE,
    RESHAPE_AS,
    SELECT_INT,
    UNFLATTEN_INT,
)
from irfuse.raising.match import NoMatch, discard

RANKS_ATTR = "irfuse.ranks"
"""Module attribute: group name -> this process's rank in it, for IR read without a process
group (irfuse-opt, FileCheck); in a running process torch.distributed says it."""


def _ref(i: int) -> aten.OperandRefAttr:
    return aten.OperandRefAttr(IntAttr(i))


def shard_dim(rows: Dim, world_size: int) -> Dim:
    """The row count of one rank's shard: static, or a symbol derived from the full count."""
    if isinstance(rows, int):
        return rows // world_size
    return f"({rows})//{world_size}"


def with_rows(t: TensorType, rows: Dim) -> TensorType:
    return tensor_type((rows, *t.dims[1:]), t.dtype)


def row_count(lead: Sequence[Dim]) -> Dim:
    """The number of rows of `[*lead, H]` flattened to `[rows, H]`: the product of the leading
    dims, an int when they are static, else the sympy product as Dynamo writes it (`2*s0`)."""
    if all(isinstance(d, int) for d in lead):
        n = 1
        for d in lead:
            n *= d  # type: ignore[operator]
        return n
    product = sympy.Mul(*(sympy.sympify(d) for d in lead))
    return int(product) if product.is_Integer else str(product)


def flatten_rows(x: SSAValue) -> aten.CallOp:
    """`x.reshape(-1, H)`: `[*lead, H]` as `[rows, H]` (not inserted). A reshape, so that
    the no-op elimination collapses it with the `view` a linear layer put around its GEMM."""
    xt = x.type
    assert isinstance(xt, TensorType)
    out = tensor_type((row_count(xt.dims[:-1]), xt.dims[-1]), xt.dtype)
    return aten.CallOp(RESHAPE, [x], [_ref(0), ArrayAttr([IntAttr(-1), _size(xt.dims[-1])])],
                       [out])


def unflatten_rows(rows: SSAValue, like: SSAValue) -> aten.CallOp:
    """`rows` (`[N, H]`) reshaped to the leading dims of `like` (not inserted): a reshape with
    `-1` for the one symbolic dim where there is at most one, else `reshape_as(like)`."""
    rt, lt = rows.type, like.type
    assert isinstance(rt, TensorType) and isinstance(lt, TensorType)
    out = tensor_type(lt.dims, rt.dtype)
    symbolic = [d for d in lt.dims if not isinstance(d, int)]
    if len(symbolic) > 1:
        return aten.CallOp(RESHAPE_AS, [rows, like], [_ref(0), _ref(1)], [out])
    shape = [IntAttr(d) if isinstance(d, int) else IntAttr(-1) for d in lt.dims]
    return aten.CallOp(RESHAPE, [rows], [_ref(0), ArrayAttr(shape)], [out])


def _size(dim: Dim) -> IntAttr:
    if not isinstance(dim, int):
        raise NoMatch(f"the hidden size {dim} is symbolic")
    return IntAttr(dim)


def _region(arg_type: Attribute, build) -> Region:
    block = Block(arg_types=[arg_type])
    ops, out = build(block.args[0])
    for op in ops:
        block.add_op(op)
    block.add_op(YieldOp(out))
    return Region(block)


def _as_bytes(value: SSAValue, ops: list[Operation]) -> SSAValue:
    t = value.type
    assert isinstance(t, TensorType)
    if not is_fp8(t.dtype):
        return value
    view = aten.CallOp("aten::view.dtype", [value], [_ref(0), UI8], [tensor_type(t.dims, UI8)])
    ops.append(view)
    return view.results[0]


def _from_bytes(value: SSAValue, dtype: Attribute, ops: list[Operation]) -> SSAValue:
    t = value.type
    assert isinstance(t, TensorType)
    if t.dtype == dtype:
        return value
    view = aten.CallOp("aten::view.dtype", [value], [_ref(0), dtype], [tensor_type(t.dims, dtype)])
    ops.append(view)
    return view.results[0]


def _functional(target: str, x: SSAValue, args: Sequence[Attribute], out: TensorType,
                ops: list[Operation]) -> SSAValue:
    xb = _as_bytes(x, ops)
    out_b = tensor_type(out.dims, xb.type.dtype)  # type: ignore[attr-defined]
    started = aten.CallOp(target, [xb], [_ref(0), *args], [out_b])
    waited = aten.CallOp(C10D_WAIT_TENSOR, [started.results[0]], [_ref(0)], [out_b])
    ops += [started, waited]
    return _from_bytes(waited.results[0], out.dtype, ops)


def reduce_scatter(x: SSAValue, *, group: str, world_size: int, reduce_op: str = "sum"
                   ) -> ReduceScatterOp:
    """`coll.reduce_scatter` of x along dim 0, decomposed as the functional collective."""
    xt = x.type
    assert isinstance(xt, TensorType)
    out = with_rows(xt, shard_dim(xt.dims[0], world_size))

    def build(arg: SSAValue):
        ops: list[Operation] = []
        args = [StringAttr(reduce_op), IntAttr(world_size), StringAttr(group)]
        return ops, _functional(C10D_REDUCE_SCATTER_TENSOR, arg, args, out, ops)

    return ReduceScatterOp(x, group=group, world_size=world_size, reduce_op=reduce_op,
                           result_type=out, decomposition=_region(xt, build))


def all_gather(x: SSAValue, rows: Dim, *, group: str, world_size: int) -> AllGatherOp:
    """`coll.all_gather` of x along dim 0 into `rows` rows, decomposed as the functional
    collective (FP8 moves as bytes)."""
    xt = x.type
    assert isinstance(xt, TensorType)
    out = with_rows(xt, rows)

    def build(arg: SSAValue):
        ops: list[Operation] = []
        args = [IntAttr(world_size), StringAttr(group)]
        return ops, _functional(C10D_ALL_GATHER_INTO_TENSOR, arg, args, out, ops)

    return AllGatherOp(x, group=group, world_size=world_size, result_type=out,
                       decomposition=_region(xt, build))


def rank_in(group: str, module: ModuleOp | None) -> int:
    """This process's rank in `group`: the module's `irfuse.ranks`, else torch.distributed."""
    if module is not None:
        attr = module.attributes.get(RANKS_ATTR)
        if isinstance(attr, DictionaryAttr) and isinstance(attr.data.get(group), IntegerAttr):
            return attr.data[group].value.data  # type: ignore[union-attr]
    rank = _registered_rank(group)
    if rank is None:
        raise NoMatch(f"this process's rank in process group {group!r} is unknown (no "
                      f"{RANKS_ATTR} entry, and torch.distributed does not know the group)")
    return rank


def _registered_rank(group: str) -> int | None:
    if not dist.is_available() or not dist.is_initialized():
        return None
    try:
        return int(_resolve_process_group(group).rank())
    except (RuntimeError, ValueError, KeyError, TypeError, AttributeError):
        return None


def rows_of_rank(x: SSAValue, rank: int, world_size: int) -> list[aten.CallOp]:
    """Rank `rank`'s block of rows of a replicated x: `x.unflatten(0, [ws, -1]).select(0, rank)`
    (which needs no token count, static or symbolic)."""
    xt = x.type
    assert isinstance(xt, TensorType)
    rows = shard_dim(xt.dims[0], world_size)
    blocks = aten.CallOp(
        UNFLATTEN_INT, [x], [_ref(0), IntAttr(0), ArrayAttr([IntAttr(world_size),
                                                                   IntAttr(-1)])],
        [tensor_type((world_size, rows, *xt.dims[1:]), xt.dtype)])
    mine = aten.CallOp(SELECT_INT, [blocks.results[0]], [_ref(0), IntAttr(0), IntAttr(rank)],
                       [with_rows(xt, rows)])
    return [blocks, mine]


def on_shard(op: Operation, operands: Sequence[SSAValue], full_rows: Dim | tuple[Dim, ...],
             rows: Dim) -> Operation:
    """A copy of the raised op `op` computing on row shards: its operands replaced (in order),
    and every result, decomposition argument and decomposition value derived from a replaced
    operand whose leading dims are `full_rows` (one dim, or the `[B, S]` of `[B, S, H]`, which
    the shard holds flattened) retyped to `rows`. The op must compute row by row (a norm, a
    static quant): NoMatch when its decomposition reads a value from outside it that is not a
    tensor free of the token dims (a symbolic size, a full-row tensor), or its results do not
    come out as shards."""
    new = op.clone()
    try:
        _retype(op, new, operands, full_rows, rows)
    except NoMatch:
        discard(new)
        raise
    return new


def _lead(full_rows: Dim | tuple[Dim, ...]) -> tuple[Dim, ...]:
    return full_rows if isinstance(full_rows, tuple) else (full_rows,)


def _row_free(value: SSAValue, full_rows: tuple[Dim, ...]) -> bool:
    """A tensor read from above a decomposition that cannot hold rows (a scale, a weight)."""
    t = value.type
    return isinstance(t, TensorType) and not any(d in t.dims for d in full_rows if d != 1)


def _shard_type(t: Attribute, full_rows: tuple[Dim, ...], rows: Dim) -> Attribute:
    k = len(full_rows)
    if isinstance(t, TensorType) and t.rank >= k and t.dims[:k] == full_rows:
        return tensor_type((rows, *t.dims[k:]), t.dtype)
    return t


def _retype(op: Operation, new: Operation, operands: Sequence[SSAValue],
            full: Dim | tuple[Dim, ...], rows: Dim) -> None:
    full_rows = _lead(full)
    changed: set[SSAValue] = set()
    for i, value in enumerate(operands):
        new.operands[i] = value
    expected = [_shard_type(r.type, full_rows, rows) for r in op.results]
    block = decomposition_block(new)
    if block is not None:
        for arg, value in zip(block.args, operands, strict=True):
            if arg.type != value.type:
                arg._type = value.type  # noqa: SLF001 (retyping in place: the shard's rows)
                changed.add(arg)
        inside = set(block.args)
        for inner in block.ops:
            for operand in inner.operands:
                if operand not in inside and not _row_free(operand, full_rows):
                    raise NoMatch(f"{op.name}'s decomposition reads a value from outside it "
                                  "that may depend on the token count")
            if isinstance(inner, YieldOp):
                got = [v.type for v in inner.operands]
                if got != expected:
                    raise NoMatch(f"{op.name}'s decomposition does not keep the rows first")
                continue
            moved = any(v in changed for v in inner.operands)
            for res in inner.results:
                inside.add(res)
                if moved:
                    new_type = _shard_type(res.type, full_rows, rows)
                    if new_type != res.type:
                        res._type = new_type  # noqa: SLF001
                        changed.add(res)
    for res, t in zip(new.results, expected, strict=True):
        res._type = t  # noqa: SLF001
