"""Triton MLA prefill attention (DeepSeek-V2/V3) that stores its output already quantized to FP8
(static scale) or NVFP4, token-major.

As vLLM's MLA prefill does, the latent is first up-projected by kv_b's weight (one cuBLAS GEMM
in the model dtype: `[tokens, rank] @ [rank, H * (nope + v)]`); the attention kernel then reads
each head's `k_nope` and `v` straight out of that GEMM's output and the shared `k_pe` from its
own rows (`_mla_fwd_kernel`). The online softmax, causal tile skipping, the mask and the FP8 and
NVFP4 epilogues are those of `attention_quant`, whose helpers this reuses; the output goes
straight into the `[tokens, H * v]` layout the quant saw (no transpose pass). Numerics as
`attention_quant`: the reference (`mla_attention_quant_ref`) rounds the attention output to the
model dtype and then quantizes; the FP8 kernel quantizes the float32 output, so an element may
land on the neighbouring FP8 code (within one FP8 step; see the kernel tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from irfuse.kernels import mla_attention_quant_ref as ref
from irfuse.kernels import quant_ref
from irfuse.kernels.attention_quant import (
    LOG2E,
    MAX_HEAD_DIM,
    _dot,
    _fp8_out,
    _idx,
    _key_tiles,
    _last_contiguous,
    _nvfp4_out,
    _softmax_step,
    mask_operand,
    nvfp4_outputs,
)
from irfuse.kernels.triton_support import check_device, interpreting, next_pow2


@dataclass(frozen=True)
class MlaConfig:
    """Launch shape of `mla_attention_fp8`: query rows and key tokens per tile, warps, stages."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


def mla_config(tq: int, tk: int) -> MlaConfig:
    """Default launch shape: not tuned on a GPU yet (a conservative FlashAttention-2 tile that
    fits sm90's shared memory with a 192-wide key and a 128-wide value); small shapes (tests,
    the interpreter) get small tiles."""
    if interpreting() or max(tq, tk) <= 64:
        return MlaConfig(16, 16, 4, 1)
    return MlaConfig(64, 64, 4, 2)


@triton.jit
def _mla_tile(acc, l_i, m_i, q_n, q_r, kv_base, pe_base, start_n, rows, offs_n, offs_dn,
              offs_dr, offs_dv, Tk, qk_scale, skn, spn, mask_rows, smk, rmask,
              NOPE: tl.constexpr, ROPE: tl.constexpr, DV: tl.constexpr, FULL_D: tl.constexpr,
              MASKED: tl.constexpr, CAUSAL: tl.constexpr, DOT_F32: tl.constexpr,
              WIDE: tl.constexpr, MASK: tl.constexpr, MASK_BOOL: tl.constexpr):
    """One BLOCK_N key tile of the online softmax: k_nope and v of this head from the
    up-projected rows (`[nope | v]` per head), k_pe from the shared rows; the attention mask
    with MASK, as `attention_quant._softmax_step` reads it."""
    cols = start_n + offs_n
    kmask = cols < Tk
    kv_rows = kv_base + _idx(cols, WIDE) * skn
    kn_ptrs = kv_rows[None, :] + offs_dn[:, None]
    kr_ptrs = pe_base + _idx(cols, WIDE)[None, :] * spn + offs_dr[:, None]
    v_ptrs = kv_rows[:, None] + NOPE + offs_dv[None, :]
    if FULL_D:  # every head part a power of two (DeepSeek's 128 / 64 / 128): no column masks
        if MASKED:
            k_n = tl.load(kn_ptrs, mask=kmask[None, :], other=0.0)
            k_r = tl.load(kr_ptrs, mask=kmask[None, :], other=0.0)
            v = tl.load(v_ptrs, mask=kmask[:, None], other=0.0)
        else:
            k_n = tl.load(kn_ptrs)
            k_r = tl.load(kr_ptrs)
            v = tl.load(v_ptrs)
    elif MASKED:
        k_n = tl.load(kn_ptrs, mask=kmask[None, :] & (offs_dn < NOPE)[:, None], other=0.0)
        k_r = tl.load(kr_ptrs, mask=kmask[None, :] & (offs_dr < ROPE)[:, None], other=0.0)
        v = tl.load(v_ptrs, mask=kmask[:, None] & (offs_dv < DV)[None, :], other=0.0)
    else:
        k_n = tl.load(kn_ptrs, mask=(offs_dn < NOPE)[:, None], other=0.0)
        k_r = tl.load(kr_ptrs, mask=(offs_dr < ROPE)[:, None], other=0.0)
        v = tl.load(v_ptrs, mask=(offs_dv < DV)[None, :], other=0.0)
    qk = _dot(q_n, k_n, tl.zeros([q_n.shape[0], k_n.shape[1]], tl.float32), DOT_F32)
    qk = _dot(q_r, k_r, qk, DOT_F32) * qk_scale
    return _softmax_step(acc, l_i, m_i, qk, v, rows, cols, Tk, mask_rows, smk, rmask, MASKED,
                         CAUSAL, DOT_F32, MASK, MASK_BOOL)


@triton.jit
def _mla_fwd_kernel(
    q_ptr, kv_ptr, pe_ptr, o_ptr, scale_ptr, sf_ptr, mask_ptr,
    sqb, sqh, sqm, skb, skh, skn, spb, spn, smb, smh, smq, smk,
    Tq, Tk, qk_scale, KP4,
    H: tl.constexpr, NOPE: tl.constexpr, ROPE: tl.constexpr, DV: tl.constexpr,
    BLOCK_NOPE: tl.constexpr, BLOCK_ROPE: tl.constexpr, BLOCK_DV: tl.constexpr,
    FULL_D: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    DOT_F32: tl.constexpr, WIDE: tl.constexpr, OUT_NVFP4: tl.constexpr = False,
    MASK: tl.constexpr = False, MASK_BOOL: tl.constexpr = False,
):
    """Query rows [m * BLOCK_M, m * BLOCK_M + BLOCK_M) of one (batch, head) (the longest causal
    tiles first) into o `[B * Tq, H * DV]` in FP8, or with OUT_NVFP4 into the codes o
    `[B * Tq, H * DV / 2]` and the swizzled block scales sf (scale_ptr: the global scale). The
    last dims of q, kv and k_pe are contiguous. MASK: the attention mask as
    `attention_quant._attn_fwd_kernel` reads it (a row no key is visible to stores 0). The
    scores are two `tl.dot`s, `q_nope @ k_nope^T + q_pe @ k_pe^T`, so the qk head dim (192 for
    DeepSeek) need not be a power of two and may differ from the v head dim (128); k_nope and v
    are read strided out of kv_b's GEMM output (no split or copy) and the one k_pe shared by all
    heads from its own rows (never expanded per head)."""
    bh = tl.program_id(0)
    pid_m = tl.num_programs(1) - 1 - tl.program_id(1)
    b = bh // H
    h = bh % H
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_dn = tl.arange(0, BLOCK_NOPE)
    offs_dr = tl.arange(0, BLOCK_ROPE)
    offs_dv = tl.arange(0, BLOCK_DV)
    rmask = rows < Tq
    q_rows = q_ptr + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh + _idx(rows, WIDE) * sqm
    q_n = tl.load(q_rows[:, None] + offs_dn[None, :],
                  mask=rmask[:, None] & (offs_dn < NOPE)[None, :], other=0.0)
    q_r = tl.load(q_rows[:, None] + NOPE + offs_dr[None, :],
                  mask=rmask[:, None] & (offs_dr < ROPE)[None, :], other=0.0)
    kv_base = kv_ptr + b.to(tl.int64) * skb + h.to(tl.int64) * skh
    pe_base = pe_ptr + b.to(tl.int64) * spb
    if MASK:
        mask_rows = (mask_ptr + b.to(tl.int64) * smb + h.to(tl.int64) * smh
                     + rows.to(tl.int64) * smq)
    else:
        mask_rows = rows  # unused
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    full_end, end = _key_tiles(pid_m, Tk, CAUSAL, BLOCK_M, BLOCK_N)
    for start_n in range(0, full_end, BLOCK_N):
        acc, l_i, m_i = _mla_tile(acc, l_i, m_i, q_n, q_r, kv_base, pe_base, start_n, rows,
                                  offs_n, offs_dn, offs_dr, offs_dv, Tk, qk_scale, skn, spn,
                                  mask_rows, smk, rmask, NOPE, ROPE, DV, FULL_D, False, CAUSAL,
                                  DOT_F32, WIDE, MASK, MASK_BOOL)
    for start_n in range(full_end, end, BLOCK_N):
        acc, l_i, m_i = _mla_tile(acc, l_i, m_i, q_n, q_r, kv_base, pe_base, start_n, rows,
                                  offs_n, offs_dn, offs_dr, offs_dv, Tk, qk_scale, skn, spn,
                                  mask_rows, smk, rmask, NOPE, ROPE, DV, FULL_D, True, CAUSAL,
                                  DOT_F32, WIDE, MASK, MASK_BOOL)
    if MASK:  # every key masked: the output is 0, as the CPU reference's
        l_i = tl.where(l_i == 0.0, 1.0, l_i)
    out_rows = b.to(tl.int64) * Tq + rows
    if OUT_NVFP4:
        _nvfp4_out(acc, l_i, out_rows, rmask, h * (DV // 16) + rows * 0, scale_ptr, o_ptr,
                   sf_ptr, H * DV, KP4, q_ptr.dtype.element_ty, DV, BLOCK_DV)
    else:
        o_ptrs = o_ptr + out_rows[:, None] * (H * DV) + h * DV + offs_dv[None, :]
        tl.store(o_ptrs, _fp8_out(acc, l_i, scale_ptr).to(o_ptr.dtype.element_ty),
                 mask=rmask[:, None] & (offs_dv < DV)[None, :])


def mla_attention_fp8(q: torch.Tensor, kv_c: torch.Tensor, k_pe: torch.Tensor,
                      kv_b_weight: torch.Tensor, scale_out: torch.Tensor, *, num_heads: int,
                      nope: int, v_dim: int, softmax_scale: float, causal: bool,
                      batch_major: bool, config: MlaConfig | None = None,
                      mask: torch.Tensor | None = None) -> torch.Tensor:
    """quant(MLA): float8_e4m3fn `[tokens, H * v]`, contiguous; arguments as
    `mla_attention_quant_ref.mla_attention_fp8` (kv_b's GEMM runs first, in the model dtype;
    `mask`, batch-major only (Hugging Face DeepSeek-V2's): bool or additive, broadcasting to
    `[B, H, L, Lk]`)."""
    qb, kvb, pe = _prepare(q, kv_c, k_pe, kv_b_weight, scale_out, num_heads, nope, v_dim,
                           batch_major, mask)
    b, _, tq, _ = qb.shape
    out = torch.empty((b * tq, num_heads * v_dim), dtype=torch.float8_e4m3fn, device=q.device)
    if out.numel() == 0:
        return out
    _launch(qb, kvb, pe, out, scale_out, out, num_heads, nope, v_dim, softmax_scale, causal,
            config, False, mask)
    return out


def mla_attention_nvfp4(q: torch.Tensor, kv_c: torch.Tensor, k_pe: torch.Tensor,
                        kv_b_weight: torch.Tensor, global_scale: torch.Tensor, *,
                        num_heads: int, nope: int, v_dim: int, softmax_scale: float,
                        causal: bool, batch_major: bool, config: MlaConfig | None = None,
                        mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 of MLA: (packed uint8 `[tokens, H * v / 2]`, swizzled block scales), as
    `mla_attention_quant_ref.mla_attention_nvfp4`; v_dim a multiple of 16; `mask` as
    `mla_attention_fp8`'s."""
    if v_dim % quant_ref.NVFP4_BLOCK != 0:
        raise ValueError(f"irfuse: the NVFP4 MLA epilogue needs a v head size divisible by 16, "
                         f"got {v_dim}")
    qb, kvb, pe = _prepare(q, kv_c, k_pe, kv_b_weight, global_scale, num_heads, nope, v_dim,
                           batch_major, mask)
    b, _, tq, _ = qb.shape
    out, sf = nvfp4_outputs(b * tq, num_heads * v_dim, q.device)
    if out.numel() == 0:
        return out, sf
    _launch(qb, kvb, pe, out, global_scale, sf, num_heads, nope, v_dim, softmax_scale, causal,
            config, True, mask)
    return out, sf


def _prepare(q: torch.Tensor, kv_c: torch.Tensor, k_pe: torch.Tensor, kv_b_weight: torch.Tensor,
             scale: torch.Tensor, num_heads: int, nope: int, v_dim: int, batch_major: bool,
             mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The checks, kv_b's GEMM, and the kernel's operands: q `[B, H, L, D]`, the up-projected
    kv `[B, H, Lk, nope + v]` and k_pe `[B, Lk, rope]`."""
    ref.check_mla_args(q, kv_c, k_pe, kv_b_weight, num_heads, nope, v_dim, batch_major)
    if scale.numel() != 1:
        raise ValueError(f"irfuse: scale_out must have one element, got shape "
                         f"{tuple(scale.shape)}")
    rope = k_pe.shape[-1]
    if max(nope, rope, v_dim) > MAX_HEAD_DIM:
        raise ValueError(f"irfuse: MLA head parts {nope}/{rope}/{v_dim} exceed the kernel's "
                         f"{MAX_HEAD_DIM}")
    if mask is not None and not batch_major:
        raise ValueError("irfuse: token-major MLA takes no mask")
    check_device(q, kv_c, k_pe, kv_b_weight, scale, *(() if mask is None else (mask,)))
    kv = ref.up_project(kv_c, kv_b_weight, num_heads, batch_major)
    if batch_major:
        return _last_contiguous(q), kv, _last_contiguous(k_pe[:, 0])
    return (_last_contiguous(q).transpose(0, 1)[None], kv.transpose(0, 1)[None],
            _last_contiguous(k_pe[:, 0])[None])


def _launch(qb: torch.Tensor, kvb: torch.Tensor, pe: torch.Tensor, out: torch.Tensor,
            scale: torch.Tensor, sf: torch.Tensor, num_heads: int, nope: int, v_dim: int,
            softmax_scale: float, causal: bool, config: MlaConfig | None, nvfp4: bool,
            mask: torch.Tensor | None = None) -> None:
    b, _, tq, _ = qb.shape
    tk, rope = kvb.shape[2], pe.shape[-1]
    if tk == 0:
        raise ValueError("irfuse: MLA attention needs at least one key")
    cfg = config or mla_config(tq, tk)
    grid = (b * num_heads, triton.cdiv(tq, cfg.block_m))
    blocks = (max(16, next_pow2(nope)), max(16, next_pow2(rope)), max(16, next_pow2(v_dim)))
    m = mask_operand(mask, b, num_heads, tq, tk)
    _mla_fwd_kernel[grid](
        qb, kvb, pe, out, scale, sf, m if m is not None else qb,
        qb.stride(0), qb.stride(1), qb.stride(2), kvb.stride(0), kvb.stride(1), kvb.stride(2),
        pe.stride(0), pe.stride(1), *(m.stride() if m is not None else (0, 0, 0, 0)),
        tq, tk, softmax_scale * LOG2E, sf.shape[-1] // 4 if nvfp4 else 0,
        H=num_heads, NOPE=nope, ROPE=rope, DV=v_dim,
        BLOCK_NOPE=blocks[0], BLOCK_ROPE=blocks[1], BLOCK_DV=blocks[2],
        FULL_D=blocks == (nope, rope, v_dim), CAUSAL=causal, BLOCK_M=cfg.block_m,
        BLOCK_N=cfg.block_n, DOT_F32=interpreting(),
        WIDE=max(tq * qb.stride(2), tk * kvb.stride(2), tk * pe.stride(1)) >= 2**31,
        OUT_NVFP4=nvfp4, MASK=m is not None, MASK_BOOL=m is not None and m.dtype == torch.uint8,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
