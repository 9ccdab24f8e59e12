"""Process-group helpers for the tensor-parallel models.

`fake_process_group(world_size)` initialises torch.distributed's "fake" backend (no peers, the
collectives return their input) so that a single process can build, run and trace a TP model
as rank `rank` of `world_size`. The real multi-process runs use gloo (CPU) or NCCL (GPU) and
initialise the group themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch.distributed as dist


@contextmanager
def fake_process_group(world_size: int = 2, rank: int = 0) -> Iterator[dist.ProcessGroup]:
    """Initialise the default process group on the fake backend; destroy it on exit."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise RuntimeError("a default process group is already initialised")
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()
