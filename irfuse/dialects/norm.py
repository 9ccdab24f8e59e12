"""The `norm` dialect: RMSNorm, alone or after the residual add that feeds it.

Raising finds every spelling of RMSNorm (pow/mean/rsqrt chains, `x * x`, `F.rms_norm`,
`aten.rms_norm`, vLLM's custom ops) and of the residual add before it, and replaces each by one of
these ops, with eps and the weight offset as properties, so one rewrite matches every eps (vLLM
registers one pattern per eps). Numerics (`docs/numerics.md`): the sum and the norm run in f32,
the weight product in the model dtype.

Which sum the norm reads is part of the op: vLLM (and docs/numerics.md) normalizes the f32 sum
`x.float() + residual.float()` and only rounds the new residual; a model that adds in the model
dtype (Hugging Face: `hidden = residual + hidden` in bf16) normalizes the sum rounded to that
dtype. `norm.add_rms_norm` marks the second reading with the unit property `round_sum`; raising
sets it where the model added in a dtype other than f32 (for an f32 sum both readings agree), and
fusions carry it to the kernels, which differ in their output bits otherwise.

A per-head norm (Qwen3's q/k norm) is `norm.rms_norm` on a rank-3 `[T, heads, head_dim]` x with a
`[head_dim]` weight. Gemma's `x * (1 + w)` is `weight_offset = 1.0`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from xdsl.dialects.builtin import Float64Type, FloatAttr, UnitAttr
from xdsl.ir import Attribute, Dialect, Region, SSAValue
from xdsl.irdl import (
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

from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.raised import RaisedOperation, f64_attr
from irfuse.dialects.shapes import (
    check_float,
    check_min_rank,
    check_rank,
    check_shape,
    dims_agree,
    shape_str,
)


def check_eps(eps: FloatAttr) -> None:
    """eps is a finite float >= 0."""
    value = eps.value.data
    if not (math.isfinite(value) and value >= 0.0):
        raise VerifyException(f"eps must be a finite value >= 0, got {value}")


def check_norm_weight(x: TensorType, weight: TensorType | None, what: str = "x") -> None:
    """x has a float dtype and rank >= 1; weight (if any) is 1-D of x's last dim, float."""
    check_float(what, x)
    check_min_rank(what, x, 1)
    if weight is None:
        return
    check_float("weight", weight)
    check_rank("weight", weight, 1)
    if not dims_agree(weight.dims[0], x.dims[-1]):
        raise VerifyException(
            f"weight has shape {shape_str(weight.dims)} but {what}'s last dim is {x.dims[-1]}"
        )


def check_norm_result(what: str, y: TensorType, x: TensorType, weight: TensorType | None) -> None:
    """y has x's shape, and x's dtype or the promotion of x's and weight's dtypes."""
    check_shape(what, y, x.dims)
    check_norm_dtype(what, y, x, weight)


def check_norm_dtype(what: str, y: TensorType, x: TensorType, weight: TensorType | None) -> None:
    """y has a float dtype. Models round a norm's result to the dtype they compute in next (the
    model dtype after an f32 norm, f32 with an f32 weight): the result's dtype says which, and a
    kernel writes that dtype."""
    check_float(what, y)


@irdl_op_definition
class RmsNormOp(RaisedOperation):
    """`y = x * rsqrt(mean(x^2, -1) + eps) * (weight + weight_offset)` over the last dim.

    ```mlir
    %y = norm.rms_norm %x, weight %w {eps = 1.000000e-06 : f64}
        : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>)
        -> !irfuse.tensor<[s0, 4096], bf16>
    %qn = norm.rms_norm %q, weight %qw
            {eps = 1.000000e-06 : f64, weight_offset = 1.000000e+00 : f64}
        : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[128], bf16>)
        -> !irfuse.tensor<[s0, 32, 128], bf16>
    ```
    Without a weight it is the bare normalisation. y has x's shape; its dtype is the one the model
    rounds the result to (x's, the promotion of x's and weight's, or the model dtype after an f32
    norm).
    """

    name = "norm.rms_norm"

    x = operand_def(TensorType)
    weight = opt_operand_def(TensorType)

    y = result_def(TensorType)

    eps = prop_def(FloatAttr[Float64Type])
    weight_offset = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))

    traits = traits_def(Pure())

    def __init__(
        self,
        x: SSAValue,
        weight: SSAValue | None = None,
        *,
        eps: float,
        weight_offset: float = 0.0,
        result_type: Attribute | None = None,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[x, weight],
            result_types=[result_type or x.type],
            properties={"eps": f64_attr(eps), "weight_offset": f64_attr(weight_offset)},
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        x = self.x.type
        weight = None if self.weight is None else self.weight.type
        check_eps(self.eps)
        check_norm_weight(x, weight)
        check_norm_result("y", self.y.type, x, weight)


@irdl_op_definition
class AddRmsNormOp(RaisedOperation):
    """`residual_out = x + residual; y = rms_norm(residual_out)`: the residual add and the norm.

    ```mlir
    %y, %r = norm.add_rms_norm %x, %res, weight %w {eps = 1.000000e-05 : f64}
        : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>,
           !irfuse.tensor<[4096], bf16>)
        -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
    ```
    The add runs in f32 and `residual_out` is the sum rounded to its dtype (the model dtype). The
    norm reads the unrounded f32 sum (vLLM, `docs/numerics.md`), or, with the unit property
    `round_sum`, the sum rounded to the residual_out dtype, as models that add in the model dtype
    compute it (Hugging Face's `hidden = residual + hidden`, then the norm of `hidden`):

    ```mlir
    %y, %r = norm.add_rms_norm %x, %res, weight %w {eps = 1.000000e-06 : f64, round_sum}
        : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>,
           !irfuse.tensor<[4096], bf16>)
        -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
    ```
    With an f32 residual_out both readings are the same value; raising leaves `round_sum` unset
    there.
    """

    name = "norm.add_rms_norm"

    x = operand_def(TensorType)
    residual = operand_def(TensorType)
    weight = opt_operand_def(TensorType)

    y = result_def(TensorType)
    residual_out = result_def(TensorType)

    eps = prop_def(FloatAttr[Float64Type])
    weight_offset = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))
    round_sum = opt_prop_def(UnitAttr)

    traits = traits_def(Pure())

    def __init__(
        self,
        x: SSAValue,
        residual: SSAValue,
        weight: SSAValue | None = None,
        *,
        eps: float,
        weight_offset: float = 0.0,
        round_sum: bool = False,
        result_types: tuple[Attribute, Attribute] | None = None,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[x, residual, weight],
            result_types=list(result_types or (x.type, x.type)),
            properties={
                "eps": f64_attr(eps),
                "weight_offset": f64_attr(weight_offset),
                "round_sum": UnitAttr() if round_sum else None,
            },
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        x = self.x.type
        residual = self.residual.type
        weight = None if self.weight is None else self.weight.type
        check_eps(self.eps)
        check_norm_weight(x, weight)
        check_float("residual", residual)
        check_shape("residual", residual, x.dims)
        check_norm_result("residual_out", self.residual_out.type, x, residual)
        check_norm_result("y", self.y.type, x, weight)


Norm = Dialect("norm", [RmsNormOp, AddRmsNormOp], [])
