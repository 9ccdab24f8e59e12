"""The async-TP ops on CUDA: torch's symmetric-memory fused GEMM + collective ops
(`torch.ops.symm_mem.fused_matmul_reduce_scatter`, `fused_all_gather_matmul` and their scaled
variants), which split the GEMM into per-rank chunks and overlap them with the copies from the
peers' symmetric buffers. They need an NCCL group whose GPUs reach each other peer to peer;
symmetric memory is enabled for the group at its first call (never multicast: irfuse sets no
multicast option, and torch takes its multimem path only where multicast is supported and asked
for).

The ops take torch's name of the group: the name the fused op carries is resolved as every irfuse
kernel resolves it (`irfuse.groups.torch_name`: the name itself for a group torch knows, the
device group's for vLLM's `tp:0`), as vLLM's AsyncTPPass passes `device_group.group_name`. The
gathered GEMM's row-wise `scale_a` goes to torch's op as it is: the shard's `[M / world_size,
1]` (row-wise sharded, gathered with a) or the gathered rows' `[M, 1]` (row-wise replicated);
a per-tensor scale beside a row-wise one is broadcast first (`gemm_comms_ref.torch_scales`)."""

from __future__ import annotations

import warnings

import torch
from torch.distributed._symmetric_memory import enable_symm_mem_for_group

from irfuse import groups
from irfuse.kernels import gemm_comms_ref

_ENABLED: set[str] = set()


def enable_group(group_name: str) -> None:
    """Enable symmetric memory for torch's group `group_name` once (deprecated in torch 2.13,
    where the fused ops still look the group up in the registry it fills; required on 2.11)."""
    if group_name in _ENABLED:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        enable_symm_mem_for_group(group_name)
    _ENABLED.add(group_name)


def gemm_reduce_scatter(a, b, scale_a, scale_b, out_dtype, reduce_op, group_name, world_size):
    name = groups.torch_name(group_name)
    enable_group(name)
    ops = torch.ops.symm_mem
    if scale_a is None:
        return ops.fused_matmul_reduce_scatter(a, b, reduce_op, 0, name)
    scale_a, scale_b = gemm_comms_ref.torch_scales(a, b, scale_a, scale_b)
    return ops.fused_scaled_matmul_reduce_scatter(
        a, b, scale_a, scale_b, reduce_op, 0, 0, name,
        [a.shape[0], b.shape[1]], None, None, out_dtype, False)


def all_gather_gemm(a, b, scale_a, scale_b, out_dtype, group_name, world_size):
    name = groups.torch_name(group_name)
    enable_group(name)
    ops = torch.ops.symm_mem
    if scale_a is None:
        _, (c,) = ops.fused_all_gather_matmul(a.contiguous(), [b], 0, name, return_A=False)
        return c
    scale_a, scale_b = gemm_comms_ref.torch_scales(a, b, scale_a, scale_b)
    _, (c,) = ops.fused_all_gather_scaled_matmul(
        a.contiguous(), [b], scale_a, [scale_b], 0, name, [None],
        [None], [out_dtype], [False])
    return c
