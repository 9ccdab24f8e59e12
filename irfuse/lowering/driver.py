"""PLACEHOLDER until the pattern driver lands (branch `driver`): runs legacy pass classes."""

from __future__ import annotations

from xdsl.context import Context


class AnchorPattern:
    pass


def run_patterns(module, patterns, *, gate=None, max_tokens=None) -> None:
    for legacy in patterns:
        legacy(**({'max_tokens': max_tokens} if 'max_tokens' in legacy.__dataclass_fields__ else {})).apply(Context(), module)
