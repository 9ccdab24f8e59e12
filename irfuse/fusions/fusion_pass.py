"""A fusion's xDSL pass, built from its declaration (`Fusion.pass_class`): its patterns run
through the pattern driver, gated by its kernels' choices (a pattern whose kernel is left to
Inductor on the platform, at the compile range's size, does not fire and says why) and by its
schemes (a site whose quant's scheme the platform's row does not fuse says so); after them,
every candidate the pass left without a remark gets one (`irfuse.fusions.candidates`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.fusions import FUSIONS, candidates
from irfuse.fusions.declare import Fusion
from irfuse.raising.driver import Gate, SchemeGate, run_patterns
from irfuse.raising.match import NoMatch


def kernel_gate(fusion: Fusion) -> Gate:
    """Raise NoMatch where a kernel `fusion`'s patterns emit is left to Inductor on a platform
    at the sizes the graph is compiled for (the driver's kernel gate). The kernel is the
    fusion's own, or another fusion's whose fused op its patterns build (a flag that stands for
    two fusions builds their fused op)."""

    def gate(kernel_name: str, platform: str, max_tokens: int | None) -> None:
        owner = fusion if kernel_name in fusion.kernel_by_name else next(
            f for f in FUSIONS if kernel_name in f.kernel_by_name)
        choice = owner.kernel_by_name[kernel_name].choose(platform, max_tokens)
        if choice.impl == "inductor":
            where = platform if max_tokens is None else f"{platform} at {max_tokens}+ tokens"
            raise NoMatch(f"left to Inductor on {where}: {choice.reason}")

    return gate


def scheme_gate(fusion: Fusion) -> SchemeGate:
    """Raise NoMatch where `fusion` does not fold a quant of a scheme (a `declare.SCHEMES`
    name) into its fused op on a platform: each site is judged by its own scheme, whatever the
    graph's other quants are (the driver's scheme gate)."""

    def gate(scheme: str, platform: str) -> None:
        allowed = fusion.schemes_on(platform)
        if fusion.quant != "independent" and scheme not in allowed:
            raise NoMatch(f"{fusion.name} does not fuse {scheme} on {platform}; it fuses "
                          f"{', '.join(allowed)}")

    return gate


def fusion_pass(fusion: Fusion) -> type[ModulePass]:
    """The ModulePass of `fusion`, named after it, with a `max_tokens` option (the compile
    range's size class, which size-aware fusions' kernel choices read)."""
    patterns = fusion.pattern_objects
    gate = kernel_gate(fusion)
    schemes = scheme_gate(fusion)

    @dataclass(frozen=True)
    class FusionPass(ModulePass):
        name: ClassVar[str] = fusion.name
        declaration: ClassVar[Fusion] = fusion

        max_tokens: int | None = None  # the compile range's size class (size-aware fusions)

        def apply(self, ctx: Context, op: ModuleOp) -> None:
            run_patterns(op, patterns, gate=gate, max_tokens=self.max_tokens,
                         scheme_gate=schemes)
            candidates.account(fusion, op)  # no candidate left unexplained

    FusionPass.__name__ = FusionPass.__qualname__ = "".join(
        w.capitalize() for w in fusion.name.split("-"))
    FusionPass.__doc__ = f"{fusion.name}: {fusion.fuses}."
    return FusionPass
