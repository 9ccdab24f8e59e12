"""Triton kernel for NVFP4 quantization (16-element blocks), alone or fused after SiLU·Mul.

Program (row, block range) handles BPP blocks of one row as a [BPP, 16] tile (16-byte loads);
the codes are reshaped to [BPP, 8, 2] so that the pair sharing a byte is split off and packed
within each thread. Per block:
`sb = fp8(clamp(gs * amax / 6, ±448))`, `q = e2m1(clamp(x * gs / sb, ±6))` rounded to nearest
even in arithmetic (sm90 has no e2m1 conversion instruction; see `_e2m1_code`), two codes per
byte (element 2i low). Block scales go to the swizzled 128×4 layout
(`quant_ref.swizzle_block_scales`); the grid also covers the scale padding (rows up to a multiple
of 128, PAD_ROWS of them per extra program; columns up to a multiple of 4), so the kernel writes
the padding zeros itself (no memset launch). Numerics: `quant_ref.quant_nvfp4`.

The fused form reads `x = [gate | up]` (UP=0), or, with UP=1, the gate from `x` [:, N] and up from
a second tensor [:, N] with its own row stride (separate gate/up projections; a column slice of a
larger GEMM output is read in place).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from irfuse.emit.kernels import act_quant_ref, quant_ref
from irfuse.emit.kernels.norm_quant import Steps, tuned
from irfuse.emit.kernels.triton_support import check_device, next_pow2, rows_2d

PAD_ROWS = 32  # padding rows (of the 128-row scale tiles) zeroed per program


@dataclass(frozen=True)
class Nvfp4Config:
    """Launch shape of `_nvfp4_kernel`: 16-element blocks per program, warps."""

    blocks_per_program: int
    num_warps: int


# Launch shapes that measured fastest on the H200 (the sweep in docs/bench_norm_act_quant.md,
# taken before the e2m1 encoding was rewritten): width -> steps of (from tokens, config).
_NVFP4_TUNED: dict[int, Steps] = {
    14336: ((1, Nvfp4Config(64, 4)), (128, Nvfp4Config(32, 2)), (4096, Nvfp4Config(128, 4))),
    28672: ((1, Nvfp4Config(32, 2)), (16, Nvfp4Config(64, 4)), (128, Nvfp4Config(32, 2)),
            (4096, Nvfp4Config(128, 4))),
}


def nvfp4_config(tokens: int, width: int) -> Nvfp4Config:
    """Default launch shape (widths up to 20000 use the I 14336 steps, wider the I 28672)."""
    cfg = tuned(_NVFP4_TUNED[14336 if width <= 20000 else 28672], tokens)
    blocks = min(cfg.blocks_per_program, next_pow2(width // quant_ref.NVFP4_BLOCK))
    return Nvfp4Config(blocks_per_program=blocks,
                       num_warps=max(1, min(cfg.num_warps, blocks // 16)))


@triton.jit
def _e2m1_code(v):
    """e2m1 code (0..15, int32) of float32 v in [-6, 6], ties to even; sign from the bits.

    The e2m1 grid has step 0.5 below 2, 1 in [2, 4) and 2 in [4, 6], so the magnitude code is
    one round-to-nearest-even of |v| scaled to that step, plus the code of the range's start:
    rint(2a) below 2, rint(a) + 2 in [2, 4), rint(a / 2) + 4 from 4 (the scalings are exact).
    This gives the boundary-counting codes of `quant_ref.e2m1_encode` in a third of the
    instructions (the kernel is compute-bound otherwise).
    """
    a = tl.abs(v)
    scale = tl.where(a < 2.0, 2.0, tl.where(a < 4.0, 1.0, 0.5))
    base = tl.where(a < 2.0, 0.0, tl.where(a < 4.0, 2.0, 4.0))
    # x + 1.5 * 2**23 - 1.5 * 2**23 rounds x (< 2**22) to an integer, nearest even (IEEE).
    rounded = (a * scale + 12582912.0) - 12582912.0
    mag = (rounded + base).to(tl.int32)
    return mag | ((v.to(tl.int32, bitcast=True) >> 28) & 8)


@triton.jit
def _swizzled_offsets(rows, blocks, KP4):
    """Flat offsets of scale (row, block) in the 128x4 tiled layout (broadcasting)."""
    return (((rows // 128) * KP4 + blocks // 4) * 32 + rows % 32) * 16 \
        + ((rows % 128) // 32) * 4 + blocks % 4


@triton.jit(do_not_specialize=["M", "MP"])
def _nvfp4_kernel(
    x_ptr, up_ptr, q_ptr, sf_ptr, gs_ptr, M, MP, N, stride_x, stride_up, K, KP, KP4,
    ACT: tl.constexpr, UP: tl.constexpr, BPP: tl.constexpr, PAD_ROWS: tl.constexpr,
):
    DT = x_ptr.dtype.element_ty
    row = tl.program_id(0)
    blocks = tl.program_id(1) * BPP + tl.arange(0, BPP)
    if row < M:
        sf_offs = _swizzled_offsets(row, blocks, KP4)
        cols = blocks[:, None] * 16 + tl.arange(0, 16)[None, :]
        mask = cols < N
        base = x_ptr + row.to(tl.int64) * stride_x
        a = tl.load(base + cols, mask=mask, other=0.0,
                    eviction_policy="evict_first").to(tl.float32)
        if ACT:
            if UP:
                b = tl.load(up_ptr + row.to(tl.int64) * stride_up + cols, mask=mask, other=0.0,
                            eviction_policy="evict_first").to(tl.float32)
            else:
                b = tl.load(base + N + cols, mask=mask, other=0.0,
                            eviction_policy="evict_first").to(tl.float32)
            act = (a / (1.0 + tl.exp(-a))).to(DT).to(tl.float32)
            y = (act * b).to(DT).to(tl.float32)
        else:
            y = a
        gs = tl.load(gs_ptr).to(tl.float32)
        sb = tl.minimum(tl.maximum(tl.math.div_rn(gs * tl.max(tl.abs(y), axis=1), 6.0), -448.0),
                        448.0)
        sb8 = sb.to(sf_ptr.dtype.element_ty)
        sbf = sb8.to(tl.float32)[:, None]
        safe = tl.where(sbf == 0.0, 1.0, sbf)  # an all-zero block quantizes to zeros
        v = tl.where(sbf == 0.0, 0.0, tl.math.div_rn(y * gs, safe))
        code = _e2m1_code(tl.minimum(tl.maximum(v, -6.0), 6.0))
        # Elements 2i and 2i+1 share byte i: split the pairs off the last axis and pack.
        lo, hi = tl.split(tl.reshape(code, (BPP, 8, 2)))
        packed = (lo | (hi << 4)).to(tl.uint8)
        q_offs = row.to(tl.int64) * (N // 2) + blocks[:, None] * 8 + tl.arange(0, 8)[None, :]
        tl.store(q_ptr + q_offs, packed, mask=blocks[:, None] < K)
        tl.store(sf_ptr + sf_offs, sb8, mask=blocks < KP)
    else:
        # Programs past the real rows zero the scales of PAD_ROWS padding rows each.
        pad = M + (row - M) * PAD_ROWS + tl.arange(0, PAD_ROWS)
        offs = _swizzled_offsets(pad[:, None], blocks[None, :], KP4)
        zeros = tl.zeros([PAD_ROWS, BPP], dtype=tl.float32).to(sf_ptr.dtype.element_ty)
        tl.store(sf_ptr + offs, zeros, mask=(pad[:, None] < MP) & (blocks[None, :] < KP))


def _launch(x: torch.Tensor, act: bool, global_scale: torch.Tensor,
            config: Nvfp4Config | None, up: torch.Tensor | None = None,
            ) -> tuple[torch.Tensor, torch.Tensor]:
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
    _nvfp4_kernel[grid](x2, up2, q, sf, global_scale, rows, mp, width, x2.stride(0),
                        up2.stride(0), k, kp, kp // 4, ACT=act, UP=up is not None,
                        BPP=cfg.blocks_per_program, PAD_ROWS=PAD_ROWS, num_warps=cfg.num_warps)
    return q, sf


def quant_nvfp4(x: torch.Tensor, global_scale: torch.Tensor,
                config: Nvfp4Config | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 of `x`: (packed uint8 [..., N/2], swizzled fp8 block scales [Mp, Kp])."""
    return _launch(x, False, global_scale, config)


def silu_mul_quant_nvfp4(x: torch.Tensor, global_scale: torch.Tensor,
                         up: torch.Tensor | None = None, config: Nvfp4Config | None = None,
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """SiLU·Mul → NVFP4: (packed uint8 [..., d/2], swizzled fp8 block scales); gate `x` and
    `up` apart when `up` is given."""
    act_quant_ref.silu_mul_width(x, up)
    if up is not None and up.device != x.device:
        raise ValueError(f"irfuse: SiLU·Mul's up is on {up.device}, the gate on {x.device}")
    return _launch(x, True, global_scale, config, up)
