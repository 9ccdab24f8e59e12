"""Process-group helpers for the tensor-parallel models.

`fake_process_group(world_size)` initialises torch.distributed's "fake" backend (no peers, the
collectives return their input) so that a single process can build, run and trace a TP model
as rank `rank` of `world_size`. The real multi-process runs use gloo (CPU) or NCCL (GPU) and
initialise the group themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.testing._internal.distributed.fake_pg import FakeStore


@contextmanager
def fake_process_group(world_size: int = 2, rank: int = 0) -> Iterator[dist.ProcessGroup]:
    """Initialise the default process group on the fake backend; destroy it on exit."""
    if dist.is_initialized():
        raise RuntimeError("a default process group is already initialised")
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def _rank_main(rank: int, world_size: int, init_file: str, backend: str, fn, args) -> None:
    if backend == "gloo":
        torch.set_num_threads(1)  # the ranks share the CPU
    else:
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size)
    try:
        fn(rank, world_size, *args)
    finally:
        dist.destroy_process_group()


def spawn_ranks(world_size: int, fn, *args, backend: str = "gloo", init_file: str) -> None:
    """Run `fn(rank, world_size, *args)` in `world_size` processes that share one default
    process group (gloo on the CPU, nccl on GPUs, rank r on GPU r), rendezvousing through
    `init_file` (a path that does not exist yet). `fn` must be picklable (a module-level
    function); a rank that raises fails the call."""
    mp.spawn(_rank_main, args=(world_size, init_file, backend, fn, args), nprocs=world_size,
             join=True)
