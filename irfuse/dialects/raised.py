"""What every semantic op (norm, quant, gemm, attn, act, coll) and fused op shares.

**The decomposition region.** Raising replaces a chain of imported ATen ops by one semantic op and
keeps the chain inside the op, in an optional single-block region named `decomposition`: its block
arguments stand for the op's operands (in order, same types), and it ends with `irfuse.yield` of
the values the op returns (same types as the op's results). Emitting an unfused semantic op inlines
that region, so raising never changes a result bit. Ops written by hand may omit the region.

Ops inside the region may also use values defined above the op (a symbolic size, a constant the
chain used): those dominate the op, because `outline` places it after the last op of the chain, so
the region is not `IsolatedFromAbove`. Passes that match ATen ops should skip ops for which
`in_decomposition(op)` holds.

- `RaisedOperation` is the base class of semantic ops: the region field and the trait
  `HasDecomposition` that verifies it.
- `outline(op, ops, outputs=...)` moves a chain into a new op's region (raising passes call it);
  `inline_decomposition(op)` puts it back (emit, or tests); `decomposition_block(op)` reads it.

**The op syntax.** Semantic and fused ops have several optional operands and results, which a
declarative format would need one format string per op for. `NamedOperandSyntax` gives them all
one readable custom form, derived from the op definition:

```mlir
%y, %r = norm.add_rms_norm %x, %res, weight %w {eps = 1.0e-06 : f64}
    : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>,
       !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>,
       !irfuse.tensor<[s0, 4096], bf16>)
%q, %s = quant.fp8 %x {scheme = #quant.scheme<dynamic_token>}
    : (!irfuse.tensor<[s0, 4096], bf16>)
    -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
```

Required operands are positional, in definition order; an optional operand is written
`name %v`, a variadic one `name [%a, %b]` (left out when absent or empty). Properties and
attributes share the `{...}` dictionary (a property equal to its default is not printed). Operand
types follow in parentheses, in the order the operands were written; result types likewise, with
the same labels on optional and variadic results. A raised op with its region ends with
`decomposition { ^bb0(...): ... irfuse.yield ... }`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, f64, i64
from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    AttrSizedResultSegments,
    IRDLOperation,
    OptionalDef,
    VariadicDef,
    opt_region_def,
    traits_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.printer import Printer
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import OpTrait
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects.irfuse import YieldOp

# --- the op syntax ------------------------------------------------------------------------------

_SINGLE, _OPTIONAL, _VARIADIC = 0, 1, 2
_SEGMENT_NAMES = frozenset(
    {AttrSizedOperandSegments.attribute_name, AttrSizedResultSegments.attribute_name}
)


@dataclass(frozen=True)
class _SyntaxPlan:
    """What the printer and parser need from an op definition, computed once per op class."""

    operands: tuple[tuple[str, int], ...]
    results: tuple[tuple[str, int], ...]
    operand_labels: tuple[str, ...]
    result_labels: tuple[str, ...]
    properties: tuple[str, ...]
    defaults: tuple[tuple[str, Attribute], ...]
    has_region: bool


def _kind(definition: object) -> int:
    if isinstance(definition, OptionalDef):
        return _OPTIONAL
    if isinstance(definition, VariadicDef):
        return _VARIADIC
    return _SINGLE


@cache
def _plan(cls: type[IRDLOperation]) -> _SyntaxPlan:
    op_def = cls.get_irdl_definition()
    operands = tuple((name, _kind(d)) for name, d in op_def.operands)
    results = tuple((name, _kind(d)) for name, d in op_def.results)
    return _SyntaxPlan(
        operands=operands,
        results=results,
        operand_labels=tuple(name for name, kind in operands if kind != _SINGLE),
        result_labels=tuple(name for name, kind in results if kind != _SINGLE),
        properties=tuple(name for name in op_def.properties if name not in _SEGMENT_NAMES),
        defaults=tuple(
            (name, d.default_value)
            for name, d in op_def.properties.items()
            if d.default_value is not None
        ),
        has_region=any(name == "decomposition" for name, _ in op_def.regions),
    )


def _entries(
    op: Operation, fields: tuple[tuple[str, int], ...]
) -> list[tuple[str | None, object, bool]]:
    """(label, value, is_list) per printed operand or result, in definition order."""
    out: list[tuple[str | None, object, bool]] = []
    for name, kind in fields:
        value = getattr(op, name)
        if kind == _SINGLE:
            out.append((None, value, False))
        elif kind == _OPTIONAL:
            if value is not None:
                out.append((name, value, False))
        elif value:
            out.append((name, value, True))
    return out


def _match_entries(
    parser: Parser,
    fields: tuple[tuple[str, int], ...],
    entries: list[tuple[str | None, object]],
    what: str,
) -> list[object]:
    """Assign parsed (label, value) entries to the op's fields, in definition order."""
    args: list[object] = []
    i = 0
    for name, kind in fields:
        entry = entries[i] if i < len(entries) else None
        if kind == _SINGLE:
            if entry is None or entry[0] is not None:
                parser.raise_error(f"expected {what} '{name}' (positional) here")
            args.append(entry[1])
            i += 1
        elif entry is not None and entry[0] == name:
            args.append(entry[1])
            i += 1
        else:
            args.append(None if kind == _OPTIONAL else [])
    if i < len(entries):
        label = entries[i][0]
        parser.raise_error(
            f"unexpected {what} '{label}' here (out of order or repeated)"
            if label
            else f"too many positional {what}s"
        )
    return args


def _count(args: list[object]) -> int:
    return sum(len(a) if isinstance(a, list) else (a is not None) for a in args)


class NamedOperandSyntax(IRDLOperation):
    """Mixin: the custom form above, for any op whose definition it reads."""

    def print(self, printer: Printer) -> None:
        plan = _plan(type(self))

        def print_entry(entry: tuple[str | None, object, bool], item) -> None:
            label, value, is_list = entry
            if label is not None:
                printer.print_string(label + " ")
            if is_list:
                printer.print_string("[")
                printer.print_list(value, item)  # type: ignore[arg-type]
                printer.print_string("]")
            else:
                item(value)

        operands = _entries(self, plan.operands)
        if operands:
            printer.print_string(" ")
            printer.print_list(operands, lambda e: print_entry(e, printer.print_ssa_value))

        # Properties first, in definition order, then the discardable attributes.
        props = self.properties
        attrs = {name: props[name] for name in plan.properties if name in props}
        for name, default in plan.defaults:
            if attrs.get(name) == default:
                del attrs[name]
        attrs.update(self.attributes)
        printer.print_op_attributes(attrs)

        printer.print_string(" : (")
        printer.print_list(self.operand_types, printer.print_attribute)
        printer.print_string(") -> ")
        results = _entries(self, plan.results)
        if len(results) == 1 and results[0][0] is None:
            printer.print_attribute(results[0][1].type)  # type: ignore[union-attr]
        else:
            printer.print_string("(")
            printer.print_list(
                results,
                lambda e: print_entry(
                    (e[0], [r.type for r in e[1]] if e[2] else e[1].type, e[2]),  # type: ignore[union-attr]
                    printer.print_attribute,
                ),
            )
            printer.print_string(")")

        if plan.has_region:
            region = self.decomposition
            if region is not None:
                printer.print_string(" decomposition ")
                printer.print_region(region)

    @classmethod
    def parse(cls, parser: Parser):
        plan = _plan(cls)

        def parse_entry(labels: tuple[str, ...], item, optional_item):
            """`value`, `label value` or `label [value, ...]`; None when nothing is there."""
            label = parser.parse_optional_keyword_in(labels) if labels else None
            if label is None:
                value = optional_item()
                return None if value is None else (None, value)
            if parser.parse_optional_punctuation("["):
                values = []
                if not parser.parse_optional_punctuation("]"):
                    values = parser.parse_comma_separated_list(parser.Delimiter.NONE, item)
                    parser.parse_punctuation("]")
                return label, values
            return label, item()

        def parse_list(labels: tuple[str, ...], item, optional_item, what: str):
            entries: list[tuple[str | None, object]] = []
            entry = parse_entry(labels, item, optional_item)
            while entry is not None:
                entries.append(entry)
                if not parser.parse_optional_punctuation(","):
                    break
                entry = parse_entry(labels, item, optional_item)
                if entry is None:
                    parser.raise_error(f"expected {what}")
            return entries

        # operands
        entries = parse_list(
            plan.operand_labels,
            parser.parse_unresolved_operand,
            parser.parse_optional_unresolved_operand,
            "an operand",
        )
        operand_args = _match_entries(parser, plan.operands, entries, "operand")

        attrs = parser.parse_optional_attr_dict()
        properties = {k: v for k, v in attrs.items() if k in plan.properties}
        attributes = {k: v for k, v in attrs.items() if k not in plan.properties}

        parser.parse_punctuation(":")
        pos = parser.pos
        types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        if len(types) != _count(operand_args):
            parser.raise_error(
                f"{len(types)} operand types for {_count(operand_args)} operands", pos, parser.pos
            )
        type_iter = iter(types)
        resolved: list[object] = []
        for arg in operand_args:
            if isinstance(arg, list):
                resolved.append([parser.resolve_operand(a, next(type_iter)) for a in arg])
            elif isinstance(arg, UnresolvedOperand):
                resolved.append(parser.resolve_operand(arg, next(type_iter)))
            else:
                resolved.append(None)

        # results
        parser.parse_punctuation("->")
        if parser.parse_optional_punctuation("("):
            result_entries = parse_list(
                plan.result_labels, parser.parse_type, parser.parse_optional_type, "a result type"
            )
            parser.parse_punctuation(")")
        else:
            result_entries = [(None, parser.parse_type())]
        result_args = _match_entries(parser, plan.results, result_entries, "result")

        regions: list[Region | None] = []
        if plan.has_region:
            region = None
            if parser.parse_optional_keyword("decomposition"):
                region = parser.parse_region()
            regions.append(region)

        return cls.build(
            operands=resolved,  # type: ignore[arg-type]
            result_types=result_args,  # type: ignore[arg-type]
            properties=properties,
            attributes=attributes,
            regions=regions,
        )


# --- the decomposition region -------------------------------------------------------------------


@dataclass(frozen=True)
class HasDecomposition(OpTrait):
    """Verifies the optional `decomposition` region of a raised op."""

    def verify(self, op: Operation) -> None:
        region = op.decomposition
        if region is None:
            return
        block = region.first_block
        if block is None or block.next_block is not None:
            raise VerifyException("decomposition region must have exactly one block")
        arg_types = block.arg_types
        operand_types = op.operand_types
        if tuple(arg_types) != tuple(operand_types):
            raise VerifyException(
                f"decomposition block arguments ({_types(arg_types)}) must match "
                f"the operands ({_types(operand_types)})"
            )
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("decomposition region must end with irfuse.yield")
        yielded = last.operand_types
        if tuple(yielded) != tuple(op.result_types):
            raise VerifyException(
                f"decomposition yields ({_types(yielded)}) but the op returns "
                f"({_types(op.result_types)})"
            )


def _types(types: Sequence[Attribute]) -> str:
    return ", ".join(str(t) for t in types)


class RaisedOperation(NamedOperandSyntax):
    """Base of the semantic ops: the custom syntax and the optional `decomposition` region."""

    decomposition = opt_region_def("single_block")

    traits = traits_def(HasDecomposition())


def decomposition_block(op: Operation) -> Block | None:
    """The body of a raised op's decomposition region, or None when it has none."""
    region = getattr(op, "decomposition", None)
    return None if region is None else region.first_block


def in_decomposition(op: Operation) -> bool:
    """Whether `op` sits inside a raised op's decomposition region (passes leave those alone)."""
    parent = op.parent_op()
    return parent is not None and isinstance(parent, RaisedOperation)


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
    body.add_op(YieldOp(*outputs))
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
    assert isinstance(terminator, YieldOp)
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


def opt_type(value: SSAValue | None) -> Any:
    """The type of an optional operand or result, or None when it is absent."""
    return None if value is None else value.type


# --- property values ----------------------------------------------------------------------------


def f64_attr(value: float) -> FloatAttr:
    """An f64 property value (eps, scales, pad values)."""
    return FloatAttr(float(value), f64)


def i64_attr(value: int) -> IntegerAttr:
    """An i64 property value (head counts, sizes, world sizes)."""
    return IntegerAttr(int(value), i64)


def bool_attr(value: bool) -> IntegerAttr:
    """A bool property value, printed `true` / `false`."""
    return IntegerAttr.from_bool(bool(value))
