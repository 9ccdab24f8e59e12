"""vLLM's attention layers as the IR knows them at compile time: their names and what their
attention backends can do.

vLLM's attention ops (`unified_attention_with_output`, `unified_kv_cache_update`, ...) name
their layer; the cache, slot mapping and metadata are found by that name in vLLM's forward
context at run time (`irfuse.kernels.vllm_context`). The name reaches the graph as a string
constant or as vLLM's hoisted `LayerName` input (`layer_name_of`).

What a layer's backend can do is decided at compile time, as vLLM's own passes decide it: import
asks the provider (`set_provider`; inside vLLM, `irfuse.vllm_plugin` reads vLLM's static forward
context) about every layer the graph names and records the answers in the module attribute
`irfuse.vllm_layers` (`LAYERS_ATTR`). With hoisted names, a graph that serves several layers was
compiled with the first one's answers, as vLLM registers its patterns once for all layers then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import BlockArgument, SSAValue

LAYER_NAME_ATTR = "irfuse.layer_name"
"""Function argument attribute: the layer name a hoisted `LayerName` input was traced with."""
LAYERS_ATTR = "irfuse.vllm_layers"
"""Module attribute: per layer name, what its attention backend can do,
`{name: {backend = "FLASH_ATTN", output_quant = ["static_tensor"]}}`: `output_quant` lists the
output quants (`quant.scheme` kinds) the backend writes itself
(`impl.fused_output_quant_supported`). A layer the provider does not know is absent; fusions then
treat its backend as taking no output quant."""
LAYER_NAME_TYPE = "LayerName"
"""What `!irfuse.opaque<...>` says for vLLM's hoisted layer name."""

LayerFacts = Mapping[str, Any]
"""`{"backend": str, "output_quant": [scheme kind, ...]}`."""
Provider = Callable[[str], LayerFacts | None]

_PROVIDER: list[Provider | None] = [None]


def set_provider(provider: Provider | None) -> Provider | None:
    """Install the function that describes a layer by name (None: no layer is known); returns
    the one it replaces."""
    old = _PROVIDER[0]
    _PROVIDER[0] = provider
    return old


def traced_name(val: Any) -> str | None:
    """The layer name a placeholder's fake value holds, if it is vLLM's `LayerName` (torch gives
    hoisted opaque values as a `FakeScriptObject` wrapping the real one)."""
    real = getattr(val, "real_obj", val)
    name = getattr(real, "value", None)
    if type(real).__name__ == LAYER_NAME_TYPE and isinstance(name, str):
        return name
    return None


def describe(names: Iterable[str]) -> dict[str, LayerFacts]:
    """What the provider says of each name (names it does not know are left out)."""
    provider = _PROVIDER[0]
    if provider is None:
        return {}
    found: dict[str, LayerFacts] = {}
    for name in dict.fromkeys(names):
        facts = provider(name)
        if facts is not None:
            found[name] = facts
    return found


def facts_attr(facts: Mapping[str, LayerFacts]) -> DictionaryAttr:
    """The module attribute for `facts`."""
    return DictionaryAttr({
        name: DictionaryAttr({
            "backend": StringAttr(str(f.get("backend", ""))),
            "output_quant": ArrayAttr([StringAttr(s) for s in f.get("output_quant", ())]),
        })
        for name, f in facts.items()
    })


def backend_output_quant(module: ModuleOp | None, layer_name: str) -> tuple[str, tuple[str, ...]]:
    """(backend name, the output quant schemes it writes itself) of a layer, from the module
    attribute; ("", ()) when the layer is not described."""
    table = None if module is None else module.attributes.get(LAYERS_ATTR)
    entry = table.data.get(layer_name) if isinstance(table, DictionaryAttr) else None
    if not isinstance(entry, DictionaryAttr):
        return "", ()
    backend = entry.data.get("backend")
    quants = entry.data.get("output_quant")
    return (backend.data if isinstance(backend, StringAttr) else "",
            tuple(q.data for q in quants.data if isinstance(q, StringAttr))
            if isinstance(quants, ArrayAttr) else ())


def layer_name_of(value: Any) -> tuple[str, SSAValue | None] | None:
    """A call's `layer_name` argument as (name, the run-time operand or None): a string
    constant, or a function argument import marked with the name it was traced with.

    A string constant (vLLM without `LayerName`: `VLLM_USE_LAYERNAME=0`, torch < 2.11, the
    tests' stand-ins) becomes the raised op's `layer_name` property. vLLM's `LayerName` is an
    opaque value torch hoists to a graph input (vLLM 0.32 on torch 2.13): import types that input
    `!irfuse.opaque<"LayerName">` and records the traced name as the argument's
    `irfuse.layer_name`; the raised op keeps the name as its property and the input as its
    `layer` operand, which the emitted code passes on: vLLM may run one compiled graph for
    several layers (identical pieces of a piecewise graph share one artifact), so only the
    run-time value names the right cache."""
    if isinstance(value, str):
        return value, None
    if isinstance(value, BlockArgument):
        func = value.block.parent_op()
        if isinstance(func, FuncOp) and func.arg_attrs is not None:
            attrs = func.arg_attrs.data[value.index]
            name = attrs.data.get(LAYER_NAME_ATTR) if isinstance(attrs, DictionaryAttr) else None
            if isinstance(name, StringAttr):
                return name.data, value
    return None
