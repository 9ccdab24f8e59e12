"""Triton kernels for NVFP4 quantization (16-element blocks), alone or fused after SiLU·Mul or
another gated activation (GeGLU: ACT, a constexpr, picks the gate's activation, `_gate`).

Program (row, block range) handles BPP blocks of one row. Per block:
`sb = fp8(clamp(gs * amax / 6, ±448))`, `q = e2m1(clamp(x * gs / sb, ±6))` rounded to nearest
even, two codes per byte (element 2i low). Block scales go to the swizzled 128×4 layout
(`quant_ref.swizzle_block_scales`); the grid also covers the scale padding (rows up to a multiple
of 128, PAD_ROWS of them per extra program; columns up to a multiple of 4), so the kernel writes
the padding zeros itself (no memset launch). Numerics: `quant_ref.quant_nvfp4`, bit for bit.

The kernel is issue-bound on sm90 (and draws the board to its power cap), so its arithmetic is
cut to few instructions, with the reference's bits: the quotient from one reciprocal per block
and Markstein's correction (`_codes`), the e2m1 code from the float's bits
(`_e2m1_magnitude_bits`: no F2I, no float clamps; sm90 has no e2m1 conversion instruction) and
silu by inline PTX (`_silu`). The two tile layouts: `Nvfp4Config.split`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from irfuse.kernels import act_quant_ref, quant_ref
from irfuse.kernels.norm_quant import Steps, tuned
from irfuse.kernels.triton_support import (
    await_previous_kernel,
    cache_hints,
    check_device,
    interpreting,
    next_pow2,
    pdl_launch,
    rows_2d,
)

PAD_ROWS = 32  # padding rows (of the 128-row scale tiles) zeroed per program

ACT_CODES = {"silu": 1, "gelu_tanh": 2, "gelu": 3}
"""The constexpr ACT of the fused kernels per gate activation (`act_quant_ref.ACTIVATIONS`);
ACT=0: no activation (the plain quant)."""


def act_code(activation: str) -> int:
    """ACT for `activation` (a ValueError names an unknown one)."""
    if activation not in ACT_CODES:
        raise ValueError(f"irfuse: unknown gate activation {activation!r}, not one of "
                         f"{tuple(ACT_CODES)}")
    return ACT_CODES[activation]


@dataclass(frozen=True)
class Nvfp4Config:
    """Launch shape of the NVFP4 kernels: 16-element blocks per program, warps, `split`;
    `evict`: the inputs are loaded with `evict_first` (off: no cache hint); `pdl`: programmatic
    dependent launch (`norm_quant.RowConfig`). Without `split`, `_nvfp4_kernel` holds a
    [BPP, 16] tile (16-byte loads) and splits the codes into the pairs that share a byte; with
    it, `_nvfp4_split_kernel` gives each thread whole blocks (two [BPP, 8] halves), so the block
    amax needs no shuffle, the scale arithmetic runs once per block, and a block's codes leave
    as one 8-byte store."""

    blocks_per_program: int
    num_warps: int
    split: bool = False
    evict: bool = True
    pdl: bool = False


# Launch shapes that measured fastest on the H200 (docs/kernel_study.md): width -> steps of
# (from tokens, config). `split` wins from 1024 tokens, there with loads without cache hints
# (2-4% faster than with `evict_first`); at decode sizes the paired layout with 2 warps does. PDL
# (same bits) measured 13-29% faster up to 16 tokens, 11-35% slower at 128, 0.6-3.5% faster at
# 1024 and within 1.2% either way from 4096 (once 3.7% slower): on below 128 tokens and from 1024
# to 4095.
_SPLIT = {"split": True, "evict": False}
_NVFP4_TUNED: dict[int, Steps] = {
    width: ((1, Nvfp4Config(32, 2, pdl=True)), (128, Nvfp4Config(32, 2)),
            (1024, Nvfp4Config(128, 2, **_SPLIT, pdl=True)), (4096, Nvfp4Config(128, 2, **_SPLIT)))
    for width in (14336, 28672)
}


def nvfp4_config(tokens: int, width: int) -> Nvfp4Config:
    """Default launch shape (widths up to 20000 use the I 14336 steps, wider the I 28672)."""
    cfg = tuned(_NVFP4_TUNED[14336 if width <= 20000 else 28672], tokens)
    blocks = min(cfg.blocks_per_program, next_pow2(width // quant_ref.NVFP4_BLOCK))
    per_warp = 32 if cfg.split else 16  # a split thread owns a block, else two threads do
    return dataclasses.replace(cfg, blocks_per_program=blocks,
                               num_warps=max(1, min(cfg.num_warps, blocks // per_warp)))


@triton.jit
def _e2m1_magnitude_bits(q):
    """e2m1 magnitude code (0..7, int32) of |q| for any float32 q (inf and NaN give 7).

    |q| saturates at 6 (a float min, which returns 6 for NaN). Then the step of its range (0.5 below 2,
    1 in [2, 4), 2 in [4, 6]) is 2**(e - 128) with e = max(biased exponent, 127), and adding
    M = 2**22 * step rounds |q| to a multiple of step, nearest even (M's ulp is the step); the
    multiple sits in the low bits of the sum, and the code is it plus 2 * (e - 127).
    """
    u = tl.minimum(tl.abs(q), 6.0).to(tl.int32, bitcast=True)
    e = tl.maximum(u >> 23, 127)
    m_bits = (e << 23) + 0x0B000000  # bits of 2**22 * 2**(e - 128)
    t = u.to(tl.float32, bitcast=True) + m_bits.to(tl.float32, bitcast=True)
    return t.to(tl.int32, bitcast=True) - m_bits + 2 * (e - 127)


@triton.jit
def _silu(a, FAST: tl.constexpr):
    """silu(a) in float32, as `a / (1 + exp(-a))` compiles, or by inline PTX with FAST:
    `a * rcp.approx.ftz(1 + ex2.approx.ftz(-a * log2 e))`, the instructions the plain form
    compiles to without the subnormal range fixes; the same bits except for a < -87.3, where
    silu is -0 instead of about -5e-37 (the same NVFP4 code). The interpreter, which has no
    inline PTX, runs the plain form."""
    if FAST:
        e = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [a * -1.4426950408889634],
                                      dtype=tl.float32, is_pure=True, pack=1)
        d = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=f,f", [1.0 + e],
                                      dtype=tl.float32, is_pure=True, pack=1)
        return a * d
    else:
        return a / (1.0 + tl.exp(-a))


@triton.jit
def _gate(a, ACT: tl.constexpr, FAST: tl.constexpr):
    """The gate's activation in float32: ACT 1 silu (`_silu`), 2 GELU's tanh form
    `0.5 a (1 + tanh(z))`, `z = sqrt(2/pi) (a + 0.044715 a^3)`, computed as `a / (1 + exp(-2z))`
    (`1 + tanh(z) = 2 sigmoid(2z)`: no cancellation where tanh(z) nears -1), 3 GELU's erf form
    `0.5 a (1 + erf(a / sqrt 2))`."""
    if ACT == 2:
        z = 0.7978845608028654 * (a + 0.044715 * a * a * a)
        g = a / (1.0 + tl.exp(-2.0 * z))
    elif ACT == 3:
        g = 0.5 * a * (1.0 + tl.math.erf(a * 0.7071067811865476))
    else:
        g = _silu(a, FAST)
    return g


@triton.jit
def _load_y(x_ptr, up_ptr, row, cols, mask, N, stride_x, stride_up, ACT: tl.constexpr,
            UP: tl.constexpr, FAST: tl.constexpr, STREAM: tl.constexpr = "evict_first"):
    """The values to quantize at `cols` of `row`, float32: x (ACT=0), or act(gate) * up rounded
    as eager rounds it (act to the model dtype, then the product). STREAM: the loads' cache
    hint ("" for none)."""
    DT = x_ptr.dtype.element_ty
    base = x_ptr + row.to(tl.int64) * stride_x
    a = tl.load(base + cols, mask=mask, other=0.0, eviction_policy=STREAM).to(tl.float32)
    if ACT:
        if UP:
            b = tl.load(up_ptr + row.to(tl.int64) * stride_up + cols, mask=mask, other=0.0,
                        eviction_policy=STREAM).to(tl.float32)
        else:
            b = tl.load(base + N + cols, mask=mask, other=0.0,
                        eviction_policy=STREAM).to(tl.float32)
        act = _gate(a, ACT, FAST).to(DT).to(tl.float32)
        y = (act * b).to(DT).to(tl.float32)
    else:
        y = a
    return y


@triton.jit
def _block_scale(amax, gs, SF_DT: tl.constexpr):
    """(fp8 block scale, its float32 value): `fp8(clamp(gs * amax / 6, ±448))`."""
    sb = tl.minimum(tl.maximum(tl.math.div_rn(gs * amax, 6.0), -448.0), 448.0)
    sb8 = sb.to(SF_DT)
    return sb8, sb8.to(tl.float32)


@triton.jit
def _block_recip(sbf):
    """Per block: r = RN(1 / sb) and the sign mask (0 for an all-zero block, whose codes are
    +0 as in the reference)."""
    zero = sbf == 0.0
    r = tl.where(zero, 0.0, tl.math.div_rn(1.0, tl.where(zero, 1.0, sbf)))
    return r, tl.where(zero, 0, 8)


@triton.jit
def _codes(y, gs, sbf, r, smask):
    """e2m1 codes (int32 0..15) of `clamp(RN(RN(y * gs) / sb), ±6)` by Markstein's quotient and
    the bit encoding (`_e2m1_magnitude_bits`); sbf, r, smask broadcast against y.

    The quotient `RN(p / sb)` (`p = RN(y * gs)`) comes from one correctly rounded reciprocal per
    block, `r = RN(1 / sb)`, and Markstein's correction, `q0 = RN(p * r)`,
    `q = RN(q0 + fma(q0, -sb, p) * r)` (3 FP instructions instead of an IEEE division's ~10),
    correctly rounded when nothing under- or overflows; checked exhaustively for every f32
    significand of p against every fp8 significand of sb
    (tests/kernels/test_act_kernel_variants.py). Where it matters (|q| >= 1/8) that holds;
    smaller quotients encode to a signed 0, inf/NaN past the e2m1 range only saturate. The sign
    comes from q0 (a zero keeps p's sign), so -0.0 encodes as 0x8; an all-zero block (sb = 0)
    takes r = 0 and no sign, as the reference's +0."""
    p = y * gs
    q0 = p * r
    q = tl.fma(tl.fma(q0, -sbf, p), r, q0)  # -sbf: one negation a block, not an element
    return _e2m1_magnitude_bits(q) | ((q0.to(tl.int32, bitcast=True) >> 28) & smask)


@triton.jit
def _swizzled_offsets(rows, blocks, KP4):
    """Flat offsets of scale (row, block) in the 128x4 tiled layout (broadcasting)."""
    return (((rows // 128) * KP4 + blocks // 4) * 32 + rows % 32) * 16 \
        + ((rows % 128) // 32) * 4 + blocks % 4


@triton.jit
def _zero_pad_scales(sf_ptr, row, blocks, M, MP, KP, KP4, PAD_ROWS: tl.constexpr,
                     BPP: tl.constexpr):
    """Programs past the real rows zero the scales of PAD_ROWS padding rows each."""
    pad = M + (row - M) * PAD_ROWS + tl.arange(0, PAD_ROWS)
    offs = _swizzled_offsets(pad[:, None], blocks[None, :], KP4)
    zeros = tl.zeros([PAD_ROWS, BPP], dtype=tl.float32).to(sf_ptr.dtype.element_ty)
    tl.store(sf_ptr + offs, zeros, mask=(pad[:, None] < MP) & (blocks[None, :] < KP))


@triton.jit(do_not_specialize=["M", "MP"])
def _nvfp4_kernel(
    x_ptr, up_ptr, q_ptr, sf_ptr, gs_ptr, M, MP, N, stride_x, stride_up, K, KP, KP4,
    ACT: tl.constexpr, UP: tl.constexpr, BPP: tl.constexpr, PAD_ROWS: tl.constexpr,
    FAST: tl.constexpr = False, STREAM: tl.constexpr = "evict_first", PDL: tl.constexpr = False,
):
    """A [BPP, 16] tile of blocks per program; the codes are reshaped to [BPP, 8, 2] so that
    the pair sharing a byte is split off and packed within each thread."""
    await_previous_kernel(PDL)
    row = tl.program_id(0)
    blocks = tl.program_id(1) * BPP + tl.arange(0, BPP)
    if row < M:
        sf_offs = _swizzled_offsets(row, blocks, KP4)
        cols = blocks[:, None] * 16 + tl.arange(0, 16)[None, :]
        y = _load_y(x_ptr, up_ptr, row, cols, cols < N, N, stride_x, stride_up, ACT, UP, FAST,
                    STREAM)
        gs = tl.load(gs_ptr).to(tl.float32)
        sb8, sbf = _block_scale(tl.max(tl.abs(y), axis=1), gs, sf_ptr.dtype.element_ty)
        r, smask = _block_recip(sbf)
        code = _codes(y, gs, sbf[:, None], r[:, None], smask[:, None])
        # Elements 2i and 2i+1 share byte i: split the pairs off the last axis and pack.
        lo, hi = tl.split(tl.reshape(code, (BPP, 8, 2)))
        packed = (lo | (hi << 4)).to(tl.uint8)
        q_offs = row.to(tl.int64) * (N // 2) + blocks[:, None] * 8 + tl.arange(0, 8)[None, :]
        tl.store(q_ptr + q_offs, packed, mask=blocks[:, None] < K)
        tl.store(sf_ptr + sf_offs, sb8, mask=blocks < KP)
    else:
        _zero_pad_scales(sf_ptr, row, blocks, M, MP, KP, KP4, PAD_ROWS, BPP)


@triton.jit
def _pack_word(code):
    """[BPP, 8] codes -> [BPP] int32 words, code j in bits 4j..4j+3 (element 2i low)."""
    return tl.sum(code << (4 * tl.arange(0, 8))[None, :], axis=1)


@triton.jit(do_not_specialize=["M", "MP"])
def _nvfp4_split_kernel(
    x_ptr, up_ptr, q_ptr, sf_ptr, gs_ptr, M, MP, N, stride_x, stride_up, K, KP, KP4,
    ACT: tl.constexpr, UP: tl.constexpr, BPP: tl.constexpr, PAD_ROWS: tl.constexpr,
    FAST: tl.constexpr, STREAM: tl.constexpr = "evict_first", PDL: tl.constexpr = False,
):
    """One thread per 16-element block: the block's halves are [BPP, 8] tiles (8 contiguous
    elements per thread), and q_ptr is the output viewed as int32 words (8 codes each)."""
    await_previous_kernel(PDL)
    row = tl.program_id(0)
    blocks = tl.program_id(1) * BPP + tl.arange(0, BPP)
    if row < M:
        cols = blocks[:, None] * 16 + tl.arange(0, 8)[None, :]
        mask = blocks[:, None] < K
        y_lo = _load_y(x_ptr, up_ptr, row, cols, mask, N, stride_x, stride_up, ACT, UP, FAST,
                       STREAM)
        y_hi = _load_y(x_ptr, up_ptr, row, cols + 8, mask, N, stride_x, stride_up, ACT, UP,
                       FAST, STREAM)
        gs = tl.load(gs_ptr).to(tl.float32)
        amax = tl.maximum(tl.max(tl.abs(y_lo), axis=1), tl.max(tl.abs(y_hi), axis=1))
        sb8, sbf = _block_scale(amax, gs, sf_ptr.dtype.element_ty)
        r, smask = _block_recip(sbf)
        lo = _codes(y_lo, gs, sbf[:, None], r[:, None], smask[:, None])
        hi = _codes(y_hi, gs, sbf[:, None], r[:, None], smask[:, None])
        words = tl.join(_pack_word(lo), _pack_word(hi))
        q_offs = row.to(tl.int64) * (N // 8) + blocks[:, None] * 2 + tl.arange(0, 2)[None, :]
        tl.store(q_ptr + q_offs, words, mask=blocks[:, None] < K)
        tl.store(sf_ptr + _swizzled_offsets(row, blocks, KP4), sb8, mask=blocks < KP)
    else:
        _zero_pad_scales(sf_ptr, row, blocks, M, MP, KP, KP4, PAD_ROWS, BPP)


def _launch(x: torch.Tensor, act: bool, global_scale: torch.Tensor,
            config: Nvfp4Config | None, up: torch.Tensor | None = None,
            activation: str = "silu") -> tuple[torch.Tensor, torch.Tensor]:
    quant_ref.check_model_dtype(x)
    width = x.shape[-1] // 2 if act and up is None else x.shape[-1]
    if width % quant_ref.NVFP4_BLOCK != 0:
        raise ValueError(f"irfuse: NVFP4 needs the last dimension ({width}) to be a multiple "
                         "of 16")
    if global_scale.numel() != 1:
        raise ValueError("irfuse: the NVFP4 global scale must have one element")
    check_device(x, global_scale, *(() if up is None else (up,)))
    x2 = rows_2d(x)
    up2 = rows_2d(up) if up is not None else x2
    rows = x2.shape[0]
    mp, kp = quant_ref.nvfp4_scale_shape(rows, width)
    q = torch.empty((*x.shape[:-1], width // 2), dtype=torch.uint8, device=x.device)
    sf = torch.empty((mp, kp), dtype=quant_ref.NVFP4_SCALE_DTYPE, device=x.device)
    if mp == 0:
        return q, sf
    k = width // quant_ref.NVFP4_BLOCK
    cfg = config or nvfp4_config(rows, width)
    grid = (rows + triton.cdiv(mp - rows, PAD_ROWS), triton.cdiv(kp, cfg.blocks_per_program))
    # The interpreter has no inline PTX: it runs the plain silu (`_silu`).
    fast = act and activation == "silu" and not interpreting()
    kernel, out = (_nvfp4_split_kernel, q.view(torch.int32)) if cfg.split else (_nvfp4_kernel, q)
    kernel[grid](x2, up2, out, sf, global_scale, rows, mp, width, x2.stride(0),
                 up2.stride(0), k, kp, kp // 4, ACT=act_code(activation) if act else 0,
                 UP=up is not None,
                 BPP=cfg.blocks_per_program, PAD_ROWS=PAD_ROWS, FAST=fast,
                 STREAM=cache_hints(cfg.evict)["STREAM"], **pdl_launch(cfg.pdl, x2.device),
                 num_warps=cfg.num_warps)
    return q, sf


def quant_nvfp4(x: torch.Tensor, global_scale: torch.Tensor,
                config: Nvfp4Config | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 of `x`: (packed uint8 [..., N/2], swizzled fp8 block scales [Mp, Kp])."""
    return _launch(x, False, global_scale, config)


def silu_mul_quant_nvfp4(x: torch.Tensor, global_scale: torch.Tensor,
                         up: torch.Tensor | None = None, config: Nvfp4Config | None = None,
                         activation: str = "silu") -> tuple[torch.Tensor, torch.Tensor]:
    """SiLU·Mul (or GeGLU: `activation`) → NVFP4: (packed uint8 [..., d/2], swizzled fp8 block
    scales). `x = [gate | up]`, or, when `up` is given, the gate `x` [:, N] and `up` [:, N], each
    with its own row stride (separate gate/up projections; a column slice of a larger GEMM
    output is read in place)."""
    act_quant_ref.silu_mul_width(x, up)
    if up is not None and up.device != x.device:
        raise ValueError(f"irfuse: SiLU·Mul's up is on {up.device}, the gate on {x.device}")
    return _launch(x, True, global_scale, config, up, activation)
