"""Comparison of quantized outputs against their references (tests and the benchmark use it).

Two quantized results of the same function can differ where a value sits on a rounding
boundary and the two computed it a hair apart (rsqrt, exp or a sum order): the code moves to
the neighbouring one. `quant_close` therefore checks, on dequantized values:
- every element is within one quantization step of the reference (for FP8 e4m3 a step is at
  most 1/8 of the magnitude; for e2m1 at most 1/2, plus whole-block moves when a block scale
  flips, which the mean check bounds);
- at most `max_mismatch` of the elements differ at all;
- the mean absolute error is within `tol` of the reference's mean magnitude (the tolerances
  vLLM's tests use for fused vs unfused: `docs/numerics.md`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Agreement:
    """How two dequantized tensors agree."""

    mismatch: float  # fraction of elements that differ at all
    step_ok: bool  # every element within one quantization step
    mean_rel_err: float  # mean |a - b| / mean |b|

    def ok(self, tol: float, max_mismatch: float) -> bool:
        """Whether the agreement meets a tolerance and a mismatch budget."""
        return self.step_ok and self.mismatch <= max_mismatch and self.mean_rel_err <= tol

    def __str__(self) -> str:
        return (f"mismatch {self.mismatch:.2e}, within one step: {self.step_ok}, "
                f"mean rel err {self.mean_rel_err:.2e}")


def agreement(deq: torch.Tensor, deq_ref: torch.Tensor, step_rel: float = 0.125,
              step_abs: float = 0.0, codes: tuple[torch.Tensor, torch.Tensor] | None = None,
              ) -> Agreement:
    """Agreement of `deq` with `deq_ref` (float tensors of one shape).

    `step_rel`/`step_abs` bound one quantization step: |a - b| <= step_rel * max(|a|, |b|)
    + step_abs (step_abs covers subnormals, e.g. scale * 2**-9 for e4m3). With `codes` (the two
    quantized tensors), the mismatch counts differing codes, not values: dynamic scales that
    differ by a rounding make every value differ while the codes agree.
    """
    a, b = deq.float(), deq_ref.float()
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    if a.numel() == 0:
        return Agreement(0.0, True, 0.0)
    diff = (a - b).abs()
    bound = step_rel * torch.maximum(a.abs(), b.abs()) + step_abs
    finite = torch.isfinite(a).all().item() and torch.isfinite(b).all().item()
    step_ok = bool(finite and (diff <= bound * (1 + 1e-6)).all().item())
    if codes is not None:
        mismatch = (codes[0].float() != codes[1].float()).float().mean().item()
    else:
        mismatch = (a != b).float().mean().item()
    mean_rel = (diff.mean() / b.abs().mean().clamp(min=1e-30)).item()
    return Agreement(mismatch, step_ok, mean_rel)


def fp8_agreement(q: torch.Tensor, s: torch.Tensor, q_ref: torch.Tensor, s_ref: torch.Tensor,
                  group_size: int | None = None) -> Agreement:
    """Agreement of two FP8 results given with their scales (per-tensor, per-token, group)."""
    def deq(qq: torch.Tensor, ss: torch.Tensor) -> torch.Tensor:
        if group_size is None:
            return qq.float() * ss.float()
        g = qq.shape[-1] // group_size
        qg = qq.float().reshape(*qq.shape[:-1], g, group_size)
        return (qg * ss.float().unsqueeze(-1)).reshape(qq.shape)

    step_abs = float(torch.maximum(s.float().abs().max(), s_ref.float().abs().max())) * 2.0**-9
    # 0.14, not 0.125: a code step and a rounding of a dynamic scale can add up.
    return agreement(deq(q, s), deq(q_ref, s_ref), 0.14, step_abs, codes=(q, q_ref))
