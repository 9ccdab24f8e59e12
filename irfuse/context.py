"""The xDSL context that knows every irfuse dialect.

Dialects are registered lazily (a dialect's module is imported when the parser first meets one
of its ops or attributes), so `irfuse-opt` on a small file imports only what it reads.
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
