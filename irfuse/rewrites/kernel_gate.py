"""The fusion passes' question to the kernel table: does this platform run our fused kernel?

Where `irfuse.emit.kernel_choice` records `inductor` for a fused op on a platform (Inductor's
code for the unfused pattern was measured faster there), the pass leaves the pattern alone and
says so in the report, with the measurement.
"""

from __future__ import annotations

from irfuse.lowering.driver import Gate
from irfuse.lowering.match import NoMatch


def check_kernel(kernel: str, platform: str, max_tokens: int | None) -> None:
    """Raise NoMatch when the pattern is left to Inductor on `platform` for the token counts
    the graph is compiled for (`max_tokens`: the size class of its compile range; None: any
    size, where the choice for few tokens is taken)."""
    # UPWARD IMPORT (rewrites -> emit), confined to this adapter: the kernel table moves below
    # the rewrites later, and this import goes with it.
    from irfuse.emit.kernel_choice import choose

    choice = choose(kernel, platform, max_tokens)
    if choice.impl == "inductor":
        where = platform if max_tokens is None else f"{platform} at {max_tokens}+ tokens"
        raise NoMatch(f"left to Inductor on {where}: {choice.reason}")


KERNEL_GATE: Gate = check_kernel
"""The gate the fusion passes run under (`irfuse.lowering.driver.Gate`)."""
