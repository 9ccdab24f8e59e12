"""Match-failure remarks: how a pass says what it fused, and why a candidate did not fuse.

A pass calls `remarks.fused(op)` for each site it rewrites and `remarks.missed(op, "why")` for each
candidate it leaves alone (MLIR's `notifyMatchFailure`). The pipeline collects them per pass into
the compile report; outside the pipeline (irfuse-opt, unit tests) they go to a sink nobody reads
unless `collecting()` is used.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.dialects.builtin import FileLineColLoc, NameLoc
from xdsl.ir import Operation


@dataclass
class Remark:
    reason: str
    location: str

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "location": self.location}


@dataclass
class PassRemarks:
    """What one pass run did: sites rewritten and candidates left alone (`remarked`: the ops
    the remarks are at, held so that `explains` can tell a remarked op by identity)."""

    fused: int = 0
    missed: list[Remark] = field(default_factory=list)
    remarked: list[Operation] = field(default_factory=list, repr=False)

    def explains(self, op: Operation) -> bool:
        """Whether a remark of this run is at `op` (or at its source location)."""
        if any(o is op for o in self.remarked):
            return True
        where = location_of(op)
        return where != op.name and any(r.location == where for r in self.missed)


_CURRENT: contextvars.ContextVar[PassRemarks] = contextvars.ContextVar("irfuse_remarks")


def location_of(op: Operation) -> str:
    """`file:line (fx_node)` for an op imported from FX; the op name otherwise."""
    loc = op.location
    if isinstance(loc, NameLoc):
        inner = loc.location
        if isinstance(inner, FileLineColLoc):
            path = inner.filename.data.rsplit("/", 2)
            return f"{'/'.join(path[-2:])}:{inner.line.data} ({loc.desc.data})"
        return loc.desc.data
    return op.name


def current() -> PassRemarks:
    found = _CURRENT.get(None)
    if found is None:
        found = PassRemarks()
        _CURRENT.set(found)
    return found


def fused(count: int = 1) -> None:
    current().fused += count


def missed(op: Operation, reason: str) -> None:
    sink = current()
    sink.missed.append(Remark(reason, location_of(op)))
    sink.remarked.append(op)


@contextmanager
def collecting() -> Iterator[PassRemarks]:
    """Collect the remarks of the passes run inside the block."""
    sink = PassRemarks()
    token = _CURRENT.set(sink)
    try:
        yield sink
    finally:
        _CURRENT.reset(token)
