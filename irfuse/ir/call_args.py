"""Argument templates: how a call op (`aten.call`, `kernel.call`) keeps its non-tensor arguments.

A template entry is an attribute: `OperandRefAttr` puts the op's operand number `index` there;
ints, strings, dtypes and lists are builtin attributes, floats, `none`, bools and torch constants
the ones below (whose generic forms print and parse back exactly, as xDSL's `FloatData` and
`NoneAttr` do not). They are named `#aten.*` and registered by the `aten` dialect (`kernel.call`
reuses them). `decode_template` rebuilds the Python value torch receives.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import torch
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Data, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from irfuse import dtypes, targets
from irfuse.ir.attr_syntax import StringParameter


@irdl_attr_definition
class OperandRefAttr(ParametrizedAttribute):
    """"The op's operand number `index` goes here" (the call's custom form writes the operand)."""

    name = "aten.operand"

    index: IntAttr

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_int(self.index.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[IntAttr]:
        with parser.in_angle_brackets():
            return (IntAttr(parser.parse_integer()),)


@irdl_attr_definition
class DeviceAttr(StringParameter):
    """A `torch.device` argument: `#aten.device<"cpu">`."""

    name = "aten.device"


@irdl_attr_definition
class LayoutAttr(StringParameter):
    """A `torch.layout` argument: `#aten.layout<"torch.strided">`."""

    name = "aten.layout"


@irdl_attr_definition
class MemoryFormatAttr(StringParameter):
    """A `torch.memory_format` argument: `#aten.memory_format<"torch.contiguous_format">`."""

    name = "aten.memory_format"


@irdl_attr_definition
class TargetAttr(StringParameter):
    """An op passed as an argument (to higher-order ops such as `auto_functionalized`):
    `#aten.target<"irfuse::rms_norm.default">`."""

    name = "aten.target"


@irdl_attr_definition
class TupleAttr(ParametrizedAttribute):
    """A tuple argument, kept apart from lists so emit rebuilds the same Python value:
    `#aten.tuple<[1, 2]>` (written inline as `(1, 2)` by the call syntax)."""

    name = "aten.tuple"

    items: ArrayAttr

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_attribute(self.items)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[ArrayAttr]:
        with parser.in_angle_brackets():
            items = parser.parse_attribute()
        if not isinstance(items, ArrayAttr):
            parser.raise_error("expected an array in #aten.tuple")
        return (items,)


@irdl_attr_definition
class BoolArgAttr(ParametrizedAttribute):
    """A bool argument (`true` / `false` inline)."""

    name = "aten.bool"

    value: IntAttr

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string("true" if self.value.data else "false")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[IntAttr]:
        with parser.in_angle_brackets():
            return (IntAttr(int(parser.parse_keyword_in(("true", "false")) == "true")),)


SPECIAL_FLOATS = {"inf": math.inf, "ninf": -math.inf, "nan": math.nan}


def float_text(value: float) -> str:
    """A float as the call syntax writes it: the shortest text that reads back to the same bits
    (`1.0e-06`, `0.5`), or `inf`, `ninf`, `nan`."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "ninf"
    mantissa, sep, exponent = repr(value).partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + sep + exponent


@irdl_attr_definition
class FloatArgAttr(Data[float]):
    """A float argument (`#aten.float<1.0e-06>`; inline as the literal), equal by its bits."""

    name = "aten.float"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> float:
        with parser.in_angle_brackets():
            number = parser.parse_optional_number()
            if number is not None:
                return float(number)
            return SPECIAL_FLOATS[parser.parse_keyword_in(tuple(SPECIAL_FLOATS), " as a float")]

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(float_text(self.data))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FloatArgAttr) and _bits(self.data) == _bits(other.data)

    def __hash__(self) -> int:
        return hash(_bits(self.data))


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


@irdl_attr_definition
class NoneArgAttr(ParametrizedAttribute):
    """A `None` argument (`#aten.none`; inline as `none`)."""

    name = "aten.none"


NONE = NoneArgAttr()
TRUE = BoolArgAttr(IntAttr(1))
FALSE = BoolArgAttr(IntAttr(0))

TEMPLATE_ATTRIBUTES: tuple[type[Attribute], ...] = (
    OperandRefAttr, DeviceAttr, LayoutAttr, MemoryFormatAttr, TargetAttr, TupleAttr, BoolArgAttr,
    FloatArgAttr, NoneArgAttr,
)
"""The attributes above, which the `aten` dialect registers."""


def check_template(value: Attribute, num_operands: int, seen: list[int]) -> None:
    """Raise if `value` refers to an operand out of range; append the operands it refers to."""
    kind = type(value)  # (the leaves most arguments are, by exact type: verification is hot)
    if kind is IntAttr or kind is NoneArgAttr or kind is FloatArgAttr or kind is BoolArgAttr:
        return
    if isinstance(value, OperandRefAttr):
        if not 0 <= value.index.data < num_operands:
            raise VerifyException(f"template refers to operand {value.index.data} out of range")
        seen.append(value.index.data)
    elif isinstance(value, ArrayAttr):
        for item in value.data:
            check_template(item, num_operands, seen)
    elif isinstance(value, TupleAttr):
        check_template(value.items, num_operands, seen)
    elif isinstance(value, DictionaryAttr):
        for item in value.data.values():
            check_template(item, num_operands, seen)


def decode_template(template: Attribute, operands: Sequence[Any]) -> Any:
    """The Python value an argument template stands for, with operands substituted."""
    kind = type(template)  # the common kinds by exact type (emit decodes thousands)
    if kind is OperandRefAttr:
        return operands[template.index.data]
    if kind is IntAttr or kind is FloatArgAttr:
        return template.data
    if kind is ArrayAttr:
        return [decode_template(t, operands) for t in template.data]
    if kind is NoneArgAttr:
        return None
    if kind is BoolArgAttr:
        return bool(template.value.data)
    if isinstance(template, StringAttr):
        return template.data
    if isinstance(template, TupleAttr):
        return tuple(decode_template(t, operands) for t in template.items.data)
    if isinstance(template, DictionaryAttr):
        return {k: decode_template(t, operands) for k, t in template.data.items()}
    if isinstance(template, DeviceAttr):
        return torch.device(template.text.data)
    if isinstance(template, LayoutAttr | MemoryFormatAttr):
        return getattr(torch, template.text.data.removeprefix("torch."))
    if isinstance(template, TargetAttr):
        return targets.resolve(template.text.data)
    if dtypes.is_ir_dtype(template):
        return dtypes.to_torch(template)
    raise ValueError(f"cannot decode the argument template {template}")
