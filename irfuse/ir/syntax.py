"""`NamedOperandSyntax`: one custom form and one constructor for an op, derived from its definition.

```mlir
%q, %s = quant.fp8 %x, scale_ub %ub {scheme = #quant.scheme<dynamic_token>}
    : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>)
    -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
```

Required operands are positional, in definition order; an optional operand is written
`name %v`, a variadic one `name [%a, %b]` (left out when absent or empty). Properties and
attributes share the `{...}` dictionary, the properties in dataclass field order (a base class's
before its subclass's) and left out when equal to their default. Operand types follow in the
order the operands were written; result types likewise, labelled like the operands. An optional
region named `decomposition` follows the keyword `decomposition`. The constructor takes the
operands positionally (the op's `KEYWORD_OPERANDS` by name only) and the properties by name as
Python values: `QuantFp8Op(x, scale_ub=ub, scheme=QuantScheme.nvfp4())`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

from xdsl.dialects.builtin import (
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    AttrSizedResultSegments,
    IRDLOperation,
    OptionalDef,
    PropertyDef,
    VariadicDef,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer

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
    or absent) or a bool attribute, a str as a string, a number as f64 or i64, a sequence of
    ints as an i64 array, None as absent; an Attribute as it is."""
    if value is None or isinstance(value, Attribute):
        return value
    bases = definition.constr.get_bases() or ()
    if UnitAttr in bases:
        return UnitAttr() if value else None
    if isinstance(value, bool):
        return bool_attr(value)
    if isinstance(value, str):
        return StringAttr(value)
    if DenseArrayBase in bases:
        return DenseArrayBase.from_list(i64, [int(v) for v in value])
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
