"""The compile report: what was raised, what each pass fused and why the rest did not, timings.

One report per compiled graph and compile range, written as `report.json` in the dump folder and
kept in memory (`irfuse.reports()`); `Report` says what each part holds and `Report.to_dict` its
schema. It also says which kernel implementation each fused op got and why, and, inside vLLM,
which passes did not run in this compile and why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from irfuse.remarks import Remark


@dataclass
class PassRecord:
    name: str
    count: int
    missed: list[Remark]
    ms: float

    def to_dict(self, count_key: str, missed_key: str) -> dict[str, Any]:
        return {
            "name": self.name,
            count_key: self.count,
            missed_key: [r.to_dict() for r in self.missed],
            "ms": round(self.ms, 3),
        }


@dataclass
class StageRecord:
    name: str
    ms: float
    ops: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ms": round(self.ms, 3), "ops": self.ops}


@dataclass
class KernelRecord:
    op: str
    impl: str
    reason: str
    calls: int

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "impl": self.impl, "reason": self.reason, "calls": self.calls}


@dataclass
class Report:
    """One compiled graph's (and compile range's) report.

    `kernels`: each `irfuse::` op the graph calls, the implementation select-kernels chose for
    the platform and why (the kernel's declared choice: a measurement, or a rule such as
    "FlashInfer's NVFP4 all-reduce fusion needs sm100+"). `error` is set when the pipeline failed
    and the graph ran without irfuse's rewrites; `host` when irfuse ran as a pass inside another
    compiler (vLLM: `irfuse.vllm_plugin`). `off`: every pass that does not run in this compile
    and why (filled inside vLLM; empty elsewhere).
    """

    graph: str
    range: list[int] | None
    platform: str
    config: dict[str, Any]
    raised: dict[str, int] = field(default_factory=dict)
    raise_passes: list[PassRecord] = field(default_factory=list)
    passes: list[PassRecord] = field(default_factory=list)
    stages: list[StageRecord] = field(default_factory=list)
    kernels: list[KernelRecord] = field(default_factory=list)
    error: str | None = None
    host: dict[str, Any] | None = None
    off: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """What `report.json` holds (older reports lack `kernels` and `off`):

            {"graph": str, "range": [lo, hi] | null, "platform": str,
             "config": {resolved PassConfig}, "raised": {kind: count},
             "raise": [{"name": str, "raised": int, "not_raised": [{"reason", "location"}],
                        "ms": float}],
             "passes": [{"name": str, "fused": int, "not_fused": [{"reason", "location"}],
                         "ms": float}],
             "stages": [{"name": str, "ms": float, "ops": int}],
             "kernels": [{"op": str, "impl": str, "reason": str, "calls": int}],
             "error": str | null,
             "host": {"name", "version", "hook", "compile_range"} | null,
             "off": {pass name: why it does not run in this compile}}
        """
        return {
            "graph": self.graph,
            "range": self.range,
            "platform": self.platform,
            "config": self.config,
            "raised": self.raised,
            "raise": [p.to_dict("raised", "not_raised") for p in self.raise_passes],
            "passes": [p.to_dict("fused", "not_fused") for p in self.passes],
            "stages": [s.to_dict() for s in self.stages],
            "kernels": [k.to_dict() for k in self.kernels],
            "error": self.error,
            "host": self.host,
            "off": self.off,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def fused(self, pass_name: str) -> int:
        """How many sites a pass fused (0 if it did not run)."""
        return sum(p.count for p in self.passes if p.name == pass_name)

    def format_table(self) -> str:
        """The report as text tables, for the CLI and the demo."""
        lines = [f"graph {self.graph}  range {self.range or 'all'}  platform {self.platform}"]
        if self.host:
            lines[0] += f"  inside {self.host['name']} {self.host['version']}"
        if self.error:
            lines.append(f"  irfuse did not rewrite this graph: {self.error}")
        raised = ", ".join(f"{k} {v}" for k, v in self.raised.items() if v)
        lines.append(f"  raised: {raised or 'nothing'}")
        lines.append(f"  {'pass':<28}{'fused':>7}{'ms':>9}  not fused (why)")
        for record in self.passes:
            reasons = _summarize(record.missed)
            lines.append(f"  {record.name:<28}{record.count:>7}{record.ms:>9.1f}  {reasons}")
        misses = [r for p in self.raise_passes for r in p.missed]
        if misses:
            lines.append(f"  not raised: {_summarize(misses)}")
        for k in self.kernels:
            lines.append(f"  kernel {k.op} x{k.calls}: {k.impl} ({k.reason})")
        if self.off:
            lines.append("  off: " + "; ".join(f"{n} ({why})" for n, why in self.off.items()))
        stages = "  ".join(f"{s.name} {s.ms:.0f}ms" for s in self.stages)
        lines.append(f"  stages: {stages}")
        return "\n".join(lines)


def _summarize(remarks: list[Remark]) -> str:
    if not remarks:
        return "-"
    counts: dict[str, int] = {}
    for r in remarks:
        counts[r.reason] = counts.get(r.reason, 0) + 1
    return "; ".join(f"{reason} (x{n})" if n > 1 else reason for reason, n in counts.items())
