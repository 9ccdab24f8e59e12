"""Dimension and dtype checks that verifiers share, on any tensor type with `dims`, `rank` and
`dtype` (`!irfuse.tensor` is one).

A dim is an `int` (static) or a `str` (a symbolic size such as `s0` or `2*s0`, as Dynamo names it).
Verifiers can prove a shape wrong only where the sizes are known:

- two dims agree if they are equal ints or equal symbol strings;
- an int against a symbol cannot be proven wrong, so it passes;
- two different symbol strings disagree (Dynamo gives equal sizes the same symbol).

Derived dims (`d * k`, `d / k`, `round_up(d, m)`) are computed for static dims only; for a symbolic
dim they are `None`, "unknown", which agrees with anything.

Every check is a few comparisons on tuples the cached `dims` already hold: the compile path
verifies thousands of ops, so nothing here prints, parses or allocates IR.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from xdsl.dialects.builtin import (
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E5M2FNUZType,
    Float8E5M2Type,
    IntegerType,
    Signedness,
    bf16,
    f16,
    f32,
    f64,
    i1,
)
from xdsl.ir import Attribute
from xdsl.utils.exceptions import VerifyException

Dim = int | str
"""A tensor dimension: a static size or a symbolic size expression."""

MaybeDim = Dim | None
"""A dim, or `None` where it cannot be computed (a derived symbolic dim)."""

FLOAT_DTYPES: frozenset[Attribute] = frozenset({f16, bf16, f32, f64})
"""The dtypes a model computes in (and a norm, an activation or attention accepts)."""

F8E4M3FN = Float8E4M3FNType()
F8E4M3FNUZ = Float8E4M3FNUZType()
FP8_QUANT_DTYPES: frozenset[Attribute] = frozenset({F8E4M3FN, F8E4M3FNUZ})
"""The dtypes an FP8 quantization yields: e4m3fn (CUDA) and its ROCm `fnuz` variant."""

FP8_DTYPES: frozenset[Attribute] = FP8_QUANT_DTYPES | {Float8E5M2Type(), Float8E5M2FNUZType()}
"""Every fp8 dtype (a scaled GEMM also takes e5m2 operands)."""

UI8 = IntegerType(8, Signedness.UNSIGNED)
"""Packed NVFP4 values: two e2m1 values a byte."""


class Shaped(Protocol):
    """What the checks read of a tensor type."""

    dtype: Attribute

    @property
    def dims(self) -> tuple[Dim, ...]: ...

    @property
    def rank(self) -> int: ...


# --- dims ---------------------------------------------------------------------------------------


def dims_agree(a: MaybeDim, b: MaybeDim) -> bool:
    """Whether two dims may be equal: equal ints or symbols, or a pair that cannot be compared."""
    if a is None or b is None or a == b:
        return True
    return type(a) is not type(b)


def shape_str(dims: Sequence[MaybeDim]) -> str:
    """`[s0, 4096]`, with `?` for an unknown dim; used in verifier messages."""
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def mul_dim(dim: Dim, factor: int) -> MaybeDim:
    """`dim * factor` for a static dim; unknown for a symbolic one."""
    return dim * factor if isinstance(dim, int) else None


def div_dim(dim: Dim, divisor: int) -> MaybeDim:
    """`dim / divisor` for a static dim that it divides; unknown otherwise."""
    if isinstance(dim, int) and dim % divisor == 0:
        return dim // divisor
    return None


def add_dim(dim: Dim, amount: int) -> MaybeDim:
    """`dim + amount` for a static dim; unknown for a symbolic one."""
    return dim + amount if isinstance(dim, int) else None


def round_up_dim(dim: Dim, multiple: int) -> MaybeDim:
    """`dim` rounded up to a multiple of `multiple` for a static dim; unknown otherwise."""
    if isinstance(dim, int):
        return -(-dim // multiple) * multiple
    return None


def divisible(dim: Dim, divisor: int) -> bool:
    """False only when a static dim is provably not a multiple of `divisor`."""
    return not isinstance(dim, int) or dim % divisor == 0


def static_numel(dims: Sequence[Dim]) -> int | None:
    """The number of elements when every dim is static, else None."""
    n = 1
    for d in dims:
        if not isinstance(d, int):
            return None
        n *= d
    return n


def is_one_element(dims: Sequence[Dim]) -> bool:
    """A per-tensor scale: every dim is the static size 1 (rank 0 included)."""
    return all(d == 1 for d in dims)


def normalize_dim(dim: int, rank: int, what: str) -> int:
    """A dim index in [-rank, rank) made non-negative, or a VerifyException naming `what`."""
    if not -rank <= dim < rank:
        raise VerifyException(f"{what} {dim} is out of range for rank {rank}")
    return dim + rank if dim < 0 else dim


def check_dim(what: str, actual: Dim, expected: MaybeDim) -> None:
    """Raise unless `actual` may equal `expected`."""
    if not dims_agree(actual, expected):
        raise VerifyException(f"{what} is {actual}, expected {expected}")


def check_shape(what: str, actual: Shaped, expected: Sequence[MaybeDim]) -> None:
    """Raise unless `actual` has `expected`'s rank and every dim may agree."""
    dims = actual.dims
    if len(dims) != len(expected) or not all(map(dims_agree, dims, expected)):
        raise VerifyException(f"{what} has shape {shape_str(dims)}, expected {shape_str(expected)}")


def check_rank(what: str, actual: Shaped, rank: int) -> None:
    if actual.rank != rank:
        raise VerifyException(f"{what} must have rank {rank}, got {shape_str(actual.dims)}")


def check_min_rank(what: str, actual: Shaped, rank: int) -> None:
    if actual.rank < rank:
        raise VerifyException(f"{what} must have rank >= {rank}, got {shape_str(actual.dims)}")


def check_same_dtype(what: str, actual: Shaped, expected: Shaped, of: str) -> None:
    """Raise unless `actual` has the dtype of `expected` (named `of`)."""
    if actual.dtype != expected.dtype:
        raise VerifyException(f"{what} has dtype {actual.dtype}, expected {of}'s {expected.dtype}")


def check_same_type(what: str, actual: Shaped, expected: Shaped, of: str) -> None:
    """Raise unless two tensor types are equal (dims compared as `dims_agree` does)."""
    check_same_dtype(what, actual, expected, of)
    check_shape(what, actual, expected.dims)


def check_one_element(what: str, actual: Shaped) -> None:
    if not is_one_element(actual.dims):
        raise VerifyException(f"{what} must hold one element, got shape {shape_str(actual.dims)}")


# --- dtypes -------------------------------------------------------------------------------------


def is_float(dtype: Attribute) -> bool:
    return dtype in FLOAT_DTYPES


def is_fp8_quant(dtype: Attribute) -> bool:
    return dtype in FP8_QUANT_DTYPES


def is_fp8(dtype: Attribute) -> bool:
    return dtype in FP8_DTYPES


def is_integer(dtype: Attribute) -> bool:
    """An integer index dtype (i32, i64, ...); bool (i1) excluded."""
    return isinstance(dtype, IntegerType) and dtype != i1


def is_bool(dtype: Attribute) -> bool:
    return dtype == i1


_FLOAT_RANK = {f16: 1, bf16: 1, f32: 2, f64: 3}


def promote(a: Attribute, b: Attribute) -> Attribute:
    """torch's type promotion for two model float dtypes (bf16 with f16 gives f32)."""
    if a == b:
        return a
    ra, rb = _FLOAT_RANK.get(a), _FLOAT_RANK.get(b)
    if ra is None or rb is None:
        raise VerifyException(f"no float promotion of {a} and {b}")
    if ra == rb:
        return f32
    return a if ra > rb else b


def check_float(what: str, t: Shaped) -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise VerifyException(
            f"{what} must have a float dtype (f16, bf16, f32, f64), got {t.dtype}"
        )


def check_fp8_quant(what: str, t: Shaped) -> None:
    if t.dtype not in FP8_QUANT_DTYPES:
        raise VerifyException(f"{what} must have dtype f8E4M3FN or f8E4M3FNUZ, got {t.dtype}")


def check_dtype(what: str, t: Shaped, dtype: Attribute) -> None:
    if t.dtype != dtype:
        raise VerifyException(f"{what} must have dtype {dtype}, got {t.dtype}")


def check_integer(what: str, t: Shaped) -> None:
    if not is_integer(t.dtype):
        raise VerifyException(f"{what} must have an integer dtype, got {t.dtype}")
