"""Torch references of the gated activations (SiLU·Mul, GeGLU) and the fused gated activation
→ FP8 / NVFP4 quant ops.

Numerics (`docs/numerics.md`): `a, b = x[..., :d], x[..., d:]`; `y = act(a) * b` in the model
dtype, i.e. `act(a)` is computed in float32 and rounded to the model dtype, then the product is
rounded once more (what eager PyTorch computes for `F.silu(a) * b`). `activation` names act (one
of ACTIVATIONS): `silu`, `gelu_tanh` (`F.gelu(a, approximate="tanh")`, Gemma's MLP) or `gelu`
(`F.gelu(a)`, the erf form). The fused ops quantize that model-dtype `y` with the rules of
`quant_ref`, so each fused reference is the composition.

Every function also takes the gate and up halves as two tensors (Hugging Face MLPs compute
`act(gate_proj(x)) * up_proj(x)`): with `up` given, `x` is the gate [..., d] and `up` is [..., d]
of the same shape and dtype, and the result is the one-tensor form's on `cat([x, up], -1)`,
bit for bit (SiLU·Mul is elementwise, so where the halves live changes nothing).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from irfuse.kernels import quant_ref

ACTIVATIONS = ("silu", "gelu_tanh", "gelu")
"""The gate activations of the gated-activation family (the `activation` of `act.silu_mul`)."""


def gate_activation(a: torch.Tensor, activation: str = "silu") -> torch.Tensor:
    """`act(a)` in a's dtype, as eager PyTorch computes it."""
    if activation == "silu":
        return F.silu(a)
    if activation == "gelu_tanh":
        return F.gelu(a, approximate="tanh")
    if activation == "gelu":
        return F.gelu(a)
    raise ValueError(f"irfuse: unknown gate activation {activation!r}, not one of {ACTIVATIONS}")


def silu_mul_width(x: torch.Tensor, up: torch.Tensor | None = None) -> int:
    """The output's last dim d, after checking the inputs (a ValueError names what is wrong):
    x [..., 2d] alone (an even last dim), or gate x [..., d] with `up` of x's shape and dtype.
    Works on fake tensors too, so the ops' fake implementations share it."""
    quant_ref.check_model_dtype(x)
    if up is None:
        if x.shape[-1] % 2 != 0:
            raise ValueError(f"irfuse: SiLU·Mul needs an even last dimension, got {x.shape[-1]}")
        return x.shape[-1] // 2
    if up.shape != x.shape or up.dtype != x.dtype:
        raise ValueError(f"irfuse: SiLU·Mul's up {tuple(up.shape)} {up.dtype} must have the "
                         f"gate's shape and dtype, {tuple(x.shape)} {x.dtype}")
    return x.shape[-1]


def silu_mul(x: torch.Tensor, up: torch.Tensor | None = None,
             activation: str = "silu") -> torch.Tensor:
    """`silu(x[..., :d]) * x[..., d:]` in x's dtype, or `silu(x) * up` when `up` is given;
    another gate `activation` in place of silu (GeGLU)."""
    d = silu_mul_width(x, up)
    if up is not None:
        return gate_activation(x, activation) * up
    return gate_activation(x[..., :d], activation) * x[..., d:]


def silu_mul_quant_fp8_static(x: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype,
                              up: torch.Tensor | None = None, divide: bool = False,
                              activation: str = "silu") -> torch.Tensor:
    """SiLU·Mul → static per-tensor FP8 (`y / s` with `divide`, else `y * (1 / s)`)."""
    return quant_ref.quant_fp8_static(silu_mul(x, up, activation), scale, out_dtype, divide)


def silu_mul_quant_fp8_group(x: torch.Tensor, group_size: int, col_major: bool, ue8m0: bool,
                             out_dtype: torch.dtype, up: torch.Tensor | None = None,
                             reciprocal: bool = False, activation: str = "silu",
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """SiLU·Mul → per-group FP8: (q, scales); `reciprocal`: `y * (1 / s)`, else `y / s`."""
    return quant_ref.quant_fp8_group(silu_mul(x, up, activation), group_size, col_major, ue8m0, out_dtype,
                                     reciprocal)


def silu_mul_quant_nvfp4(x: torch.Tensor, global_scale: torch.Tensor,
                         up: torch.Tensor | None = None, activation: str = "silu",
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """SiLU·Mul → NVFP4: (packed uint8 [..., d/2], swizzled fp8 block scales)."""
    return quant_ref.quant_nvfp4(silu_mul(x, up, activation), global_scale)
