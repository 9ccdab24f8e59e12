"""The parameter syntax irfuse's attributes and types share.

- `StringParameter`: the base of an attribute of one string, written `<"text">`
  (`#aten.device<"cpu">`, `!irfuse.opaque<"list">`);
- `print_dim` / `parse_dim`: a tensor dim, an integer, a symbol (`s0`) or a quoted sympy
  expression (`"2*s0"`), as `!irfuse.tensor` and `!irfuse.sym` write them.
"""

from __future__ import annotations

import re

from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.parser import AttrParser
from xdsl.printer import Printer

from irfuse.ir.shapes import Dim

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class StringParameter(ParametrizedAttribute):
    """An attribute of one string, `text`, written `<"text">`."""

    text: StringAttr

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.text.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[StringAttr]:
        with parser.in_angle_brackets():
            return (StringAttr(parser.parse_str_literal()),)


def print_dim(printer: Printer, dim: Attribute) -> None:
    """An int, a symbol, or a quoted expression."""
    if isinstance(dim, IntAttr):
        printer.print_int(dim.data)
    else:
        assert isinstance(dim, StringAttr)
        if _IDENT.match(dim.data):
            printer.print_string(dim.data)
        else:
            printer.print_string_literal(dim.data)


def parse_dim(parser: AttrParser) -> IntAttr | StringAttr:
    value = parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
    if value is not None:
        return IntAttr(value)
    text = parser.parse_optional_identifier_or_str_literal()
    if text is None:
        parser.raise_error("expected a dimension: an integer, a symbol or a quoted expression")
    return StringAttr(text)


def dim_attr(dim: Dim) -> IntAttr | StringAttr:
    """A dim as the attribute a shape holds."""
    return IntAttr(dim) if isinstance(dim, int) else StringAttr(str(dim))
