"""Torch references of the async-TP ops: the GEMM then the reduce-scatter, or the all-gather then
the GEMM, through torch's functional collectives (gloo on the CPU, NCCL on GPUs) on the group the
op names, resolved as every irfuse kernel resolves it (`irfuse.groups`: torch's group of that
name, else vLLM's coordinator's device group for `tp:0`). Rows (dim 0) are scattered and
gathered; FP8 is gathered as bytes.

The gathered GEMM's row-wise `scale_a` comes in either of the forms torch's
`fused_all_gather_scaled_matmul` takes: the shard's `[M / world_size, 1]` (gathered with a) or
the gathered rows' `[M, 1]` (replicated, used as it is); a one-element scale is per-tensor, and
one beside a row-wise scale is broadcast to its rows (`torch_scales`)."""

from __future__ import annotations

import torch

from irfuse import groups


def torch_scales(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                 scale_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The scales as torch's scaled GEMMs take them, contiguous: both per-tensor or both
    row-wise. A per-tensor scale beside a row-wise one (CUTLASS takes the mix: vLLM's per-tensor
    activation scale with a channel-wise weight scale) is broadcast to the rows of a (`[M, 1]`)
    or the columns of b (`[1, N]`), the same product."""
    if (scale_a.numel() == 1) != (scale_b.numel() == 1):
        if scale_a.numel() == 1:
            scale_a = scale_a.reshape(1, 1).expand(a.shape[0], 1)
        else:
            scale_b = scale_b.reshape(1, 1).expand(1, b.shape[1])
    return scale_a.contiguous(), scale_b.contiguous()


def matmul(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor | None,
           scale_b: torch.Tensor | None, out_dtype: torch.dtype | None) -> torch.Tensor:
    """`a @ b`, or `torch._scaled_mm` when the scales are given (per-tensor or row-wise)."""
    if scale_a is None:
        return torch.mm(a, b)
    if scale_b is None:
        raise ValueError("irfuse: a scaled GEMM needs scale_a and scale_b")
    scale_a, scale_b = torch_scales(a, b, scale_a, scale_b)
    return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)


def reduce_scatter_rows(c: torch.Tensor, reduce_op: str, group_name: str,
                        world_size: int) -> torch.Tensor:
    if world_size == 1:  # a group of one rank: the collective is the identity
        return c.contiguous()
    f = torch.ops._c10d_functional
    return f.wait_tensor(f.reduce_scatter_tensor(c.contiguous(), reduce_op, world_size,
                                                 groups.torch_name(group_name)))


def all_gather_rows(a: torch.Tensor, group_name: str, world_size: int) -> torch.Tensor:
    if world_size == 1:
        return a.contiguous()
    f = torch.ops._c10d_functional
    as_bytes = a.dtype.itemsize == 1 and a.is_floating_point()
    x = a.contiguous().view(torch.uint8) if as_bytes else a.contiguous()
    gathered = f.wait_tensor(f.all_gather_into_tensor(x, world_size,
                                                      groups.torch_name(group_name)))
    return gathered.view(a.dtype) if as_bytes else gathered


def sharded_scale(a: torch.Tensor, scale_a: torch.Tensor | None, world_size: int) -> bool:
    """Whether a gathered GEMM's scale_a is the shard's row-wise scale (to be gathered with a),
    as torch's fused op reads it: `[rows of a, 1]` with more than one element."""
    return (scale_a is not None and scale_a.numel() > 1 and world_size > 1
            and scale_a.dim() == 2 and scale_a.shape[0] == a.shape[0])


def gemm_reduce_scatter(a, b, scale_a, scale_b, out_dtype, reduce_op, group_name, world_size):
    return reduce_scatter_rows(matmul(a, b, scale_a, scale_b, out_dtype), reduce_op,
                               group_name, world_size)


def all_gather_gemm(a, b, scale_a, scale_b, out_dtype, group_name, world_size):
    if sharded_scale(a, scale_a, world_size):
        scale_a = all_gather_rows(scale_a, group_name, world_size)
    return matmul(all_gather_rows(a, group_name, world_size), b, scale_a, scale_b, out_dtype)
