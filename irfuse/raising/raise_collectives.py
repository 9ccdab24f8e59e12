"""raise-collectives: torch's and vLLM's functional collectives, each with its wait, as `coll` ops.

Anchored at each collective call (`all_reduce`, `reduce_scatter_tensor`, `all_gather_into_tensor`,
their autograd twins, vLLM's three, and the in-place `all_reduce_` as functionalization leaves
it), and at vLLM's CPU all-reduce (`_C.shm_allreduce` on its communicator's shared memory,
functionalized: its group is the coordinator whose communicator has the call's handle). Produces `coll.all_reduce` / `coll.reduce_scatter` / `coll.all_gather` with the wait (and the
split / cat that spell a non-zero dim, and the `view(uint8)` / `view(fp8)` around an FP8 gather
moved as bytes) in the region, so the collective fusions anchor on one op.
`world_size` comes from the call, the module attribute `irfuse.process_groups`, another
collective of the group, torch.distributed, or vLLM's registry of its groups (read only when vLLM
is already imported). A vLLM all-reduce on its TP group (`tp`, `tp:N`) whose size none of these
knows at compile time takes the TP size: the module attribute `irfuse.tp_size` (set from the
config's `tp_size`) or the pass option `tp_size`. Any other unknown group is a remark: a DP or
PP group beside TP never borrows the TP size, and WORLD is never assumed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import torch.distributed as dist
from torch.distributed.distributed_c10d import _resolve_process_group
from xdsl.context import Context
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from irfuse import groups, remarks
from irfuse.dialects.coll import REDUCE_OPS, AllGatherOp, AllReduceOp, ReduceScatterOp
from irfuse.ir.call_args import TargetAttr
from irfuse.ir.shapes import UI8, is_fp8
from irfuse.raising.aten_ops import (
    ALIAS,
    AUTO_FUNCTIONALIZED,
    C10D_ALL_GATHER_INTO_TENSOR,
    C10D_ALL_REDUCE,
    C10D_ALL_REDUCE_INPLACE,
    C10D_AUTOGRAD_ALL_GATHER_INTO_TENSOR,
    C10D_AUTOGRAD_REDUCE_SCATTER_TENSOR,
    C10D_REDUCE_SCATTER_TENSOR,
    C10D_WAIT_TENSOR,
    CAT,
    COPY,
    DETACH,
    SPLIT_TENSOR,
    SPLIT_WITH_SIZES,
    VIEW_DTYPE,
    VLLM_ALL_GATHER,
    VLLM_ALL_REDUCE,
    VLLM_REDUCE_SCATTER,
)
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, CallPattern, Outcome, PatternPass, Site
from irfuse.raising.match import (
    Call,
    NoMatch,
    call,
    only_user,
    producer,
    raise_chain,
    size_matches,
    tensor_type,
    users,
)

PROCESS_GROUPS_ATTR = "irfuse.process_groups"
"""Module attribute: group name -> world size, for collectives whose call does not say it."""

TP_SIZE_ATTR = "irfuse.tp_size"
"""Module attribute: the tensor-parallel size (the config's `tp_size`), the world size of vLLM's
TP group when nothing else says it."""

ALL_REDUCE = (C10D_ALL_REDUCE,)
REDUCE_SCATTER = (
    C10D_REDUCE_SCATTER_TENSOR,
    C10D_AUTOGRAD_REDUCE_SCATTER_TENSOR,
)
ALL_GATHER = (
    C10D_ALL_GATHER_INTO_TENSOR,
    C10D_AUTOGRAD_ALL_GATHER_INTO_TENSOR,
)
VLLM = (VLLM_ALL_REDUCE, VLLM_REDUCE_SCATTER, VLLM_ALL_GATHER)
SPLIT = (SPLIT_TENSOR, SPLIT_WITH_SIZES)
ANCHORS = (
    *ALL_REDUCE, C10D_ALL_REDUCE_INPLACE, *REDUCE_SCATTER, *ALL_GATHER, *VLLM,
)


@dataclass
class _Collective:
    """A matched collective: what the raised op takes and returns, and the ops it replaces."""

    kind: str  # "all_reduce" | "reduce_scatter" | "all_gather"
    x: SSAValue
    out: SSAValue
    group: str
    world_size: int | None
    reduce_op: str = "sum"
    dim: int = 0
    ops: list[Operation] = field(default_factory=list)


def _kind(target: str) -> str:
    if target in ALL_REDUCE or target == VLLM_ALL_REDUCE:
        return "all_reduce"
    if target in REDUCE_SCATTER or target == VLLM_REDUCE_SCATTER:
        return "reduce_scatter"
    return "all_gather"


def _group_name(value: object) -> str:
    if not isinstance(value, str):
        raise NoMatch(f"the process group is not named by a string ({value!r})")
    return value


def _reduce_op(value: object) -> str:
    op = str(value).lower()
    if op not in REDUCE_OPS:
        raise NoMatch(f"reduce op {value!r} is not one of {', '.join(REDUCE_OPS)}")
    return op


def _read_call(found: Call) -> _Collective:
    """The collective's own arguments (before its wait and reassembly are looked at)."""
    kind = _kind(found.target)
    x = found.arg(0)
    if found.target in VLLM:
        if kind == "all_reduce":
            return _Collective(kind, x, found.result, _group_name(found.arg(1, "group_name")),
                               None, ops=[found.op])
        dim, world = found.arg(1, "dim"), found.arg(2, "world_size")
        group = _group_name(found.arg(3, "group_name"))
        rank = tensor_type(x).rank if tensor_type(x) is not None else 0  # type: ignore[union-attr]
        if isinstance(dim, int) and -rank <= dim < rank:
            dim %= rank  # vLLM's default is -1
        return _Collective(kind, x, found.result, group, world, dim=dim, ops=[found.op])
    if kind == "all_reduce":
        return _Collective(kind, x, found.result, _group_name(found.arg(2, "group_name")), None,
                           reduce_op=_reduce_op(found.arg(1, "reduce_op")), ops=[found.op])
    if kind == "reduce_scatter":
        return _Collective(kind, x, found.result, _group_name(found.arg(3, "group_name")),
                           found.arg(2, "group_size"),
                           reduce_op=_reduce_op(found.arg(1, "reduce_op")), ops=[found.op])
    return _Collective(kind, x, found.result, _group_name(found.arg(2, "group_name")),
                       found.arg(1, "group_size"), ops=[found.op])


def _match_wait(coll: _Collective) -> None:
    """Take the collective's `wait_tensor` into the region (functional collectives only)."""
    found_users = users(coll.out)
    waits = [u for u in found_users if call(u, C10D_WAIT_TENSOR) is not None]
    if not waits:
        raise NoMatch("the collective's result is never waited on")
    if len(found_users) != 1:
        raise NoMatch("the collective's result is used besides its wait_tensor")
    coll.ops.append(waits[0])
    coll.out = waits[0].results[0]


def _match_inplace_copy(coll: _Collective) -> None:
    """`dist.all_reduce(x)` functionalized: `copy(x, waited)` is the value x holds afterwards."""
    user = only_user(coll.out)
    copy = call(user, COPY)
    if copy is None or copy.arg(0) is not coll.x or copy.arg(1, "src") is not coll.out:
        return
    if tensor_type(copy.result) != tensor_type(coll.out):
        return  # a copy that casts or broadcasts is not the in-place update
    coll.ops.append(copy.op)
    coll.out = copy.result


def _split_pieces(value: SSAValue, dim: int, size: object) -> tuple[Call, list[SSAValue]] | None:
    """`value` split along `dim` into pieces of `size` (each piece used once): the split and its
    pieces, in order."""
    t = tensor_type(value)
    for user in users(value):
        split = call(user, *SPLIT)
        if split is None or split.arg(0) is not value or t is None:
            continue
        split_dim = split.arg(2, "dim", 0)
        if not isinstance(split_dim, int) or split_dim % t.rank != dim % t.rank:
            continue
        sizes = split.arg(1)
        if split.target == SPLIT_TENSOR:
            if not size_matches(sizes, size):
                continue
        elif not isinstance(sizes, list) or not all(size_matches(s, size) for s in sizes):
            continue
        return split, list(split.op.results)
    return None


def _cat_of(pieces: list[SSAValue]) -> Call | None:
    """The one `cat` that consumes exactly `pieces`, in order, each piece used by it alone."""
    if not pieces:
        return None
    user = only_user(pieces[0])
    cat = call(user, CAT)
    if cat is None or list(cat.arg(0)) != pieces:
        return None
    if any(only_user(p) is not user for p in pieces):
        return None
    return cat


def _match_gather_dim(coll: _Collective) -> None:
    """An all-gather along d != 0: the dim-0 gather, split into world_size row blocks, cat on d."""
    x = tensor_type(coll.x)
    assert x is not None
    found = _split_pieces(coll.out, 0, x.dims[0])
    if found is None:
        return
    split, pieces = found
    cat = _cat_of(pieces)
    if cat is None or len(pieces) != coll.world_size or only_user(coll.out) is not split.op:
        remarks.missed(split.op, "all_gather: the split/cat after the gather is not a clear "
                       "reassembly along another dim; raised as a dim-0 gather")
        return
    dim = cat.arg(1, "dim", 0)
    if not isinstance(dim, int) or dim % x.rank == 0:
        return
    coll.ops.extend([split.op, cat.op])
    coll.out = cat.result
    coll.dim = dim % x.rank


def _match_scatter_dim(coll: _Collective) -> None:
    """A reduce-scatter along d != 0: x split into world_size blocks along d, cat on dim 0."""
    cat = producer(coll.x, CAT)
    if cat is None or cat.arg(1, "dim", 0) != 0 or only_user(coll.x) is not coll.ops[0]:
        return
    pieces = list(cat.arg(0))
    if not pieces or not all(isinstance(p, SSAValue) for p in pieces):
        return
    split = producer(pieces[0], *SPLIT)
    if split is None or list(split.op.results) != pieces or coll.world_size != len(pieces):
        return
    source = split.arg(0)
    t = tensor_type(source)
    dim = split.arg(2, "dim", 0)
    if t is None or not isinstance(dim, int) or dim % t.rank == 0:
        return
    d = dim % t.rank
    total = t.dims[d]
    if not isinstance(total, int) or total % len(pieces):
        return
    sizes = split.arg(1)
    block = total // len(pieces)
    if not (size_matches(sizes, block) or (
            isinstance(sizes, list) and all(size_matches(s, block) for s in sizes))):
        return
    if _cat_of(pieces) is None:
        return
    coll.ops[:0] = [split.op, cat.op]
    coll.x = source
    coll.dim = d


def _match_bytes_view(coll: _Collective) -> None:
    """An all-gather of FP8 moved as bytes (`x.view(uint8)` gathered, the result viewed back to
    x's dtype: how FP8 crosses gloo or an older NCCL; `detach`es between are looked through) is
    the all-gather of x: the views go into the region."""
    before_ops: list[Operation] = []
    value = coll.x
    while (found := producer(value, DETACH, ALIAS)) is not None and only_user(value) is not None:
        before_ops.insert(0, found.op)
        value = found.arg(0)
    before = producer(value, VIEW_DTYPE)
    if before is None or only_user(value) is None:
        return
    source = before.arg(0)
    st, bt = tensor_type(source), tensor_type(value)
    if st is None or bt is None or not is_fp8(st.dtype) or bt.dtype != UI8:
        return
    if only_user(coll.x) is not coll.ops[0]:
        return
    after_ops: list[Operation] = []
    out = coll.out
    while (found := call(only_user(out), DETACH, ALIAS)) is not None and found.arg(0) is out:
        after_ops.append(found.op)
        out = found.result
    after = call(only_user(out), VIEW_DTYPE)
    at = None if after is None else tensor_type(after.result)
    if after is None or after.arg(0) is not out or at is None or at.dtype != st.dtype:
        return
    coll.ops[:0] = [before.op, *before_ops]
    coll.ops += [*after_ops, after.op]
    coll.x, coll.out = source, after.result


def is_vllm_tp_group(group: str) -> bool:
    """vLLM names its TP group coordinator `tp:<index>` (`tp` in hand-written graphs)."""
    return group == "tp" or (group.startswith("tp:") and group[3:].isdigit())


class _WorldSizes:
    """Group name -> world size, from the module, the graph, torch.distributed or vLLM's group
    registry (cached); vLLM's TP group falls back on the TP size."""

    def __init__(self, module: ModuleOp, anchors: list[Call]):
        self.sizes: dict[str, int] = {}
        tp = module.attributes.get(TP_SIZE_ATTR)
        self.tp_size = tp.value.data if isinstance(tp, IntegerAttr) else None
        attr = module.attributes.get(PROCESS_GROUPS_ATTR)
        if isinstance(attr, DictionaryAttr):
            for name, size in attr.data.items():
                if isinstance(size, IntegerAttr):
                    self.sizes[name] = size.value.data
        for found in anchors:
            if found.target in REDUCE_SCATTER or found.target in ALL_GATHER:
                size_arg = found.arg(2 if found.target in REDUCE_SCATTER else 1)
                group = found.arg(3 if found.target in REDUCE_SCATTER else 2)
                if isinstance(group, str) and isinstance(size_arg, int):
                    self.sizes.setdefault(group, size_arg)

    def of(self, group: str, vllm: bool = False) -> int:
        """The world size of `group`; `vllm`: the collective is one of vLLM's ops, whose TP
        group may take the TP size."""
        if group not in self.sizes:
            size = _registered_size(group)
            if size is None and vllm:
                size = _vllm_registered_size(group)
            if size is None and vllm and is_vllm_tp_group(group):
                size = self.tp_size
                if size is None:
                    raise NoMatch(
                        f"the world size of vLLM's TP group {group!r} is unknown at compile "
                        f"time and the TP size is not given (set tp_size; no "
                        f"{PROCESS_GROUPS_ATTR} entry, no other collective of the group says it)"
                    )
            if size is None:
                tp_note = ("; only vLLM's TP group ('tp:N') takes the TP size"
                           if vllm and self.tp_size is not None else "")
                raise NoMatch(
                    f"the world size of process group {group!r} is unknown (no "
                    f"{PROCESS_GROUPS_ATTR} entry, no other collective of the group says it, "
                    f"and torch.distributed does not know the name{tp_note})"
                )
            self.sizes[group] = size
        return self.sizes[group]


def _registered_size(group: str) -> int | None:
    """The size of the process group named `group` in this process, if torch knows it."""
    if not dist.is_available() or not dist.is_initialized():
        return None
    try:
        return int(_resolve_process_group(group).size())
    except (RuntimeError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _vllm_registered_size(group: str) -> int | None:
    """The world size of vLLM's group coordinator named `group`, when vLLM is already imported
    in this process and has that group (its `parallel_state._groups` registry); else None."""
    state = sys.modules.get("vllm.distributed.parallel_state")
    registry = getattr(state, "_groups", None)
    if not isinstance(registry, dict) or group not in registry:
        return None
    try:
        coordinator = registry[group]()
        size = getattr(coordinator, "world_size", None)
    except (TypeError, ReferenceError):
        return None
    return int(size) if isinstance(size, int) and size >= 1 else None


def _match(found: Call, sizes: _WorldSizes) -> _Collective:
    if found.target == C10D_ALL_REDUCE_INPLACE:
        raise NoMatch("in-place all_reduce_ that functionalization did not rewrite")
    coll = _read_call(found)
    if found.target not in VLLM:
        _match_wait(coll)
    if coll.kind == "all_reduce":
        coll.world_size = sizes.of(coll.group, vllm=found.target in VLLM)
        if found.target not in VLLM:
            _match_inplace_copy(coll)
        return coll
    if not isinstance(coll.world_size, int) or coll.world_size < 1:
        raise NoMatch(f"world size {coll.world_size!r} is not a positive int")
    if not isinstance(coll.dim, int):
        raise NoMatch(f"dim {coll.dim!r} is not an int")
    if found.target not in VLLM:
        if coll.kind == "all_gather":
            _match_gather_dim(coll)
        else:
            _match_scatter_dim(coll)
    if coll.kind == "all_gather" and coll.dim == 0:
        _match_bytes_view(coll)
    return coll


def _raise(coll: _Collective, order: dict[Operation, int]) -> Operation:
    coll.ops.sort(key=lambda o: order[o])
    assert coll.world_size is not None
    common = dict(group=coll.group, world_size=coll.world_size)
    if coll.kind == "all_reduce":
        raised: Operation = AllReduceOp(coll.x, reduce_op=coll.reduce_op, **common)
    elif coll.kind == "reduce_scatter":
        raised = ReduceScatterOp(coll.x, dim=coll.dim, reduce_op=coll.reduce_op,
                                 result_type=coll.out.type, **common)
    else:
        raised = AllGatherOp(coll.x, dim=coll.dim, result_type=coll.out.type, **common)
    if raised.results[0].type != coll.out.type:
        raise NoMatch(f"the collective returns {coll.out.type}, not {raised.results[0].type}")
    raise_chain(raised, coll.ops, [coll.out], "collective")
    return raised


SHM_ALL_REDUCE = "_C::shm_allreduce.default"


class ShmAllReducePattern(CallPattern):
    """vLLM's CPU all-reduce, `auto_functionalized(_C.shm_allreduce, handle=h, data=x)` (its CPU
    communicator's shared-memory sum, in place): `coll.all_reduce` of x over the group
    coordinator whose communicator has handle h (read from vLLM's registry in this process;
    NoMatch where none has it), the call in the region."""

    targets = (AUTO_FUNCTIONALIZED,)
    remark = "not a collective"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        first = found.op.template.data[0] if found.op.template.data else None
        if not isinstance(first, TargetAttr) or first.text.data != SHM_ALL_REDUCE:
            return NO_CANDIDATE
        handle, x = found.kwargs.get("handle"), found.kwargs.get("data")
        if not isinstance(handle, int) or not isinstance(x, SSAValue):
            raise NoMatch("vLLM's shm_allreduce without a handle and a tensor")
        group = groups.vllm_shm_group(handle)
        size = None if group is None else groups.size(group)
        if group is None or size is None:
            raise NoMatch(f"vLLM's shared-memory all-reduce handle {handle} names no group "
                          "coordinator of this process")
        results = found.op.results
        if len(results) != 2 or results[0].uses:
            raise NoMatch("vLLM's shm_allreduce call does not return (None, the sum)")
        raised = AllReduceOp(x, group=group, world_size=size)
        raise_chain(raised, [found.op], [results[1]], "collective")
        return REWROTE


class CollectivePattern(CallPattern):
    """A functional collective (with its wait) anchored at its call."""

    targets = ANCHORS
    remark = "not a collective"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        sizes = site.scratch.get(self)
        if sizes is None:  # the block's world sizes, read once, before the first raise
            assert site.module is not None
            anchors = [f for o in site.order if (f := call(o, *ANCHORS)) is not None]
            sizes = site.scratch[self] = _WorldSizes(site.module, anchors)
        _raise(_match(found, sizes), site.order)
        return REWROTE


@dataclass(frozen=True)
class RaiseCollectives(PatternPass):
    """Raise functional collectives (with their waits) to `coll` ops. Option `tp_size`: the TP
    size, recorded as the module attribute `irfuse.tp_size` (where the module has none) for
    vLLM's TP group of unknown size."""

    name = "raise-collectives"
    patterns = (CollectivePattern(), ShmAllReducePattern())

    tp_size: int | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.tp_size is not None:
            if self.tp_size < 1:
                raise ValueError(f"raise-collectives: tp_size must be >= 1, got {self.tp_size}")
            if TP_SIZE_ATTR not in op.attributes:
                op.attributes[TP_SIZE_ATTR] = IntegerAttr(self.tp_size, i64)
        super().apply(ctx, op)
