"""The `quant` dialect: FP8 and NVFP4 quantization, with the scheme as an attribute.

`#quant.scheme<...>` names how scales are found and shaped (`docs/numerics.md`):

| scheme | syntax | scale |
|---|---|---|
| static per-tensor | `#quant.scheme<static_tensor>` | an f32 operand of one element |
| dynamic per-tensor | `#quant.scheme<dynamic_tensor>` | computed: one f32 element |
| dynamic per-token | `#quant.scheme<dynamic_token>` | computed: f32 `[..., 1]` |
| dynamic per-group | `#quant.scheme<group 128, col_major>` | computed: f32 `[..., H/g]` |
| NVFP4 | `#quant.scheme<nvfp4>` | fp8 block scales of 16 values, swizzled |

Group schemes take a group size of 128 or 64 and three flags: `col_major` (the scales are stored
transposed, `[H/g, T]` with strides `(1, T)`; the IR keeps the logical `[T, H/g]` shape),
`tma_aligned` (a column-major layout whose T is padded to a multiple of 4; needs `col_major`) and
`ue8m0` (scales rounded up to powers of two). Fused ops carry the scheme of the quant they absorbed,
so one rewrite covers every scheme (vLLM registers one pattern per combination).

A static quant scales by `x * (1 / s)` (vLLM's reference numerics, `docs/numerics.md`), or, with
the unit property `divide`, by `x / s` in f32, as a model that spells its quant with a division
computes it. The two round differently where `x / s` falls on (or next to) a tie between two fp8
values, so the spelling is kept from raising to the kernel; the fused ops carry it too
(`check_divide`). The per-token and per-group schemes divide by the scale they compute
(`x / s`), or, with the unit property `reciprocal`, multiply by its f32 reciprocal
(`x * s.reciprocal()`, as vLLM's native QuantFP8 spells it), kept to the kernel the same way
(`check_reciprocal`).

`check_fp8_results` and `check_nvfp4_results` hold the scheme-specific result checks; the fused ops
use them too, so a fused op is held to the same rules as the quant it replaced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache

from xdsl.dialects.builtin import IntAttr, StringAttr, UnitAttr, f32
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
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

from irfuse.dialects.irfuse import Dim, TensorType, tensor_type
from irfuse.dialects.raised import RaisedOperation, opt_type
from irfuse.dialects.shapes import (
    F8E4M3FN,
    UI8,
    MaybeDim,
    check_dtype,
    check_float,
    check_fp8_quant,
    check_min_rank,
    check_one_element,
    check_rank,
    check_shape,
    div_dim,
    divisible,
    round_up_dim,
    shape_str,
)

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
    """How a quantization finds and lays out its scales.

    ```mlir
    #quant.scheme<static_tensor>
    #quant.scheme<dynamic_token>
    #quant.scheme<dynamic_tensor>
    #quant.scheme<group 128>
    #quant.scheme<group 64, col_major, ue8m0, tma_aligned>
    #quant.scheme<nvfp4>
    ```
    Build them with the cached class methods (`QuantScheme.group(128, col_major=True)`).
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
    def get(
        kind: str,
        group: int = 0,
        col_major: bool = False,
        ue8m0: bool = False,
        tma_aligned: bool = False,
    ) -> QuantScheme:
        if kind == NVFP4 and group == 0:
            group = NVFP4_BLOCK
        scheme = QuantScheme(
            StringAttr(kind),
            IntAttr(group),
            IntAttr(int(col_major)),
            IntAttr(int(ue8m0)),
            IntAttr(int(tma_aligned)),
        )
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
            return (*x_dims[:-1], div_dim(x_dims[-1], self.group.data))
        raise ValueError("an nvfp4 scheme has block scales, not FP8 scales")


# --- checks shared with the fused ops -----------------------------------------------------------


def check_static_scale(what: str, scale: TensorType) -> None:
    """A per-tensor scale: f32, one element."""
    check_dtype(what, scale, f32)
    check_one_element(what, scale)


def check_divide(scheme: QuantScheme, divide: UnitAttr | None) -> None:
    """`divide` (scale by `x / s`, not `x * (1 / s)`) applies to the static scheme only: the
    dynamic schemes compute their scale in the kernel, with the arithmetic `docs/numerics.md`
    fixes for each."""
    if divide is not None and not scheme.is_static:
        raise VerifyException(
            f"divide applies to the static_tensor scheme only, not {scheme.kind.data}"
        )


def check_reciprocal(scheme: QuantScheme, reciprocal: UnitAttr | None) -> None:
    """`reciprocal` (scale by `x * (1 / s)`, not `x / s`) applies to the per-token and
    per-group schemes only: the per-tensor ones multiply by the reciprocal already (a static
    quant unless it has `divide`)."""
    if reciprocal is not None and not (scheme.is_per_token or scheme.is_group):
        raise VerifyException(
            f"reciprocal applies to the dynamic_token and group schemes only, not "
            f"{scheme.kind.data}"
        )


def check_fp8_results(
    scheme: QuantScheme,
    x_dims: Sequence[Dim],
    q: TensorType,
    scale_out: TensorType | None,
    q_what: str = "q",
    scale_what: str = "scale_out",
) -> None:
    """The results of FP8-quantizing a tensor of `x_dims` under `scheme`.

    q has x's shape and an fp8 dtype; a static scheme has no scale result; a dynamic one has an
    f32 scale of the scheme's shape; a group size must divide the hidden size.
    """
    kind = scheme.kind.data
    if kind == NVFP4:
        raise VerifyException("an nvfp4 scheme is not an FP8 quantization (use quant.nvfp4)")
    check_fp8_quant(q_what, q)
    check_shape(q_what, q, x_dims)
    if kind == GROUP:
        g = scheme.group.data
        if not divisible(x_dims[-1], g):
            raise VerifyException(f"group size {g} does not divide the hidden size {x_dims[-1]}")
    if kind == STATIC_TENSOR:
        if scale_out is not None:
            raise VerifyException(f"a static scheme takes its scale as an input: no {scale_what}")
        return
    if scale_out is None:
        raise VerifyException(f"a {kind} scheme computes its scale: {scale_what} is missing")
    check_dtype(scale_what, scale_out, f32)
    if kind == DYNAMIC_TENSOR:
        check_one_element(scale_what, scale_out)
    else:
        expected = scheme.scale_dims(x_dims)
        assert expected is not None
        check_shape(scale_what, scale_out, expected)


def nvfp4_result_dims(x_dims: Sequence[Dim]) -> tuple[tuple[MaybeDim, ...], tuple[MaybeDim, ...]]:
    """The shapes of the packed values `[M, N/2]` and the swizzled block scales
    `[round_up(M, 128), round_up(N/16, 4)]` for an `[M, N]` input (None where unknown)."""
    m, n = x_dims
    return (m, div_dim(n, 2)), (
        round_up_dim(m, 128),
        None if not isinstance(n, int) else round_up_dim(n // NVFP4_BLOCK, 4),
    )


def check_nvfp4_input(what: str, x: TensorType) -> None:
    """An NVFP4 input: float, `[M, N]` with a static N divisible by 16 (M may be symbolic)."""
    check_float(what, x)
    check_rank(what, x, 2)
    n = x.dims[1]
    if not isinstance(n, int) or n % NVFP4_BLOCK:
        raise VerifyException(
            f"{what} has shape {shape_str(x.dims)}: NVFP4 needs a static last dim divisible by 16"
        )


def check_nvfp4_results(
    x_dims: Sequence[Dim],
    q: TensorType,
    block_scale: TensorType | None,
    q_what: str = "q",
    scale_what: str = "block_scale",
) -> None:
    """Packed ui8 values `[M, N/2]` and swizzled f8E4M3FN block scales."""
    if block_scale is None:
        raise VerifyException(f"NVFP4 quantization yields block scales: {scale_what} is missing")
    q_dims, scale_dims = nvfp4_result_dims(x_dims)
    check_dtype(q_what, q, UI8)
    check_shape(q_what, q, q_dims)
    check_dtype(scale_what, block_scale, F8E4M3FN)
    check_shape(scale_what, block_scale, scale_dims)


def _fp8_result_types(
    scheme: QuantScheme, x: TensorType, fp8_dtype: Attribute
) -> list[Attribute | None]:
    dims = x.dims
    scale = scheme.scale_dims(dims)
    if scale is not None and None in scale:
        raise ValueError(f"give result_types: the scale shape of {x} is symbolic")
    return [
        tensor_type(dims, fp8_dtype),
        None if scale is None else tensor_type(scale, f32),  # type: ignore[arg-type]
    ]


def _nvfp4_result_types(x: TensorType) -> list[Attribute]:
    m = x.dims[0]
    q_dims, scale_dims = nvfp4_result_dims(x.dims)
    if None in q_dims or scale_dims[1] is None:
        raise ValueError(f"give result_types: {x} is not an [M, N] input with N divisible by 16")
    rows = scale_dims[0] if scale_dims[0] is not None else f"128*ceiling({m}/128)"
    return [tensor_type(q_dims, UI8), tensor_type((rows, scale_dims[1]), F8E4M3FN)]  # type: ignore[arg-type]


@irdl_op_definition
class QuantFp8Op(RaisedOperation):
    """Quantize x to FP8 under `scheme`; dynamic schemes also return the scale they computed.

    ```mlir
    %q = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>}
        : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[1], f32>)
        -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
    %q, %s = quant.fp8 %x, scale_ub %ub {scheme = #quant.scheme<dynamic_token>}
        : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>)
        -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
    %q, %s = quant.fp8 %x {scheme = #quant.scheme<group 128, col_major>}
        : (!irfuse.tensor<[s0, 4096], bf16>)
        -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 32], f32>)
    %q2 = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>, divide}
        : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[1], f32>)
        -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
    ```
    - static_tensor: `scale` (f32, one element) is required; no `scale_out`. The value quantized
      is `x * (1 / s)`, or `x / s` (in f32) with the unit property `divide` (static only), as
      the model spelled it.
    - dynamic_token and group quantize `x / s`, or `x * (1 / s)` (f32 reciprocal) with the
      unit property `reciprocal` (those two only), as the model spelled it.
    - dynamic_token: `scale_out` is f32 `[..., 1]`; `scale_ub` (f32, one element) may cap amax.
    - dynamic_tensor: `scale_out` holds one f32 element.
    - group g: g divides the last dim H; `scale_out` is f32 `[..., H/g]`.
    q has x's shape and dtype f8E4M3FN (or f8E4M3FNUZ on ROCm).
    """

    name = "quant.fp8"

    x = operand_def(TensorType)
    scale = opt_operand_def(TensorType)
    scale_ub = opt_operand_def(TensorType)

    q = result_def(TensorType)
    scale_out = opt_result_def(TensorType)

    scheme = prop_def(QuantScheme)
    divide = opt_prop_def(UnitAttr)
    reciprocal = opt_prop_def(UnitAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    traits = traits_def(Pure())

    def __init__(
        self,
        x: SSAValue,
        scale: SSAValue | None = None,
        scale_ub: SSAValue | None = None,
        *,
        scheme: QuantScheme,
        divide: bool = False,
        reciprocal: bool = False,
        fp8_dtype: Attribute = F8E4M3FN,
        result_types: Sequence[Attribute | None] | None = None,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_types is None:
            result_types = _fp8_result_types(scheme, x.type, fp8_dtype)  # type: ignore[arg-type]
        super().__init__(
            operands=[x, scale, scale_ub],
            result_types=list(result_types),
            properties={
                "scheme": scheme,
                "divide": UnitAttr() if divide else None,
                "reciprocal": UnitAttr() if reciprocal else None,
            },
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        # Each accessor decodes the segment sizes: read every operand once.
        x = self.x.type
        scale, scale_ub, scale_out = (
            opt_type(self.scale),
            opt_type(self.scale_ub),
            opt_type(self.scale_out),
        )
        scheme = self.scheme
        check_float("x", x)
        check_min_rank("x", x, 1)
        if scheme.is_static:
            if scale is None:
                raise VerifyException("a static scheme needs the scale operand")
            check_static_scale("scale", scale)
        elif scale is not None:
            raise VerifyException(
                f"a {scheme.kind.data} scheme computes its scale: no scale operand"
            )
        if scale_ub is not None:
            if not scheme.is_per_token:
                raise VerifyException("scale_ub applies to the dynamic_token scheme only")
            check_static_scale("scale_ub", scale_ub)
        check_divide(scheme, self.divide)
        check_reciprocal(scheme, self.reciprocal)
        check_fp8_results(scheme, x.dims, self.q.type, scale_out)


@irdl_op_definition
class QuantNvfp4Op(RaisedOperation):
    """Quantize `x` `[M, N]` to NVFP4: e2m1 values packed two a byte, fp8 scales per 16 values.

    ```mlir
    %q, %bs = quant.nvfp4 %x, %gs
        : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>)
        -> (!irfuse.tensor<[s0, 2048], ui8>, !irfuse.tensor<["128*ceiling(s0/128)", 256], f8E4M3FN>)
    ```
    `global_scale` is f32 with one element (448 * 6 / amax). N must be static and divisible by 16;
    M may be symbolic. `q` is ui8 `[M, N/2]`; `block_scale` is f8E4M3FN in the swizzled 128x4
    layout, `[round_up(M, 128), round_up(N/16, 4)]`.
    """

    name = "quant.nvfp4"

    x = operand_def(TensorType)
    global_scale = operand_def(TensorType)

    q = result_def(TensorType)
    block_scale = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(
        self,
        x: SSAValue,
        global_scale: SSAValue,
        *,
        result_types: Sequence[Attribute] | None = None,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_types is None:
            result_types = _nvfp4_result_types(x.type)  # type: ignore[arg-type]
        super().__init__(
            operands=[x, global_scale],
            result_types=list(result_types),
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        x = self.x.type
        check_nvfp4_input("x", x)
        check_static_scale("global_scale", self.global_scale.type)
        check_nvfp4_results(x.dims, self.q.type, self.block_scale.type)


Quant = Dialect("quant", [QuantFp8Op, QuantNvfp4Op], [QuantScheme])
