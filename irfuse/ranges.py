"""Compile ranges: num_tokens intervals compiled separately, each with the passes that pay there.

Some fusions pay only for few tokens (all-reduce + RMSNorm through FlashInfer's size-capped
workspace; RoPE + KV-cache write), some only for many (sequence parallelism and async TP). As
vLLM does, irfuse splits num_tokens at those thresholds into inclusive ranges
`[1, p0], [p0 + 1, p1], ..., [p_{n-1} + 1, max_num_batched_tokens]`, adds a single-size range
`[s, s]` for each explicit compile size, compiles each range lazily at its first use, and
dispatches each call by its num_tokens (an exact compile size wins over a general range).

Split points (`split_points`), each kept only if it lies in [1, max_num_batched_tokens):
- all-reduce fusion on: the FlashInfer size cap in tokens, cap_bytes // (hidden * itemsize);
- sequence parallelism on: sp_min_token_num - 1 (so that a range starts at the threshold);
- RoPE + KV cache on: rope_kvcache_fusion_max_token_num;
- the user's compile_ranges_split_points.

Above max_num_batched_tokens, vLLM raises. irfuse does not: `range_for` sends such a call to
a general fallback range `[max + 1, inf]` (`UNBOUNDED`; the backend splits it where a measured
kernel choice changes), compiled like any other range with the passes whose rule holds there
(no all-reduce fusion, no RoPE + KV cache), so a larger batch is slower to compile once but
never an error.

The thresholds are vLLM's measured values (H100/B200): FlashInfer's size cap per compute
capability and TP size, and the SP threshold (8 MiB of activations per GPU on sm90, for
hidden sizes of 8192 and up). They are facts from vLLM's tuning; irfuse keeps them until it
measures its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from irfuse import support_matrix
from irfuse.platform import Platform

if TYPE_CHECKING:
    from irfuse.config import CompilationConfig

MiB = 1024 * 1024

# The largest num_tokens a range can hold: the upper end of the fallback range.
UNBOUNDED = 2**63 - 1

# FlashInfer all-reduce fusion: largest all-reduced tensor (MB) per capability and TP size.
FI_ALLREDUCE_FUSION_MAX_SIZE_MB: dict[int, dict[int, float]] = {
    90: {2: 64, 4: 2, 8: 0.5},
    100: {2: 64, 4: 32, 8: 1},
}
# TP sizes FlashInfer's fused all-reduce workspace supports (as vLLM configures it).
FI_ALLREDUCE_WORLD_SIZES: tuple[int, ...] = (2, 4, 8)

# Sequence parallelism pays once each GPU holds at least this much activation (MB), and only
# for hidden sizes from SP_MIN_HIDDEN_SIZE up; per compute capability, CUDA only.
SP_MIN_HIDDEN_SIZE: dict[int, int] = {90: 8192}
SP_MIN_PER_GPU_SIZE_MB: dict[int, float] = {90: 8}

# RoPE + KV-cache fusion pays up to this many tokens (PassConfig's default).
ROPE_KVCACHE_MAX_TOKEN_NUM = 256


@dataclass(frozen=True, order=True)
class Range:
    """An inclusive num_tokens interval [lo, hi]; hi may be UNBOUNDED (the fallback range)."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        if not 1 <= self.lo <= self.hi:
            raise ValueError(f"bad range [{self.lo}, {self.hi}]: need 1 <= lo <= hi")

    def contains(self, num_tokens: int) -> bool:
        return self.lo <= num_tokens <= self.hi

    def is_single_size(self) -> bool:
        return self.lo == self.hi

    @property
    def is_unbounded(self) -> bool:
        return self.hi == UNBOUNDED

    def as_list(self) -> list[int | None]:
        """[lo, hi] for reports and JSON; hi is None for the unbounded fallback range."""
        return [self.lo, None if self.is_unbounded else self.hi]

    def __str__(self) -> str:
        return f"[{self.lo}, {'inf' if self.is_unbounded else self.hi}]"


# ---------------------------------------------------------------------------- thresholds


def fi_allreduce_max_size_mb(platform: Platform, tp: int | None) -> float | None:
    """FlashInfer's default size cap (MB) for the fused all-reduce, or None if it has none
    for this platform and TP size (then the fusion is not turned on by default)."""
    if not platform.is_cuda or tp is None:
        return None
    return FI_ALLREDUCE_FUSION_MAX_SIZE_MB.get(platform.capability or 0, {}).get(tp)


def fi_allreduce_max_tokens(
    max_size_mb: float | None, hidden: int | None, itemsize: int | None
) -> int | None:
    """The size cap in tokens: cap_bytes // (hidden * itemsize); None without a cap."""
    if max_size_mb is None or not hidden or not itemsize:
        return None
    return int(max_size_mb * MiB) // (hidden * itemsize)


def sp_threshold(
    platform: Platform, hidden: int | None, tp: int | None, itemsize: int | None
) -> int | None:
    """The smallest num_tokens at which sequence parallelism pays, or None where it never
    does by default: off CUDA, on a capability without a measured threshold, or for hidden
    sizes below the minimum. It is the token count at which each GPU's share of the
    activations reaches the per-GPU size: size * tp // (hidden * itemsize)."""
    if not platform.is_cuda or not hidden or not tp or not itemsize:
        return None
    cap = platform.capability or 0
    min_hidden = SP_MIN_HIDDEN_SIZE.get(cap)
    per_gpu_mb = SP_MIN_PER_GPU_SIZE_MB.get(cap)
    if min_hidden is None or per_gpu_mb is None or hidden < min_hidden:
        return None
    return int(per_gpu_mb * MiB * tp // (hidden * itemsize))


# ---------------------------------------------------------------------------- ranges


def _require_resolved(config: CompilationConfig) -> None:
    pc = config.pass_config
    unset = [f for f in support_matrix.FLAGS if getattr(pc, f) is None]
    if unset:
        raise ValueError(
            f"compile ranges need a resolved config (irfuse.config.resolve); unset: "
            f"{', '.join(unset)}"
        )


def split_points(
    config: CompilationConfig,
    platform: Platform,
    hidden: int | None,
    tp: int | None,
    itemsize: int | None,
) -> list[int]:
    """The sorted upper ends of the general ranges; the last is max_num_batched_tokens."""
    _require_resolved(config)
    del platform, tp  # the resolved config already holds the platform's caps and thresholds
    pc = config.pass_config
    end = config.max_num_batched_tokens
    candidates: list[int] = []
    if pc.fuse_allreduce_rms:
        ar_max = fi_allreduce_max_tokens(pc.fi_allreduce_fusion_max_size_mb, hidden, itemsize)
        if ar_max is not None:
            candidates.append(ar_max)
    if pc.enable_sp and pc.sp_min_token_num is not None:
        candidates.append(pc.sp_min_token_num - 1)
    if pc.fuse_rope_kvcache:
        candidates.append(pc.rope_kvcache_fusion_max_token_num)
    candidates.extend(config.compile_ranges_split_points or ())
    points = {p for p in candidates if 1 <= p < end}
    points.add(end)
    return sorted(points)


def ranges_from_split_points(points: Iterable[int]) -> list[Range]:
    """Inclusive ranges from 1 up to the largest point: [1, p0], [p0 + 1, p1], ..."""
    out: list[Range] = []
    lo = 1
    for p in sorted(set(points)):
        if p < lo:
            continue
        out.append(Range(lo, p))
        lo = p + 1
    return out


def compile_ranges(
    config: CompilationConfig,
    platform: Platform,
    hidden: int | None,
    tp: int | None,
    itemsize: int | None,
) -> list[Range]:
    """The general ranges in ascending order, then a single-size range for each compile size
    (ascending) that is not already a general range."""
    general = ranges_from_split_points(split_points(config, platform, hidden, tp, itemsize))
    singles = [
        Range(s, s)
        for s in sorted(set(config.compile_sizes or ()))
        if Range(s, s) not in general
    ]
    return general + singles


def range_for(num_tokens: int, ranges: Sequence[Range]) -> Range:
    """The range a call with num_tokens runs in: an exact single-size range first, then the
    general range that holds it; above every range, the fallback [top + 1, inf]."""
    if num_tokens < 1:
        raise ValueError(f"num_tokens must be at least 1, got {num_tokens}")
    singles = [r for r in ranges if r.is_single_size()]
    for r in singles:
        if r.lo == num_tokens:
            return r
    general = [r for r in ranges if not r.is_single_size()] or singles
    for r in general:
        if r.contains(num_tokens):
            return r
    top = max((r.hi for r in general), default=0)
    if num_tokens > top:
        return Range(top + 1, UNBOUNDED)
    raise ValueError(f"num_tokens {num_tokens} falls in no range of {[str(r) for r in ranges]}")


# ---------------------------------------------------------------------------- applicability


def applies(
    pass_name: str,
    rng: Range,
    config: CompilationConfig,
    hidden: int | None = None,
    tp: int | None = None,
    itemsize: int | None = None,
) -> tuple[bool, str]:
    """Whether a pass runs when compiling `rng`, by its range rule in the support matrix.
    Returns (True, "") or (False, why). Whether the pass is enabled at all is the config's
    business (see `plan`)."""
    row = support_matrix.info(pass_name)
    pc = config.pass_config
    rule = row.range_rule
    if rule == "all":
        return True, ""
    if rule == "below-fi-cap":
        ar_max = fi_allreduce_max_tokens(pc.fi_allreduce_fusion_max_size_mb, hidden, itemsize)
        if ar_max is None:
            return True, ""  # no size cap (the CPU reference): every range
        limit = min(ar_max, config.max_num_batched_tokens)
        if rng.hi <= limit:
            return True, ""
        return False, (f"{row.name} runs up to {limit} tokens (FlashInfer size cap "
                       f"{pc.fi_allreduce_fusion_max_size_mb} MB); range {rng} goes beyond")
    if rule == "from-sp-min":
        if pc.sp_min_token_num is None:
            return False, f"{row.name}: no sp_min_token_num"
        if rng.lo < pc.sp_min_token_num:
            return False, (f"{row.name} runs from sp_min_token_num = {pc.sp_min_token_num} "
                           f"tokens; range {rng} starts below")
        if tp is not None and tp > 1:
            if not rng.is_single_size():
                return False, (f"{row.name} splits the tokens {tp} ways, so it needs a single "
                               f"size divisible by TP; range {rng} holds several sizes")
            if rng.lo % tp:
                return False, f"{row.name}: size {rng.lo} is not divisible by TP {tp}"
        return True, ""
    if rule == "up-to-rope-kvcache-max":
        limit = pc.rope_kvcache_fusion_max_token_num
        if rng.hi <= limit:
            return True, ""
        return False, (f"{row.name} runs up to rope_kvcache_fusion_max_token_num = {limit} "
                       f"tokens; range {rng} goes beyond")
    raise ValueError(f"{row.name}: unknown range rule {rule!r}")


def plan(
    config: CompilationConfig,
    rng: Range,
    hidden: int | None = None,
    tp: int | None = None,
    itemsize: int | None = None,
) -> list[dict[str, Any]]:
    """For each pass the resolved config enables, in pipeline order: whether it runs in
    `rng`, and why not. Entries: {"name", "flag", "runs", "reason", "implemented"}."""
    _require_resolved(config)
    out: list[dict[str, Any]] = []
    for row in support_matrix.passes():
        if not getattr(config.pass_config, row.flag):
            continue
        runs, why = applies(row.name, rng, config, hidden, tp, itemsize)
        if runs and not row.implemented:
            runs, why = False, f"{row.name} is not implemented yet"
        out.append({"name": row.name, "flag": row.flag, "runs": runs, "reason": why,
                    "implemented": row.implemented})
    return out
