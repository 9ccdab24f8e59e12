"""The pattern driver: what it visits (top-level ops in order, never a decomposition region,
never an op erased or moved since the walk began), how a miss becomes a remark at the anchor's
source location, how a rewrite is counted, the kernel gate and the per-block hooks."""

from __future__ import annotations

from typing import ClassVar

import pytest
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, NameLoc, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker
from xdsl.rewriter import InsertPoint

from irfuse import remarks
from irfuse.context import make_context
from irfuse.dialects import aten
from irfuse.dialects.irfuse import set_target
from irfuse.dialects.norm import RmsNormOp
from irfuse.ir import call_args
from irfuse.raising.aten_ops import MUL_TENSOR, NEG, RSQRT
from irfuse.raising.driver import (
    NO_CANDIDATE,
    REWROTE,
    AnchorPattern,
    Outcome,
    PatternPass,
    Site,
    run_patterns,
)
from irfuse.raising.match import NoMatch
from irfuse.raising.raise_rms_norm import RaiseRmsNorm

T = "!irfuse.tensor<[s0, 64], f32>"
R = "!irfuse.tensor<[s0, 1], f32>"
NORM = f"""
func.func @f(%x: {T}, %w: !irfuse.tensor<[64], f32>) -> {T} {{
  %sq = aten.call "aten::pow.Tensor_Scalar"(%x, 2) : ({T}) -> {T}
  %var = aten.call "aten::mean.dim"(%sq, [-1], true) : ({T}) -> {R}
  %ve = aten.call "aten::add.Tensor"(%var, 1.0e-06) : ({R}) -> {R}
  %rstd = aten.call "aten::rsqrt.default"(%ve) : ({R}) -> {R}
  %n = aten.call "aten::mul.Tensor"(%x, %rstd) : ({T}, {R}) -> {T}
  %a = aten.call "aten::neg.default"(%n) : ({T}) -> {T}
  %b = aten.call "aten::neg.default"(%a) : ({T}) -> {T}
  %c = aten.call "aten::neg.default"(%b) : ({T}) -> {T}
  func.return %c : {T}
}}
"""


def parse(text: str = NORM) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


class Recorder(AnchorPattern):
    """Records every op the driver hands it; misses on `neg` ops whose input is a `neg`."""

    targets = (NEG, RSQRT, MUL_TENSOR)
    remark = "not a test site"
    seen: ClassVar[list[Operation]] = []

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        Recorder.seen.append(op)
        if isinstance(op.operands[0].owner, aten.CallOp) and op.operands[0].owner.target.data == NEG:
            raise NoMatch("its input is a neg")
        return NO_CANDIDATE


@pytest.fixture(autouse=True)
def _clear() -> None:
    Recorder.seen.clear()


def test_walks_top_level_anchors_in_order_and_never_a_decomposition() -> None:
    module = parse()
    RaiseRmsNorm().apply(make_context(), module)  # rsqrt and mul.Tensor move into the region
    (norm,) = [o for o in module.walk() if isinstance(o, RmsNormOp)]
    inside = set(norm.regions[0].walk())
    assert any(isinstance(o, aten.CallOp) and o.target.data == RSQRT for o in inside)
    with remarks.collecting():
        run_patterns(module, [Recorder()])
    assert [o.target.data for o in Recorder.seen] == [NEG, NEG, NEG]  # type: ignore[attr-defined]
    assert not inside & set(Recorder.seen)


def test_a_miss_is_a_remark_at_the_anchor_with_its_source_location() -> None:
    module = parse()
    negs = [o for o in module.walk() if isinstance(o, aten.CallOp) and o.target.data == NEG]
    negs[1].location = NameLoc(StringAttr("neg_1"),
                               FileLineColLoc(StringAttr("/src/models/llama.py"), IntAttr(42),
                                              IntAttr(8)))
    with remarks.collecting() as sink:
        run_patterns(module, [Recorder()])
    assert sink.fused == 0
    assert [(r.location, r.reason) for r in sink.missed] == [
        ("models/llama.py:42 (neg_1)", "not a test site: its input is a neg"),
        ("aten.call", "not a test site: its input is a neg"),
    ]


class EraseNext(AnchorPattern):
    """Erases the `neg` that reads this one (rewiring its users) and counts as a rewrite."""

    targets = (NEG,)
    seen: ClassVar[list[Operation]] = []

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        EraseNext.seen.append(op)
        (use,) = op.results[0].uses
        nxt = use.operation
        if not isinstance(nxt, aten.CallOp) or nxt.target.data != NEG:
            return NO_CANDIDATE
        rewriter.replace_all_uses_with(nxt.results[0], op.results[0])
        rewriter.erase(nxt)
        return REWROTE


def test_ops_erased_since_the_walk_began_are_skipped() -> None:
    module = parse()
    a, b, c = [o for o in module.walk() if isinstance(o, aten.CallOp) and o.target.data == NEG]
    EraseNext.seen.clear()
    with remarks.collecting() as sink:
        run_patterns(module, [EraseNext()])
    assert EraseNext.seen == [a, c]  # b was erased by a's rewrite; c reads a now
    assert b.parent is None
    assert sink.fused == 1


class Gated(AnchorPattern):
    """Asks the gate for a kernel at each rsqrt; collects in the walk, reports in `finish`."""

    targets = (RSQRT,)
    remark = "not gated"

    def start(self, site: Site) -> None:
        site.scratch[self] = []

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        site.require_kernel("some_kernel")
        site.scratch[self].append((op, site.order[op]))
        return NO_CANDIDATE

    def finish(self, site: Site) -> None:
        for op, _ in site.scratch[self]:
            self.attempt(op, lambda: REWROTE)


def test_gate_sees_kernel_platform_and_max_tokens_and_its_refusal_is_a_remark() -> None:
    module = parse()
    set_target(module, "cuda:sm90")
    asked: list[tuple[str, str, int | None]] = []

    def gate(kernel: str, platform: str, max_tokens: int | None) -> None:
        asked.append((kernel, platform, max_tokens))
        if max_tokens is not None:
            raise NoMatch(f"left to Inductor at {max_tokens}+ tokens")

    with remarks.collecting() as sink:
        run_patterns(module, [Gated()], gate=gate)
    assert asked == [("some_kernel", "cuda:sm90", None)]
    assert sink.fused == 1 and not sink.missed  # counted by `finish`, after the walk
    with remarks.collecting() as sink:
        run_patterns(module, [Gated()], gate=gate, max_tokens=512)
    assert sink.fused == 0
    assert [r.reason for r in sink.missed] == ["not gated: left to Inductor at 512+ tokens"]


class Hooks(PatternPass):
    name = "test-hooks"
    patterns = (Gated(),)


def test_pattern_pass_runs_its_patterns_without_a_gate() -> None:
    with remarks.collecting() as sink:
        Hooks().apply(make_context(), parse())
    assert sink.fused == 1


def test_a_pattern_also_runs_under_xdsl_walker() -> None:
    module = parse()
    with remarks.collecting() as sink:
        PatternRewriteWalker(Recorder(), apply_recursively=False).rewrite_module(module)
    assert len(Recorder.seen) == 5  # rsqrt, mul.Tensor, three negs
    assert [r.reason for r in sink.missed] == ["not a test site: its input is a neg"] * 2


class EraseThenRead(AnchorPattern):
    """At the rsqrt: erases the last neg and adds a neg, then reads `site.order` (first read
    after a rewrite: it must still be the block as the walk began)."""

    targets = (RSQRT,)
    orders: ClassVar[list[dict[Operation, float]]] = []

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        last = site.block.last_op.operands[0].owner  # the neg `func.return` reads
        rewriter.replace_all_uses_with(last.results[0], last.operands[0])
        rewriter.erase(last)
        rewriter.insert(aten.CallOp(NEG, [op.results[0]], [call_args.OperandRefAttr(IntAttr(0))],
                                    [op.results[0].type]), InsertPoint.after(op))
        EraseThenRead.orders.append(site.order)
        return REWROTE


def test_order_is_the_block_when_the_walk_began_even_if_first_read_after_a_rewrite() -> None:
    module = parse()
    block = module.ops.first.body.block
    before = list(block.ops)
    EraseThenRead.orders.clear()
    with remarks.collecting():
        run_patterns(module, [EraseThenRead()])
    (order,) = EraseThenRead.orders
    assert list(order) == before and list(order.values()) == list(range(len(before)))
    assert len(list(block.ops)) == len(before)  # one neg erased, one added


class HooksOnly(AnchorPattern):
    """Anchors on an op the block does not have; its hooks run all the same."""

    targets = ("aten::sigmoid.default",)
    calls: ClassVar[list[str]] = []

    def start(self, site: Site) -> None:
        HooksOnly.calls.append("start")

    def finish(self, site: Site) -> None:
        HooksOnly.calls.append("finish")


def test_block_hooks_run_where_nothing_anchors() -> None:
    HooksOnly.calls.clear()
    run_patterns(parse(), [HooksOnly()])
    assert HooksOnly.calls == ["start", "finish"]


class ReturnsBool(AnchorPattern):
    """The old contract (a bool): refused, so a rewrite cannot be counted by accident."""

    targets = (RSQRT,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        return True  # type: ignore[return-value]


def test_a_rewrite_must_return_an_outcome() -> None:
    with remarks.collecting(), pytest.raises(TypeError, match="returns an Outcome"):
        run_patterns(parse(), [ReturnsBool()])


class CountsRewriter(AnchorPattern):
    """Erases through the rewriter it is given: the rewriter sees the action."""

    targets = (NEG,)
    actions: ClassVar[list[bool]] = []

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        (use,) = op.results[0].uses
        if use.operation is site.block.last_op:
            return NO_CANDIDATE
        rewriter.replace_all_uses_with(op.results[0], op.operands[0])
        rewriter.erase(op)
        CountsRewriter.actions.append(rewriter.has_done_action)
        return REWROTE


def test_rewrite_gets_a_rewriter_per_anchor() -> None:
    CountsRewriter.actions.clear()
    with remarks.collecting() as sink:
        run_patterns(parse(), [CountsRewriter()])
    assert CountsRewriter.actions == [True, True] and sink.fused == 2
