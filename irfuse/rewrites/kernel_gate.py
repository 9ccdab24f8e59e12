"""The fusion passes' question to the kernel table: does this platform run our fused kernel?

Where `irfuse.emit.kernel_choice` records `inductor` for a fused op on a platform (Inductor's
code for the unfused pattern was measured faster there), the pass leaves the pattern alone and
says so in the report, with the measurement.
"""

from __future__ import annotations

from irfuse.lowering.match import NoMatch


def check_kernel(kernel: str, platform: str) -> None:
    """Raise NoMatch when the pattern is left to Inductor on `platform`."""
    from irfuse.emit.kernel_choice import choose

    choice = choose(kernel, platform)
    if choice.impl == "inductor":
        raise NoMatch(f"left to Inductor on {platform}: {choice.reason}")
