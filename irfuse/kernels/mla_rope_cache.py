"""Triton kernel for MLA's RoPE of q_pe and k_pe with the latent-cache write of
`[kv_c | rotated k_pe]`, in one launch.

Grid `(token blocks, q head blocks + 1)`: programs of the first head blocks rotate their q_pe
heads into q_out; the last program of each token block rotates k_pe (one head) into k_out and into
the tail of each token's cache row, and copies kv_c into the row's head, at the token's slot
(slots < 0 skipped), as `clamp(x / k_scale, -448, 448)` into an FP8 cache (`FP8`). The
rotation is `qk_norm_rope`'s `_rope_block` (no norm), so the numerics are `mla_rope_cache_ref`'s
bit for bit: the kernel is compiled without floating-point contraction, and every product and
sum rounds as torch rounds it. q_pe may be a strided view
(vLLM slices it out of q); k_pe and kv_c are read with their strides. Launch shape:
`MLA_ROPE_CONFIG`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from irfuse.kernels import mla_rope_cache_ref
from irfuse.kernels.qk_norm_rope import MAX_HEAD_DIM, RopeConfig, _rope_block, _to_store
from irfuse.kernels.triton_support import (
    await_previous_kernel,
    check_device,
    next_pow2,
    pdl_launch,
)


@triton.jit(do_not_specialize=["T"])
def _mla_rope_cache_kernel(
    q_ptr, k_ptr, kvc_ptr, cos_ptr, sin_ptr, pos_ptr, q_out_ptr, k_out_ptr, cache_ptr, slot_ptr,
    scale_ptr, T, sq0, sq1, sq2, sk0, sk2, skv0, skv1, sc0, sc1, ss0, ss1, sca0, sca1, sca2,
    block_size,
    H: tl.constexpr, D: tl.constexpr, L: tl.constexpr, R: tl.constexpr,
    IS_NEOX: tl.constexpr, FULL_TABLE: tl.constexpr, HAS_POS: tl.constexpr,
    ROPE_F32: tl.constexpr, FP8: tl.constexpr, TOKENS: tl.constexpr, HEADS: tl.constexpr,
    BLOCK_R2: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_L: tl.constexpr, PDL: tl.constexpr,
):
    NQB: tl.constexpr = (H + HEADS - 1) // HEADS
    hb = tl.program_id(1)
    toks = tl.program_id(0) * TOKENS + tl.arange(0, TOKENS)
    tmask = toks < T
    toks64 = toks.to(tl.int64)
    lanes = tl.arange(0, HEADS)
    await_previous_kernel(PDL)
    if HAS_POS:  # each token's table row offsets, [TOKENS, 1, 1] as `_rope_block` takes them
        prow = tl.load(pos_ptr + toks64, mask=tmask, other=0).to(tl.int64)[:, None, None]
        crow = prow * sc0
        srow = prow * ss0
    else:
        crow = toks64[:, None, None] * sc0
        srow = toks64[:, None, None] * ss0
    if hb < NQB:
        heads = hb * HEADS + lanes
        _rope_block(q_ptr, sq0, sq1, sq2, q_ptr, 0.0, 0.0, toks64, tmask, heads, heads < H,
                    cos_ptr, sin_ptr, crow, srow, sc1, ss1,
                    q_out_ptr, toks64 * (H * D), tmask, D, 1, q_ptr,
                    D, R, IS_NEOX, FULL_TABLE, False, False, False, ROPE_F32, False,
                    BLOCK_R2, BLOCK_P)
    else:
        slot = tl.load(slot_ptr + toks64, mask=tmask, other=-1).to(tl.int64)
        smask = tmask & (slot >= 0)
        slot = tl.where(smask, slot, 0)
        blk = slot // block_size
        row = blk * sca0 + (slot - blk * block_size) * sca1
        one = lanes < 1
        _rope_block(k_ptr, sk0, 0, sk2, k_ptr, 0.0, 0.0, toks64, tmask, lanes, one,
                    cos_ptr, sin_ptr, crow, srow, sc1, ss1,
                    k_out_ptr, toks64 * D, tmask, 0, 1, k_ptr,
                    D, R, IS_NEOX, FULL_TABLE, False, False, False, ROPE_F32, False,
                    BLOCK_R2, BLOCK_P)
        _rope_block(k_ptr, sk0, 0, sk2, k_ptr, 0.0, 0.0, toks64, tmask, lanes, one,
                    cos_ptr, sin_ptr, crow, srow, sc1, ss1,
                    cache_ptr, row + L * sca2, smask, 0, sca2, scale_ptr,
                    D, R, IS_NEOX, FULL_TABLE, False, False, False, ROPE_F32, FP8,
                    BLOCK_R2, BLOCK_P)
        j = tl.arange(0, BLOCK_L)[None, :]
        x = tl.load(kvc_ptr + toks64[:, None] * skv0 + j * skv1,
                    mask=tmask[:, None] & (j < L), other=0.0)
        scale = 1.0
        if FP8:
            scale = tl.load(scale_ptr)
        tl.store(cache_ptr + row[:, None] + j * sca2,
                 _to_store(x, scale, FP8, cache_ptr.dtype.element_ty),
                 mask=smask[:, None] & (j < L))


MLA_ROPE_CONFIG = RopeConfig(2, 16, 4)
"""Default launch shape (2 tokens, 16 heads, 4 warps a program), measured on the H100 at
DeepSeek-V3's shapes (16 and 128 q heads, rope dim 64, GPT-J; `benchmarks/bench_mla_rope_cache.py
--sweep`): within 0.1 µs of the fastest of eleven shapes at every T from 1 to 4096."""


def rope_mla_kv_cache_write(q_pe, k_pe, kv_c, cos, sin, positions, cos_sin_cache, kv_cache,
                            slot_mapping, *, is_neox: bool, rotary_dim: int,
                            rope_f32: bool = False, k_scale: torch.Tensor | None = None,
                            config: RopeConfig | None = None,
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """One launch: (q_out, k_out), the cache written in place; arguments, numerics and errors as
    `mla_rope_cache_ref.rope_mla_kv_cache_write`."""
    mla_rope_cache_ref.check_args(q_pe, k_pe, kv_c, cos, sin, positions, cos_sin_cache,
                                  kv_cache, slot_mapping, rotary_dim, k_scale)
    tokens, heads, d = q_pe.shape
    latent = kv_c.shape[1]
    if d > MAX_HEAD_DIM or latent > 4 * MAX_HEAD_DIM:
        raise ValueError("irfuse: rope_mla_kv_cache_write: the rope or latent dim is too wide")
    fp8 = kv_cache.dtype == mla_rope_cache_ref.FP8
    tensors = [q_pe, k_pe, kv_c, kv_cache, slot_mapping,
               *(t for t in (cos, sin, positions, cos_sin_cache, k_scale if fp8 else None)
                 if t is not None)]
    check_device(*tensors)
    q_out = torch.empty((tokens, heads, d), dtype=q_pe.dtype, device=q_pe.device)
    k_out = torch.empty((tokens, 1, d), dtype=q_pe.dtype, device=q_pe.device)
    if tokens == 0:
        return q_out, k_out
    half = rotary_dim // 2
    if cos_sin_cache is not None:
        cos_t, sin_t, pos = cos_sin_cache[:, :half], cos_sin_cache[:, half:], positions
    else:
        cos_t, sin_t, pos = cos, sin, slot_mapping  # (pos unused)
    cfg = config or MLA_ROPE_CONFIG
    grid = (triton.cdiv(tokens, cfg.tokens), -(-heads // cfg.heads) + 1)
    _mla_rope_cache_kernel[grid](
        q_pe, k_pe, kv_c, cos_t, sin_t, pos, q_out, k_out, kv_cache, slot_mapping,
        k_scale if fp8 else slot_mapping,  # (an unread pointer where the cache is not FP8)
        tokens, *q_pe.stride(), k_pe.stride(0), k_pe.stride(2), *kv_c.stride(),
        cos_t.stride(0), cos_t.stride(1), sin_t.stride(0), sin_t.stride(1),
        *kv_cache.stride(), kv_cache.shape[1],
        H=heads, D=d, L=latent, R=rotary_dim, IS_NEOX=bool(is_neox),
        FULL_TABLE=cos is not None and cos.shape[1] == rotary_dim,
        HAS_POS=cos_sin_cache is not None, ROPE_F32=bool(rope_f32), FP8=fp8,
        TOKENS=cfg.tokens, HEADS=cfg.heads, BLOCK_R2=next_pow2(half),
        BLOCK_P=next_pow2(d - rotary_dim) if d > rotary_dim else 0,
        BLOCK_L=next_pow2(latent),
        num_warps=cfg.num_warps, enable_fp_fusion=False, **pdl_launch(cfg.pdl, q_pe.device),
    )
    return q_out, k_out
