"""Triton attention kernels that store their output already quantized to FP8 (static scale) or
NVFP4: the attention output is never written in the model dtype.

`attention_fp8` / `attention_nvfp4` (prefill, dense): a FlashAttention-2 forward (online softmax
in base 2, float32 scores and accumulator; GQA, causal, SDPA's `attn_mask` read by strides).
`paged_decode_fp8` / `paged_decode_nvfp4` (one new token per sequence over a paged KV cache,
flash-decoding): a program owns one (sequence, KV head, split), the query heads sharing the KV
head are the rows of one `tl.dot`, so each cached key and value is read once for all of them;
split contexts are combined, and quantized, by a second kernel.

Numerics: the reference (`attention_quant_ref`) rounds the output to the model dtype and then
quantizes; the FP8 kernels quantize the float32 output, so a code near a rounding boundary can
move one step (within docs/numerics.md's attention + quant tolerance; the kernel tests state the
criterion). The NVFP4 epilogue quantizes the model-dtype output: bit for bit `quant_nvfp4` of
`attention`'s output. `prefill_config` / `decode_config` give launch shapes; `config=` overrides.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

from irfuse.kernels import attention_quant_ref, quant_ref
from irfuse.kernels.nvfp4 import _block_recip, _block_scale, _codes, _swizzled_offsets
from irfuse.kernels.triton_support import (
    await_previous_kernel,
    check_device,
    interpreting,
    next_pow2,
    pdl_launch,
)

FP8_MAX = 448.0
_FP8_MAX = tl.constexpr(FP8_MAX)  # the clamp bound inside the kernels
LOG2E = 1.4426950408889634
_LOG2E = tl.constexpr(LOG2E)  # a float mask's scale into the kernels' base-2 scores
MAX_HEAD_DIM = attention_quant_ref.KERNEL_MAX_HEAD_DIM


@dataclass(frozen=True)
class PrefillConfig:
    """Launch shape of `attention_fp8`: query rows and key tokens per tile, warps, software
    pipeline stages, and whether the grid launches the longest causal query tiles (the last
    ones) first, so the short ones fill the tail."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    heavy_first: bool = True


@dataclass(frozen=True)
class DecodeConfig:
    """Launch shape of the paged decode: key tokens per tile, warps, stages; `splits`, the
    programs each (sequence, KV head) is split into (None: `decode_splits` picks it from the
    grid size); `even`: split each sequence's own length into `splits` equal parts (otherwise
    every split covers a fixed chunk of ceil(capacity / splits) tokens of the table row, so a
    short sequence leaves its last splits empty and every busy program gets the same work);
    `prefetch`: each tile loads the next tile's page numbers, so that the software pipeline
    (`num_stages` 3 or more) can issue the next K and V loads while this tile computes (without
    it the page numbers come from the same iteration and K and V are single-buffered);
    `pdl`: programmatic dependent launch of the decode and combine kernels."""

    block_n: int
    num_warps: int
    num_stages: int
    splits: int | None = None
    even: bool = False
    prefetch: bool = False
    pdl: bool = False

    @classmethod
    def parse(cls, spec: str) -> DecodeConfig:
        """A launch shape from its spec, `block_n:warps:stages:splits` then any of `even` and
        `prefetch` (e.g. `64:4:3:2:even:prefetch`), as the benchmarks take it."""
        parts = spec.split(":")
        flags = set(parts[4:])
        if len(parts) < 4 or not all(p.isdigit() for p in parts[:4]) or flags - {"even",
                                                                                 "prefetch"}:
            raise ValueError(f"bad decode launch shape {spec!r} (expected "
                             "block_n:warps:stages:splits[:even][:prefetch])")
        n, w, st, sp = map(int, parts[:4])
        return cls(n, w, st, splits=sp, even="even" in flags, prefetch="prefetch" in flags)


def prefill_config(tq: int, tk: int, d: int, causal: bool) -> PrefillConfig:
    """Default launch shape (measured on the H200 at Hq 32 / Hk 8 / D 128, bf16, but for the
    one-tile-row shape of decode, `tq <= 16`, which is not measured yet); small shapes (tests,
    the interpreter) get small tiles."""
    if interpreting() or max(tq, tk) <= 64:
        return PrefillConfig(16, 16, 4, 1)
    if tq <= 16:  # decode over gathered keys (a GQA group folded into the rows): one tile row
        return PrefillConfig(16, 64, 4, 3)
    if d <= 64:
        return PrefillConfig(128, 64, 4, 3)
    if tq <= 1024:
        return PrefillConfig(64, 64, 4, 3)
    return PrefillConfig(128, 64, 8, 3)


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def device_sms(device: torch.device) -> int:
    """The GPU's SM count, which sizes the decode's split of each context (4 off CUDA)."""
    if device.type != "cuda":
        return 4
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


def decode_splits(programs: int, max_ctx: int, block_n: int, sms: int,
                  per_sm: int = 4, min_tokens: int = 256) -> int:
    """Splits of each context so that about `per_sm` programs run per SM, each with at least
    `min_tokens` tokens of the longest context (never more splits than tiles)."""
    want = -(-per_sm * sms // max(programs, 1))
    cap = max(1, max_ctx // min_tokens, 1)
    return max(1, min(want, cap, -(-max_ctx // block_n)))


def decode_config(batch: int, hk: int, max_ctx: int, d: int, sms: int) -> DecodeConfig:
    """Default decode launch shape, from the H100 rows of `bench_attention_quant.py --lib-decode`
    (docs/benchmarks.md; Qwen3-8B and Llama-70B-TP8 heads, batch 1-256, context 512-32k):
    - a grid of at least 3 programs per SM before any split (`batch * hk >= 3 * sms`) prefetches
      the page numbers over 4 stages (64-token tiles): 1-6% faster than no prefetch there on
      ragged contexts; 4 stages rather than 3 read vLLM's FlashInfer cache (K and V of a token
      side by side) 1.5-1.6% faster at batch 64 and 128 x 8192, within 1% at the other
      Qwen3-8B shapes, and irfuse's own paged cache 1.1-1.4% slower at batch 64, as fast at 256
      (`bench_e2e_vllm.py --decode-configs`, `bench_attention_quant.py --decode model --sweep`,
      H100, docs/benchmarks.md): vLLM's cache is the one served;
    - a grid of 1.5 to 3 programs per SM runs each sequence in one program, prefetching over 3
      stages: on vLLM's cache at batch 32 and 48 (contexts 2048 / 8192) 1.09x / 1.03x
      FlashInfer's decode + the quant, where 3 fixed splits took 0.85-0.89x and 2 even splits
      0.87-0.92x at batch 48; on irfuse's own cache with ragged contexts (lengths in [C/2, C])
      it is 2-6% slower than the best split shape at batch 32-40 and Llama-70B-TP8 256 x
      <=8192 (0.97x FlashInfer + the quant at batch 32 x <=8192; on vLLM's cache 0.99x there,
      1.05x at <=2048, 1.02-1.09x at batch 48), and faster at batch 48, Llama-70B-TP8 384 and
      with full contexts (batch 32 x 8192: 349 against 412 us for 3 splits);
    - smaller grids keep 5 programs per SM without the prefetch (64-token tiles, 2 stages), 2-12%
      faster there;
    - `decode_splits` splits; 2 splits divide each sequence's own length evenly (2-6% faster
      than two fixed chunks on ragged contexts), 3 or more take fixed chunks (3-11% faster than
      even parts)."""
    if interpreting():
        return DecodeConfig(16, 4, 1)
    programs = batch * hk
    if programs >= 3 * sms:
        tile = DecodeConfig(64, 4, 4, prefetch=True)
    elif 2 * programs >= 3 * sms:
        return DecodeConfig(64, 4, 3, splits=1, prefetch=True)
    else:
        tile = DecodeConfig(64, 4, 2)
    splits = decode_splits(programs, max_ctx, tile.block_n, sms)
    return replace(tile, splits=splits, even=splits == 2)


def decode_chunk(max_ctx: int, splits: int, block_n: int) -> int:
    """Tokens of one fixed split: ceil(capacity / splits), in whole tiles."""
    return triton.cdiv(triton.cdiv(max_ctx, block_n), splits) * block_n


# --- prefill ----------------------------------------------------------------------------------


@triton.jit
def _dot(a, b, acc, F32: tl.constexpr):
    """`tl.dot(a, b, acc)`; with F32 (the interpreter, whose dot multiplies bf16/fp16 bit
    patterns as integers) on the operands widened to float32: the same products, exact in
    float32, and a float32 sum."""
    if F32:
        out = tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    else:
        out = tl.dot(a, b, acc)
    return out


@triton.jit
def _idx(x, WIDE: tl.constexpr):
    """Offsets within one head in int64 only where they can pass 2**31 (`WIDE`)."""
    if WIDE:
        out = x.to(tl.int64)
    else:
        out = x
    return out


@triton.jit
def _attn_tile(acc, l_i, m_i, q, k_base, v_base, start_n, rows, offs_n, offs_d, Tk, qk_scale,
               skn, svn, mask_rows, smk, rmask, D: tl.constexpr, BLOCK_D: tl.constexpr,
               MASKED: tl.constexpr, CAUSAL: tl.constexpr, DOT_F32: tl.constexpr,
               WIDE: tl.constexpr, MASK: tl.constexpr, MASK_BOOL: tl.constexpr):
    """One BLOCK_N key tile of the online softmax; MASKED tiles bound the keys at Tk (and, if
    CAUSAL, at the diagonal), the others are entirely visible (but for the attention mask, with
    MASK: see `_softmax_step`)."""
    cols = start_n + offs_n
    k_ptrs = k_base + _idx(cols, WIDE)[None, :] * skn + offs_d[:, None]
    v_ptrs = v_base + _idx(cols, WIDE)[:, None] * svn + offs_d[None, :]
    if MASKED:
        kmask = cols < Tk
        if D == BLOCK_D:
            k = tl.load(k_ptrs, mask=kmask[None, :], other=0.0)
            v = tl.load(v_ptrs, mask=kmask[:, None], other=0.0)
        else:
            dmask = offs_d < D
            k = tl.load(k_ptrs, mask=kmask[None, :] & dmask[:, None], other=0.0)
            v = tl.load(v_ptrs, mask=kmask[:, None] & dmask[None, :], other=0.0)
    else:
        if D == BLOCK_D:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        else:
            dmask = offs_d < D
            k = tl.load(k_ptrs, mask=dmask[:, None], other=0.0)
            v = tl.load(v_ptrs, mask=dmask[None, :], other=0.0)
    qk = _dot(q, k, tl.zeros([q.shape[0], k.shape[1]], tl.float32), DOT_F32) * qk_scale
    return _softmax_step(acc, l_i, m_i, qk, v, rows, cols, Tk, mask_rows, smk, rmask, MASKED,
                         CAUSAL, DOT_F32, MASK, MASK_BOOL)


@triton.jit
def _softmax_step(acc, l_i, m_i, qk, v, rows, cols, Tk, mask_rows, smk, rmask,
                  MASKED: tl.constexpr, CAUSAL: tl.constexpr, DOT_F32: tl.constexpr,
                  MASK: tl.constexpr, MASK_BOOL: tl.constexpr):
    """The online-softmax update of one key tile from its scaled scores `qk` (log2 units) and
    its values: masked tiles drop keys past Tk (and, if CAUSAL, past the diagonal). With MASK
    the attention mask's tile (row i at `mask_rows[i] + col * smk`, rows off `rmask` not read)
    drops the keys it marks False (MASK_BOOL) or is added to the scores (a float mask, natural
    log units, so times log2(e)); a row that has seen no visible key yet keeps m = -inf, and
    its exponentials are taken against 0 instead (all zero, no NaN)."""
    if MASK:
        mv = tl.load(mask_rows[:, None] + cols[None, :] * smk,
                     mask=rmask[:, None] & (cols < Tk)[None, :], other=0)
        if MASK_BOOL:
            qk = tl.where(mv != 0, qk, float("-inf"))
        else:
            qk = qk + mv.to(tl.float32) * _LOG2E
    if MASKED:
        valid = (cols < Tk)[None, :]
        if CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        qk = tl.where(valid, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    if MASK:
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_ref = m_new
    p = tl.math.exp2(qk - m_ref[:, None])
    alpha = tl.math.exp2(m_i - m_ref)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    acc = _dot(p.to(v.dtype), v, acc, DOT_F32)
    return acc, l_i, m_new


@triton.jit
def _key_tiles(pid_m, Tk, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(full_end, end) of query block pid_m's key tiles: [0, full_end) is visible to every row
    of the block, [full_end, end) crosses the diagonal (or the end of the keys) and is masked;
    causal tiles above the diagonal are skipped."""
    if CAUSAL:
        first_row = pid_m * BLOCK_M
        full_end = tl.minimum((first_row + 1) // BLOCK_N * BLOCK_N, Tk // BLOCK_N * BLOCK_N)
        end = tl.minimum(first_row + BLOCK_M, Tk)
    else:
        full_end = Tk // BLOCK_N * BLOCK_N
        end = Tk
    return full_end, end


@triton.jit
def _fp8_out(acc, l_i, scale_ptr):
    """The FP8 epilogue: the output divided by the row sum and the output scale in one float32
    multiply by `1 / (l * scale)`, clamped to the FP8 range (the caller casts and stores)."""
    inv = 1.0 / (l_i * tl.load(scale_ptr))
    return tl.clamp(acc * inv[:, None], -_FP8_MAX, _FP8_MAX)


@triton.jit
def _nvfp4_out(acc, l_i, out_rows, rmask, block0, gs_ptr, q_ptr, sf_ptr, WIDTH: tl.constexpr,
               KP4, DT: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr):
    """The NVFP4 epilogue: the output `acc / l` rounded to the model dtype DT (as the unfused
    graph stores it), quantized by `nvfp4`'s block steps (`quant_ref.quant_nvfp4`'s bits). Tile
    row i goes to row `out_rows[i]` of the token-major `[M, WIDTH]` output from its block
    `block0[i]` on: codes at byte `block0[i] * 8` of that row of `[M, WIDTH / 2]`, block scales
    at (`out_rows[i]`, `block0[i] + j`) of the swizzled layout. D is a multiple of 16 (blocks
    never straddle two heads); columns past D and rows off `rmask` are not stored."""
    BM: tl.constexpr = acc.shape[0]
    NB: tl.constexpr = BLOCK_D // 16
    y = tl.reshape((acc / l_i[:, None]).to(DT).to(tl.float32), (BM, NB, 16))
    gs = tl.load(gs_ptr).to(tl.float32)
    sb8, sbf = _block_scale(tl.max(tl.abs(y), axis=2), gs, sf_ptr.dtype.element_ty)
    r, smask = _block_recip(sbf)
    code = _codes(y, gs, sbf[:, :, None], r[:, :, None], smask[:, :, None])
    lo, hi = tl.split(tl.reshape(code, (BM, BLOCK_D // 2, 2)))
    cols = tl.arange(0, BLOCK_D // 2)
    q_offs = out_rows[:, None] * (WIDTH // 2) + block0[:, None] * 8 + cols[None, :]
    tl.store(q_ptr + q_offs, (lo | (hi << 4)).to(tl.uint8),
             mask=rmask[:, None] & (cols < D // 2)[None, :])
    blocks = tl.arange(0, NB)
    sf_offs = _swizzled_offsets(out_rows[:, None], block0[:, None] + blocks[None, :], KP4)
    tl.store(sf_ptr + sf_offs, sb8, mask=rmask[:, None] & (blocks < D // 16)[None, :])


@triton.jit
def _attn_fwd_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, scale_ptr, sf_ptr, mask_ptr,
    sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, smb, smh, smq, smk,
    Tq, Tk, qk_scale, KP4,
    HQ: tl.constexpr, GROUP: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HEAVY_FIRST: tl.constexpr, OUT_FP8: tl.constexpr, DOT_F32: tl.constexpr,
    WIDE: tl.constexpr, OUT_NVFP4: tl.constexpr = False, MASK: tl.constexpr = False,
    MASK_BOOL: tl.constexpr = False, FOLD: tl.constexpr = False,
):
    """Query rows [m * BLOCK_M, m * BLOCK_M + BLOCK_M) of one (batch, head) into o
    [B, HQ, Tq, D] (contiguous), or with OUT_NVFP4 into the token-major codes o
    [B * Tq, HQ * D / 2] and the swizzled block scales sf (scale_ptr: the global scale). The
    last dims of q, k, v are contiguous; the other strides are arguments. With MASK, the
    attention mask's element (b, h, i, j) is at `b * smb + h * smh + i * smq + j * smk` (bool,
    as uint8, with MASK_BOOL; else additive float), and a row no key is visible to stores 0.
    FOLD (one query token, GQA): HQ counts the KV heads and the Tq == GROUP rows of head h are
    its group's query heads (the caller passes the strides so), so one tile reads each key once
    for the whole group; the output [B, HQ * GROUP, 1, D] is laid out as the unfolded one, and
    only the NVFP4 epilogue's token rows and blocks tell the two apart. Scores, row max and sum
    and the accumulator are float32, the softmax in base 2 (`exp2(qk * softmax_scale * log2(e)
    - m)`), and P @ V a `tl.dot` of the model-dtype probabilities; MASK is a constexpr, so the
    unmasked kernel is compiled without it."""
    if HEAVY_FIRST:
        bh = tl.program_id(0)
        pid_m = tl.num_programs(1) - 1 - tl.program_id(1)
    else:
        pid_m = tl.program_id(0)
        bh = tl.program_id(1)
    b = bh // HQ
    h = bh % HQ
    if FOLD:
        kvh = h
    else:
        kvh = h // GROUP
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    rmask = rows < Tq
    q_base = q_ptr + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
    q_ptrs = q_base + _idx(rows, WIDE)[:, None] * sqm + offs_d[None, :]
    if D == BLOCK_D:
        q = tl.load(q_ptrs, mask=rmask[:, None], other=0.0)
    else:
        q = tl.load(q_ptrs, mask=rmask[:, None] & (offs_d < D)[None, :], other=0.0)
    k_base = k_ptr + b.to(tl.int64) * skb + kvh.to(tl.int64) * skh
    v_base = v_ptr + b.to(tl.int64) * svb + kvh.to(tl.int64) * svh
    if MASK:
        mask_rows = (mask_ptr + b.to(tl.int64) * smb + h.to(tl.int64) * smh
                     + rows.to(tl.int64) * smq)
    else:
        mask_rows = rows  # unused
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    full_end, end = _key_tiles(pid_m, Tk, CAUSAL, BLOCK_M, BLOCK_N)
    for start_n in range(0, full_end, BLOCK_N):
        acc, l_i, m_i = _attn_tile(acc, l_i, m_i, q, k_base, v_base, start_n, rows, offs_n,
                                   offs_d, Tk, qk_scale, skn, svn, mask_rows, smk, rmask, D,
                                   BLOCK_D, False, CAUSAL, DOT_F32, WIDE, MASK, MASK_BOOL)
    for start_n in range(full_end, end, BLOCK_N):
        acc, l_i, m_i = _attn_tile(acc, l_i, m_i, q, k_base, v_base, start_n, rows, offs_n,
                                   offs_d, Tk, qk_scale, skn, svn, mask_rows, smk, rmask, D,
                                   BLOCK_D, True, CAUSAL, DOT_F32, WIDE, MASK, MASK_BOOL)
    if MASK:  # every key masked: acc is 0, and so is the output (as the CPU reference's)
        l_i = tl.where(l_i == 0.0, 1.0, l_i)
    if OUT_NVFP4:
        if FOLD:  # token b, query head h * GROUP + row
            _nvfp4_out(acc, l_i, b.to(tl.int64) + rows * 0, rmask,
                       (h * GROUP + rows) * (D // 16),
                       scale_ptr, o_ptr, sf_ptr, HQ * GROUP * D, KP4, q_ptr.dtype.element_ty,
                       D, BLOCK_D)
        else:
            _nvfp4_out(acc, l_i, b.to(tl.int64) * Tq + rows, rmask, h * (D // 16) + rows * 0,
                       scale_ptr, o_ptr, sf_ptr, HQ * D, KP4, q_ptr.dtype.element_ty, D,
                       BLOCK_D)
    else:
        o_ptrs = o_ptr + (bh.to(tl.int64) * Tq + rows[:, None]) * D + offs_d[None, :]
        omask = rmask[:, None] & (offs_d < D)[None, :]
        if OUT_FP8:
            tl.store(o_ptrs, _fp8_out(acc, l_i, scale_ptr).to(o_ptr.dtype.element_ty),
                     mask=omask)
        else:
            tl.store(o_ptrs, (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=omask)


def nvfp4_outputs(rows: int, width: int, device: torch.device
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """The NVFP4 epilogue's outputs for `[rows, width]` values: packed codes, and the swizzled
    block scales zeroed (the layout's padding rows and columns, which no program writes)."""
    mp, kp = quant_ref.nvfp4_scale_shape(rows, width)
    return (torch.empty((rows, width // 2), dtype=torch.uint8, device=device),
            torch.zeros((mp, kp), dtype=quant_ref.NVFP4_SCALE_DTYPE, device=device))


def _last_contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _check_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   scale: torch.Tensor | None,
                   mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    """The head-size bound and devices; q, k, v with a contiguous last dim."""
    if q.shape[-1] > MAX_HEAD_DIM:
        raise ValueError(f"irfuse: head size {q.shape[-1]} exceeds the kernel's {MAX_HEAD_DIM}")
    check_device(q, k, v, *(t for t in (scale, mask) if t is not None))
    return _last_contiguous(q), _last_contiguous(k), _last_contiguous(v)


def mask_operand(mask: torch.Tensor | None, b: int, hq: int, tq: int,
                 tk: int) -> torch.Tensor | None:
    """The attention mask as the kernel reads it: broadcast to `[B, Hq, Tq, Tk]` by strides
    (0 on broadcast dims, nothing copied), a bool mask seen as uint8. ValueError (one line) for
    another dtype or a shape that does not broadcast."""
    if mask is None:
        return None
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise ValueError(f"irfuse: an attention mask is bool or floating point, got {mask.dtype}")
    try:
        full = mask.expand(b, hq, tq, tk)
    except RuntimeError:
        raise ValueError(f"irfuse: attention mask {tuple(mask.shape)} does not broadcast to "
                         f"[B, H, Tq, Tk] = {[b, hq, tq, tk]}") from None
    return full.view(torch.uint8) if mask.dtype == torch.bool else full


def _launch_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                    scale: torch.Tensor, sf: torch.Tensor, softmax_scale: float, causal: bool,
                    config: PrefillConfig | None, out_fp8: bool, out_nvfp4: bool,
                    mask: torch.Tensor | None = None) -> None:
    """The prefill launch (`mask` from `mask_operand`). One query token with GQA and no causal
    mask (decode over gathered keys) folds each group's query heads into the tile rows."""
    b, hq, tq, d = q.shape
    hk, tk = k.shape[1], k.shape[2]
    group = hq // hk
    sqh, sqm = q.stride(1), q.stride(2)
    ms = mask.stride() if mask is not None else (0, 0, 0, 0)
    smh, smq = ms[1], ms[2]
    fold = tq == 1 and group > 1 and not causal
    heads, rows = hq, tq
    if fold:
        heads, rows, sqh, sqm, smh, smq = hk, group, sqh * group, sqh, smh * group, smh
    cfg = config or prefill_config(rows, tk, d, causal)
    num_m = triton.cdiv(rows, cfg.block_m)
    grid = (b * heads, num_m) if cfg.heavy_first else (num_m, b * heads)
    _attn_fwd_kernel[grid](
        q, k, v, out, scale, sf, mask if mask is not None else q,
        q.stride(0), sqh, sqm, k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), ms[0], smh, smq, ms[3],
        rows, tk, softmax_scale * LOG2E, sf.shape[-1] // 4 if out_nvfp4 else 0,
        HQ=heads, GROUP=group, D=d, BLOCK_D=max(16, next_pow2(d)), CAUSAL=causal,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, HEAVY_FIRST=cfg.heavy_first,
        OUT_FP8=out_fp8, DOT_F32=interpreting(),
        WIDE=max(rows * sqm, tk * k.stride(2), tk * v.stride(2)) >= 2**31,
        OUT_NVFP4=out_nvfp4, MASK=mask is not None,
        MASK_BOOL=mask is not None and mask.dtype == torch.uint8, FOLD=fold,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               scale_out: torch.Tensor | None, softmax_scale: float, causal: bool,
               config: PrefillConfig | None, mask: torch.Tensor | None) -> torch.Tensor:
    q, k, v = _check_prefill(q, k, v, scale_out, mask)
    b, hq, tq, d = q.shape
    out_dtype = attention_quant_ref.OUT_DTYPE if scale_out is not None else q.dtype
    out = torch.empty((b, hq, tq, d), dtype=out_dtype, device=q.device)
    if out.numel() == 0:
        return out
    scale = scale_out if scale_out is not None else out  # unused without OUT_FP8
    _launch_prefill(q, k, v, out, scale, out, softmax_scale, causal, config,
                    scale_out is not None, False, mask_operand(mask, b, hq, tq, k.shape[2]))
    return out


def attention_fp8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale_out: torch.Tensor,
                  *, softmax_scale: float, causal: bool, config: PrefillConfig | None = None,
                  mask: torch.Tensor | None = None) -> torch.Tensor:
    """quant(sdpa(q, k, v, attn_mask=mask)) as one kernel: float8_e4m3fn [B, Hq, Tq, D],
    contiguous; arguments and errors as `attention_quant_ref.attention_fp8` (a last dim that is
    not contiguous is copied first). `mask`: SDPA's attn_mask, bool (True = attend) or additive
    float, any shape that broadcasts to [B, Hq, Tq, Tk]. A row whose every key is masked stores
    0, as SDPA's math backend (the CPU reference) returns; some CUDA SDPA backends have returned
    NaN there (pytorch/pytorch#110213), so 0 is the op's defined result, not a GPU SDPA's."""
    attention_quant_ref.check_attention_args(q, k, v, scale_out)
    return _attention(q, k, v, scale_out, softmax_scale, causal, config, mask)


def attention_nvfp4(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    global_scale: torch.Tensor, *, softmax_scale: float, causal: bool,
                    config: PrefillConfig | None = None,
                    mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 of sdpa(q, k, v, attn_mask=mask) token-major as one kernel: (packed uint8
    `[B * Tq, Hq * D / 2]`, swizzled float8_e4m3fn block scales), as
    `attention_quant_ref.attention_nvfp4`; the head size D must be a multiple of 16 (a block of
    16 values lies within one head); `mask` as `attention_fp8`'s."""
    attention_quant_ref.check_attention_args(q, k, v, global_scale)
    if q.shape[-1] % quant_ref.NVFP4_BLOCK != 0:
        raise ValueError(f"irfuse: the NVFP4 attention epilogue needs a head size divisible by "
                         f"16, got {q.shape[-1]}")
    q, k, v = _check_prefill(q, k, v, global_scale, mask)
    b, hq, tq, d = q.shape
    out, sf = nvfp4_outputs(b * tq, hq * d, q.device)
    if out.numel() == 0:
        return out, sf
    _launch_prefill(q, k, v, out, global_scale, sf, softmax_scale, causal, config, False, True,
                    mask_operand(mask, b, hq, tq, k.shape[2]))
    return out, sf


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, softmax_scale: float,
              causal: bool, config: PrefillConfig | None = None,
              mask: torch.Tensor | None = None) -> torch.Tensor:
    """The same kernel storing the model dtype (no quant): the benchmark's "kernel unfused"."""
    attention_quant_ref.check_attention_args(q, k, v, torch.ones(1))
    return _attention(q, k, v, None, softmax_scale, causal, config, mask)


# --- paged decode -----------------------------------------------------------------------------


@triton.jit
def _paged_decode_kernel(
    q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, scale_ptr, o_ptr, op_ptr, lse_ptr, sf_ptr,
    ks_ptr, vs_ptr,
    sqb, sqh, skb, skt, skh, svb, svt, svh, sbt, qk_scale, KP4, max_ctx, splits, chunk,
    HQ: tl.constexpr, GROUP: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_G: tl.constexpr, PAGE: tl.constexpr, BLOCK_N: tl.constexpr, ONE_SPLIT: tl.constexpr,
    EVEN: tl.constexpr, PREFETCH: tl.constexpr, OUT_FP8: tl.constexpr, DOT_F32: tl.constexpr,
    OUT_NVFP4: tl.constexpr = False, PDL: tl.constexpr = False, KV_FP8: tl.constexpr = False,
):
    """Sequence b, KV head kvh (program 0 = b * HK + kvh), split s (program 1): its GROUP
    query heads against its context, the first min(seq_lens[b], max_ctx) tokens (max_ctx the
    table row's capacity; a length below 0 counts as 0). Split s covers tokens
    [s * chunk, (s + 1) * chunk), or with EVEN the s-th of `splits` equal parts of the
    sequence's own length. With ONE_SPLIT the output (o [B, HQ, D]; with OUT_NVFP4 the codes
    o [B, HQ * D / 2] and the swizzled block scales sf, scale_ptr the global scale; an empty
    context stores 0), otherwise the float32 partial (op [B, HQ, splits, D], not stored for an
    empty split) and its base-2 log-sum-exp (lse [B, HQ, splits], -inf for an empty split).
    The GROUP heads are the BLOCK_G (at least 16) rows of one `tl.dot`, so each key and value
    is read once for the group; keys are gathered through the block table a BLOCK_N tile at a
    time, whatever the page size PAGE. With KV_FP8 the caches are vLLM's per-tensor FP8: each
    e4m3 value widened exactly to q's dtype, the scales (ks_ptr, vs_ptr) applied in float32, k's
    to the logits' scale and v's to the accumulator."""
    await_previous_kernel(PDL)
    pid = tl.program_id(0)
    split = tl.program_id(1)
    b = pid // (HQ // GROUP)
    kvh = pid % (HQ // GROUP)
    seq_len = tl.maximum(tl.minimum(tl.load(lens_ptr + b), max_ctx), 0)
    if EVEN:
        split_len = tl.cdiv(tl.cdiv(seq_len, BLOCK_N), splits) * BLOCK_N
    else:
        split_len = chunk
    start = split * split_len
    end = tl.minimum(start + split_len, seq_len)
    g = tl.arange(0, BLOCK_G)
    heads = kvh * GROUP + g
    gmask = g < GROUP
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < D
    q_ptrs = q_ptr + b.to(tl.int64) * sqb + heads[:, None] * sqh + offs_d[None, :]
    q = tl.load(q_ptrs, mask=gmask[:, None] & dmask[None, :], other=0.0)
    if KV_FP8:
        qk_scale = qk_scale * tl.load(ks_ptr).to(tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    bt_row = bt_ptr + b.to(tl.int64) * sbt
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    if PREFETCH:
        page_next = tl.load(bt_row + (start + offs_n) // PAGE, mask=start + offs_n < end,
                            other=0)
    else:
        page_next = offs_n  # unused
    for n in range(start, end, BLOCK_N):
        toks = n + offs_n
        tmask = toks < end
        if PREFETCH:  # the next tile's pages now, so its K and V loads can be issued early
            page = page_next.to(tl.int64)
            page_next = tl.load(bt_row + (toks + BLOCK_N) // PAGE,
                                mask=toks + BLOCK_N < end, other=0)
        else:
            page = tl.load(bt_row + toks // PAGE, mask=tmask, other=0).to(tl.int64)
        slot = toks % PAGE
        k_rows = page * skb + slot * skt + kvh * skh
        v_rows = page * svb + slot * svt + kvh * svh
        k = tl.load(k_ptr + k_rows[None, :] + offs_d[:, None],
                    mask=tmask[None, :] & dmask[:, None], other=0.0)
        v = tl.load(v_ptr + v_rows[:, None] + offs_d[None, :],
                    mask=tmask[:, None] & dmask[None, :], other=0.0)
        if KV_FP8:
            k = k.to(q.dtype)
            v = v.to(q.dtype)
        qk = _dot(q, k, tl.zeros([BLOCK_G, BLOCK_N], tl.float32), DOT_F32) * qk_scale
        qk = tl.where(tmask[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = _dot(p.to(v.dtype), v, acc, DOT_F32)
        m_i = m_new
    if KV_FP8:
        acc = acc * tl.load(vs_ptr).to(tl.float32)
    out_rows = b.to(tl.int64) * HQ + heads
    omask = gmask[:, None] & dmask[None, :]
    # An empty context or split has l = 0, acc = 0 and m = -inf.
    has = l_i > 0
    l_safe = tl.where(has, l_i, 1.0)
    if ONE_SPLIT:
        if OUT_NVFP4:
            _nvfp4_out(acc, l_safe, b.to(tl.int64) + g * 0, gmask, heads * (D // 16),
                       scale_ptr, o_ptr, sf_ptr, HQ * D, KP4, q_ptr.dtype.element_ty, D,
                       BLOCK_D)
        else:
            if OUT_FP8:
                o = _fp8_out(acc, l_safe, scale_ptr)
            else:
                o = acc / l_safe[:, None]
            tl.store(o_ptr + out_rows[:, None] * D + offs_d[None, :],
                     o.to(o_ptr.dtype.element_ty), mask=omask)
    else:
        lse = tl.where(has, m_i + tl.math.log2(l_safe), float("-inf"))
        part = out_rows * splits + split
        tl.store(op_ptr + part[:, None] * D + offs_d[None, :], acc / l_safe[:, None],
                 mask=omask & has[:, None])
        tl.store(lse_ptr + part, lse, mask=gmask)


@triton.jit
def _combine_splits_kernel(op_ptr, lse_ptr, scale_ptr, o_ptr, q_ptr, sf_ptr, KP4, splits,
                           HQ: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
                           BLOCK_S: tl.constexpr, OUT_FP8: tl.constexpr,
                           OUT_NVFP4: tl.constexpr = False, PDL: tl.constexpr = False):
    """Row r = b * HQ + h: the splits' partial outputs weighted by exp2(lse - max lse) (BLOCK_S
    splits at a time; empty splits, lse -inf, are not read), then the quant (or the model
    dtype, q_ptr's); a row with no key at all stores 0. With OUT_NVFP4 the row is one tile row
    of the NVFP4 epilogue: codes and block scales of token b from head h's first block."""
    await_previous_kernel(PDL)
    r = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < D
    m_s = tl.full([BLOCK_S], float("-inf"), tl.float32)
    for s0 in range(0, splits, BLOCK_S):
        lse = tl.load(lse_ptr + r * splits + s0 + s, mask=s0 + s < splits, other=float("-inf"))
        m_s = tl.maximum(m_s, lse)
    m = tl.max(m_s, 0)
    m = tl.where(m == float("-inf"), 0.0, m)
    num = tl.zeros([BLOCK_S, BLOCK_D], tl.float32)
    den = tl.zeros([BLOCK_S], tl.float32)
    for s0 in range(0, splits, BLOCK_S):
        lse = tl.load(lse_ptr + r * splits + s0 + s, mask=s0 + s < splits, other=float("-inf"))
        w = tl.math.exp2(lse - m)
        live = lse > float("-inf")
        parts = tl.load(op_ptr + (r * splits + s0 + s[:, None]) * D + offs_d[None, :],
                        mask=live[:, None] & dmask[None, :], other=0.0)
        num += parts * w[:, None]
        den += w
    total = tl.sum(den, 0)
    total = tl.where(total > 0, total, 1.0)
    acc = tl.sum(num, 0)
    if OUT_NVFP4:
        zero = tl.zeros([1], tl.int64)  # a one-row tile
        _nvfp4_out(acc[None, :], total + tl.zeros([1], tl.float32), r // HQ + zero,
                   zero == 0, (r % HQ) * (D // 16) + zero, scale_ptr, o_ptr, sf_ptr, HQ * D,
                   KP4, q_ptr.dtype.element_ty, D, BLOCK_D)
    else:
        if OUT_FP8:
            o = tl.clamp(acc * (1.0 / (total * tl.load(scale_ptr))), -_FP8_MAX, _FP8_MAX)
        else:
            o = acc / total
        tl.store(o_ptr + r * D + offs_d, o.to(o_ptr.dtype.element_ty), mask=dmask)


def _paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  block_table: torch.Tensor, seq_lens: torch.Tensor,
                  scale_out: torch.Tensor | None, softmax_scale: float,
                  config: DecodeConfig | None, nvfp4: bool = False,
                  k_scale: torch.Tensor | None = None, v_scale: torch.Tensor | None = None,
                  ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The decode launch: the model dtype (no scale), FP8 (`scale_out`), or with `nvfp4`
    (`scale_out` the global scale) the codes `[B, Hq * D / 2]` and swizzled block scales; with
    `k_scale` / `v_scale`, from vLLM's per-tensor FP8 caches."""
    b, hq, d = q.shape
    page, hk = k_cache.shape[1], k_cache.shape[2]
    if d > MAX_HEAD_DIM:
        raise ValueError(f"irfuse: head size {d} exceeds the kernel's {MAX_HEAD_DIM}")
    check_device(q, k_cache, v_cache, block_table, seq_lens,
                 *(() if scale_out is None else (scale_out,)),
                 *(() if k_scale is None or v_scale is None else (k_scale, v_scale)))
    q, k_cache, v_cache = _last_contiguous(q), _last_contiguous(k_cache), _last_contiguous(v_cache)
    block_table = _last_contiguous(block_table)
    if nvfp4:
        out, sf = nvfp4_outputs(b, hq * d, q.device)
    else:
        out_dtype = attention_quant_ref.OUT_DTYPE if scale_out is not None else q.dtype
        out = sf = torch.empty((b, hq, d), dtype=out_dtype, device=q.device)
    if out.numel() == 0:
        return (out, sf) if nvfp4 else out
    max_ctx = block_table.shape[1] * page  # known on the host: no sync, graph-capturable
    cfg = config or decode_config(b, hk, max_ctx, d, device_sms(q.device))
    splits = cfg.splits or decode_splits(b * hk, max_ctx, cfg.block_n, device_sms(q.device))
    splits = max(1, min(splits, -(-max(max_ctx, 1) // cfg.block_n)))
    group = hq // hk
    block_d = max(16, next_pow2(d))
    if splits > 1:
        op = torch.empty((b, hq, splits, d), dtype=torch.float32, device=q.device)
        lse = torch.empty((b, hq, splits), dtype=torch.float32, device=q.device)
    else:
        op = lse = out  # unused
    scale = scale_out if scale_out is not None else out  # unused without a quant
    out_fp8 = scale_out is not None and not nvfp4
    kp4 = sf.shape[-1] // 4 if nvfp4 else 0
    pdl = pdl_launch(cfg.pdl, q.device)
    kv_fp8 = k_scale is not None
    _paged_decode_kernel[(b * hk, splits)](
        q, k_cache, v_cache, block_table, seq_lens, scale, out, op, lse, sf,
        k_scale if kv_fp8 else scale, v_scale if kv_fp8 else scale,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_table.stride(0),
        softmax_scale * LOG2E, kp4, max_ctx, splits, decode_chunk(max_ctx, splits, cfg.block_n),
        HQ=hq, GROUP=group, D=d, BLOCK_D=block_d, BLOCK_G=max(16, next_pow2(group)),
        PAGE=page, BLOCK_N=cfg.block_n, ONE_SPLIT=splits == 1, EVEN=cfg.even,
        PREFETCH=cfg.prefetch, OUT_FP8=out_fp8, DOT_F32=interpreting(), OUT_NVFP4=nvfp4,
        KV_FP8=kv_fp8, num_warps=cfg.num_warps, num_stages=cfg.num_stages, **pdl,
    )
    if splits > 1:
        _combine_splits_kernel[(b * hq,)](
            op, lse, scale, out, q, sf, kp4, splits, HQ=hq, D=d, BLOCK_D=block_d,
            BLOCK_S=min(16, next_pow2(splits)), OUT_FP8=out_fp8, OUT_NVFP4=nvfp4,
            num_warps=4 if d >= 128 else 2, **pdl)
    return (out, sf) if nvfp4 else out


def paged_decode_fp8(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     block_table: torch.Tensor, seq_lens: torch.Tensor, scale_out: torch.Tensor,
                     *, softmax_scale: float, config: DecodeConfig | None = None,
                     k_scale: torch.Tensor | None = None, v_scale: torch.Tensor | None = None,
                     ) -> torch.Tensor:
    """Paged decode attention with the FP8 quant fused: float8_e4m3fn [B, Hq, D], contiguous;
    arguments as `attention_quant_ref.paged_decode_fp8` (FP8 caches with `k_scale` /
    `v_scale`), but any `seq_lens[b]` (not checked, that would need a device sync): a length of
    0 stores 0 and a length beyond the table row's capacity attends over the whole row, as the
    graph's mask of positions below it does."""
    attention_quant_ref.check_decode_args(q, k_cache, v_cache, block_table, seq_lens, scale_out,
                                          k_scale, v_scale)
    out = _paged_decode(q, k_cache, v_cache, block_table, seq_lens, scale_out, softmax_scale,
                        config, k_scale=k_scale, v_scale=v_scale)
    assert isinstance(out, torch.Tensor)
    return out


def paged_decode_nvfp4(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                       block_table: torch.Tensor, seq_lens: torch.Tensor,
                       global_scale: torch.Tensor, *, softmax_scale: float,
                       config: DecodeConfig | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Paged decode attention with the NVFP4 quant fused: (packed uint8 `[B, Hq * D / 2]`,
    swizzled block scales), as `attention_quant_ref.paged_decode_nvfp4`; D a multiple of 16
    (seq_lens as `paged_decode_fp8`)."""
    attention_quant_ref.check_decode_args(q, k_cache, v_cache, block_table, seq_lens,
                                          global_scale)
    if q.shape[-1] % quant_ref.NVFP4_BLOCK != 0:
        raise ValueError(f"irfuse: the NVFP4 attention epilogue needs a head size divisible by "
                         f"16, got {q.shape[-1]}")
    out = _paged_decode(q, k_cache, v_cache, block_table, seq_lens, global_scale,
                        softmax_scale, config, nvfp4=True)
    assert isinstance(out, tuple)
    return out


def paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 block_table: torch.Tensor, seq_lens: torch.Tensor, *, softmax_scale: float,
                 config: DecodeConfig | None = None) -> torch.Tensor:
    """The same decode storing the model dtype (no quant): the benchmark's "kernel unfused"."""
    attention_quant_ref.check_decode_args(q, k_cache, v_cache, block_table, seq_lens,
                                          torch.ones(1))
    out = _paged_decode(q, k_cache, v_cache, block_table, seq_lens, None, softmax_scale,
                        config)
    assert isinstance(out, torch.Tensor)
    return out


def default_softmax_scale(d: int) -> float:
    """1 / sqrt(D), SDPA's default."""
    return 1.0 / math.sqrt(d)
