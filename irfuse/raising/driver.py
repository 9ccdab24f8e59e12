"""The pattern driver every raise and fuse pass runs on.

A pass is a set of `AnchorPattern`s. Each names the ops it anchors on (ATen targets, op
classes) and rewrites there, or leaves a candidate alone with a remark saying why.
`run_patterns` walks each function body once, forward, never entering decomposition regions
(they hold the chains raising replaced, which no pass may match again) and never iterating to a
fixed point. That is why the walk is the driver's own and not xDSL's `PatternRewriteWalker`,
which visits nested regions and iterates to a fixed point; the patterns are still
`RewritePattern`s, so one without per-block hooks also runs under xDSL's walker
(`match_and_rewrite`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from irfuse import remarks
from irfuse.dialects import aten
from irfuse.dialects.irfuse import module_platform
from irfuse.raising.match import Call, NoMatch, block_ops, call, func_blocks


class Outcome(enum.Enum):
    """What `AnchorPattern.rewrite` did at its anchor (a left-alone candidate raises NoMatch)."""

    REWROTE = "rewrote"
    NO_CANDIDATE = "no candidate"


REWROTE = Outcome.REWROTE
NO_CANDIDATE = Outcome.NO_CANDIDATE

Gate = Callable[[str, str, int | None], None]
"""`(kernel_name, platform, max_tokens)`; raises NoMatch when that kernel is left to Inductor."""

SchemeGate = Callable[[str, str], None]
"""`(scheme, platform)`; raises NoMatch when the pass does not fold a quant of that scheme (a
`support_matrix.SCHEMES` name) into its fused op on that platform."""


@dataclass(eq=False)
class Site:
    """What a pattern may read about the walk of one function block."""

    block: Block
    ops: list[Operation]
    """The top-level ops when the walk of the block began, in order."""
    platform: str
    max_tokens: int | None = None
    gate: Gate | None = None
    module: ModuleOp | None = None
    scheme_gate: SchemeGate | None = None
    scratch: dict[Any, Any] = field(default_factory=dict)
    """Per-block state of patterns that collect sites and pair them in `finish`."""
    _order: dict[Operation, float] | None = field(default=None, init=False, repr=False)

    @property
    def order(self) -> dict[Operation, float]:
        """Position of each top-level op when the walk of the block began (a pattern may number
        ops it inserts in between, as raise-rope does). Built when first asked for."""
        if self._order is None:
            self._order = dict(zip(self.ops, range(len(self.ops))))
        return self._order

    def require_scheme(self, scheme: str) -> None:
        """NoMatch when the pass does not fold a quant of `scheme` in on this platform (no-op
        without a scheme gate): each site is judged by its own quant's scheme."""
        if self.scheme_gate is not None:
            self.scheme_gate(scheme, self.platform)

    @staticmethod
    def of_block(block: Block, platform: str, **kwargs: Any) -> Site:
        return Site(block, block_ops(block), platform, **kwargs)

    def require_kernel(self, kernel_name: str) -> None:
        """NoMatch when the gate leaves `kernel_name` to Inductor here (no-op without a gate)."""
        if self.gate is not None:
            self.gate(kernel_name, self.platform, self.max_tokens)


class AnchorPattern(RewritePattern):
    """A pattern anchored on ATen targets and/or op classes.

    `rewrite(op, rewriter, site)` matches at an anchor and rewrites through `rewriter` (xDSL's
    `PatternRewriter`), returning an `Outcome`: `REWROTE` (a fused or raised site, counted) or
    `NO_CANDIDATE` (nothing here: no count, no remark, the next pattern anchored on the op is
    tried). A candidate it leaves alone raises `NoMatch(why)`, which becomes a remark at the
    anchor's source location in the report; `remark` prefixes the reason of every NoMatch it
    raises (`f"{remark}: {reason}"`). `start` and `finish` run per block around the walk, for
    patterns that collect sites and pair them at the end (`site.scratch[self]` holds their state;
    `attempt` rewrites one collected site)."""

    targets: ClassVar[tuple[str, ...]] = ()
    op_types: ClassVar[tuple[type[Operation], ...]] = ()
    remark: ClassVar[str] = ""

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        raise NotImplementedError

    def start(self, site: Site) -> None:
        """Before the walk of `site.block`."""

    def finish(self, site: Site) -> None:
        """After the walk of `site.block`."""

    def missed(self, op: Operation, reason: str, remark: str | None = None) -> None:
        """Record a remark at `op`, under this pattern's prefix (or `remark`'s)."""
        prefix = self.remark if remark is None else remark
        remarks.missed(op, f"{prefix}: {reason}" if prefix else reason)

    def attempt(self, op: Operation, rewrite: Callable[..., Outcome], *args: Any,
                remark: str | None = None) -> Outcome | NoMatch:
        """Run `rewrite(*args)` for the site anchored at `op` and account for it: a fused count
        when it returns REWROTE; a remark at `op` when it raises NoMatch, which is returned."""
        try:
            outcome = rewrite(*args)
        except NoMatch as miss:
            self.missed(op, str(miss), remark)
            return miss
        if not isinstance(outcome, Outcome):
            raise TypeError(f"{type(self).__name__}: a rewrite returns an Outcome, got {outcome!r}")
        if outcome is REWROTE:
            remarks.fused()
        return outcome

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        """xDSL's entry point, for running the pattern under `PatternRewriteWalker`."""
        block = op.parent_block()
        if block is None or not _anchors(self, op):
            return
        top = op
        while (parent := top.parent_op()) is not None:
            top = parent
        platform = module_platform(top) if isinstance(top, ModuleOp) else "cpu"
        self.attempt(op, self.rewrite, op, rewriter, Site.of_block(block, platform))


class CallPattern(AnchorPattern):
    """An `AnchorPattern` on ATen targets whose `rewrite_call` reads the anchor as a `Call`."""

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        found = call(op)
        assert found is not None, "anchored on a target: an aten.call"
        return self.rewrite_call(found, rewriter, site)

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        raise NotImplementedError


def _anchors(pattern: AnchorPattern, op: Operation) -> bool:
    if isinstance(op, aten.CallOp):
        return op.target.data in pattern.targets
    return isinstance(op, pattern.op_types)


class _Dispatch:
    """The patterns anchored on each ATen target and op class, in the order given."""

    def __init__(self, patterns: Sequence[AnchorPattern]):
        self.patterns = patterns
        self.by_target: dict[str, list[AnchorPattern]] = {}
        for p in patterns:
            for target in p.targets:
                self.by_target.setdefault(target, []).append(p)
        self.typed = [p for p in patterns if p.op_types]
        self.by_type: dict[type[Operation], list[AnchorPattern]] = {}

    def of(self, op: Operation) -> list[AnchorPattern] | None:
        kind = type(op)
        if kind is aten.CallOp:
            return self.by_target.get(op.properties["target"].data)
        if not self.typed:
            return None
        found = self.by_type.get(kind)
        if found is None:
            found = self.by_type[kind] = [p for p in self.typed if issubclass(kind, p.op_types)]
        return found

    def anchors(self, ops: list[Operation]) -> list[tuple[Operation, list[AnchorPattern]]]:
        """The ops some pattern anchors on, with those patterns, in order (`of`, inlined for
        ATen calls: every pass scans every op of the block)."""
        by_target, of, typed = self.by_target, self.of, bool(self.typed)
        found: list[tuple[Operation, list[AnchorPattern]]] = []
        for op in ops:
            if type(op) is aten.CallOp:
                patterns = by_target.get(op.properties["target"].data)
                if patterns:
                    found.append((op, patterns))
            elif typed and (patterns := of(op)):
                found.append((op, patterns))
        return found


def run_patterns(
    module: ModuleOp,
    patterns: Sequence[AnchorPattern],
    *,
    gate: Gate | None = None,
    max_tokens: int | None = None,
    scheme_gate: SchemeGate | None = None,
) -> None:
    """Walk each function block once, in program order, and apply `patterns` at their anchors.
    A block without anchors and without per-block hooks is left alone after one scan.

    The walk goes forward over a snapshot of the block's top-level ops taken when it began; an
    op erased or moved (into a decomposition region) since the snapshot is skipped; at each op
    the patterns anchored on it are tried in order until one rewrites or raises. There is no
    re-walk to a fixed point: a pass's matchers read positions in the snapshot (`Site.order`),
    and ops a rewrite inserts are not visited. Decomposition regions are never entered: they hold
    the chains raising replaced, which no pass may match again."""
    dispatch = _Dispatch(patterns)
    platform = module_platform(module)
    hooked = [p for p in patterns if _has_block_hooks(p)]
    for block in func_blocks(module):
        ops = block_ops(block)
        anchors = dispatch.anchors(ops)
        if not anchors and not hooked:
            continue
        site = Site(block, ops, platform, max_tokens=max_tokens, gate=gate, module=module,
                    scheme_gate=scheme_gate)
        for p in patterns:
            p.start(site)
        for op, candidates in anchors:
            if op.parent is not block:
                continue  # erased / moved into a region since the snapshot
            rewriter = PatternRewriter(op)
            for p in candidates:
                if p.attempt(op, p.rewrite, op, rewriter, site) is not NO_CANDIDATE \
                        or op.parent is not block:
                    break
        for p in patterns:
            p.finish(site)


def _has_block_hooks(pattern: AnchorPattern) -> bool:
    kind = type(pattern)
    return kind.start is not AnchorPattern.start or kind.finish is not AnchorPattern.finish


class PatternPass(ModulePass):
    """A pass that runs `patterns` through `run_patterns`. A fusion pass declares its
    `max_tokens: int | None = None` option and sets `gate`."""

    patterns: ClassVar[tuple[AnchorPattern, ...]] = ()
    gate: ClassVar[Gate | None] = None
    max_tokens: ClassVar[int | None] = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_patterns(op, self.patterns, gate=type(self).gate, max_tokens=self.max_tokens)
