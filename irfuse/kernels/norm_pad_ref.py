"""Torch references of RMSNorm -> constant pad of the last dim, with or without the residual add.

The padded norm is the norm of `norm_quant_ref.rms_norm` (its readings `round_sum`,
`weight_f32` and `weight_offset` as `docs/numerics.md` defines them) followed by `F.pad(y, (low,
high), value=value)`: the pad columns hold `value` rounded to the model dtype, `low` columns
before the row and `high` after it, given as `high` or as a `pad_multiple` (`pad_amounts`); a NaN
value is refused (`check_pad_value`).

Bit for bit these equal the unfused torch code in those spellings (the same torch ops in the same
order; the pad spelled `F.pad`, `new_zeros` + a slice assignment, or `cat` with zeros);
`tests/kernels/test_norm_pad_kernel.py` holds them to it. Any hidden size and amounts >= 0; bf16,
fp16 and fp32 inputs (another dtype is a ValueError naming it).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from irfuse.kernels import norm_quant_ref


def pad_amounts(hidden: int, *, pad_multiple: int | None = None, low: int = 0,
                high: int | None = None) -> tuple[int, int]:
    """(low, high) of a last-dim pad given as `high` or as `pad_multiple` (exactly one): the
    multiple pads the row to `round_up(low + hidden, pad_multiple)`. ValueError on negative
    amounts (F.pad's crop is no pad), a multiple < 1, or both or neither given."""
    if (pad_multiple is None) == (high is None):
        raise ValueError("irfuse: give the pad as exactly one of pad_multiple= and high=")
    if low < 0:
        raise ValueError(f"irfuse: negative pad amount low={low} (a crop, not a pad)")
    if pad_multiple is not None:
        if pad_multiple < 1:
            raise ValueError(f"irfuse: pad_multiple must be >= 1, got {pad_multiple}")
        width = low + hidden
        high = -(-width // pad_multiple) * pad_multiple - width
    assert high is not None
    if high < 0:
        raise ValueError(f"irfuse: negative pad amount high={high} (a crop, not a pad)")
    return low, high


def check_pad_value(value: float) -> None:
    """Raise a ValueError for a NaN pad value (every other float, infinities included, pads as
    `F.pad` does): which NaN a fill writes is not defined alike everywhere."""
    if value != value:
        raise ValueError("irfuse: a NaN pad value is not supported")


def padded_shape(x_shape: torch.Size | tuple[int, ...], low: int, high: int) -> tuple[int, ...]:
    """The padded output's shape: x's, the last dim grown by low + high (the fake rule)."""
    return (*x_shape[:-1], x_shape[-1] + low + high)


def add_rms_norm_pad(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                     *, pad_multiple: int | None = None, low: int = 0, high: int | None = None,
                     value: float = 0.0, weight_offset: float = 0.0, round_sum: bool = False,
                     weight_f32: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual add + RMSNorm over the last dim, the norm padded along it.

    Returns (out, residual_out): out `[..., low + H + high]` in x's dtype, the norm in columns
    `[low, low + H)` and `value` elsewhere; residual_out = x + residual in x's dtype, shaped like
    x. ValueError on a dtype other than bf16/fp16/fp32, a weight that is not `[H]`, a residual of
    another shape or dtype, or bad pad amounts (`pad_amounts`)."""
    norm_quant_ref.check_norm_args(x, weight, residual)
    check_pad_value(value)
    low, high = pad_amounts(x.shape[-1], pad_multiple=pad_multiple, low=low, high=high)
    y, residual_out = _norm(x, weight, eps, weight_offset, residual, round_sum, weight_f32)
    assert residual_out is not None
    return F.pad(y, (low, high), value=value), residual_out


def rms_norm_pad(x: torch.Tensor, weight: torch.Tensor, eps: float, *,
                 pad_multiple: int | None = None, low: int = 0, high: int | None = None,
                 value: float = 0.0, weight_offset: float = 0.0,
                 weight_f32: bool = False) -> torch.Tensor:
    """RMSNorm over the last dim, padded along it: `add_rms_norm_pad` without the residual."""
    norm_quant_ref.check_norm_args(x, weight, None)
    check_pad_value(value)
    low, high = pad_amounts(x.shape[-1], pad_multiple=pad_multiple, low=low, high=high)
    y, _ = _norm(x, weight, eps, weight_offset, None, False, weight_f32)
    return F.pad(y, (low, high), value=value)


def _norm(x: torch.Tensor, weight: torch.Tensor, eps: float, weight_offset: float,
          residual: torch.Tensor | None, round_sum: bool, weight_f32: bool,
          ) -> tuple[torch.Tensor, torch.Tensor | None]:
    return norm_quant_ref.rms_norm(x, weight, eps, weight_offset, residual, round_sum,
                                   weight_f32)
