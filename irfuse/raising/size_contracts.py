"""Size contracts of vLLM's custom ops, settled in the graph's shape environment before import.

vLLM's `_C` ops check their sizes in their kernels, not in their fake (meta) kernels, so a traced
graph never learns that `_C.rms_norm(result, input, weight, eps)` means `input.size(-1) ==
weight.size(0)`, or that `_C.fused_add_rms_norm(input, residual, ...)` means one shape for both.
Under `torch.compile(..., dynamic=True)` the hidden size of an input is then a symbol (`s81`)
that nothing equates with the weight's 64, and two separately `mark_dynamic`'ed inputs carry two
token symbols; raising compares sizes and gives up.

Before import, each such contract is decided in the ShapeEnv the graph's fake values share: a
pair already known equal (`statically_known_true`) is left alone; a pair whose size hints (the
traced sizes) are equal is guarded equal (`guard_bool`), which records a replacement the
imported types then read (`s81` becomes 64) and a Dynamo guard, so a call where they differ is
traced again instead of running kernels built for the equality; a pair whose hints differ is
left, and raising says why it did not raise. Each contract is one the op's computation needs
(its kernel reads one weight element per hidden element, adds the residual element by element,
writes a result of the input's shape): a call that broke it would be wrong in eager too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import guard_bool, statically_known_true

from irfuse import targets
from irfuse.raising.aten_ops import (
    AUTO_FUNCTIONALIZED,
    AUTO_FUNCTIONALIZED_V2,
    VLLM_DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT,
    VLLM_DYNAMIC_SCALED_FP8_QUANT,
    VLLM_FUSED_ADD_RMS_NORM,
    VLLM_RMS_NORM,
    VLLM_STATIC_SCALED_FP8_QUANT,
)

LAST = -1
SHAPE = None
"""A contract `(a, da, b, db)`: argument a's dim da equals argument b's dim db; dims `SHAPE`
(None): the two arguments have one shape."""

CONTRACTS: dict[str, tuple[tuple[str, int | None, str, int | None], ...]] = {
    VLLM_RMS_NORM: (("input", LAST, "weight", 0), ("result", SHAPE, "input", SHAPE)),
    VLLM_FUSED_ADD_RMS_NORM: (("input", LAST, "weight", 0), ("residual", SHAPE, "input", SHAPE)),
    VLLM_STATIC_SCALED_FP8_QUANT: (("result", SHAPE, "input", SHAPE),),
    VLLM_DYNAMIC_SCALED_FP8_QUANT: (("result", SHAPE, "input", SHAPE),),
    VLLM_DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT: (("result", SHAPE, "input", SHAPE),),
}
"""vLLM op -> the size equalities its computation requires."""

_HOPS = (AUTO_FUNCTIONALIZED, AUTO_FUNCTIONALIZED_V2)


def settle(gm: torch.fx.GraphModule, marked: frozenset[str] = frozenset()) -> int:
    """Guard every contract of the graph's vLLM op calls that its traced sizes satisfy; returns
    how many size pairs were newly guarded equal. A graph without symbolic sizes is untouched.
    A symbol in `marked` (a dim the user marked dynamic) is never guarded equal to a number:
    Dynamo refuses to specialize such a dim, so that contract is left to raising's remark."""
    guarded = 0
    for node in gm.graph.nodes:
        found = _vllm_call(node) if node.op == "call_function" else None
        if found is None:
            continue
        target, args = found
        for a, da, b, db in CONTRACTS[target]:
            ta, tb = _fake(args.get(a)), _fake(args.get(b))
            if ta is None or tb is None:
                continue
            for x, y in _pairs(ta, da, tb, db):
                guarded += _settle_pair(x, y, marked)
    return guarded


def _vllm_call(node: torch.fx.Node) -> tuple[str, dict[str, Any]] | None:
    """(the vLLM op's name, its arguments by schema name) for an `auto_functionalized[_v2]`
    call of an op with contracts; a v2 mutable argument is its base (views are left alone)."""
    if targets.name_of(node.target) not in _HOPS or not node.args:
        return None
    op = node.args[0]
    if not isinstance(op, torch._ops.OpOverload):
        return None
    name = targets.name_of(op)
    if name not in CONTRACTS:
        return None
    args = dict(node.kwargs)
    bases = args.get("_all_bases")
    if isinstance(bases, list | tuple):
        for key in list(args):
            if not (key.startswith("_") and key.endswith("_base_index")):
                continue
            arg = key[1 : -len("_base_index")]
            index = args[key]
            viewed = any(f"_{arg}_{k}" in args for k in ("size", "stride", "slice_dim"))
            if isinstance(index, int) and 0 <= index < len(bases) and not viewed:
                args[arg] = bases[index]
    return name, args


def _fake(arg: Any) -> torch.Tensor | None:
    if not isinstance(arg, torch.fx.Node):
        return None
    val = arg.meta.get("val")
    return val if isinstance(val, torch.Tensor) else None


def _pairs(
    a: torch.Tensor, da: int | None, b: torch.Tensor, db: int | None
) -> Iterator[tuple[Any, Any]]:
    if da is SHAPE or db is SHAPE:
        if a.dim() == b.dim():
            yield from zip(a.shape, b.shape, strict=True)
        return
    if a.dim() > 0 and b.dim() > 0 and -a.dim() <= da < a.dim() and -b.dim() <= db < b.dim():
        yield a.shape[da], b.shape[db]


def _settle_pair(x: Any, y: Any, marked: frozenset[str]) -> int:
    if not isinstance(x, torch.SymInt) and not isinstance(y, torch.SymInt):
        return 0
    equal = x == y
    if statically_known_true(equal):
        return 0
    if any(isinstance(a, torch.SymInt) and not isinstance(b, torch.SymInt)
           and {str(s) for s in a.node.expr.free_symbols} & marked for a, b in ((x, y), (y, x))):
        return 0
    if _hint(x) is None or _hint(x) != _hint(y):
        return 0
    return int(guard_bool(equal))


def _hint(size: Any) -> int | None:
    if isinstance(size, int):
        return size
    hint = size.node.hint
    return None if hint is None else int(hint)
