"""Process-group helpers for the tensor-parallel models.

`fake_process_group(world_size)` initialises torch.distributed's "fake" backend (no peers, the
collectives return their input), so one process can build, run and trace a TP model as one rank.
`spawn_ranks` runs real ranks: gloo ones forked from multiprocessing's fork server (the test
session preloads it with torch, irfuse and transformers, so a rank starts in milliseconds), NCCL
ones spawned (a fork cannot use CUDA once the driver is initialised).

`vllm_style_groups(group)` makes `group` a vLLM group coordinator named `tp:0` where vLLM is not
installed (the CPU test venv, the GPU machine): a stand-in of `vllm.distributed.parallel_state`
whose `_groups` registry holds weak references to coordinators (`unique_name`, `device_group`,
`cpu_group`, `world_size`, `rank_in_group`, what irfuse reads), and vLLM's collective ops
`torch.ops.vllm.all_reduce / reduce_scatter / all_gather` with vLLM's schemas, which look the
coordinator up by name and run torch.distributed on its device group. torch does not know
`tp:0`: every collective irfuse emits for these graphs must resolve the name as it would in
vLLM's process. With vLLM imported, vLLM's own registry and ops are used instead.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
import weakref
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


def _rank_main(rank: int, world_size: int, init_file: str, backend: str, fn, args,
               environ: dict[str, str]) -> None:
    # A fork server started earlier holds the environment of its start: take the caller's now.
    os.environ.clear()
    os.environ.update(environ)
    if backend == "gloo":
        torch.set_num_threads(1)  # the ranks share the CPU
    else:
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size)
    try:
        fn(rank, world_size, *args)
        # No rank leaves before every rank's gloo connections are up: a rank that exits while a
        # peer still connects fails that peer's rendezvous ("connectFullMesh ... closed by peer"),
        # which a rank running no collective of its own would otherwise do.
        dist.barrier()
    finally:
        dist.destroy_process_group()


def spawn_ranks(world_size: int, fn, *args, backend: str = "gloo", init_file: str) -> None:
    """Run `fn(rank, world_size, *args)` in `world_size` processes that share one default
    process group (gloo on the CPU, nccl on GPUs, rank r on GPU r), rendezvousing through
    `init_file` (a path that does not exist yet). `fn` must be picklable (a module-level
    function of a module the fork server can import); a rank that raises fails the call. Each
    rank runs with the caller's environment variables of the moment, though a module the fork
    server preloaded keeps what it read from the environment when it was imported there."""
    method = "forkserver" if backend == "gloo" else "spawn"
    mp.start_processes(_rank_main, nprocs=world_size, join=True, start_method=method,
                       args=(world_size, init_file, backend, fn, args, dict(os.environ)))


VLLM_STATE = "vllm.distributed.parallel_state"


class StandInCoordinator:
    """What irfuse and vLLM's collective ops read of vLLM's GroupCoordinator, for one process
    group: its names and sizes, and the out-of-place collectives vLLM's ops call (here
    torch.distributed on the group)."""

    def __init__(self, group: dist.ProcessGroup, name: str) -> None:
        self.unique_name = name
        self.device_group = self.cpu_group = group
        self.world_size = dist.get_world_size(group)
        self.rank_in_group = dist.get_rank(group)
        self.device_communicator = None

    def _all_reduce_out_place(self, tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.clone()
        dist.all_reduce(out, group=self.device_group)
        return out

    def _reduce_scatter_out_place(self, tensor: torch.Tensor, dim: int) -> torch.Tensor:
        x = tensor.movedim(dim, 0).contiguous()
        out = x.new_empty((x.shape[0] // self.world_size, *x.shape[1:]))
        dist.reduce_scatter_tensor(out, x, group=self.device_group)
        return out.movedim(0, dim).contiguous()

    def _all_gather_out_place(self, tensor: torch.Tensor, dim: int) -> torch.Tensor:
        x = tensor.movedim(dim, 0).contiguous()
        out = x.new_empty((x.shape[0] * self.world_size, *x.shape[1:]))
        dist.all_gather_into_tensor(out, x, group=self.device_group)
        return out.movedim(0, dim).contiguous()


_KEEP: list[object] = []  # the stand-in ops' library, alive for the process


def _registry() -> dict:
    """vLLM's registry of group coordinators: vLLM's own where vLLM is installed, else a
    stand-in module in its place."""
    state = sys.modules.get(VLLM_STATE)
    if state is None and importlib.util.find_spec("vllm") is not None:
        state = importlib.import_module(VLLM_STATE)
    if state is None:
        state = types.ModuleType(VLLM_STATE)
        state._groups = {}  # type: ignore[attr-defined]
        sys.modules[VLLM_STATE] = state
    return state._groups  # type: ignore[attr-defined]


def _coordinator(name: str) -> StandInCoordinator:
    coordinator = _registry()[name]()
    if coordinator is None:
        raise ValueError(f"group {name} is destroyed")
    return coordinator


def _define_ops() -> None:
    """vLLM's three collective ops (its schemas), where this process has none: each calls the
    named coordinator's out-of-place collective, as vLLM's do."""
    try:
        if hasattr(torch.ops.vllm.all_reduce, "default"):
            return
    except (AttributeError, RuntimeError):
        pass
    lib = torch.library.Library("vllm", "FRAGMENT")
    _KEEP.append(lib)
    lib.define("all_reduce(Tensor tensor, str group_name) -> Tensor")
    lib.define("reduce_scatter(Tensor tensor, int dim, int world_size, str group_name) -> Tensor")
    lib.define("all_gather(Tensor tensor, int dim, int world_size, str group_name) -> Tensor")

    def all_reduce(tensor, group_name):
        return _coordinator(group_name)._all_reduce_out_place(tensor)

    def reduce_scatter(tensor, dim, world_size, group_name):
        return _coordinator(group_name)._reduce_scatter_out_place(tensor, dim)

    def all_gather(tensor, dim, world_size, group_name):
        return _coordinator(group_name)._all_gather_out_place(tensor, dim)

    def resized(tensor, dim, world_size, gather):
        shape = list(tensor.shape)
        shape[dim] = shape[dim] * world_size if gather else shape[dim] // world_size
        return tensor.new_empty(shape)

    for key in ("CPU", "CUDA"):
        lib.impl("all_reduce", all_reduce, key)
        lib.impl("reduce_scatter", reduce_scatter, key)
        lib.impl("all_gather", all_gather, key)
    fake = torch.library.register_fake
    fake("vllm::all_reduce", lib=lib)(lambda tensor, group_name: torch.empty_like(tensor))
    fake("vllm::reduce_scatter", lib=lib)(
        lambda tensor, dim, world_size, group_name: resized(tensor, dim, world_size, False))
    fake("vllm::all_gather", lib=lib)(
        lambda tensor, dim, world_size, group_name: resized(tensor, dim, world_size, True))


@contextmanager
def vllm_style_groups(group: dist.ProcessGroup | None = None, name: str = "tp:0"
                      ) -> Iterator[StandInCoordinator]:
    """`group` (default WORLD) as vLLM's group coordinator `name` for the duration (vLLM's
    registry and collective ops: stand-ins where vLLM is not imported)."""
    group = dist.group.WORLD if group is None else group
    registry = _registry()
    coordinator = StandInCoordinator(group, name)
    registry[name] = weakref.ref(coordinator)
    _define_ops()
    try:
        yield coordinator
    finally:
        if registry.get(name) is not None and registry[name]() is coordinator:
            del registry[name]


def vllm_name_of(group: dist.ProcessGroup) -> str:
    """The name of the vLLM group coordinator whose device group is `group`."""
    for name, ref in list(_registry().items()):
        coordinator = ref()
        if coordinator is not None and coordinator.device_group is group:
            return name
    raise ValueError("no vLLM group coordinator holds this process group (vllm_style_groups)")
