"""The `fused` dialect: one op per fused kernel family, lowered to one kernel by emit.

Fused ops have no decomposition region: their numerics are the reference implementation's beside
the kernel (`docs/numerics.md`, which also defines the readings `round_sum`, `weight_f32` and
`rope_f32`). Every output is a result (vLLM's fused ops mutate buffers). A fused op inherits the
families of the ops it replaces (`NormOperation`, `QuantOperation`, ...) and calls their `check_*`
helpers, so it is held to the rules of each of them. Each op's docstring names the chain it
replaces.

Each op's textual form: `filecheck/dialects/fused/ops.mlir`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

from xdsl.dialects.builtin import (
    I64,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    f32,
)
from xdsl.ir import Attribute, TypeAttribute
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

from irfuse.dialects import act, attn, coll, gemm, norm, quant
from irfuse.dialects.irfuse import TensorType, derived_type, tensor_type
from irfuse.dialects.quant import DYNAMIC_TOKEN, GROUP, NVFP4, STATIC_TENSOR, QuantScheme
from irfuse.ir import shapes
from irfuse.ir.dialect import declared_dialect
from irfuse.ir.shapes import Dim, MaybeDim
from irfuse.ir.syntax import NamedOperandSyntax, f64_attr, i64_attr, opt_type


def check_attention_output(
    op: Any, output_scale: Any, out: TensorType, scale_out: Any, tokens: int | None,
    hidden: MaybeDim,
) -> None:
    """The quantized attention output, token-major and flattened: `[..., heads * v_head_dim]`,
    its leading dims holding the `tokens` query positions (batch * length) when both are static."""
    quant.check_scale_operand(op.scheme.kind.data, output_scale, "output_scale")
    shapes.check_min_rank("out", out, 2)
    lead = out.dims[:-1]
    n = shapes.static_numel(lead)
    if tokens is not None and n is not None and n != tokens:
        raise VerifyException(f"out has shape {shapes.shape_str(out.dims)}: its leading dims must "
                              f"hold the {tokens} query positions")
    if not op.scheme.is_nvfp4:
        shapes.check_dim("out's last dim (heads * v_head_dim)", out.dims[-1], hidden)
        hidden = out.dims[-1]
    quant.check_quantized(op.scheme, (*lead, hidden), out, scale_out, "out")


def check_qk_norms(q: TensorType, k: TensorType, q_weight: TensorType | None,
                   k_weight: TensorType | None, eps: FloatAttr | None) -> None:
    """The optional per-head norms before a fused RoPE: both weights (`[head_dim]`) or neither,
    and `eps` exactly with them."""
    if (q_weight is None) != (k_weight is None):
        raise VerifyException("q_weight and k_weight go together")
    if (q_weight is None) != (eps is None):
        raise VerifyException("eps is given exactly when the norm weights are")
    if q_weight is not None:
        norm.check_norm_weight(q, q_weight, "q")
        norm.check_norm_weight(k, k_weight, "k")


def flattened_tokens(dims: Sequence[Dim]) -> Dim:
    """A builder's count of query positions: the one symbolic dim, or the static product."""
    if all(d == 1 for d in dims[:-1]):
        return dims[-1]
    n = shapes.static_numel(dims)
    if n is None:
        raise ValueError(f"give result_types: cannot flatten {shapes.shape_str(dims)}")
    return n


# --- norm + quant, activation + quant -----------------------------------------------------------


@irdl_op_definition
class RmsNormQuantOp(quant.QuantOperation, norm.NormOperation, NamedOperandSyntax):
    """(Residual add +) RMSNorm + FP8 quantization, in one kernel: replaces `norm.rms_norm` or
    `norm.add_rms_norm` followed by one or more `quant.fp8` (static: one `qs` per scale)."""

    name = "fused.rms_norm_quant"

    x = operand_def(TensorType)
    residual = opt_operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    scales = var_operand_def(TensorType)
    scale_ub = opt_operand_def(TensorType)
    qs = var_result_def(TensorType)
    scale_out = opt_result_def(TensorType)
    residual_out = opt_result_def(TensorType)

    reciprocal = opt_prop_def(UnitAttr)
    round_sum = opt_prop_def(UnitAttr)
    weight_f32 = opt_prop_def(UnitAttr)
    irdl_options = (
        AttrSizedOperandSegments(as_property=True),
        AttrSizedResultSegments(as_property=True),
    )
    traits = traits_def(Pure())
    SCHEMES: ClassVar = (STATIC_TENSOR, DYNAMIC_TOKEN, GROUP)

    @classmethod
    def infer_result_types(cls, x, scheme, residual=None, scales=(), **_: Any) -> list[Any]:
        q, scale = quant.quant_result_types(scheme, x.type.dims, x.type.dtype)
        return [[q] * max(1, len(scales)), scale, None if residual is None else x.type]

    def verify_(self) -> None:
        super().verify_()
        x, scheme, scales, qs = self.x.type, self.scheme, self.scales, self.qs
        norm.check_norm_weight(x, opt_type(self.weight))
        norm.check_residual(x, opt_type(self.residual), opt_type(self.residual_out),
                            self.round_sum)
        quant.check_reciprocal(scheme, self.reciprocal)
        if scheme.is_static:
            if not scales:
                raise VerifyException("a static scheme needs at least one scale")
            if len(qs) != len(scales):
                raise VerifyException(f"{len(scales)} scales but {len(qs)} quantized results (qs)")
            for i, s in enumerate(scales):
                quant.check_static_scale(f"scales[{i}]", s.type)
        elif scales:
            raise VerifyException(f"a {scheme.kind.data} scheme computes its scale: no scales "
                                  "operands")
        elif len(qs) != 1:
            raise VerifyException(
                f"a {scheme.kind.data} scheme yields one quantized result, got {len(qs)}"
            )
        quant.check_scale_ub(scheme, opt_type(self.scale_ub))
        scale_out = opt_type(self.scale_out)
        for i, q in enumerate(qs):
            quant.check_fp8_results(scheme, x.dims, q.type, scale_out, f"qs[{i}]")


@irdl_op_definition
class SiluMulQuantOp(quant.QuantOperation, act.GatedActivationOperation, NamedOperandSyntax):
    """SiLU·Mul (or GeGLU: `activation`) + FP8 quantization of its result, in one kernel:
    replaces `act.silu_mul` followed by `quant.fp8` static or group."""

    name = "fused.silu_mul_quant"

    x = operand_def(TensorType)
    scale = opt_operand_def(TensorType)
    up = opt_operand_def(TensorType)
    q = result_def(TensorType)
    scale_out = opt_result_def(TensorType)

    reciprocal = opt_prop_def(UnitAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())
    SCHEMES: ClassVar = (STATIC_TENSOR, GROUP)

    @classmethod
    def infer_result_types(cls, x, scheme, up=None, **_: Any) -> list[Any]:
        dims = x.type.dims if up is not None else act.silu_mul_dims(x.type)
        return quant.quant_result_types(scheme, dims, x.type.dtype)

    def verify_(self) -> None:
        super().verify_()
        dims = act.silu_mul_dims(self.x.type, opt_type(self.up))
        quant.check_scale_operand(self.scheme.kind.data, opt_type(self.scale), "scale")
        quant.check_reciprocal(self.scheme, self.reciprocal)
        quant.check_fp8_results(self.scheme, dims, self.q.type, opt_type(self.scale_out))


@irdl_op_definition
class SiluMulQuantNvfp4Op(act.GatedActivationOperation, NamedOperandSyntax):
    """SiLU·Mul (or GeGLU: `activation`) + NVFP4 quantization of its result, in one kernel:
    replaces `act.silu_mul` followed by `quant.nvfp4`."""

    name = "fused.silu_mul_quant_nvfp4"

    x = operand_def(TensorType)
    global_scale = operand_def(TensorType)
    up = opt_operand_def(TensorType)
    q = result_def(TensorType)
    block_scale = result_def(TensorType)

    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, x, up=None, **_: Any) -> list[Any]:
        dims = x.type.dims if up is not None else act.silu_mul_dims(x.type)
        return quant.quant_result_types(QuantScheme.nvfp4(), dims, x.type.dtype)

    def verify_(self) -> None:
        super().verify_()
        dims = act.silu_mul_dims(self.x.type, opt_type(self.up))
        quant.check_nvfp4_input("silu_mul(x)", dims)
        quant.check_static_scale("global_scale", self.global_scale.type)
        quant.check_nvfp4_results(dims, self.q.type, self.block_scale.type)


# --- all-reduce + norm --------------------------------------------------------------------------


@irdl_op_definition
class AllReduceRmsNormOp(quant.QuantOperation, norm.NormOperation, coll.CollectiveOperation,
                         NamedOperandSyntax):
    """All-reduce + (residual add +) RMSNorm (+ FP8 or NVFP4 quant), in one kernel: replaces
    `coll.all_reduce` -> `norm.(add_)rms_norm` (-> `quant.fp8` static, per-token or per-group,
    or `quant.nvfp4`). `residual_out` is `all_reduce(x) (+ residual)`; `out` the norm, or with a
    scheme its quantization (`scale`: the static or NVFP4 global scale)."""

    name = "fused.all_reduce_rms_norm"

    x = operand_def(TensorType)
    residual = opt_operand_def(TensorType)
    weight = operand_def(TensorType)
    scale = opt_operand_def(TensorType)
    scale_ub = opt_operand_def(TensorType)
    out = result_def(TensorType)
    scale_out = opt_result_def(TensorType)
    residual_out = result_def(TensorType)

    scheme = opt_prop_def(QuantScheme)
    round_sum = opt_prop_def(UnitAttr)
    weight_f32 = opt_prop_def(UnitAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    SCHEMES: ClassVar = (STATIC_TENSOR, DYNAMIC_TOKEN, GROUP, NVFP4)

    @classmethod
    def infer_result_types(cls, x, scheme=None, **_: Any) -> list[Any]:
        return [*quant.quant_result_types(scheme, x.type.dims, x.type.dtype), x.type]

    def verify_(self) -> None:
        super().verify_()
        x, weight, residual = self.x.type, self.weight.type, opt_type(self.residual)
        norm.check_norm_weight(x, weight)
        residual_out = self.residual_out.type
        norm.check_residual(x, residual, None if residual is None else residual_out,
                            self.round_sum)
        if residual is None:
            shapes.check_same_type("residual_out", residual_out, x, "x")
        scale, scale_ub = opt_type(self.scale), opt_type(self.scale_ub)
        scale_out = opt_type(self.scale_out)
        if self.scheme is None:
            if scale is not None or scale_out is not None or scale_ub is not None:
                raise VerifyException("scale, scale_ub and scale_out need a quant scheme")
            norm.check_norm_result("out", self.out.type, x)
            return
        quant.check_scale_operand(self.scheme.kind.data, scale, "scale")
        quant.check_scale_ub(self.scheme, scale_ub)
        quant.check_quantized(self.scheme, x.dims, self.out.type, scale_out, "out")


# --- QK norm + RoPE, RoPE + KV cache ------------------------------------------------------------


@irdl_op_definition
class QkNormRopeOp(attn.RopeOperation, norm.NormOperation, NamedOperandSyntax):
    """Per-head RMSNorm of q and of k, then RoPE of both, in one kernel: replaces `norm.rms_norm`
    of q and of k (weights `[head_dim]`) feeding `attn.rope`, in the rope's layout."""

    name = "fused.qk_norm_rope"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    q_weight = operand_def(TensorType)
    k_weight = operand_def(TensorType)
    q_out = result_def(TensorType)
    k_out = result_def(TensorType)

    weight_f32 = opt_prop_def(UnitAttr)
    rope_f32 = opt_prop_def(UnitAttr)
    traits = traits_def(Pure())
    RESULTS_TYPED_LIKE: ClassVar = ("q", "k")

    def verify_(self) -> None:
        super().verify_()
        q, k = self.q.type, self.k.type
        for what, x, w in (("q", q, self.q_weight.type), ("k", k, self.k_weight.type)):
            self.check_heads(what, x)
            norm.check_norm_weight(x, w, what)
        shapes.check_same_dtype("k", k, q, "q")
        shapes.check_same_type("q_out", self.q_out.type, q, "q")
        shapes.check_same_type("k_out", self.k_out.type, k, "k")


@irdl_op_definition
class RopeKvCacheWriteOp(norm.NormOperation, attn.RopeOperation, NamedOperandSyntax):
    """RoPE of q and k (after their per-head norms, with `q_weight` and `k_weight`) and the paged
    KV-cache write of the rotated k and of v, in one kernel that returns rotated q: replaces
    `attn.rope` (or `fused.qk_norm_rope`) whose k only feeds `attn.kv_cache_write`. With
    `k_scale` and `v_scale` the caches hold f8E4M3FN, k and v stored as `clamp(x / scale, -448,
    448)` (vLLM's FP8 KV cache); `k_out`, the rotated k, is for a k also read after the write."""

    name = "fused.rope_kv_cache_write"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    q_weight = opt_operand_def(TensorType)
    k_weight = opt_operand_def(TensorType)
    # RoPE's tables again, here so that they come before the caches in the operand order.
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
    k_out = opt_result_def(TensorType)

    eps = opt_prop_def(FloatAttr[Float64Type])
    weight_f32 = opt_prop_def(UnitAttr)
    rope_f32 = opt_prop_def(UnitAttr)
    KEYWORD_OPERANDS: ClassVar = (
        *attn.RopeOperation.KEYWORD_OPERANDS, "q_weight", "k_weight", "k_scale", "v_scale"
    )

    @classmethod
    def infer_result_types(cls, q, k_cache, v_cache, **_: Any) -> list[Any]:
        return [q.type, k_cache.type, v_cache.type, None]  # no k_out unless asked for

    def verify_(self) -> None:
        super().verify_()
        q, k, v = self.q.type, self.k.type, self.v.type
        shapes.check_float("q", q)
        self.check_heads("q", q, 3)
        self.check_heads("k", k)
        shapes.check_same_dtype("k", k, q, "q")
        shapes.check_dim("k's token count", k.dims[0], q.dims[0])
        check_qk_norms(q, k, opt_type(self.q_weight), opt_type(self.k_weight), self.eps)
        k_cache, v_cache = self.k_cache.type, self.v_cache.type
        k_scale, v_scale = opt_type(self.k_scale), opt_type(self.v_scale)
        if (k_scale is None) != (v_scale is None):
            raise VerifyException("k_scale and v_scale go together")
        if k_scale is not None:  # an FP8 cache: k and v are stored as clamp(x / scale)
            for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
                if cache.dtype != shapes.F8E4M3FN:
                    raise VerifyException(f"with k_scale / v_scale, {name} must hold "
                                          f"f8E4M3FN, not {cache.dtype}")
            for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):
                if shapes.static_numel(scale.dims) != 1 or scale.dtype != f32:
                    raise VerifyException(f"{name} must be one f32 element, not "
                                          f"{shapes.shape_str(scale.dims)} {scale.dtype}")
            shapes.check_same_dtype("v", v, q, "q")
            k, v = tensor_type(k.dims, k_cache.dtype), tensor_type(v.dims, v_cache.dtype)
        attn.check_paged_cache_write(k, v, *attn.cache_halves(self.k_cache, self.v_cache),
                                     self.slot_mapping.type)
        shapes.check_same_type("q_out", self.q_out.type, q, "q")
        shapes.check_same_type("k_cache_out", self.k_cache_out.type, k_cache, "k_cache")
        shapes.check_same_type("v_cache_out", self.v_cache_out.type, v_cache, "v_cache")
        if self.k_out is not None:
            shapes.check_same_type("k_out", self.k_out.type, k, "k")


# --- attention + quant --------------------------------------------------------------------------


@irdl_op_definition
class AttentionQuantOp(quant.QuantOperation, attn.AttentionOperation, NamedOperandSyntax):
    """Attention whose kernel writes its output quantized: replaces `attn.attention` ->
    (transpose, reshape to `[tokens, H * Dv]`) -> `quant.fp8` static or group, or `quant.nvfp4`.
    `output_scale` is the static or NVFP4 global scale."""

    name = "fused.attention_quant"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    output_scale = opt_operand_def(TensorType)
    out = result_def(TensorType)
    scale_out = opt_result_def(TensorType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())
    SCHEMES: ClassVar = (STATIC_TENSOR, GROUP, NVFP4)

    @classmethod
    def infer_result_types(cls, q, v, scheme, **_: Any) -> list[Any]:
        *batch, hq, lq, _ = q.type.dims
        hidden = shapes.mul_dim(v.type.dims[-1], hq) if isinstance(hq, int) else None
        return quant.quant_result_types(scheme, (flattened_tokens((*batch, lq)), hidden),
                                        q.type.dtype)

    def verify_(self) -> None:
        super().verify_()
        *batch, hq, lq, dv = attn.check_attention(
            self.q.type, self.k.type, self.v.type, opt_type(self.mask),
            bool(self.causal.value.data),
        )
        check_attention_output(
            self, opt_type(self.output_scale), self.out.type, opt_type(self.scale_out),
            shapes.static_numel((*batch, lq)),
            shapes.mul_dim(dv, hq) if isinstance(hq, int) else None,
        )


@irdl_op_definition
class PagedDecodeQuantOp(NamedOperandSyntax):
    """Decode attention over a paged KV cache, read in place, its output written quantized:
    replaces the gather of each sequence's pages through its block-table row, the mask of its
    first `seq_lens[b]` positions, `attn.attention` of one query per sequence over them, and the
    quant of the output (static_tensor or nvfp4)."""

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

    def verify_(self) -> None:
        attn.check_scale(self.scale)
        quant.check_quant_properties(self, (STATIC_TENSOR, NVFP4))
        q, kc, vc = self.q.type, self.k_cache.type, self.v_cache.type
        shapes.check_float("q", q)
        shapes.check_rank("q", q, 4)
        b, hq, one, d = q.dims
        shapes.check_dim("q's query length (one token per sequence)", one, 1)
        shapes.check_rank("k_cache", kc, 4)
        shapes.check_shape("k_cache", kc, (None, None, None, d))
        shapes.check_same_type("v_cache", vc, kc, "k_cache")
        if kc.dtype != q.dtype:
            raise VerifyException(f"the caches hold {kc.dtype}, expected q's {q.dtype}")
        attn.check_gqa(hq, kc.dims[2], "the cache's")
        table, lens = self.block_table.type, self.seq_lens.type
        shapes.check_integer("block_table", table)
        shapes.check_rank("block_table", table, 2)
        shapes.check_dim("block_table's rows", table.dims[0], b)
        shapes.check_integer("seq_lens", lens)
        shapes.check_shape("seq_lens", lens, (b,))
        check_attention_output(
            self, self.output_scale.type, self.out.type, opt_type(self.scale_out),
            b if isinstance(b, int) else None,
            shapes.mul_dim(d, hq) if isinstance(hq, int) else None,
        )


@irdl_op_definition
class MlaAttentionQuantOp(quant.QuantOperation, attn.MlaOperation, NamedOperandSyntax):
    """MLA attention whose kernel writes its output quantized: replaces `attn.mla_attention` ->
    (reshape to `[T, H * v]`) -> `quant.fp8` static or group, or `quant.nvfp4`. `output_scale`
    is the static or NVFP4 global scale; batch-major, `out` is `[... * Lq, H * v_head_dim]`."""

    name = "fused.mla_attention_quant"

    q = operand_def(TensorType)
    kv_c = operand_def(TensorType)
    k_pe = operand_def(TensorType)
    kv_b_weight = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    output_scale = opt_operand_def(TensorType)
    out = result_def(TensorType)
    scale_out = opt_result_def(TensorType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())
    SCHEMES: ClassVar = (STATIC_TENSOR, GROUP, NVFP4)

    @classmethod
    def infer_result_types(
        cls, q, scheme, num_heads, v_head_dim, batch_major=False, **_: Any
    ) -> list[Any]:
        dims = q.type.dims
        tokens = flattened_tokens((*dims[:-3], dims[-2])) if batch_major else dims[0]
        return quant.quant_result_types(scheme, (tokens, num_heads * v_head_dim), q.type.dtype)

    def verify_(self) -> None:
        super().verify_()
        batch_major, out = bool(self.batch_major.value.data), self.out.type
        dims = self.mla_dims(self.q.type, self.kv_c.type, self.k_pe.type, self.kv_b_weight.type,
                             opt_type(self.mask))
        heads, v_dim = dims[-3] if batch_major else dims[1], dims[-1]
        if out.rank != 2 or not isinstance(heads, int):
            raise VerifyException(
                f"out must be [T, num_heads * v_head_dim], got {shapes.shape_str(out.dims)}"
            )
        tokens = shapes.static_numel((*dims[:-3], dims[-2])) if batch_major else None
        if not batch_major:
            shapes.check_dim("out's token count", out.dims[0], dims[0])
        check_attention_output(self, opt_type(self.output_scale), out, opt_type(self.scale_out),
                               tokens, shapes.mul_dim(v_dim, heads))


# --- GEMM + collectives (async TP) --------------------------------------------------------------


class GemmCollectiveOperation(coll.CollectiveOperation, NamedOperandSyntax):
    """A GEMM fused with a collective along `dim`: `gemm.matmul` without scales, or
    `gemm.scaled_matmul` with both scales and `out_dtype`."""

    a = operand_def(TensorType)
    b = operand_def(TensorType)
    scale_a = opt_operand_def(TensorType)
    scale_b = opt_operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    c = result_def(TensorType)

    dim = prop_def(IntegerAttr[I64], default_value=i64_attr(0))
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def product(self, a_rows: Dim | None = None) -> tuple[tuple[Dim, Dim], Attribute]:
        """Check the (local) product; returns its dims and dtype. `a_rows`: the rows a row-wise
        scale_a has, where they are not a's own."""
        a, b, bias = self.a.type, self.b.type, opt_type(self.bias)
        scale_a, scale_b = opt_type(self.scale_a), opt_type(self.scale_b)
        out_dtype = self.properties.get("out_dtype")
        if (scale_a is None) != (scale_b is None):
            raise VerifyException("scale_a and scale_b come together (a scaled GEMM) or not at all")
        if scale_a is None:
            dims, dtype = gemm.check_matmul(a, b, bias)
            if out_dtype is not None and out_dtype != dtype:
                raise VerifyException(f"out_dtype {out_dtype} differs from a's dtype {dtype}")
            return dims, dtype
        if out_dtype is None:
            raise VerifyException("a scaled GEMM needs out_dtype")
        return gemm.check_scaled_matmul(a, b, scale_a, scale_b, bias, out_dtype, a_rows), out_dtype

    def check_c(self, dims: Sequence[MaybeDim], dtype: Attribute) -> None:
        c = self.c.type
        shapes.check_shape("c", c, dims)
        if c.dtype != dtype:
            raise VerifyException(f"c has dtype {c.dtype}, expected {dtype}")


@irdl_op_definition
class GemmReduceScatterOp(GemmCollectiveOperation):
    """A GEMM whose result is reduce-scattered over the TP group, overlapped (async TP):
    replaces `gemm.matmul` or `gemm.scaled_matmul` followed by `coll.reduce_scatter`; `c` is
    the product's shard along `dim` (0 or 1)."""

    name = "fused.gemm_reduce_scatter"

    reduce_op = prop_def(StringAttr, default_value=StringAttr("sum"))
    out_dtype = opt_prop_def(TypeAttribute)

    @classmethod
    def infer_result_types(cls, a, b, world_size, dim=0, out_dtype=None, **_: Any) -> list[Any]:
        product = gemm.product_type(a, b, out_dtype)
        return [derived_type(product, coll.scattered_dims(product.dims, dim % 2, world_size))]

    def verify_(self) -> None:
        super().verify_()
        coll.check_reduce_op(self.reduce_op)
        dims, dtype = self.product()
        d = shapes.normalize_dim(self.dim.value.data, 2, "dim")
        self.check_c(coll.scattered_dims(dims, d, self.world_size.value.data), dtype)


@irdl_op_definition
class AllGatherGemmOp(GemmCollectiveOperation):
    """A GEMM on a row-sharded a that is all-gathered first (dim 0 only), overlapped (async TP):
    replaces `coll.all_gather` of a followed by `gemm.matmul` or `gemm.scaled_matmul`. A
    row-wise `scale_a` is the shard's `[M / world_size, 1]` (gathered with a) or the gathered
    rows' `[M, 1]` (replicated), the two forms torch's `fused_all_gather_scaled_matmul` takes."""

    name = "fused.all_gather_gemm"

    out_dtype = opt_prop_def(TypeAttribute)

    @classmethod
    def infer_result_types(cls, a, b, world_size, out_dtype=None, **_: Any) -> list[Any]:
        product = gemm.product_type(a, b, out_dtype)
        return [derived_type(product, (shapes.mul_dim(product.dims[0], world_size),
                                       product.dims[1]))]

    def verify_(self) -> None:
        super().verify_()
        if self.dim.value.data != 0:
            raise VerifyException(
                f"all_gather_gemm gathers a along dim 0, got dim {self.dim.value.data}"
            )
        sa = opt_type(self.scale_a)
        ws = self.world_size.value.data
        a_rows = None  # a row-wise scale of the gathered rows (replicated) has M of them
        shard_rows = self.a.type.dims[0]  # type: ignore[attr-defined]
        if sa is not None and sa.rank == 2 and not shapes.is_one_element(sa.dims) \
                and sa.dims[0] != shard_rows:
            # Not the shard's rows: the gathered rows' (M = the shard's x world_size; a
            # symbolic count, such as a token count padded for sequence parallelism, agrees).
            gathered = shapes.mul_dim(shard_rows, ws)
            if not shapes.dims_agree(sa.dims[0], gathered):
                raise VerifyException(
                    f"scale_a of an all-gathered GEMM is per-tensor [1], the shard's row-wise "
                    f"{shapes.shape_str((shard_rows, 1))} or the gathered rows' "
                    f"{shapes.shape_str((gathered, 1))}; got {shapes.shape_str(sa.dims)}")
            a_rows = sa.dims[0]
        (m, n), dtype = self.product(a_rows)
        self.check_c((shapes.mul_dim(m, ws), n), dtype)


# --- norm + pad ---------------------------------------------------------------------------------


@irdl_op_definition
class RmsNormPadOp(norm.NormOperation, NamedOperandSyntax):
    """(Residual add +) RMSNorm + constant pad of the last dim, in one kernel: replaces
    `norm.rms_norm` or `norm.add_rms_norm` whose `y` is padded by `act.pad` (`out`, padded as
    `act.pad` pads)."""

    name = "fused.rms_norm_pad"

    x = operand_def(TensorType)
    residual = opt_operand_def(TensorType)
    weight = operand_def(TensorType)
    out = result_def(TensorType)
    residual_out = opt_result_def(TensorType)

    low = prop_def(IntegerAttr[I64])
    high = prop_def(IntegerAttr[I64])
    value = prop_def(FloatAttr[Float64Type], default_value=f64_attr(0.0))
    round_sum = opt_prop_def(UnitAttr)
    weight_f32 = opt_prop_def(UnitAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())
    BUILD_DEFAULTS: ClassVar = {"low": 0}

    @classmethod
    def infer_result_types(cls, x, high, low, residual=None, **_: Any) -> list[Any]:
        return [derived_type(x.type, act.pad_dims(x.type, low, high)),
                None if residual is None else x.type]

    def verify_(self) -> None:
        super().verify_()
        x = self.x.type
        norm.check_norm_weight(x, self.weight.type)
        norm.check_residual(x, opt_type(self.residual), opt_type(self.residual_out),
                            self.round_sum)
        if math.isnan(self.value.value.data):
            raise VerifyException("a NaN pad value is not supported")
        out = self.out.type
        shapes.check_shape("out", out, act.pad_dims(x, self.low.value.data, self.high.value.data))
        shapes.check_float("out", out)


# --- MLA ----------------------------------------------------------------------------------------


@irdl_op_definition
class MlaDualRmsNormOp(NamedOperandSyntax):
    """MLA's paired RMSNorms, of the q latent and of the kv latent, in one kernel: replaces the
    two `norm.rms_norm` of slices of one projection (DeepSeek-V2/V3's `q_a_layernorm(q_c)` and
    `kv_a_layernorm(kv_c)`; vLLM's `fused_mla_dual_rms_norm`, AITER's `fused_qk_rmsnorm`), each
    with its own eps; q and kv share their leading dims and dtype."""

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
    RESULTS_TYPED_LIKE: ClassVar = ("q", "kv")

    def verify_(self) -> None:
        norm.check_eps("q_eps", self.q_eps)
        norm.check_eps("kv_eps", self.kv_eps)
        q, kv = self.q.type, self.kv.type
        norm.check_norm_weight(q, self.q_weight.type, "q")
        norm.check_norm_weight(kv, self.kv_weight.type, "kv")
        shapes.check_same_dtype("kv", kv, q, "q")
        shapes.check_rank("kv", kv, q.rank)
        for i, (a, b) in enumerate(zip(q.dims[:-1], kv.dims[:-1], strict=True)):
            shapes.check_dim(f"kv's dim {i}", b, a)
        shapes.check_same_type("q_out", self.q_out.type, q, "q")
        shapes.check_same_type("kv_out", self.kv_out.type, kv, "kv")


@irdl_op_definition
class RopeMlaKvCacheWriteOp(attn.RopeOperation, NamedOperandSyntax):
    """MLA's RoPE of q_pe and k_pe and the latent-cache write of `[kv_c | rotated k_pe]`, in one
    kernel that returns the rotated q_pe and k_pe and the cache: replaces `attn.rope` of q_pe and
    k_pe (`[T, 1, rope_dim]` or `[T, rope_dim]`) whose rotated k_pe feeds
    `attn.mla_kv_cache_write` (vLLM's `concat_and_cache_mla_rope_fused`)."""

    name = "fused.rope_mla_kv_cache_write"

    q_pe = operand_def(TensorType)
    k_pe = operand_def(TensorType)
    kv_c = operand_def(TensorType)
    # RoPE's tables again, here so that they come before the cache in the operand order.
    positions = opt_operand_def(TensorType)
    cos_sin_cache = opt_operand_def(TensorType)
    cos = opt_operand_def(TensorType)
    sin = opt_operand_def(TensorType)
    kv_cache = operand_def(TensorType)
    slot_mapping = operand_def(TensorType)
    q_out = result_def(TensorType)
    k_out = result_def(TensorType)
    kv_cache_out = result_def(TensorType)

    rope_f32 = opt_prop_def(UnitAttr)
    RESULTS_TYPED_LIKE: ClassVar = ("q_pe", "k_pe", "kv_cache")

    def verify_(self) -> None:
        super().verify_()
        q, k = self.q_pe.type, self.k_pe.type
        head_dim = self.head_dim.value.data
        shapes.check_float("q_pe", q)
        self.check_heads("q_pe", q, 3)
        attn.check_mla_k_pe(k)
        self.check_heads("k_pe", k)
        shapes.check_same_dtype("k_pe", k, q, "q_pe")
        attn.check_mla_cache_write(self.kv_c.type, tensor_type((k.dims[0], head_dim), k.dtype),
                                   self.kv_cache.type, self.slot_mapping.type)
        shapes.check_same_type("q_out", self.q_out.type, q, "q_pe")
        shapes.check_same_type("k_out", self.k_out.type, k, "k_pe")
        shapes.check_same_type("kv_cache_out", self.kv_cache_out.type, self.kv_cache.type,
                               "kv_cache")


# --- vLLM's attention calls ---------------------------------------------------------------------


@irdl_op_definition
class VllmAttentionQuantOp(quant.QuantOperation, attn.VllmAttentionOperation, NamedOperandSyntax):
    """vLLM's attention of one layer with its output written quantized, by an irfuse kernel that
    reads the layer's cache through vLLM's forward context: replaces `attn.vllm_attention` (with
    `mla`, `attn.vllm_mla_attention`) -> its output flattened to `[T, H * Dv]` -> `quant.fp8`
    static or `quant.nvfp4`, where the layer's backend does not take the quant itself. The
    operands are the attention's, then the quant's (global) scale."""

    name = "fused.vllm_attention_quant"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    output_scale = operand_def(TensorType)
    out = result_def(TensorType)
    scale_out = opt_result_def(TensorType)

    mla = opt_prop_def(UnitAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    SCHEMES: ClassVar = (STATIC_TENSOR, NVFP4)

    def verify_(self) -> None:
        super().verify_()
        out, q = self.out.type, self.q.type
        shapes.check_float("q", q)
        shapes.check_rank("q", q, 3)
        shapes.check_rank("out", out, 2)
        shapes.check_dim("out's token count", out.dims[0], q.dims[0])
        if self.mla is None:
            _, hq, dv = attn.check_vllm_attention(q, self.k.type, self.v.type)
            hidden: MaybeDim = shapes.mul_dim(dv, hq) if isinstance(hq, int) else None
        else:
            width = out.dims[1]
            hidden = width * 2 if self.scheme.is_nvfp4 and isinstance(width, int) else width
        check_attention_output(self, self.output_scale.type, out, opt_type(self.scale_out), None,
                               hidden)


@irdl_op_definition
class RopeVllmKvCacheUpdateOp(norm.NormOperation, attn.RopeOperation,
                              attn.VllmLayerOperation, NamedOperandSyntax):
    """RoPE of q and k (after their per-head norms, with `q_weight`/`k_weight`) and vLLM's
    KV-cache write of the rotated k and of v into the layer's cache, in one kernel that also
    returns the rotated k: replaces `attn.rope` (or `fused.qk_norm_rope`) whose rotated k
    `attn.vllm_kv_cache_update` writes (vLLM's `fused_rope_and_unified_kv_cache_update`)."""

    name = "fused.rope_vllm_kv_cache_update"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    q_weight = opt_operand_def(TensorType)
    k_weight = opt_operand_def(TensorType)
    q_out = result_def(TensorType)
    k_out = result_def(TensorType)
    kv_cache_dep = result_def(TensorType)

    eps = opt_prop_def(FloatAttr[Float64Type])
    weight_f32 = opt_prop_def(UnitAttr)
    rope_f32 = opt_prop_def(UnitAttr)
    KEYWORD_OPERANDS: ClassVar = (
        *attn.RopeOperation.KEYWORD_OPERANDS, "q_weight", "k_weight", "layer"
    )

    @classmethod
    def infer_result_types(cls, q, k, **_: Any) -> list[Any]:
        return [q.type, k.type, tensor_type((0,), k.type.dtype)]

    def verify_(self) -> None:
        super().verify_()
        q, k, v = self.q.type, self.k.type, self.v.type
        shapes.check_float("q", q)
        shapes.check_rank("q", q, 3)
        shapes.check_same_dtype("k", k, q, "q")
        self.check_kv_update(k, v, self.kv_cache_dep.type, "q")
        self.check_heads("q", q)
        self.check_heads("k", k)
        shapes.check_dim("k's token count", k.dims[0], q.dims[0])
        shapes.check_dim("v's token count", v.dims[0], q.dims[0])
        check_qk_norms(q, k, opt_type(self.q_weight), opt_type(self.k_weight), self.eps)
        shapes.check_same_type("q_out", self.q_out.type, q, "q")
        shapes.check_same_type("k_out", self.k_out.type, k, "k")


@irdl_op_definition
class RopeVllmMlaKvCacheUpdateOp(attn.RopeOperation, attn.VllmLayerOperation, NamedOperandSyntax):
    """MLA's RoPE of q_pe and k_pe and vLLM's latent-cache write of `[kv_c | rotated k_pe]` into
    the layer's cache, in one kernel that returns the rotated q_pe and k_pe: replaces `attn.rope`
    whose rotated k_pe `attn.vllm_mla_kv_cache_update` writes (vLLM's
    `fused_rope_unified_mla_kv_cache_update`)."""

    name = "fused.rope_vllm_mla_kv_cache_update"

    q_pe = operand_def(TensorType)
    k_pe = operand_def(TensorType)
    kv_c = operand_def(TensorType)
    # RoPE's tables again, here so that they come before k_scale in the operand order.
    positions = opt_operand_def(TensorType)
    cos_sin_cache = opt_operand_def(TensorType)
    cos = opt_operand_def(TensorType)
    sin = opt_operand_def(TensorType)
    k_scale = operand_def(TensorType)
    q_out = result_def(TensorType)
    k_out = result_def(TensorType)
    kv_cache_dep = result_def(TensorType)

    kv_cache_dtype = prop_def(StringAttr)
    rope_f32 = opt_prop_def(UnitAttr)
    KEYWORD_OPERANDS: ClassVar = (*attn.RopeOperation.KEYWORD_OPERANDS, "layer")

    @classmethod
    def infer_result_types(cls, q_pe, k_pe, kv_c, **_: Any) -> list[Any]:
        return [q_pe.type, k_pe.type, tensor_type((0,), kv_c.type.dtype)]

    def verify_(self) -> None:
        super().verify_()
        q, k, kv_c = self.q_pe.type, self.k_pe.type, self.kv_c.type
        shapes.check_float("q_pe", q)
        self.check_heads("q_pe", q, 3)
        attn.check_mla_k_pe(k)
        self.check_heads("k_pe", k)
        shapes.check_same_dtype("k_pe", k, q, "q_pe")
        shapes.check_rank("kv_c", kv_c, 2)
        shapes.check_same_dtype("kv_c", kv_c, q, "q_pe")
        for what, x in (("k_pe", k), ("kv_c", kv_c)):
            shapes.check_dim(f"{what}'s token count", x.dims[0], q.dims[0])
        shapes.check_float("k_scale", self.k_scale.type)
        shapes.check_same_type("q_out", self.q_out.type, q, "q_pe")
        shapes.check_same_type("k_out", self.k_out.type, k, "k_pe")
        shapes.check_rank("kv_cache_dep", self.kv_cache_dep.type, 1)
        shapes.check_same_dtype("kv_cache_dep", self.kv_cache_dep.type, q, "q_pe")


Fused = declared_dialect("fused", globals())
