"""The `attn` dialect: attention, MLA attention, rotary embedding and KV-cache writes.

Head counts, head dims and the softmax scale are properties, so one rewrite matches every layer.
The families carry them for these ops and the fused ones: `AttentionOperation` (scale, causal),
`MlaOperation` (MLA's sizes), `RopeOperation` (RoPE's style, sizes and tables: `positions` and a
`cos_sin_cache` (vLLM) or `cos` and `sin` (Hugging Face)), `VllmLayerOperation` (a vLLM layer's
name, by which vLLM's forward context finds its cache and metadata at run time) and
`VllmAttentionOperation` (the dummy of the layer's cache write, which orders it before the
attention). The `check_*` helpers hold the shape rules the fused ops share.

Each op's textual form: `filecheck/dialects/attn/ops.mlir`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from xdsl.dialects.builtin import (
    I64,
    BoolAttr,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects.irfuse import OpaqueType, RaisedOperation, TensorType, tensor_type
from irfuse.ir import shapes
from irfuse.ir.dialect import declared_dialect
from irfuse.ir.shapes import Dim
from irfuse.ir.syntax import bool_attr, opt_type

# --- checks shared with the fused ops -----------------------------------------------------------


def check_scale(scale: FloatAttr) -> None:
    value = scale.value.data
    if not (math.isfinite(value) and value > 0.0):
        raise VerifyException(f"scale must be a finite value > 0, got {value}")


def check_gqa(hq: Dim, hkv: Dim, of: str = "k/v's") -> None:
    """Grouped-query attention: q's head count a multiple of the key/value head count."""
    if isinstance(hq, int) and isinstance(hkv, int) and (hkv == 0 or hq % hkv):
        raise VerifyException(
            f"q's {hq} heads are not a multiple of {of} {hkv} heads (grouped-query attention)"
        )


def check_same_rank(what: str, t: TensorType, q: TensorType) -> None:
    if t.rank != q.rank:
        raise VerifyException(f"{what} has rank {t.rank}, expected q's rank {q.rank}")


def check_attention(
    q: TensorType, k: TensorType, v: TensorType, mask: TensorType | None, causal: bool
) -> tuple[Dim, ...]:
    """SDPA-layout attention with GQA; returns the output dims `[..., Hq, Lq, Dv]`."""
    shapes.check_float("q", q)
    for what, t in (("k", k), ("v", v)):
        shapes.check_same_dtype(what, t, q, "q")
    shapes.check_min_rank("q", q, 3)
    for what, t in (("k", k), ("v", v)):
        check_same_rank(what, t, q)
    qd, kd, vd = q.dims, k.dims, v.dims
    batch = qd[:-3]
    for what, t in (("k", kd), ("v", vd)):
        if not all(map(shapes.dims_agree, t[:-3], batch)):
            raise VerifyException(f"{what} has batch dims {shapes.shape_str(t[:-3])}, expected "
                                  f"q's {shapes.shape_str(batch)}")
    hq, lq, d = qd[-3:]
    hkv, lk, dk = kd[-3:]
    shapes.check_dim("k's head dim", dk, d)
    shapes.check_dim("v's head count", vd[-3], hkv)
    shapes.check_dim("v's length", vd[-2], lk)
    check_gqa(hq, hkv)
    if mask is not None:
        check_mask(mask, (*batch, hq, lq, lk), causal)
    return (*qd[:-1], vd[-1])


def check_mask(mask: TensorType, full: tuple[Dim, ...], causal: bool) -> None:
    """A bool or additive float mask that broadcasts to the scores `full` and excludes causal."""
    if causal:
        raise VerifyException("a causal attention takes no mask")
    if not (shapes.is_bool(mask.dtype) or shapes.is_float(mask.dtype)):
        raise VerifyException(f"mask must be bool or float, got {mask.dtype}")
    md = mask.dims
    if len(md) > len(full) or not all(
        m == 1 or shapes.dims_agree(m, f) for m, f in zip(md[::-1], full[::-1], strict=False)
    ):
        raise VerifyException(f"mask of shape {shapes.shape_str(md)} does not broadcast to "
                              f"{shapes.shape_str(full)}")


def check_slot_mapping(slot_mapping: TensorType, t: Dim) -> None:
    """One integer slot per new token; a symbolic length may be a symbol of its own (vLLM marks
    the slot mapping dynamic on its own), checked when the write runs."""
    shapes.check_integer("slot_mapping", slot_mapping)
    shapes.check_rank("slot_mapping", slot_mapping, 1)
    if isinstance(t, int) and isinstance(slot_mapping.dims[0], int):
        shapes.check_shape("slot_mapping", slot_mapping, (t,))


def check_paged_cache_write(
    k: TensorType, v: TensorType, k_cache: TensorType, v_cache: TensorType,
    slot_mapping: TensorType,
) -> None:
    """k/v `[T, kv_heads, head_dim]` into caches `[num_blocks, block_size, kv_heads, head_dim]` at
    `slot_mapping [T]`."""
    shapes.check_rank("k", k, 3)
    shapes.check_rank("v", v, 3)
    shapes.check_rank("k_cache", k_cache, 4)
    shapes.check_rank("v_cache", v_cache, 4)
    t, hkv, d = k.dims
    if isinstance(t, int) and isinstance(v.dims[0], int):  # symbols: checked when it runs
        shapes.check_dim("v's token count", v.dims[0], t)
    shapes.check_dim("v's head count", v.dims[1], hkv)
    shapes.check_shape("k_cache", k_cache, (None, None, hkv, d))
    # Two symbolic block counts may differ (automatic dynamic gives each cache its own): each
    # cache is addressed by its own strides.
    blocks = k_cache.dims[0] if isinstance(v_cache.dims[0], int) else None
    shapes.check_shape("v_cache", v_cache, (blocks, k_cache.dims[1], hkv, v.dims[2]))
    for what, val, cache in (("k", k, k_cache), ("v", v, v_cache)):
        if val.dtype != cache.dtype:
            raise VerifyException(f"{what} has dtype {val.dtype} but its cache holds {cache.dtype}")
    check_slot_mapping(slot_mapping, t)


def cache_halves(k_cache: SSAValue, v_cache: SSAValue) -> tuple[TensorType, TensorType]:
    """The `[num_blocks, block_size, kv_heads, head_dim]` caches a paged write stores into:
    the two operands, or, for vLLM's FlashAttention layout, the halves of the one
    `[2, num_blocks, block_size, kv_heads, head_dim]` value given as both (k into [0], v into
    [1])."""
    kt, vt = k_cache.type, v_cache.type
    assert isinstance(kt, TensorType) and isinstance(vt, TensorType)
    if kt.rank != 5:
        return kt, vt
    if k_cache is not v_cache:
        raise VerifyException("a 5-D cache is vLLM's FlashAttention layout: k_cache and v_cache "
                              "must be the same [2, num_blocks, block_size, kv_heads, head_dim] "
                              "value")
    shapes.check_dim("the 5-D cache's first dim (k and v halves)", kt.dims[0], 2)
    half = tensor_type(kt.dims[1:], kt.dtype)
    return half, half


def check_mla_k_pe(k_pe: TensorType, what: str = "k_pe") -> None:
    """MLA's rope key, one head shared by all: `[T, 1, rope_dim]` or `[T, rope_dim]`."""
    if k_pe.rank not in (2, 3) or (k_pe.rank == 3 and not shapes.dims_agree(k_pe.dims[1], 1)):
        raise VerifyException(f"{what} has shape {shapes.shape_str(k_pe.dims)}: [T, 1, rope_dim] "
                              "or [T, rope_dim] (one key shared by all heads)")


def check_mla_cache_write(kv_c: TensorType, k_pe: TensorType, kv_cache: TensorType,
                          slot_mapping: TensorType) -> None:
    """kv_c `[T, kv_lora_rank]` and k_pe `[T, rope_dim]` into kv_cache `[num_blocks, block_size,
    kv_lora_rank + rope_dim]` of their dtype, at `slot_mapping [T]`."""
    shapes.check_rank("kv_c", kv_c, 2)
    shapes.check_rank("k_pe", k_pe, 2)
    shapes.check_rank("kv_cache", kv_cache, 3)
    t = kv_c.dims[0]
    if isinstance(t, int) and isinstance(k_pe.dims[0], int):
        shapes.check_dim("k_pe's token count", k_pe.dims[0], t)
    rank, rope = kv_c.dims[1], k_pe.dims[1]
    if isinstance(rank, int) and isinstance(rope, int):
        shapes.check_dim("kv_cache's last dim (kv_lora_rank + rope_dim)", kv_cache.dims[2],
                         rank + rope)
    for what, val in (("kv_c", kv_c), ("k_pe", k_pe)):
        if val.dtype != kv_cache.dtype:
            raise VerifyException(f"{what} has dtype {val.dtype} but the cache holds "
                                  f"{kv_cache.dtype}")
    check_slot_mapping(slot_mapping, t)


def check_vllm_attention(q: TensorType, k: TensorType, v: TensorType) -> tuple[Dim, ...]:
    """vLLM's layout: q `[T, H, D]`, k `[T, Hkv, D]`, v `[T, Hkv, Dv]` in q's dtype, H a multiple
    of Hkv; returns the output dims `[T, H, Dv]`."""
    shapes.check_float("q", q)
    for what, t in (("k", k), ("v", v)):
        shapes.check_rank(what, t, 3)
        shapes.check_same_dtype(what, t, q, "q")
    shapes.check_rank("q", q, 3)
    t, hq, d = q.dims
    shapes.check_dim("k's token count", k.dims[0], t)
    shapes.check_dim("v's token count", v.dims[0], t)
    shapes.check_dim("k's head dim", k.dims[2], d)
    shapes.check_dim("v's head count", v.dims[1], k.dims[1])
    check_gqa(hq, k.dims[1])
    return (t, hq, v.dims[2])


# --- the properties (and operands) that ops share -----------------------------------------------


class AttentionOperation(IRDLOperation):
    """The softmax `scale` (finite, > 0) and `causal` (torch's `is_causal`, no mask with it)."""

    scale = prop_def(FloatAttr[Float64Type])
    causal = prop_def(BoolAttr, default_value=bool_attr(False))

    def verify_(self) -> None:
        check_scale(self.scale)
        super().verify_()


class MlaOperation(IRDLOperation):
    """MLA's head counts and dims (each >= 1), `scale`, `causal` and the layout: token-major
    (vLLM's interface, no mask) or, with `batch_major`, SDPA's (Hugging Face's)."""

    num_heads = prop_def(IntegerAttr[I64])
    qk_nope_head_dim = prop_def(IntegerAttr[I64])
    qk_rope_head_dim = prop_def(IntegerAttr[I64])
    v_head_dim = prop_def(IntegerAttr[I64])
    kv_lora_rank = prop_def(IntegerAttr[I64])
    scale = prop_def(FloatAttr[Float64Type])
    causal = prop_def(BoolAttr, default_value=bool_attr(False))
    batch_major = prop_def(BoolAttr, default_value=bool_attr(False))

    SIZES: ClassVar = ("num_heads", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                       "kv_lora_rank")

    def verify_(self) -> None:
        for name in self.SIZES:
            if getattr(self, name).value.data < 1:
                raise VerifyException(f"{name} must be >= 1, got {getattr(self, name).value.data}")
        check_scale(self.scale)
        super().verify_()

    def mla_dims(self, q: TensorType, kv_c: TensorType, k_pe: TensorType, kv_b_weight: TensorType,
                 mask: TensorType | None) -> tuple[Dim, ...]:
        """Check MLA's operands in the op's layout; returns the output dims (`[T, H, v]`
        token-major, `[..., H, Lq, v]` batch-major). `[k_nope | v]` per head is the latent times
        `kv_b_weight` `[H * (nope + v), kv_lora_rank]` transposed; `k = [k_nope | k_pe]`."""
        heads, nope, rope, v_dim, rank = (getattr(self, n).value.data for n in self.SIZES)
        shapes.check_float("q", q)
        shapes.check_same_dtype("kv_c", kv_c, q, "q")
        shapes.check_same_dtype("k_pe", k_pe, q, "q")
        shapes.check_float("kv_b_weight", kv_b_weight)
        shapes.check_shape(
            "kv_b_weight ([num_heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank])",
            kv_b_weight, (heads * (nope + v_dim), rank),
        )
        if not self.batch_major.value.data:
            if mask is not None:
                raise VerifyException("token-major MLA takes no mask (vLLM's interface)")
            shapes.check_rank("q", q, 3)
            t = q.dims[0]
            shapes.check_shape("q ([T, num_heads, qk_nope_head_dim + qk_rope_head_dim])", q,
                               (t, heads, nope + rope))
            shapes.check_shape("kv_c ([T, kv_lora_rank])", kv_c, (t, rank))
            shapes.check_shape("k_pe ([T, 1, qk_rope_head_dim])", k_pe, (t, 1, rope))
            return (t, heads, v_dim)
        shapes.check_min_rank("q", q, 3)
        check_same_rank("kv_c", kv_c, q)
        check_same_rank("k_pe", k_pe, q)
        *batch, _, lq, _ = q.dims
        lk = k_pe.dims[-2]
        shapes.check_shape("q ([..., num_heads, L, qk_nope_head_dim + qk_rope_head_dim])", q,
                           (*batch, heads, lq, nope + rope))
        shapes.check_shape("kv_c ([..., 1, L, kv_lora_rank])", kv_c, (*batch, 1, lk, rank))
        shapes.check_shape("k_pe ([..., 1, L, qk_rope_head_dim])", k_pe, (*batch, 1, lk, rope))
        if mask is not None:
            check_mask(mask, (*batch, heads, lq, lk), bool(self.causal.value.data))
        return (*batch, heads, lq, v_dim)


class RopeOperation(IRDLOperation):
    """RoPE's style (NeoX: the rotary part's two halves; GPT-J: (even, odd) pairs), sizes
    (`rotary_dim` even, >= 2, <= `head_dim`; dims past it pass) and tables, taken by name:
    `positions` and a `cos_sin_cache` `[max_pos, rotary_dim]`, or `cos` and `sin` of one type
    whose last dim is rotary_dim or rotary_dim / 2.

    A multimodal RoPE (Qwen2/2.5/3-VL) has `mrope_section` (temporal, height, width): table
    channel j is read at the position row its section names (`mrope_interleaved`: Qwen3-VL's
    t, h, w, t, h, w, ... order), from positions `[3, T]` or from cos and sin `[3, T, rotary_dim
    / 2]` (the tables at the three rows), as vLLM's MRoPE kernels read them."""

    positions = opt_operand_def(TensorType)
    cos_sin_cache = opt_operand_def(TensorType)
    cos = opt_operand_def(TensorType)
    sin = opt_operand_def(TensorType)

    is_neox = prop_def(BoolAttr)
    rotary_dim = prop_def(IntegerAttr[I64])
    head_dim = prop_def(IntegerAttr[I64])
    mrope_section = opt_prop_def(DenseArrayBase)
    mrope_interleaved = opt_prop_def(UnitAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    KEYWORD_OPERANDS: ClassVar = ("positions", "cos_sin_cache", "cos", "sin")
    TABLE_PROPERTIES: ClassVar = ("is_neox", "rotary_dim", "head_dim", "mrope_section",
                                  "mrope_interleaved")

    def table_args(self) -> dict[str, Any]:
        """The rope's tables and properties as another rope op's constructor takes them (a
        fused op built from this one reads the same tables the same way)."""
        return {**{n: getattr(self, n) for n in self.KEYWORD_OPERANDS},
                **{n: getattr(self, n) for n in self.TABLE_PROPERTIES}}

    def sections(self) -> tuple[int, ...] | None:
        """`mrope_section`'s three sizes, or None for a rope with one position per token."""
        return None if self.mrope_section is None else tuple(self.mrope_section.get_values())

    def verify_(self) -> None:
        rotary_dim, head_dim = self.rotary_dim.value.data, self.head_dim.value.data
        if head_dim < 1:
            raise VerifyException(f"head_dim must be >= 1, got {head_dim}")
        if rotary_dim < 2 or rotary_dim % 2 or rotary_dim > head_dim:
            raise VerifyException(
                f"rotary_dim must be even, >= 2 and <= head_dim {head_dim}, got {rotary_dim}"
            )
        sections = self._check_sections(rotary_dim // 2)
        # Each accessor decodes the segment sizes: read every operand once.
        positions, cache = opt_type(self.positions), opt_type(self.cos_sin_cache)
        cos, sin = opt_type(self.cos), opt_type(self.sin)
        cached = positions is not None or cache is not None
        if cached and (cos is not None or sin is not None):
            raise VerifyException(
                "rope takes either positions and cos_sin_cache or cos and sin, not both"
            )
        if cached:
            if positions is None or cache is None:
                raise VerifyException("rope needs both positions and cos_sin_cache")
            shapes.check_integer("positions", positions)
            shapes.check_min_rank("positions", positions, 2 if sections else 1)
            shapes.check_float("cos_sin_cache", cache)
            shapes.check_rank("cos_sin_cache", cache, 2)
            shapes.check_dim("cos_sin_cache's last dim (rotary_dim)", cache.dims[1], rotary_dim)
            table = positions
        elif cos is not None and sin is not None:
            shapes.check_float("cos", cos)
            shapes.check_same_type("sin", sin, cos, "cos")
            shapes.check_min_rank("cos", cos, 3 if sections else 1)
            widths = (rotary_dim // 2,) if sections else (rotary_dim, rotary_dim // 2)
            if cos.dims[-1] not in widths:
                raise VerifyException(
                    f"cos has shape {shapes.shape_str(cos.dims)}: its last dim must be "
                    + ("rotary_dim / 2" if sections else "rotary_dim or rotary_dim / 2")
                    + f" ({' or '.join(map(str, widths))})"
                )
            table = cos
        else:
            raise VerifyException("rope needs positions and cos_sin_cache, or cos and sin")
        if sections is not None:
            shapes.check_dim(f"{'positions' if cached else 'cos'}'s first dim (the temporal, "
                             "height and width rows)", table.dims[0], 3)
        super().verify_()

    def _check_sections(self, half: int) -> tuple[int, ...] | None:
        """mrope_section: three sizes >= 0 that split rotary_dim / 2; interleaving needs it."""
        sections = self.sections()
        if sections is None:
            if self.mrope_interleaved is not None:
                raise VerifyException("mrope_interleaved needs mrope_section")
            return None
        interleaved = self.mrope_interleaved is not None
        if len(sections) != 3 or min(sections) < 0 or (not interleaved and sum(sections) != half):
            raise VerifyException(f"mrope_section {list(sections)} must be three sizes >= 0"
                                  + ("" if interleaved else
                                     f" that add up to rotary_dim / 2 ({half})"))
        return sections

    def check_heads(self, what: str, t: TensorType, rank: int | None = None) -> None:
        """`t` is `[..., heads, head_dim]` (of `rank` dims, when given)."""
        if rank is not None:
            shapes.check_rank(what, t, rank)
        shapes.check_min_rank(what, t, 2)
        shapes.check_dim(f"{what}'s last dim (head_dim)", t.dims[-1], self.head_dim.value.data)


class VllmLayerOperation(IRDLOperation):
    """A call into one vLLM attention layer, which vLLM's forward context finds at run time by
    `layer_name` (not empty). `layer` is that name as the call passes it when vLLM hoists it (an
    opaque `LayerName`), absent when the graph holds the name as a string. Not pure: the layer's
    cache is written and read."""

    layer = opt_operand_def()

    layer_name = prop_def(StringAttr)

    def verify_(self) -> None:
        if not self.layer_name.data:
            raise VerifyException("layer_name must not be empty")
        layer = self.layer
        if layer is not None and not isinstance(layer.type, OpaqueType):
            raise VerifyException(
                f"layer must be an opaque value (vLLM's LayerName), got {layer.type}"
            )
        super().verify_()

    def check_kv_update(self, k: TensorType, v: TensorType, dep: TensorType, of: str) -> None:
        """k `[T, Hkv, D]` and v `[T, Hkv, Dv]` written into the layer's cache, both of `of`'s
        dtype (checked for k by the caller); `dep`, vLLM's dummy result, is 1-D of k's dtype."""
        shapes.check_rank("k", k, 3)
        shapes.check_rank("v", v, 3)
        shapes.check_same_dtype("v", v, k, of)
        shapes.check_dim("v's token count", v.dims[0], k.dims[0])
        shapes.check_dim("v's head count", v.dims[1], k.dims[1])
        shapes.check_rank("kv_cache_dep", dep, 1)
        shapes.check_same_dtype("kv_cache_dep", dep, k, "k")


class VllmAttentionOperation(VllmLayerOperation):
    """vLLM's attention of a layer, whose softmax scale, head counts and cache live in the
    layer. `kv_cache_dep`, the dummy of the layer's cache write (1-D, empty as vLLM makes it),
    orders the write before the attention."""

    kv_cache_dep = opt_operand_def(TensorType)

    def verify_(self) -> None:
        super().verify_()
        dep = self.kv_cache_dep
        if dep is not None:
            shapes.check_rank("kv_cache_dep", dep.type, 1)  # type: ignore[arg-type]


# --- ops ----------------------------------------------------------------------------------------


@irdl_op_definition
class AttentionOp(AttentionOperation, RaisedOperation):
    """`softmax(q @ k^T * scale (+ mask | causal)) @ v` in SDPA layout (`[..., heads, L, D]`),
    with GQA; a bool or additive float mask broadcasts to the scores `[..., Hq, Lq, Lk]`."""

    name = "attn.attention"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    out = result_def(TensorType)

    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, q, v, **_: Any) -> list[TensorType]:
        return [tensor_type((*q.type.dims[:-1], v.type.dims[-1]), q.type.dtype)]

    def verify_(self) -> None:
        super().verify_()
        q = self.q.type
        dims = check_attention(
            q, self.k.type, self.v.type, opt_type(self.mask), bool(self.causal.value.data)
        )
        shapes.check_shape("out", self.out.type, dims)
        shapes.check_same_dtype("out", self.out.type, q, "q")


@irdl_op_definition
class MlaAttentionOp(MlaOperation, RaisedOperation):
    """Multi-head latent attention (DeepSeek-V2/V3), token-major (q `[T, H, nope + rope]`, kv_c
    `[T, kv_lora_rank]`, k_pe `[T, 1, rope]`) or batch-major (`[..., H or 1, L, ...]`, a mask)."""

    name = "attn.mla_attention"

    q = operand_def(TensorType)
    kv_c = operand_def(TensorType)
    k_pe = operand_def(TensorType)
    kv_b_weight = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    out = result_def(TensorType)

    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, q, num_heads, v_head_dim, batch_major=False, **_: Any) -> list:
        lead = q.type.dims[:-1] if batch_major else (q.type.dims[0], num_heads)
        return [tensor_type((*lead, v_head_dim), q.type.dtype)]

    def verify_(self) -> None:
        super().verify_()
        q = self.q.type
        dims = self.mla_dims(q, self.kv_c.type, self.k_pe.type, self.kv_b_weight.type,
                             opt_type(self.mask))
        shapes.check_shape("out", self.out.type, dims)
        shapes.check_same_dtype("out", self.out.type, q, "q")


@irdl_op_definition
class RopeOp(RopeOperation, RaisedOperation):
    """Rotary position embedding of q (and k), `[..., heads, head_dim]`, NeoX or GPT-J style."""

    name = "attn.rope"

    q = operand_def(TensorType)
    k = opt_operand_def(TensorType)
    q_out = result_def(TensorType)
    k_out = opt_result_def(TensorType)

    traits = traits_def(Pure())
    RESULTS_TYPED_LIKE: ClassVar = ("q", "k")

    def verify_(self) -> None:
        super().verify_()
        k, k_out, q = opt_type(self.k), opt_type(self.k_out), self.q.type
        shapes.check_float("q", q)
        self.check_heads("q", q)
        shapes.check_same_type("q_out", self.q_out.type, q, "q")
        if k is None:
            if k_out is not None:
                raise VerifyException("k_out needs a k operand")
            return
        shapes.check_same_dtype("k", k, q, "q")
        self.check_heads("k", k)
        if k_out is None:
            raise VerifyException("rope with a k operand returns k_out")
        shapes.check_same_type("k_out", k_out, k, "k")


@irdl_op_definition
class KvCacheWriteOp(RaisedOperation):
    """Store k and v `[T, kv_heads, head_dim]` into the paged caches `[num_blocks, block_size,
    kv_heads, head_dim]` at `slot_mapping` (slot `s` is block `s // block_size`, row
    `s % block_size`), and return the updated caches (SSA form; emit writes in place). The two
    caches may be one `[2, ...]` value (vLLM's FlashAttention layout: k into `[0]`, v `[1]`)."""

    name = "attn.kv_cache_write"

    k = operand_def(TensorType)
    v = operand_def(TensorType)
    k_cache = operand_def(TensorType)
    v_cache = operand_def(TensorType)
    slot_mapping = operand_def(TensorType)
    k_cache_out = result_def(TensorType)
    v_cache_out = result_def(TensorType)

    RESULTS_TYPED_LIKE: ClassVar = ("k_cache", "v_cache")

    def verify_(self) -> None:
        check_paged_cache_write(self.k.type, self.v.type, *cache_halves(self.k_cache, self.v_cache),
                                self.slot_mapping.type)
        shapes.check_same_type("k_cache_out", self.k_cache_out.type, self.k_cache.type, "k_cache")
        shapes.check_same_type("v_cache_out", self.v_cache_out.type, self.v_cache.type, "v_cache")


@irdl_op_definition
class MlaKvCacheWriteOp(RaisedOperation):
    """Store MLA's normed latent and rotated rope key, `[kv_c | k_pe]`, into the paged latent
    cache (laid out as `attn.kv_cache_write`'s), and return the updated cache (vLLM's
    `concat_and_cache_mla` with kv_cache_dtype "auto")."""

    name = "attn.mla_kv_cache_write"

    kv_c = operand_def(TensorType)
    k_pe = operand_def(TensorType)
    kv_cache = operand_def(TensorType)
    slot_mapping = operand_def(TensorType)
    kv_cache_out = result_def(TensorType)

    RESULTS_TYPED_LIKE: ClassVar = ("kv_cache",)

    def verify_(self) -> None:
        check_mla_cache_write(self.kv_c.type, self.k_pe.type, self.kv_cache.type,
                              self.slot_mapping.type)
        shapes.check_same_type("kv_cache_out", self.kv_cache_out.type, self.kv_cache.type,
                               "kv_cache")


@irdl_op_definition
class VllmAttentionOp(VllmAttentionOperation, RaisedOperation):
    """vLLM's attention of one layer (`vllm.unified_attention_with_output`) over its paged KV
    cache: prefill, decode or both, as the forward context's metadata says at run time."""

    name = "attn.vllm_attention"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    out = result_def(TensorType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    @classmethod
    def infer_result_types(cls, q, v, **_: Any) -> list[TensorType]:
        return [tensor_type((*q.type.dims[:2], v.type.dims[-1]), q.type.dtype)]

    def verify_(self) -> None:
        super().verify_()
        q = self.q.type
        shapes.check_shape("out", self.out.type, check_vllm_attention(q, self.k.type, self.v.type))
        shapes.check_same_dtype("out", self.out.type, q, "q")


@irdl_op_definition
class VllmMlaAttentionOp(VllmAttentionOperation, RaisedOperation):
    """vLLM's MLA attention of one layer (`vllm.unified_mla_attention_with_output`) over its
    latent KV cache; `out` is the buffer vLLM passes, `[T, H * v_head_dim]`."""

    name = "attn.vllm_mla_attention"

    q = operand_def(TensorType)
    kv_c_normed = operand_def(TensorType)
    k_pe = operand_def(TensorType)
    out = result_def(TensorType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def verify_(self) -> None:
        super().verify_()
        q, kv_c, k_pe, out = self.q.type, self.kv_c_normed.type, self.k_pe.type, self.out.type
        shapes.check_float("q", q)
        shapes.check_rank("q", q, 3)
        shapes.check_rank("kv_c_normed", kv_c, 2)
        check_mla_k_pe(k_pe)
        for what, x in (("kv_c_normed", kv_c), ("k_pe", k_pe)):
            shapes.check_same_dtype(what, x, q, "q")
            shapes.check_dim(f"{what}'s token count", x.dims[0], q.dims[0])
        shapes.check_float("out", out)
        shapes.check_min_rank("out", out, 2)
        shapes.check_dim("out's token count", out.dims[0], q.dims[0])
        shapes.check_same_dtype("out", out, q, "q")


@irdl_op_definition
class VllmKvCacheUpdateOp(VllmLayerOperation, RaisedOperation):
    """vLLM's write of one layer's new k and v into its paged KV cache, laid out as the attention
    backend's (`vllm.unified_kv_cache_update`); the result is vLLM's dummy, empty and 1-D."""

    name = "attn.vllm_kv_cache_update"

    k = operand_def(TensorType)
    v = operand_def(TensorType)
    kv_cache_dep = result_def(TensorType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    @classmethod
    def infer_result_types(cls, k, **_: Any) -> list[TensorType]:
        return [tensor_type((0,), k.type.dtype)]

    def verify_(self) -> None:
        super().verify_()
        shapes.check_float("k", self.k.type)
        self.check_kv_update(self.k.type, self.v.type, self.kv_cache_dep.type, "k")


@irdl_op_definition
class VllmMlaKvCacheUpdateOp(VllmLayerOperation, RaisedOperation):
    """vLLM's write of one MLA layer's `[kv_c | k_pe]` into its latent cache, stored as
    `kv_cache_dtype` says (`"auto"`: the model dtype; FP8 ones scaled by `k_scale`)
    (`vllm.unified_mla_kv_cache_update`); the result is vLLM's dummy, empty and 1-D."""

    name = "attn.vllm_mla_kv_cache_update"

    kv_c = operand_def(TensorType)
    k_pe = operand_def(TensorType)
    k_scale = operand_def(TensorType)
    kv_cache_dep = result_def(TensorType)

    kv_cache_dtype = prop_def(StringAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    @classmethod
    def infer_result_types(cls, kv_c, **_: Any) -> list[TensorType]:
        return [tensor_type((0,), kv_c.type.dtype)]

    def verify_(self) -> None:
        super().verify_()
        kv_c, k_pe, dep = self.kv_c.type, self.k_pe.type, self.kv_cache_dep.type
        shapes.check_float("kv_c", kv_c)
        shapes.check_rank("kv_c", kv_c, 2)
        check_mla_k_pe(k_pe)
        shapes.check_same_dtype("k_pe", k_pe, kv_c, "kv_c")
        shapes.check_dim("k_pe's token count", k_pe.dims[0], kv_c.dims[0])
        shapes.check_float("k_scale", self.k_scale.type)
        shapes.check_rank("kv_cache_dep", dep, 1)
        shapes.check_same_dtype("kv_cache_dep", dep, kv_c, "kv_c")


Attn = declared_dialect("attn", globals())
