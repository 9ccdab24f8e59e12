"""`CallLikeOp`: the base of the ops that call a torch callable with an argument template.

```mlir
%v = aten.call "aten::view.default"(%x, [%s0, 4096]) : (...) -> !irfuse.tensor<[s0, 4096], bf16>
```

The target is a string (`irfuse.targets` resolves it); the arguments are written as in Python,
with the operands in place (`irfuse.ir.call_args` holds the template attributes), keyword
arguments as `name = value`, floats as `1.0e-06`, `inf`, `ninf` or `nan`, tuples in parentheses
and dtypes by name, dicts (a user Triton kernel's `kwargs`) as `{"name": value}`. `tuple` marks a
call whose FX node returned a tuple or list (one result per element), `dict ["a", "b"]` one that
returned a dict (one result per key, in that order). A subclass lists extra properties, written `name value` before the target, in
`EXTRA_PROPS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntAttr,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, opt_prop_def, prop_def, var_operand_def, var_result_def
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from irfuse import dtypes
from irfuse.ir.call_args import (
    FALSE,
    NONE,
    SPECIAL_FLOATS,
    TRUE,
    BoolArgAttr,
    FloatArgAttr,
    NoneArgAttr,
    OperandRefAttr,
    TupleAttr,
    check_template,
    float_text,
)

_UNIT = UnitAttr()
_DTYPE_NAMES: dict[str, Attribute] = {
    str(t): t for t in dtypes.IR_DTYPES if str(t).replace("_", "").isalnum()
}
_KEYWORD_VALUES: dict[str, Attribute] = {"none": NONE, "true": TRUE, "false": FALSE}


def print_template_value(printer: Printer, value: Attribute, operands: Sequence[SSAValue]) -> None:
    """Print one template entry with operand references replaced by the operands."""
    if isinstance(value, OperandRefAttr):
        printer.print_operand(operands[value.index.data])
    elif isinstance(value, IntAttr):
        printer.print_int(value.data)
    elif isinstance(value, FloatArgAttr):
        printer.print_string(float_text(value.data))
    elif isinstance(value, BoolArgAttr):
        printer.print_string("true" if value.value.data else "false")
    elif isinstance(value, NoneArgAttr):
        printer.print_string("none")
    elif isinstance(value, StringAttr):
        printer.print_string_literal(value.data)
    elif isinstance(value, ArrayAttr):
        printer.print_string("[")
        printer.print_list(value.data, lambda v: print_template_value(printer, v, operands))
        printer.print_string("]")
    elif isinstance(value, DictionaryAttr):
        printer.print_string("{")
        printer.print_list(value.data.items(), lambda kv: (
            printer.print_string_literal(kv[0]),
            printer.print_string(": "),
            print_template_value(printer, kv[1], operands),
        ))
        printer.print_string("}")
    elif isinstance(value, TupleAttr):
        printer.print_string("(")
        printer.print_list(value.items.data, lambda v: print_template_value(printer, v, operands))
        if len(value.items.data) == 1:
            printer.print_string(",")
        printer.print_string(")")
    else:
        printer.print_attribute(value)


def _parse_template_value(parser: Parser, operands: list[UnresolvedOperand]) -> Attribute:
    unresolved = parser.parse_optional_unresolved_operand()
    if unresolved is not None:
        operands.append(unresolved)
        return OperandRefAttr(IntAttr(len(operands) - 1))
    if parser.parse_optional_punctuation("["):
        items: list[Attribute] = []
        if not parser.parse_optional_punctuation("]"):
            items.append(_parse_template_value(parser, operands))
            while parser.parse_optional_punctuation(","):
                items.append(_parse_template_value(parser, operands))
            parser.parse_punctuation("]")
        return ArrayAttr(items)
    if parser.parse_optional_punctuation("("):
        items = []
        while not parser.parse_optional_punctuation(")"):
            items.append(_parse_template_value(parser, operands))
            if not parser.parse_optional_punctuation(","):
                parser.parse_punctuation(")")
                break
        return TupleAttr(ArrayAttr(items))
    if parser.parse_optional_punctuation("{"):
        entries: dict[str, Attribute] = {}
        while not parser.parse_optional_punctuation("}"):
            key = parser.parse_str_literal("expected a string key in a dict argument")
            parser.parse_punctuation(":")
            entries[key] = _parse_template_value(parser, operands)
            if not parser.parse_optional_punctuation(","):
                parser.parse_punctuation("}")
                break
        return DictionaryAttr(entries)
    number = parser.parse_optional_number()
    if number is not None:
        if isinstance(number, bool):
            return TRUE if number else FALSE
        return IntAttr(number) if isinstance(number, int) else FloatArgAttr(number)
    text = parser.parse_optional_str_literal()
    if text is not None:
        return StringAttr(text)
    ident = parser.parse_optional_identifier()
    if ident is not None:
        return _identifier_value(parser, ident)
    return parser.parse_attribute()


def _identifier_value(parser: Parser, ident: str) -> Attribute:
    if ident in _KEYWORD_VALUES:
        return _KEYWORD_VALUES[ident]
    if ident in SPECIAL_FLOATS:
        return FloatArgAttr(SPECIAL_FLOATS[ident])
    if ident in _DTYPE_NAMES:
        return _DTYPE_NAMES[ident]
    parser.raise_error(f"unexpected '{ident}' in an argument list")


def _parse_call_arguments(
    parser: Parser,
) -> tuple[list[Attribute], dict[str, Attribute], list[UnresolvedOperand]]:
    positional: list[Attribute] = []
    keywords: dict[str, Attribute] = {}
    operands: list[UnresolvedOperand] = []
    parser.parse_punctuation("(")
    if parser.parse_optional_punctuation(")"):
        return positional, keywords, operands
    while True:
        ident = parser.parse_optional_identifier()
        if ident is not None and parser.parse_optional_punctuation("="):
            keywords[ident] = _parse_template_value(parser, operands)
        else:
            if keywords:
                parser.raise_error("positional argument after a keyword argument")
            if ident is not None:
                positional.append(_identifier_value(parser, ident))
            else:
                positional.append(_parse_template_value(parser, operands))
        if not parser.parse_optional_punctuation(","):
            break
    parser.parse_punctuation(")")
    return positional, keywords, operands


class CallLikeOp(IRDLOperation):
    """Shared print/parse/verify of ops that call a torch callable with an argument template."""

    inputs = var_operand_def()
    res = var_result_def()
    target = prop_def(StringAttr)
    template = prop_def(ArrayAttr)
    kw_template = opt_prop_def(DictionaryAttr)
    tuple_result = opt_prop_def(UnitAttr)
    result_keys = opt_prop_def(ArrayAttr[StringAttr])

    EXTRA_PROPS: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        target: str,
        operands: Sequence[SSAValue | Operation],
        template: Sequence[Attribute],
        result_types: Sequence[Attribute],
        *,
        kw_template: Mapping[str, Attribute] | None = None,
        tuple_result: bool = False,
        result_keys: Sequence[str] | None = None,
        extra: Mapping[str, Attribute] | None = None,
    ):
        props: dict[str, Attribute] = {
            "target": StringAttr(target),
            "template": ArrayAttr(template),
        }
        if kw_template:
            props["kw_template"] = DictionaryAttr(dict(kw_template))
        if tuple_result:
            props["tuple_result"] = UnitAttr()
        if result_keys is not None:
            props["result_keys"] = ArrayAttr([StringAttr(k) for k in result_keys])
        if extra:
            props.update(extra)
        # One variadic operand and result list: xDSL's generic IRDL argument processing adds
        # nothing here but time, and passes build many of these.
        Operation.__init__(
            self, operands=list(operands), result_types=list(result_types), properties=props
        )

    @classmethod
    def build_fast(
        cls,
        target: StringAttr,
        operands: Sequence[SSAValue],
        template: ArrayAttr,
        result_types: Sequence[Attribute],
        kw_template: DictionaryAttr | None,
        tuple_result: bool,
        location: Attribute,
        result_keys: ArrayAttr | None = None,
    ) -> CallLikeOp:
        """The importer's constructor: attributes already built and valid, no checks (the
        import path builds thousands of these; the op still verifies like any other)."""
        props: dict[str, Attribute] = {"target": target, "template": template}
        if kw_template is not None:
            props["kw_template"] = kw_template
        if tuple_result:
            props["tuple_result"] = _UNIT
        if result_keys is not None:
            props["result_keys"] = result_keys
        return cls.create(
            operands=operands, result_types=result_types, properties=props, location=location
        )

    @property
    def keywords(self) -> dict[str, Attribute]:
        return dict(self.kw_template.data) if self.kw_template is not None else {}

    def verify_(self) -> None:
        # `inputs` is the op's one operand list; `len(self.operands)` counts it without the
        # IRDL accessor (the end-of-pipeline verification runs this on thousands of ops).
        count = len(self.operands)
        seen: list[int] = []
        check_template(self.properties["template"], count, seen)
        kw = self.properties.get("kw_template")
        for value in kw.data.values() if kw is not None else ():
            check_template(value, count, seen)
        if sorted(seen) != list(range(count)):
            raise VerifyException(
                f"every operand of {self.name} must appear once in its arguments "
                f"({count} operands, template uses {sorted(seen)})"
            )
        keys = self.properties.get("result_keys")
        if keys is not None:
            if "tuple_result" in self.properties:
                raise VerifyException("a call returns a tuple or a dict, not both")
            if len(keys.data) != len(self.results):
                raise VerifyException(f"{len(keys.data)} result keys for {len(self.results)} "
                                      "results")

    def print(self, printer: Printer) -> None:
        for prop in self.EXTRA_PROPS:
            if prop in self.properties:
                printer.print_string(f" {prop} ")
                printer.print_attribute(self.properties[prop])
        if self.tuple_result is not None:
            printer.print_string(" tuple")
        if self.result_keys is not None:
            printer.print_string(" dict ")
            printer.print_attribute(self.result_keys)
        printer.print_string(" ")
        printer.print_string_literal(self.target.data)
        printer.print_string("(")
        operands = self.operands
        printer.print_list(
            self.template.data, lambda v: print_template_value(printer, v, operands)
        )
        keywords = self.keywords
        if keywords:
            if self.template.data:
                printer.print_string(", ")
            printer.print_list(
                keywords.items(),
                lambda kv: (
                    printer.print_string(f"{kv[0]} = "),
                    print_template_value(printer, kv[1], operands),
                ),
            )
        printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_function_type(self.operand_types, self.result_types)

    @classmethod
    def parse(cls, parser: Parser) -> CallLikeOp:
        extra: dict[str, Attribute] = {}
        for prop in cls.EXTRA_PROPS:
            if parser.parse_optional_keyword(prop):
                extra[prop] = parser.parse_attribute()
        tuple_result = parser.parse_optional_keyword("tuple") is not None
        result_keys = None
        if parser.parse_optional_keyword("dict") is not None:
            pos = parser.pos
            keys = parser.parse_attribute()
            if not isinstance(keys, ArrayAttr) or not all(
                    isinstance(k, StringAttr) for k in keys.data):
                parser.raise_error("expected the result keys as an array of strings", pos,
                                   parser.pos)
            result_keys = [k.data for k in keys.data]
        target = parser.parse_str_literal("expected the call target as a string")
        positional, keywords, unresolved = _parse_call_arguments(parser)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        func_type = parser.parse_function_type()
        if len(func_type.inputs.data) != len(unresolved):
            parser.raise_error(
                f"{len(unresolved)} operands but the type lists {len(func_type.inputs.data)}",
                pos,
                parser.pos,
            )
        operands = parser.resolve_operands(unresolved, func_type.inputs.data, pos)
        op = cls(
            target,
            operands,
            positional,
            func_type.outputs.data,
            kw_template=keywords,
            tuple_result=tuple_result,
            result_keys=result_keys,
            extra=extra,
        )
        op.attributes |= attributes
        return op
