"""The `irfuse` dialect: the types every irfuse dialect uses, the region terminator and the base
of the raised ops.

Types keep what a torch value is, so that a graph survives FX -> IR -> text -> IR -> FX: a
`!irfuse.tensor` has a dtype (xDSL's element types, mapped to torch's by `irfuse.dtypes`) and
dims that are integers or symbolic sizes, kept by name (`s0`, `"2*s0"`) so that a verifier can
tell two `s0` dims agree; `!irfuse.sym` is a SymInt (or SymBool, SymFloat); `!irfuse.opaque`
any other value an imported op yields. `RaisedOperation` is the base of the semantic ops: the
named-operand syntax (`irfuse.ir.syntax`) and the optional `decomposition` region
(`irfuse.ir.decomposition`) ended by `irfuse.yield`.

The types' and `irfuse.yield`'s textual forms: `filecheck/dialects/aten/ops.mlir`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import builtin
from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Operation, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_region_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from irfuse.ir.attr_syntax import StringParameter, dim_attr, parse_dim, print_dim
from irfuse.ir.decomposition import HasDecomposition
from irfuse.ir.dialect import declared_dialect
from irfuse.ir.shapes import Dim, MaybeDim
from irfuse.ir.syntax import NamedOperandSyntax


@irdl_attr_definition
class TensorType(ParametrizedAttribute, TypeAttribute):
    """A torch tensor: shape (static or symbolic dims) and dtype."""

    name = "irfuse.tensor"

    shape: ArrayAttr[IntAttr | StringAttr]
    dtype: Attribute

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string("[")
            printer.print_list(self.shape.data, lambda d: print_dim(printer, d))
            printer.print_string("], ")
            printer.print_attribute(self.dtype)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[ArrayAttr, Attribute]:
        with parser.in_angle_brackets():
            dims = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: parse_dim(parser)
            )
            parser.parse_punctuation(",")
            dtype = parser.parse_type()
        return ArrayAttr(dims), dtype

    def verify(self) -> None:
        if not isinstance(self.dtype, TypeAttribute):
            raise VerifyException(f"tensor dtype must be a type, got {self.dtype}")
        for dim in self.shape.data:
            if isinstance(dim, IntAttr) and dim.data < 0:
                raise VerifyException(f"tensor dims must be >= 0, got {dim.data}")

    @property
    def dims(self) -> tuple[Dim, ...]:
        """The shape as Python values: ints for static dims, strings for symbolic ones."""
        return tuple(d.data for d in self.shape.data)

    @property
    def rank(self) -> int:
        return len(self.shape.data)


_TENSOR_TYPES: dict[tuple[tuple[Dim, ...], Attribute], TensorType] = {}


def tensor_type(shape: Sequence[Dim], dtype: Attribute) -> TensorType:
    """A (cached) `!irfuse.tensor`; building types is hot on the import path."""
    key = (tuple(shape), dtype)
    found = _TENSOR_TYPES.get(key)
    if found is None:
        found = TensorType(ArrayAttr([dim_attr(d) for d in shape]), dtype)
        _TENSOR_TYPES[key] = found
    return found


def derived_type(x: TensorType, dims: Sequence[MaybeDim]) -> TensorType:
    """A builder's default result type: x's dtype and `dims`, derived from x's (all known)."""
    if None in dims:
        raise ValueError(f"give result_type: a dim derived from {x} is symbolic")
    return tensor_type(dims, x.dtype)  # type: ignore[arg-type]


@irdl_attr_definition
class SymType(ParametrizedAttribute, TypeAttribute):
    """A symbolic scalar: its sympy expression and its kind (int, float or bool)."""

    name = "irfuse.sym"

    expr: StringAttr
    kind: StringAttr

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            print_dim(printer, self.expr)
            if self.kind.data != "int":
                printer.print_string(", ")
                printer.print_string(self.kind.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[StringAttr, StringAttr]:
        with parser.in_angle_brackets():
            expr = parse_dim(parser)
            if isinstance(expr, IntAttr):
                expr = StringAttr(str(expr.data))
            kind = "int"
            if parser.parse_optional_punctuation(","):
                kind = parser.parse_keyword_in(("int", "float", "bool"))
        return expr, StringAttr(kind)

    def verify(self) -> None:
        if self.kind.data not in ("int", "float", "bool"):
            raise VerifyException(f"sym kind must be int, float or bool, got {self.kind.data}")


_SYM_TYPES: dict[tuple[str, str], SymType] = {}


def sym_type(expr: str, kind: str = "int") -> SymType:
    """A (cached) `!irfuse.sym`."""
    found = _SYM_TYPES.get((expr, kind))
    if found is None:
        found = SymType(StringAttr(expr), StringAttr(kind))
        _SYM_TYPES[(expr, kind)] = found
    return found


@irdl_attr_definition
class OpaqueType(StringParameter, TypeAttribute):
    """A non-tensor value that irfuse carries through unchanged, named by its kind."""

    name = "irfuse.opaque"


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends the decomposition region of a raised op, yielding what the op returns."""

    name = "irfuse.yield"

    values = var_operand_def()

    traits = traits_def(IsTerminator(), Pure())

    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue):
        # One variadic operand list: xDSL's generic IRDL argument processing adds nothing here
        # but time (every raised op's region ends with one).
        Operation.__init__(self, operands=values)


class RaisedOperation(NamedOperandSyntax):
    """Base of the semantic ops: the named-operand syntax and the optional `decomposition`
    region, which keeps the ATen chain the op was raised from."""

    decomposition = opt_region_def("single_block")

    traits = traits_def(HasDecomposition(YieldOp))


PLATFORM_ATTR = "irfuse.platform"
"""The module attribute naming the platform a module is compiled for: a pass's behaviour
depends on the IR alone, so `irfuse-opt` reproduces any dumped step."""


def set_target(module: builtin.ModuleOp, platform: str) -> None:
    module.attributes[PLATFORM_ATTR] = StringAttr(platform)


def module_platform(module: builtin.ModuleOp) -> str:
    """The platform string a module is compiled for (`cpu` when the IR does not say)."""
    attr = module.attributes.get(PLATFORM_ATTR)
    return attr.data if isinstance(attr, StringAttr) else "cpu"


IRFuse = declared_dialect("irfuse", globals())
