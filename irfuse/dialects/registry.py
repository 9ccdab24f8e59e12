"""Every irfuse dialect at once, for code that wants them all loaded (tests, scripts).

`irfuse.context.make_context()` registers the same dialects lazily (what `irfuse-opt` uses);
`load_all(ctx)` loads them eagerly into an existing context.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.ir import Dialect

from irfuse.dialects import DIALECT_MODULES, load_dialect

ALL_DIALECTS: tuple[Dialect, ...] = tuple(
    load_dialect(name) for name, module in DIALECT_MODULES.items() if module.startswith("irfuse.")
)
"""The irfuse dialects, the shared types first."""


def load_all(ctx: Context) -> Context:
    """Load every dialect (irfuse's, builtin, func) into `ctx`, skipping those already there."""
    known = set(ctx.registered_dialect_names)
    for name in DIALECT_MODULES:
        if name not in known:
            ctx.load_dialect(load_dialect(name))
    return ctx
