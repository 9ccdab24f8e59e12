"""The `norm` dialect: RMSNorm, alone or after the residual add that feeds it.

Raising replaces every spelling of RMSNorm (pow/mean/rsqrt chains, `x * x`, `F.rms_norm`,
`aten.rms_norm`, vLLM's custom ops) by these ops, with eps and the weight offset (Gemma's
`x * (1 + w)` is `weight_offset = 1.0`) as properties, so one rewrite matches every eps.
`NormOperation` carries those properties for every op that computes a norm, fused ones included;
the `check_*` helpers hold a norm's rules for all of them. Numerics: `docs/numerics.md`. A
per-head norm (Qwen3's q/k norm) is `norm.rms_norm` of a `[T, heads, head_dim]` x.

Each op's textual form: `filecheck/dialects/norm/ops.mlir`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from xdsl.dialects.builtin import Float64Type, FloatAttr, UnitAttr
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects.irfuse import RaisedOperation, TensorType
from irfuse.ir import shapes
from irfuse.ir.dialect import declared_dialect
from irfuse.ir.syntax import f64_attr, opt_type


def check_eps(what: str, eps: FloatAttr) -> None:
    value = eps.value.data
    if not (math.isfinite(value) and value >= 0.0):
        raise VerifyException(f"{what} must be a finite value >= 0, got {value}")


def check_norm_weight(x: TensorType, weight: TensorType | None, what: str = "x") -> None:
    """x has a float dtype and rank >= 1; weight (if any) is 1-D of x's last dim, float."""
    shapes.check_float(what, x)
    shapes.check_min_rank(what, x, 1)
    if weight is None:
        return
    shapes.check_float("weight", weight)
    shapes.check_rank("weight", weight, 1)
    if not shapes.dims_agree(weight.dims[0], x.dims[-1]):
        raise VerifyException(
            f"weight has shape {shapes.shape_str(weight.dims)} but {what}'s last dim is "
            f"{x.dims[-1]}"
        )


def check_norm_result(what: str, y: TensorType, x: TensorType) -> None:
    """y has x's shape and a float dtype: the one the model rounds the result to (x's, the
    promotion of x's and the weight's, or the model dtype after an f32 norm)."""
    shapes.check_shape(what, y, x.dims)
    shapes.check_float(what, y)


def check_residual(
    x: TensorType, residual: Any, residual_out: Any, round_sum: UnitAttr | None
) -> None:
    """The add before a norm: residual (if any) is float and shaped like x; `residual_out`, the
    rounded sum, exists with it; `round_sum` (the norm reads that rounded sum) needs it."""
    if residual is None and round_sum is not None:
        raise VerifyException("round_sum applies to a norm with a residual only")
    if (residual is None) != (residual_out is None):
        raise VerifyException("residual_out exists exactly when residual does")
    if residual is not None:
        shapes.check_float("residual", residual)
        shapes.check_shape("residual", residual, x.dims)
        check_norm_result("residual_out", residual_out, x)


class NormOperation(IRDLOperation):
    """The properties of an RMSNorm: `eps` (finite, >= 0) and `weight_offset`."""

    eps = prop_def(FloatAttr[Float64Type])
    weight_offset = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))

    def verify_(self) -> None:
        if self.eps is not None:
            check_eps("eps", self.eps)
        super().verify_()


@irdl_op_definition
class RmsNormOp(NormOperation, RaisedOperation):
    """`y = x * rsqrt(mean(x^2, -1) + eps) * (weight + weight_offset)` over the last dim (the
    bare normalisation without a weight)."""

    name = "norm.rms_norm"

    x = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    y = result_def(TensorType)

    traits = traits_def(Pure())
    RESULTS_TYPED_LIKE: ClassVar = ("x",)

    def verify_(self) -> None:
        super().verify_()
        check_norm_weight(self.x.type, opt_type(self.weight))
        check_norm_result("y", self.y.type, self.x.type)


@irdl_op_definition
class AddRmsNormOp(NormOperation, RaisedOperation):
    """`residual_out = x + residual; y = rms_norm(residual_out)`, the add in f32 and
    `residual_out` rounded; the norm reads the f32 sum (vLLM), or with `round_sum` the rounded
    one (Hugging Face's `hidden = residual + hidden`; `docs/numerics.md`)."""

    name = "norm.add_rms_norm"

    x = operand_def(TensorType)
    residual = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    y = result_def(TensorType)
    residual_out = result_def(TensorType)

    round_sum = opt_prop_def(UnitAttr)
    traits = traits_def(Pure())
    RESULTS_TYPED_LIKE: ClassVar = ("x", "x")

    def verify_(self) -> None:
        super().verify_()
        x = self.x.type
        check_norm_weight(x, opt_type(self.weight))
        check_residual(x, self.residual.type, self.residual_out.type, self.round_sum)
        check_norm_result("y", self.y.type, x)


Norm = declared_dialect("norm", globals())
