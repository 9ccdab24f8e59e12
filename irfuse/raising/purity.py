"""Which ATen call targets are pure: the one purity rule of cse-pure and of `match.clone_shared`.

Pure is decided from the op's torch schema and tags: an `aten::` overload that mutates nothing,
writes no `out=`, has a result, is not tagged `nondeterministic_seeded` (random: `rand*`,
`dropout`, `bernoulli`, `normal`, ...), `nondeterministic_bitwise`, `data_dependent_output` or
`dynamic_output_shape` (`item`, `nonzero`: their unbacked symbols name one op's result), and is
not `empty*` (undefined contents) or random by name. Other namespaces (collectives, irfuse's and
vLLM's custom ops), higher-order ops and Python callables are never pure; factories (`full`,
`scalar_tensor`, `zeros`) have no operands, so two are one value when their arguments are. The
result is cached per target string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from irfuse import targets
from irfuse.raising.aten_ops import (
    AUTO_FUNCTIONALIZED,
    AUTO_FUNCTIONALIZED_V2,
    TRITON_KERNEL_WRAPPER_FUNCTIONAL,
)

PURE = "pure"
UNMERGEABLE = "unmergeable"  # pure enough to leave in place, but two of them are not one value
OTHER = "other"  # not merged, writes nothing
WRITES = "writes"  # mutates some of its operands: a mutation region boundary

RANDOM_NAMES = (
    "rand", "dropout", "bernoulli", "normal", "uniform", "multinomial", "poisson",
    "exponential", "geometric", "cauchy", "log_normal", "rrelu",
)
"""Op base names (or name parts) that draw random numbers, on top of the schema's tag."""

UNDEFINED_NAMES = ("empty", "new_empty", "_empty")
"""Op base name prefixes whose results have undefined contents."""

FUNCTIONAL_HOPS = (AUTO_FUNCTIONALIZED, AUTO_FUNCTIONALIZED_V2, TRITON_KERNEL_WRAPPER_FUNCTIONAL)
"""Higher-order ops that write nothing (the others are treated as writing their operands): the
functionalized calls of custom ops and of user Triton kernels (which clone what they write)."""

_NOT_MERGED_TAGS = (
    ("nondeterministic_seeded", "random op"),
    ("nondeterministic_bitwise", "op is not bitwise deterministic"),
    ("data_dependent_output", "data-dependent result"),
    ("dynamic_output_shape", "data-dependent result shape"),
)
_WRITE_TAGS = ("out", "inplace")


@dataclass(frozen=True)
class TargetInfo:
    """What cse-pure knows of a call target."""

    kind: str
    reason: str = ""  # why an UNMERGEABLE target does not merge
    schema: Any = None  # the torch schema (for WRITES: which arguments it writes)
    aliases_self: bool = False  # the result is a view of argument 0


_TARGETS: dict[str, TargetInfo] = {}


def target_info(target: str) -> TargetInfo:
    """Classify a target string (cached: graphs repeat a few dozen targets)."""
    found = _TARGETS.get(target)
    if found is None:
        found = _TARGETS[target] = _classify(target)
    return found


def _classify(target: str) -> TargetInfo:
    if target.startswith("py:") or target in FUNCTIONAL_HOPS:
        return TargetInfo(OTHER)
    try:
        op = targets.resolve(target)
    except targets.UnknownTarget:
        return TargetInfo(WRITES)
    if not isinstance(op, torch._ops.OpOverload):
        return TargetInfo(WRITES)  # another higher-order op: it may write its operands
    schema = op._schema
    if schema.is_mutable:
        return TargetInfo(WRITES, schema=schema)
    if not target.startswith("aten::") or not schema.returns:
        return TargetInfo(OTHER)
    tags = set(op.tags)
    # Tags differ between torch versions (2.11 has no `out` tag): only those this one has.
    if any(getattr(torch.Tag, name, None) in tags for name in _WRITE_TAGS):
        return TargetInfo(WRITES, schema=schema)
    base = schema.name.split("::", 1)[1]
    if base.endswith("_"):
        return TargetInfo(WRITES, schema=schema)
    for name, reason in _NOT_MERGED_TAGS:
        if getattr(torch.Tag, name, None) in tags:
            return TargetInfo(UNMERGEABLE, reason)
    if any(name in base for name in RANDOM_NAMES):
        return TargetInfo(UNMERGEABLE, "random op")
    if base.startswith(UNDEFINED_NAMES):
        return TargetInfo(UNMERGEABLE, "result contents are undefined (empty)")
    aliases = schema.returns[0].alias_info is not None
    return TargetInfo(PURE, aliases_self=aliases and bool(schema.arguments))
