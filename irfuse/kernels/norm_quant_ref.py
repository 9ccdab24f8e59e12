"""Torch references of RMSNorm, residual add + RMSNorm, and the fused norm → FP8 quant ops.

These define the numerics the Triton kernels in `norm_quant.py` follow, as `docs/numerics.md`
(RMSNorm) states them: the norm in float32 over the float32 residual sum (the new residual is
that sum rounded to the model dtype; with `round_sum` the norm reads the rounded sum, as a model
that adds in the model dtype feeds it), the weight product in the model dtype, or with
`weight_f32` or a nonzero `weight_offset` (Gemma's `1 + w`) in float32 rounded once
(`weight_f32_operand`); a fused norm + quant quantizes the model-dtype-rounded `y` with the rules
of `quant_ref`.

The fused references are literally the composition norm → quant, so a fused op agrees with its
unfused chain by construction on the CPU; the kernels are held to these functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from irfuse.kernels import quant_ref


def check_norm_args(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor | None) -> None:
    """The argument errors every norm implementation raises (ValueError): a dtype the norms do
    not take, a weight that is not [hidden], a residual of another shape or dtype than x."""
    quant_ref.check_model_dtype(x)
    if weight.shape != x.shape[-1:]:
        raise ValueError(f"irfuse: RMSNorm weight shape {tuple(weight.shape)} does not match "
                         f"the hidden size {x.shape[-1]}")
    if residual is not None and (residual.shape != x.shape or residual.dtype != x.dtype):
        raise ValueError("irfuse: the residual must have the input's shape and dtype")


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, weight_offset: float = 0.0,
             residual: torch.Tensor | None = None, round_sum: bool = False,
             weight_f32: bool = False,
             ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """RMSNorm over the last dim, optionally after a residual add.

    Returns (y in x's dtype, residual_out = (x + residual) in x's dtype, or None). With
    `round_sum` the norm reads `residual_out.float()`, the sum rounded to x's dtype, instead of
    the float32 sum (no effect without a residual). With `weight_f32` (or a nonzero
    `weight_offset`) the weight product is taken in float32 and rounded once.
    """
    quant_ref.check_model_dtype(x)
    if weight.shape != x.shape[-1:]:
        raise ValueError(f"irfuse: RMSNorm weight shape {tuple(weight.shape)} does not match "
                         f"the hidden size {x.shape[-1]}")
    dtype = x.dtype
    x32 = x.float()
    residual_out = None
    if residual is not None:
        if residual.shape != x.shape or residual.dtype != dtype:
            raise ValueError("irfuse: the residual must have the input's shape and dtype")
        x32 = x32 + residual.float()
        residual_out = x32.to(dtype)
        if round_sum:
            x32 = residual_out.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    if weight_f32 or weight_offset != 0.0:
        y = (normed * weight_f32_operand(weight, weight_offset)).to(dtype)
    else:
        y = normed.to(dtype) * weight.to(dtype)
    return y, residual_out


def weight_f32_operand(weight: torch.Tensor, weight_offset: float) -> torch.Tensor:
    """The float32 weight of a float32 weight product: `weight.float()`, plus the offset only
    when there is one (no `+ 0.0`, which would turn a -0.0 weight into +0.0)."""
    w32 = weight.float()
    return w32 + weight_offset if weight_offset != 0.0 else w32


def rms_norm_quant_fp8_static(x: torch.Tensor, weight: torch.Tensor,
                              scales: Sequence[torch.Tensor], eps: float, weight_offset: float,
                              out_dtype: torch.dtype, residual: torch.Tensor | None = None,
                              divide: bool = False, round_sum: bool = False,
                              weight_f32: bool = False,
                              ) -> tuple[list[torch.Tensor], torch.Tensor | None]:
    """(Residual add +) RMSNorm → one static FP8 quant per scale: (qs, residual_out). With
    `divide`, each quant scales by `y / s` rather than `y * (1 / s)`; `round_sum` and
    `weight_f32` as in `rms_norm`."""
    y, residual_out = rms_norm(x, weight, eps, weight_offset, residual, round_sum, weight_f32)
    return [quant_ref.quant_fp8_static(y, s, out_dtype, divide) for s in scales], residual_out


def rms_norm_quant_fp8_per_token(x: torch.Tensor, weight: torch.Tensor,
                                 scale_ub: torch.Tensor | None, eps: float, weight_offset: float,
                                 out_dtype: torch.dtype, residual: torch.Tensor | None = None,
                                 round_sum: bool = False, reciprocal: bool = False,
                                 weight_f32: bool = False,
                                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(Residual add +) RMSNorm → dynamic per-token FP8: (q, scale [..., 1], residual_out);
    `round_sum` and `weight_f32` as in `rms_norm`; `reciprocal`: the quant scales by
    `y * (1 / s)`."""
    y, residual_out = rms_norm(x, weight, eps, weight_offset, residual, round_sum, weight_f32)
    q, s = quant_ref.quant_fp8_per_token(y, scale_ub, out_dtype, reciprocal)
    return q, s, residual_out


def rms_norm_quant_fp8_group(x: torch.Tensor, weight: torch.Tensor, eps: float,
                             weight_offset: float, group_size: int, col_major: bool,
                             ue8m0: bool, out_dtype: torch.dtype,
                             residual: torch.Tensor | None = None, round_sum: bool = False,
                             reciprocal: bool = False, weight_f32: bool = False,
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(Residual add +) RMSNorm → per-group FP8: (q, scales, residual_out); `round_sum` and
    `weight_f32` as in `rms_norm`; `reciprocal`: the quant scales by `y * (1 / s)`."""
    quant_ref.check_group_size(x.shape[-1], group_size)
    y, residual_out = rms_norm(x, weight, eps, weight_offset, residual, round_sum, weight_f32)
    q, s = quant_ref.quant_fp8_group(y, group_size, col_major, ue8m0, out_dtype, reciprocal)
    return q, s, residual_out
