"""The `attn` dialect: attention, MLA attention, rotary embedding and the paged KV-cache write.

- `attn.attention` is scaled dot-product attention in SDPA's layout, `[..., H, L, D]`, with
  grouped-query attention (query heads a multiple of key/value heads). Raising finds SDPA (and
  its CPU/flash spellings) and vLLM's attention calls.
- `attn.mla_attention` is multi-head latent attention (DeepSeek-V2/V3): the query, the normed
  latent `kv_c`, the roped shared key part `k_pe` and the `kv_b_proj` weight that expands the
  latent into per-head keys and values. Token-major (vLLM's interface, `[T, H, D]`, no mask) or,
  with `batch_major`, in SDPA's `[..., H, L, D]` layout with an optional mask (Hugging Face's).
- `attn.rope` rotates q (and k) by position: either from `positions` and a `cos_sin_cache`
  (vLLM's form) or from precomputed `cos` and `sin` (Hugging Face's form). NeoX style rotates the
  two halves of the rotary part, GPT-J style (even, odd) pairs; dims past `rotary_dim` pass.
- `attn.kv_cache_write` stores k and v into a paged cache `[num_blocks, block_size, kv_heads,
  head_dim]` at `slot_mapping`, and returns the updated caches (SSA form; emit writes in place).
- `attn.mla_kv_cache_write` stores MLA's row `[kv_c | k_pe]` into the one latent cache
  `[num_blocks, block_size, kv_lora_rank + rope_dim]` at `slot_mapping` (vLLM's
  `concat_and_cache_mla`), returning the updated cache.

Head counts, head dims and the softmax scale are properties, so one rewrite matches every layer.
The `check_*` helpers are shared with the fused attention ops.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from xdsl.dialects.builtin import I64, BoolAttr, Float64Type, FloatAttr, IntegerAttr
from xdsl.ir import Attribute, Dialect, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects.irfuse import Dim, TensorType, tensor_type
from irfuse.dialects.raised import RaisedOperation, bool_attr, f64_attr, i64_attr, opt_type
from irfuse.dialects.shapes import (
    check_dim,
    check_float,
    check_integer,
    check_min_rank,
    check_rank,
    check_same_type,
    check_shape,
    dims_agree,
    is_bool,
    is_float,
    shape_str,
)

# --- checks shared with the fused ops -----------------------------------------------------------


def check_scale(scale: FloatAttr) -> None:
    value = scale.value.data
    if not (math.isfinite(value) and value > 0.0):
        raise VerifyException(f"scale must be a finite value > 0, got {value}")


def check_positive(what: str, value: IntegerAttr) -> int:
    v = value.value.data
    if v < 1:
        raise VerifyException(f"{what} must be >= 1, got {v}")
    return v


def check_attention(
    q: TensorType,
    k: TensorType,
    v: TensorType,
    mask: TensorType | None,
    causal: bool,
) -> tuple[Dim, ...]:
    """SDPA-layout attention with GQA; returns the output dims `[..., Hq, Lq, Dv]`."""
    check_float("q", q)
    for what, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise VerifyException(f"{what} has dtype {t.dtype}, expected q's {q.dtype}")
    check_min_rank("q", q, 3)
    for what, t in (("k", k), ("v", v)):
        if t.rank != q.rank:
            raise VerifyException(f"{what} has rank {t.rank}, expected q's rank {q.rank}")
    qd, kd, vd = q.dims, k.dims, v.dims
    batch = qd[:-3]
    for what, t in (("k", kd), ("v", vd)):
        if not all(map(dims_agree, t[:-3], batch)):
            raise VerifyException(
                f"{what} has batch dims {shape_str(t[:-3])}, expected q's {shape_str(batch)}"
            )
    hq, lq, d = qd[-3:]
    hkv, lk, dk = kd[-3:]
    check_dim("k's head dim", dk, d)
    check_dim("v's head count", vd[-3], hkv)
    check_dim("v's length", vd[-2], lk)
    if isinstance(hq, int) and isinstance(hkv, int) and (hkv == 0 or hq % hkv):
        raise VerifyException(
            f"q's {hq} heads are not a multiple of k/v's {hkv} heads (grouped-query attention)"
        )
    if mask is not None:
        check_mask(mask, (*batch, hq, lq, lk), causal)
    return (*qd[:-1], vd[-1])


def check_mla(
    q: TensorType,
    kv_c: TensorType,
    k_pe: TensorType,
    kv_b_weight: TensorType,
    heads: int,
    nope: int,
    rope: int,
    v_dim: int,
    rank: int,
    *,
    mask: TensorType | None = None,
    causal: bool = False,
    batch_major: bool = False,
) -> tuple[Dim, ...]:
    """MLA's operands in either layout; returns the output dims (`[T, H, v_head_dim]`
    token-major, `[..., H, Lq, v_head_dim]` batch-major)."""
    check_float("q", q)
    for what, t in (("kv_c", kv_c), ("k_pe", k_pe)):
        if t.dtype != q.dtype:
            raise VerifyException(f"{what} has dtype {t.dtype}, expected q's {q.dtype}")
    check_float("kv_b_weight", kv_b_weight)
    check_shape(
        "kv_b_weight ([num_heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank])",
        kv_b_weight,
        (heads * (nope + v_dim), rank),
    )
    if not batch_major:
        if mask is not None:
            raise VerifyException("token-major MLA takes no mask (vLLM's interface)")
        check_rank("q", q, 3)
        t = q.dims[0]
        check_shape(
            "q ([T, num_heads, qk_nope_head_dim + qk_rope_head_dim])", q, (t, heads, nope + rope)
        )
        check_shape("kv_c ([T, kv_lora_rank])", kv_c, (t, rank))
        check_shape("k_pe ([T, 1, qk_rope_head_dim])", k_pe, (t, 1, rope))
        return (t, heads, v_dim)
    check_min_rank("q", q, 3)
    for what, t in (("kv_c", kv_c), ("k_pe", k_pe)):
        if t.rank != q.rank:
            raise VerifyException(f"{what} has rank {t.rank}, expected q's rank {q.rank}")
    *batch, _, lq, _ = q.dims
    lk = k_pe.dims[-2]
    check_shape(
        "q ([..., num_heads, L, qk_nope_head_dim + qk_rope_head_dim])",
        q,
        (*batch, heads, lq, nope + rope),
    )
    check_shape("kv_c ([..., 1, L, kv_lora_rank])", kv_c, (*batch, 1, lk, rank))
    check_shape("k_pe ([..., 1, L, qk_rope_head_dim])", k_pe, (*batch, 1, lk, rope))
    if mask is not None:
        check_mask(mask, (*batch, heads, lq, lk), causal)
    return (*batch, heads, lq, v_dim)


def check_mask(mask: TensorType, full: tuple[Dim, ...], causal: bool) -> None:
    """A bool or additive float mask that broadcasts to the scores `full` and excludes causal."""
    if causal:
        raise VerifyException("a causal attention takes no mask")
    if not (is_bool(mask.dtype) or is_float(mask.dtype)):
        raise VerifyException(f"mask must be bool or float, got {mask.dtype}")
    md = mask.dims
    if len(md) > len(full) or not all(
        m == 1 or dims_agree(m, f) for m, f in zip(md[::-1], full[::-1], strict=False)
    ):
        raise VerifyException(
            f"mask of shape {shape_str(md)} does not broadcast to {shape_str(full)}"
        )


def check_rotary(rotary_dim: int, head_dim: int) -> None:
    if head_dim < 1:
        raise VerifyException(f"head_dim must be >= 1, got {head_dim}")
    if rotary_dim < 2 or rotary_dim % 2 or rotary_dim > head_dim:
        raise VerifyException(
            f"rotary_dim must be even, >= 2 and <= head_dim {head_dim}, got {rotary_dim}"
        )


def check_cos_sin_cache(positions: TensorType, cache: TensorType, rotary_dim: int) -> None:
    """Integer positions and a float `[max_position, rotary_dim]` cache of `[cos | sin]`."""
    check_integer("positions", positions)
    check_min_rank("positions", positions, 1)
    check_float("cos_sin_cache", cache)
    check_rank("cos_sin_cache", cache, 2)
    check_dim("cos_sin_cache's last dim (rotary_dim)", cache.dims[1], rotary_dim)


def check_paged_cache_write(
    k: TensorType,
    v: TensorType,
    k_cache: TensorType,
    v_cache: TensorType,
    slot_mapping: TensorType,
) -> None:
    """k/v `[T, kv_heads, head_dim]` into caches `[num_blocks, block_size, kv_heads, head_dim]` at
    `slot_mapping [T]`."""
    check_rank("k", k, 3)
    check_rank("v", v, 3)
    check_rank("k_cache", k_cache, 4)
    check_rank("v_cache", v_cache, 4)
    t, hkv, d = k.dims
    if isinstance(t, int) and isinstance(v.dims[0], int):  # symbols: checked when it runs
        check_dim("v's token count", v.dims[0], t)
    check_dim("v's head count", v.dims[1], hkv)
    check_shape("k_cache", k_cache, (None, None, hkv, d))
    check_shape("v_cache", v_cache, (*k_cache.dims[:2], hkv, v.dims[2]))
    for what, val, cache in (("k", k, k_cache), ("v", v, v_cache)):
        if val.dtype != cache.dtype:
            raise VerifyException(f"{what} has dtype {val.dtype} but its cache holds {cache.dtype}")
    check_integer("slot_mapping", slot_mapping)
    check_rank("slot_mapping", slot_mapping, 1)
    if isinstance(t, int) and isinstance(slot_mapping.dims[0], int):
        check_shape("slot_mapping", slot_mapping, (t,))
    # A symbolic length may be a symbol of its own (vLLM marks the slot mapping dynamic on its
    # own): one slot per new token is then checked when the write runs.


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
    check_dim("the 5-D cache's first dim (k and v halves)", kt.dims[0], 2)
    half = tensor_type(kt.dims[1:], kt.dtype)
    return half, half


def _int(attr: IntegerAttr) -> int:
    return attr.value.data


# --- ops ----------------------------------------------------------------------------------------


@irdl_op_definition
class AttentionOp(RaisedOperation):
    """`softmax(q @ k^T * scale (+ mask | causal)) @ v` in SDPA layout, with GQA.

    ```mlir
    %o = attn.attention %q, %k, %v {scale = 8.838835e-02 : f64, causal = true}
        : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>,
           !irfuse.tensor<[1, 8, s0, 128], bf16>) -> !irfuse.tensor<[1, 32, s0, 128], bf16>
    ```
    q `[..., Hq, Lq, D]`, k `[..., Hkv, Lk, D]`, v `[..., Hkv, Lk, Dv]`; Hq is a multiple of Hkv;
    the output is `[..., Hq, Lq, Dv]` in q's dtype. A mask (bool or additive float) broadcasts to
    `[..., Hq, Lq, Lk]` and excludes `causal`.
    """

    name = "attn.attention"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    mask = opt_operand_def(TensorType)

    out = result_def(TensorType)

    scale = prop_def(FloatAttr[Float64Type])
    causal = prop_def(BoolAttr, default_value=bool_attr(False))

    traits = traits_def(Pure())

    def __init__(
        self,
        q: SSAValue,
        k: SSAValue,
        v: SSAValue,
        mask: SSAValue | None = None,
        *,
        scale: float,
        causal: bool = False,
        result_type: Attribute | None = None,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_type is None:
            qt: TensorType = q.type  # type: ignore[assignment]
            result_type = tensor_type((*qt.dims[:-1], v.type.dims[-1]), qt.dtype)  # type: ignore[attr-defined]
        super().__init__(
            operands=[q, k, v, mask],
            result_types=[result_type],
            properties={"scale": f64_attr(scale), "causal": bool_attr(causal)},
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        check_scale(self.scale)
        mask = None if self.mask is None else self.mask.type
        q = self.q.type
        dims = check_attention(q, self.k.type, self.v.type, mask, bool(self.causal.value.data))
        check_shape("out", self.out.type, dims)
        if self.out.type.dtype != q.dtype:
            raise VerifyException(f"out has dtype {self.out.type.dtype}, expected q's {q.dtype}")


_MLA_PROPS = ("num_heads", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank")


@irdl_op_definition
class MlaAttentionOp(RaisedOperation):
    """Multi-head latent attention (DeepSeek-V2/V3), token-major or batch-major.

    ```mlir
    %o = attn.mla_attention %q, %kv_c, %k_pe, %w {num_heads = 16 : i64,
            qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64,
            kv_lora_rank = 512 : i64, scale = 7.216878e-02 : f64, causal = true}
        : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>,
           !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>)
        -> !irfuse.tensor<[s0, 16, 128], bf16>
    %ob = attn.mla_attention %qb, %kv_cb, %k_peb, %w, mask %m {num_heads = 16 : i64,
            qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64,
            kv_lora_rank = 512 : i64, scale = 7.216878e-02 : f64, batch_major = true}
        : (!irfuse.tensor<[2, 16, s0, 192], bf16>, !irfuse.tensor<[2, 1, s0, 512], bf16>,
           !irfuse.tensor<[2, 1, s0, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>,
           !irfuse.tensor<[2, 1, s0, s0], i1>) -> !irfuse.tensor<[2, 16, s0, 128], bf16>
    ```
    In both layouts the result is `softmax(q @ k^T * scale (+ mask | causal)) @ v` per head,
    where `[k_nope | v]` is the latent times the kv_b_proj weight `[H * (nope + v), kv_lora_rank]`
    transposed, split per head, and `k = [k_nope | k_pe]` with the one roped `k_pe` shared by all
    heads; the output is in q's dtype.

    - Token-major (vLLM's interface, the default): the tokens of one sequence, q
      `[T, H, nope + rope]`, the normed latent kv_c `[T, kv_lora_rank]`, k_pe `[T, 1, rope]`,
      output `[T, H, v]`; no mask.
    - `batch_major` (SDPA's layout, as Hugging Face's DeepSeek computes it): q
      `[..., H, Lq, nope + rope]`, kv_c `[..., 1, Lk, kv_lora_rank]` and k_pe `[..., 1, Lk, rope]`
      (one head shared by all), output `[..., H, Lq, v]`; an optional bool or additive float mask
      that broadcasts to `[..., H, Lq, Lk]` and excludes `causal`.

    `causal` means what torch's `is_causal` means (the upper-left aligned causal mask).
    """

    name = "attn.mla_attention"

    q = operand_def(TensorType)
    kv_c = operand_def(TensorType)
    k_pe = operand_def(TensorType)
    kv_b_weight = operand_def(TensorType)
    mask = opt_operand_def(TensorType)

    out = result_def(TensorType)

    num_heads = prop_def(IntegerAttr[I64])
    qk_nope_head_dim = prop_def(IntegerAttr[I64])
    qk_rope_head_dim = prop_def(IntegerAttr[I64])
    v_head_dim = prop_def(IntegerAttr[I64])
    kv_lora_rank = prop_def(IntegerAttr[I64])
    scale = prop_def(FloatAttr[Float64Type])
    causal = prop_def(BoolAttr, default_value=bool_attr(False))
    batch_major = prop_def(BoolAttr, default_value=bool_attr(False))

    traits = traits_def(Pure())

    def __init__(
        self,
        q: SSAValue,
        kv_c: SSAValue,
        k_pe: SSAValue,
        kv_b_weight: SSAValue,
        mask: SSAValue | None = None,
        *,
        num_heads: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        kv_lora_rank: int,
        scale: float,
        causal: bool = False,
        batch_major: bool = False,
        result_type: Attribute | None = None,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_type is None:
            qt: TensorType = q.type  # type: ignore[assignment]
            lead = qt.dims[:-1] if batch_major else (qt.dims[0], num_heads)
            result_type = tensor_type((*lead, v_head_dim), qt.dtype)
        properties = mla_properties(
            num_heads,
            qk_nope_head_dim,
            qk_rope_head_dim,
            v_head_dim,
            kv_lora_rank,
            scale,
            causal,
        )
        properties["batch_major"] = bool_attr(batch_major)
        super().__init__(
            operands=[q, kv_c, k_pe, kv_b_weight, mask],
            result_types=[result_type],
            properties=properties,
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        q = self.q.type
        mask = None if self.mask is None else self.mask.type
        dims = verify_mla_properties(
            self,
            q,
            self.kv_c.type,
            self.k_pe.type,
            self.kv_b_weight.type,
            mask=mask,
            batch_major=bool(self.batch_major.value.data),
        )
        check_shape("out", self.out.type, dims)
        if self.out.type.dtype != q.dtype:
            raise VerifyException(f"out has dtype {self.out.type.dtype}, expected q's {q.dtype}")


def mla_properties(
    num_heads: int,
    qk_nope_head_dim: int,
    qk_rope_head_dim: int,
    v_head_dim: int,
    kv_lora_rank: int,
    scale: float,
    causal: bool,
) -> dict[str, Attribute]:
    """The MLA properties shared with `fused.mla_attention_quant` (all but `batch_major`)."""
    values = (num_heads, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, kv_lora_rank)
    props: dict[str, Attribute] = {n: i64_attr(v) for n, v in zip(_MLA_PROPS, values, strict=True)}
    props["scale"] = f64_attr(scale)
    props["causal"] = bool_attr(causal)
    return props


def verify_mla_properties(
    op: object,
    q: TensorType,
    kv_c: TensorType,
    k_pe: TensorType,
    kv_b_weight: TensorType,
    *,
    mask: TensorType | None = None,
    batch_major: bool = False,
) -> tuple[Dim, ...]:
    """Check an MLA op's properties and operands (token-major unless `batch_major`); returns the
    output dims."""
    heads, nope, rope, v_dim, rank = (check_positive(n, getattr(op, n)) for n in _MLA_PROPS)
    check_scale(op.scale)  # type: ignore[attr-defined]
    causal = bool(op.causal.value.data)  # type: ignore[attr-defined]
    return check_mla(
        q,
        kv_c,
        k_pe,
        kv_b_weight,
        heads,
        nope,
        rope,
        v_dim,
        rank,
        mask=mask,
        causal=causal,
        batch_major=batch_major,
    )


def check_rope_tables(
    positions: TensorType | None,
    cache: TensorType | None,
    cos: TensorType | None,
    sin: TensorType | None,
    rotary_dim: int,
) -> None:
    """Exactly one form of RoPE table: positions + cos_sin_cache `[max_pos, rotary_dim]`, or cos
    and sin of one type whose last dim is rotary_dim or rotary_dim / 2."""
    cached = positions is not None or cache is not None
    direct = cos is not None or sin is not None
    if cached and direct:
        raise VerifyException(
            "rope takes either positions and cos_sin_cache or cos and sin, not both"
        )
    if cached:
        if positions is None or cache is None:
            raise VerifyException("rope needs both positions and cos_sin_cache")
        check_cos_sin_cache(positions, cache, rotary_dim)
    elif cos is not None and sin is not None:
        check_float("cos", cos)
        check_same_type("sin", sin, cos, "cos")
        if cos.dims[-1:] not in ((rotary_dim,), (rotary_dim // 2,)):
            raise VerifyException(
                f"cos has shape {shape_str(cos.dims)}: its last dim must be rotary_dim "
                f"{rotary_dim} or rotary_dim / 2"
            )
    else:
        raise VerifyException("rope needs positions and cos_sin_cache, or cos and sin")


@irdl_op_definition
class RopeOp(RaisedOperation):
    """Rotary position embedding of q (and k), NeoX or GPT-J style.

    ```mlir
    %qr, %kr = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache
            {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64}
        : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>,
           !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 128], bf16>)
        -> (!irfuse.tensor<[s0, 32, 128], bf16>, k_out !irfuse.tensor<[s0, 8, 128], bf16>)
    %qh = attn.rope %q, cos %cos, sin %sin
            {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64}
        : (!irfuse.tensor<[1, 4, s0, 64], f32>, !irfuse.tensor<[1, 1, s0, 64], f32>,
           !irfuse.tensor<[1, 1, s0, 64], f32>) -> !irfuse.tensor<[1, 4, s0, 64], f32>
    ```
    Exactly one of {`positions` + `cos_sin_cache` `[max_pos, rotary_dim]`} or {`cos` + `sin`
    (last dim rotary_dim or rotary_dim / 2)}. rotary_dim is even and <= head_dim; q's and k's
    last dim is head_dim. `q_out` is typed like q; `k_out` exists iff k does, typed like k.
    """

    name = "attn.rope"

    q = operand_def(TensorType)
    k = opt_operand_def(TensorType)
    positions = opt_operand_def(TensorType)
    cos_sin_cache = opt_operand_def(TensorType)
    cos = opt_operand_def(TensorType)
    sin = opt_operand_def(TensorType)

    q_out = result_def(TensorType)
    k_out = opt_result_def(TensorType)

    is_neox = prop_def(BoolAttr)
    rotary_dim = prop_def(IntegerAttr[I64])
    head_dim = prop_def(IntegerAttr[I64])

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    traits = traits_def(Pure())

    def __init__(
        self,
        q: SSAValue,
        k: SSAValue | None = None,
        *,
        positions: SSAValue | None = None,
        cos_sin_cache: SSAValue | None = None,
        cos: SSAValue | None = None,
        sin: SSAValue | None = None,
        is_neox: bool,
        rotary_dim: int,
        head_dim: int,
        result_types: Sequence[Attribute | None] | None = None,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        if result_types is None:
            result_types = [q.type, None if k is None else k.type]
        super().__init__(
            operands=[q, k, positions, cos_sin_cache, cos, sin],
            result_types=list(result_types),
            properties={
                "is_neox": bool_attr(is_neox),
                "rotary_dim": i64_attr(rotary_dim),
                "head_dim": i64_attr(head_dim),
            },
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        rotary_dim, head_dim = _int(self.rotary_dim), _int(self.head_dim)
        check_rotary(rotary_dim, head_dim)
        # Each accessor decodes the segment sizes: read every operand once.
        check_rope_tables(
            opt_type(self.positions), opt_type(self.cos_sin_cache), opt_type(self.cos),
            opt_type(self.sin), rotary_dim,
        )
        k, k_out = opt_type(self.k), opt_type(self.k_out)
        q = self.q.type
        check_float("q", q)
        check_min_rank("q", q, 2)
        check_dim("q's last dim (head_dim)", q.dims[-1], head_dim)
        check_same_type("q_out", self.q_out.type, q, "q")
        if k is None:
            if k_out is not None:
                raise VerifyException("k_out needs a k operand")
            return
        if k.dtype != q.dtype:
            raise VerifyException(f"k has dtype {k.dtype}, expected q's {q.dtype}")
        check_min_rank("k", k, 2)
        check_dim("k's last dim (head_dim)", k.dims[-1], head_dim)
        if k_out is None:
            raise VerifyException("rope with a k operand returns k_out")
        check_same_type("k_out", k_out, k, "k")


@irdl_op_definition
class KvCacheWriteOp(RaisedOperation):
    """Store k and v `[T, kv_heads, head_dim]` into the paged caches at `slot_mapping`.

    ```mlir
    %kc2, %vc2 = attn.kv_cache_write %k, %v, %kc, %vc, %slots
        : (!irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>,
           !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>,
           !irfuse.tensor<[s0], i64>)
        -> (!irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>)
    ```
    Caches are `[num_blocks, block_size, kv_heads, head_dim]` of k's / v's dtype; slot `s` is
    block `s // block_size`, row `s % block_size`. The results are typed like the caches. In
    vLLM's FlashAttention layout both cache operands are the one `[2, num_blocks, block_size,
    kv_heads, head_dim]` value (k goes into `[0]`, v into `[1]`), and both results are that cache
    with k and v written.
    """

    name = "attn.kv_cache_write"

    k = operand_def(TensorType)
    v = operand_def(TensorType)
    k_cache = operand_def(TensorType)
    v_cache = operand_def(TensorType)
    slot_mapping = operand_def(TensorType)

    k_cache_out = result_def(TensorType)
    v_cache_out = result_def(TensorType)

    def __init__(
        self,
        k: SSAValue,
        v: SSAValue,
        k_cache: SSAValue,
        v_cache: SSAValue,
        slot_mapping: SSAValue,
        *,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[k, v, k_cache, v_cache, slot_mapping],
            result_types=[k_cache.type, v_cache.type],
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        k_cache, v_cache = self.k_cache.type, self.v_cache.type
        check_paged_cache_write(self.k.type, self.v.type, *cache_halves(self.k_cache, self.v_cache),
                                self.slot_mapping.type)
        check_same_type("k_cache_out", self.k_cache_out.type, k_cache, "k_cache")
        check_same_type("v_cache_out", self.v_cache_out.type, v_cache, "v_cache")


def check_mla_cache_write(kv_c: TensorType, k_pe: TensorType, kv_cache: TensorType,
                          slot_mapping: TensorType) -> None:
    """kv_c `[T, kv_lora_rank]` and k_pe `[T, rope_dim]` into kv_cache `[num_blocks, block_size,
    kv_lora_rank + rope_dim]` of their dtype, at `slot_mapping [T]`."""
    check_rank("kv_c", kv_c, 2)
    check_rank("k_pe", k_pe, 2)
    check_rank("kv_cache", kv_cache, 3)
    t = kv_c.dims[0]
    if isinstance(t, int) and isinstance(k_pe.dims[0], int):
        check_dim("k_pe's token count", k_pe.dims[0], t)
    rank, rope = kv_c.dims[1], k_pe.dims[1]
    if isinstance(rank, int) and isinstance(rope, int):
        check_dim("kv_cache's last dim (kv_lora_rank + rope_dim)", kv_cache.dims[2], rank + rope)
    for what, val in (("kv_c", kv_c), ("k_pe", k_pe)):
        if val.dtype != kv_cache.dtype:
            raise VerifyException(f"{what} has dtype {val.dtype} but the cache holds "
                                  f"{kv_cache.dtype}")
    check_integer("slot_mapping", slot_mapping)
    check_rank("slot_mapping", slot_mapping, 1)
    if isinstance(t, int) and isinstance(slot_mapping.dims[0], int):
        check_shape("slot_mapping", slot_mapping, (t,))


@irdl_op_definition
class MlaKvCacheWriteOp(RaisedOperation):
    """Store MLA's latent and rope key, `[kv_c | k_pe]`, into the paged latent cache.

    ```mlir
    %c2 = attn.mla_kv_cache_write %kv_c, %k_pe, %cache, %slots
        : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 64], bf16>,
           !irfuse.tensor<[1024, 16, 576], bf16>, !irfuse.tensor<[s0], i64>)
        -> !irfuse.tensor<[1024, 16, 576], bf16>
    ```
    kv_c `[T, kv_lora_rank]` (the normed latent) and k_pe `[T, rope_dim]` (the rotated key,
    shared by all heads) of the cache's dtype; the cache `[num_blocks, block_size, kv_lora_rank +
    rope_dim]`; slot `s` is block `s // block_size`, row `s % block_size` (vLLM's
    `concat_and_cache_mla` with kv_cache_dtype "auto"). The result is the cache's new value.
    """

    name = "attn.mla_kv_cache_write"

    kv_c = operand_def(TensorType)
    k_pe = operand_def(TensorType)
    kv_cache = operand_def(TensorType)
    slot_mapping = operand_def(TensorType)

    kv_cache_out = result_def(TensorType)

    def __init__(
        self,
        kv_c: SSAValue,
        k_pe: SSAValue,
        kv_cache: SSAValue,
        slot_mapping: SSAValue,
        *,
        decomposition: Region | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[kv_c, k_pe, kv_cache, slot_mapping],
            result_types=[kv_cache.type],
            attributes=attributes,
            regions=[decomposition],
        )

    def verify_(self) -> None:
        check_mla_cache_write(self.kv_c.type, self.k_pe.type, self.kv_cache.type,
                              self.slot_mapping.type)
        check_same_type("kv_cache_out", self.kv_cache_out.type, self.kv_cache.type, "kv_cache")


Attn = Dialect("attn", [AttentionOp, MlaAttentionOp, RopeOp, KvCacheWriteOp,
                             MlaKvCacheWriteOp], [])
