"""Triton kernel for (residual add +) RMSNorm -> constant pad of the last dim, in one pass.

One program takes ROWS rows of H elements in registers (fp32 accumulation): the residual sum
(stored as `residual_out`), the norm, stored straight into columns `[low, low + H)` of the
padded output, and the pad value into the columns before and after (a separate small tile, so
no norm arithmetic reaches the pad). The padded tensor is written once (GPT-OSS pads hidden 2880
to 3072 before its router GEMM; unfused, the pad re-reads the norm's output).

Numerics are `norm_pad_ref`'s: the residual sum and the pad columns bit for bit, the norm's
columns within two units in the last place in bf16/fp16 (1e-5 relative in fp32), at most 1% of
them off (the sum of squares adds up in another order; docs/numerics.md). Launch shapes come
from `pad_config`, measured on the H200 (docs/benchmarks.md, `benchmarks/bench_act_padding.py`);
`config=` overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from irfuse.kernels import norm_pad_ref, norm_quant_ref
from irfuse.kernels.triton_support import (
    await_previous_kernel,
    check_device,
    next_pow2,
    pdl_launch,
    rows_2d,
)

MAX_HIDDEN = 65536  # the row must fit in registers


@dataclass(frozen=True)
class PadConfig:
    """Launch shape: rows per program, warps per program, programmatic dependent launch
    (`triton_support.pdl_launch`: off where the device lacks it)."""

    rows: int
    num_warps: int
    pdl: bool = True


def pad_config(tokens: int, hidden: int) -> PadConfig:
    """Default launch shape for `tokens` rows of `hidden` elements: one row a program, 8 warps
    for rows of 2049-4096 elements (2880, 3000: 4 warps measured the same up to 256 tokens),
    16 for rows up to 8192 (5760) except from 16 to 4095 tokens, where 8 measured faster (up to
    13%); small rows (tests, small models, not measured) share a program."""
    block = next_pow2(hidden)
    if block >= 8192 and 16 <= tokens < 4096:
        return PadConfig(1, 8)
    if block >= 2048:
        return PadConfig(1, max(4, min(16, block // 512)))
    rows = min(next_pow2(max(tokens, 1)), max(1, 4096 // block))
    return PadConfig(rows, max(1, min(8, rows * block // 512)))


@triton.jit
def _weighted(normed, w, weight_offset, DT: tl.constexpr, WEIGHT_F32: tl.constexpr,
              HAS_OFFSET: tl.constexpr):
    """The weight product, rounded to the model dtype DT: in DT (`normed.to(DT) * w`), or with
    WEIGHT_F32 in float32 (`normed * w`, plus the offset with HAS_OFFSET, rounded once)."""
    if WEIGHT_F32:
        w32 = w.to(tl.float32)
        if HAS_OFFSET:
            w32 = w32 + weight_offset
        y = (normed * w32).to(DT)
    else:
        y = (normed.to(DT).to(tl.float32) * w.to(DT).to(tl.float32)).to(DT)
    return y


@triton.jit(do_not_specialize=["T"])
def _norm_pad_kernel(
    x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr,
    T, eps, weight_offset, pad_value,
    H: tl.constexpr, W: tl.constexpr, LOW: tl.constexpr, HIGH: tl.constexpr,
    STRIDE_X: tl.constexpr, STRIDE_RES: tl.constexpr, HAS_RES: tl.constexpr,
    ROUND_SUM: tl.constexpr, WEIGHT_F32: tl.constexpr, HAS_OFFSET: tl.constexpr,
    ROWS: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr, PDL: tl.constexpr,
):
    """Rows [pid * ROWS, pid * ROWS + ROWS) of x [T, H] (row strides STRIDE_X, STRIDE_RES) into
    out [T, W] (W = LOW + H + HIGH, contiguous) and res_out [T, H] (contiguous).

    The sizes and strides are constexprs (a model has one or two hidden sizes): Triton then
    knows the rows' alignment and the masks' constancy from their values, so a hidden size that
    is a multiple of 8 but not of 16 (3000) still gets 16-byte loads and stores; as runtime
    integers only multiples of 16 do (measured 2.2x slower at H 3000 on the H200)."""
    DT = x_ptr.dtype.element_ty
    await_previous_kernel(PDL)
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < T
    rows64 = rows.to(tl.int64)
    cols = tl.arange(0, BLOCK_H)
    cmask = cols < H
    mask = rmask[:, None] & cmask[None, :]
    x = tl.load(x_ptr + rows64[:, None] * STRIDE_X + cols[None, :], mask=mask,
                other=0.0).to(tl.float32)
    if HAS_RES:
        r = tl.load(res_ptr + rows64[:, None] * STRIDE_RES + cols[None, :], mask=mask,
                    other=0.0).to(tl.float32)
        x = x + r
        tl.store(res_out_ptr + rows64[:, None] * H + cols[None, :], x.to(DT), mask=mask)
        if ROUND_SUM:
            x = x.to(DT).to(tl.float32)
    w = tl.load(w_ptr + cols[None, :], mask=cmask[None, :], other=0.0)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=1) / H + eps)
    y = _weighted(x * rstd[:, None], w, weight_offset, DT, WEIGHT_F32, HAS_OFFSET)
    out_row = out_ptr + rows64[:, None] * W
    tl.store(out_row + LOW + cols[None, :], y, mask=mask)
    pcols = tl.arange(0, BLOCK_P)[None, :]
    fill = tl.full([ROWS, BLOCK_P], pad_value, tl.float32).to(DT)
    tl.store(out_row + LOW + H + pcols, fill, mask=rmask[:, None] & (pcols < HIGH))
    tl.store(out_row + pcols, fill, mask=rmask[:, None] & (pcols < LOW))


def _launch(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float,
            low: int, high: int, value: float, weight_offset: float, round_sum: bool,
            weight_f32: bool, config: PadConfig | None,
            ) -> tuple[torch.Tensor, torch.Tensor | None]:
    hidden = x.shape[-1]
    if hidden > MAX_HIDDEN:
        raise ValueError(f"irfuse: hidden size {hidden} exceeds the kernel's {MAX_HIDDEN}")
    check_device(x, weight, *(() if residual is None else (residual,)))
    x2 = rows_2d(x)
    r2 = rows_2d(residual) if residual is not None else None
    tokens = x2.shape[0]
    width = low + hidden + high
    out = torch.empty(norm_pad_ref.padded_shape(x.shape, low, high), dtype=x.dtype,
                      device=x.device)
    res_out = torch.empty(x.shape, dtype=x.dtype, device=x.device) if r2 is not None else None
    if tokens == 0:
        return out, res_out
    cfg = config or pad_config(tokens, hidden)
    grid = (triton.cdiv(tokens, cfg.rows),)
    _norm_pad_kernel[grid](
        x2, r2 if r2 is not None else x2, weight, out, res_out if res_out is not None else out,
        tokens, eps, weight_offset, value, H=hidden, W=width, LOW=low, HIGH=high,
        STRIDE_X=x2.stride(0), STRIDE_RES=r2.stride(0) if r2 is not None else 0,
        HAS_RES=r2 is not None, ROUND_SUM=round_sum, WEIGHT_F32=weight_f32 or weight_offset != 0,
        HAS_OFFSET=weight_offset != 0,
        ROWS=cfg.rows, BLOCK_H=next_pow2(hidden), BLOCK_P=next_pow2(max(low, high, 1)),
        num_warps=cfg.num_warps, **pdl_launch(cfg.pdl, x.device),
    )
    return out, res_out


def add_rms_norm_pad(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                     *, pad_multiple: int | None = None, low: int = 0, high: int | None = None,
                     value: float = 0.0, weight_offset: float = 0.0, round_sum: bool = False,
                     weight_f32: bool = False, config: PadConfig | None = None,
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual add + RMSNorm, padded: (out [..., low + H + high], residual_out [..., H]), both
    in x's dtype and contiguous; arguments and errors as `norm_pad_ref.add_rms_norm_pad`."""
    norm_quant_ref.check_norm_args(x, weight, residual)
    norm_pad_ref.check_pad_value(value)
    low, high = norm_pad_ref.pad_amounts(x.shape[-1], pad_multiple=pad_multiple, low=low,
                                         high=high)
    out, res_out = _launch(x, residual, weight, eps, low, high, value, weight_offset, round_sum,
                           weight_f32, config)
    assert res_out is not None
    return out, res_out


def rms_norm_pad(x: torch.Tensor, weight: torch.Tensor, eps: float, *,
                 pad_multiple: int | None = None, low: int = 0, high: int | None = None,
                 value: float = 0.0, weight_offset: float = 0.0, weight_f32: bool = False,
                 config: PadConfig | None = None) -> torch.Tensor:
    """RMSNorm, padded: out [..., low + H + high] in x's dtype, contiguous; arguments and errors
    as `norm_pad_ref.rms_norm_pad`."""
    norm_quant_ref.check_norm_args(x, weight, None)
    norm_pad_ref.check_pad_value(value)
    low, high = norm_pad_ref.pad_amounts(x.shape[-1], pad_multiple=pad_multiple, low=low,
                                         high=high)
    out, _ = _launch(x, None, weight, eps, low, high, value, weight_offset, False, weight_f32,
                     config)
    return out
