"""Torch references of the async-TP ops: the GEMM then the reduce-scatter, or the all-gather then
the GEMM, through torch's functional collectives (gloo on the CPU, NCCL on GPUs). Rows (dim 0)
are scattered and gathered; FP8 is gathered as bytes."""

from __future__ import annotations

import torch


def matmul(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor | None,
           scale_b: torch.Tensor | None, out_dtype: torch.dtype | None) -> torch.Tensor:
    """`a @ b`, or `torch._scaled_mm` when the scales are given (per-tensor or row-wise)."""
    if scale_a is None:
        return torch.mm(a, b)
    if scale_b is None:
        raise ValueError("irfuse: a scaled GEMM needs scale_a and scale_b")
    return torch._scaled_mm(a, b, scale_a=scale_a.contiguous(), scale_b=scale_b.contiguous(),
                            out_dtype=out_dtype)


def reduce_scatter_rows(c: torch.Tensor, reduce_op: str, group_name: str,
                        world_size: int) -> torch.Tensor:
    if world_size == 1:  # a group of one rank: the collective is the identity
        return c.contiguous()
    f = torch.ops._c10d_functional
    return f.wait_tensor(f.reduce_scatter_tensor(c.contiguous(), reduce_op, world_size,
                                                 group_name))


def all_gather_rows(a: torch.Tensor, group_name: str, world_size: int) -> torch.Tensor:
    if world_size == 1:
        return a.contiguous()
    f = torch.ops._c10d_functional
    as_bytes = a.dtype.itemsize == 1 and a.is_floating_point()
    x = a.contiguous().view(torch.uint8) if as_bytes else a.contiguous()
    gathered = f.wait_tensor(f.all_gather_into_tensor(x, world_size, group_name))
    return gathered.view(a.dtype) if as_bytes else gathered


def gemm_reduce_scatter(a, b, scale_a, scale_b, out_dtype, reduce_op, group_name, world_size):
    return reduce_scatter_rows(matmul(a, b, scale_a, scale_b, out_dtype), reduce_op,
                               group_name, world_size)


def all_gather_gemm(a, b, scale_a, scale_b, out_dtype, group_name, world_size):
    return matmul(all_gather_rows(a, group_name, world_size), b, scale_a, scale_b, out_dtype)
