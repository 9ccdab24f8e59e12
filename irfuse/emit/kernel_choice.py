"""Which implementation runs each fused (and library) op on each platform, and why.

This is the one place that records the choice. Implementations:

- `reference`: the torch reference (`irfuse/emit/kernels/*_ref.py`), always right, never fast;
- `triton`: irfuse's Triton kernel;
- `flashinfer`: FlashInfer's kernel (optional package, imported lazily; where it is absent the
  Triton kernel runs and `flashinfer_status()` says why);
- `inductor`: the fusion pass must leave this pattern to Inductor on that platform, because
  Inductor's generated code was measured faster there. (If the fused op is called anyway, its
  Triton kernel runs.)

Platforms are strings: `cpu`, `cuda:sm90` (compute capability), `rocm`. A lookup tries the exact
platform, then its family (`cuda`, `rocm`); other platforms get the reference. An entry may
change with the token count (a step from some number of tokens on), because Inductor's code and
irfuse's kernels cross over with size. Every CUDA entry carries the measurement that justifies
it (docs/benchmarks.md, produced by `benchmarks/bench_norm_act_quant.py`); entries not measured
yet say so.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass

import torch

IMPLS = ("reference", "triton", "flashinfer", "inductor")

FUSED_OPS = (
    "rms_norm_quant_fp8_static", "add_rms_norm_quant_fp8_static",
    "rms_norm_quant_fp8_per_token", "add_rms_norm_quant_fp8_per_token",
    "rms_norm_quant_fp8_group", "add_rms_norm_quant_fp8_group",
    "silu_mul_quant_fp8_static", "silu_mul_quant_fp8_group", "silu_mul_quant_nvfp4",
)
LIBRARY_OPS = (
    "rms_norm", "add_rms_norm", "silu_mul", "quant_fp8_static", "quant_fp8_per_token",
    "quant_fp8_per_tensor", "quant_fp8_group", "quant_nvfp4",
)


@dataclass(frozen=True)
class Choice:
    """An implementation (one of IMPLS) and the measurement or rule that justifies it."""

    impl: str
    reason: str

    def __post_init__(self) -> None:
        if self.impl not in IMPLS:
            raise ValueError(f"irfuse: unknown implementation {self.impl!r}")


_CPU = Choice("reference", "the CPU runs the torch reference (Triton needs a GPU)")
_NOT_MEASURED = Choice("triton", "not measured yet")
_NOT_MEASURED_ROCM = Choice("triton", "not measured yet (Triton emits float8_e4m3fnuz on ROCm)")

# Measured on one H200 (torch 2.11, Triton 3.6, CUDA-graph replay, static-shape Inductor on the
# unfused torch code), bf16, H 4096/8192 (SiLU·Mul I 14336/28672), T 1..16384:
# docs/bench_norm_act_quant.md (merged into docs/benchmarks.md), fifth session's table (medians
# of three interleaved rounds; T 4096 / 16384 re-run in the sixth). Ratios are irfuse / Inductor
# with the launch shapes the kernels use by default (the sweeps' best; programmatic dependent
# launch where it measured faster).
# No pattern is left to Inductor there: add + RMSNorm + FP8 static was from 16384 tokens until
# its one-pass kernel with one register layout tied (H 4096) and beat (H 8192) Inductor's there
# (fourth session; without PDL it still ties at H 4096). FlashInfer's rmsnorm_quant /
# fused_add_rmsnorm_quant (re-measured in the fifth session, with their own PDL) are not chosen:
# the plain form takes 1.24-1.85x irfuse's time at every size, the residual form 1.03-1.60x in
# place and 1.67-2.88x with the residual copy that irfuse's functional ops would need
# (FlashInfer updates it in place); and it does not round y to the model dtype before the quant
# (2% of FP8 codes one step off in bf16: over irfuse's 1% budget, within vLLM's tolerance).
_BENCH = "docs/bench_norm_act_quant.md"
_SM90: dict[str, tuple[tuple[int, Choice], ...]] = {
    "add_rms_norm_quant_fp8_static": (
        (1, Choice("triton", f"{_BENCH}: 0.53-0.99x Inductor's time at every size "
                             "(1.74 vs 3.03 us at H 8192, T 1; 28.6 vs 30.8 us at H 4096, "
                             "T 4096; 109.9 vs 111.1 us at H 4096, T 16384)")),),
    "rms_norm_quant_fp8_static": (
        (1, Choice("triton", f"{_BENCH}: 0.57-0.79x Inductor's time at every size "
                             "(47.3 vs 74.3 us at H 4096, T 16384)")),),
    "add_rms_norm_quant_fp8_per_token": (
        (1, Choice("triton", f"{_BENCH}: 0.54-0.91x Inductor's time at every size "
                             "(2.31 vs 3.68 us at H 8192, T 1; 111.8 vs 123.1 us at H 4096, "
                             "T 16384)")),),
    "rms_norm_quant_fp8_per_token": (
        (1, Choice("triton", f"{_BENCH}: the residual form's kernel without the residual "
                             "(measured there: 0.54-0.91x Inductor); not measured alone")),),
    "add_rms_norm_quant_fp8_group": (
        (1, Choice("triton", f"{_BENCH}: 0.32-0.63x Inductor's time at every size "
                             "(group 128; 113.7 vs 204.2 us at H 4096, T 16384)")),),
    "rms_norm_quant_fp8_group": (
        (1, Choice("triton", f"{_BENCH}: the residual form's kernel without the residual "
                             "(measured there: 0.32-0.63x Inductor); not measured alone")),),
    "silu_mul_quant_fp8_static": (
        (1, Choice("triton", f"{_BENCH}: 0.60-0.87x Inductor's time at every size "
                             "(0.78 vs 1.21 us at I 14336, T 1; 272.3 vs 333.4 us at "
                             "T 16384)")),),
    "silu_mul_quant_fp8_group": (
        (1, Choice("triton", f"{_BENCH}: 0.26-0.65x Inductor's time at every size "
                             "(group 128; 0.95 vs 1.46 us at T 1, 276.0 vs 706.3 us at I 14336, "
                             "T 16384)")),),
    "silu_mul_quant_nvfp4": (
        (1, Choice("triton", f"{_BENCH}: 0.25-0.40x Inductor's time at every size "
                             "(276.5 vs 787.4 us at I 14336, T 16384: 91% of copy, "
                             "sixth session)")),),
}


def _entry(op: str) -> dict[str, tuple[tuple[int, Choice], ...]]:
    entries = {"cpu": ((1, _CPU),), "cuda": ((1, _NOT_MEASURED),),
               "rocm": ((1, _NOT_MEASURED_ROCM),)}
    if op in _SM90:
        entries["cuda:sm90"] = _SM90[op]
    return entries


_TABLE = {op: _entry(op) for op in (*FUSED_OPS, *LIBRARY_OPS)}


def choose(op_name: str, platform_str: str, num_tokens: int | None = None) -> Choice:
    """The implementation of `op_name` (with or without `irfuse::`) on `platform_str`.

    Where the measurements split by size, `num_tokens` (the largest token count a compiled
    graph serves, e.g. the top of its compile range) picks the step; without it the choice
    for few tokens (decode) is returned, its reason naming the split.
    """
    name = op_name.removeprefix("irfuse::")
    if name not in _TABLE:
        raise KeyError(f"irfuse: no kernel choice recorded for op {op_name!r}")
    entries = _TABLE[name]
    steps = entries.get(platform_str) or entries.get(platform_str.split(":", 1)[0])
    if steps is None:
        return Choice("reference", f"platform {platform_str!r} has no kernels; the reference "
                                   "runs")
    if num_tokens is None:
        first = steps[0][1]
        if len(steps) == 1:
            return first
        split = "; ".join(f"from {t} tokens: {c.impl}" for t, c in steps[1:])
        return Choice(first.impl, f"{first.reason} [{split}]")
    chosen = steps[0][1]
    for min_tokens, choice in steps:
        if num_tokens >= min_tokens:
            chosen = choice
    return chosen


def split_points(platform_str: str) -> list[int]:
    """The token counts at which some op's choice changes on a platform: compile ranges end
    just below each, so that every range runs one choice per op."""
    starts = set()
    for entries in _TABLE.values():
        steps = entries.get(platform_str) or entries.get(platform_str.split(":", 1)[0]) or ()
        starts.update(t for t, _ in steps if t > 1)
    return sorted(t - 1 for t in starts)


def size_class(platform_str: str, num_tokens: int) -> int:
    """The smallest token count that gets the same choices as `num_tokens` for every op (the
    start of its step): ranges of one class compile once."""
    starts = [p + 1 for p in split_points(platform_str) if p + 1 <= num_tokens]
    return max(starts, default=1)


def platform_of(device: torch.device | str) -> str:
    """The platform string of a device: `cpu`, `cuda:sm90`, `rocm`, ..."""
    device = torch.device(device)
    if device.type != "cuda":
        return device.type
    return _cuda_platform(device.index if device.index is not None else
                          torch.cuda.current_device())


@functools.cache
def _cuda_platform(index: int) -> str:
    if torch.version.hip is not None:
        return "rocm"
    major, minor = torch.cuda.get_device_capability(index)
    return f"cuda:sm{major}{minor}"


def flashinfer_status() -> tuple[bool, str]:
    """Whether FlashInfer can be used here, and why not (without importing it)."""
    if importlib.util.find_spec("flashinfer") is None:
        return False, "flashinfer is not installed (optional extra irfuse[gpu])"
    if not torch.cuda.is_available():
        return False, "flashinfer is installed but there is no CUDA device"
    return True, "flashinfer is installed"


def table() -> dict[str, dict[str, tuple[tuple[int, Choice], ...]]]:
    """The whole choice table, e.g. for the CLI: op → platform → ((min_tokens, Choice), ...)."""
    return {op: dict(entries) for op, entries in _TABLE.items()}
