"""Shared pytest set-up: GPU tests skip without CUDA; one Inductor cache for the whole run; the
gloo ranks of the multi-process tests fork from a server that imported torch, irfuse and
transformers once (`irfuse.models.dist.spawn_ranks`)."""

from __future__ import annotations

import multiprocessing
import os
import pathlib

import pytest

_ROOT = pathlib.Path(__file__).resolve().parent.parent
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(_ROOT / ".cache" / "inductor"))
# Imported by the fork server when the first ranks start (a module it cannot import is skipped).
multiprocessing.set_forkserver_preload(["torch", "irfuse.backend", "irfuse.models", "transformers"])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
