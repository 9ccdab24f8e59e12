"""Warnings that point at the user's code, not at the line of irfuse that raised them.

A warning's location is where the user can act: the call of the compiled model (or of
`torch.compile`), not `irfuse/backend.py:300` nor a frame of Dynamo. `warn` finds the innermost
frame outside irfuse, torch and Python's own library, and attributes the warning to it (its
module's warning registry too, so the usual once-per-location filtering holds). Where no such
frame is on the stack (a compile on a worker thread), the caller's frame is named, as
`warnings.warn` would.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import warnings
from types import FrameType

import irfuse

_IRFUSE = os.path.dirname(os.path.abspath(irfuse.__file__)) + os.sep
_STDLIB = tuple(os.path.abspath(p) + os.sep for p in {sysconfig.get_paths()["stdlib"],
                                                       sysconfig.get_paths()["platstdlib"]})


def _skipped() -> tuple[str, ...]:
    """irfuse's folder, and torch's once it is imported (no torch frame before that)."""
    torch = sys.modules.get("torch")
    where = getattr(torch, "__file__", None)
    return (_IRFUSE,) if where is None else (_IRFUSE, os.path.dirname(where) + os.sep)


def _outside(frame: FrameType, skipped: tuple[str, ...]) -> bool:
    path = frame.f_code.co_filename
    if path.startswith("<"):  # <frozen importlib._bootstrap>; <string>, <stdin> are the user's
        return not path.startswith("<frozen")
    path = os.path.abspath(path)
    if path.startswith(skipped):
        return False
    return "site-packages" in path or not path.startswith(_STDLIB)


def user_frame() -> FrameType | None:
    """The innermost frame of the current thread outside irfuse, torch and the standard
    library, or None."""
    skipped = _skipped()
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if _outside(frame, skipped):
            return frame
        frame = frame.f_back
    return None


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """`warnings.warn(message)`, attributed to the user's code (see the module docstring)."""
    frame = user_frame()
    if frame is None:
        warnings.warn(message, category, stacklevel=3)
        return
    module = frame.f_globals.get("__name__", "<unknown>")
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, category, frame.f_code.co_filename, frame.f_lineno,
                           module=module, registry=registry, module_globals=frame.f_globals)
