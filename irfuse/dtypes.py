"""torch dtypes <-> xDSL element types, the one mapping the IR uses for tensor dtypes."""

from __future__ import annotations

import torch
from xdsl.dialects import builtin
from xdsl.ir import Attribute

_PAIRS: list[tuple[torch.dtype, Attribute]] = [
    (torch.float32, builtin.f32),
    (torch.float64, builtin.f64),
    (torch.float16, builtin.f16),
    (torch.bfloat16, builtin.bf16),
    (torch.float8_e4m3fn, builtin.Float8E4M3FNType()),
    (torch.float8_e4m3fnuz, builtin.Float8E4M3FNUZType()),
    (torch.float8_e5m2, builtin.Float8E5M2Type()),
    (torch.float8_e5m2fnuz, builtin.Float8E5M2FNUZType()),
    (torch.float8_e8m0fnu, builtin.Float8E8M0FNUType()),
    (torch.int64, builtin.i64),
    (torch.int32, builtin.i32),
    (torch.int16, builtin.IntegerType(16)),
    (torch.int8, builtin.IntegerType(8)),
    (torch.uint8, builtin.IntegerType(8, builtin.Signedness.UNSIGNED)),
    (torch.uint16, builtin.IntegerType(16, builtin.Signedness.UNSIGNED)),
    (torch.uint32, builtin.IntegerType(32, builtin.Signedness.UNSIGNED)),
    (torch.uint64, builtin.IntegerType(64, builtin.Signedness.UNSIGNED)),
    (torch.bool, builtin.i1),
    (torch.complex64, builtin.ComplexType(builtin.f32)),
    (torch.complex128, builtin.ComplexType(builtin.f64)),
]
if hasattr(torch, "float4_e2m1fn_x2"):
    # Packed fp4 pairs: one byte holds two e2m1 values; the IR names it as MLIR does for fp4.
    _PAIRS.append((torch.float4_e2m1fn_x2, builtin.Float4E2M1FNType()))

_TO_IR: dict[torch.dtype, Attribute] = dict(_PAIRS)
_TO_TORCH: dict[Attribute, torch.dtype] = {ir: t for t, ir in _PAIRS}
IR_DTYPES: tuple[Attribute, ...] = tuple(_TO_TORCH)
"""The element types that stand for torch dtypes."""

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz)


class UnsupportedDtype(TypeError):
    """A dtype irfuse cannot represent."""


def to_ir(dtype: torch.dtype) -> Attribute:
    """The xDSL element type of a torch dtype."""
    try:
        return _TO_IR[dtype]
    except KeyError:
        raise UnsupportedDtype(f"irfuse has no IR type for torch dtype {dtype}") from None


def to_torch(element_type: Attribute) -> torch.dtype:
    """The torch dtype of an xDSL element type."""
    try:
        return _TO_TORCH[element_type]
    except KeyError:
        raise UnsupportedDtype(f"irfuse has no torch dtype for IR type {element_type}") from None


def is_ir_dtype(attr: Attribute) -> bool:
    return attr in _TO_TORCH


def is_float(element_type: Attribute) -> bool:
    return to_torch(element_type).is_floating_point


def is_fp8(element_type: Attribute) -> bool:
    return _TO_TORCH.get(element_type) in FP8_DTYPES
