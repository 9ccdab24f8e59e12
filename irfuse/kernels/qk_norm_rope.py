"""Triton kernel for per-head QK RMSNorm + RoPE, optionally writing k and v into a paged KV cache.

One launch covers q's and k's heads (and, in the KV variant, v's): each program takes one block
of heads of one block of tokens (`_qk_norm_rope_kernel`) and stores the rotated heads, q and k
into new contiguous outputs or, in the KV variant, k and v straight into the cache rows of
`slot_mapping` (FP8 caches scaled). Every element is read once and written once; the inputs may
be strided views of a fused qkv tensor.

Numerics are `qk_norm_rope_ref`'s (its functions' docstrings are the definition). The kernel is
compiled without floating-point contraction (`enable_fp_fusion=False`), so no product fuses into
an FMA that torch would round twice: without a norm the outputs (and caches, FP8 included) are
bit for bit the reference's; with one, within two units in the last place in bf16/fp16 (1e-5
relative in fp32), at most 1% of them off, since the sum of squares adds up in another order and
rsqrt may round otherwise. Launch shapes come from `rope_config`
(`benchmarks/bench_qk_norm_rope.py`); `config=` overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from irfuse.kernels import qk_norm_rope_ref
from irfuse.kernels.norm_quant import div_rn_by
from irfuse.kernels.triton_support import (
    await_previous_kernel,
    check_device,
    next_pow2,
    pdl_launch,
)

MAX_HEAD_DIM = 1024


@dataclass(frozen=True)
class RopeConfig:
    """Launch shape: tokens and heads per program (powers of two), warps per program,
    programmatic dependent launch (`triton_support.pdl_launch`: off where the device lacks it)."""

    tokens: int
    heads: int
    num_warps: int
    pdl: bool = True


def rope_config(tokens: int, heads: int, head_dim: int) -> RopeConfig:
    """Default launch shape for `tokens` tokens of `heads` heads (q's and k's together) of
    `head_dim`: blocks of up to 8 heads, more tokens a program as T grows, about eight elements of
    a rotated half per thread (measured on the H200 at 32 + 8 heads of 128)."""
    per_head = next_pow2(max(head_dim // 2, 1))
    hb = min(8, next_pow2(max(heads, 1)))
    tb = 1 if tokens < 1024 else 2
    warps = max(1, min(8, tb * hb * per_head // 256))
    return RopeConfig(tb, hb, warps)


@triton.jit
def _weighted(n, w, weight_offset, DT: tl.constexpr, WEIGHT_F32: tl.constexpr,
              HAS_OFFSET: tl.constexpr):
    """The normed values times the weight, rounded to DT: the product in DT, or in float32."""
    if WEIGHT_F32:
        wf = w.to(tl.float32)
        if HAS_OFFSET:
            wf = wf + weight_offset
        y = (n * wf).to(DT)
    else:
        y = (n.to(DT).to(tl.float32) * w.to(DT).to(tl.float32)).to(DT)
    return y


@triton.jit
def _round(x, DT: tl.constexpr):
    """x (float32) rounded to DT, back in float32: one torch op's result in DT."""
    return x.to(DT).to(tl.float32)


@triton.jit
def _to_store(x, scale, FP8: tl.constexpr, DST: tl.constexpr):
    """x (model dtype) as the destination stores it: itself, or `clamp(x / scale)` in FP8, the
    quotient rounded as torch's division rounds it (`norm_quant.div_rn_by`: an IEEE division of
    each element made MLA's FP8 latent write 3.1-3.7 µs slower than its bf16 one on an H100).
    Both paths return DST: Triton refuses a function whose returns differ in type."""
    y = x
    if FP8:
        q = div_rn_by(x.to(tl.float32), scale, tl.math.div_rn(1.0, scale), True)
        y = tl.minimum(tl.maximum(q, -448.0), 448.0)
    return y.to(DST)


@triton.jit
def _rope_block(
    src, s0, s1, s2, w_ptr, eps, weight_offset,
    toks64, tmask, heads, hmask,
    cos_ptr, sin_ptr, crow, srow, sc1, ss1,
    dst, dtok, dmask, dh, dd, scale_ptr,
    D: tl.constexpr, R: tl.constexpr, IS_NEOX: tl.constexpr, FULL_TABLE: tl.constexpr,
    HAS_W: tl.constexpr, WEIGHT_F32: tl.constexpr, HAS_OFFSET: tl.constexpr,
    ROPE_F32: tl.constexpr, FP8: tl.constexpr, BLOCK_R2: tl.constexpr, BLOCK_P: tl.constexpr,
):
    """Norm + RoPE of the heads `heads` [HEADS] of the tokens `toks64` [TOKENS] of src (strides
    s0, s1, s2), stored at dst + dtok[t] + head * dh + dim * dd where dmask[t]; the tables read
    at cos_ptr + crow + dim * sc1 (crow: [TOKENS, 1, 1], or per channel [TOKENS, 1, BLOCK_R2]),
    sin likewise."""
    DT = src.dtype.element_ty
    HALF: tl.constexpr = R // 2
    i = tl.arange(0, BLOCK_R2)[None, None, :]
    imask = i < HALF
    if IS_NEOX:
        off1 = i
        off2 = i + HALF
    else:
        off1 = 2 * i
        off2 = 2 * i + 1
    m2 = tmask[:, None, None] & hmask[None, :, None]
    mr = m2 & imask
    base = src + toks64[:, None, None] * s0 + heads[None, :, None].to(tl.int64) * s1
    if IS_NEOX:
        x1 = tl.load(base + off1 * s2, mask=mr, other=0.0)
        x2 = tl.load(base + off2 * s2, mask=mr, other=0.0)
    else:  # GPT-J's pairs: the row read in one piece and split in registers
        i2 = tl.arange(0, 2 * BLOCK_R2)[None, None, :]
        xr = tl.load(base + i2 * s2, mask=m2 & (i2 < R), other=0.0)
        x1, x2 = tl.split(tl.reshape(xr, (xr.shape[0], xr.shape[1], BLOCK_R2, 2)))
    if BLOCK_P > 0:
        j = R + tl.arange(0, BLOCK_P)[None, None, :]
        mp = m2 & (j < D)
        xp = tl.load(base + j * s2, mask=mp, other=0.0)
    if HAS_W:
        f1 = x1.to(tl.float32)
        f2 = x2.to(tl.float32)
        ss = tl.sum(f1 * f1, axis=2) + tl.sum(f2 * f2, axis=2)
        if BLOCK_P > 0:
            fp = xp.to(tl.float32)
            ss += tl.sum(fp * fp, axis=2)
        rstd = tl.math.rsqrt(ss / D + eps)[:, :, None]
        w1 = tl.load(w_ptr + off1, mask=imask, other=0.0)
        w2 = tl.load(w_ptr + off2, mask=imask, other=0.0)
        y1 = _weighted(f1 * rstd, w1, weight_offset, DT, WEIGHT_F32, HAS_OFFSET)
        y2 = _weighted(f2 * rstd, w2, weight_offset, DT, WEIGHT_F32, HAS_OFFSET)
        if BLOCK_P > 0:
            wp = tl.load(w_ptr + j, mask=j < D, other=0.0)
            xp = _weighted(fp * rstd, wp, weight_offset, DT, WEIGHT_F32, HAS_OFFSET)
    else:
        y1 = x1
        y2 = x2
    # The tables: [TOKENS, 1, BLOCK_R2], loaded once for all the program's heads (crow, srow:
    # each token's row offset, [TOKENS, 1, 1], or per channel for a multimodal rope).
    mt = tmask[:, None, None] & imask
    if FULL_TABLE:
        c1 = tl.load(cos_ptr + crow + off1 * sc1, mask=mt, other=0.0)
        c2 = tl.load(cos_ptr + crow + off2 * sc1, mask=mt, other=0.0)
        t1 = tl.load(sin_ptr + srow + off1 * ss1, mask=mt, other=0.0)
        t2 = tl.load(sin_ptr + srow + off2 * ss1, mask=mt, other=0.0)
    else:
        c1 = tl.load(cos_ptr + crow + i * sc1, mask=mt, other=0.0)
        t1 = tl.load(sin_ptr + srow + i * ss1, mask=mt, other=0.0)
        c2 = c1
        t2 = t1
    a1 = y1.to(tl.float32)
    a2 = y2.to(tl.float32)
    if ROPE_F32:
        c1 = c1.to(tl.float32)
        c2 = c2.to(tl.float32)
        t1 = t1.to(tl.float32)
        t2 = t2.to(tl.float32)
        o1 = (a1 * c1 - a2 * t1).to(DT)
        o2 = (a2 * c2 + a1 * t2).to(DT)
    else:
        c1 = c1.to(DT).to(tl.float32)
        c2 = c2.to(DT).to(tl.float32)
        t1 = t1.to(DT).to(tl.float32)
        t2 = t2.to(DT).to(tl.float32)
        o1 = (_round(a1 * c1, DT) - _round(a2 * t1, DT)).to(DT)
        o2 = (_round(a2 * c2, DT) + _round(a1 * t2, DT)).to(DT)
    DST = dst.dtype.element_ty
    scale = 1.0
    if FP8:
        scale = tl.load(scale_ptr)
    out = dst + dtok[:, None, None] + heads[None, :, None].to(tl.int64) * dh
    ms = dmask[:, None, None] & hmask[None, :, None]
    if IS_NEOX:
        tl.store(out + off1 * dd, _to_store(o1, scale, FP8, DST), mask=ms & imask)
        tl.store(out + off2 * dd, _to_store(o2, scale, FP8, DST), mask=ms & imask)
    else:  # the pairs interleaved back: one contiguous store of the row
        i2 = tl.arange(0, 2 * BLOCK_R2)[None, None, :]
        tl.store(out + i2 * dd, _to_store(tl.interleave(o1, o2), scale, FP8, DST),
                 mask=ms & (i2 < R))
    if BLOCK_P > 0:
        tl.store(out + j * dd, _to_store(xp, scale, FP8, DST), mask=ms & (j < D))


@triton.jit
def _mrope_row(BLOCK_R2: tl.constexpr, INTERLEAVED: tl.constexpr, S_T: tl.constexpr,
               S_H: tl.constexpr, S_W: tl.constexpr):
    """The position row each table channel of a multimodal rope reads, [1, 1, BLOCK_R2]
    (`qk_norm_rope_ref.mrope_rows`)."""
    ch = tl.arange(0, BLOCK_R2)[None, None, :]
    if INTERLEAVED:
        row = tl.where((ch % 3 == 1) & (ch < 3 * S_H), 1, 0)
        row = tl.where((ch % 3 == 2) & (ch < 3 * S_W), 2, row)
    else:
        row = (ch >= S_T).to(tl.int32) + (ch >= S_T + S_H).to(tl.int32)
    return row.to(tl.int64)


@triton.jit(do_not_specialize=["T"])
def _qk_norm_rope_kernel(
    q_ptr, k_ptr, v_ptr, qw_ptr, kw_ptr, cos_ptr, sin_ptr, pos_ptr,
    q_out_ptr, k_out_ptr, kc_ptr, vc_ptr, slot_ptr, k_scale_ptr, v_scale_ptr,
    T, eps, weight_offset,
    sq0, sq1, sq2, sk0, sk1, sk2, sv0, sv1, sv2,
    sc0, sc1, ss0, ss1, sp_row, sc_row, ss_row,
    skc0, skc1, skc2, skc3, svc0, svc1, svc2, svc3, block_size,
    HQ: tl.constexpr, HK: tl.constexpr, D: tl.constexpr, DV: tl.constexpr, R: tl.constexpr,
    IS_NEOX: tl.constexpr, FULL_TABLE: tl.constexpr, HAS_POS: tl.constexpr,
    HAS_QW: tl.constexpr, HAS_KW: tl.constexpr, WEIGHT_F32: tl.constexpr,
    HAS_OFFSET: tl.constexpr, ROPE_F32: tl.constexpr, KV: tl.constexpr, FP8: tl.constexpr,
    TOKENS: tl.constexpr, HEADS: tl.constexpr, BLOCK_R2: tl.constexpr, BLOCK_P: tl.constexpr,
    BLOCK_DV: tl.constexpr, PDL: tl.constexpr, K_OUT: tl.constexpr = False,
    MROPE: tl.constexpr = False, INTERLEAVED: tl.constexpr = False, S_T: tl.constexpr = 0,
    S_H: tl.constexpr = 0, S_W: tl.constexpr = 0,
):
    """Program p: head block p % blocks (q's, then k's, then v's) of tokens
    [(p // blocks) * TOKENS, + TOKENS). Without KV, k goes to k_out [T, HK, D] (contiguous, as
    q_out); with KV, k and v go to the caches (strides skc*, svc*) at the tokens' slots, and
    with K_OUT the rotated k to k_out as well (a k read besides the write). A program holds a
    tile [TOKENS, HEADS, rotary_dim / 2] of each rotated half (NeoX: the halves; GPT-J: the even
    and odd elements) and one of the pass-through dims in registers, loads its tokens' cos / sin
    once and reduces the sum of squares over the head dim (`tl.sum`)."""
    NQB: tl.constexpr = (HQ + HEADS - 1) // HEADS
    NKB: tl.constexpr = (HK + HEADS - 1) // HEADS
    NB: tl.constexpr = NQB + 2 * NKB if KV else NQB + NKB
    pid = tl.program_id(0)
    hb = pid % NB
    toks = (pid // NB) * TOKENS + tl.arange(0, TOKENS)
    tmask = toks < T
    toks64 = toks.to(tl.int64)
    lanes = tl.arange(0, HEADS)
    await_previous_kernel(PDL)
    if KV:
        slot = tl.load(slot_ptr + toks64, mask=tmask, other=-1).to(tl.int64)
        smask = tmask & (slot >= 0)
        slot = tl.where(smask, slot, 0)
        blk = slot // block_size
        row = slot - blk * block_size
    if hb < NQB + NKB:
        # Each token's table offsets, [TOKENS, 1, 1]; a multimodal rope's per channel.
        t3 = toks64[:, None, None]
        if MROPE:
            mrow = _mrope_row(BLOCK_R2, INTERLEAVED, S_T, S_H, S_W)
            if HAS_POS:
                prow = tl.load(pos_ptr + mrow * sp_row + t3, mask=tmask[:, None, None],
                               other=0).to(tl.int64)
                crow = prow * sc0
                srow = prow * ss0
            else:
                crow = mrow * sc_row + t3 * sc0
                srow = mrow * ss_row + t3 * ss0
        elif HAS_POS:
            prow = tl.load(pos_ptr + t3, mask=tmask[:, None, None], other=0).to(tl.int64)
            crow = prow * sc0
            srow = prow * ss0
        else:
            crow = t3 * sc0
            srow = t3 * ss0
        if hb < NQB:
            heads = hb * HEADS + lanes
            _rope_block(q_ptr, sq0, sq1, sq2, qw_ptr, eps, weight_offset,
                        toks64, tmask, heads, heads < HQ,
                        cos_ptr, sin_ptr, crow, srow, sc1, ss1,
                        q_out_ptr, toks64 * (HQ * D), tmask, D, 1, k_scale_ptr,
                        D, R, IS_NEOX, FULL_TABLE, HAS_QW, WEIGHT_F32, HAS_OFFSET, ROPE_F32,
                        False, BLOCK_R2, BLOCK_P)
        else:
            heads = (hb - NQB) * HEADS + lanes
            if KV:
                _rope_block(k_ptr, sk0, sk1, sk2, kw_ptr, eps, weight_offset,
                            toks64, tmask, heads, heads < HK,
                            cos_ptr, sin_ptr, crow, srow, sc1, ss1,
                            kc_ptr, blk * skc0 + row * skc1, smask, skc2, skc3, k_scale_ptr,
                            D, R, IS_NEOX, FULL_TABLE, HAS_KW, WEIGHT_F32, HAS_OFFSET,
                            ROPE_F32, FP8, BLOCK_R2, BLOCK_P)
                if K_OUT:  # the rotated k also to k_out (a k read besides the write)
                    _rope_block(k_ptr, sk0, sk1, sk2, kw_ptr, eps, weight_offset,
                                toks64, tmask, heads, heads < HK,
                                cos_ptr, sin_ptr, crow, srow, sc1, ss1,
                                k_out_ptr, toks64 * (HK * D), tmask, D, 1, k_scale_ptr,
                                D, R, IS_NEOX, FULL_TABLE, HAS_KW, WEIGHT_F32, HAS_OFFSET,
                                ROPE_F32, False, BLOCK_R2, BLOCK_P)
            else:
                _rope_block(k_ptr, sk0, sk1, sk2, kw_ptr, eps, weight_offset,
                            toks64, tmask, heads, heads < HK,
                            cos_ptr, sin_ptr, crow, srow, sc1, ss1,
                            k_out_ptr, toks64 * (HK * D), tmask, D, 1, k_scale_ptr,
                            D, R, IS_NEOX, FULL_TABLE, HAS_KW, WEIGHT_F32, HAS_OFFSET,
                            ROPE_F32, False, BLOCK_R2, BLOCK_P)
    else:
        if KV:  # v: a copy into its cache rows
            heads = (hb - NQB - NKB) * HEADS + lanes
            hmask = heads < HK
            dv = tl.arange(0, BLOCK_DV)[None, None, :]
            h64 = heads[None, :, None].to(tl.int64)
            m = tmask[:, None, None] & hmask[None, :, None] & (dv < DV)
            x = tl.load(v_ptr + toks64[:, None, None] * sv0 + h64 * sv1 + dv * sv2, mask=m,
                        other=0.0)
            scale = 1.0
            if FP8:
                scale = tl.load(v_scale_ptr)
            dst = vc_ptr + (blk * svc0 + row * svc1)[:, None, None] + h64 * svc2 + dv * svc3
            ms = smask[:, None, None] & hmask[None, :, None] & (dv < DV)
            tl.store(dst, _to_store(x, scale, FP8, vc_ptr.dtype.element_ty), mask=ms)


def _launch(q, k, v, q_weight, k_weight, cos, sin, positions, cos_sin_cache, k_cache, v_cache,
            slot_mapping, k_scale, v_scale, shapes, eps, is_neox, rotary_dim, weight_offset,
            weight_f32, rope_f32, config, kv, return_k=False, mrope_section=None,
            mrope_interleaved=False):
    tokens, hq, hk, d = shapes.tokens, shapes.q_heads, shapes.kv_heads, shapes.head_dim
    if d > MAX_HEAD_DIM or shapes.v_dim > MAX_HEAD_DIM:
        raise ValueError(f"irfuse: qk_norm_rope: head dims over {MAX_HEAD_DIM} are not supported")
    tensors = [q, k, *(t for t in (v, q_weight, k_weight, cos, sin, positions, cos_sin_cache,
                                   k_cache, v_cache, slot_mapping) if t is not None)]
    check_device(*tensors)
    if any(t.device != q.device for t in tensors):
        raise ValueError("irfuse: qk_norm_rope: all tensors must be on one device")
    q_out = torch.empty((tokens, hq, d), dtype=q.dtype, device=q.device)
    k_out = (torch.empty((tokens, hk, d), dtype=q.dtype, device=q.device)
             if return_k or not kv else None)
    if tokens == 0:
        return q_out, k_out
    half = rotary_dim // 2
    if cos_sin_cache is not None:
        cos_t, sin_t = cos_sin_cache[:, :half], cos_sin_cache[:, half:]
        pos = positions if positions.stride(-1) == 1 else positions.contiguous()
    else:
        cos_t, sin_t, pos = cos, sin, q  # (pos unused)
    # A multimodal rope's positions [3, T] or tables [3, T, W]: the rows `row_strides` apart.
    mrope = mrope_section is not None
    sections = tuple(mrope_section) if mrope else (0, 0, 0)
    row_strides = (pos.stride(0) if mrope and cos_sin_cache is not None else 0,
                   cos_t.stride(0) if mrope and cos_sin_cache is None else 0,
                   sin_t.stride(0) if mrope and cos_sin_cache is None else 0)
    if kv:
        kc, vc, slots = k_cache, v_cache, slot_mapping
        fp8 = shapes.fp8_cache
        ks = k_scale if fp8 else q
        vs = v_scale if fp8 else q
        vv = v
    else:
        kc = vc = k_out
        slots, ks, vs, vv = q, q, q, q
        fp8 = False
    kcs = kc.stride() if kv else (0, 0, 0, 0)
    vcs = vc.stride() if kv else (0, 0, 0, 0)
    vstr = v.stride() if kv else (0, 0, 0)
    cfg = config or rope_config(tokens, hq + hk, d)
    nblocks = -(-hq // cfg.heads) + (2 if kv else 1) * -(-hk // cfg.heads)
    grid = (triton.cdiv(tokens, cfg.tokens) * nblocks,)
    _qk_norm_rope_kernel[grid](
        q, k, vv, q_weight if q_weight is not None else q,
        k_weight if k_weight is not None else q, cos_t, sin_t, pos,
        q_out, k_out if k_out is not None else q_out, kc, vc, slots, ks, vs,
        tokens, float(eps), float(weight_offset),
        *q.stride(), *k.stride(), *vstr,
        cos_t.stride(-2), cos_t.stride(-1), sin_t.stride(-2), sin_t.stride(-1), *row_strides,
        *kcs, *vcs, shapes.block_size,
        HQ=hq, HK=hk, D=d, DV=max(shapes.v_dim, 1), R=rotary_dim,
        IS_NEOX=bool(is_neox), FULL_TABLE=shapes.full_table, HAS_POS=cos_sin_cache is not None,
        HAS_QW=q_weight is not None, HAS_KW=k_weight is not None,
        WEIGHT_F32=bool(weight_f32) or weight_offset != 0.0, HAS_OFFSET=weight_offset != 0.0,
        ROPE_F32=bool(rope_f32), KV=kv, FP8=fp8, K_OUT=kv and return_k,
        TOKENS=cfg.tokens, HEADS=cfg.heads, BLOCK_R2=next_pow2(half),
        BLOCK_P=next_pow2(d - rotary_dim) if d > rotary_dim else 0,
        BLOCK_DV=next_pow2(max(shapes.v_dim, 1)), MROPE=mrope,
        INTERLEAVED=bool(mrope_interleaved), S_T=sections[0], S_H=sections[1], S_W=sections[2],
        num_warps=cfg.num_warps, enable_fp_fusion=False, **pdl_launch(cfg.pdl, q.device),
    )
    return q_out, k_out


def qk_norm_rope(q, k, q_weight, k_weight, cos, sin, positions, cos_sin_cache, *, eps: float,
                 is_neox: bool, rotary_dim: int, weight_offset: float = 0.0,
                 weight_f32: bool = False, rope_f32: bool = False,
                 mrope_section: list[int] | None = None, mrope_interleaved: bool = False,
                 config: RopeConfig | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head RMSNorm (where a weight is given) + RoPE of q and k in one launch: new contiguous
    (q_out, k_out); arguments, numerics and errors as `qk_norm_rope_ref.qk_norm_rope`."""
    mrope = {"mrope_section": mrope_section, "mrope_interleaved": mrope_interleaved}
    shapes = qk_norm_rope_ref.check_args(q, k, q_weight, k_weight, cos, sin, positions,
                                         cos_sin_cache, rotary_dim, **mrope)
    q_out, k_out = _launch(q, k, None, q_weight, k_weight, cos, sin, positions, cos_sin_cache,
                           None, None, None, None, None, shapes, eps, is_neox, rotary_dim,
                           weight_offset, weight_f32, rope_f32, config, False, **mrope)
    assert k_out is not None
    return q_out, k_out


def qk_norm_rope_kv(q, k, v, q_weight, k_weight, cos, sin, positions, cos_sin_cache, k_cache,
                    v_cache, slot_mapping, k_scale, v_scale, *, eps: float, is_neox: bool,
                    rotary_dim: int, weight_offset: float = 0.0, weight_f32: bool = False,
                    rope_f32: bool = False, config: RopeConfig | None = None,
                    return_k: bool = False, mrope_section: list[int] | None = None,
                    mrope_interleaved: bool = False
                    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """`qk_norm_rope` with the rotated k and v written into the paged caches at slot_mapping, in
    place, in the same launch (slots < 0 skipped; FP8 caches scaled): returns q_out, or with
    `return_k` (q_out, k_out). Arguments, numerics and errors as
    `qk_norm_rope_ref.qk_norm_rope_kv`."""
    mrope = {"mrope_section": mrope_section, "mrope_interleaved": mrope_interleaved}
    shapes = qk_norm_rope_ref.check_args(q, k, q_weight, k_weight, cos, sin, positions,
                                         cos_sin_cache, rotary_dim, v, k_cache, v_cache,
                                         slot_mapping, k_scale, v_scale, kv=True, **mrope)
    q_out, k_out = _launch(q, k, v, q_weight, k_weight, cos, sin, positions, cos_sin_cache,
                           k_cache, v_cache, slot_mapping, k_scale, v_scale, shapes, eps, is_neox,
                           rotary_dim, weight_offset, weight_f32, rope_f32, config, True,
                           return_k, **mrope)
    if return_k:
        assert k_out is not None
        return q_out, k_out
    return q_out
