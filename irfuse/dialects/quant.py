"""The `quant` dialect: FP8 and NVFP4 quantization, with the scheme as an attribute.

`#quant.scheme<...>` (`QuantScheme`) names how scales are found and shaped (`docs/numerics.md`):
static per-tensor (`static_tensor`, an f32 operand of one element), computed per tensor
(`dynamic_tensor`), per token (`dynamic_token`, `[..., 1]`) or per group (`group 128`,
`[..., H/g]`, with the flags `col_major`, `tma_aligned` and `ue8m0`), or NVFP4 (`nvfp4`, fp8
block scales of 16 values, swizzled). Fused ops carry the scheme of the quant they absorbed, so
one rewrite covers every scheme.

The spelling of the scaling is kept from raising to the kernel, since the two round differently
next to ties (`docs/numerics.md`): a static quant scales by `x * (1 / s)`, or by `x / s` with the
unit property `divide`; per-token and per-group quants by `x / s`, or by `x * (1 / s)` with
`reciprocal`. `QuantOperation` carries `scheme` and `divide` for every op that quantizes, fused
ones included, and the `check_*` helpers hold the scheme's rules for all of them.

Each op's and scheme's textual form: `filecheck/dialects/quant/ops.mlir` (`nvfp4`, which
only fused ops take as a scheme, in `filecheck/dialects/fused/ops.mlir`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, ClassVar

from xdsl.dialects.builtin import IntAttr, StringAttr, UnitAttr, f32
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects.irfuse import RaisedOperation, TensorType, tensor_type
from irfuse.ir import shapes
from irfuse.ir.dialect import declared_dialect
from irfuse.ir.shapes import F8E4M3FN, UI8, Dim, MaybeDim
from irfuse.ir.syntax import opt_type

STATIC_TENSOR = "static_tensor"
DYNAMIC_TENSOR = "dynamic_tensor"
DYNAMIC_TOKEN = "dynamic_token"
GROUP = "group"
NVFP4 = "nvfp4"
KINDS = (STATIC_TENSOR, DYNAMIC_TENSOR, DYNAMIC_TOKEN, GROUP, NVFP4)
GROUP_SIZES = (128, 64)
NVFP4_BLOCK = 16
_FLAGS = ("col_major", "ue8m0", "tma_aligned")


@irdl_attr_definition
class QuantScheme(ParametrizedAttribute):
    """How a quantization finds and lays out its scales: `static_tensor`, `dynamic_token`,
    `dynamic_tensor`, `group` (of 128 or 64 values, with flags) or `nvfp4`.

    Group flags: `col_major` (scales stored transposed, `[H/g, T]`; the IR keeps the logical
    `[T, H/g]`), `tma_aligned` (T padded to a multiple of 4; needs `col_major`), `ue8m0` (scales
    rounded up to powers of two). Build them with the cached static methods
    (`QuantScheme.per_group(128, col_major=True)`).
    """

    name = "quant.scheme"

    kind: StringAttr
    group: IntAttr
    col_major: IntAttr
    ue8m0: IntAttr
    tma_aligned: IntAttr

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.kind.data)
            if self.kind.data == GROUP:
                printer.print_string(f" {self.group.data}")
                for flag in _FLAGS:
                    if getattr(self, flag).data:
                        printer.print_string(f", {flag}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            kind = parser.parse_keyword_in(KINDS, " as a quant scheme kind")
            group = NVFP4_BLOCK if kind == NVFP4 else 0
            flags = dict.fromkeys(_FLAGS, 0)
            if kind == GROUP:
                group = parser.parse_integer(allow_boolean=False, allow_negative=False)
                while parser.parse_optional_punctuation(","):
                    flags[parser.parse_keyword_in(_FLAGS, " as a group scheme flag")] = 1
        return (StringAttr(kind), IntAttr(group), *(IntAttr(flags[f]) for f in _FLAGS))

    def verify(self) -> None:
        kind = self.kind.data
        if kind not in KINDS:
            raise VerifyException(f"unknown quant scheme kind '{kind}', expected one of {KINDS}")
        group = self.group.data
        flags = [f for f in _FLAGS if getattr(self, f).data]
        if kind == GROUP:
            if group not in GROUP_SIZES:
                raise VerifyException(f"group size must be 128 or 64, got {group}")
            if self.tma_aligned.data and not self.col_major.data:
                raise VerifyException("tma_aligned scales need col_major")
        else:
            if group != (NVFP4_BLOCK if kind == NVFP4 else 0):
                raise VerifyException(f"a {kind} scheme has no group size, got {group}")
            if flags:
                raise VerifyException(f"a {kind} scheme takes no flags, got {', '.join(flags)}")

    # --- constructors ---

    @staticmethod
    @cache
    def get(kind: str, group: int = 0, col_major: bool = False, ue8m0: bool = False,
            tma_aligned: bool = False) -> QuantScheme:
        if kind == NVFP4 and group == 0:
            group = NVFP4_BLOCK
        flags = (IntAttr(int(col_major)), IntAttr(int(ue8m0)), IntAttr(int(tma_aligned)))
        scheme = QuantScheme(StringAttr(kind), IntAttr(group), *flags)
        scheme.verify()
        return scheme

    @staticmethod
    def static_tensor() -> QuantScheme:
        return QuantScheme.get(STATIC_TENSOR)

    @staticmethod
    def dynamic_tensor() -> QuantScheme:
        return QuantScheme.get(DYNAMIC_TENSOR)

    @staticmethod
    def dynamic_token() -> QuantScheme:
        return QuantScheme.get(DYNAMIC_TOKEN)

    @staticmethod
    def per_group(
        group: int, *, col_major: bool = False, ue8m0: bool = False, tma_aligned: bool = False
    ) -> QuantScheme:
        return QuantScheme.get(GROUP, group, col_major, ue8m0, tma_aligned)

    @staticmethod
    def nvfp4() -> QuantScheme:
        return QuantScheme.get(NVFP4)

    # --- questions passes ask ---

    @property
    def is_static(self) -> bool:
        """The scale is an input (static per-tensor); every other scheme computes it."""
        return self.kind.data == STATIC_TENSOR

    @property
    def is_dynamic(self) -> bool:
        return self.kind.data in (DYNAMIC_TENSOR, DYNAMIC_TOKEN, GROUP)

    @property
    def is_per_token(self) -> bool:
        return self.kind.data == DYNAMIC_TOKEN

    @property
    def is_per_tensor(self) -> bool:
        return self.kind.data in (STATIC_TENSOR, DYNAMIC_TENSOR)

    @property
    def is_group(self) -> bool:
        return self.kind.data == GROUP

    @property
    def is_nvfp4(self) -> bool:
        return self.kind.data == NVFP4

    @property
    def is_fp8(self) -> bool:
        return self.kind.data != NVFP4

    @property
    def group_size(self) -> int | None:
        """The group size of a group scheme, the block size (16) of NVFP4, else None."""
        return self.group.data or None

    @property
    def is_col_major(self) -> bool:
        return bool(self.col_major.data)

    @property
    def is_ue8m0(self) -> bool:
        return bool(self.ue8m0.data)

    @property
    def is_tma_aligned(self) -> bool:
        return bool(self.tma_aligned.data)

    def scale_dims(self, x_dims: Sequence[Dim]) -> tuple[MaybeDim, ...] | None:
        """The shape of the scale an FP8 scheme computes for an input of `x_dims`.

        None for a static scheme (the scale is an input). A group dim is None (unknown) when the
        hidden size is symbolic.
        """
        kind = self.kind.data
        if kind == STATIC_TENSOR:
            return None
        if kind == DYNAMIC_TENSOR:
            return (1,)
        if kind == DYNAMIC_TOKEN:
            return (*x_dims[:-1], 1)
        if kind == GROUP:
            return (*x_dims[:-1], shapes.div_dim(x_dims[-1], self.group.data))
        raise ValueError("an nvfp4 scheme has block scales, not FP8 scales")


# --- checks shared with the fused ops -----------------------------------------------------------


def check_static_scale(what: str, scale: TensorType) -> None:
    """A per-tensor scale: f32, one element."""
    shapes.check_dtype(what, scale, f32)
    shapes.check_one_element(what, scale)


def check_scale_ub(scheme: QuantScheme, scale_ub: TensorType | None) -> None:
    """The optional upper bound of a per-token scale: f32, one element, dynamic_token only."""
    if scale_ub is not None:
        if not scheme.is_per_token:
            raise VerifyException("scale_ub applies to the dynamic_token scheme only")
        check_static_scale("scale_ub", scale_ub)


def check_reciprocal(scheme: QuantScheme, reciprocal: UnitAttr | None) -> None:
    """`reciprocal` applies to the schemes that divide by default: per-token and per-group."""
    if reciprocal is not None and not (scheme.is_per_token or scheme.is_group):
        raise VerifyException(
            f"reciprocal applies to the dynamic_token and group schemes only, not "
            f"{scheme.kind.data}"
        )


def check_fp8_results(
    scheme: QuantScheme, x_dims: Sequence[Dim], q: TensorType, scale_out: TensorType | None,
    q_what: str = "q", scale_what: str = "scale_out",
) -> None:
    """The results of FP8-quantizing a tensor of `x_dims` under `scheme`: q of x's shape in fp8;
    no scale result for a static scheme, an f32 scale of the scheme's shape for a dynamic one; a
    group size that divides the hidden size."""
    kind = scheme.kind.data
    if kind == NVFP4:
        raise VerifyException("an nvfp4 scheme is not an FP8 quantization (use quant.nvfp4)")
    shapes.check_fp8_quant(q_what, q)
    shapes.check_shape(q_what, q, x_dims)
    if kind == GROUP and not shapes.divisible(x_dims[-1], scheme.group.data):
        raise VerifyException(
            f"group size {scheme.group.data} does not divide the hidden size {x_dims[-1]}"
        )
    if kind == STATIC_TENSOR:
        if scale_out is not None:
            raise VerifyException(f"a static scheme takes its scale as an input: no {scale_what}")
        return
    if scale_out is None:
        raise VerifyException(f"a {kind} scheme computes its scale: {scale_what} is missing")
    shapes.check_dtype(scale_what, scale_out, f32)
    if kind == DYNAMIC_TENSOR:
        shapes.check_one_element(scale_what, scale_out)
    else:
        scale_dims = scheme.scale_dims(x_dims)
        shapes.check_shape(scale_what, scale_out, scale_dims)  # type: ignore[arg-type]


def nvfp4_result_dims(x_dims: Sequence[Dim]) -> tuple[tuple[MaybeDim, ...], tuple[MaybeDim, ...]]:
    """The shapes of the packed values `[M, N/2]` and the swizzled block scales
    `[round_up(M, 128), round_up(N/16, 4)]` for an `[M, N]` input (None where unknown)."""
    m, n = x_dims
    return (m, shapes.div_dim(n, 2)), (
        shapes.round_up_dim(m, 128),
        None if not isinstance(n, int) else shapes.round_up_dim(n // NVFP4_BLOCK, 4),
    )


def check_nvfp4_input(what: str, dims: Sequence[MaybeDim]) -> None:
    """An NVFP4 input is `[M, N]` with a static N divisible by 16 (M may be symbolic)."""
    if len(dims) != 2 or not isinstance(dims[1], int) or dims[1] % NVFP4_BLOCK:
        raise VerifyException(f"{what} has shape {shapes.shape_str(dims)}: NVFP4 needs [M, N] "
                              "with a static N divisible by 16")


def check_nvfp4_results(
    x_dims: Sequence[Dim], q: TensorType, block_scale: TensorType | None, q_what: str = "q",
    scale_what: str = "block_scale",
) -> None:
    """Packed ui8 values `[M, N/2]` and swizzled f8E4M3FN block scales."""
    if block_scale is None:
        raise VerifyException(f"NVFP4 quantization yields block scales: {scale_what} is missing")
    q_dims, scale_dims = nvfp4_result_dims(x_dims)
    shapes.check_dtype(q_what, q, UI8)
    shapes.check_shape(q_what, q, q_dims)
    shapes.check_dtype(scale_what, block_scale, F8E4M3FN)
    shapes.check_shape(scale_what, block_scale, scale_dims)


def check_scale_operand(kind: str, scale: TensorType | None, what: str) -> None:
    """Static FP8 takes its scale, NVFP4 its global scale; dynamic schemes take none."""
    if kind in (STATIC_TENSOR, NVFP4):
        if scale is None:
            raise VerifyException(f"a {kind} scheme needs the {what} operand")
        check_static_scale(what, scale)
    elif scale is not None:
        raise VerifyException(f"a {kind} scheme computes its scale: no {what} operand")


def check_quantized(
    scheme: QuantScheme, x_dims: Sequence[Any], out: TensorType, scale_out: Any, what: str
) -> None:
    """`out` (and `scale_out`) quantize a tensor of `x_dims` under `scheme`, FP8 or NVFP4."""
    if scheme.is_nvfp4:
        check_nvfp4_input(f"the quantized {what}", x_dims)
        check_nvfp4_results(x_dims, out, scale_out, what, "scale_out")
    else:
        check_fp8_results(scheme, x_dims, out, scale_out, what)


def quant_result_types(
    scheme: QuantScheme | None, dims: Sequence[MaybeDim], dtype: Attribute,
    fp8_dtype: Attribute = F8E4M3FN,
) -> list[Attribute | None]:
    """The (values, scales) types of quantizing a tensor of `dims` under `scheme`; `dtype` and
    no scales without a scheme. A builder's default; a symbolic derived dim needs result_types."""
    if None in dims:
        raise ValueError(f"give result_types: {shapes.shape_str(dims)} has a symbolic derived "
                         "dim")
    if scheme is None:
        return [tensor_type(dims, dtype), None]  # type: ignore[arg-type]
    if scheme.is_nvfp4:
        q_dims, (rows, cols) = nvfp4_result_dims(dims)  # type: ignore[arg-type]
        if None in q_dims or cols is None:
            raise ValueError(f"give result_types: {shapes.shape_str(dims)} is not [M, N], "
                             "N % 16 == 0")
        rows = rows if rows is not None else f"128*ceiling({dims[0]}/128)"
        return [tensor_type(q_dims, UI8), tensor_type((rows, cols), F8E4M3FN)]  # type: ignore
    scale = scheme.scale_dims(dims)  # type: ignore[arg-type]
    if scale is not None and None in scale:
        raise ValueError(f"give result_types: the scale shape for {shapes.shape_str(dims)} is "
                         "symbolic")
    return [
        tensor_type(dims, fp8_dtype),  # type: ignore[arg-type]
        None if scale is None else tensor_type(scale, f32),  # type: ignore[arg-type]
    ]


def check_quant_properties(op: Any, schemes: Sequence[str] = ()) -> None:
    """`op.divide` applies to a static scheme only; `op.scheme` is one of `schemes` (if given)."""
    kind = None if op.scheme is None else op.scheme.kind.data
    if op.divide is not None and kind != STATIC_TENSOR:
        if kind is None:
            raise VerifyException("divide needs a quant scheme")
        raise VerifyException(f"divide applies to the static_tensor scheme only, not {kind}")
    if kind is not None and schemes and kind not in schemes:
        allowed = ", ".join(schemes[:-1]) + f" or {schemes[-1]}"
        raise VerifyException(f"{op.name} fuses {allowed} quantization, not {kind}")


class QuantOperation(IRDLOperation):
    """The properties of a quantization, `scheme` and `divide`, and the schemes the op takes
    (`SCHEMES`, every one when empty)."""

    scheme = prop_def(QuantScheme)
    divide = opt_prop_def(UnitAttr)
    SCHEMES: ClassVar[tuple[str, ...]] = ()

    def verify_(self) -> None:
        check_quant_properties(self, self.SCHEMES)
        super().verify_()


# --- ops ----------------------------------------------------------------------------------------


@irdl_op_definition
class QuantFp8Op(QuantOperation, RaisedOperation):
    """Quantize x to FP8 (f8E4M3FN, or f8E4M3FNUZ on ROCm) under `scheme`: a static scheme takes
    `scale`, a dynamic one returns the scale it computed (dynamic_token may cap amax with
    `scale_ub`)."""

    name = "quant.fp8"

    x = operand_def(TensorType)
    scale = opt_operand_def(TensorType)
    scale_ub = opt_operand_def(TensorType)
    q = result_def(TensorType)
    scale_out = opt_result_def(TensorType)

    reciprocal = opt_prop_def(UnitAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())
    BUILD_OPTIONS: ClassVar = ("fp8_dtype",)

    @classmethod
    def infer_result_types(cls, x, scheme, fp8_dtype=F8E4M3FN, **_: Any) -> list[Any]:
        return quant_result_types(scheme, x.type.dims, x.type.dtype, fp8_dtype)

    def verify_(self) -> None:
        super().verify_()
        # Each accessor decodes the segment sizes: read every operand once.
        x, scale, scale_ub = self.x.type, opt_type(self.scale), opt_type(self.scale_ub)
        scheme = self.scheme
        shapes.check_float("x", x)
        shapes.check_min_rank("x", x, 1)
        if scheme.is_static:
            if scale is None:
                raise VerifyException("a static scheme needs the scale operand")
            check_static_scale("scale", scale)
        elif scale is not None:
            raise VerifyException(
                f"a {scheme.kind.data} scheme computes its scale: no scale operand"
            )
        check_scale_ub(scheme, scale_ub)
        check_reciprocal(scheme, self.reciprocal)
        check_fp8_results(scheme, x.dims, self.q.type, opt_type(self.scale_out))


@irdl_op_definition
class QuantNvfp4Op(RaisedOperation):
    """Quantize `x` `[M, N]` (N static) to NVFP4 under `global_scale` (448 * 6 / amax): e2m1
    values packed two a byte, and fp8 scales per 16 values in the swizzled 128x4 layout."""

    name = "quant.nvfp4"

    x = operand_def(TensorType)
    global_scale = operand_def(TensorType)
    q = result_def(TensorType)
    block_scale = result_def(TensorType)

    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, x, **_: Any) -> list[Any]:
        return quant_result_types(QuantScheme.nvfp4(), x.type.dims, x.type.dtype)

    def verify_(self) -> None:
        x = self.x.type
        shapes.check_float("x", x)
        shapes.check_rank("x", x, 2)
        n = x.dims[1]
        if not isinstance(n, int) or n % NVFP4_BLOCK:
            raise VerifyException(f"x has shape {shapes.shape_str(x.dims)}: NVFP4 needs a static "
                                  "last dim divisible by 16")
        check_static_scale("global_scale", self.global_scale.type)
        check_nvfp4_results(x.dims, self.q.type, self.block_scale.type)


Quant = declared_dialect("quant", globals())
