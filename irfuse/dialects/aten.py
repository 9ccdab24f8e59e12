"""The `aten` dialect: the imported torch graph, one op per FX node, nothing lost.

Every `call_function` node of the ATen graph becomes an `aten.call` that carries its target (an
ATen overload, a higher-order op, or a Python function such as `operator.mul` on sizes) and its
arguments as written: tensors and symbolic sizes are operands, everything else is kept in an
argument template (`irfuse.ir.call_args`, whose `#aten.*` attributes this dialect registers), so
emit can rebuild the exact call. The call syntax is `irfuse.ir.call_syntax`'s.

Each op's textual form: `filecheck/dialects/aten/ops.mlir`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def, result_def, traits_def
from xdsl.traits import Pure

from irfuse.ir import call_args

# The names irfuse/fusions builds argument templates with, as `aten.*`.
from irfuse.ir.call_syntax import CallLikeOp
from irfuse.ir.dialect import declared_dialect


@irdl_op_definition
class CallOp(CallLikeOp):
    """An imported call: an ATen op (or Python size arithmetic) with its arguments as written."""

    name = "aten.call"


SCALAR_VALUE_ATTR = "value"
"""Attribute of an `aten.get_attr` of a 0-d tensor: the number it holds (import records it)."""


@irdl_op_definition
class GetAttrOp(IRDLOperation):
    """A constant tensor owned by the graph module (an FX `get_attr` node); a 0-d one carries
    the number it holds as the attribute `value`."""

    name = "aten.get_attr"

    attr_name = prop_def(StringAttr)
    result = result_def()

    traits = traits_def(Pure())

    assembly_format = "$attr_name attr-dict `:` type($result)"

    def __init__(self, attr_name: str, result_type: Attribute):
        super().__init__(
            properties={"attr_name": StringAttr(attr_name)}, result_types=[result_type]
        )


ATen = declared_dialect("aten", globals(), call_args.TEMPLATE_ATTRIBUTES)
