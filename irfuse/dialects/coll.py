"""The `coll` dialect: tensor-parallel collectives.

Raising finds torch's functional collectives (`_c10d_functional.all_reduce` /
`reduce_scatter_tensor` / `all_gather_into_tensor` with their `wait_tensor`) and vLLM's
`vllm.all_reduce` / `reduce_scatter` / `all_gather`, and gives each one op that names its process
group, world size and (where it matters) the dim and the reduction. The sequence-parallel and
async-TP passes rewrite between these, and `fused.all_reduce_rms_norm` absorbs an all-reduce.

The ops are not `Pure`: every rank must run the same collectives, so no pass may drop one.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.dialects.builtin import I64, IntegerAttr, StringAttr
from xdsl.ir import Attribute, Dialect, Region, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects.irfuse import Dim, TensorType, tensor_type
from irfuse.dialects.raised import RaisedOperation, i64_attr
from irfuse.dialects.shapes import MaybeDim, check_shape, mul_dim, normalize_dim

REDUCE_OPS = ("sum", "avg", "max", "min")


def check_world_size(world_size: IntegerAttr) -> int:
    ws = world_size.value.data
    if ws < 1:
        raise VerifyException(f"world_size must be >= 1, got {ws}")
    return ws


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
    if isinstance(size, int):
        if size % world_size:
            raise VerifyException(
                f"dim {dim} of size {size} is not divisible by world_size {world_size}"
            )
        new: MaybeDim = size // world_size
    else:
        new = None
    return (*dims[:dim], new, *dims[dim + 1 :])


def gathered_dims(dims: tuple[Dim, ...], dim: int, world_size: int) -> tuple[MaybeDim, ...]:
    """The gathered tensor: `dim` multiplied by the world size."""
    return (*dims[:dim], mul_dim(dims[dim], world_size), *dims[dim + 1 :])


def _result_type(x: SSAValue, dims: tuple[MaybeDim, ...]) -> TensorType:
    if None in dims:
        raise ValueError(f"give result_type: the collective's dim of {x.type} is symbolic")
    return tensor_type(dims, x.type.dtype)  # type: ignore[arg-type, attr-defined]


def _check_result(y: TensorType, x: TensorType, dims: tuple[MaybeDim, ...]) -> None:
    check_shape("y", y, dims)
    if y.dtype != x.dtype:
        raise VerifyException(f"y has dtype {y.dtype}, expected x's {x.dtype}")


def _props(group: str, world_size: int, **more: Attribute) -> dict[str, Attribute]:
    return {"group": StringAttr(group), "world_size": i64_attr(world_size), **more}


@irdl_op_definition
class AllReduceOp(RaisedOperation):
    """Reduce x over the ranks of `group`; every rank gets the result.

    ```mlir
    %y = coll.all_reduce %x {group = "tp", world_size = 2 : i64, reduce_op = "sum"}
        : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
    ```
    y is typed like x; reduce_op is sum, avg, max or min.
    """

    name = "coll.all_reduce"

    x = operand_def(TensorType)

    y = result_def(TensorType)

    group = prop_def(StringAttr)
    world_size = prop_def(IntegerAttr[I64])
    reduce_op = prop_def(StringAttr, default_value=StringAttr("sum"))

    def __init__(
        self,
        x: SSAValue,
        *,
        group: str,
        world_size: int,
        reduce_op: str = "sum",
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[x],
            result_types=[x.type],
            properties=_props(group, world_size, reduce_op=StringAttr(reduce_op)),
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        check_world_size(self.world_size)
        check_reduce_op(self.reduce_op)
        x = self.x.type
        _check_result(self.y.type, x, x.dims)


@irdl_op_definition
class ReduceScatterOp(RaisedOperation):
    """Reduce x over the ranks of `group`; each rank keeps its 1/world_size slice along `dim`.

    ```mlir
    %y = coll.reduce_scatter %x
            {group = "tp", world_size = 4 : i64, dim = 0 : i64, reduce_op = "sum"}
        : (!irfuse.tensor<[256, 4096], bf16>) -> !irfuse.tensor<[64, 4096], bf16>
    ```
    `dim` may be negative; a static size along it must be divisible by world_size.
    """

    name = "coll.reduce_scatter"

    x = operand_def(TensorType)

    y = result_def(TensorType)

    group = prop_def(StringAttr)
    world_size = prop_def(IntegerAttr[I64])
    dim = prop_def(IntegerAttr[I64], default_value=i64_attr(0))
    reduce_op = prop_def(StringAttr, default_value=StringAttr("sum"))

    def __init__(
        self,
        x: SSAValue,
        *,
        group: str,
        world_size: int,
        dim: int = 0,
        reduce_op: str = "sum",
        result_type: Attribute | None = None,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_type is None:
            xt: TensorType = x.type  # type: ignore[assignment]
            d = normalize_dim(dim, xt.rank, "dim")
            result_type = _result_type(x, scattered_dims(xt.dims, d, world_size))
        super().__init__(
            operands=[x],
            result_types=[result_type],
            properties=_props(
                group, world_size, dim=i64_attr(dim), reduce_op=StringAttr(reduce_op)
            ),
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        ws = check_world_size(self.world_size)
        check_reduce_op(self.reduce_op)
        x = self.x.type
        d = normalize_dim(self.dim.value.data, x.rank, "dim")
        _check_result(self.y.type, x, scattered_dims(x.dims, d, ws))


@irdl_op_definition
class AllGatherOp(RaisedOperation):
    """Concatenate x from every rank of `group` along `dim`.

    ```mlir
    %y = coll.all_gather %x {group = "tp", world_size = 4 : i64, dim = 0 : i64}
        : (!irfuse.tensor<[64, 4096], bf16>) -> !irfuse.tensor<[256, 4096], bf16>
    ```
    `dim` may be negative; y's size along it is x's times world_size.
    """

    name = "coll.all_gather"

    x = operand_def(TensorType)

    y = result_def(TensorType)

    group = prop_def(StringAttr)
    world_size = prop_def(IntegerAttr[I64])
    dim = prop_def(IntegerAttr[I64], default_value=i64_attr(0))

    def __init__(
        self,
        x: SSAValue,
        *,
        group: str,
        world_size: int,
        dim: int = 0,
        result_type: Attribute | None = None,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_type is None:
            xt: TensorType = x.type  # type: ignore[assignment]
            d = normalize_dim(dim, xt.rank, "dim")
            result_type = _result_type(x, gathered_dims(xt.dims, d, world_size))
        super().__init__(
            operands=[x],
            result_types=[result_type],
            properties=_props(group, world_size, dim=i64_attr(dim)),
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        ws = check_world_size(self.world_size)
        x = self.x.type
        d = normalize_dim(self.dim.value.data, x.rank, "dim")
        _check_result(self.y.type, x, gathered_dims(x.dims, d, ws))


Coll = Dialect("coll", [AllReduceOp, ReduceScatterOp, AllGatherOp], [])
