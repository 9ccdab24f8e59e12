"""The `act` dialect: the gated activation SiLU·Mul, and padding of the last dim.

- `act.silu_mul` is `silu(gate) * up`: one operand `x = [gate | up]` (vLLM's `silu_and_mul`,
  `[..., 2d] -> [..., d]`), or the two halves as separate operands (Hugging Face's MLP,
  `act_fn(gate_proj(x)) * up_proj(x)`). Numerics: `docs/numerics.md`, "SiLU·Mul".
- `act.pad` is `F.pad` on the last dim with a constant (vLLM pads the router GEMM's input to a
  multiple of 128 or 256 on ROCm; `fuse_act_padding` folds it into the norm before).
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.dialects.builtin import I64, Float64Type, FloatAttr, IntegerAttr
from xdsl.ir import Attribute, Dialect, Region, SSAValue
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

from irfuse.dialects.irfuse import TensorType, tensor_type
from irfuse.dialects.raised import RaisedOperation, f64_attr, i64_attr
from irfuse.dialects.shapes import (
    MaybeDim,
    add_dim,
    check_float,
    check_min_rank,
    check_same_type,
    check_shape,
    div_dim,
    divisible,
    shape_str,
)


def silu_mul_dims(x: TensorType, what: str = "x") -> tuple[MaybeDim, ...]:
    """`[..., 2d] -> [..., d]` for a float x with an even last dim (shared with the fused ops)."""
    check_float(what, x)
    check_min_rank(what, x, 1)
    last = x.dims[-1]
    if not divisible(last, 2):
        raise VerifyException(
            f"{what} has shape {shape_str(x.dims)}: its last dim [gate | up] must be even"
        )
    return (*x.dims[:-1], div_dim(last, 2))


@irdl_op_definition
class SiluMulOp(RaisedOperation):
    """`y = silu(gate) * up`, from `x = [gate | up]` or from separate `gate` (x) and `up`.

    ```mlir
    %y = act.silu_mul %x : (!irfuse.tensor<[s0, 28672], bf16>) -> !irfuse.tensor<[s0, 14336], bf16>
    %y2 = act.silu_mul %gate, up %up
        : (!irfuse.tensor<[s0, 14336], bf16>, !irfuse.tensor<[s0, 14336], bf16>)
        -> !irfuse.tensor<[s0, 14336], bf16>
    ```
    One operand: x `[..., 2d]` (even last dim) gives y `[..., d]`. Two operands: gate and up of one
    type give y of that type. Float dtypes; y has x's dtype.
    """

    name = "act.silu_mul"

    x = operand_def(TensorType)
    up = opt_operand_def(TensorType)

    y = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(
        self,
        x: SSAValue,
        up: SSAValue | None = None,
        *,
        result_type: Attribute | None = None,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_type is None:
            xt: TensorType = x.type  # type: ignore[assignment]
            if up is not None:
                result_type = xt
            else:
                last = xt.dims[-1]
                if not isinstance(last, int):
                    raise ValueError(f"give result_type: the last dim of {xt} is symbolic")
                result_type = tensor_type((*xt.dims[:-1], last // 2), xt.dtype)
        super().__init__(
            operands=[x, up],
            result_types=[result_type],
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        x = self.x.type
        y = self.y.type
        if self.up is None:
            dims = silu_mul_dims(x)
        else:
            check_float("x", x)
            check_same_type("up", self.up.type, x, "x (the gate)")
            dims = x.dims
        check_shape("y", y, dims)
        if y.dtype != x.dtype:
            raise VerifyException(f"y has dtype {y.dtype}, expected x's {x.dtype}")


def pad_dims(x: TensorType, low: int, high: int) -> tuple[MaybeDim, ...]:
    if low < 0 or high < 0:
        raise VerifyException(f"pad amounts must be >= 0, got low {low}, high {high}")
    check_min_rank("x", x, 1)
    return (*x.dims[:-1], add_dim(x.dims[-1], low + high))


@irdl_op_definition
class PadOp(RaisedOperation):
    """Pad the last dim with `low` values before and `high` after, all equal to `value`.

    ```mlir
    %p = act.pad %x {low = 0 : i64, high = 192 : i64}
        : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 3072], bf16>
    ```
    y has x's dtype and x's dims, the last one grown by low + high (both >= 0; F.pad's negative
    amounts crop and are not this op).
    """

    name = "act.pad"

    x = operand_def(TensorType)

    y = result_def(TensorType)

    low = prop_def(IntegerAttr[I64])
    high = prop_def(IntegerAttr[I64])
    value = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))

    traits = traits_def(Pure())

    def __init__(
        self,
        x: SSAValue,
        *,
        low: int = 0,
        high: int,
        value: float = 0.0,
        result_type: Attribute | None = None,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_type is None:
            xt: TensorType = x.type  # type: ignore[assignment]
            dims = pad_dims(xt, low, high)
            if None in dims:
                raise ValueError(f"give result_type: the last dim of {xt} is symbolic")
            result_type = tensor_type(dims, xt.dtype)  # type: ignore[arg-type]
        super().__init__(
            operands=[x],
            result_types=[result_type],
            properties={"low": i64_attr(low), "high": i64_attr(high), "value": f64_attr(value)},
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        x = self.x.type
        dims = pad_dims(x, self.low.value.data, self.high.value.data)
        check_shape("y", self.y.type, dims)
        if self.y.type.dtype != x.dtype:
            raise VerifyException(f"y has dtype {self.y.type.dtype}, expected x's {x.dtype}")


Act = Dialect("act", [SiluMulOp, PadOp], [])
