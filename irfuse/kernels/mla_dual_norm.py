"""Triton kernel for MLA's paired RMSNorms (q latent and kv latent) in one launch.

The grid is one-dimensional over blocks of ROWS tokens, twice: programs `[0, B)` normalize the q
rows, `[B, 2B)` the kv rows (B = ceil(T / ROWS)). A program holds its rows in registers
(float32 sum of squares), so both norms of a token cost one launch instead of two, and each
input, a strided slice of the fused q_a / kv_a projection, is read in place (a row stride, unit
last stride) rather than copied contiguous first.

Numerics are `mla_dual_norm_ref`'s: the weight product in the model dtype, or in float32 with
`weight_f32` / a weight offset; the sum of squares adds up in another order than torch's, so an
element may differ by an ulp or two of bf16/fp16 (as irfuse's other Triton norms). `dual_config`
picks the launch shape (not measured yet: rows per program so a program holds about 4096
elements); `config=` overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from irfuse.kernels import mla_dual_norm_ref
from irfuse.kernels.triton_support import (
    await_previous_kernel,
    check_device,
    next_pow2,
    pdl_launch,
    rows_2d,
)

MAX_HIDDEN = 65536  # a row must fit in registers


@dataclass(frozen=True)
class DualConfig:
    """Launch shape: token rows per program and warps per program; PDL as the other kernels."""

    rows: int
    num_warps: int
    pdl: bool = True


def dual_config(tokens: int, widest: int) -> DualConfig:
    """Rows per program so a program holds about 4096 elements of the wider norm (not measured:
    the shape of irfuse's measured norm kernels, `norm_pad.pad_config`, at these widths)."""
    block = next_pow2(widest)
    rows = min(next_pow2(max(tokens, 1)), max(1, 4096 // block))
    return DualConfig(rows, max(1, min(8, rows * block // 512)))


@triton.jit
def _norm_rows(x_ptr, stride_x, w_ptr, out_ptr, rows64, rmask, eps, weight_offset,
               H: tl.constexpr, BLOCK: tl.constexpr, WEIGHT_F32: tl.constexpr):
    """RMSNorm of rows `rows64` of x (row stride stride_x) into out [T, H] (contiguous)."""
    DT = x_ptr.dtype.element_ty
    cols = tl.arange(0, BLOCK)
    cmask = cols < H
    mask = rmask[:, None] & cmask[None, :]
    x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask,
                other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=1) / H + eps)
    normed = x * rstd[:, None]
    w = tl.load(w_ptr + cols[None, :], mask=cmask[None, :], other=0.0)
    if WEIGHT_F32:
        y = (normed * (w.to(tl.float32) + weight_offset)).to(DT)
    else:
        y = (normed.to(DT).to(tl.float32) * w.to(DT).to(tl.float32)).to(DT)
    tl.store(out_ptr + rows64[:, None] * H + cols[None, :], y, mask=mask)


@triton.jit(do_not_specialize=["T", "stride_q", "stride_kv"])
def _dual_norm_kernel(
    q_ptr, qw_ptr, kv_ptr, kvw_ptr, q_out_ptr, kv_out_ptr,
    T, stride_q, stride_kv, q_eps, kv_eps, weight_offset,
    HQ: tl.constexpr, HKV: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_KV: tl.constexpr,
    ROWS: tl.constexpr, WEIGHT_F32: tl.constexpr, PDL: tl.constexpr,
):
    nblocks = tl.cdiv(T, ROWS)
    pid = tl.program_id(0)
    await_previous_kernel(PDL)
    block = pid % nblocks
    rows = block * ROWS + tl.arange(0, ROWS)
    rmask = rows < T
    rows64 = rows.to(tl.int64)
    if pid < nblocks:
        _norm_rows(q_ptr, stride_q, qw_ptr, q_out_ptr, rows64, rmask, q_eps, weight_offset,
                   HQ, BLOCK_Q, WEIGHT_F32)
    else:
        _norm_rows(kv_ptr, stride_kv, kvw_ptr, kv_out_ptr, rows64, rmask, kv_eps,
                   weight_offset, HKV, BLOCK_KV, WEIGHT_F32)


def mla_dual_rms_norm(q: torch.Tensor, q_weight: torch.Tensor, kv: torch.Tensor,
                      kv_weight: torch.Tensor, q_eps: float, kv_eps: float,
                      weight_offset: float = 0.0, weight_f32: bool = False,
                      config: DualConfig | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Both norms in one launch: (q_out, kv_out), contiguous, in the input dtype; arguments,
    numerics and errors as `mla_dual_norm_ref.mla_dual_rms_norm`."""
    mla_dual_norm_ref.check_args(q, q_weight, kv, kv_weight)
    hq, hkv = q.shape[-1], kv.shape[-1]
    if max(hq, hkv) > MAX_HIDDEN:
        raise ValueError(f"irfuse: mla_dual_rms_norm: rows over {MAX_HIDDEN} are not supported")
    check_device(q, q_weight, kv, kv_weight)
    q2, kv2 = rows_2d(q), rows_2d(kv)
    tokens = q2.shape[0]
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    kv_out = torch.empty(kv.shape, dtype=kv.dtype, device=kv.device)
    if tokens == 0:
        return q_out, kv_out
    cfg = config or dual_config(tokens, max(hq, hkv))
    grid = (2 * triton.cdiv(tokens, cfg.rows),)
    _dual_norm_kernel[grid](
        q2, q_weight, kv2, kv_weight, q_out, kv_out,
        tokens, q2.stride(0), kv2.stride(0), float(q_eps), float(kv_eps), float(weight_offset),
        HQ=hq, HKV=hkv, BLOCK_Q=next_pow2(hq), BLOCK_KV=next_pow2(hkv), ROWS=cfg.rows,
        WEIGHT_F32=bool(weight_f32) or weight_offset != 0.0,
        num_warps=cfg.num_warps, **pdl_launch(cfg.pdl, q.device),
    )
    return q_out, kv_out
