"""Torch references of attention whose output is quantized to FP8 (static per-tensor scale) or
NVFP4.

These are the unfused graphs, literally: the model's attention (`attention_fp8` on SDPA's
layout, `paged_decode_fp8` over a paged KV cache), its output rounded to the model dtype, then
the static quant of `docs/numerics.md` in the division spelling a model's graph uses,
`fp8(clamp(o.float() / scale, -448, 448))` (`quant_ref.quant_fp8_static(divide=True)`), or
NVFP4 of the output token-major and flattened (`attention_nvfp4`, `paged_decode_nvfp4`). The
Triton kernels of `attention_quant.py` take the same arguments and are tested against these
(they quantize from the float32 accumulator, without the model-dtype rounding: within one FP8
step, see the kernel tests).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from irfuse.kernels import quant_ref

ATTN_DTYPES: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16)
OUT_DTYPE = torch.float8_e4m3fn
CACHE_FP8 = torch.float8_e4m3fn
"""vLLM's per-tensor FP8 KV cache, read as e4m3 (its uint8 allocation viewed)."""
INDEX_DTYPES = (torch.int32, torch.int64)
"""The block table's and the sequence lengths' dtypes (vLLM's are int32)."""
# The Triton kernels' head-size bound (`attention_quant.MAX_HEAD_DIM`), here so that dispatch
# can check it without importing triton.
KERNEL_MAX_HEAD_DIM = 256


def check_attention_args(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         scale_out: torch.Tensor) -> None:
    """The argument errors of `attention_fp8` (ValueError): shapes, GQA ratio, dtypes, scale."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("irfuse: attention_fp8 takes q, k, v of shape [B, H, T, D]")
    b, hq, _, d = q.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[3] != d:
        raise ValueError(f"irfuse: attention shapes do not match: q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    _check_common(q, k, v, hq, k.shape[1], scale_out)
    if k.shape[2] == 0:
        raise ValueError("irfuse: attention_fp8 needs at least one key")


def check_decode_args(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      block_table: torch.Tensor, seq_lens: torch.Tensor,
                      scale_out: torch.Tensor, k_scale: torch.Tensor | None = None,
                      v_scale: torch.Tensor | None = None) -> None:
    """The argument errors of `paged_decode_fp8` (ValueError)."""
    if q.dim() != 3 or k_cache.dim() != 4 or k_cache.shape[1:] != v_cache.shape[1:]:
        raise ValueError("irfuse: paged_decode_fp8 takes q [B, Hq, D] and caches "
                         "[num_blocks, block_size, Hk, D] of one block shape")
    b, hq, d = q.shape
    if k_cache.shape[3] != d:
        raise ValueError(f"irfuse: head size {d} of q does not match the cache's "
                         f"{k_cache.shape[3]}")
    if (block_table.dim() != 2 or block_table.shape[0] != b
            or block_table.dtype not in INDEX_DTYPES):
        raise ValueError("irfuse: block_table must be int32 or int64 [B, max_blocks]")
    if seq_lens.shape != (b,) or seq_lens.dtype not in INDEX_DTYPES:
        raise ValueError("irfuse: seq_lens must be int32 or int64 [B]")
    if (k_scale is None) != (v_scale is None):
        raise ValueError("irfuse: k_scale and v_scale go together")
    if k_scale is not None:  # vLLM's per-tensor FP8 cache
        if k_cache.dtype != CACHE_FP8 or v_cache.dtype != CACHE_FP8:
            raise ValueError(f"irfuse: with k_scale / v_scale the caches hold {CACHE_FP8}, got "
                             f"{k_cache.dtype}, {v_cache.dtype}")
        if k_scale.numel() != 1 or v_scale.numel() != 1:
            raise ValueError("irfuse: k_scale and v_scale must have one element each")
    _check_common(q, q if k_scale is not None else k_cache,
                  q if k_scale is not None else v_cache, hq, k_cache.shape[2], scale_out)


def _check_common(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, hq: int, hk: int,
                  scale_out: torch.Tensor) -> None:
    if q.dtype not in ATTN_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"irfuse: attention takes bfloat16 or float16 q, k, v of one dtype, "
                         f"got {q.dtype}, {k.dtype}, {v.dtype}")
    if hk == 0 or hq % hk != 0:
        raise ValueError(f"irfuse: {hq} query heads are not a multiple of {hk} KV heads")
    if scale_out.numel() != 1:
        raise ValueError(f"irfuse: scale_out must have one element, got shape "
                         f"{tuple(scale_out.shape)}")


def quant_out(o: torch.Tensor, scale_out: torch.Tensor) -> torch.Tensor:
    """The output quant: `fp8(clamp(o.float() / scale_out, -448, 448))`."""
    return quant_ref.quant_fp8_static(o, scale_out, OUT_DTYPE, divide=True)


def attention_fp8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale_out: torch.Tensor,
                  *, softmax_scale: float, causal: bool) -> torch.Tensor:
    """quant(sdpa(q, k, v)): float8_e4m3fn [B, Hq, Tq, D].
    `F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=softmax_scale,
    enable_gqa=True)` on q [B, Hq, Tq, D], k/v [B, Hk, Tk, D] (SDPA's layout; Hq a multiple of
    Hk, any strides), then `quant_out`. SDPA's causal mask is top-left aligned (query i sees
    keys 0..i), which for prefill (Tq == Tk) is the usual one."""
    check_attention_args(q, k, v, scale_out)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=softmax_scale,
                                       enable_gqa=True)
    return quant_out(o, scale_out)


def token_major(o: torch.Tensor) -> torch.Tensor:
    """`[B, H, T, Dv]` -> `[B * T, H * Dv]` (or `[H, T, Dv]` -> `[T, H * Dv]`, an attention
    without a batch dim): the layout the o_proj (and its quant) reads."""
    if o.dim() == 3:
        h, t, d = o.shape
        return o.transpose(0, 1).reshape(t, h * d)
    b, h, t, d = o.shape
    return o.transpose(1, 2).reshape(b * t, h * d)


def attention_nvfp4(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    global_scale: torch.Tensor, *, softmax_scale: float, causal: bool,
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 of sdpa(q, k, v) token-major: (packed uint8 `[B * Tq, Hq * D / 2]`, swizzled
    block scales), as `quant_ref.quant_nvfp4` gives them; arguments as `attention_fp8`, with
    the NVFP4 global scale for the output scale."""
    check_attention_args(q, k, v, global_scale)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=softmax_scale,
                                       enable_gqa=True)
    return quant_ref.quant_nvfp4(token_major(o), global_scale)


def gather_kv(cache: torch.Tensor, blocks: torch.Tensor, length: int) -> torch.Tensor:
    """One sequence's first `length` tokens from a paged cache, as [Hk, length, D]."""
    block_size = cache.shape[1]
    n = -(-length // block_size)
    rows = cache[blocks[:n].long()].reshape(n * block_size, *cache.shape[2:])
    return rows[:length].transpose(0, 1)


def paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 block_table: torch.Tensor, seq_lens: torch.Tensor, scale_out: torch.Tensor,
                 *, softmax_scale: float, k_scale: torch.Tensor | None = None,
                 v_scale: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of each sequence's new token over its cached context, in the model dtype
    [B, Hq, D] (`scale_out` only checked). Each `seq_lens[b]` must fit the block table's row; a
    sequence of length 0 gets zeros, as SDPA gives a row whose mask keeps nothing.

    q [B, Hq, D] is one new query token per sequence; the caches are [num_blocks, block_size,
    Hk, D], sequence b's token t in block `block_table[b, t // block_size]`, row
    `t % block_size`; its first `seq_lens[b]` tokens are gathered and attended (no mask: the
    new token sees its whole context). With `k_scale` and `v_scale` the caches are vLLM's
    per-tensor FP8 (e4m3), read back as `cache.float() * scale` and attended in float32, the
    result rounded to q's dtype."""
    check_decode_args(q, k_cache, v_cache, block_table, seq_lens, scale_out, k_scale, v_scale)
    outs = []
    for b, length in enumerate(seq_lens.tolist()):
        if length < 0 or length > block_table.shape[1] * k_cache.shape[1]:
            raise ValueError(f"irfuse: sequence {b} has length {length}, outside "
                             f"[0, {block_table.shape[1] * k_cache.shape[1]}]")
        if length == 0:  # nothing to attend to: SDPA gives a fully masked row zeros
            outs.append(q.new_zeros(q.shape[1:]))
            continue
        k = gather_kv(k_cache, block_table[b], length)
        v = gather_kv(v_cache, block_table[b], length)
        qb = q[b, None, :, None, :]
        if k_scale is not None and v_scale is not None:
            k, v = k.float() * k_scale.float(), v.float() * v_scale.float()
            qb = qb.float()
        o = F.scaled_dot_product_attention(qb, k[None], v[None], scale=softmax_scale,
                                           enable_gqa=True)
        outs.append(o[0, :, 0, :].to(q.dtype))
    return torch.stack(outs)


def paged_decode_fp8(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     block_table: torch.Tensor, seq_lens: torch.Tensor, scale_out: torch.Tensor,
                     *, softmax_scale: float, k_scale: torch.Tensor | None = None,
                     v_scale: torch.Tensor | None = None) -> torch.Tensor:
    """quant(attention of each sequence's new token over its cached context): float8_e4m3fn
    [B, Hq, D]; arguments as `paged_decode`."""
    return quant_out(paged_decode(q, k_cache, v_cache, block_table, seq_lens, scale_out,
                                  softmax_scale=softmax_scale, k_scale=k_scale,
                                  v_scale=v_scale), scale_out)


def paged_decode_nvfp4(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                       block_table: torch.Tensor, seq_lens: torch.Tensor,
                       global_scale: torch.Tensor, *, softmax_scale: float,
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 of the decode output flattened to [B, Hq * D]: (packed uint8 [B, Hq * D / 2],
    swizzled block scales); arguments as `paged_decode`."""
    o = paged_decode(q, k_cache, v_cache, block_table, seq_lens, global_scale,
                     softmax_scale=softmax_scale)
    return quant_ref.quant_nvfp4(o.reshape(o.shape[0], -1), global_scale)
