"""irfuse's dialects, one a module. `DIALECT_MODULES` is the one list of them (with the xDSL
dialects irfuse uses): `irfuse.context` registers it lazily, `registry` loads it at once."""

import importlib

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
