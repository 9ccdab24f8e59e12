"""cse-pure: merge identical pure ATen calls, so that a value computed twice is one value.

Model code often computes the same value in two places (casts `hidden_states` to float32 twice,
takes a scale's `reciprocal()` in every layer, repeats a `view`), and aot_autograd's inference
graph is not CSE'd (torch's `fx_graph_cse` runs only in `min_cut_rematerialization_partition`,
on joint training graphs; irfuse keeps `default_partition`). Duplicates break raising (a chain
value "used outside the quant", two paths that should be one), so this pass runs right before
the raising passes (`irfuse.pipeline.CANONICALIZE_PASSES`); a value merging leaves shared by two
chains is cloned per chain by `match.raise_chain`, so the raising passes still match.

Two `aten.call` ops merge when they have the same target, operands, argument and keyword
templates and result types (floats bit for bit: `0.0` and `-0.0` differ) and the target is pure
(`irfuse.raising.purity`; a gather by integer indices too, which the `dynamic_output_shape`
tag of `aten::index.Tensor` would exclude), within one mutation region (`cse_block`). Only
top-level ops of each function are touched (a raised op's decomposition keeps the code it
replaced). Remarks: `fused` per merged op; `missed` for an identical op that did not merge, with
why. `dce-pure`, by the same rule, erases the pure calls nothing reads once the fusions ran.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irfuse import remarks
from irfuse.dialects import aten
from irfuse.dialects.irfuse import TensorType
from irfuse.ir import call_args
from irfuse.ir.shapes import is_integer
from irfuse.raising.aten_ops import INDEX_TENSOR
from irfuse.raising.match import block_ops, func_blocks
from irfuse.raising.purity import (
    OTHER,
    PURE,
    WRITES,
    TargetInfo,
    target_info,
)


def _operand_refs(value: Attribute, out: list[int]) -> None:
    if isinstance(value, call_args.OperandRefAttr):
        out.append(value.index.data)
    elif isinstance(value, ArrayAttr):
        for item in value.data:
            _operand_refs(item, out)
    elif isinstance(value, call_args.TupleAttr):
        _operand_refs(value.items, out)
    elif isinstance(value, DictionaryAttr):
        for item in value.data.values():
            _operand_refs(item, out)


def _written(op: aten.CallOp, info: TargetInfo) -> Iterable[SSAValue]:
    """The operands a writing call may write: those its schema marks written, or all."""
    if info.schema is None:
        return op.operands
    template = op.template.data
    keywords = op.keywords
    refs: list[int] = []
    for position, argument in enumerate(info.schema.arguments):
        alias = argument.alias_info
        if alias is None or not alias.is_write:
            continue
        if position < len(template):
            _operand_refs(template[position], refs)
        elif argument.name in keywords:
            _operand_refs(keywords[argument.name], refs)
    return [op.operands[i] for i in refs]


def _view_source(value: SSAValue) -> SSAValue | None:
    """The value a view aliases (its argument 0), or None when `value` is not a view's."""
    owner = value.owner
    if not isinstance(owner, aten.CallOp):
        return None
    info = target_info(owner.target.data)
    if info.kind != PURE or not info.aliases_self:
        return None
    first = owner.template.data[0] if owner.template.data else None
    if not isinstance(first, call_args.OperandRefAttr):
        return None
    return owner.operands[first.index.data]


def written_values(block: Block) -> tuple[set[SSAValue], dict[Operation, TargetInfo]]:
    """The values some op of the block writes (directly or through views of them), and the
    target of every call of the block."""
    written: set[SSAValue] = set()
    infos: dict[Operation, TargetInfo] = {}
    for op in block.ops:
        if type(op) is not aten.CallOp:
            continue
        info = infos[op] = target_info(op.target.data)
        if info.kind != WRITES:
            continue
        for value in _written(op, info):
            while value is not None and value not in written:
                written.add(value)
                value = _view_source(value)
    return written, infos


def _returned(op: Operation) -> bool:
    return any(isinstance(use.operation, ReturnOp) for r in op.results for use in r.uses)


def _same_arguments(a: aten.CallOp, b: aten.CallOp) -> bool:
    """Whether two calls with the same target and operands also have the same arguments and
    result types (attribute equality: floats compare bit for bit)."""
    return (
        a.template == b.template
        and a.kw_template == b.kw_template
        and (a.tuple_result is None) == (b.tuple_result is None)
        and a.result_keys == b.result_keys
        and a.result_types == b.result_types
    )


@dataclass
class _Seen:
    """The call later duplicates meet: its mutation region, and why it cannot be merged into
    ("" when it can)."""

    region: int
    op: aten.CallOp
    why: str


def cse_block(block: Block) -> int:
    """Merge the identical pure calls of one block; the number of calls merged.

    The first call (in program order) survives and the later one's uses read it, so the
    survivor dominates every use and no op moves. Merging stops at a mutation: every op that
    writes a value (`copy_`, in-place custom ops, unknown higher-order ops) starts a new mutation
    region and only calls of one region merge (a read before a `copy_` and the same read after
    it stay two); a call whose result (or a view of it) is written by such an op never merges; a
    call whose result the graph returns keeps its own result (outputs that were separate tensors
    stay separate). One walk to find the written values, one walk with one hash map to merge:
    linear in the block."""
    written, infos = written_values(block)
    # (target, operands) -> the calls seen with them (hashing the argument templates would cost
    # more than comparing the few calls that share a target and operands).
    known: dict[tuple[str, tuple[SSAValue, ...]], list[_Seen]] = {}
    region = 0
    merged = 0
    for op in block_ops(block):
        info = infos.get(op)
        if info is None:
            continue
        if info.kind == WRITES:
            region += 1
            continue
        if info.kind == OTHER:
            continue
        own = "" if _gathers_by_integers(op) else info.reason
        if not own and written and any(r in written for r in op.results):
            own = "result is written in place"
        seen = known.setdefault((op.target.data, tuple(op.operands)), [])
        first = next((s for s in seen if _same_arguments(s.op, op)), None)
        if first is None:
            seen.append(_Seen(region, op, own))
            continue
        why = first.why or own
        if not why and first.region != region:
            why = "an in-place write between the two may change their inputs"
        if not why and _returned(op):
            why = "the graph returns the duplicate"
        if not why:
            for mine, theirs in zip(op.results, first.op.results, strict=True):
                mine.replace_all_uses_with(theirs)
            Rewriter.erase_op(op)
            remarks.fused()
            merged += 1
            continue
        remarks.missed(op, f"not merged: {why}")
        if first.why or first.region != region:
            # The duplicate is the one later calls meet.
            first.region, first.op, first.why = region, op, own
    return merged


def _gathers_by_integers(op: aten.CallOp) -> bool:
    """`aten::index.Tensor` with integer indices (a gather: `cache[positions]`): its result's
    shape is its indices', not data-dependent as the op's tag says for boolean masks."""
    return op.target.data == INDEX_TENSOR and len(op.operands) > 1 and all(
        isinstance(v.type, TensorType) and is_integer(v.type.dtype)
        for v in op.operands[1:])


@dataclass(frozen=True)
class CsePure(ModulePass):
    """Merge identical pure `aten.call` ops (top level of each function). No options."""

    name = "cse-pure"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for block in func_blocks(op):
            cse_block(block)


@dataclass(frozen=True)
class DcePure(ModulePass):
    """Erase the pure `aten.call` ops nothing reads (top level of each function), by the rule
    cse-pure merges by: what may write, draws random numbers or has undefined contents stays.
    Run after the fusions, it drops what a fused kernel no longer reads (the tables it now reads
    by position itself), so that it never runs, with Inductor or without. No options."""

    name = "dce-pure"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for block in func_blocks(op):
            for call in reversed(block_ops(block)):  # last first: a chain that fed it goes too
                if type(call) is not aten.CallOp or any(
                        r.first_use is not None for r in call.results):
                    continue
                if target_info(call.target.data).kind == PURE or _gathers_by_integers(call):
                    Rewriter.erase_op(call)
                    remarks.fused()
