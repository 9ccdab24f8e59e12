"""The all-reduce of the fused all-reduce + (add +) RMSNorm (+ quant) through torch's symmetric
memory (`torch.distributed._symmetric_memory`), for the `symm_mem` kernel choice.

One symmetric buffer per (process group, dtype, hidden) (`buffer`) takes each call's input, and
torch's one-shot or two-shot all-reduce sums it over the group (`all_reduce`); irfuse's Triton
norm (+ quant) kernels then run on the result (`allreduce_rms.norm` and the `nccl_*` paths with
`symm=True`). The ops' schemas are checked against this torch at test time (torch 2.13; the GPU
image's 2.11 is unchecked); the multimem (NVLink multicast) ops are never used.

`reason(x, group)` says why a call cannot take this path (not CUDA, no symmetric-memory ops in
this torch, a dtype the kernels lack, more ranks than they take, more tokens than the buffer
holds, a failed rendezvous, e.g. without NVLink P2P); the caller warns it once and runs NCCL.
Every check reads only shapes, dtypes, the torch build and the group, the same on every rank.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from dataclasses import dataclass
from types import ModuleType

import torch

from irfuse import user_warnings
from irfuse.kernels import allreduce_rms_ref as ref

ONE_SHOT_MAX_BYTES = 128 * 1024
"""One-shot up to this many bytes, two-shot above: one-shot has every rank read every peer's
whole input (one step, latency-bound, best when small); two-shot reduce-scatters then
all-gathers, moving 2 (n - 1) / n of the input per rank (bandwidth-bound, best when large).
128 KiB is Inductor's `one_shot_all_reduce_threshold_bytes`; irfuse has not measured its own."""

SYMM_MEM_MAX_BYTES = 64 * 1024 * 1024
"""The symmetric buffer's size per (group, dtype, hidden), hence the largest call that takes
this path (64 MiB, not measured: a bound of the order of vLLM's symmetric-memory sizes);
larger calls run NCCL."""

DTYPES = (torch.bfloat16, torch.float32)
"""torch's one-/two-shot kernels dispatch on float32 and bfloat16 only."""

MAX_WORLD = 8
"""torch's one-/two-shot kernels take up to 8 ranks (its NVLink peer limit)."""

FALLBACKS: dict[str, str] = {}
"""Group name -> the last reason a call on it could not take the symmetric-memory path."""
_WARNED: set[str] = set()
_FAILED: dict[str, str] = {}  # group -> why its rendezvous failed (not retried)


@dataclass
class Buffer:
    """A group's symmetric buffer: `tensor` holds `capacity` rows of `hidden`."""

    tensor: torch.Tensor
    capacity: int
    group_name: str


BUFFERS: dict[tuple[str, torch.dtype, int], Buffer] = {}


@functools.cache
def symm_module() -> ModuleType | None:
    """`torch.distributed._symmetric_memory` when it imports with `empty` and `rendezvous`."""
    try:
        mod = importlib.import_module("torch.distributed._symmetric_memory")
    except Exception:  # noqa: BLE001 (a build without distributed or symmetric memory)
        return None
    return mod if hasattr(mod, "empty") and hasattr(mod, "rendezvous") else None


@functools.cache
def symm_ops() -> object | None:
    """`torch.ops.symm_mem` when it has both one_shot_all_reduce and two_shot_all_reduce_."""
    ns = torch.ops.symm_mem
    for name in ("one_shot_all_reduce", "two_shot_all_reduce_"):
        try:
            getattr(ns, name)
        except (AttributeError, RuntimeError):
            return None
    return ns


def device_reason(x: torch.Tensor) -> str | None:
    """Why x's device has no symmetric memory, or None (CUDA)."""
    if x.device.type != "cuda":
        return f"the input is on {x.device.type}, not a CUDA device"
    return None


def capacity(hidden: int, itemsize: int) -> int:
    """Rows of `hidden` x `itemsize` bytes the buffer holds."""
    return max(1, SYMM_MEM_MAX_BYTES // (hidden * itemsize))


def reason(x: torch.Tensor, group: str) -> str | None:
    """Why this call cannot take the symmetric-memory all-reduce, or None when it can."""
    why = device_reason(x)
    if why is not None:
        return why
    if symm_module() is None or symm_ops() is None:
        return (f"torch {torch.__version__} has no symmetric-memory all-reduce "
                "(_symmetric_memory.empty/rendezvous, symm_mem.one_shot_all_reduce/"
                "two_shot_all_reduce_)")
    if x.dtype not in DTYPES:
        return f"torch's symmetric-memory all-reduce takes bf16/fp32, not {x.dtype}"
    pg = ref.resolve_group(group)
    if pg.size() > MAX_WORLD:
        return f"the group has {pg.size()} ranks (torch's kernels take up to {MAX_WORLD})"
    hidden = x.shape[-1]
    tokens = x.numel() // max(1, hidden)
    cap = capacity(hidden, x.element_size())
    if tokens == 0:
        return "the input has no tokens"
    if tokens > cap:
        return f"{tokens} tokens exceed the symmetric buffer ({cap} tokens of {hidden})"
    if group in _FAILED:
        return _FAILED[group]
    return None


def note_fallback(kernel: str, group: str, why: str) -> None:
    FALLBACKS[group] = why
    if why not in _WARNED:
        _WARNED.add(why)
        user_warnings.warn(f"irfuse: {kernel} does not use torch's symmetric-memory "
                           f"all-reduce: {why}; NCCL runs")


def buffer(group: str, x: torch.Tensor) -> Buffer | None:
    """The (group, dtype, hidden) buffer, allocated with `_symmetric_memory.empty` and made
    symmetric with `rendezvous` at first use (every rank of the group makes the same call with
    the same shapes, so every rank allocates it together), sized for SYMM_MEM_MAX_BYTES and
    reused by every later call; None when the rendezvous failed (its reason is recorded for the
    group, so no rank retries it)."""
    hidden = x.shape[-1]
    key = (group, x.dtype, hidden)
    buf = BUFFERS.get(key)
    if buf is not None:
        return buf
    mod = symm_module()
    assert mod is not None
    pg = ref.resolve_group(group)
    cap = capacity(hidden, x.element_size())
    try:
        tensor = mod.empty(cap * hidden, dtype=x.dtype, device=x.device)
        _rendezvous(mod, tensor, pg.group_name)
    except Exception as e:  # noqa: BLE001 (no P2P, no NVLink, an allocator without symm mem)
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        _FAILED[group] = f"symmetric-memory rendezvous failed ({first})"
        return None
    buf = Buffer(tensor, cap, pg.group_name)
    BUFFERS[key] = buf
    return buf


def _rendezvous(mod: ModuleType, tensor: torch.Tensor, group_name: str) -> None:
    """`rendezvous`; where it fails and this torch has `enable_symm_mem_for_group` (older torch
    needs it first; newer torch deprecates it and may already know the group, where calling it
    again could fail), the group is enabled and the rendezvous tried once more. Every rank
    fails the same way (the group's registration is checked before any exchange)."""
    try:
        mod.rendezvous(tensor, group_name)
        return
    except RuntimeError:
        enable = getattr(mod, "enable_symm_mem_for_group", None)
        if enable is None:
            raise
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        enable(group_name)
    mod.rendezvous(tensor, group_name)


def one_shot(nbytes: int) -> bool:
    """One-shot for inputs up to ONE_SHOT_MAX_BYTES, two-shot above."""
    return nbytes <= ONE_SHOT_MAX_BYTES


def all_reduce(x: torch.Tensor, group: str) -> torch.Tensor | None:
    """The sum of x over `group` through the group's symmetric buffer (a new tensor shaped like
    x, never a view of the buffer, which the next call overwrites), or None when the rendezvous
    failed. The caller has checked `reason` first. x is copied into the buffer's first rows,
    then `torch.ops.symm_mem.one_shot_all_reduce` (`one_shot`) or `two_shot_all_reduce_`
    (`two_shot_all_reduce_out` where torch has it) sums it."""
    buf = buffer(group, x)
    if buf is None:
        return None
    ops = symm_ops()
    assert ops is not None
    hidden = x.shape[-1]
    rows = x.numel() // hidden
    staged = buf.tensor[: rows * hidden].view(rows, hidden)
    staged.copy_(x.reshape(rows, hidden))
    if one_shot(x.numel() * x.element_size()):
        out = ops.one_shot_all_reduce(staged, "sum", buf.group_name)
    elif hasattr(ops, "two_shot_all_reduce_out"):
        out = torch.empty_like(staged)
        ops.two_shot_all_reduce_out(staged, "sum", buf.group_name, out)
    else:
        out = ops.two_shot_all_reduce_(staged, "sum", buf.group_name).clone()
    return out.view(x.shape)
