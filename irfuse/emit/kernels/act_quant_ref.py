"""Torch references of SiLU·Mul and the fused SiLU·Mul → FP8 / NVFP4 quant ops.

Numerics (`shared/NUMERICS.md`): `a, b = x[..., :d], x[..., d:]`; `y = silu(a) * b` in the model
dtype, i.e. `silu(a)` is computed in float32 and rounded to the model dtype, then the product is
rounded once more (what eager PyTorch computes for `F.silu(a) * b`). The fused ops quantize that
model-dtype `y` with the rules of `quant_ref`, so each fused reference is the composition.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from irfuse.emit.kernels import quant_ref


def silu_mul(x: torch.Tensor) -> torch.Tensor:
    """`silu(x[..., :d]) * x[..., d:]` in x's dtype; the last dim of x must be even."""
    quant_ref.check_model_dtype(x)
    if x.shape[-1] % 2 != 0:
        raise ValueError(f"irfuse: SiLU·Mul needs an even last dimension, got {x.shape[-1]}")
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def silu_mul_quant_fp8_static(x: torch.Tensor, scale: torch.Tensor,
                              out_dtype: torch.dtype) -> torch.Tensor:
    """SiLU·Mul → static per-tensor FP8."""
    return quant_ref.quant_fp8_static(silu_mul(x), scale, out_dtype)


def silu_mul_quant_fp8_group(x: torch.Tensor, group_size: int, col_major: bool, ue8m0: bool,
                             out_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """SiLU·Mul → per-group FP8: (q, scales)."""
    return quant_ref.quant_fp8_group(silu_mul(x), group_size, col_major, ue8m0, out_dtype)


def silu_mul_quant_nvfp4(x: torch.Tensor, global_scale: torch.Tensor,
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """SiLU·Mul → NVFP4: (packed uint8 [..., d/2], swizzled fp8 block scales)."""
    return quant_ref.quant_nvfp4(silu_mul(x), global_scale)
