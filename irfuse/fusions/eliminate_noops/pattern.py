"""eliminate-noops: remove reshapes, slices and slice_scatters that do not change their input.

vLLM's `NoOpEliminationPass`, on the IR: reshapes to the input's own type, slices that keep the
whole dim, slice_scatters whose source covers the input, a `cat` of one tensor with empty ones,
and a `detach` or a `view.dtype` to the tensor's own dtype (`_replacement` says each); a chain of
reshapes collapses to one. Their users read the input (or the source) directly, so fusions see
through them; the graph computes the same values (the functional graph has no aliasing to
preserve, except in what it returns: a returned view is left alone).

Only top-level `aten.call` ops are touched (a raised op's decomposition keeps the code it
replaced). A returned slice_scatter goes too (vLLM's noop test asserts it), replaced by its
source, or by a copy of it where the source may alias a graph input or another output (the
caller gets a tensor of its own either way).
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects import aten
from irfuse.dialects.irfuse import SymType
from irfuse.ir import call_args
from irfuse.raising.aten_ops import (
    CAT,
    CLONE,
    RESHAPE,
    RESHAPES,
    RESHAPES_AND_ALIAS,
    SAME_VALUE,
    SLICE_SCATTER,
    SLICE_TENSOR,
)
from irfuse.raising.aten_ops import VIEW_OPS as VIEWS_ONLY
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, CallPattern, Outcome, Site
from irfuse.raising.match import INT64_MAX, Call, call, is_pure, tensor_type
from irfuse.raising.purity import target_info


def _covers(dim_size: Any, start: Any, end: Any, step: Any) -> bool:
    """Whether slice(start, end, step) keeps all of a dim of `dim_size`: an end of at least a
    static size, or the symbol the size is (`b[0:b.shape[0]]` under dynamic shapes)."""
    if start not in (0, None) or step not in (1, None):
        return False
    if end is None or end == INT64_MAX:
        return True
    if isinstance(end, SSAValue):
        return isinstance(end.type, SymType) and end.type.expr.data == str(dim_size)
    return isinstance(end, int) and isinstance(dim_size, int) and end >= dim_size


def _slice_dims(found: Call) -> tuple[Any, Any, Any, Any]:
    return (
        found.arg(1, "dim", 0),
        found.arg(2, "start", None),
        found.arg(3, "end", None),
        found.arg(4, "step", 1),
    )


def _replacement(found: Call) -> SSAValue | None:
    """The value a no-op call can be replaced by, or None when it changes its input.

    No-ops: a reshape (`view`, `_unsafe_view`, `reshape`, `alias`) whose result type is its
    input's; a `slice` that keeps the whole dim (start 0, end at least the dim's size or the
    size's own symbol, step 1); a `slice_scatter` whose source covers the whole input (the result
    is the source); a `cat` of one tensor with empty ones (vLLM's rotary concatenates the rotated
    part with an empty pass-through part when it rotates the whole head); a `detach` and a
    `view.dtype` to the tensor's own dtype (vLLM's vocab-parallel embedding ends with one after
    its all-reduce; Inductor's post-grad passes drop both before vLLM's passes see the graph).
    Sizes are compared as the IR writes them: equal ints, or the same symbol; a slice end of
    INT64_MAX covers any size. Not no-ops: a slice with a negative or otherwise unproven end,
    steps other than 1, reshapes that change the shape."""
    if found.target == CAT:
        return _cat_of_one(found)
    source = found.arg(0)
    source_type, result_type = tensor_type(source), tensor_type(found.result)
    if source_type is None or result_type is None:
        return None
    if found.target in RESHAPES_AND_ALIAS or found.target in SAME_VALUE:
        return source if source_type == result_type else None
    if found.target == SLICE_TENSOR:
        dim, start, end, step = _slice_dims(found)
        rank = source_type.rank
        if not isinstance(dim, int) or not -rank <= dim < rank:
            return None
        size = source_type.dims[dim]
        return source if source_type == result_type and _covers(size, start, end, step) else None
    # slice_scatter(input, src, dim, start, end, step): the result is src when src covers input.
    src = found.arg(1, "src")
    dim = found.arg(2, "dim", 0)
    start, end, step = found.arg(3, "start", None), found.arg(4, "end", None), found.arg(5, "step", 1)
    src_type = tensor_type(src)
    if src_type != result_type or not isinstance(dim, int):
        return None
    size = source_type.dims[dim]
    return src if _covers(size, start, end, step) else None


def _cat_of_one(found: Call) -> SSAValue | None:
    """The one tensor a `cat` joins to empty ones (0 along the cat dim), when it has the result's
    type."""
    tensors, dim = found.arg(0), found.arg(1, "dim", 0)
    result_type = tensor_type(found.result)
    if not isinstance(tensors, list | tuple) or not isinstance(dim, int) or result_type is None:
        return None
    kept = [t for t in tensors if not _empty_along(t, dim)]
    if len(kept) != 1 or tensor_type(kept[0]) != result_type:
        return None
    return kept[0]


def _empty_along(value: Any, dim: int) -> bool:
    t = tensor_type(value)
    return t is not None and -t.rank <= dim < t.rank and t.dims[dim] == 0


def _erase_dead(values: list[SSAValue], rewriter: PatternRewriter) -> None:
    """Erase the pure calls that made `values` and are read no more (the empty parts of a
    collapsed cat)."""
    for value in values:
        owner = value.owner
        if isinstance(owner, Operation) and is_pure(owner) and owner.parent is not None \
                and not any(r.uses for r in owner.results):
            rewriter.erase(owner)


def _returned(value: SSAValue) -> bool:
    """Whether the function returns `value`: aot_autograd's runtime wrapper knows how each
    output aliases the inputs, so an output that is a view stays a view."""
    return any(isinstance(use.operation, ReturnOp) for use in value.uses)


def _may_alias(value: SSAValue) -> bool:
    """Whether `value` may share storage with a graph input or another output: a function
    argument, a view's result, or a value the function already returns."""
    if _returned(value) or not isinstance(value.owner, Operation):
        return True
    found = call(value.owner)
    if found is None:
        return True
    info = target_info(found.target)
    return info.aliases_self or not is_pure(value.owner)


def _copy(value: SSAValue, before: Operation, rewriter: PatternRewriter) -> SSAValue:
    """`aten.clone(value)`, inserted before `before`."""
    clone = aten.CallOp(CLONE, [value], [call_args.OperandRefAttr(IntAttr(0))], [value.type])
    clone.location = before.location
    rewriter.insert(clone, InsertPoint.before(before))
    return clone.results[0]


def _collapse(found: Call, rewriter: PatternRewriter) -> bool:
    """A reshape of a reshape reads the first one's input (one reshape for the chain); the
    merged op is a view only when both were views. The first one goes when nothing else reads
    it."""
    if found.target not in RESHAPES:
        return False
    inner = call(found.arg(0).owner, *RESHAPES)
    if inner is None:
        return False
    source = inner.arg(0)
    if not isinstance(source, SSAValue):
        return False
    views = found.target in VIEWS_ONLY and inner.target in VIEWS_ONLY
    target = found.target if views else RESHAPE
    if target != found.target:
        found.op.properties["target"] = StringAttr(target)
    found.op.operands = [source, *found.op.operands[1:]]
    rewriter.notify_op_modified(found.op)
    if not inner.result.uses:
        rewriter.erase(inner.op)
    return True


class NoopPattern(CallPattern):
    """A reshape, slice or slice_scatter that returns its input (or its source)."""

    targets = (*RESHAPES_AND_ALIAS, *SAME_VALUE, SLICE_TENSOR, SLICE_SCATTER, CAT)

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        collapsed = _collapse(found, rewriter)
        if collapsed:
            found = call(found.op)  # type: ignore[assignment]
        replacement = _replacement(found)
        if replacement is None:
            return REWROTE if collapsed else NO_CANDIDATE
        if _returned(found.result):
            if found.target != SLICE_SCATTER:
                return REWROTE if collapsed else NO_CANDIDATE
            # A returned slice_scatter is a fresh tensor: its source may take its place where
            # that is fresh too and returned only here; a source that aliases something (a
            # graph input or a view of one, another output) is copied instead (vLLM's noop
            # test wants the scatter gone; the caller must still get a tensor of its own).
            if _may_alias(replacement):
                replacement = _copy(replacement, found.op, rewriter)
        rewriter.replace_all_uses_with(found.result, replacement)
        inputs = list(found.op.operands)
        rewriter.erase(found.op)
        _erase_dead(inputs, rewriter)
        return REWROTE

