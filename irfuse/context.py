"""The xDSL context that knows every irfuse dialect.

Dialects are registered lazily (a dialect's module is imported when the parser first meets one
of its ops or attributes), so `irfuse-opt` on a small file imports only what it reads.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect

from irfuse.dialects import DIALECT_MODULES, load_dialect


def _factory(name: str) -> Callable[[], Dialect]:
    return lambda: load_dialect(name)


def make_context() -> Context:
    """A fresh context with builtin, func and every irfuse dialect registered."""
    ctx = Context()
    for name in DIALECT_MODULES:
        ctx.register_dialect(name, _factory(name))
    return ctx
