"""The `gemm` dialect: matrix products, plain (`aten.mm`, `addmm`, `linear`) and FP8-scaled
(`aten._scaled_mm`, vLLM's `_C.cutlass_scaled_mm`).

The operand layout is `aten.mm`'s, `a [M, K] @ b [K, N]`: a linear layer's weight appears as its
transposed `[K, N]` view. `check_matmul` and `check_scaled_matmul` hold the rules for these ops
and the async-TP fused ones.

Each op's textual form: `filecheck/dialects/gemm/ops.mlir`.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import f32
from xdsl.ir import Attribute, TypeAttribute
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects.irfuse import RaisedOperation, TensorType, tensor_type
from irfuse.ir import shapes
from irfuse.ir.dialect import declared_dialect
from irfuse.ir.shapes import Dim
from irfuse.ir.syntax import opt_type


def _check_operands(a: TensorType, b: TensorType) -> tuple[Dim, Dim]:
    """a [M, K] and b [K, N] with agreeing K; returns (M, N)."""
    shapes.check_rank("a", a, 2)
    shapes.check_rank("b", b, 2)
    shapes.check_dim("b's dim 0 (K)", b.dims[0], a.dims[1])
    return a.dims[0], b.dims[1]


def _check_bias(bias: TensorType | None, n: Dim, dtype: Attribute) -> None:
    if bias is not None:
        shapes.check_shape("bias", bias, (n,))
        shapes.check_dtype("bias", bias, dtype)


def check_matmul(
    a: TensorType, b: TensorType, bias: TensorType | None
) -> tuple[tuple[Dim, Dim], Attribute]:
    """A plain product: float a and b of one dtype; returns the result dims and dtype."""
    m, n = _check_operands(a, b)
    shapes.check_float("a", a)
    shapes.check_same_dtype("b", b, a, "a")
    _check_bias(bias, n, a.dtype)
    return (m, n), a.dtype


def check_scaled_matmul(
    a: TensorType, b: TensorType, scale_a: TensorType, scale_b: TensorType,
    bias: TensorType | None, out_dtype: Attribute, a_rows: Dim | None = None,
) -> tuple[Dim, Dim]:
    """An FP8 product `(a * scale_a) @ (b * scale_b)`; returns the result dims. a and b are fp8;
    scale_a is f32 per-tensor (one element) or row-wise `[M, 1]`, scale_b per-tensor or
    column-wise `[1, N]`; bias has `out_dtype`. `a_rows` overrides M for a row-wise scale_a (a
    fused all-gather's replicated scale has the gathered rows)."""
    m, n = _check_operands(a, b)
    for what, t in (("a", a), ("b", b)):
        if not shapes.is_fp8(t.dtype):
            raise VerifyException(f"{what} of a scaled matmul must be fp8, got {t.dtype}")
    if not shapes.is_float(out_dtype):
        raise VerifyException(f"out_dtype must be a float dtype, got {out_dtype}")
    shapes.check_dtype("scale_a", scale_a, f32)
    shapes.check_dtype("scale_b", scale_b, f32)
    if not shapes.is_one_element(scale_a.dims):
        rows = m if a_rows is None else a_rows
        shapes.check_shape("scale_a (per-tensor [1] or row-wise [M, 1])", scale_a, (rows, 1))
    if not shapes.is_one_element(scale_b.dims):
        shapes.check_shape("scale_b (per-tensor [1] or column-wise [1, N])", scale_b, (1, n))
    _check_bias(bias, n, out_dtype)
    return m, n


def product_type(a: Any, b: Any, dtype: Attribute | None = None) -> TensorType:
    """A builder's default: `[M, N]` of `a [M, K] @ b [K, N]`, in `dtype` or a's."""
    return tensor_type((a.type.dims[0], b.type.dims[1]), dtype or a.type.dtype)


@irdl_op_definition
class MatmulOp(RaisedOperation):
    """`c = a @ b (+ bias)` on `a [M, K]`, `b [K, N]`, floats of one dtype (c's and bias's)."""

    name = "gemm.matmul"

    a = operand_def(TensorType)
    b = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    c = result_def(TensorType)

    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, a, b, **_: Any) -> list[TensorType]:
        return [product_type(a, b)]

    def verify_(self) -> None:
        dims, dtype = check_matmul(self.a.type, self.b.type, opt_type(self.bias))
        shapes.check_shape("c", self.c.type, dims)
        shapes.check_dtype("c", self.c.type, dtype)


@irdl_op_definition
class ScaledMatmulOp(RaisedOperation):
    """`c = (a * scale_a) @ (b * scale_b) (+ bias)` in `out_dtype`, on fp8 a and b; f32 scales
    per-tensor (one element) or row-wise (`[M, 1]` for a, `[1, N]` for b)."""

    name = "gemm.scaled_matmul"

    a = operand_def(TensorType)
    b = operand_def(TensorType)
    scale_a = operand_def(TensorType)
    scale_b = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    c = result_def(TensorType)

    out_dtype = prop_def(TypeAttribute)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, a, b, out_dtype, **_: Any) -> list[TensorType]:
        return [product_type(a, b, out_dtype)]

    def verify_(self) -> None:
        dims = check_scaled_matmul(
            self.a.type, self.b.type, self.scale_a.type, self.scale_b.type, opt_type(self.bias),
            self.out_dtype,
        )
        c = self.c.type
        shapes.check_shape("c", c, dims)
        if c.dtype != self.out_dtype:
            raise VerifyException(f"c has dtype {c.dtype} but out_dtype is {self.out_dtype}")


Gemm = declared_dialect("gemm", globals())
