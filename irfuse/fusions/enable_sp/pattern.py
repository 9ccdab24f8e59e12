"""enable-sp: sequence parallelism around the norms of a tensor-parallel model.

Anchored at each `coll.all_reduce` of `[tokens, hidden]` (or Hugging Face's `[B, S, hidden]`,
split as its B*S rows) whose result feeds a raised RMSNorm (`norm.rms_norm`, or
`norm.add_rms_norm` as either addend: Hugging Face writes `residual + hidden`). The all-reduce
becomes a reduce-scatter along the tokens, the norm (with its residual add) runs on this rank's
rows, and an all-gather brings the rows back: the norm's output is gathered, or, when its only
user is a static FP8 quant, the quant runs on the shard too and the FP8 values are gathered (a
quarter of the bytes of f32, half of bf16's); the norm + quant fusion, after this pass, fuses
the local norm and quant. The residual stream between the norms stays a shard, as vLLM's pass
leaves it, and a token count TP does not divide is padded and sliced back, so one graph serves
every num_tokens of a dynamic range (`SequenceParallelPattern`). The new collectives are spelled
as the all-reduce was (`sharding.spelling_of`): vLLM's own on its group coordinator for vLLM's
all-reduce, torch's functional collectives otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects import aten
from irfuse.dialects.coll import AllGatherOp, AllReduceOp
from irfuse.dialects.irfuse import Dim, TensorType
from irfuse.dialects.norm import AddRmsNormOp, RmsNormOp
from irfuse.dialects.quant import QuantFp8Op
from irfuse.fusions.sharding import (
    all_gather,
    divides,
    flatten_rows,
    on_shard,
    pad_rows,
    padded_dim,
    rank_in,
    reduce_scatter,
    row_count,
    row_count_value,
    rows_of_rank,
    shard_dim,
    slice_rows,
    sliced_from,
    spelling_of,
    unflatten_rows,
)
from irfuse.ir.shapes import normalize_dim
from irfuse.raising.aten_ops import RESHAPE, RESHAPE_AS
from irfuse.raising.driver import REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, discard, users


@dataclass
class _Gathers:
    """The all-gathers this pass inserted for other users of a shard, each with the reshape back
    to the model's `[B, S, H]` where it has one (dropped if unread)."""

    chains: list[list[Operation]] = field(default_factory=list)

    def add(self, chain: list[Operation]) -> SSAValue:
        self.chains.append(chain)
        return chain[-1].results[0]


def shard_of(value: SSAValue, group: str, world_size: int, rows: Dim) -> SSAValue | None:
    """The shard of `rows` rows that a dim-0 all-gather over the same group gathered into
    `value` (then sliced back to the token count where it was padded, then reshaped back to
    `[B, S, H]` or not), if it is one."""
    owner = value.owner
    full = value
    if isinstance(owner, aten.CallOp) and owner.target.data in (RESHAPE, RESHAPE_AS):
        full = owner.operands[0]
        vt, ft = value.type, full.type
        assert isinstance(vt, TensorType) and isinstance(ft, TensorType)
        if ft.rank != 2 or ft.dims[0] != row_count(vt.dims[:-1]):
            return None
    gathered = sliced_from(full)
    gather = (gathered if gathered is not None else full).owner
    if not isinstance(gather, AllGatherOp):
        return None
    x = gather.x.type
    assert isinstance(x, TensorType)
    if (gather.group.data != group or gather.world_size.value.data != world_size
            or normalize_dim(gather.dim.value.data, x.rank, "dim") != 0
            or x.dims[0] != rows):
        return None
    return gather.x


class SequenceParallelPattern(AnchorPattern):
    """An all-reduce feeding an RMSNorm -> reduce-scatter, the norm on the shard, all-gather.

    What each rank holds: the residual stream between the norms is a shard. A norm's new
    residual and the all-reduced value itself (vLLM's first norm, whose residual is the
    all-reduce output) are given to every other user as the all-gather of the shard, so every
    consumer sees the full tensor it saw before; a later norm of the chain whose residual is such
    a gather reads the shard itself, and the gathers nobody reads are dropped at the end of the
    block. A residual that comes from elsewhere (the embedding of a model whose embedding is
    replicated) is taken to be replicated, as the residual stream of tensor parallelism is, and
    this rank's rows are sliced from it (`unflatten(0, [tp, -1]).select(0, rank)`, the rank from
    `sharding.rank_in`). So a model of N layers ends with the final norm's output gathered and
    the residual shards passed from norm to norm, as vLLM's pass leaves it.

    Token counts (B*S for `[B, S, H]`: `reshape(-1, H)` before the reduce-scatter, each gather
    reshaped back): where TP does not provably divide the count (a static 15 at TP 2, or a
    symbolic `s0`; `2*s0` is divided), the rows are padded with zeros to the next multiple of TP
    before each reduce-scatter (and before a replicated residual is sliced), and every gather is
    sliced back to the count (`sharding.pad_rows` / `slice_rows`): one graph serves every
    num_tokens of a dynamic range, as vLLM's full-graph SP does on the tokens its runner pads.
    The residual shards passed from norm to norm stay padded.
    """

    op_types = (AllReduceOp,)
    remark = "not sequence-parallel"

    def start(self, site: Site) -> None:
        site.scratch[self] = _Gathers()

    def finish(self, site: Site) -> None:
        for chain in site.scratch.pop(self).chains:
            for op in reversed(chain):
                if op.parent is not None and not any(r.uses for r in op.results):
                    discard(op)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, AllReduceOp)
        return _rewrite(op, rewriter, site, site.scratch[self])


def _norm_of(ar: AllReduceOp) -> RmsNormOp | AddRmsNormOp:
    """The one norm reading the all-reduced value as its x or, where none does, as the residual
    operand of its add (Hugging Face's `residual + hidden`, which raising reads as x = residual).
    A norm that takes the all-reduced value as its residual beside one that normalizes it is
    vLLM's first layer: the value is the later norm's residual, not its addend to scatter."""
    norms = [u for u in users(ar.y) if isinstance(u, RmsNormOp | AddRmsNormOp)
             and u.x is ar.y]
    if not norms:
        norms = [u for u in users(ar.y) if isinstance(u, AddRmsNormOp) and u.residual is ar.y]
    if not norms:
        raise NoMatch("the all-reduce does not feed an RMSNorm")
    if len(norms) > 1:
        raise NoMatch("the all-reduce feeds several RMSNorms")
    norm = norms[0]
    if isinstance(norm, AddRmsNormOp) and norm.residual is norm.x:
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


@dataclass
class _Split:
    """How this all-reduce's rows are split: `tokens` rows (the count's dim), padded to
    `full` (= tokens where the world size divides them), `rows` a shard; `n` the count as a call
    argument (an int, or the `sym_size` value read before the reduce-scatter)."""

    group: str
    ws: int
    spelling: str
    tokens: Dim
    full: Dim
    rows: Dim
    n: int | SSAValue | None = None

    @property
    def padded(self) -> bool:
        return self.full != self.tokens


def _gather(shard: SSAValue, like: SSAValue, split: _Split) -> list[Operation]:
    """The all-gather of a shard into the token rows (sliced back where they were padded),
    reshaped to `like`'s `[B, S, H]` if 3-D."""
    chain: list[Operation] = [all_gather(shard, split.full, group=split.group,
                                         world_size=split.ws, spelling=split.spelling)]
    if split.padded:
        assert split.n is not None
        chain.append(slice_rows(chain[-1].results[0], split.n, split.tokens))
    lt = like.type
    assert isinstance(lt, TensorType)
    if lt.rank != 2:
        chain.append(unflatten_rows(chain[-1].results[0], like))
    return chain


def _rewrite(ar: AllReduceOp, rewriter: PatternRewriter, site: Site, gathers: _Gathers) -> Outcome:
    x = ar.x.type
    assert isinstance(x, TensorType)
    if x.rank < 2:
        raise NoMatch(f"the all-reduced tensor has rank {x.rank}, not [tokens, hidden]")
    ws = ar.world_size.value.data
    group = ar.group.data
    lead = tuple(x.dims[:-1])
    tokens = row_count(lead)
    if ws == 1:
        raise NoMatch("the group has one rank")
    if not isinstance(x.dims[-1], int):
        raise NoMatch(f"the hidden size {x.dims[-1]} is symbolic")
    norm = _norm_of(ar)
    full = tokens if divides(tokens, ws) else padded_dim(tokens, ws)
    split = _Split(group, ws, spelling_of(ar), tokens, full, shard_dim(full, ws))
    rows = split.rows
    x_first = norm.x is ar.y
    residual = None
    if isinstance(norm, AddRmsNormOp):
        residual = norm.residual if x_first else norm.x
    residual_shard = None
    rank = None
    if residual is not None:
        residual_shard = shard_of(residual, group, ws, rows)
        if residual_shard is None:
            rank = rank_in(group, site.module)  # may refuse: before anything is built
    quant = _static_quant(norm.y)

    # Everything that can refuse is built before the IR changes.
    scatter: list[Operation] = []  # before the all-reduce
    if x.rank > 2:  # [B, S, H]: the collectives split the B*S rows of [B*S, H]
        scatter.append(flatten_rows(ar.x))
    flat_x = scatter[-1].results[0] if scatter else ar.x
    if split.padded:  # rows of zeros up to a multiple of TP, sliced off after each gather
        counted, split.n = row_count_value(flat_x)
        scatter += counted
        scatter += pad_rows(flat_x, split.n, ws)
    to_scatter = scatter[-1].results[0] if scatter else ar.x
    scattered = reduce_scatter(to_scatter, group=group, world_size=ws,
                               reduce_op=ar.reduce_op.data, spelling=split.spelling)
    scatter.append(scattered)
    slices: list[Operation] = []  # this rank's rows of a replicated residual, before the norm
    if residual is not None and residual_shard is None:
        assert rank is not None
        flat = residual
        if x.rank > 2:
            slices.append(flatten_rows(residual))
            flat = slices[-1].results[0]
        if split.padded:
            assert split.n is not None
            slices += pad_rows(flat, split.n, ws)
            flat = slices[-1].results[0]
        slices += rows_of_rank(flat, rank, ws)
        residual_shard = slices[-1].results[0]
    built = [*scatter, *slices]
    addends = [scattered.y] if residual_shard is None else \
        [scattered.y, residual_shard] if x_first else [residual_shard, scattered.y]
    operands = addends + ([norm.weight] if norm.weight is not None else [])
    try:
        local = on_shard(norm, operands, lead, rows)
        built.append(local)
        local_quant = None
        if quant is not None:
            rest = [v for i, v in enumerate(quant.operands) if i > 0]
            local_quant = on_shard(quant, [local.results[0], *rest], lead, rows)
    except NoMatch:
        discard(*reversed(built))
        raise

    rewriter.insert(scatter, InsertPoint.before(ar))
    others = [u for u in ar.y.uses if u.operation is not norm]
    if others:  # the all-reduced value read elsewhere too: its full tensor is the gather
        chain = _gather(scattered.y, ar.x, split)
        rewriter.insert(chain, InsertPoint.before(ar))
        rewriter.replace_all_uses_with(ar.y, gathers.add(chain))
    rewriter.insert([*slices, local], InsertPoint.before(norm))
    if isinstance(norm, AddRmsNormOp) and norm.residual_out.uses:
        chain = _gather(local.results[1], ar.x, split)
        rewriter.insert(chain, InsertPoint.before(norm))
        rewriter.replace_all_uses_with(norm.residual_out, gathers.add(chain))
    if quant is not None and local_quant is not None:
        chain = _gather(local_quant.results[0], ar.x, split)
        rewriter.insert([local_quant, *chain], InsertPoint.before(quant))
        rewriter.replace_all_uses_with(quant.results[0], chain[-1].results[0])
        rewriter.erase(quant)
    else:
        chain = _gather(local.results[0], ar.x, split)
        rewriter.insert(chain, InsertPoint.before(norm))
        rewriter.replace_all_uses_with(norm.y, chain[-1].results[0])
    rewriter.erase(norm)
    rewriter.erase(ar)
    return REWROTE
