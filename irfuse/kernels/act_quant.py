"""Triton kernels for SiLU·Mul and elementwise FP8 quantization, fused or alone.

`_act_quant_kernel` tiles the columns (no reduction spans a row), so it keeps every SM busy even
at one token. It forms SiLU·Mul or GeGLU as eager PyTorch does (the activation rounded to the
model dtype, then the product rounded), from `x = [gate | up]` or from gate and up apart (a
column slice of a larger GEMM output read in place), or takes `x` itself; it stores the result
as is, quantized with a static FP8 scale, or quantized per group. Numerics: `act_quant_ref` and
`quant_ref`. Launch shapes and variants (`fast_silu`, `early`, `evict`, `pdl`): `ActConfig`,
`act_config`; dynamic per-tensor FP8 (not a fused op) is the static kernel fed with a scale
computed by torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from irfuse.kernels import act_quant_ref, quant_ref
from irfuse.kernels.norm_quant import (
    Steps,
    div_rn_by,
    group_scales,
    static_scaled,
    tuned,
)
from irfuse.kernels.nvfp4 import _gate, act_code
from irfuse.kernels.triton_support import (
    await_previous_kernel,
    cache_hints,
    check_device,
    interpreting,
    next_pow2,
    pdl_launch,
    rows_2d,
)

QUANT_NONE = 0
QUANT_STATIC = 1
QUANT_GROUP = 3
CHUNK = 128  # tile width for the modes without groups


@dataclass(frozen=True)
class ActConfig:
    """Launch shape of `_act_quant_kernel`: tile rows (groups/chunks) per program, warps;
    `fast_silu`: silu by inline PTX (`nvfp4._silu`: the plain form's instructions without its
    subnormal range fixes, so the same bits for gate values above -87.3; the interpreter runs
    the plain form); `early`: the static scale is loaded with the inputs instead
    of after SiLU·Mul (at one token the kernel is one latency chain, and a load issued last adds
    a round trip to it); `evict`: the inputs are loaded with `evict_first` (off: no cache
    hint); `pdl`: programmatic dependent launch (`norm_quant.RowConfig`)."""

    groups_per_program: int
    num_warps: int
    fast_silu: bool = False
    early: bool = False
    evict: bool = True
    pdl: bool = False


# Launch shapes that measured fastest on the H200 (docs/kernel_study.md): (kind, width) ->
# steps of (from this many tokens, (tile columns, warps, fields)). Widths up to 20000 use the
# I 14336 steps, wider ones the I 28672 steps. The per-group kernel takes `fast_silu` (with its
# reciprocal division: the reference's codes and scales, together 3-10% faster from 4096
# tokens, and faster at T 1 and 16); from 1024 tokens (working sets beyond the L2) both kernels
# load without cache hints (4-8% faster) and the static scale early. PDL (same bits) measured
# 32-38% faster at one token, 7-29% at 16, 5-9% at 128 but for the static kernel at I 28672
# (0.6-5% slower: off there), 0-4% from 1024.
_PDL = {"pdl": True}
_GROUP = {"fast_silu": True, **_PDL}
_STREAMED = {"early": True, "evict": False, **_PDL}
# One token (the kernel's ONE_ROW form): one latency chain, cut by the inline-PTX silu and the
# loads' missing cache-policy set-up.
_ONE_TOKEN = {"fast_silu": True, **_STREAMED}
_ACT_TUNED: dict[tuple[str, int], Steps] = {
    ("static", 14336): ((1, (512, 4, _ONE_TOKEN)), (2, (256, 2, _PDL)), (16, (1024, 4, _PDL)),
                        (128, (2048, 8, _PDL)), (1024, (2048, 8, _STREAMED))),
    ("static", 28672): ((1, (512, 4, _ONE_TOKEN)), (2, (512, 2, _PDL)), (16, (2048, 8, _PDL)),
                        (128, (2048, 4, {})),
                        (1024, (2048, 4, _STREAMED)), (4096, (2048, 8, _STREAMED))),
    ("group", 14336): ((1, (128, 1, {**_GROUP, "evict": False})), (16, (512, 2, _GROUP)),
                       (128, (2048, 8, _GROUP)),
                       (1024, (2048, 4, {**_GROUP, "evict": False}))),
    ("group", 28672): ((1, (512, 2, {**_GROUP, "evict": False})), (128, (2048, 4, _GROUP)),
                       (1024, (4096, 8, {**_GROUP, "evict": False}))),
}


def act_config(tokens: int, width: int, group: int, quant: int = QUANT_STATIC) -> ActConfig:
    """Default launch shape for `tokens` rows of `width` output elements in tiles of `group`
    columns (the quant group, or CHUNK)."""
    kind = "group" if quant == QUANT_GROUP else "static"
    columns, warps, variants = tuned(_ACT_TUNED[(kind, 14336 if width <= 20000 else 28672)],
                                     tokens)
    per_program = min(max(1, columns // group), next_pow2(triton.cdiv(width, group)))
    return ActConfig(groups_per_program=per_program,
                     num_warps=max(1, min(warps, per_program * group // 64)), **variants)


@triton.jit
def _act_quant_kernel(
    x_ptr, up_ptr, out_ptr, s_ptr, D, stride_x, stride_up, stride_s_row, stride_s_group,
    ACT: tl.constexpr, UP: tl.constexpr, QUANT: tl.constexpr, UE8M0: tl.constexpr,
    FP8_MAX: tl.constexpr, MIN_SCALE: tl.constexpr, GPP: tl.constexpr, GROUP: tl.constexpr,
    DIVIDE: tl.constexpr, FAST: tl.constexpr = False, EARLY: tl.constexpr = False, STREAM: tl.constexpr = "evict_first",
    ONE_ROW: tl.constexpr = False, PDL: tl.constexpr = False, RECIPROCAL: tl.constexpr = False,
):
    """Grid (rows, column blocks); ONE_ROW (one token): grid (column blocks,), the row offsets
    folded away (at one token the kernel is one latency chain, and they sat before its loads:
    45 ns of 1.27 us on the H200). PDL: launched with programmatic dependent launch.
    RECIPROCAL: the per-group quant scales by `y * (1 / s)` (a model that spells it so).

    Program (row, column block) handles a [GPP, GROUP] tile, GPP groups of GROUP contiguous
    columns (no reduction spans a row, so every SM is busy even at one token). ACT=1 forms
    `silu(a) * b` of `a = x[:, :d]`, `b = x[:, d:]` as eager PyTorch does (silu rounded to the
    model dtype, then the product rounded); ACT=2 / 3 GeGLU with GELU's tanh / erf form
    (`nvfp4._gate`); ACT=0 takes `x` itself. With UP=1 `a` is the gate `x` [:, d] and `b` comes
    from `up` [:, d], each with its own row stride, so a column slice of a larger GEMM output is
    read in place (a constexpr: the [gate | up] form keeps its loads and arithmetic). The
    result is stored as is, quantized with a static scale (`1 / s`, or with DIVIDE `y / s`:
    `norm_quant.static_scaled`), or per group (each tile row one group), dividing through one
    correctly rounded reciprocal per group and Markstein's correction (`norm_quant.div_rn_by`):
    the correctly rounded `y / s` (|y / s| <= 448 and s >= MIN_SCALE: no under- or overflow;
    -0.0 stays -0.0, a group holding an infinity gets the division's zeros) in 3 instructions
    instead of ~10, checked exhaustively over the dividend's significands
    (tests/kernels/test_act_kernel_variants.py)."""
    await_previous_kernel(PDL)
    DT = x_ptr.dtype.element_ty
    if ONE_ROW:
        row = 0
        groups = tl.program_id(0) * GPP + tl.arange(0, GPP)
    else:
        row = tl.program_id(0).to(tl.int64)
        groups = tl.program_id(1) * GPP + tl.arange(0, GPP)
    cols = groups[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    mask = cols < D
    base = x_ptr + row * stride_x
    if QUANT == 1 and EARLY:
        s = tl.load(s_ptr).to(tl.float32)
    a = tl.load(base + cols, mask=mask, other=0.0, eviction_policy=STREAM).to(tl.float32)
    if ACT:
        if UP:
            b = tl.load(up_ptr + row * stride_up + cols, mask=mask, other=0.0,
                        eviction_policy=STREAM).to(tl.float32)
        else:
            b = tl.load(base + D + cols, mask=mask, other=0.0,
                        eviction_policy=STREAM).to(tl.float32)
        act = _gate(a, ACT, FAST).to(DT).to(tl.float32)
        y = (act * b).to(DT).to(tl.float32)
    else:
        y = a
    out_offs = row * D + cols
    if QUANT == 0:
        tl.store(out_ptr + out_offs, y.to(DT), mask=mask)
    elif QUANT == 1:
        if not EARLY:
            s = tl.load(s_ptr).to(tl.float32)
        scaled = static_scaled(y, s, DIVIDE)
        v = tl.minimum(tl.maximum(scaled, -FP8_MAX), FP8_MAX)
        tl.store(out_ptr + out_offs, v.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        s = group_scales(tl.max(tl.abs(y), axis=1), FP8_MAX, MIN_SCALE, UE8M0)
        if RECIPROCAL:
            q = y * tl.math.div_rn(1.0, s)[:, None]
        else:
            q = div_rn_by(y, s[:, None], tl.math.div_rn(1.0, s)[:, None], False)
        v = tl.minimum(tl.maximum(q, -FP8_MAX), FP8_MAX)
        tl.store(out_ptr + out_offs, v.to(out_ptr.dtype.element_ty), mask=mask)
        tl.store(s_ptr + row * stride_s_row + groups * stride_s_group, s,
                 mask=groups * GROUP < D)


def _launch(x: torch.Tensor, act: bool, quant: int, out: torch.Tensor,
            scale: torch.Tensor | None, group: int, ue8m0: bool, out_dtype: torch.dtype,
            config: ActConfig | None, up: torch.Tensor | None = None,
            divide: bool = False, reciprocal: bool = False, activation: str = "silu") -> None:
    x2 = rows_2d(x)
    up2 = rows_2d(up) if up is not None else x2
    tokens = x2.shape[0]
    width = x2.shape[1] // 2 if act and up is None else x2.shape[1]
    if tokens == 0 or width == 0:
        return
    cfg = config or act_config(tokens, width, group, quant)
    s2 = scale if scale is not None else x2
    strides = (0, 0)
    if quant == QUANT_GROUP:
        s2 = scale.reshape(tokens, width // group)
        assert s2.data_ptr() == scale.data_ptr()
        strides = (s2.stride(0), s2.stride(1))
    fp8 = out_dtype if quant != QUANT_NONE else torch.float8_e4m3fn
    blocks = triton.cdiv(triton.cdiv(width, group), cfg.groups_per_program)
    grid = (blocks,) if tokens == 1 else (tokens, blocks)
    _act_quant_kernel[grid](
        x2, up2, out, s2, width, x2.stride(0), up2.stride(0), *strides,
        ACT=act_code(activation) if act else 0, UP=up is not None, QUANT=quant, UE8M0=ue8m0,
        FP8_MAX=quant_ref.fp8_max(fp8),
        MIN_SCALE=quant_ref.fp8_min_scale(fp8), GPP=cfg.groups_per_program, GROUP=group,
        DIVIDE=divide and quant == QUANT_STATIC, num_warps=cfg.num_warps,
        # The interpreter has no inline PTX: it runs the plain silu.
        FAST=cfg.fast_silu and act and activation == "silu" and not interpreting(),
        EARLY=cfg.early,
        STREAM=cache_hints(cfg.evict)["STREAM"], ONE_ROW=tokens == 1,
        **pdl_launch(cfg.pdl, x2.device), RECIPROCAL=reciprocal and quant == QUANT_GROUP,
    )


def _check_act_input(x: torch.Tensor, up: torch.Tensor | None) -> None:
    act_quant_ref.silu_mul_width(x, up)
    check_device(x, *(() if up is None else (up,)))
    if up is not None and up.device != x.device:
        raise ValueError(f"irfuse: SiLU·Mul's up is on {up.device}, the gate on {x.device}")


def silu_mul(x: torch.Tensor, up: torch.Tensor | None = None,
             config: ActConfig | None = None, activation: str = "silu") -> torch.Tensor:
    """`silu(x[..., :d]) * x[..., d:]` in x's dtype, or `silu(x) * up` when `up` is given;
    another gate `activation` in place of silu (GeGLU)."""
    _check_act_input(x, up)
    width = x.shape[-1] if up is not None else x.shape[-1] // 2
    out = torch.empty((*x.shape[:-1], width), dtype=x.dtype, device=x.device)
    _launch(x, True, QUANT_NONE, out, None, CHUNK, False, x.dtype, config, up,
            activation=activation)
    return out


def _static(x: torch.Tensor, act: bool, scale: torch.Tensor, out_dtype: torch.dtype,
            config: ActConfig | None, up: torch.Tensor | None = None,
            divide: bool = False, activation: str = "silu") -> torch.Tensor:
    quant_ref.check_fp8_dtype(out_dtype)
    if scale.numel() != 1:
        raise ValueError("irfuse: a static FP8 scale must have one element")
    width = x.shape[-1] // 2 if act and up is None else x.shape[-1]
    out = torch.empty((*x.shape[:-1], width), dtype=out_dtype, device=x.device)
    _launch(x, act, QUANT_STATIC, out, scale, CHUNK, False, out_dtype, config, up, divide,
            activation=activation)
    return out


def _group(x: torch.Tensor, act: bool, group_size: int, col_major: bool, ue8m0: bool,
           out_dtype: torch.dtype, config: ActConfig | None, up: torch.Tensor | None = None,
           reciprocal: bool = False, activation: str = "silu",
           ) -> tuple[torch.Tensor, torch.Tensor]:
    quant_ref.check_fp8_dtype(out_dtype)
    width = x.shape[-1] // 2 if act and up is None else x.shape[-1]
    quant_ref.check_group_size(width, group_size)
    if group_size & (group_size - 1):
        raise ValueError(f"irfuse: the Triton kernels need a power-of-two group size, "
                         f"got {group_size}")
    out = torch.empty((*x.shape[:-1], width), dtype=out_dtype, device=x.device)
    s = quant_ref.empty_group_scales(out, group_size, col_major)
    _launch(x, act, QUANT_GROUP, out, s, group_size, ue8m0, out_dtype, config, up,
            reciprocal=reciprocal, activation=activation)
    return out, s


def silu_mul_quant_fp8_static(x: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype,
                              up: torch.Tensor | None = None,
                              config: ActConfig | None = None,
                              divide: bool = False, activation: str = "silu") -> torch.Tensor:
    """SiLU·Mul (or GeGLU: `activation`) → static per-tensor FP8 (gate `x` and `up` apart when
    `up` is given); with `divide`, the quant scales by `y / s`, else by `y * (1 / s)`."""
    _check_act_input(x, up)
    return _static(x, True, scale, out_dtype, config, up, divide, activation)


def silu_mul_quant_fp8_group(x: torch.Tensor, group_size: int, col_major: bool, ue8m0: bool,
                             out_dtype: torch.dtype, up: torch.Tensor | None = None,
                             config: ActConfig | None = None, reciprocal: bool = False,
                             activation: str = "silu") -> tuple[torch.Tensor, torch.Tensor]:
    """SiLU·Mul (or GeGLU: `activation`) → per-group FP8: (q, scales) (gate `x` and `up` apart
    when `up` is given); with `reciprocal`, the quant scales by `y * (1 / s)`, else by `y / s`."""
    _check_act_input(x, up)
    return _group(x, True, group_size, col_major, ue8m0, out_dtype, config, up, reciprocal,
                  activation)


def quant_fp8_static(x: torch.Tensor, scale: torch.Tensor,
                     out_dtype: torch.dtype = torch.float8_e4m3fn,
                     config: ActConfig | None = None, divide: bool = False) -> torch.Tensor:
    """Static per-tensor FP8 of `x` (`x / s` with `divide`, else `x * (1 / s)`)."""
    quant_ref.check_model_dtype(x)
    check_device(x)
    return _static(x, False, scale, out_dtype, config, divide=divide)


def quant_fp8_per_tensor(x: torch.Tensor, out_dtype: torch.dtype = torch.float8_e4m3fn,
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-tensor FP8 of `x`: (q, scale [1]): the static kernel fed with a scale
    computed by torch from the tensor's amax, exactly as the reference computes it."""
    quant_ref.check_model_dtype(x)
    check_device(x)
    m = quant_ref.fp8_max(out_dtype)
    # The amax of bf16/fp16 values is exact in that dtype, so no float32 copy of x is needed.
    s = (x.abs().amax().float() / m).clamp(min=quant_ref.fp8_min_scale(out_dtype)).reshape(1)
    return _static(x, False, s, out_dtype, None), s


def quant_fp8_group(x: torch.Tensor, group_size: int, col_major: bool = False,
                    ue8m0: bool = False, out_dtype: torch.dtype = torch.float8_e4m3fn,
                    config: ActConfig | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-group FP8 of `x`: (q, scales)."""
    quant_ref.check_model_dtype(x)
    check_device(x)
    return _group(x, False, group_size, col_major, ue8m0, out_dtype, config)
