"""Process groups by name: the one rule every collective irfuse emits and every kernel that takes a
group name follows.

A collective names its group by a string. torch's functional collectives and symmetric-memory
ops take torch's name of a `ProcessGroup` (`pg.group_name`, a number unless the group was given
one); vLLM's `torch.ops.vllm.all_reduce / reduce_scatter / all_gather` take the `unique_name` of
its `GroupCoordinator` (`tp:0`, `dp:0`, ...), registered in
`vllm.distributed.parallel_state._groups` (weak references). The coordinator's `device_group` is
made by `new_group` without a name, so torch does not know `tp:0`: a `_c10d_functional` call or a
`symm_mem` op given `tp:0` fails when it runs. So a name is resolved here, as vLLM's coordinator
or torch's group (`resolve`; vLLM's registry is read only when vLLM, or a stand-in of its
module, is already imported). `resolve` is for run time, `torch_name` gives the name torch's own
ops take, and `known` / `check` are for compile time: a group neither registry knows, in a
process where torch.distributed is initialized, is one `GroupError` at compile time, not a
failure when the graph first runs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

import torch.distributed as torch_dist
from torch.distributed.distributed_c10d import _resolve_process_group

VLLM_STATE = "vllm.distributed.parallel_state"


class GroupError(ValueError):
    """A process group name that neither torch.distributed nor vLLM knows."""


def _dist():
    """torch.distributed where it is initialized in this process, else None."""
    return torch_dist if torch_dist.is_available() and torch_dist.is_initialized() else None


def torch_group(name: str):
    """torch's ProcessGroup registered under `name`, or None."""
    dist = _dist()
    if dist is None:
        return None
    try:
        return _resolve_process_group(name)
    except (RuntimeError, ValueError, KeyError, TypeError, AttributeError):
        return None


def vllm_coordinator(name: str) -> object | None:
    """vLLM's group coordinator named `name`, when vLLM's parallel state is imported and has it
    (alive); else None. Never imports vLLM."""
    state = sys.modules.get(VLLM_STATE)
    registry = getattr(state, "_groups", None)
    if not isinstance(registry, dict) or name not in registry:
        return None
    try:
        return registry[name]()
    except (TypeError, ReferenceError):
        return None


def vllm_shm_group(handle: int) -> str | None:
    """The name of vLLM's group coordinator whose CPU communicator's shared-memory all-reduce
    has `handle` (vLLM's CPU build spells its TP all-reduce `_C.shm_allreduce(handle, x)`), or
    None."""
    state = sys.modules.get(VLLM_STATE)
    registry = getattr(state, "_groups", None)
    if not isinstance(registry, dict):
        return None
    for name in list(registry):
        coordinator = vllm_coordinator(name)
        comm = getattr(getattr(coordinator, "device_communicator", None), "dist_module", None)
        if getattr(comm, "handle", None) == handle:
            return name
    return None


def _vllm_device_group(name: str):
    dist = _dist()
    group = getattr(vllm_coordinator(name), "device_group", None)
    if dist is not None and isinstance(group, dist.ProcessGroup):
        return group
    return None


def resolve(name: str):
    """The ProcessGroup a collective on `name` runs on: vLLM's coordinator's `device_group`
    where vLLM's registry has the name (the group its collectives run on: NCCL on GPUs, gloo on
    the CPU), else torch's group of that name (vLLM's names, `tp:0`, and torch's, numbers unless
    given, do not meet). GroupError when torch.distributed is not initialized or neither knows
    the name. Not cached: a group can be destroyed and another made under the next name (vLLM's
    `destroy_model_parallel`), and a lookup is a dict access or two."""
    if _dist() is None:
        raise GroupError(f"irfuse: a collective names process group {name!r} but "
                         "torch.distributed is not initialized in this process")
    # vLLM's names first where its registry has the name (a dict lookup; torch's lookup of a
    # name it does not know raises, which a call per decode step should not pay).
    group = _vllm_device_group(name) if vllm_coordinator(name) is not None else None
    if group is None:
        group = torch_group(name)
    if group is None:
        group = _vllm_device_group(name)
    if group is None:
        raise GroupError(unknown(name))
    return group


def torch_name(name: str) -> str:
    """The name torch's functional collectives and symmetric-memory ops take for `name`'s
    group (`name` itself for a group torch knows; the device group's for vLLM's `tp:0`)."""
    return resolve(name).group_name


def size(name: str) -> int | None:
    """The number of ranks of `name`'s group (vLLM's coordinator's, else torch's), or None."""
    value = getattr(vllm_coordinator(name), "world_size", None)
    if isinstance(value, int) and value >= 1:
        return value
    group = torch_group(name)
    return None if group is None else int(group.size())


def rank(name: str) -> int | None:
    """This process's rank in `name`'s group (vLLM's `rank_in_group`, else torch's), or None."""
    value = getattr(vllm_coordinator(name), "rank_in_group", None)
    if isinstance(value, int) and value >= 0:
        return value
    group = torch_group(name)
    return None if group is None else int(group.rank())


def is_vllm(name: str) -> bool:
    """Whether `name` is one of vLLM's group coordinators in this process (with a device
    group)."""
    return _vllm_device_group(name) is not None


def known(name: str) -> bool:
    """Whether a collective on `name` can run in this process: True without torch.distributed
    (irfuse-opt, FileCheck, an offline compile: nothing to check against), else whether torch or
    vLLM knows the name."""
    if _dist() is None:
        return True
    return torch_group(name) is not None or _vllm_device_group(name) is not None


def unknown(name: str) -> str:
    """The message for a group nobody knows."""
    return (f"irfuse: no process group named {name!r}: torch.distributed does not know the "
            "name, and vLLM's registry of its group coordinators "
            f"({VLLM_STATE}._groups) has no such group")


def check(names: Iterable[tuple[str, str]]) -> None:
    """Compile time: every (group name, what names it) is known (see `known`), else one
    GroupError naming the first unknown group and what uses it."""
    for name, what in names:
        if not known(name):
            raise GroupError(f"{unknown(name)} (named by {what}); the compiled graph could "
                             "not run its collectives")
