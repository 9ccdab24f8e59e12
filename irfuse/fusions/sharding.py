"""Building blocks of the sequence-parallel rewrites: collectives with their torch decomposition,
a replicated tensor's rows for this rank, a raised op moved onto a row shard, the reshapes
between a model's `[B, S, H]` hidden states and the `[B*S, H]` rows the collectives split, and
the padding of a token count TP does not divide (`pad_rows`, `slice_rows`).

A `coll` op built here carries the collective it stands for in its decomposition region, so emit
lowers it like a raised one, spelled as the collective it replaces was (`spelling_of`): torch's
functional collective (`_c10d_functional`'s call and its `wait_tensor`) on the group's name, or
vLLM's own op (`torch.ops.vllm.reduce_scatter / all_gather(x, 0, world_size, group_name)`, what
vLLM's sequence-parallel pass emits), which runs on its `GroupCoordinator`'s own communicator
(`tp:0`, a name torch does not know). Where this process has no such op registered (a stand-in
of vLLM's registry), torch's functional collective on the coordinator's device group
(`irfuse.groups.torch_name`) takes its place. FP8 is moved as bytes (`_as_bytes`).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
import torch
import torch.distributed as dist
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from irfuse import groups
from irfuse.dialects import aten
from irfuse.dialects.coll import AllGatherOp, ReduceScatterOp
from irfuse.dialects.irfuse import Dim, TensorType, YieldOp, sym_type, tensor_type
from irfuse.ir import call_args
from irfuse.ir.decomposition import decomposition_block
from irfuse.ir.shapes import UI8, is_fp8
from irfuse.raising.aten_ops import (
    C10D_ALL_GATHER_INTO_TENSOR,
    C10D_ALL_REDUCE,
    C10D_REDUCE_SCATTER_TENSOR,
    C10D_WAIT_TENSOR,
    CONSTANT_PAD_ND,
    RESHAPE,
    RESHAPE_AS,
    SELECT_INT,
    SLICE_TENSOR,
    UNFLATTEN_INT,
    VLLM_ALL_GATHER,
    VLLM_ALL_REDUCE,
    VLLM_REDUCE_SCATTER,
)
from irfuse.raising.match import NoMatch, discard

SHM_ALL_REDUCE = "_C::shm_allreduce.default"
SYM_SIZE = "aten::sym_size.int"
NEG = "py:operator.neg"
MOD = "py:operator.mod"

RANKS_ATTR = "irfuse.ranks"
"""Module attribute: group name -> this process's rank in it, for IR read without a process
group (irfuse-opt, FileCheck); in a running process torch.distributed says it."""


def _ref(i: int) -> call_args.OperandRefAttr:
    return call_args.OperandRefAttr(IntAttr(i))


def shard_dim(rows: Dim, world_size: int) -> Dim:
    """The row count of one rank's shard: static, or a symbol derived from the full count."""
    if isinstance(rows, int):
        return rows // world_size
    return f"({rows})//{world_size}"


def _sympy_rows(rows: str):
    """`rows` as a sympy expression whose symbols are positive integers (Dynamo's sizes)."""
    expr = sympy.sympify(rows)
    return expr.subs({s: sympy.Symbol(s.name, integer=True, positive=True)
                      for s in expr.free_symbols})


def divides(rows: Dim, world_size: int) -> bool:
    """Whether `world_size` provably divides `rows` (a static count, or a symbolic one such as
    `2*s0`); a symbol it may not divide (`s0`) is False."""
    if isinstance(rows, int):
        return rows % world_size == 0
    try:
        return sympy.Mod(_sympy_rows(rows), world_size) == 0
    except (sympy.SympifyError, TypeError, ValueError):
        return False


def padded_dim(rows: Dim, world_size: int) -> Dim:
    """`rows` rounded up to a multiple of the world size: static, or a symbol of the count."""
    if isinstance(rows, int):
        return -(-rows // world_size) * world_size
    return f"{world_size}*((({rows}) + {world_size - 1})//{world_size})"


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
    """FP8 `value` viewed as uint8 (other dtypes as they are): the values move unchanged, and
    gloo and older NCCL have no float8 collectives."""
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


def _vllm_op(target: str, x: SSAValue, world_size: int, group: str, out: TensorType,
             ops: list[Operation]) -> SSAValue:
    xb = _as_bytes(x, ops)
    out_b = tensor_type(out.dims, xb.type.dtype)  # type: ignore[attr-defined]
    call = aten.CallOp(target, [xb], [_ref(0), IntAttr(0), IntAttr(world_size),
                                      StringAttr(group)], [out_b])
    ops.append(call)
    return _from_bytes(call.results[0], out.dtype, ops)


C10D = "c10d"
VLLM = "vllm"


def spelling_of(op: Operation) -> str:
    """How the collective `op` was spelled: VLLM where its decomposition calls one of vLLM's
    collective ops (`torch.ops.vllm.*`, or its CPU communicator's `_C.shm_allreduce`), else C10D
    (torch's functional collectives, or an op with no decomposition)."""
    block = decomposition_block(op)
    if block is not None:
        for inner in block.ops:
            if isinstance(inner, aten.CallOp) and inner.target.data in (
                    VLLM_ALL_REDUCE, VLLM_REDUCE_SCATTER, VLLM_ALL_GATHER):
                return VLLM
            template = inner.template.data if isinstance(inner, aten.CallOp) else ()
            if template and isinstance(template[0], call_args.TargetAttr) \
                    and template[0].text.data == SHM_ALL_REDUCE:
                return VLLM  # vLLM's CPU communicator's own all-reduce
            if isinstance(inner, aten.CallOp) and inner.target.data == C10D_ALL_REDUCE:
                return C10D
    return C10D


def _vllm_registered(target: str) -> bool:
    """Whether vLLM's collective op `target` (`vllm::<name>.default`) can be emitted: this
    process has it registered, or has no process group at all (IR read offline, as irfuse-opt
    does: the op is written as the graph would call it in vLLM's process)."""
    if not _initialized():
        return True
    name = target.split("::", 1)[1].split(".", 1)[0]
    try:
        return hasattr(getattr(torch.ops.vllm, name), "default")
    except (AttributeError, RuntimeError):
        return False


def _initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def _c10d_group(group: str) -> str:
    """The name torch's functional collectives take for `group`: torch's own name where the
    group is one of vLLM's coordinators, else `group` (unchanged where nothing is initialized:
    IR read without a process group)."""
    if _initialized() and groups.is_vllm(group):
        return groups.torch_name(group)
    return group


def reduce_scatter(x: SSAValue, *, group: str, world_size: int, reduce_op: str = "sum",
                   spelling: str = C10D) -> ReduceScatterOp:
    """`coll.reduce_scatter` of x along dim 0 (whose rows the world size divides), decomposed
    as the collective of `spelling` (vLLM's op only for a sum)."""
    xt = x.type
    assert isinstance(xt, TensorType)
    out = with_rows(xt, shard_dim(xt.dims[0], world_size))
    vllm = spelling == VLLM and reduce_op == "sum" and _vllm_registered(VLLM_REDUCE_SCATTER)

    def build(arg: SSAValue):
        ops: list[Operation] = []
        if vllm:
            return ops, _vllm_op(VLLM_REDUCE_SCATTER, arg, world_size, group, out, ops)
        args = [StringAttr(reduce_op), IntAttr(world_size), StringAttr(_c10d_group(group))]
        return ops, _functional(C10D_REDUCE_SCATTER_TENSOR, arg, args, out, ops)

    return ReduceScatterOp(x, group=group, world_size=world_size, reduce_op=reduce_op,
                           result_type=out, decomposition=_region(xt, build))


def all_gather(x: SSAValue, rows: Dim, *, group: str, world_size: int,
               spelling: str = C10D) -> AllGatherOp:
    """`coll.all_gather` of x along dim 0 into `rows` rows, decomposed as the collective of
    `spelling` (FP8 moves as bytes)."""
    xt = x.type
    assert isinstance(xt, TensorType)
    out = with_rows(xt, rows)
    vllm = spelling == VLLM and _vllm_registered(VLLM_ALL_GATHER)

    def build(arg: SSAValue):
        ops: list[Operation] = []
        if vllm:
            return ops, _vllm_op(VLLM_ALL_GATHER, arg, world_size, group, out, ops)
        args = [IntAttr(world_size), StringAttr(_c10d_group(group))]
        return ops, _functional(C10D_ALL_GATHER_INTO_TENSOR, arg, args, out, ops)

    return AllGatherOp(x, group=group, world_size=world_size, result_type=out,
                       decomposition=_region(xt, build))


# --- padding ------------------------------------------------------------------------------------


def row_count_value(x: SSAValue) -> tuple[list[Operation], int | SSAValue]:
    """x's row count as a call argument: the static count, or `sym_size(x, 0)` (not inserted)."""
    xt = x.type
    assert isinstance(xt, TensorType)
    n = xt.dims[0]
    if isinstance(n, int):
        return [], n
    size = aten.CallOp(SYM_SIZE, [x], [_ref(0), IntAttr(0)], [sym_type(str(n))])
    return [size], size.results[0]


def _arg(value: int | SSAValue, operands: list[SSAValue]) -> Attribute:
    if isinstance(value, int):
        return IntAttr(value)
    operands.append(value)
    return _ref(len(operands) - 1)


def pad_rows(x: SSAValue, n: int | SSAValue, world_size: int,
             value: float = 0.0) -> list[Operation]:
    """x (`[n, ...]`) with rows of `value` appended up to the next multiple of the world size
    (not inserted; the last op's result is the padded tensor, FP8 padded as bytes):
    `constant_pad_nd` by `(-n) % world_size`, n read with `sym_size` where it is symbolic. A row
    of zeros stays zero through the sharded norm (0 * rsqrt(eps) = 0), and `slice_rows` keeps it
    from every reader of the gathered tensor."""
    xt = x.type
    assert isinstance(xt, TensorType)
    ops: list[Operation] = []
    if isinstance(n, int):
        amount: int | SSAValue = -n % world_size
    else:
        neg = aten.CallOp(NEG, [n], [_ref(0)], [sym_type(f"-({n.type.expr.data})")])  # type: ignore[attr-defined]
        mod = aten.CallOp(MOD, [neg.results[0]], [_ref(0), IntAttr(world_size)],
                          [sym_type(f"Mod(-({n.type.expr.data}), {world_size})")])  # type: ignore[attr-defined]
        ops += [neg, mod]
        amount = mod.results[0]
    source = _as_bytes(x, ops)
    operands = [source]
    pads = ArrayAttr([IntAttr(0), IntAttr(0)] * (xt.rank - 1) + [IntAttr(0),
                                                              _arg(amount, operands)])
    st = source.type
    assert isinstance(st, TensorType)
    padded = padded_dim(xt.dims[0], world_size)
    is_int = isinstance(st.dtype, IntegerType)
    fill = IntAttr(int(value)) if is_int else call_args.FloatArgAttr(value)
    pad = aten.CallOp(CONSTANT_PAD_ND, operands, [_ref(0), pads, fill],
                      [tensor_type((padded, *st.dims[1:]), st.dtype)])
    ops.append(pad)
    _from_bytes(pad.results[0], xt.dtype, ops)
    return ops


def slice_rows(x: SSAValue, n: int | SSAValue, rows: Dim) -> aten.CallOp:
    """x's first n rows (`rows` of them, the count's dim), a view (not inserted)."""
    xt = x.type
    assert isinstance(xt, TensorType)
    operands = [x]
    end = _arg(n, operands)
    return aten.CallOp(SLICE_TENSOR, operands, [_ref(0), IntAttr(0), IntAttr(0), end],
                       [with_rows(xt, rows)])


def sliced_from(value: SSAValue) -> SSAValue | None:
    """The tensor whose leading rows `value` is (`slice(t, 0, 0, n)`), or None."""
    owner = value.owner
    if not isinstance(owner, aten.CallOp) or owner.target.data != SLICE_TENSOR:
        return None
    template = owner.template.data
    if len(template) != 4 or not all(isinstance(t, IntAttr) for t in template[1:3]):
        return None
    if template[1].data != 0 or template[2].data != 0:  # type: ignore[attr-defined]
        return None
    return owner.operands[0]


def padded_from(value: SSAValue) -> tuple[SSAValue, aten.CallOp] | None:
    """(the tensor, the pad) where `value` is the tensor with rows appended at its end by
    `pad_rows` (a `constant_pad_nd` of dim 0 only, maybe around a bytes view); else None."""
    owner = value.owner
    view = None
    if isinstance(owner, aten.CallOp) and owner.target.data == "aten::view.dtype":
        view, owner = owner, owner.operands[0].owner
    if not isinstance(owner, aten.CallOp) or owner.target.data != CONSTANT_PAD_ND:
        return None
    pads = owner.template.data[1]
    if not isinstance(pads, ArrayAttr):
        return None
    items = pads.data
    if any(not (isinstance(t, IntAttr) and t.data == 0) for t in items[:-1]):
        return None
    source = owner.operands[0]
    if view is not None:
        inner = source.owner
        if not (isinstance(inner, aten.CallOp) and inner.target.data == "aten::view.dtype"):
            return None
        source = inner.operands[0]
    return source, owner


def slice_end(op: aten.CallOp) -> int | SSAValue:
    """The end a `slice_rows` slice takes (an int, or the symbolic count it reads)."""
    end = op.template.data[3]
    if isinstance(end, IntAttr):
        return end.data
    assert isinstance(end, call_args.OperandRefAttr)
    return op.operands[end.index.data]


def pad_chain(pad: aten.CallOp) -> list[Operation]:
    """The ops `pad_rows` built around `pad` (its bytes views, its amount's `neg` / `mod` and the
    `sym_size` they read), readers first: what to erase, where unread, once the pad is gone."""
    chain: list[Operation] = []
    for user in users_of(pad.results[0]):
        if isinstance(user, aten.CallOp) and user.target.data == "aten::view.dtype":
            chain.append(user)
    chain.append(pad)
    source = pad.operands[0].owner
    if isinstance(source, aten.CallOp) and source.target.data == "aten::view.dtype":
        chain.append(source)
    amount = pad.operands[1].owner if len(pad.operands) > 1 else None
    while isinstance(amount, aten.CallOp) and amount.target.data in (MOD, NEG, SYM_SIZE):
        chain.append(amount)
        amount = amount.operands[0].owner if amount.target.data != SYM_SIZE else None
    return chain


def drop_unread(ops: Sequence[Operation], rewriter) -> None:
    """Erase those of `ops` (readers first) whose results nothing reads."""
    for op in ops:
        if op.parent is not None and not any(r.uses for r in op.results):
            rewriter.erase(op)


def users_of(value: SSAValue) -> list[Operation]:
    return [use.operation for use in value.uses]


def rank_in(group: str, module: ModuleOp | None) -> int:
    """This process's rank in `group`: the module's `irfuse.ranks`, else the group's
    (`irfuse.groups.rank`: torch's group of that name, or vLLM's coordinator)."""
    if module is not None:
        attr = module.attributes.get(RANKS_ATTR)
        if isinstance(attr, DictionaryAttr) and isinstance(attr.data.get(group), IntegerAttr):
            return attr.data[group].value.data  # type: ignore[union-attr]
    rank = groups.rank(group)
    if rank is None:
        raise NoMatch(f"this process's rank in process group {group!r} is unknown (no "
                      f"{RANKS_ATTR} entry, and neither torch.distributed nor vLLM knows the "
                      "group)")
    return rank


def rows_of_rank(x: SSAValue, rank: int, world_size: int) -> list[aten.CallOp]:
    """Rank `rank`'s block of rows of a replicated x whose rows the world size divides:
    `x.unflatten(0, [ws, -1]).select(0, rank)` (which needs no token count, static or
    symbolic)."""
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
