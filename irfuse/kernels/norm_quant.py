"""Triton kernels for RMSNorm, residual add + RMSNorm, and their fused FP8 quantization.

Two kernels, both one pass over the row held in registers (read once, fp32 accumulation):
- `_norm_rows_kernel`: a [ROWS, BLOCK_H] tile, ROWS rows per program. Optional residual add
  (writes residual_out), optional RMSNorm (off: a plain quantizer), then: no quant (writes y),
  static FP8 with up to four scales (one output each: a norm feeding several quants is one
  kernel), or dynamic per-token FP8 (optional scale upper bound).
- `_norm_group_kernel`: one row per program, tiled [BLOCK_G, GROUP] so that each tile row is one
  quantization group; per-group FP8 with row- or column-major scales and optional UE8M0.

Numerics are those of `norm_quant_ref` / `quant_ref` (`docs/numerics.md`): the divisions that
define a quantized value use `div_rn`, so they round as torch's do, and a model's spellings are
constexprs (`DIVIDE`, `RECIPROCAL`: `static_scaled`, `_group_quant_store`; `ROUND_SUM`:
`_residual_sum`). Launch shapes come from `row_config` / `group_config` (docs/kernel_study.md);
every launcher takes `config=` to override them; `RowConfig` says what each field changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from irfuse.kernels import quant_ref
from irfuse.kernels.triton_support import (
    await_previous_kernel,
    cache_hints,
    check_device,
    next_pow2,
    pdl_launch,
    rows_2d,
)

QUANT_NONE = 0
QUANT_STATIC = 1
QUANT_PER_TOKEN = 2
MAX_STATIC_OUTPUTS = 4  # static quants fused into one launch; more are chunked
MAX_HIDDEN = 65536  # the row must fit in registers


@dataclass(frozen=True)
class RowConfig:
    """Launch shape of `_norm_rows_kernel`: rows per program, warps per program, and:

    - `fast_div` (per-token): divide by the row's scale with `div_rn_by` (the correctly rounded
      reciprocal and one FMA correction: the same bits as `div_rn`, a third of the instructions
      and no per-element branch; these kernels are close to issue-bound on the H200).
    - `early`: load the weight, the static scales and the scale bound with the row, before the
      reduction. Loads written after it stay behind its barrier, so otherwise every program
      waits one more L2 round trip between its reduction and its stores.
    - `evict`: stream the row with `evict_first` and keep the weight with `evict_last`; off, the
      loads carry no cache hints (faster where the working set streams from memory).
    - `vec` > 0: the row's offsets declared contiguous in runs of `vec` (`tl.max_contiguous`), so
      every load and store of the row takes one register layout of `vec` elements a thread.
      Without it Triton gives the FP8 stores 16 elements a thread and the bf16 residual store 8,
      and the row crosses between the two layouts through shared memory, two barriers each
      (`benchmarks/sass_rows.py`). Fewer elements a thread change the order of the sum of
      squares: within the fused-kernel tolerance, not bit for bit the shape without `vec`.
    - `pdl`: programmatic dependent launch (`triton_support.pdl_launch`); `IRFUSE_PDL`
      overrides it; off where the device lacks it.
    """

    rows: int
    num_warps: int
    fast_div: bool = False
    early: bool = False
    evict: bool = True
    vec: int = 0
    pdl: bool = False


@dataclass(frozen=True)
class GroupConfig:
    """Launch shape of the per-group kernel: warps per program; `fast_div`, `early` (the weight
    loaded with the row), `evict`, `vec` and `pdl` as in `RowConfig`."""

    num_warps: int
    fast_div: bool = False
    early: bool = False
    evict: bool = True
    vec: int = 0
    pdl: bool = False


Steps = tuple[tuple[int, object], ...]


def tuned(steps: Steps, tokens: int) -> object:
    """The config of the last step whose token count is <= `tokens` (steps ascend)."""
    chosen = steps[0][1]
    for from_tokens, cfg in steps:
        if tokens >= from_tokens:
            chosen = cfg
    return chosen


# Launch shapes that measured fastest on the H200 (medians of interleaved rounds;
# docs/kernel_study.md), as (kind, hidden) -> steps of (from this many tokens, config). A hidden
# size of 4096 or more uses the nearer measured one (4096 up to 6144, else 8192); smaller ones
# the rule in `row_config`. Unmeasured kinds borrow: a plain norm or a quantizer alone uses
# "static", a residual add without quant "residual_static". `early` measured as fast or faster
# everywhere; `vec` 3-13% faster up to 1024 tokens and at 16384 for the plain norm, a tie
# elsewhere; cache hints help only where the working set stays in the 60 MB L2 and cost 1-6%
# where it streams from memory; PDL faster or the same in every cell (same bits).
_NO_HINTS = {"early": True, "evict": False, "pdl": True}
_VEC = {"early": True, "vec": 8, "pdl": True}
_VEC_NO_HINTS = {**_NO_HINTS, "vec": 8}
_ROW_TUNED: dict[tuple[str, int], Steps] = {
    ("residual_static", 4096): ((1, RowConfig(1, 8, **_VEC_NO_HINTS)),
                                (1024, RowConfig(1, 4, **_VEC_NO_HINTS)),
                                (4096, RowConfig(1, 16, **_VEC_NO_HINTS))),
    ("residual_static", 8192): ((1, RowConfig(1, 16, **_VEC_NO_HINTS)),
                                (1024, RowConfig(1, 16, **_VEC)),
                                (4096, RowConfig(1, 16, **_VEC_NO_HINTS))),
    ("static", 4096): ((1, RowConfig(1, 8, **_VEC_NO_HINTS)), (1024, RowConfig(1, 4, pdl=True)),
                       (4096, RowConfig(1, 4, **_VEC)),
                       (16384, RowConfig(1, 4, **_VEC_NO_HINTS))),
    ("static", 8192): ((1, RowConfig(1, 8, **_VEC_NO_HINTS)), (4096, RowConfig(1, 8, pdl=True)),
                       (16384, RowConfig(1, 8, **_VEC_NO_HINTS))),
    # `fast_div` gives the same bits as the division and measured faster at every size.
    ("residual_per_token", 4096): ((1, RowConfig(1, 8, fast_div=True, **_VEC)),
                                   (1024, RowConfig(1, 8, fast_div=True, **_VEC_NO_HINTS))),
    ("residual_per_token", 8192): ((1, RowConfig(1, 16, fast_div=True, **_VEC)),
                                   (1024, RowConfig(1, 8, fast_div=True, **_VEC)),
                                   (4096, RowConfig(1, 8, fast_div=True, **_VEC_NO_HINTS)),
                                   (16384, RowConfig(1, 8, fast_div=True, **_NO_HINTS))),
}
_GROUP_TUNED: dict[int, Steps] = {
    4096: ((1, GroupConfig(8, fast_div=True, **_VEC_NO_HINTS)),
           (4096, GroupConfig(8, fast_div=True, **_NO_HINTS))),
    8192: ((1, GroupConfig(16, fast_div=True, **_VEC_NO_HINTS)),
           (1024, GroupConfig(8, fast_div=True, **_VEC)),
           (4096, GroupConfig(16, fast_div=True, **_NO_HINTS))),
}


def _bucket(hidden: int) -> int:
    return 4096 if hidden <= 6144 else 8192


def row_config(tokens: int, hidden: int, residual: bool = True,
               quant: int = QUANT_STATIC) -> RowConfig:
    """Default launch shape of `_norm_rows_kernel` for `tokens` rows of `hidden` elements."""
    block = next_pow2(hidden)
    if block >= 4096:
        kind = ("residual_per_token" if residual and quant == QUANT_PER_TOKEN
                else "residual_static" if residual else "static")
        return tuned(_ROW_TUNED[(kind, _bucket(hidden))], tokens)
    # Small rows (tests, small models; not measured): several rows per program, ~16 elements a
    # thread, PDL as in every measured shape.
    rows = min(next_pow2(tokens), max(1, 4096 // block))
    return RowConfig(rows=rows, num_warps=max(1, min(8, rows * block // 512)), pdl=True)


def group_config(tokens: int, hidden: int) -> GroupConfig:
    """Default launch shape of the per-group kernel (one row per program); below hidden 4096
    (not measured) PDL as in every measured shape."""
    if hidden >= 4096:
        return tuned(_GROUP_TUNED[_bucket(hidden)], tokens)
    return GroupConfig(num_warps=max(1, min(8, next_pow2(hidden) // 512)), pdl=True)


@triton.jit
def _apply_weight(normed, w, weight_offset, x_ptr, WEIGHT_F32: tl.constexpr,
                  HAS_OFFSET: tl.constexpr):
    """RMSNorm's weight product, rounded to the model dtype (x's), returned as float32: with
    WEIGHT_F32 the float32 norm times the float32 weight (plus the offset with HAS_OFFSET:
    Gemma's `1 + w`), rounded once; else the rounded norm times the weight in the model dtype."""
    DT = x_ptr.dtype.element_ty
    if WEIGHT_F32:
        w32 = w.to(tl.float32)
        if HAS_OFFSET:
            w32 = w32 + weight_offset
        y = (normed * w32).to(DT)
    else:
        y = (normed.to(DT).to(tl.float32) * w.to(DT).to(tl.float32)).to(DT)
    return y.to(tl.float32)


@triton.jit
def _residual_sum(x, r, x_ptr, ROUND_SUM: tl.constexpr):
    """x + r in float32; with ROUND_SUM rounded to the model dtype (x's) first, as a model that
    adds in that dtype feeds the sum to its norm."""
    total = x + r
    if ROUND_SUM:
        total = total.to(x_ptr.dtype.element_ty).to(tl.float32)
    return total


@triton.jit
def static_scaled(y, s, DIVIDE: tl.constexpr):
    """y scaled by a static scale s (float32): `y / s` with DIVIDE, else `y * (1 / s)`, each
    rounded as torch rounds it."""
    if DIVIDE:
        scaled = tl.math.div_rn(y, s)
    else:
        scaled = y * tl.math.div_rn(1.0, s)
    return scaled


@triton.jit
def _store_fp8_static(y, q_ptr, s, offs, mask, FP8_MAX: tl.constexpr, DIVIDE: tl.constexpr):
    scaled = static_scaled(y, s, DIVIDE)
    v = tl.minimum(tl.maximum(scaled, -FP8_MAX), FP8_MAX)
    tl.store(q_ptr + offs, v.to(q_ptr.dtype.element_ty), mask=mask)


@triton.jit
def group_scales(amax, FP8_MAX: tl.constexpr, MIN_SCALE: tl.constexpr, UE8M0: tl.constexpr):
    """Per-group scales from group amaxes (UE8M0: round up to a power of two on the bits)."""
    s = tl.math.div_rn(tl.maximum(amax, 1e-10), FP8_MAX)
    if UE8M0:
        bits = s.to(tl.int32, bitcast=True)
        exp_bits = bits & 0x7F800000
        exp_bits = tl.where((bits & 0x007FFFFF) != 0, exp_bits + 0x00800000, exp_bits)
        s = exp_bits.to(tl.float32, bitcast=True)
    return tl.maximum(s, MIN_SCALE)


@triton.jit
def div_rn_by(y, s, inv, BOUNDED: tl.constexpr):
    """`div_rn(y, s)` for a divisor s > 0 shared by many y, given `inv = div_rn(1, s)` computed
    once.

    q0 = y * inv is within an ulp of y / s; the remainder, taken as t = q0 * s - y, is exact in
    one FMA, and q0 - t * inv rounds to the correctly rounded quotient (Markstein's theorem; the
    same step the hardware division's fast path takes, which also recomputes the reciprocal and
    branches per element). Three instructions instead of about ten (the negations are operand
    modifiers). Exact while s is normal (the dynamic scales are at least MIN_SCALE) and the
    remainder does not underflow (|y| above about 2^-100, whose quotients quantize to zero
    either way). The remainder's sign convention keeps y = -0 at -0 (y - q0 * s would give +0).

    BOUNDED: the scale may be smaller than the amax of the values it divides (a per-token scale
    under an upper bound), so an infinite y can meet a finite s; where the correction gives NaN
    the plain product is returned, which is what `y / s` gives. Otherwise s comes from the amax
    of these very values, so only an infinite s meets an infinite y, and s is clamped to the
    largest float for the correction: an infinite s then gives y's signed zero (NaN for an
    infinite y) with no per-element select.
    """
    q0 = y * inv
    if BOUNDED:
        q = tl.fma(-tl.fma(q0, s, -y), inv, q0)
        q = tl.where(q == q, q, q0)
    else:
        q = tl.fma(-tl.fma(q0, tl.minimum(s, 3.4028234663852886e38), -y), inv, q0)
    return q


@triton.jit
def _row_scalars(s0_ptr, s1_ptr, s2_ptr, s3_ptr, ub_ptr, QUANT: tl.constexpr,
                 NUM_OUT: tl.constexpr, HAS_UB: tl.constexpr):
    """The scalars the row kernels' tail reads, as float32: up to four static scales (QUANT 1)
    and the per-token scale bound (QUANT 2 with HAS_UB); 1.0 where unused."""
    s0 = 1.0
    s1 = 1.0
    s2 = 1.0
    s3 = 1.0
    ub = 1.0
    if QUANT == 1:
        s0 = tl.load(s0_ptr).to(tl.float32)
        if NUM_OUT > 1:
            s1 = tl.load(s1_ptr).to(tl.float32)
        if NUM_OUT > 2:
            s2 = tl.load(s2_ptr).to(tl.float32)
        if NUM_OUT > 3:
            s3 = tl.load(s3_ptr).to(tl.float32)
    if QUANT == 2 and HAS_UB:
        ub = tl.load(ub_ptr).to(tl.float32)
    return s0, s1, s2, s3, ub


@triton.jit
def _quant_store_rows(y, y_ptr, q0_ptr, q1_ptr, q2_ptr, q3_ptr, s0, s1, s2, s3, s0_ptr, ub,
                      rows64, rmask, out_offs, mask, QUANT: tl.constexpr,
                      NUM_OUT: tl.constexpr, HAS_UB: tl.constexpr, FP8_MAX: tl.constexpr,
                      MIN_SCALE: tl.constexpr, DIVIDE: tl.constexpr, FAST_DIV: tl.constexpr,
                      RECIPROCAL: tl.constexpr = False):
    """The tail of the row kernels: store y [ROWS, BLOCK_H] (float32) as the model dtype, as up
    to four static FP8 outputs (scales s0..s3), or as per-token FP8 (bound ub) with its scales
    (written to s0_ptr); RECIPROCAL: per-token scales by `y * (1 / s)`."""
    if QUANT == 0:
        tl.store(y_ptr + out_offs, y.to(y_ptr.dtype.element_ty), mask=mask)
    elif QUANT == 1:
        _store_fp8_static(y, q0_ptr, s0, out_offs, mask, FP8_MAX, DIVIDE)
        if NUM_OUT > 1:
            _store_fp8_static(y, q1_ptr, s1, out_offs, mask, FP8_MAX, DIVIDE)
        if NUM_OUT > 2:
            _store_fp8_static(y, q2_ptr, s2, out_offs, mask, FP8_MAX, DIVIDE)
        if NUM_OUT > 3:
            _store_fp8_static(y, q3_ptr, s3, out_offs, mask, FP8_MAX, DIVIDE)
    else:
        amax = tl.max(tl.abs(y), axis=1)
        if HAS_UB:
            amax = tl.minimum(amax, ub)
        s = tl.maximum(tl.math.div_rn(amax, FP8_MAX), MIN_SCALE)
        if RECIPROCAL:
            scaled = y * tl.math.div_rn(1.0, s)[:, None]
        elif FAST_DIV:
            scaled = div_rn_by(y, s[:, None], tl.math.div_rn(1.0, s)[:, None], HAS_UB)
        else:
            scaled = tl.math.div_rn(y, s[:, None])
        v = tl.minimum(tl.maximum(scaled, -FP8_MAX), FP8_MAX)
        tl.store(q0_ptr + out_offs, v.to(q0_ptr.dtype.element_ty), mask=mask)
        tl.store(s0_ptr + rows64, s, mask=rmask)


@triton.jit(do_not_specialize=["T"])
def _norm_rows_kernel(
    x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr,
    q0_ptr, q1_ptr, q2_ptr, q3_ptr, s0_ptr, s1_ptr, s2_ptr, s3_ptr, ub_ptr,
    T, H, stride_x, stride_res, eps, weight_offset,
    HAS_RES: tl.constexpr, NORM: tl.constexpr, WEIGHT_F32: tl.constexpr,
    HAS_OFFSET: tl.constexpr, QUANT: tl.constexpr,
    NUM_OUT: tl.constexpr, HAS_UB: tl.constexpr, FP8_MAX: tl.constexpr,
    MIN_SCALE: tl.constexpr, ROWS: tl.constexpr, BLOCK_H: tl.constexpr, DIVIDE: tl.constexpr,
    ROUND_SUM: tl.constexpr, FAST_DIV: tl.constexpr, EARLY: tl.constexpr = False,
    STREAM: tl.constexpr = "evict_first", KEEP: tl.constexpr = "evict_last",
    VEC: tl.constexpr = 0, PDL: tl.constexpr = False, RECIPROCAL: tl.constexpr = False,
):
    """ROWS rows per program: (residual add +) norm and the quant stores. STREAM / KEEP: the
    cache hints of the row's and the weight's loads ("" for none); EARLY: the weight and the
    scalars loaded with the row (`RowConfig.early`); VEC > 0: the row's offsets declared
    contiguous in runs of VEC (`RowConfig.vec`); PDL: launched with programmatic dependent
    launch."""
    await_previous_kernel(PDL)
    DT = x_ptr.dtype.element_ty
    cols = tl.arange(0, BLOCK_H)
    if VEC > 0:
        cols = tl.max_contiguous(cols, VEC)
    cmask = cols < H
    w = 0.0
    s0, s1, s2, s3, ub = 1.0, 1.0, 1.0, 1.0, 1.0
    if EARLY:
        s0, s1, s2, s3, ub = _row_scalars(s0_ptr, s1_ptr, s2_ptr, s3_ptr, ub_ptr, QUANT,
                                          NUM_OUT, HAS_UB)
        if NORM:  # [1, BLOCK_H], the tile's rank: a 1-D load got a layout of its own
            w = tl.load(w_ptr + cols[None, :], mask=cmask[None, :], other=0.0,
                        eviction_policy=KEEP)
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < T
    mask = rmask[:, None] & cmask[None, :]
    rows64 = rows.to(tl.int64)
    out_offs = rows64[:, None] * H + cols[None, :]
    x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0,
                eviction_policy=STREAM).to(tl.float32)
    if HAS_RES:
        r = tl.load(res_ptr + rows64[:, None] * stride_res + cols[None, :], mask=mask,
                    other=0.0, eviction_policy=STREAM).to(tl.float32)
        x = _residual_sum(x, r, x_ptr, ROUND_SUM)
        tl.store(res_out_ptr + out_offs, x.to(DT), mask=mask)
    if NORM:
        rstd = tl.math.rsqrt(tl.sum(x * x, axis=1) / H + eps)
        if not EARLY:
            w = tl.load(w_ptr + cols[None, :], mask=cmask[None, :], other=0.0,
                        eviction_policy=KEEP)
        y = _apply_weight(x * rstd[:, None], w, weight_offset, x_ptr, WEIGHT_F32, HAS_OFFSET)
    else:
        y = x
    if not EARLY:
        s0, s1, s2, s3, ub = _row_scalars(s0_ptr, s1_ptr, s2_ptr, s3_ptr, ub_ptr, QUANT,
                                          NUM_OUT, HAS_UB)
    _quant_store_rows(y, y_ptr, q0_ptr, q1_ptr, q2_ptr, q3_ptr, s0, s1, s2, s3, s0_ptr, ub,
                      rows64, rmask, out_offs, mask, QUANT, NUM_OUT, HAS_UB, FP8_MAX,
                      MIN_SCALE, DIVIDE, FAST_DIV, RECIPROCAL)


@triton.jit(do_not_specialize=["T"])
def _norm_group_kernel(
    x_ptr, res_ptr, w_ptr, res_out_ptr, q_ptr, s_ptr,
    T, H, stride_x, stride_res, stride_s_row, stride_s_group, eps, weight_offset,
    HAS_RES: tl.constexpr, WEIGHT_F32: tl.constexpr, HAS_OFFSET: tl.constexpr,
    UE8M0: tl.constexpr,
    FP8_MAX: tl.constexpr, MIN_SCALE: tl.constexpr, BLOCK_G: tl.constexpr, GROUP: tl.constexpr,
    ROUND_SUM: tl.constexpr, FAST_DIV: tl.constexpr, EARLY: tl.constexpr = False,
    STREAM: tl.constexpr = "evict_first", KEEP: tl.constexpr = "evict_last",
    VEC: tl.constexpr = 0, PDL: tl.constexpr = False, RECIPROCAL: tl.constexpr = False,
):
    """One row per program, tiled [BLOCK_G, GROUP]: (residual add +) norm and the per-group
    quant; EARLY, STREAM / KEEP, VEC, PDL and RECIPROCAL as in `_norm_rows_kernel`."""
    await_previous_kernel(PDL)
    DT = x_ptr.dtype.element_ty
    groups = tl.arange(0, BLOCK_G)
    cols = groups[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    if VEC > 0:
        cols = tl.max_contiguous(cols, [1, VEC])
    mask = cols < H
    w = 0.0
    if EARLY:
        w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy=KEEP)
    row = tl.program_id(0).to(tl.int64)
    out_offs = row * H + cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0,
                eviction_policy=STREAM).to(tl.float32)
    if HAS_RES:
        r = tl.load(res_ptr + row * stride_res + cols, mask=mask, other=0.0,
                    eviction_policy=STREAM).to(tl.float32)
        x = _residual_sum(x, r, x_ptr, ROUND_SUM)
        tl.store(res_out_ptr + out_offs, x.to(DT), mask=mask)
    rstd = tl.math.rsqrt(tl.sum(tl.sum(x * x, axis=1), axis=0) / H + eps)
    if not EARLY:
        w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy=KEEP)
    y = _apply_weight(x * rstd, w, weight_offset, x_ptr, WEIGHT_F32, HAS_OFFSET)
    _group_quant_store(y, q_ptr, s_ptr, row, groups, out_offs, mask, H, stride_s_row,
                       stride_s_group, FP8_MAX, MIN_SCALE, UE8M0, GROUP, FAST_DIV, RECIPROCAL)


@triton.jit
def _group_quant_store(y, q_ptr, s_ptr, row, groups, out_offs, mask, H, stride_s_row,
                       stride_s_group, FP8_MAX: tl.constexpr, MIN_SCALE: tl.constexpr,
                       UE8M0: tl.constexpr, GROUP: tl.constexpr, FAST_DIV: tl.constexpr,
                       RECIPROCAL: tl.constexpr = False):
    """Per-group FP8 of one row's y [BLOCK_G, GROUP] (float32): codes and group scales
    (RECIPROCAL: `y * (1 / s)`, else `y / s`)."""
    s = group_scales(tl.max(tl.abs(y), axis=1), FP8_MAX, MIN_SCALE, UE8M0)
    if RECIPROCAL:
        scaled = y * tl.math.div_rn(1.0, s)[:, None]
    elif FAST_DIV:
        scaled = div_rn_by(y, s[:, None], tl.math.div_rn(1.0, s)[:, None], False)
    else:
        scaled = tl.math.div_rn(y, s[:, None])
    v = tl.minimum(tl.maximum(scaled, -FP8_MAX), FP8_MAX)
    tl.store(q_ptr + out_offs, v.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row * stride_s_row + groups * stride_s_group, s,
             mask=groups * GROUP < H)


# ---------------------------------------------------------------------------------------------
# Launchers


def _prepare(x: torch.Tensor, weight: torch.Tensor | None,
             residual: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    quant_ref.check_model_dtype(x)
    hidden = x.shape[-1]
    if hidden > MAX_HIDDEN:
        raise ValueError(f"irfuse: hidden size {hidden} exceeds the kernels' {MAX_HIDDEN}")
    if weight is not None and weight.shape != (hidden,):
        raise ValueError(f"irfuse: RMSNorm weight shape {tuple(weight.shape)} does not match "
                         f"the hidden size {hidden}")
    if residual is not None and (residual.shape != x.shape or residual.dtype != x.dtype):
        raise ValueError("irfuse: the residual must have the input's shape and dtype")
    check_device(x, *(t for t in (weight, residual) if t is not None))
    x2 = rows_2d(x)
    return x2, (rows_2d(residual) if residual is not None else None)


def _launch_rows(x: torch.Tensor, weight: torch.Tensor | None, residual: torch.Tensor | None,
                 eps: float, weight_offset: float, quant: int,
                 qs: Sequence[torch.Tensor], scales: Sequence[torch.Tensor],
                 y: torch.Tensor | None, scale_ub: torch.Tensor | None,
                 out_dtype: torch.dtype, config: RowConfig | None, divide: bool = False,
                 round_sum: bool = False, reciprocal: bool = False, weight_f32: bool = False,
                 ) -> torch.Tensor | None:
    """Launch `_norm_rows_kernel` once; returns residual_out (or None). `divide`: static
    quants scale by `y / s` (else `y * (1 / s)`); `reciprocal`: the per-token quant scales by
    `y * (1 / s)` (else `y / s`); `round_sum`: the norm reads the residual sum rounded to x's
    dtype (else the float32 sum); `weight_f32`: the weight product in float32, rounded once (a
    weight offset implies it)."""
    x2, r2 = _prepare(x, weight, residual)
    tokens, hidden = x2.shape
    res_out = torch.empty_like(x) if residual is not None else None
    if tokens == 0:
        return res_out
    cfg = config or row_config(tokens, hidden, residual is not None, quant)
    dummy = x2
    q = [*qs, *([dummy] * (MAX_STATIC_OUTPUTS - len(qs)))]
    s = [*scales, *([dummy] * (MAX_STATIC_OUTPUTS - len(scales)))]
    fp8 = out_dtype if quant != QUANT_NONE else torch.float8_e4m3fn
    _norm_rows_kernel[(triton.cdiv(tokens, cfg.rows),)](
        x2, r2 if r2 is not None else dummy, weight if weight is not None else dummy,
        y if y is not None else dummy, res_out if res_out is not None else dummy,
        *q, *s, scale_ub if scale_ub is not None else dummy,
        tokens, hidden, x2.stride(0), r2.stride(0) if r2 is not None else 0,
        float(eps), float(weight_offset),
        HAS_RES=residual is not None, NORM=weight is not None,
        WEIGHT_F32=weight_f32 or weight_offset != 0.0, HAS_OFFSET=weight_offset != 0.0,
        QUANT=quant, NUM_OUT=max(1, len(qs)), HAS_UB=scale_ub is not None,
        FP8_MAX=quant_ref.fp8_max(fp8), MIN_SCALE=quant_ref.fp8_min_scale(fp8),
        ROWS=cfg.rows, BLOCK_H=next_pow2(hidden), DIVIDE=divide and quant == QUANT_STATIC,
        ROUND_SUM=round_sum and residual is not None,
        FAST_DIV=cfg.fast_div and quant == QUANT_PER_TOKEN, EARLY=cfg.early,
        **cache_hints(cfg.evict), VEC=cfg.vec, **pdl_launch(cfg.pdl, x2.device),
        RECIPROCAL=reciprocal and quant == QUANT_PER_TOKEN, num_warps=cfg.num_warps,
    )
    return res_out


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, weight_offset: float = 0.0,
             residual: torch.Tensor | None = None, config: RowConfig | None = None,
             round_sum: bool = False, weight_f32: bool = False,
             ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(Residual add +) RMSNorm: returns (y, residual_out or None). With `round_sum` the norm
    reads the sum rounded to x's dtype, with `weight_f32` the weight product is in float32
    (`norm_quant_ref.rms_norm`)."""
    y = torch.empty_like(x)
    res_out = _launch_rows(x, weight, residual, eps, weight_offset, QUANT_NONE, (), (), y,
                           None, x.dtype, config, round_sum=round_sum, weight_f32=weight_f32)
    return y, res_out


def rms_norm_quant_fp8_static(x: torch.Tensor, weight: torch.Tensor,
                              scales: Sequence[torch.Tensor], eps: float, weight_offset: float,
                              out_dtype: torch.dtype, residual: torch.Tensor | None = None,
                              config: RowConfig | None = None, divide: bool = False,
                              round_sum: bool = False, weight_f32: bool = False,
                              ) -> tuple[list[torch.Tensor], torch.Tensor | None]:
    """(Residual add +) RMSNorm → static FP8, one output per scale: (qs, residual_out).
    With `divide`, every output quantizes `y / s` instead of `y * (1 / s)`; with `round_sum`,
    the norm reads the residual sum rounded to x's dtype."""
    quant_ref.check_fp8_dtype(out_dtype)
    if not scales:
        raise ValueError("irfuse: rms_norm_quant_fp8_static needs at least one scale")
    for s in scales:
        if s.numel() != 1:
            raise ValueError("irfuse: a static FP8 scale must have one element")
    qs = [torch.empty(x.shape, dtype=out_dtype, device=x.device) for _ in scales]
    res_out = None
    for start in range(0, len(scales), MAX_STATIC_OUTPUTS):
        # Beyond four outputs, later launches recompute the norm from the same inputs.
        part = _launch_rows(x, weight, residual, eps, weight_offset, QUANT_STATIC,
                            qs[start:start + MAX_STATIC_OUTPUTS],
                            scales[start:start + MAX_STATIC_OUTPUTS], None, None, out_dtype,
                            config, divide, round_sum, weight_f32=weight_f32)
        res_out = part if res_out is None else res_out
    return qs, res_out


def rms_norm_quant_fp8_per_token(x: torch.Tensor, weight: torch.Tensor | None,
                                 scale_ub: torch.Tensor | None, eps: float, weight_offset: float,
                                 out_dtype: torch.dtype, residual: torch.Tensor | None = None,
                                 config: RowConfig | None = None, round_sum: bool = False,
                                 reciprocal: bool = False, weight_f32: bool = False,
                                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(Residual add +) RMSNorm → per-token FP8: (q, scale [..., 1], residual_out).

    With `weight=None` there is no norm: a plain per-token quantizer of `x`. With `round_sum`,
    the norm reads the residual sum rounded to x's dtype; with `reciprocal`, the quant scales by
    `y * (1 / s)` instead of `y / s`.
    """
    quant_ref.check_fp8_dtype(out_dtype)
    q = torch.empty(x.shape, dtype=out_dtype, device=x.device)
    s = torch.empty((*x.shape[:-1], 1), dtype=torch.float32, device=x.device)
    res_out = _launch_rows(x, weight, residual, eps, weight_offset, QUANT_PER_TOKEN, (q,), (s,),
                           None, scale_ub, out_dtype, config, round_sum=round_sum,
                           reciprocal=reciprocal, weight_f32=weight_f32)
    return q, s, res_out


def quant_fp8_per_token(x: torch.Tensor, scale_ub: torch.Tensor | None = None,
                        out_dtype: torch.dtype = torch.float8_e4m3fn,
                        config: RowConfig | None = None, reciprocal: bool = False,
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-token FP8 of `x`: (q, scale [..., 1]); `reciprocal`: `x * (1 / s)`."""
    q, s, _ = rms_norm_quant_fp8_per_token(x, None, scale_ub, 0.0, 0.0, out_dtype, None, config,
                                           reciprocal=reciprocal)
    return q, s


def rms_norm_quant_fp8_group(x: torch.Tensor, weight: torch.Tensor, eps: float,
                             weight_offset: float, group_size: int, col_major: bool,
                             ue8m0: bool, out_dtype: torch.dtype,
                             residual: torch.Tensor | None = None,
                             config: GroupConfig | None = None, round_sum: bool = False,
                             reciprocal: bool = False, weight_f32: bool = False,
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(Residual add +) RMSNorm → per-group FP8: (q, scales, residual_out). With `round_sum`,
    the norm reads the residual sum rounded to x's dtype; with `reciprocal`, the quant scales by
    `y * (1 / s)` instead of `y / s`."""
    quant_ref.check_fp8_dtype(out_dtype)
    quant_ref.check_group_size(x.shape[-1], group_size)
    if group_size & (group_size - 1):
        raise ValueError(f"irfuse: the Triton kernels need a power-of-two group size, "
                         f"got {group_size}")
    x2, r2 = _prepare(x, weight, residual)
    tokens, hidden = x2.shape
    q = torch.empty(x.shape, dtype=out_dtype, device=x.device)
    s = quant_ref.empty_group_scales(x, group_size, col_major)
    res_out = torch.empty_like(x) if residual is not None else None
    if tokens == 0:
        return q, s, res_out
    s2 = s.reshape(tokens, hidden // group_size)  # a view in either layout
    cfg = config or group_config(tokens, hidden)
    _norm_group_kernel[(tokens,)](
        x2, r2 if r2 is not None else x2, weight, res_out if res_out is not None else x2, q, s2,
        tokens, hidden, x2.stride(0), r2.stride(0) if r2 is not None else 0,
        s2.stride(0), s2.stride(1), float(eps), float(weight_offset),
        HAS_RES=residual is not None, WEIGHT_F32=weight_f32 or weight_offset != 0.0,
        HAS_OFFSET=weight_offset != 0.0, UE8M0=ue8m0,
        FP8_MAX=quant_ref.fp8_max(out_dtype), MIN_SCALE=quant_ref.fp8_min_scale(out_dtype),
        BLOCK_G=next_pow2(hidden // group_size), GROUP=group_size,
        ROUND_SUM=round_sum and residual is not None, FAST_DIV=cfg.fast_div, EARLY=cfg.early,
        **cache_hints(cfg.evict), VEC=cfg.vec, **pdl_launch(cfg.pdl, x2.device),
        RECIPROCAL=reciprocal, num_warps=cfg.num_warps,
    )
    return q, s, res_out
