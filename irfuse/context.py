"""The dialects irfuse knows, and the xDSL contexts that load them.

`DIALECT_MODULES` is the one list of irfuse's dialects (with the xDSL dialects irfuse uses).
`make_context` registers them lazily (a dialect's module is imported when the parser first meets
one of its ops or attributes), so `irfuse-opt` on a small file imports only what it reads;
`load_all` loads them at once into an existing context, and `all_dialects()` lists irfuse's own
(tests, scripts).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect

DIALECT_MODULES: dict[str, str] = {
    "builtin": "xdsl.dialects.builtin",
    "func": "xdsl.dialects.func",
    "irfuse": "irfuse.dialects.irfuse",
    "aten": "irfuse.dialects.aten",
    "kernel": "irfuse.dialects.kernel",
    "norm": "irfuse.dialects.norm",
    "quant": "irfuse.dialects.quant",
    "gemm": "irfuse.dialects.gemm",
    "attn": "irfuse.dialects.attn",
    "act": "irfuse.dialects.act",
    "coll": "irfuse.dialects.coll",
    "fused": "irfuse.dialects.fused",
}
"""Dialect name -> the module that defines it (its `Dialect` object is found by name)."""


def load_dialect(name: str) -> Dialect:
    """Import the module of the dialect `name` and return the dialect."""
    module = importlib.import_module(DIALECT_MODULES[name])
    for value in vars(module).values():
        if isinstance(value, Dialect) and value.name == name:
            return value
    raise LookupError(f"module {DIALECT_MODULES[name]} defines no dialect named '{name}'")


def _factory(name: str) -> Callable[[], Dialect]:
    return lambda: load_dialect(name)


def make_context() -> Context:
    """A fresh context with builtin, func and every irfuse dialect registered."""
    ctx = Context()
    for name in DIALECT_MODULES:
        ctx.register_dialect(name, _factory(name))
    return ctx


def load_all(ctx: Context) -> Context:
    """Load every dialect (irfuse's, builtin, func) into `ctx`, skipping those already there."""
    known = set(ctx.registered_dialect_names)
    for name in DIALECT_MODULES:
        if name not in known:
            ctx.load_dialect(load_dialect(name))
    return ctx


def all_dialects() -> tuple[Dialect, ...]:
    """The irfuse dialects, the shared types first (each module imported)."""
    return tuple(
        load_dialect(name) for name, module in DIALECT_MODULES.items()
        if module.startswith("irfuse.")
    )
