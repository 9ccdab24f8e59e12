"""The `act` dialect: the gated activations (SiLU·Mul, GeGLU), and padding of the last dim.

Numerics: `docs/numerics.md`, "SiLU·Mul". `silu_mul_dims` and `pad_dims` give the result shapes,
checked, for these ops and the fused ones. `GatedActivationOperation` is the family of the gated
activation and the fused ops that replace it: its `activation` names the gate's function.

Each op's textual form: `filecheck/dialects/act/ops.mlir`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from xdsl.dialects.builtin import I64, Float64Type, FloatAttr, IntegerAttr, StringAttr
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects.irfuse import RaisedOperation, TensorType, derived_type
from irfuse.ir import shapes
from irfuse.ir.dialect import declared_dialect
from irfuse.ir.shapes import MaybeDim
from irfuse.ir.syntax import f64_attr, opt_type


def silu_mul_dims(x: TensorType, up: TensorType | None = None) -> tuple[MaybeDim, ...]:
    """The SiLU·Mul result dims of a float x: `[..., 2d] -> [..., d]` (an even last dim), or x's
    own dims when `up`, of x's type, is separate."""
    shapes.check_float("x", x)
    if up is not None:
        shapes.check_same_type("up", up, x, "x (the gate)")
        return x.dims
    shapes.check_min_rank("x", x, 1)
    if not shapes.divisible(x.dims[-1], 2):
        raise VerifyException(
            f"x has shape {shapes.shape_str(x.dims)}: its last dim [gate | up] must be even"
        )
    return (*x.dims[:-1], shapes.div_dim(x.dims[-1], 2))


def pad_dims(x: TensorType, low: int, high: int) -> tuple[MaybeDim, ...]:
    """x's dims with the last one grown by low + high (both >= 0)."""
    if low < 0 or high < 0:
        raise VerifyException(f"pad amounts must be >= 0, got low {low}, high {high}")
    shapes.check_min_rank("x", x, 1)
    return (*x.dims[:-1], shapes.add_dim(x.dims[-1], low + high))


ACTIVATIONS = ("silu", "gelu_tanh", "gelu")
"""The gate activations: silu; GELU's tanh form (`F.gelu(a, approximate="tanh")`, Gemma); GELU's
erf form (`F.gelu(a)`)."""


class GatedActivationOperation(IRDLOperation):
    """The property of a gated activation `act(gate) * up`: `activation`, one of ACTIVATIONS
    (default silu, left out of the printed form)."""

    activation = prop_def(StringAttr, default_value=StringAttr("silu"))

    def verify_(self) -> None:
        if self.activation.data not in ACTIVATIONS:
            raise VerifyException(f"activation must be one of {', '.join(ACTIVATIONS)}, "
                                  f"got {self.activation.data!r}")
        super().verify_()


@irdl_op_definition
class SiluMulOp(GatedActivationOperation, RaisedOperation):
    """`y = silu(x[..., :d]) * x[..., d:]` (vLLM's `silu_and_mul`), or `silu(x) * up` with a
    separate `up` (Hugging Face's MLP); GeGLU with `activation` `gelu_tanh` (Gemma) or `gelu`."""

    name = "act.silu_mul"

    x = operand_def(TensorType)
    up = opt_operand_def(TensorType)
    y = result_def(TensorType)

    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, x, up=None, **_: Any) -> list[TensorType]:
        dims = x.type.dims
        if up is None:
            dims = (*dims[:-1], shapes.div_dim(dims[-1], 2))
        return [derived_type(x.type, dims)]

    def verify_(self) -> None:
        super().verify_()
        x, y = self.x.type, self.y.type
        shapes.check_shape("y", y, silu_mul_dims(x, opt_type(self.up)))
        shapes.check_same_dtype("y", y, x, "x")


@irdl_op_definition
class PadOp(RaisedOperation):
    """`F.pad` of the last dim: `low` values before and `high` after, all equal to `value` (vLLM
    pads the router GEMM's input to a multiple of 128 or 256 on ROCm; negative amounts crop and
    are not this op)."""

    name = "act.pad"

    x = operand_def(TensorType)
    y = result_def(TensorType)

    low = prop_def(IntegerAttr[I64])
    high = prop_def(IntegerAttr[I64])
    value = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))
    traits = traits_def(Pure())
    BUILD_DEFAULTS: ClassVar = {"low": 0}

    @classmethod
    def infer_result_types(cls, x, high, low, **_: Any) -> list[TensorType]:
        return [derived_type(x.type, pad_dims(x.type, low, high))]

    def verify_(self) -> None:
        x = self.x.type
        shapes.check_shape("y", self.y.type, pad_dims(x, self.low.value.data, self.high.value.data))
        shapes.check_same_dtype("y", self.y.type, x, "x")


Act = declared_dialect("act", globals())
