"""Size contracts of vLLM's custom ops, settled in the graph's shape environment before import.

vLLM's `_C` ops check their sizes in their kernels, not in their fake kernels, so a traced graph
never learns that `_C.rms_norm(result, input, weight, eps)` means `input.size(-1) ==
weight.size(0)`, or that `_C.fused_add_rms_norm` means one shape for input and residual. Under
`dynamic=True` the hidden size is then a symbol nothing equates with the weight's, and raising
gives up.

Each such contract is decided in the ShapeEnv the fake values share: a pair known equal is left
alone; a pair whose traced sizes are equal is guarded equal (a replacement the imported types
read, and a Dynamo guard, so a call where they differ is traced again); a pair whose sizes differ
is left, and raising says why. Each contract is one the op's computation needs: a call that broke
it would be wrong in eager too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import guard_bool, statically_known_true
from torch.utils._sympy.functions import FloorDiv

from irfuse import targets
from irfuse.raising.aten_ops import (
    AUTO_FUNCTIONALIZED,
    AUTO_FUNCTIONALIZED_V2,
    SLICE_TENSOR,
    VLLM_DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT,
    VLLM_DYNAMIC_SCALED_FP8_QUANT,
    VLLM_FUSED_ADD_RMS_NORM,
    VLLM_PER_TOKEN_GROUP_FP8_QUANT,
    VLLM_RMS_NORM,
    VLLM_SILU_AND_MUL,
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
    VLLM_PER_TOKEN_GROUP_FP8_QUANT: (("output_q", SHAPE, "input", SHAPE),),
    VLLM_SILU_AND_MUL: (),
}
"""vLLM op -> the size equalities its computation requires."""

EVEN_LAST: dict[str, str] = {VLLM_SILU_AND_MUL: "input"}
"""vLLM op -> the argument whose last dim its computation cuts in halves (`d = x.shape[-1] //
2`, an output `[..., d]`): guarded even where symbolic (`_guard_even`)."""

_HOPS = (AUTO_FUNCTIONALIZED, AUTO_FUNCTIONALIZED_V2)


def settle(gm: torch.fx.GraphModule, marked: frozenset[str] = frozenset()) -> int:
    """Guard every contract of the graph's vLLM op calls that its traced sizes satisfy, and the
    evenness of a symbolic width cut into two halves (`_settle_halves`); returns how many were
    newly guarded. A graph without symbolic sizes is untouched. A symbol in `marked` (a dim the
    user marked dynamic) is never guarded equal to a number nor even: Dynamo refuses to
    specialize such a dim, so that contract is left to raising's remark."""
    guarded = _settle_halves(gm, marked)
    for node in gm.graph.nodes:
        found = _vllm_call(node) if node.op == "call_function" else None
        if found is None:
            continue
        target, args = found
        val = _fake(args.get(EVEN_LAST.get(target, "")))
        if val is not None and val.dim() > 0:
            guarded += _guard_even(val.shape[-1], marked)
        for a, da, b, db in CONTRACTS[target]:
            ta, tb = _fake(args.get(a)), _fake(args.get(b))
            if ta is None or tb is None:
                continue
            for x, y in _pairs(ta, da, tb, db):
                guarded += _settle_pair(x, y, marked)
    return guarded


def _settle_halves(gm: torch.fx.GraphModule, marked: frozenset[str]) -> int:
    """A gated activation's `x[..., :s // 2]` and `x[..., s // 2:]` of a symbolic width s
    (vLLM's SiLU·Mul contract: `d = x.shape[-1] // 2`, an output `[..., d]`): the two halves
    are of one width only when s is even, and a graph whose sizes say so
    (`s - s // 2` against `s // 2`) raises as a product of two other shapes. Where the traced
    s is even, guard it (`Mod(s, 2) == 0`, a Dynamo guard: an odd width is traced again);
    the importer then reads `s - s // 2` as `s // 2` (`fx_import`)."""
    starts: dict[tuple[torch.fx.Node, int], list[Any]] = {}
    ends: dict[tuple[torch.fx.Node, int], list[Any]] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function" or targets.name_of(node.target) != SLICE_TENSOR:
            continue
        source = node.args[0] if node.args else None
        val = _fake(source)
        if val is None or val.dim() == 0:
            continue
        dim, start, end = (list(node.args[1:4]) + [0, None, None])[:3]
        if not isinstance(dim, int):
            continue
        key = (source, dim % val.dim())
        starts.setdefault(key, []).append(_expr_of(start))
        ends.setdefault(key, []).append(_expr_of(end))
    guarded = 0
    for (source, dim), cut_at in starts.items():
        size = _fake(source).shape[dim]  # type: ignore[union-attr]
        if not isinstance(size, torch.SymInt):
            continue
        half = FloorDiv(size.node.expr, 2)
        if half not in cut_at or half not in ends.get((source, dim), []):
            continue
        guarded += _guard_even(size, marked)
    return guarded


def _guard_even(size: Any, marked: frozenset[str]) -> int:
    """Guard a symbolic size even where its traced size is (and no marked dim is in it)."""
    if not isinstance(size, torch.SymInt) or _hint(size) is None or _hint(size) % 2:
        return 0
    if {str(s) for s in size.node.expr.free_symbols} & marked:
        return 0
    even = size % 2 == 0
    return 0 if statically_known_true(even) else int(guard_bool(even))


def _expr_of(arg: Any) -> Any:
    """A slice bound as a sympy expression (a SymInt node's), else the constant itself."""
    if isinstance(arg, torch.fx.Node):
        val = arg.meta.get("val")
        return val.node.expr if isinstance(val, torch.SymInt) else None
    return arg


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
