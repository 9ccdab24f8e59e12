"""Names of the callables an FX graph calls, and back.

Target strings in the IR:
- `aten::mul.Tensor`, `_c10d_functional::all_reduce.default`, `irfuse::rms_norm.default`:
  torch operator overloads (`torch.ops.<ns>.<name>.<overload>`; irfuse's own are registered by
  `irfuse.emit.custom_ops`, which the pipeline and irfuse-opt import);
- `hop:auto_functionalized`: higher-order operators (`torch.ops.higher_order.<name>`);
- `py:operator.mul`, `py:torch.sym_float`: other Python callables, by module and qualified name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

_BY_NAME: dict[str, Callable[..., Any]] = {}
_NAME_OF: dict[Any, str] = {}


class UnknownTarget(LookupError):
    """A target string that names no callable."""


def name_of(target: Any) -> str:
    """The IR name of an FX call target (cached: it is on the import path)."""
    try:
        return _NAME_OF[target]
    except (KeyError, TypeError):
        pass
    if isinstance(target, torch._ops.OpOverload):
        name = f"{target._schema.name}.{target._overloadname}"
    elif isinstance(target, torch._ops.OpOverloadPacket):
        name = target._qualified_op_name
    elif isinstance(target, torch._ops.HigherOrderOperator):
        name = f"hop:{target.name()}"
    elif callable(target) and hasattr(target, "__qualname__"):
        module = getattr(target, "__module__", None) or "builtins"
        if module == "_operator":
            module = "operator"
        name = f"py:{module}.{target.__qualname__}"
    else:
        raise UnknownTarget(f"cannot name the FX target {target!r}")
    _NAME_OF[target] = name
    _BY_NAME[name] = target
    return name


def resolve(name: str) -> Callable[..., Any]:
    """The callable an IR target string names."""
    found = _BY_NAME.get(name)
    if found is not None:
        return found
    try:
        found = _resolve_uncached(name)
    except (AttributeError, ImportError, ValueError) as err:
        raise UnknownTarget(f"no torch callable is named '{name}': {err}") from None
    _BY_NAME[name] = found
    _NAME_OF.setdefault(found, name)
    return found


def _resolve_uncached(name: str) -> Callable[..., Any]:
    if name.startswith("hop:"):
        return getattr(torch.ops.higher_order, name[4:])
    if name.startswith("py:"):
        path = name[3:]
        # Qualified names may be nested (Class.method): import the longest module prefix.
        parts = path.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            try:
                obj: Any = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
            return obj
        raise ImportError(f"no module in '{path}'")
    if "::" not in name:
        raise ValueError("operator names look like 'namespace::op.overload'")
    namespace, _, op = name.partition("::")
    op_name, _, overload = op.partition(".")
    packet = getattr(getattr(torch.ops, namespace), op_name)
    return getattr(packet, overload) if overload else packet
