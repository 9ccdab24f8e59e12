"""Compile ranges: num_tokens intervals compiled separately, each with the passes that pay there.

Some fusions pay only for few tokens (all-reduce + RMSNorm through FlashInfer's size-capped
workspace; RoPE + KV-cache write), some only for many (sequence parallelism and async TP, which
in a full graph run on every range from sp_min_token_num, padding a token count TP does not
divide, and in a piecewise one only on single sizes TP divides, as vLLM). As vLLM does, irfuse
splits num_tokens at those thresholds (`split_points`) into inclusive ranges
`[1, p0], [p0 + 1, p1], ..., [p_{n-1} + 1, max_num_batched_tokens]`, adds a single-size range
`[s, s]` for each explicit compile size, compiles each range lazily at its first use, and
dispatches each call by its num_tokens (an exact compile size wins over a general range). A call
above max_num_batched_tokens runs in a fallback range `[max + 1, inf]` (`UNBOUNDED`, `range_for`;
the backend splits it where a measured kernel choice changes). The thresholds themselves are
`irfuse.thresholds`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from irfuse import support_matrix
from irfuse.config import CompilationConfig
from irfuse.fusions.declare import RangeRule
from irfuse.platform import Platform
from irfuse.thresholds import fi_allreduce_max_tokens

# The largest num_tokens a range can hold: the upper end of the fallback range.
UNBOUNDED = 2**63 - 1


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
    """The sorted upper ends of the general ranges; the last is max_num_batched_tokens.

    Each kept only if it lies in [1, max_num_batched_tokens): for each pass that is on, where
    its range rule (`irfuse.fusions.declare.RangeRule`) bounds it by a threshold field, `up-to`
    a token count gives that count; `up-to-mb` (a size cap, FlashInfer's all-reduce) the cap in
    tokens, cap_bytes // (hidden * itemsize); `from` a token count the count - 1 (so that a
    range starts at the threshold); and the user's compile_ranges_split_points."""
    _require_resolved(config)
    del platform, tp  # the resolved config already holds the platform's caps and thresholds
    pc = config.pass_config
    end = config.max_num_batched_tokens
    candidates: list[int] = []
    for row in support_matrix.passes():
        if getattr(pc, row.flag) and (point := _split_point(row.range_rule, pc, hidden,
                                                             itemsize)) is not None:
            candidates.append(point)
    candidates.extend(config.compile_ranges_split_points or ())
    points = {p for p in candidates if 1 <= p < end}
    points.add(end)
    return sorted(points)


def _bound(rule: RangeRule, pc: Any, hidden: int | None, itemsize: int | None) -> int | None:
    """The token count a rule's threshold gives (a size cap in tokens); None where unset."""
    value = getattr(pc, rule.threshold) if rule.threshold else None
    if rule.kind == "up-to-mb":
        return fi_allreduce_max_tokens(value, hidden, itemsize)
    return value


def _split_point(rule: RangeRule, pc: Any, hidden: int | None,
                 itemsize: int | None) -> int | None:
    """Where a pass's range rule splits num_tokens: the last count of the ranges below it."""
    bound = _bound(rule, pc, hidden, itemsize)
    if bound is None or rule.kind == "all":
        return None
    return bound - 1 if rule.kind == "from" else bound


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
    general range that holds it; above every range, the fallback [top + 1, inf]. Above
    max_num_batched_tokens vLLM raises; irfuse compiles the fallback like any other range, with
    the passes whose rule holds there (no pass bounded from above), so a larger batch is slower
    to compile once but never an error."""
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
    if rule.kind == "all":
        return True, ""
    bound = _bound(rule, pc, hidden, itemsize)
    if rule.kind == "up-to-mb":
        if bound is None:
            return True, ""  # no size cap (the CPU reference): every range
        limit = min(bound, config.max_num_batched_tokens)
        if rng.hi <= limit:
            return True, ""
        return False, (f"{row.name} runs up to {limit} tokens ({rule.threshold} = "
                       f"{getattr(pc, rule.threshold)}); range {rng} goes beyond")
    if rule.kind == "up-to":
        if bound is None or rng.hi <= bound:
            return True, ""
        return False, (f"{row.name} runs up to {rule.threshold} = {bound} tokens; range {rng} "
                       "goes beyond")
    if rule.kind == "from":
        if bound is None:
            return False, f"{row.name}: no {rule.threshold}"
        if rng.lo < bound:
            return False, (f"{row.name} runs from {rule.threshold} = {bound} tokens; range "
                           f"{rng} starts below")
        if tp is not None and tp > 1 and config.piecewise:
            # vLLM's rule for piecewise graphs. Each piece (split at attention) is compiled
            # alone and keeps its outputs whole, so a padded token count would be padded,
            # gathered and sliced again in every piece; vLLM shards only sizes TP divides there.
            if not rng.is_single_size():
                return False, (f"{row.name} in a piecewise graph (split at attention, no "
                               f"Inductor partition) needs a single size divisible by TP "
                               f"(vLLM's rule: every piece splits the tokens evenly, with no "
                               f"padding); range {rng} holds several sizes")
            if rng.lo % tp:
                return False, (f"{row.name} in a piecewise graph needs a size divisible by TP "
                               f"(vLLM's rule); {rng.lo} is not divisible by TP {tp}")
        # A full graph: any range; a count TP does not divide is padded to a multiple of TP in
        # the emitted graph and sliced back (`irfuse.fusions.sharding`'s padding).
        return True, ""
    raise ValueError(f"{row.name}: unknown range rule {rule}")


def plan(
    config: CompilationConfig,
    rng: Range,
    hidden: int | None = None,
    tp: int | None = None,
    itemsize: int | None = None,
) -> list[dict[str, Any]]:
    """For each pass the resolved config enables, in pipeline order: whether it runs in
    `rng`, and why not. Entries: {"name", "flag", "runs", "reason"}."""
    _require_resolved(config)
    out: list[dict[str, Any]] = []
    for row in support_matrix.passes():
        if not getattr(config.pass_config, row.flag):
            continue
        runs, why = applies(row.name, rng, config, hidden, tp, itemsize)
        out.append({"name": row.name, "flag": row.flag, "runs": runs, "reason": why})
    return out


# ---------------------------------------------------------------------------- one graph's plan


@dataclass
class Group:
    """Ranges compiled once together: they run the same passes (pipeline specs, size-aware
    fusions with their size class as `max_tokens`); `skipped` are the enabled passes that do
    not run there, and why."""

    ranges: list[Range]
    passes: list[str]
    skipped: list[tuple[str, str]]


def plan_graph(
    config: CompilationConfig,
    platform: Platform,
    kernel_splits: Sequence[int],
    size_class: Callable[[int], int],
    hidden: int | None,
    tp: int | None,
    itemsize: int | None,
    symbolic: bool,
    hint: int | None,
) -> list[Group]:
    """The compile groups of one graph. A graph whose token count is not symbolic has one
    range, its size. Otherwise ranges are the config's (`compile_ranges`) plus the fallback
    above max_num_batched_tokens, all also ending where a kernel choice changes
    (`kernel_splits`; `size_class(n)` is the first token count of n's choice step)."""
    if not symbolic:
        size = hint or 1
        all_ranges = [Range(size, size)]
    else:
        split_config = copy.copy(config)
        split_config.compile_ranges_split_points = sorted(
            {*(config.compile_ranges_split_points or ()), *kernel_splits}
        )
        all_ranges = compile_ranges(split_config, platform, hidden, tp, itemsize)
        lo = max(r.hi for r in all_ranges) + 1
        for point in (p for p in kernel_splits if p >= lo):
            all_ranges.append(Range(lo, point))
            lo = point + 1
        all_ranges.append(Range(lo, UNBOUNDED))
    groups: dict[tuple[str, ...], Group] = {}
    for rng in all_ranges:
        steps = plan(config, rng, hidden, tp, itemsize)
        specs = pass_specs(steps, rng, kernel_splits, size_class)
        key = tuple(specs)
        if rng.is_single_size() and len(all_ranges) > 1:
            key += (f"size {rng.lo}",)  # a compile size is its own compile, as in vLLM
        group = groups.setdefault(key, Group([], specs, [
            (s["name"], s["reason"]) for s in steps if not s["runs"]]))
        group.ranges.append(rng)
    return list(groups.values())


def pass_specs(steps: Sequence[dict], rng: Range, kernel_splits: Sequence[int],
               size_class: Callable[[int], int]) -> list[str]:
    """The pass specs `plan`'s running steps give for `rng`: a size-aware pass carries the first
    token count of its kernel-choice step (`max_tokens`) where the platform's choices split."""
    max_tokens = size_class(min(rng.hi, 1 << 31)) if kernel_splits else None
    return [_pass_spec(s["name"], max_tokens) for s in steps if s["runs"]]


def _pass_spec(name: str, max_tokens: int | None) -> str:
    if max_tokens is None or not support_matrix.info(name).size_aware:
        return name
    return f"{name}{{max_tokens={max_tokens}}}"
