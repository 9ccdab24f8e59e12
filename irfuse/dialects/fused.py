"""The `fused` dialect: the ops the fusion passes produce, one per fused kernel family.

Each op replaces a chain of semantic ops (named in its docstring) and is lowered to one kernel by
emit. Fused ops have no decomposition region: their numerics are defined by the reference
implementation beside the kernel (`shared/NUMERICS.md`). Results stay in SSA form (vLLM's fused
ops mutate output buffers; here every output is a result).

Their verifiers are the semantic ops' checks, reused: a fused op is held to the rules of each op
it replaced (norm weights, quant scheme shapes, attention head counts, world sizes, ...).

| op | replaces | pass |
|---|---|---|
| `fused.rms_norm_quant` | (add_)rms_norm -> quant.fp8 (one or more) | fuse-norm-quant |
| `fused.silu_mul_quant` | act.silu_mul -> quant.fp8 (static, group) | fuse-act-quant |
| `fused.silu_mul_quant_nvfp4` | act.silu_mul -> quant.nvfp4 | fuse-act-quant |
| `fused.all_reduce_rms_norm` | coll.all_reduce -> (add_)rms_norm (-> quant) | fuse-allreduce-rms |
| `fused.qk_norm_rope` | per-head rms_norm of q and k -> attn.rope | enable-qk-norm-rope-fusion |
| `fused.rope_kv_cache_write` | attn.rope (or fused.qk_norm_rope) -> attn.kv_cache_write | fuse-rope-kvcache |
| `fused.attention_quant` | attn.attention -> quant | fuse-attn-quant |
| `fused.mla_attention_quant` | attn.mla_attention -> quant | fuse-attn-quant |
| `fused.paged_decode_quant` | pages gathered by block table -> attn.attention -> quant | fuse-attn-quant |
| `fused.gemm_reduce_scatter` | gemm.(scaled_)matmul -> coll.reduce_scatter | fuse-gemm-comms |
| `fused.all_gather_gemm` | coll.all_gather -> gemm.(scaled_)matmul | fuse-gemm-comms |
| `fused.rms_norm_pad` | (add_)rms_norm -> act.pad | fuse-act-padding |
| `fused.mla_dual_rms_norm` | the two rms_norms of MLA's q_a and kv_a slices | fuse-mla-dual-rms-norm |
| `fused.rope_mla_kv_cache_write` | attn.rope of q_pe, k_pe -> attn.mla_kv_cache_write | fuse-rope-kvcache-cat-mla |
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from xdsl.dialects.builtin import (
    I64,
    BoolAttr,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    f32,
)
from xdsl.ir import Attribute, Dialect, SSAValue, TypeAttribute
from xdsl.irdl import (
    AttrSizedOperandSegments,
    AttrSizedResultSegments,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects.act import pad_dims, silu_mul_dims
from irfuse.dialects.attn import (
    cache_halves,
    check_attention,
    check_mla_cache_write,
    check_paged_cache_write,
    check_rope_tables,
    check_rotary,
    check_scale,
    mla_properties,
    verify_mla_properties,
)
from irfuse.dialects.coll import check_reduce_op, check_world_size, scattered_dims
from irfuse.dialects.gemm import check_matmul, check_scaled_matmul
from irfuse.dialects.irfuse import Dim, TensorType, tensor_type
from irfuse.dialects.norm import check_eps, check_norm_dtype, check_norm_result, check_norm_weight
from irfuse.dialects.quant import (
    GROUP,
    NVFP4,
    STATIC_TENSOR,
    QuantScheme,
    check_divide,
    check_fp8_results,
    check_nvfp4_results,
    check_reciprocal,
    check_static_scale,
    nvfp4_result_dims,
)
from irfuse.dialects.raised import NamedOperandSyntax, bool_attr, f64_attr, i64_attr, opt_type
from irfuse.dialects.shapes import (
    F8E4M3FN,
    UI8,
    MaybeDim,
    check_dim,
    check_float,
    check_integer,
    check_min_rank,
    check_rank,
    check_same_type,
    check_shape,
    dims_agree,
    mul_dim,
    normalize_dim,
    shape_str,
    static_numel,
)

# --- helpers ------------------------------------------------------------------------------------


def _int(attr: IntegerAttr) -> int:
    return attr.value.data


def _check_kind(op_name: str, scheme: QuantScheme, kinds: Sequence[str]) -> str:
    kind = scheme.kind.data
    if kind not in kinds:
        allowed = ", ".join(kinds[:-1]) + f" or {kinds[-1]}"
        raise VerifyException(f"{op_name} fuses {allowed} quantization, not {kind}")
    return kind


def _check_quant_scale_operand(kind: str, scale: TensorType | None, what: str) -> None:
    """Static FP8 takes its scale, NVFP4 its global scale; dynamic schemes take none."""
    if kind in (STATIC_TENSOR, NVFP4):
        if scale is None:
            raise VerifyException(f"a {kind} scheme needs the {what} operand")
        check_static_scale(what, scale)
    elif scale is not None:
        raise VerifyException(f"a {kind} scheme computes its scale: no {what} operand")


def _check_nvfp4_dims(what: str, dims: Sequence[MaybeDim]) -> None:
    if len(dims) != 2 or not isinstance(dims[1], int) or dims[1] % 16:
        raise VerifyException(
            f"{what} has shape {shape_str(dims)}: NVFP4 needs [M, N] with a static N divisible "
            "by 16"
        )


def _check_quantized(
    kind: str,
    scheme: QuantScheme,
    x_dims: Sequence[MaybeDim],
    out: TensorType,
    scale_out: TensorType | None,
    what: str,
) -> None:
    """`out` (and `scale_out`) quantize a tensor of `x_dims` under `scheme`."""
    if kind == NVFP4:
        _check_nvfp4_dims(f"the quantized {what}", x_dims)
        check_nvfp4_results(x_dims, out, scale_out, what, "scale_out")  # type: ignore[arg-type]
    else:
        check_fp8_results(scheme, x_dims, out, scale_out, what)  # type: ignore[arg-type]


def _quant_result_types(
    scheme: QuantScheme | None, dims: Sequence[MaybeDim], dtype: Attribute
) -> list[Attribute | None]:
    """Default (out, scale_out) types for quantizing a tensor of `dims` (`dtype` if unquantized)."""
    if None in dims:
        raise ValueError(f"give result_types: {shape_str(dims)} has a symbolic derived dim")
    if scheme is None:
        return [tensor_type(dims, dtype), None]  # type: ignore[arg-type]
    if scheme.is_nvfp4:
        m = dims[0]
        q_dims, s_dims = nvfp4_result_dims(dims)  # type: ignore[arg-type]
        rows = s_dims[0] if s_dims[0] is not None else f"128*ceiling({m}/128)"
        return [tensor_type(q_dims, UI8), tensor_type((rows, s_dims[1]), F8E4M3FN)]  # type: ignore[arg-type]
    scale = scheme.scale_dims(dims)  # type: ignore[arg-type]
    if scale is not None and None in scale:
        raise ValueError(f"give result_types: the scale shape for {shape_str(dims)} is symbolic")
    return [
        tensor_type(dims, F8E4M3FN),  # type: ignore[arg-type]
        None if scale is None else tensor_type(scale, f32),  # type: ignore[arg-type]
    ]


def _gated_dims(x: TensorType, up: TensorType | None) -> tuple[MaybeDim, ...]:
    """The SiLU·Mul output dims: x = [gate | up] halves, or x the gate when up is separate."""
    if up is None:
        return silu_mul_dims(x)
    check_float("x", x)
    if up != x:
        raise VerifyException(f"up has type {up} but the gate (x) has {x}")
    return x.dims


# --- norm + quant -------------------------------------------------------------------------------


@irdl_op_definition
class RmsNormQuantOp(NamedOperandSyntax):
    """(Residual add +) RMSNorm + FP8 quantization of the normed value, in one kernel.

    Replaces `norm.rms_norm` or `norm.add_rms_norm` followed by `quant.fp8` (vLLM's
    `rms_norm_static_fp8_quant`, `fused_add_rms_norm_static_fp8_quant`,
    `rms_norm_dynamic_per_token_quant`, `rms_norm_per_block_quant`).

    ```mlir
    %q, %r = fused.rms_norm_quant %x, residual %res, weight %w, scales [%s]
            {eps = 1.000000e-05 : f64, scheme = #quant.scheme<static_tensor>}
        : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>,
           !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>)
        -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>],
            residual_out !irfuse.tensor<[s0, 4096], bf16>)
    ```
    - static_tensor: one or more `scales` (one element each), one `qs` result per scale (several
      static quants of one norm), no `scale_out`. With the unit property `divide`, each output
      quantizes `y / s` instead of `y * (1 / s)` (the quants it replaced were spelled so; see
      `quant.fp8`); all outputs of one op share the spelling.
    - dynamic_token / group: no `scales`, one `qs` result and `scale_out` shaped by the scheme;
      `scale_ub` only with dynamic_token. With the unit property `reciprocal`, the output
      quantizes `y * (1 / s)` instead of `y / s` (as `quant.fp8`'s).
    `residual_out` exists iff `residual` does. The unit property `round_sum` (with a residual
    only) is `norm.add_rms_norm`'s: the norm reads the sum rounded to the residual_out dtype, as
    models that add in the model dtype compute it, instead of the f32 sum; any scheme.
    """

    name = "fused.rms_norm_quant"

    x = operand_def(TensorType)
    residual = opt_operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    scales = var_operand_def(TensorType)
    scale_ub = opt_operand_def(TensorType)

    qs = var_result_def(TensorType)
    scale_out = opt_result_def(TensorType)
    residual_out = opt_result_def(TensorType)

    eps = prop_def(FloatAttr[Float64Type])
    weight_offset = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))
    scheme = prop_def(QuantScheme)
    divide = opt_prop_def(UnitAttr)
    reciprocal = opt_prop_def(UnitAttr)
    round_sum = opt_prop_def(UnitAttr)

    irdl_options = (
        AttrSizedOperandSegments(as_property=True),
        AttrSizedResultSegments(as_property=True),
    )

    traits = traits_def(Pure())

    def __init__(
        self,
        x: SSAValue,
        residual: SSAValue | None = None,
        weight: SSAValue | None = None,
        scales: Sequence[SSAValue] = (),
        scale_ub: SSAValue | None = None,
        *,
        eps: float,
        weight_offset: float = 0.0,
        scheme: QuantScheme,
        divide: bool = False,
        reciprocal: bool = False,
        round_sum: bool = False,
        fp8_dtype: Attribute = F8E4M3FN,
        result_types: Sequence[Attribute | Sequence[Attribute] | None] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_types is None:
            xt: TensorType = x.type  # type: ignore[assignment]
            q, scale = _quant_result_types(scheme, xt.dims, xt.dtype)
            if fp8_dtype != F8E4M3FN:
                q = tensor_type(xt.dims, fp8_dtype)
            result_types = [[q] * max(1, len(scales)), scale, None if residual is None else xt]  # type: ignore[list-item]
        super().__init__(
            operands=[x, residual, weight, list(scales), scale_ub],
            result_types=list(result_types),
            properties={
                "eps": f64_attr(eps),
                "weight_offset": f64_attr(weight_offset),
                "scheme": scheme,
                "divide": UnitAttr() if divide else None,
                "reciprocal": UnitAttr() if reciprocal else None,
                "round_sum": UnitAttr() if round_sum else None,
            },
            attributes=attributes,
        )

    def verify_(self) -> None:
        x = self.x.type
        weight = opt_type(self.weight)
        residual = opt_type(self.residual)
        if self.round_sum is not None and residual is None:
            raise VerifyException("round_sum applies to a norm with a residual only")
        check_eps(self.eps)
        check_norm_weight(x, weight)
        if residual is not None:
            check_float("residual", residual)
            check_shape("residual", residual, x.dims)
        scheme = self.scheme
        kind = _check_kind(self.name, scheme, (STATIC_TENSOR, "dynamic_token", GROUP))
        check_divide(scheme, self.divide)
        check_reciprocal(scheme, self.reciprocal)
        n_scales, n_qs = len(self.scales), len(self.qs)
        if kind == STATIC_TENSOR:
            if not n_scales:
                raise VerifyException("a static scheme needs at least one scale")
            if n_qs != n_scales:
                raise VerifyException(f"{n_scales} scales but {n_qs} quantized results (qs)")
            for i, s in enumerate(self.scales):
                check_static_scale(f"scales[{i}]", s.type)
        else:
            if n_scales:
                raise VerifyException(f"a {kind} scheme computes its scale: no scales operands")
            if n_qs != 1:
                raise VerifyException(f"a {kind} scheme yields one quantized result, got {n_qs}")
        if self.scale_ub is not None:
            if not scheme.is_per_token:
                raise VerifyException("scale_ub applies to the dynamic_token scheme only")
            check_static_scale("scale_ub", self.scale_ub.type)
        scale_out = opt_type(self.scale_out)
        for i, q in enumerate(self.qs):
            check_fp8_results(scheme, x.dims, q.type, scale_out, f"qs[{i}]")
        if (residual is None) != (self.residual_out is None):
            raise VerifyException("residual_out exists exactly when residual does")
        if residual is not None:
            check_norm_result("residual_out", self.residual_out.type, x, residual)  # type: ignore[union-attr]


# --- activation + quant -------------------------------------------------------------------------


@irdl_op_definition
class SiluMulQuantOp(NamedOperandSyntax):
    """SiLU·Mul + FP8 quantization of its result, in one kernel.

    Replaces `act.silu_mul` (one-operand form) followed by `quant.fp8` (vLLM's
    `silu_and_mul_quant`, and the per-group variant).

    ```mlir
    %q = fused.silu_mul_quant %x, scale %s {scheme = #quant.scheme<static_tensor>}
        : (!irfuse.tensor<[s0, 28672], bf16>, !irfuse.tensor<[], f32>)
        -> !irfuse.tensor<[s0, 14336], f8E4M3FN>
    %q2, %s2 = fused.silu_mul_quant %x {scheme = #quant.scheme<group 128>}
        : (!irfuse.tensor<[s0, 28672], bf16>)
        -> (!irfuse.tensor<[s0, 14336], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 112], f32>)
    ```
    x `[..., 2d]` gives q `[..., d]`; static_tensor takes `scale`, group yields `scale_out
    [..., d/g]` (g divides d). With `up` (the two-operand `act.silu_mul`: Hugging Face's separate
    gate and up projections), x is the gate `[..., d]` and up has its type. With the unit
    property `divide` (static_tensor only), the quant scales by `y / s`, not `y * (1 / s)`, as the
    `quant.fp8` it replaced did; with `reciprocal` (group only), by `y * (1 / s)`, not `y / s`.
    """

    name = "fused.silu_mul_quant"

    x = operand_def(TensorType)
    scale = opt_operand_def(TensorType)
    up = opt_operand_def(TensorType)

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
        up: SSAValue | None = None,
        *,
        scheme: QuantScheme,
        divide: bool = False,
        reciprocal: bool = False,
        result_types: Sequence[Attribute | None] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_types is None:
            xt: TensorType = x.type  # type: ignore[assignment]
            dims = xt.dims if up is not None else silu_mul_dims(xt)
            result_types = _quant_result_types(scheme, dims, xt.dtype)
        super().__init__(
            operands=[x, scale, up],
            result_types=list(result_types),
            properties={
                "scheme": scheme,
                "divide": UnitAttr() if divide else None,
                "reciprocal": UnitAttr() if reciprocal else None,
            },
            attributes=attributes,
        )

    def verify_(self) -> None:
        dims = _gated_dims(self.x.type, opt_type(self.up))
        kind = _check_kind(self.name, self.scheme, (STATIC_TENSOR, GROUP))
        check_divide(self.scheme, self.divide)
        check_reciprocal(self.scheme, self.reciprocal)
        _check_quant_scale_operand(kind, opt_type(self.scale), "scale")
        check_fp8_results(self.scheme, dims, self.q.type, opt_type(self.scale_out))  # type: ignore[arg-type]


@irdl_op_definition
class SiluMulQuantNvfp4Op(NamedOperandSyntax):
    """SiLU·Mul + NVFP4 quantization of its result, in one kernel.

    Replaces `act.silu_mul` followed by `quant.nvfp4` (vLLM's `silu_and_mul_nvfp4_quant`).

    ```mlir
    %q, %bs = fused.silu_mul_quant_nvfp4 %x, %gs
        : (!irfuse.tensor<[256, 28672], bf16>, !irfuse.tensor<[], f32>)
        -> (!irfuse.tensor<[256, 7168], ui8>, !irfuse.tensor<[256, 896], f8E4M3FN>)
    ```
    x `[M, 2d]` (d static, divisible by 16); q ui8 `[M, d/2]`; block_scale f8E4M3FN swizzled
    `[round_up(M, 128), round_up(d/16, 4)]`. With `up`, x is the gate `[M, d]`.
    """

    name = "fused.silu_mul_quant_nvfp4"

    x = operand_def(TensorType)
    global_scale = operand_def(TensorType)
    up = opt_operand_def(TensorType)

    q = result_def(TensorType)
    block_scale = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(
        self,
        x: SSAValue,
        global_scale: SSAValue,
        up: SSAValue | None = None,
        *,
        result_types: Sequence[Attribute] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_types is None:
            xt: TensorType = x.type  # type: ignore[assignment]
            dims = xt.dims if up is not None else silu_mul_dims(xt)
            result_types = _quant_result_types(  # type: ignore[assignment]
                QuantScheme.nvfp4(), dims, xt.dtype
            )
        super().__init__(
            operands=[x, global_scale, up],
            result_types=list(result_types),  # type: ignore[arg-type]
            attributes=attributes,
        )

    def verify_(self) -> None:
        dims = _gated_dims(self.x.type, opt_type(self.up))
        _check_nvfp4_dims("silu_mul(x)", dims)
        check_static_scale("global_scale", self.global_scale.type)
        check_nvfp4_results(dims, self.q.type, self.block_scale.type)  # type: ignore[arg-type]


# --- all-reduce + norm --------------------------------------------------------------------------


@irdl_op_definition
class AllReduceRmsNormOp(NamedOperandSyntax):
    """All-reduce + (residual add +) RMSNorm (+ FP8 or NVFP4 quant), in one kernel.

    Replaces `coll.all_reduce` followed by `norm.rms_norm` / `norm.add_rms_norm` (and a
    `quant.fp8` static, per-token or per-group, or `quant.nvfp4`); FlashInfer's `trtllm`
    all-reduce fusion where it has the form, else the all-reduce and irfuse's fused norm kernel.

    ```mlir
    %o, %r = fused.all_reduce_rms_norm %x, residual %res, %w
            {group = "tp", world_size = 2 : i64, eps = 1.000000e-05 : f64}
        : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>,
           !irfuse.tensor<[4096], bf16>)
        -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
    %q, %r2 = fused.all_reduce_rms_norm %x, residual %res, %w, scale %s
            {group = "tp", world_size = 2 : i64, eps = 1.000000e-05 : f64,
             scheme = #quant.scheme<static_tensor>}
        : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>,
           !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>)
        -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, !irfuse.tensor<[s0, 4096], bf16>)
    ```
    `residual_out` is `all_reduce(x) + residual` (or `all_reduce(x)` without a residual). Without
    a scheme `out` is the norm; static_tensor quantizes it with `scale` to fp8 (`divide`: as
    `y / s`, see `quant.fp8`); dynamic_token (optional `scale_ub`) and group compute their
    scales into `scale_out`; nvfp4 takes the global `scale` and writes ui8 `out` and swizzled
    block scales in `scale_out`. The norm's readings are `fused.rms_norm_pad`'s: `weight_offset`,
    `round_sum` (with a residual: the norm reads the sum rounded to the model dtype) and
    `weight_f32` (the weight product in float32, rounded once).
    """

    name = "fused.all_reduce_rms_norm"

    x = operand_def(TensorType)
    residual = opt_operand_def(TensorType)
    weight = operand_def(TensorType)
    scale = opt_operand_def(TensorType)
    scale_ub = opt_operand_def(TensorType)

    out = result_def(TensorType)
    scale_out = opt_result_def(TensorType)
    residual_out = result_def(TensorType)

    group = prop_def(StringAttr)
    world_size = prop_def(IntegerAttr[I64])
    eps = prop_def(FloatAttr[Float64Type])
    weight_offset = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))
    scheme = opt_prop_def(QuantScheme)
    divide = opt_prop_def(UnitAttr)
    round_sum = opt_prop_def(UnitAttr)
    weight_f32 = opt_prop_def(UnitAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        x: SSAValue,
        residual: SSAValue | None,
        weight: SSAValue,
        scale: SSAValue | None = None,
        scale_ub: SSAValue | None = None,
        *,
        group: str,
        world_size: int,
        eps: float,
        weight_offset: float = 0.0,
        scheme: QuantScheme | None = None,
        divide: bool = False,
        round_sum: bool = False,
        weight_f32: bool = False,
        result_types: Sequence[Attribute | None] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_types is None:
            xt: TensorType = x.type  # type: ignore[assignment]
            result_types = [*_quant_result_types(scheme, xt.dims, xt.dtype), xt]
        super().__init__(
            operands=[x, residual, weight, scale, scale_ub],
            result_types=list(result_types),
            properties={
                "group": StringAttr(group),
                "world_size": i64_attr(world_size),
                "eps": f64_attr(eps),
                "weight_offset": f64_attr(weight_offset),
                "scheme": scheme,
                "divide": UnitAttr() if divide else None,
                "round_sum": UnitAttr() if round_sum else None,
                "weight_f32": UnitAttr() if weight_f32 else None,
            },
            attributes=attributes,
        )

    def verify_(self) -> None:
        check_world_size(self.world_size)
        check_eps(self.eps)
        x = self.x.type
        weight = self.weight.type
        residual = opt_type(self.residual)
        check_norm_weight(x, weight)
        if residual is not None:
            check_float("residual", residual)
            check_shape("residual", residual, x.dims)
            check_norm_result("residual_out", self.residual_out.type, x, residual)
        else:
            if self.round_sum is not None:
                raise VerifyException("round_sum applies to a norm with a residual only")
            check_same_type("residual_out", self.residual_out.type, x, "x")
        scale = opt_type(self.scale)
        scale_out = opt_type(self.scale_out)
        scale_ub = opt_type(self.scale_ub)
        if self.scheme is None:
            if scale is not None or scale_out is not None or scale_ub is not None:
                raise VerifyException("scale, scale_ub and scale_out need a quant scheme")
            if self.divide is not None:
                raise VerifyException("divide needs a quant scheme")
            check_norm_result("out", self.out.type, x, weight)
            return
        kind = _check_kind(self.name, self.scheme, (STATIC_TENSOR, "dynamic_token", GROUP,
                                                    NVFP4))
        check_divide(self.scheme, self.divide)
        _check_quant_scale_operand(kind, scale, "scale")
        if scale_ub is not None:
            if not self.scheme.is_per_token:
                raise VerifyException("scale_ub applies to the dynamic_token scheme only")
            check_static_scale("scale_ub", scale_ub)
        _check_quantized(kind, self.scheme, x.dims, self.out.type, scale_out, "out")


# --- QK norm + RoPE, RoPE + KV cache ------------------------------------------------------------


@irdl_op_definition
class QkNormRopeOp(NamedOperandSyntax):
    """Per-head RMSNorm of q and of k, then RoPE of both, in one kernel.

    Replaces `norm.rms_norm` of q and of k (weights `[head_dim]`) feeding `attn.rope` (Qwen3,
    Qwen3-MoE, vLLM's `fused_qk_norm_rope`). q and k are the norms' inputs in the rope's layout
    (`[T, heads, D]`, or Hugging Face's `[B, heads, T, D]`); the tables are the rope's own.

    ```mlir
    %qo, %ko = fused.qk_norm_rope %q, %k, %qw, %kw, positions %pos, cos_sin_cache %cache
            {eps = 1.000000e-06 : f64, is_neox = true, rotary_dim = 128 : i64,
             head_dim = 128 : i64}
        : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>,
           !irfuse.tensor<[128], bf16>, !irfuse.tensor<[128], bf16>,
           !irfuse.tensor<[s0], i64>, !irfuse.tensor<[40960, 128], bf16>)
        -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>)
    ```
    The norm's readings are `norm.rms_norm`'s (`eps`, `weight_offset`) and `fused.rms_norm_pad`'s
    `weight_f32`; `rope_f32` marks a rotation computed in float32 and rounded once (else every
    product and sum rounds to the model dtype, as torch computes it in bf16/fp16). Results are
    typed like q and k.
    """

    name = "fused.qk_norm_rope"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    q_weight = operand_def(TensorType)
    k_weight = operand_def(TensorType)
    positions = opt_operand_def(TensorType)
    cos_sin_cache = opt_operand_def(TensorType)
    cos = opt_operand_def(TensorType)
    sin = opt_operand_def(TensorType)

    q_out = result_def(TensorType)
    k_out = result_def(TensorType)

    eps = prop_def(FloatAttr[Float64Type])
    weight_offset = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))
    is_neox = prop_def(BoolAttr)
    rotary_dim = prop_def(IntegerAttr[I64])
    head_dim = prop_def(IntegerAttr[I64])
    weight_f32 = opt_prop_def(UnitAttr)
    rope_f32 = opt_prop_def(UnitAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    traits = traits_def(Pure())

    def __init__(
        self,
        q: SSAValue,
        k: SSAValue,
        q_weight: SSAValue,
        k_weight: SSAValue,
        *,
        positions: SSAValue | None = None,
        cos_sin_cache: SSAValue | None = None,
        cos: SSAValue | None = None,
        sin: SSAValue | None = None,
        eps: float,
        is_neox: bool,
        rotary_dim: int,
        head_dim: int,
        weight_offset: float = 0.0,
        weight_f32: bool = False,
        rope_f32: bool = False,
        result_types: Sequence[Attribute] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[q, k, q_weight, k_weight, positions, cos_sin_cache, cos, sin],
            result_types=list(result_types or (q.type, k.type)),
            properties={
                "eps": f64_attr(eps),
                "weight_offset": f64_attr(weight_offset),
                "is_neox": bool_attr(is_neox),
                "rotary_dim": i64_attr(rotary_dim),
                "head_dim": i64_attr(head_dim),
                "weight_f32": UnitAttr() if weight_f32 else None,
                "rope_f32": UnitAttr() if rope_f32 else None,
            },
            attributes=attributes,
        )

    def verify_(self) -> None:
        check_eps(self.eps)
        rotary_dim, head_dim = _int(self.rotary_dim), _int(self.head_dim)
        check_rotary(rotary_dim, head_dim)
        check_rope_tables(
            opt_type(self.positions), opt_type(self.cos_sin_cache), opt_type(self.cos),
            opt_type(self.sin), rotary_dim,
        )
        q, k = self.q.type, self.k.type
        for what, x, w in (("q", q, self.q_weight.type), ("k", k, self.k_weight.type)):
            check_min_rank(what, x, 2)
            check_dim(f"{what}'s last dim (head_dim)", x.dims[-1], head_dim)
            check_norm_weight(x, w, what)
        if k.dtype != q.dtype:
            raise VerifyException(f"k has dtype {k.dtype}, expected q's {q.dtype}")
        check_same_type("q_out", self.q_out.type, q, "q")
        check_same_type("k_out", self.k_out.type, k, "k")


@irdl_op_definition
class RopeKvCacheWriteOp(NamedOperandSyntax):
    """RoPE of q and k (after their per-head norms, when `q_weight`/`k_weight` are given) and the
    paged KV-cache write of the rotated k and of v, in one kernel that returns rotated q.

    Replaces `attn.rope` (or `fused.qk_norm_rope`) whose k only feeds `attn.kv_cache_write`
    (vLLM's `fused_rope_and_unified_kv_cache_update`, ROCm only there).

    ```mlir
    %qr, %kc2, %vc2 = fused.rope_kv_cache_write %q, %k, %v, positions %pos,
            cos_sin_cache %cache, %kc, %vc, %slots
            {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64}
        : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>,
           !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0], i64>,
           !irfuse.tensor<[4096, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>,
           !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[s0], i64>)
        -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>,
            !irfuse.tensor<[64, 16, 8, 128], bf16>)
    ```
    q `[T, Hq, D]`, k `[T, Hkv, D]`, v `[T, Hkv, Dv]`; tables as `attn.rope`'s; caches and
    slots as `attn.kv_cache_write`'s (the caches' new values are results here; the kernel
    writes them in place). With norm weights, `eps` and the readings of `fused.qk_norm_rope`.
    The caches may be vLLM's one FlashAttention-layout cache, as in `attn.kv_cache_write`.
    With `k_scale` and `v_scale` (one f32 element each) the caches hold f8E4M3FN and k, v (in
    q's dtype) are stored as `clamp(x / scale, -448, 448)`, vLLM's FP8 KV cache.
    """

    name = "fused.rope_kv_cache_write"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    q_weight = opt_operand_def(TensorType)
    k_weight = opt_operand_def(TensorType)
    positions = opt_operand_def(TensorType)
    cos_sin_cache = opt_operand_def(TensorType)
    cos = opt_operand_def(TensorType)
    sin = opt_operand_def(TensorType)
    k_cache = operand_def(TensorType)
    v_cache = operand_def(TensorType)
    slot_mapping = operand_def(TensorType)
    k_scale = opt_operand_def(TensorType)
    v_scale = opt_operand_def(TensorType)

    q_out = result_def(TensorType)
    k_cache_out = result_def(TensorType)
    v_cache_out = result_def(TensorType)

    is_neox = prop_def(BoolAttr)
    rotary_dim = prop_def(IntegerAttr[I64])
    head_dim = prop_def(IntegerAttr[I64])
    eps = opt_prop_def(FloatAttr[Float64Type])
    weight_offset = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))
    weight_f32 = opt_prop_def(UnitAttr)
    rope_f32 = opt_prop_def(UnitAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        q: SSAValue,
        k: SSAValue,
        v: SSAValue,
        k_cache: SSAValue,
        v_cache: SSAValue,
        slot_mapping: SSAValue,
        *,
        q_weight: SSAValue | None = None,
        k_weight: SSAValue | None = None,
        positions: SSAValue | None = None,
        cos_sin_cache: SSAValue | None = None,
        cos: SSAValue | None = None,
        sin: SSAValue | None = None,
        is_neox: bool,
        rotary_dim: int,
        head_dim: int,
        eps: float | None = None,
        weight_offset: float = 0.0,
        weight_f32: bool = False,
        rope_f32: bool = False,
        k_scale: SSAValue | None = None,
        v_scale: SSAValue | None = None,
        result_types: Sequence[Attribute] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[q, k, v, q_weight, k_weight, positions, cos_sin_cache, cos, sin,
                      k_cache, v_cache, slot_mapping, k_scale, v_scale],
            result_types=list(result_types or (q.type, k_cache.type, v_cache.type)),
            properties={
                "is_neox": bool_attr(is_neox),
                "rotary_dim": i64_attr(rotary_dim),
                "head_dim": i64_attr(head_dim),
                "eps": None if eps is None else f64_attr(eps),
                "weight_offset": f64_attr(weight_offset),
                "weight_f32": UnitAttr() if weight_f32 else None,
                "rope_f32": UnitAttr() if rope_f32 else None,
            },
            attributes=attributes,
        )

    def verify_(self) -> None:
        rotary_dim, head_dim = _int(self.rotary_dim), _int(self.head_dim)
        check_rotary(rotary_dim, head_dim)
        check_rope_tables(
            opt_type(self.positions), opt_type(self.cos_sin_cache), opt_type(self.cos),
            opt_type(self.sin), rotary_dim,
        )
        q, k = self.q.type, self.k.type
        check_float("q", q)
        check_rank("q", q, 3)
        check_dim("q's last dim (head_dim)", q.dims[2], head_dim)
        check_dim("k's last dim (head_dim)", k.dims[-1], head_dim)
        if k.dtype != q.dtype:
            raise VerifyException(f"k has dtype {k.dtype}, expected q's {q.dtype}")
        check_dim("k's token count", k.dims[0], q.dims[0])
        weights = (opt_type(self.q_weight), opt_type(self.k_weight))
        if (weights[0] is None) != (weights[1] is None):
            raise VerifyException("q_weight and k_weight go together")
        if (weights[0] is None) != (self.eps is None):
            raise VerifyException("eps is given exactly when the norm weights are")
        if self.eps is not None:
            check_eps(self.eps)
            check_norm_weight(q, weights[0], "q")
            check_norm_weight(k, weights[1], "k")
        k_cache, v_cache = self.k_cache.type, self.v_cache.type
        scales = (opt_type(self.k_scale), opt_type(self.v_scale))
        if (scales[0] is None) != (scales[1] is None):
            raise VerifyException("k_scale and v_scale go together")
        if scales[0] is not None:  # an FP8 cache: k and v are stored as clamp(x / scale)
            for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
                if cache.dtype != F8E4M3FN:
                    raise VerifyException(f"with k_scale / v_scale, {name} must hold "
                                          f"f8E4M3FN, not {cache.dtype}")
            for name, scale in zip(("k_scale", "v_scale"), scales, strict=True):
                if static_numel(scale.dims) != 1 or scale.dtype != f32:
                    raise VerifyException(f"{name} must be one f32 element, not "
                                          f"{shape_str(scale.dims)} {scale.dtype}")
            if self.v.type.dtype != q.dtype:
                raise VerifyException(f"v has dtype {self.v.type.dtype}, expected q's {q.dtype}")
            stored = (tensor_type(k.dims, k_cache.dtype),
                      tensor_type(self.v.type.dims, v_cache.dtype))
        else:
            stored = (k, self.v.type)
        check_paged_cache_write(*stored, *cache_halves(self.k_cache, self.v_cache),
                                self.slot_mapping.type)
        check_same_type("q_out", self.q_out.type, q, "q")
        check_same_type("k_cache_out", self.k_cache_out.type, k_cache, "k_cache")
        check_same_type("v_cache_out", self.v_cache_out.type, v_cache, "v_cache")


# --- attention + quant --------------------------------------------------------------------------


def _check_attention_output(
    op_name: str,
    scheme: QuantScheme,
    output_scale: TensorType | None,
    out: TensorType,
    scale_out: TensorType | None,
    tokens: int | None,
    hidden: MaybeDim,
) -> None:
    """The quantized attention output, token-major and flattened: `[..., heads * v_head_dim]`.

    `tokens` is the number of query positions (batch * length) when static; the leading dims of
    `out` must hold that many when they are static too.
    """
    kind = _check_kind(op_name, scheme, (STATIC_TENSOR, GROUP, NVFP4))
    _check_quant_scale_operand(kind, output_scale, "output_scale")
    check_min_rank("out", out, 2)
    lead = out.dims[:-1]
    n = static_numel(lead)
    if tokens is not None and n is not None and n != tokens:
        raise VerifyException(
            f"out has shape {shape_str(out.dims)}: its leading dims must hold the {tokens} query "
            "positions"
        )
    x_dims = (*lead, hidden)
    if kind == NVFP4:
        _check_quantized(kind, scheme, x_dims, out, scale_out, "out")
    else:
        check_dim("out's last dim (heads * v_head_dim)", out.dims[-1], hidden)
        check_fp8_results(scheme, (*lead, out.dims[-1]), out, scale_out, "out")


@irdl_op_definition
class AttentionQuantOp(NamedOperandSyntax):
    """Attention whose kernel writes its output quantized.

    Replaces `attn.attention` -> (transpose, reshape to `[tokens, H * Dv]`) -> `quant.fp8` static
    or group, or `quant.nvfp4` (vLLM's attention with `output_scale` / `output_block_scale`).

    ```mlir
    %o = fused.attention_quant %q, %k, %v, output_scale %s
            {scale = 8.838835e-02 : f64, causal = true, scheme = #quant.scheme<static_tensor>}
        : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>,
           !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[], f32>)
        -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
    ```
    Operands and properties as `attn.attention`; `out` is the output in token-major order,
    flattened to `[..., Hq * Dv]` (the layout the quant saw). static_tensor takes
    `output_scale` (`divide`: `x / s`, as `quant.fp8`); group yields `scale_out [..., Hq * Dv / g]`; nvfp4 takes the global scale as
    `output_scale` and yields ui8 `out [M, Hq * Dv / 2]` and swizzled `scale_out`.
    """

    name = "fused.attention_quant"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    output_scale = opt_operand_def(TensorType)

    out = result_def(TensorType)
    scale_out = opt_result_def(TensorType)

    scale = prop_def(FloatAttr[Float64Type])
    causal = prop_def(BoolAttr, default_value=bool_attr(False))
    scheme = prop_def(QuantScheme)
    divide = opt_prop_def(UnitAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    traits = traits_def(Pure())

    def __init__(
        self,
        q: SSAValue,
        k: SSAValue,
        v: SSAValue,
        mask: SSAValue | None = None,
        output_scale: SSAValue | None = None,
        *,
        scale: float,
        causal: bool = False,
        scheme: QuantScheme,
        divide: bool = False,
        result_types: Sequence[Attribute | None] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_types is None:
            qt: TensorType = q.type  # type: ignore[assignment]
            vt: TensorType = v.type  # type: ignore[assignment]
            *batch, hq, lq, _ = qt.dims
            tokens: Dim = lq if all(b == 1 for b in batch) else _static_product((*batch, lq))
            hidden = mul_dim(vt.dims[-1], hq) if isinstance(hq, int) else None
            result_types = _quant_result_types(scheme, (tokens, hidden), qt.dtype)
        super().__init__(
            operands=[q, k, v, mask, output_scale],
            result_types=list(result_types),
            properties={
                "scale": f64_attr(scale),
                "causal": bool_attr(causal),
                "scheme": scheme,
                "divide": UnitAttr() if divide else None,
            },
            attributes=attributes,
        )

    def verify_(self) -> None:
        check_scale(self.scale)
        dims = check_attention(
            self.q.type,
            self.k.type,
            self.v.type,
            opt_type(self.mask),
            bool(self.causal.value.data),
        )
        *batch, hq, lq, dv = dims
        tokens = static_numel((*batch, lq))
        hidden = mul_dim(dv, hq) if isinstance(hq, int) else None
        _check_attention_output(
            self.name,
            self.scheme,
            opt_type(self.output_scale),
            self.out.type,
            opt_type(self.scale_out),
            tokens,
            hidden,
        )


def _static_product(dims: Sequence[Dim]) -> Dim:
    n = static_numel(dims)
    if n is None:
        raise ValueError(f"give result_types: cannot flatten {shape_str(dims)}")
    return n


@irdl_op_definition
class PagedDecodeQuantOp(NamedOperandSyntax):
    """Decode attention over a paged KV cache, read in place, its output written quantized.

    Replaces the gather of each sequence's pages through its block-table row
    (`cache[block_table]` viewed `[B, Hk, MB * BS, D]`), the mask of its first `seq_lens[b]`
    positions, `attn.attention` of one query per sequence over them, and the quant of the
    output (`rewrites/paged_decode.py` says what is matched).

    ```mlir
    %o = fused.paged_decode_quant %q, %k_cache, %v_cache, %block_table, %seq_lens, %s
            {scale = 8.838835e-02 : f64, scheme = #quant.scheme<static_tensor>}
        : (!irfuse.tensor<[s0, 32, 1, 128], bf16>, !irfuse.tensor<[2081, 16, 8, 128], bf16>,
           !irfuse.tensor<[2081, 16, 8, 128], bf16>, !irfuse.tensor<[s0, 130], i32>,
           !irfuse.tensor<[s0], i32>, !irfuse.tensor<[1], f32>)
        -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
    ```
    q `[B, Hq, 1, D]`; caches `[num_blocks, block_size, Hk, D]`; block_table `[B, MB]` and
    seq_lens `[B]` integers. `out` is the output flattened to `[B, Hq * D]` (the layout the
    quant saw); static_tensor takes `output_scale` (`divide`: `x / s`), nvfp4 the global scale,
    and yields ui8 `out [B, Hq * D / 2]` and swizzled `scale_out`.
    """

    name = "fused.paged_decode_quant"

    q = operand_def(TensorType)
    k_cache = operand_def(TensorType)
    v_cache = operand_def(TensorType)
    block_table = operand_def(TensorType)
    seq_lens = operand_def(TensorType)
    output_scale = operand_def(TensorType)

    out = result_def(TensorType)
    scale_out = opt_result_def(TensorType)

    scale = prop_def(FloatAttr[Float64Type])
    scheme = prop_def(QuantScheme)
    divide = opt_prop_def(UnitAttr)

    traits = traits_def(Pure())

    def __init__(
        self,
        q: SSAValue,
        k_cache: SSAValue,
        v_cache: SSAValue,
        block_table: SSAValue,
        seq_lens: SSAValue,
        output_scale: SSAValue,
        *,
        scale: float,
        scheme: QuantScheme,
        divide: bool = False,
        result_types: Sequence[Attribute | None],
        attributes: Mapping[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[q, k_cache, v_cache, block_table, seq_lens, output_scale],
            result_types=list(result_types),
            properties={
                "scale": f64_attr(scale),
                "scheme": scheme,
                "divide": UnitAttr() if divide else None,
            },
            attributes=attributes,
        )

    def verify_(self) -> None:
        check_scale(self.scale)
        q: TensorType = self.q.type  # type: ignore[assignment]
        kc: TensorType = self.k_cache.type  # type: ignore[assignment]
        vc: TensorType = self.v_cache.type  # type: ignore[assignment]
        check_float("q", q)
        check_rank("q", q, 4)
        b, hq, one, d = q.dims
        check_dim("q's query length (one token per sequence)", one, 1)
        check_rank("k_cache", kc, 4)
        check_shape("k_cache", kc, (None, None, None, d))
        check_same_type("v_cache", vc, kc, "k_cache")
        if kc.dtype != q.dtype:
            raise VerifyException(f"the caches hold {kc.dtype}, expected q's {q.dtype}")
        hk = kc.dims[2]
        if isinstance(hq, int) and isinstance(hk, int) and (hk == 0 or hq % hk):
            raise VerifyException(
                f"q's {hq} heads are not a multiple of the cache's {hk} heads (grouped-query "
                "attention)"
            )
        table: TensorType = self.block_table.type  # type: ignore[assignment]
        lens: TensorType = self.seq_lens.type  # type: ignore[assignment]
        check_integer("block_table", table)
        check_rank("block_table", table, 2)
        check_dim("block_table's rows", table.dims[0], b)
        check_integer("seq_lens", lens)
        check_shape("seq_lens", lens, (b,))
        _check_attention_output(
            self.name,
            self.scheme,
            opt_type(self.output_scale),
            self.out.type,
            opt_type(self.scale_out),
            b if isinstance(b, int) else None,
            mul_dim(d, hq) if isinstance(hq, int) else None,
        )
        if self.scheme.kind.data not in (STATIC_TENSOR, NVFP4):
            raise VerifyException(f"{self.name} takes a static_tensor or nvfp4 scheme")


@irdl_op_definition
class MlaAttentionQuantOp(NamedOperandSyntax):
    """MLA attention whose kernel writes its output quantized.

    Replaces `attn.mla_attention` -> (reshape to `[T, H * v]`) -> `quant.fp8` static or group, or
    `quant.nvfp4` (vLLM's `MLAAttnQuantFusionPass`).

    ```mlir
    %o, %s = fused.mla_attention_quant %q, %kv_c, %k_pe, %w
            {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64,
             v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 7.216878e-02 : f64,
             causal = true, scheme = #quant.scheme<group 128>}
        : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>,
           !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>)
        -> (!irfuse.tensor<[s0, 2048], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 16], f32>)
    ```
    Operands and properties as `attn.mla_attention`, token-major (`[T, H, v]` out, no mask) or
    `batch_major` (`[..., H, Lq, v]` out, an optional mask), plus `output_scale` (static_tensor
    scale or nvfp4 global scale); `out` is the output token-major and flattened,
    `[T, H * v_head_dim]` (batch-major: `[... * Lq, H * v_head_dim]`); `divide` as
    `fused.attention_quant`.
    """

    name = "fused.mla_attention_quant"

    q = operand_def(TensorType)
    kv_c = operand_def(TensorType)
    k_pe = operand_def(TensorType)
    kv_b_weight = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    output_scale = opt_operand_def(TensorType)

    out = result_def(TensorType)
    scale_out = opt_result_def(TensorType)

    num_heads = prop_def(IntegerAttr[I64])
    qk_nope_head_dim = prop_def(IntegerAttr[I64])
    qk_rope_head_dim = prop_def(IntegerAttr[I64])
    v_head_dim = prop_def(IntegerAttr[I64])
    kv_lora_rank = prop_def(IntegerAttr[I64])
    scale = prop_def(FloatAttr[Float64Type])
    causal = prop_def(BoolAttr, default_value=bool_attr(False))
    batch_major = prop_def(BoolAttr, default_value=bool_attr(False))
    scheme = prop_def(QuantScheme)
    divide = opt_prop_def(UnitAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    traits = traits_def(Pure())

    def __init__(
        self,
        q: SSAValue,
        kv_c: SSAValue,
        k_pe: SSAValue,
        kv_b_weight: SSAValue,
        mask: SSAValue | None = None,
        output_scale: SSAValue | None = None,
        *,
        num_heads: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        kv_lora_rank: int,
        scale: float,
        causal: bool = False,
        batch_major: bool = False,
        scheme: QuantScheme,
        divide: bool = False,
        result_types: Sequence[Attribute | None] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_types is None:
            qt: TensorType = q.type  # type: ignore[assignment]
            tokens: Dim = (
                _static_product((*qt.dims[:-3], qt.dims[-2])) if batch_major else qt.dims[0]
            )
            result_types = _quant_result_types(scheme, (tokens, num_heads * v_head_dim), qt.dtype)
        props = mla_properties(
            num_heads, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, kv_lora_rank, scale, causal
        )
        props["batch_major"] = bool_attr(batch_major)
        props["scheme"] = scheme
        if divide:
            props["divide"] = UnitAttr()
        super().__init__(
            operands=[q, kv_c, k_pe, kv_b_weight, mask, output_scale],
            result_types=list(result_types),
            properties=props,
            attributes=attributes,
        )

    def verify_(self) -> None:
        batch_major = bool(self.batch_major.value.data)
        dims = verify_mla_properties(
            self,
            self.q.type,
            self.kv_c.type,
            self.k_pe.type,
            self.kv_b_weight.type,
            mask=opt_type(self.mask),
            batch_major=batch_major,
        )
        heads, v_dim = dims[-3] if batch_major else dims[1], dims[-1]
        out = self.out.type
        if out.rank != 2 or not isinstance(heads, int):
            raise VerifyException(
                f"out must be [T, num_heads * v_head_dim], got {shape_str(out.dims)}"
            )
        if batch_major:
            tokens = static_numel((*dims[:-3], dims[-2]))
        else:
            check_dim("out's token count", out.dims[0], dims[0])
            tokens = None
        _check_attention_output(
            self.name,
            self.scheme,
            opt_type(self.output_scale),
            out,
            opt_type(self.scale_out),
            tokens,
            mul_dim(v_dim, heads),
        )


# --- GEMM + collectives (async TP) --------------------------------------------------------------


def _check_gemm(op: GemmReduceScatterOp | AllGatherGemmOp) -> tuple[tuple[Dim, Dim], Attribute]:
    """The product of a fused GEMM op, plain or scaled; returns its (local) dims and dtype."""
    a, b = op.a.type, op.b.type
    bias = opt_type(op.bias)
    scale_a, scale_b = opt_type(op.scale_a), opt_type(op.scale_b)
    out_dtype = op.out_dtype
    if (scale_a is None) != (scale_b is None):
        raise VerifyException("scale_a and scale_b come together (a scaled GEMM) or not at all")
    if scale_a is None:
        dims, dtype = check_matmul(a, b, bias)
        if out_dtype is not None and out_dtype != dtype:
            raise VerifyException(f"out_dtype {out_dtype} differs from a's dtype {dtype}")
        return dims, dtype
    if out_dtype is None:
        raise VerifyException("a scaled GEMM needs out_dtype")
    dims = check_scaled_matmul(a, b, scale_a, scale_b, bias, out_dtype)  # type: ignore[arg-type]
    return dims, out_dtype


def _check_c(c: TensorType, dims: Sequence[MaybeDim], dtype: Attribute) -> None:
    check_shape("c", c, dims)
    if c.dtype != dtype:
        raise VerifyException(f"c has dtype {c.dtype}, expected {dtype}")


@irdl_op_definition
class GemmReduceScatterOp(NamedOperandSyntax):
    """A GEMM whose result is reduce-scattered over the TP group, overlapped (async TP).

    Replaces `gemm.matmul` or `gemm.scaled_matmul` followed by `coll.reduce_scatter` (torch's
    `symm_mem.fused_matmul_reduce_scatter` and the scaled variant).

    ```mlir
    %c = fused.gemm_reduce_scatter %a, %b {group = "tp", world_size = 4 : i64}
        : (!irfuse.tensor<[256, 4096], bf16>, !irfuse.tensor<[4096, 4096], bf16>)
        -> !irfuse.tensor<[64, 4096], bf16>
    %c2 = fused.gemm_reduce_scatter %a8, %b8, scale_a %sa, scale_b %sb
            {group = "tp", world_size = 4 : i64, out_dtype = bf16}
        : (!irfuse.tensor<[256, 4096], f8E4M3FN>, !irfuse.tensor<[4096, 4096], f8E4M3FN>,
           !irfuse.tensor<[], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[64, 4096], bf16>
    ```
    The product follows `gemm.matmul` (no scales) or `gemm.scaled_matmul` (both scales and
    `out_dtype`); `c` is its shard along `dim` (0 or 1), which world_size must divide.
    """

    name = "fused.gemm_reduce_scatter"

    a = operand_def(TensorType)
    b = operand_def(TensorType)
    scale_a = opt_operand_def(TensorType)
    scale_b = opt_operand_def(TensorType)
    bias = opt_operand_def(TensorType)

    c = result_def(TensorType)

    group = prop_def(StringAttr)
    world_size = prop_def(IntegerAttr[I64])
    dim = prop_def(IntegerAttr[I64], default_value=i64_attr(0))
    reduce_op = prop_def(StringAttr, default_value=StringAttr("sum"))
    out_dtype = opt_prop_def(TypeAttribute)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        a: SSAValue,
        b: SSAValue,
        scale_a: SSAValue | None = None,
        scale_b: SSAValue | None = None,
        bias: SSAValue | None = None,
        *,
        group: str,
        world_size: int,
        dim: int = 0,
        reduce_op: str = "sum",
        out_dtype: Attribute | None = None,
        result_type: Attribute | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_type is None:
            at: TensorType = a.type  # type: ignore[assignment]
            dims = scattered_dims((at.dims[0], b.type.dims[1]), dim % 2, world_size)  # type: ignore[attr-defined]
            if None in dims:
                raise ValueError("give result_type: the scattered dim is symbolic")
            result_type = tensor_type(dims, out_dtype or at.dtype)  # type: ignore[arg-type]
        super().__init__(
            operands=[a, b, scale_a, scale_b, bias],
            result_types=[result_type],
            properties={
                "group": StringAttr(group),
                "world_size": i64_attr(world_size),
                "dim": i64_attr(dim),
                "reduce_op": StringAttr(reduce_op),
                "out_dtype": out_dtype,
            },
            attributes=attributes,
        )

    def verify_(self) -> None:
        ws = check_world_size(self.world_size)
        check_reduce_op(self.reduce_op)
        dims, dtype = _check_gemm(self)
        d = normalize_dim(_int(self.dim), 2, "dim")
        _check_c(self.c.type, scattered_dims(dims, d, ws), dtype)


@irdl_op_definition
class AllGatherGemmOp(NamedOperandSyntax):
    """A GEMM on a row-sharded a that is all-gathered first, overlapped (async TP).

    Replaces `coll.all_gather` (dim 0) of a followed by `gemm.matmul` or `gemm.scaled_matmul`
    (torch's `symm_mem.fused_all_gather_matmul` and the scaled variant).

    ```mlir
    %c = fused.all_gather_gemm %a, %b {group = "tp", world_size = 4 : i64}
        : (!irfuse.tensor<[64, 4096], bf16>, !irfuse.tensor<[4096, 1024], bf16>)
        -> !irfuse.tensor<[256, 1024], bf16>
    ```
    a is this rank's shard `[M / world_size, K]`; row-wise `scale_a` is the shard's `[M /
    world_size, 1]` (gathered with a); `c` is `[M, N]`. Only `dim = 0` is a GEMM gather.
    """

    name = "fused.all_gather_gemm"

    a = operand_def(TensorType)
    b = operand_def(TensorType)
    scale_a = opt_operand_def(TensorType)
    scale_b = opt_operand_def(TensorType)
    bias = opt_operand_def(TensorType)

    c = result_def(TensorType)

    group = prop_def(StringAttr)
    world_size = prop_def(IntegerAttr[I64])
    dim = prop_def(IntegerAttr[I64], default_value=i64_attr(0))
    out_dtype = opt_prop_def(TypeAttribute)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        a: SSAValue,
        b: SSAValue,
        scale_a: SSAValue | None = None,
        scale_b: SSAValue | None = None,
        bias: SSAValue | None = None,
        *,
        group: str,
        world_size: int,
        out_dtype: Attribute | None = None,
        result_type: Attribute | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_type is None:
            at: TensorType = a.type  # type: ignore[assignment]
            rows = mul_dim(at.dims[0], world_size)
            if rows is None:
                raise ValueError("give result_type: a's row count is symbolic")
            result_type = tensor_type((rows, b.type.dims[1]), out_dtype or at.dtype)  # type: ignore[attr-defined]
        super().__init__(
            operands=[a, b, scale_a, scale_b, bias],
            result_types=[result_type],
            properties={
                "group": StringAttr(group),
                "world_size": i64_attr(world_size),
                "dim": i64_attr(0),
                "out_dtype": out_dtype,
            },
            attributes=attributes,
        )

    def verify_(self) -> None:
        ws = check_world_size(self.world_size)
        if _int(self.dim) != 0:
            raise VerifyException(
                f"all_gather_gemm gathers a along dim 0, got dim {_int(self.dim)}"
            )
        (m, n), dtype = _check_gemm(self)
        _check_c(self.c.type, (mul_dim(m, ws), n), dtype)


# --- norm + pad --------------------------------------------------------------------------------


@irdl_op_definition
class RmsNormPadOp(NamedOperandSyntax):
    """(Residual add +) RMSNorm + constant pad of the last dim, in one kernel.

    Replaces `norm.rms_norm` or `norm.add_rms_norm` whose `y` is padded by `act.pad` (AITER's
    `triton_add_rmsnorm_pad` on ROCm; GPT-OSS pads hidden 2880 for its experts).

    ```mlir
    %p, %r = fused.rms_norm_pad %x, residual %res, %w
            {eps = 1.000000e-05 : f64, low = 0 : i64, high = 192 : i64, round_sum}
        : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 2880], bf16>,
           !irfuse.tensor<[2880], bf16>)
        -> (!irfuse.tensor<[s0, 3072], bf16>, residual_out !irfuse.tensor<[s0, 2880], bf16>)
    ```
    `out` is the norm with `low` columns of `value` before each row and `high` after (the pad's
    own amounts: any hidden size, any multiple). `residual_out` exists iff `residual` does.
    `round_sum` is `norm.add_rms_norm`'s; the unit property `weight_f32` marks a weight product
    in float32 rounded once (`(w * normed).to(dtype)`, GPT-OSS's and `F.rms_norm`'s order)
    instead of the rounded norm times the weight in the model dtype.
    """

    name = "fused.rms_norm_pad"

    x = operand_def(TensorType)
    residual = opt_operand_def(TensorType)
    weight = operand_def(TensorType)

    out = result_def(TensorType)
    residual_out = opt_result_def(TensorType)

    eps = prop_def(FloatAttr[Float64Type])
    weight_offset = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))
    low = prop_def(IntegerAttr[I64])
    high = prop_def(IntegerAttr[I64])
    value = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))
    round_sum = opt_prop_def(UnitAttr)
    weight_f32 = opt_prop_def(UnitAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    traits = traits_def(Pure())

    def __init__(
        self,
        x: SSAValue,
        residual: SSAValue | None,
        weight: SSAValue,
        *,
        eps: float,
        low: int = 0,
        high: int,
        value: float = 0.0,
        weight_offset: float = 0.0,
        round_sum: bool = False,
        weight_f32: bool = False,
        result_types: Sequence[Attribute | None] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_types is None:
            xt: TensorType = x.type  # type: ignore[assignment]
            dims = pad_dims(xt, low, high)
            if None in dims:
                raise ValueError(f"give result_types: the last dim of {xt} is symbolic")
            result_types = [tensor_type(dims, xt.dtype), None if residual is None else xt]  # type: ignore[arg-type]
        super().__init__(
            operands=[x, residual, weight],
            result_types=list(result_types),
            properties={
                "eps": f64_attr(eps),
                "weight_offset": f64_attr(weight_offset),
                "low": i64_attr(low),
                "high": i64_attr(high),
                "value": f64_attr(value),
                "round_sum": UnitAttr() if round_sum else None,
                "weight_f32": UnitAttr() if weight_f32 else None,
            },
            attributes=attributes,
        )

    def verify_(self) -> None:
        check_eps(self.eps)
        x, weight, residual = self.x.type, self.weight.type, opt_type(self.residual)
        check_norm_weight(x, weight)
        if self.round_sum is not None and residual is None:
            raise VerifyException("round_sum applies to a norm with a residual only")
        if (residual is None) != (self.residual_out is None):
            raise VerifyException("residual_out exists exactly when residual does")
        if residual is not None:
            check_float("residual", residual)
            check_shape("residual", residual, x.dims)
            check_norm_result("residual_out", self.residual_out.type, x, residual)  # type: ignore[union-attr]
        if math.isnan(self.value.value.data):
            raise VerifyException("a NaN pad value is not supported")
        out = self.out.type
        check_shape("out", out, pad_dims(x, self.low.value.data, self.high.value.data))
        check_norm_dtype("out", out, x, weight)


# --- MLA ----------------------------------------------------------------------------------------


@irdl_op_definition
class MlaDualRmsNormOp(NamedOperandSyntax):
    """MLA's paired RMSNorms, of the q latent and of the kv latent, in one kernel.

    Replaces the two `norm.rms_norm` of slices of one projection (DeepSeek-V2/V3's
    `fused_qkv_a_proj` output split into `q_c` and `kv_lora`, then `kv_c` and `k_pe`:
    `q_a_layernorm(q_c)` and `kv_a_layernorm(kv_c)`; vLLM's `fused_mla_dual_rms_norm`, AITER's
    `fused_qk_rmsnorm`).

    ```mlir
    %qn, %kvn = fused.mla_dual_rms_norm %q_c, %qw, %kv_c, %kvw
            {q_eps = 1.000000e-06 : f64, kv_eps = 1.000000e-06 : f64}
        : (!irfuse.tensor<[s0, 1536], bf16>, !irfuse.tensor<[1536], bf16>,
           !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[512], bf16>)
        -> (!irfuse.tensor<[s0, 1536], bf16>, !irfuse.tensor<[s0, 512], bf16>)
    ```
    Each output is `norm.rms_norm` of its input over the last dim with its own eps; the two share
    the readings of `fused.qk_norm_rope`'s norm (`weight_offset`, `weight_f32`). q and kv have the
    same leading dims and dtype; results are typed like them.
    """

    name = "fused.mla_dual_rms_norm"

    q = operand_def(TensorType)
    q_weight = operand_def(TensorType)
    kv = operand_def(TensorType)
    kv_weight = operand_def(TensorType)

    q_out = result_def(TensorType)
    kv_out = result_def(TensorType)

    q_eps = prop_def(FloatAttr[Float64Type])
    kv_eps = prop_def(FloatAttr[Float64Type])
    weight_offset = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))
    weight_f32 = opt_prop_def(UnitAttr)

    traits = traits_def(Pure())

    def __init__(
        self,
        q: SSAValue,
        q_weight: SSAValue,
        kv: SSAValue,
        kv_weight: SSAValue,
        *,
        q_eps: float,
        kv_eps: float,
        weight_offset: float = 0.0,
        weight_f32: bool = False,
        result_types: Sequence[Attribute] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[q, q_weight, kv, kv_weight],
            result_types=list(result_types or (q.type, kv.type)),
            properties={
                "q_eps": f64_attr(q_eps),
                "kv_eps": f64_attr(kv_eps),
                "weight_offset": f64_attr(weight_offset),
                "weight_f32": UnitAttr() if weight_f32 else None,
            },
            attributes=attributes,
        )

    def verify_(self) -> None:
        check_eps(self.q_eps)
        check_eps(self.kv_eps)
        q, kv = self.q.type, self.kv.type
        check_norm_weight(q, self.q_weight.type, "q")
        check_norm_weight(kv, self.kv_weight.type, "kv")
        if kv.dtype != q.dtype:
            raise VerifyException(f"kv has dtype {kv.dtype}, expected q's {q.dtype}")
        check_rank("kv", kv, q.rank)
        for i, (a, b) in enumerate(zip(q.dims[:-1], kv.dims[:-1], strict=True)):
            check_dim(f"kv's dim {i}", b, a)
        check_same_type("q_out", self.q_out.type, q, "q")
        check_same_type("kv_out", self.kv_out.type, kv, "kv")


@irdl_op_definition
class RopeMlaKvCacheWriteOp(NamedOperandSyntax):
    """MLA's RoPE of q_pe and k_pe and the latent-cache write of `[kv_c | rotated k_pe]`, in one
    kernel that returns the rotated q_pe and k_pe.

    Replaces `attn.rope` of q_pe and k_pe whose rotated k_pe (viewed `[T, rope_dim]`) feeds
    `attn.mla_kv_cache_write` (vLLM's `fused_rope_unified_mla_kv_cache_update`,
    `concat_and_cache_mla_rope_fused`).

    ```mlir
    %qr, %kr, %c2 = fused.rope_mla_kv_cache_write %q_pe, %k_pe, %kv_c, positions %pos,
            cos_sin_cache %cs, %cache, %slots
            {is_neox = false, rotary_dim = 64 : i64, head_dim = 64 : i64}
        : (!irfuse.tensor<[s0, 16, 64], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>,
           !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0], i64>,
           !irfuse.tensor<[4096, 64], bf16>, !irfuse.tensor<[1024, 16, 576], bf16>,
           !irfuse.tensor<[s0], i64>)
        -> (!irfuse.tensor<[s0, 16, 64], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>,
            !irfuse.tensor<[1024, 16, 576], bf16>)
    ```
    q_pe `[T, H, rope_dim]`, k_pe `[T, 1, rope_dim]` or `[T, rope_dim]`; tables and `rope_f32`
    as `fused.qk_norm_rope`'s; kv_c, the cache and the slots as `attn.mla_kv_cache_write`'s (the
    cache's new value is a result here; the kernel writes it in place). Results: q_pe and k_pe
    rotated (typed like them) and the cache.
    """

    name = "fused.rope_mla_kv_cache_write"

    q_pe = operand_def(TensorType)
    k_pe = operand_def(TensorType)
    kv_c = operand_def(TensorType)
    positions = opt_operand_def(TensorType)
    cos_sin_cache = opt_operand_def(TensorType)
    cos = opt_operand_def(TensorType)
    sin = opt_operand_def(TensorType)
    kv_cache = operand_def(TensorType)
    slot_mapping = operand_def(TensorType)

    q_out = result_def(TensorType)
    k_out = result_def(TensorType)
    kv_cache_out = result_def(TensorType)

    is_neox = prop_def(BoolAttr)
    rotary_dim = prop_def(IntegerAttr[I64])
    head_dim = prop_def(IntegerAttr[I64])
    rope_f32 = opt_prop_def(UnitAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        q_pe: SSAValue,
        k_pe: SSAValue,
        kv_c: SSAValue,
        kv_cache: SSAValue,
        slot_mapping: SSAValue,
        *,
        positions: SSAValue | None = None,
        cos_sin_cache: SSAValue | None = None,
        cos: SSAValue | None = None,
        sin: SSAValue | None = None,
        is_neox: bool,
        rotary_dim: int,
        head_dim: int,
        rope_f32: bool = False,
        result_types: Sequence[Attribute] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[q_pe, k_pe, kv_c, positions, cos_sin_cache, cos, sin, kv_cache,
                      slot_mapping],
            result_types=list(result_types or (q_pe.type, k_pe.type, kv_cache.type)),
            properties={
                "is_neox": bool_attr(is_neox),
                "rotary_dim": i64_attr(rotary_dim),
                "head_dim": i64_attr(head_dim),
                "rope_f32": UnitAttr() if rope_f32 else None,
            },
            attributes=attributes,
        )

    def verify_(self) -> None:
        rotary_dim, head_dim = _int(self.rotary_dim), _int(self.head_dim)
        check_rotary(rotary_dim, head_dim)
        check_rope_tables(
            opt_type(self.positions), opt_type(self.cos_sin_cache), opt_type(self.cos),
            opt_type(self.sin), rotary_dim,
        )
        q, k = self.q_pe.type, self.k_pe.type
        check_float("q_pe", q)
        check_rank("q_pe", q, 3)
        check_dim("q_pe's last dim (head_dim)", q.dims[2], head_dim)
        if k.rank not in (2, 3) or (k.rank == 3 and not dims_agree(k.dims[1], 1)):
            raise VerifyException(f"k_pe has shape {shape_str(k.dims)}: [T, 1, rope_dim] or "
                                  "[T, rope_dim] (one key shared by all heads)")
        check_dim("k_pe's last dim (head_dim)", k.dims[-1], head_dim)
        if k.dtype != q.dtype:
            raise VerifyException(f"k_pe has dtype {k.dtype}, expected q_pe's {q.dtype}")
        check_mla_cache_write(self.kv_c.type, tensor_type((k.dims[0], head_dim), k.dtype),
                              self.kv_cache.type, self.slot_mapping.type)
        check_same_type("q_out", self.q_out.type, q, "q_pe")
        check_same_type("k_out", self.k_out.type, k, "k_pe")
        check_same_type("kv_cache_out", self.kv_cache_out.type, self.kv_cache.type, "kv_cache")


Fused = Dialect(
    "fused",
    [
        RmsNormQuantOp,
        SiluMulQuantOp,
        SiluMulQuantNvfp4Op,
        AllReduceRmsNormOp,
        QkNormRopeOp,
        RopeKvCacheWriteOp,
        AttentionQuantOp,
        PagedDecodeQuantOp,
        MlaAttentionQuantOp,
        GemmReduceScatterOp,
        AllGatherGemmOp,
        RmsNormPadOp,
        MlaDualRmsNormOp,
        RopeMlaKvCacheWriteOp,
    ],
    [],
)
