"""The `coll` dialect: tensor-parallel collectives (torch's functional collectives with their
`wait_tensor`, or vLLM's `all_reduce` / `reduce_scatter` / `all_gather`, raised to one op each).

`CollectiveOperation` carries the process group and world size for these ops and the fused ones
that absorb them. The ops are not `Pure`: every rank must run the same collectives.

Each op's textual form: `filecheck/dialects/coll/ops.mlir`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from xdsl.dialects.builtin import I64, IntegerAttr, StringAttr
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects.irfuse import RaisedOperation, TensorType, derived_type
from irfuse.ir.dialect import declared_dialect
from irfuse.ir.shapes import Dim, MaybeDim, check_same_dtype, check_shape, mul_dim, normalize_dim
from irfuse.ir.syntax import i64_attr

REDUCE_OPS = ("sum", "avg", "max", "min")


def check_reduce_op(reduce_op: StringAttr) -> None:
    if reduce_op.data not in REDUCE_OPS:
        raise VerifyException(
            f"reduce_op must be one of {', '.join(REDUCE_OPS)}, got '{reduce_op.data}'"
        )


def scattered_dims(dims: tuple[Dim, ...], dim: int, world_size: int) -> tuple[MaybeDim, ...]:
    """The shard each rank keeps: `dim` divided by the world size (which must divide it)."""
    if world_size < 1:
        raise VerifyException(f"world_size must be >= 1, got {world_size}")
    size = dims[dim]
    if isinstance(size, int) and size % world_size:
        raise VerifyException(
            f"dim {dim} of size {size} is not divisible by world_size {world_size}"
        )
    new = size // world_size if isinstance(size, int) else None
    return (*dims[:dim], new, *dims[dim + 1 :])


def gathered_dims(dims: tuple[Dim, ...], dim: int, world_size: int) -> tuple[MaybeDim, ...]:
    """The gathered tensor: `dim` multiplied by the world size."""
    return (*dims[:dim], mul_dim(dims[dim], world_size), *dims[dim + 1 :])


class CollectiveOperation(IRDLOperation):
    """The process `group` an op communicates over and its `world_size` (>= 1)."""

    group = prop_def(StringAttr)
    world_size = prop_def(IntegerAttr[I64])

    def verify_(self) -> None:
        if self.world_size.value.data < 1:
            raise VerifyException(f"world_size must be >= 1, got {self.world_size.value.data}")
        super().verify_()


def check_result(y: TensorType, x: TensorType, dims: tuple[MaybeDim, ...]) -> None:
    check_shape("y", y, dims)
    check_same_dtype("y", y, x, "x")


def _dim(x: TensorType, dim: int) -> int:
    return normalize_dim(dim, x.rank, "dim")


@irdl_op_definition
class AllReduceOp(CollectiveOperation, RaisedOperation):
    """Reduce x over the ranks of `group` (sum, avg, max or min); every rank gets the result."""

    name = "coll.all_reduce"

    x = operand_def(TensorType)
    y = result_def(TensorType)

    reduce_op = prop_def(StringAttr, default_value=StringAttr("sum"))
    RESULTS_TYPED_LIKE: ClassVar = ("x",)

    def verify_(self) -> None:
        super().verify_()
        check_reduce_op(self.reduce_op)
        check_result(self.y.type, self.x.type, self.x.type.dims)


@irdl_op_definition
class ReduceScatterOp(CollectiveOperation, RaisedOperation):
    """Reduce x over the ranks of `group`; each rank keeps its 1/world_size slice along `dim`
    (which may be negative)."""

    name = "coll.reduce_scatter"

    x = operand_def(TensorType)
    y = result_def(TensorType)

    dim = prop_def(IntegerAttr[I64], default_value=i64_attr(0))
    reduce_op = prop_def(StringAttr, default_value=StringAttr("sum"))

    @classmethod
    def infer_result_types(cls, x, world_size, dim=0, **_: Any) -> list[TensorType]:
        return [derived_type(x.type, scattered_dims(x.type.dims, _dim(x.type, dim), world_size))]

    def verify_(self) -> None:
        super().verify_()
        check_reduce_op(self.reduce_op)
        x, ws = self.x.type, self.world_size.value.data
        check_result(self.y.type, x, scattered_dims(x.dims, _dim(x, self.dim.value.data), ws))


@irdl_op_definition
class AllGatherOp(CollectiveOperation, RaisedOperation):
    """Concatenate x from every rank of `group` along `dim` (which may be negative)."""

    name = "coll.all_gather"

    x = operand_def(TensorType)
    y = result_def(TensorType)

    dim = prop_def(IntegerAttr[I64], default_value=i64_attr(0))

    @classmethod
    def infer_result_types(cls, x, world_size, dim=0, **_: Any) -> list[TensorType]:
        return [derived_type(x.type, gathered_dims(x.type.dims, _dim(x.type, dim), world_size))]

    def verify_(self) -> None:
        super().verify_()
        x, ws = self.x.type, self.world_size.value.data
        check_result(self.y.type, x, gathered_dims(x.dims, _dim(x, self.dim.value.data), ws))


Coll = declared_dialect("coll", globals())
