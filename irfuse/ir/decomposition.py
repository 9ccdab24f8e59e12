"""The `decomposition` region of a raised op, and the helpers that fill and empty it.

Raising replaces a chain of imported ATen ops by one semantic op and keeps the chain inside the
op, in an optional single-block region named `decomposition`: its block arguments stand for the
op's operands (in order, same types), and it ends with the op's terminator (`HasDecomposition`
names it) yielding the values the op returns. Emitting an unfused semantic op inlines that
region, so raising never changes a result bit. The region may use values defined above the op
(a symbolic size, a constant the chain used), so it is not `IsolatedFromAbove`. Passes that match
ATen ops skip ops for which `in_decomposition(op)` holds. `outline` moves a chain into an op's
region (raising), `inline_decomposition` puts it back (emit), `decomposition_block` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import OpTrait
from xdsl.utils.exceptions import VerifyException


@dataclass(frozen=True)
class HasDecomposition(OpTrait):
    """Verifies the optional `decomposition` region of a raised op, ended by `terminator`."""

    terminator: type[Operation]

    def verify(self, op: Operation) -> None:
        region = op.decomposition
        if region is None:
            return
        block = region.first_block
        if block is None or block.next_block is not None:
            raise VerifyException("decomposition region must have exactly one block")
        arg_types, operand_types = block.arg_types, op.operand_types
        if tuple(arg_types) != tuple(operand_types):
            raise VerifyException(
                f"decomposition block arguments ({_types(arg_types)}) must match "
                f"the operands ({_types(operand_types)})"
            )
        last = block.last_op
        if not isinstance(last, self.terminator):
            raise VerifyException(f"decomposition region must end with {self.terminator.name}")
        yielded = last.operand_types
        if tuple(yielded) != tuple(op.result_types):
            raise VerifyException(
                f"decomposition yields ({_types(yielded)}) but the op returns "
                f"({_types(op.result_types)})"
            )


def _types(types: Sequence[Attribute]) -> str:
    return ", ".join(str(t) for t in types)


def decomposition_block(op: Operation) -> Block | None:
    """The body of a raised op's decomposition region, or None when it has none."""
    region = getattr(op, "decomposition", None)
    return None if region is None else region.first_block


def in_decomposition(op: Operation) -> bool:
    """Whether `op` sits inside a raised op's decomposition region (passes leave those alone)."""
    parent = op.parent_op()
    return parent is not None and parent.has_trait(HasDecomposition)


def outline(
    op: Operation,
    ops: Sequence[Operation],
    outputs: Sequence[SSAValue],
    inputs: Mapping[SSAValue, int] | None = None,
    rewriter: PatternRewriter | None = None,
    prelude: Sequence[Operation] = (),
    sink_early_users: bool = False,
) -> Region:
    """Move a chain of ops into `op`'s new decomposition region, and let `op` replace the chain.

    - `ops`: the chain, in program order, all in one block; every result they define is either
      one of `outputs` or used only inside the chain.
    - `outputs`: the chain values that `op`'s results stand for (`op.results[i]` replaces
      `outputs[i]` everywhere outside the chain); the region yields them.
    - `inputs`: which block argument each external input of the chain becomes (a value to an
      operand index); by default operand `i` of `op` becomes block argument `i`. External values
      not named here stay as uses of values defined above the op.
    - `op` (built with its operands and result types, no region) is inserted, unless it is
      already in a block, right after the last op of the chain; or, when an outside user of an
      output sits between the chain's ops (a second view of a value, say), right before the first
      such user, if every outside value the chain reads is defined before it.
    - `prelude`: new ops `op` reads (a reciprocal of a scale, say), inserted just before it.
    - `sink_early_users`: the caller moves outside users that sit between the chain's ops to after
      `op` itself (raise-rope does, for q's users between the q and k rotations); `op` then goes
      after the chain's last op.

    Returns the region. Raises ValueError when the chain cannot be outlined as asked.
    """
    if not ops:
        raise ValueError("outline needs at least one op")
    trait = op.get_trait(HasDecomposition)
    if trait is None:
        raise ValueError(f"{op.name} takes no decomposition region")
    if getattr(op, "decomposition", None) is not None:
        raise ValueError(f"{op.name} already has a decomposition region")
    if len(outputs) != len(op.results):
        raise ValueError(
            f"{op.name} has {len(op.results)} results but {len(outputs)} outputs given"
        )
    parent = ops[0].parent_block()
    if parent is None:
        raise ValueError("the ops to outline must be in a block")
    moved = set(ops)
    for o in ops:
        if o.parent_block() is not parent:
            raise ValueError(f"the ops to outline must share one block ({o.name} does not)")
    outside = set(outputs)
    for v in outputs:
        if not isinstance(v, OpResult) or v.op not in moved:
            raise ValueError(f"output {v} is not defined by the ops being outlined")
    for o in ops:
        for r in o.results:
            if r in outside:
                continue
            for use in r.uses:
                if use.operation not in moved:
                    raise ValueError(
                        f"result #{r.index} of {o.name} is used outside the outlined ops (by "
                        f"{use.operation.name}); list it in outputs"
                    )

    if op.parent is None:
        point = (
            InsertPoint.after(ops[-1])
            if sink_early_users
            else _insertion_point(ops, outputs, moved, parent)
        )
        for new in (*prelude, op):
            if rewriter is not None:
                rewriter.insert(new, point)
            else:
                Rewriter.insert_op(new, point)
            point = InsertPoint.after(new)

    def outside_chain(use) -> bool:
        return use.operation not in moved

    for v, r in zip(outputs, op.results, strict=True):
        if rewriter is not None:
            rewriter.replace_uses_with_if(v, r, outside_chain)
        else:
            v.replace_uses_with_if(r, outside_chain)

    body = Block(arg_types=op.operand_types)
    args = body.args
    if inputs is None:
        mapping: dict[SSAValue, SSAValue] = {}
        for i, v in enumerate(op.operands):
            mapping.setdefault(v, args[i])
    else:
        mapping = {v: args[i] for v, i in inputs.items()}
    for o in ops:
        parent.detach_op(o)
        operands = o.operands
        for j, v in enumerate(operands):
            new = mapping.get(v)
            if new is not None:
                operands[j] = new
        body.add_op(o)
    body.add_op(trait.terminator.create(operands=outputs))
    region = Region(body)
    op.add_region(region)
    return region


def _insertion_point(
    ops: Sequence[Operation], outputs: Sequence[SSAValue], moved: set[Operation], block: Block
) -> InsertPoint:
    """Where the raised op dominates every outside use of the chain's outputs (see `outline`).
    Only the ops between the chain's first and last op are looked at, so this costs the chain's
    span, not the block's length."""
    span: dict[Operation, int] = {}
    op: Operation | None = ops[0]
    while op is not None:
        span[op] = len(span)
        if op is ops[-1]:
            break
        op = op.next_op
    first_user: Operation | None = None
    for value in outputs:
        for use in value.uses:
            user = block.find_ancestor_op_in_block(use.operation)
            if user is None or user in moved or user not in span:
                continue
            if first_user is None or span[user] < span[first_user]:
                first_user = user
    if first_user is None:
        return InsertPoint.after(ops[-1])
    for chain_op in ops:
        for operand in chain_op.operands:
            owner = operand.owner
            if not isinstance(owner, Operation) or owner in moved:
                continue
            defining = block.find_ancestor_op_in_block(owner)
            if defining is not None and span.get(defining, -1) >= span[first_user]:
                raise ValueError(
                    f"{first_user.name} uses a result of the chain between its ops, before "
                    f"{defining.name}, which the chain reads, is defined"
                )
    return InsertPoint.before(first_user)


def inline_decomposition(op: Operation, rewriter: PatternRewriter | None = None) -> list[Operation]:
    """Replace a raised op by the ops of its decomposition region; returns those ops in order."""
    block = decomposition_block(op)
    if block is None:
        raise ValueError(f"{op.name} has no decomposition region to inline")
    terminator = block.last_op
    assert terminator is not None
    yielded = tuple(terminator.operands)
    block.erase_op(terminator)
    inlined = list(block.ops)
    if rewriter is not None:
        rewriter.inline_block(block, InsertPoint.before(op), op.operands)
        rewriter.replace(op, [], list(yielded))
    else:
        Rewriter.inline_block(block, InsertPoint.before(op), tuple(op.operands))
        for r, v in zip(op.results, yielded, strict=True):
            r.replace_all_uses_with(v)
        Rewriter.erase_op(op)
    return inlined
