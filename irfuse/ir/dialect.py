"""`declared_dialect`: a dialect made of the ops and attributes that a module declares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xdsl.ir import Attribute, Dialect, Operation


def declared_dialect(
    name: str, namespace: Mapping[str, Any], attributes: Sequence[type[Attribute]] = ()
) -> Dialect:
    """The dialect `name` of the ops and attributes that a module declares under `name.`:
    `Quant = declared_dialect("quant", globals())` at the bottom of the module. `attributes`
    adds the dialect's attributes that a shared module declares (`aten`'s argument templates)."""
    members = [
        value
        for value in namespace.values()
        if isinstance(value, type)
        and value.__module__ == namespace["__name__"]
        and str(getattr(value, "name", "")).startswith(name + ".")
    ]
    return Dialect(
        name,
        [m for m in members if issubclass(m, Operation)],
        [m for m in members if issubclass(m, Attribute)] + list(attributes),
    )
