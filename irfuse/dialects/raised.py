"""The base classes of the semantic ops (norm, quant, gemm, attn, act, coll) and the fused ops.

**The op syntax and builder.** `NamedOperandSyntax` gives every such op one custom form and one
constructor, both derived from the op definition:

```mlir
%q, %s = quant.fp8 %x, scale_ub %ub {scheme = #quant.scheme<dynamic_token>}
    : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>)
    -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
```

Required operands are positional, in definition order; an optional operand is written
`name %v`, a variadic one `name [%a, %b]` (left out when absent or empty). Properties and
attributes share the `{...}` dictionary, the properties in dataclass field order (a base class's
before its subclass's) and left out when equal to their default. Operand types follow in the
order the operands were written; result types likewise, labelled like the operands. The
constructor takes the operands positionally (the op's `KEYWORD_OPERANDS` by name only) and the
properties by name as Python values: `QuantFp8Op(x, scale_ub=ub, scheme=QuantScheme.nvfp4())`.

**The decomposition region.** Raising replaces a chain of imported ATen ops by one semantic op and
keeps the chain inside the op, in an optional single-block region named `decomposition`: its block
arguments stand for the op's operands (in order, same types), and it ends with `irfuse.yield` of
the values the op returns. Emitting an unfused semantic op inlines that region, so raising never
changes a result bit. The region may use values defined above the op (a symbolic size, a constant
the chain used), so it is not `IsolatedFromAbove`. Passes that match ATen ops skip ops for which
`in_decomposition(op)` holds. `outline` moves a chain into an op's region (raising),
`inline_decomposition` puts it back (emit), `decomposition_block` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, StringAttr, UnitAttr, f64, i64
from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    AttrSizedResultSegments,
    IRDLOperation,
    OptionalDef,
    PropertyDef,
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


def property_value(definition: PropertyDef, value: Any) -> Attribute | None:
    """A Python value as the property `definition` holds it: a bool as a unit property (present
    or absent) or a bool attribute, a str as a string, a number as f64 or i64, None as absent;
    an Attribute as it is."""
    if value is None or isinstance(value, Attribute):
        return value
    bases = definition.constr.get_bases() or ()
    if UnitAttr in bases:
        return UnitAttr() if value else None
    if isinstance(value, bool):
        return bool_attr(value)
    if isinstance(value, str):
        return StringAttr(value)
    return f64_attr(value) if FloatAttr in bases else i64_attr(value)


def opt_type(value: SSAValue | None) -> Any:
    """The type of an optional operand or result, or None when it is absent."""
    return None if value is None else value.type


# --- the op syntax and builder ------------------------------------------------------------------

_SINGLE, _OPTIONAL, _VARIADIC = 0, 1, 2
_SEGMENT_NAMES = frozenset(
    {AttrSizedOperandSegments.attribute_name, AttrSizedResultSegments.attribute_name}
)


@dataclass(frozen=True)
class _Plan:
    """What the printer, the parser and the builder need from an op definition, once per class."""

    operands: tuple[tuple[str, int], ...]
    results: tuple[tuple[str, int], ...]
    operand_labels: tuple[str, ...]
    result_labels: tuple[str, ...]
    positional: tuple[str, ...]
    properties: dict[str, PropertyDef]
    has_region: bool


def _kind(definition: object) -> int:
    if isinstance(definition, OptionalDef):
        return _OPTIONAL
    return _VARIADIC if isinstance(definition, VariadicDef) else _SINGLE


@cache
def _plan(cls: type[NamedOperandSyntax]) -> _Plan:
    op_def = cls.get_irdl_definition()
    operands = tuple((name, _kind(d)) for name, d in op_def.operands)
    results = tuple((name, _kind(d)) for name, d in op_def.results)
    declared = {n: d for n, d in op_def.properties.items() if n not in _SEGMENT_NAMES}
    # In dataclass field order: a base class's properties before its subclass's.
    order = [n for klass in reversed(cls.__mro__) for n in vars(klass) if n in declared]
    properties = {n: declared[n] for n in dict.fromkeys(order)}
    return _Plan(
        operands=operands,
        results=results,
        operand_labels=tuple(name for name, kind in operands if kind != _SINGLE),
        result_labels=tuple(name for name, kind in results if kind != _SINGLE),
        positional=tuple(n for n, _ in operands if n not in cls.KEYWORD_OPERANDS),
        properties=properties,
        has_region=any(name == "decomposition" for name, _ in op_def.regions),
    )


def _entries(op: Operation, fields: tuple[tuple[str, int], ...]) -> list[tuple[str | None, Any]]:
    """(label, value) per printed operand or result, in definition order."""
    out: list[tuple[str | None, Any]] = []
    for name, kind in fields:
        value = getattr(op, name)
        if kind == _SINGLE:
            out.append((None, value))
        elif value is not None and (kind == _OPTIONAL or value):
            out.append((name, value))
    return out


def _match_entries(
    parser: Parser, fields: tuple[tuple[str, int], ...], entries: list[tuple[str | None, Any]],
    what: str,
) -> list[Any]:
    """Assign parsed (label, value) entries to the op's fields, in definition order."""
    args: list[Any] = []
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


def _count(args: list[Any]) -> int:
    return sum(len(a) if isinstance(a, list) else (a is not None) for a in args)


class NamedOperandSyntax(IRDLOperation):
    """Base of the semantic and fused ops: the custom form and the constructor above."""

    KEYWORD_OPERANDS: ClassVar[tuple[str, ...]] = ()
    """Optional operands the constructor takes by name only."""

    BUILD_OPTIONS: ClassVar[tuple[str, ...]] = ()
    """Constructor keywords that only `infer_result_types` reads."""

    BUILD_DEFAULTS: ClassVar[Mapping[str, Any]] = {}
    """Constructor defaults of properties that have no default in the IR (printed when equal)."""

    RESULTS_TYPED_LIKE: ClassVar[tuple[str, ...]] = ()
    """The operand each result is typed like (None where it is absent), when they all are."""

    def __init__(
        self,
        *operands: SSAValue | Sequence[SSAValue] | None,
        result_types: Sequence[Attribute | Sequence[Attribute] | None] | None = None,
        result_type: Attribute | None = None,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
        **kwargs: Any,
    ):
        plan = _plan(type(self))
        if len(operands) > len(plan.positional):
            raise TypeError(f"{self.name} takes {len(plan.positional)} positional operands")
        args: dict[str, Any] = dict(zip(plan.positional, operands, strict=False))
        names = {name for name, _ in plan.operands}
        for key, value in kwargs.items():
            if key in args or not (key in names or key in plan.properties or
                                   key in self.BUILD_OPTIONS):
                raise TypeError(f"{self.name} got an unexpected or repeated argument '{key}'")
            args[key] = value
        for key, value in self.BUILD_DEFAULTS.items():
            args.setdefault(key, value)
        properties: dict[str, Attribute] = {}
        for name, definition in plan.properties.items():
            value = property_value(definition, args.get(name))
            if value is None:
                value = definition.default_value
            if value is None and not isinstance(definition, OptionalDef):
                raise TypeError(f"{self.name} needs the property '{name}'")
            if value is not None:
                properties[name] = value
        values = []
        for name, kind in plan.operands:
            if name not in args and kind == _SINGLE:
                raise TypeError(f"{self.name} needs the operand '{name}'")
            values.append(args.get(name, () if kind == _VARIADIC else None))
        if result_type is not None:
            result_types = [result_type]
        if result_types is None:
            result_types = self.infer_result_types(**args)
        super().__init__(
            operands=values,
            result_types=list(result_types),
            properties=properties,
            attributes=attributes,
            regions=[decomposition] if plan.has_region else [],
        )

    @classmethod
    def infer_result_types(cls, **args: Any) -> Sequence[Attribute | Sequence[Attribute] | None]:
        """The result types when the caller gives none, from the constructor's arguments."""
        if not cls.RESULTS_TYPED_LIKE:
            raise ValueError(f"{cls.name} needs result_types")
        return [opt_type(args.get(name)) for name in cls.RESULTS_TYPED_LIKE]

    def print(self, printer: Printer) -> None:
        plan = _plan(type(self))

        def print_entry(label: str | None, value: Any, item) -> None:
            if label is not None:
                printer.print_string(label + " ")
            if isinstance(value, Sequence):
                printer.print_string("[")
                printer.print_list(value, item)
                printer.print_string("]")
            else:
                item(value)

        operands = _entries(self, plan.operands)
        if operands:
            printer.print_string(" ")
            printer.print_list(operands, lambda e: print_entry(*e, printer.print_ssa_value))
        props = self.properties
        attrs = {
            name: props[name]
            for name, definition in plan.properties.items()
            if name in props and props[name] != definition.default_value
        }
        attrs.update(self.attributes)
        printer.print_op_attributes(attrs)

        printer.print_string(" : (")
        printer.print_list(self.operand_types, printer.print_attribute)
        printer.print_string(") -> ")
        results = [
            (label, [r.type for r in value] if isinstance(value, Sequence) else value.type)
            for label, value in _entries(self, plan.results)
        ]
        if len(results) == 1 and results[0][0] is None:
            printer.print_attribute(results[0][1])
        else:
            printer.print_string("(")
            printer.print_list(results, lambda e: print_entry(*e, printer.print_attribute))
            printer.print_string(")")
        if plan.has_region and self.decomposition is not None:
            printer.print_string(" decomposition ")
            printer.print_region(self.decomposition)

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
            entries: list[tuple[str | None, Any]] = []
            entry = parse_entry(labels, item, optional_item)
            while entry is not None:
                entries.append(entry)
                if not parser.parse_optional_punctuation(","):
                    break
                entry = parse_entry(labels, item, optional_item)
                if entry is None:
                    parser.raise_error(f"expected {what}")
            return entries

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
        count = _count(operand_args)
        if len(types) != count:
            parser.raise_error(f"{len(types)} operand types for {count} operands", pos, parser.pos)
        type_iter = iter(types)
        resolved: list[Any] = []
        for arg in operand_args:
            if isinstance(arg, list):
                resolved.append([parser.resolve_operand(a, next(type_iter)) for a in arg])
            elif isinstance(arg, UnresolvedOperand):
                resolved.append(parser.resolve_operand(arg, next(type_iter)))
            else:
                resolved.append(None)

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
            has_region = parser.parse_optional_keyword("decomposition")
            regions.append(parser.parse_region() if has_region else None)
        return cls.build(
            operands=resolved,
            result_types=result_args,
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
        arg_types, operand_types = block.arg_types, op.operand_types
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
