"""The kernels of GEMM -> reduce-scatter and all-gather -> GEMM, and how
`fused.gemm_reduce_scatter` / `fused.all_gather_gemm` lower to them.

On CUDA, torch's symmetric-memory fused ops (`torch.ops.symm_mem.fused_matmul_reduce_scatter`,
`fused_all_gather_matmul` and the scaled variants; `irfuse.kernels.gemm_comms`), which need an
NCCL group of GPUs with peer-to-peer access; symmetric memory is enabled for the group at its
first call. On the CPU, where those ops have no kernel, the reference runs: the GEMM then the
functional reduce-scatter, or the functional all-gather then the GEMM (`gemm_comms_ref`), over
gloo. Their choice records the default (`triton`, not measured yet) while the CUDA
implementation runs torch's symmetric-memory op (the support matrix's backend column says
symm_mem). The ops' `group` is the kernels' `group_name`.
"""

from __future__ import annotations

import torch
from torch import Tensor
from xdsl.ir import Operation

from irfuse.dialects import fused
from irfuse.fusions.kernel_call import Lowering
from irfuse.fusions.kernel_decl import Call, Kernel
from irfuse.kernels import gemm_comms_ref
from irfuse.kernels.dispatch import empty, kernels


def _examples(shape: tuple[int, ...]) -> list[tuple]:
    """A bf16 call on a group of one rank (the collective is the identity). opcheck cannot take
    FP8 inputs on the CPU (its schema check does arithmetic on them); the FP8-scaled forms run
    in the gloo tests of sequence parallelism and async TP."""
    g = torch.Generator().manual_seed(0)
    rows = 1
    for d in shape[:-1]:
        rows *= d
    a = torch.randn(rows, shape[-1], generator=g).to(torch.bfloat16)  # a GEMM's a is 2-D
    b = (torch.randn(shape[-1], 64, generator=g) / 8).to(torch.bfloat16)
    return [(a, b, None, None, None)]


def _out_dtype(c: Call) -> torch.dtype:
    return c.out_dtype if c.out_dtype is not None else c.a.dtype


def gemm_reduce_scatter(a: Tensor, b: Tensor, scale_a: Tensor | None, scale_b: Tensor | None,
                        out_dtype: torch.dtype | None, reduce_op: str, group_name: str,
                        world_size: int) -> Tensor:
    return gemm_comms_ref.gemm_reduce_scatter(**Call(locals()))


def _rs_cuda(c: Call) -> Tensor:
    if c.a.device.type != "cuda":
        return gemm_reduce_scatter(**c)
    return kernels("gemm_comms").gemm_reduce_scatter(**c)


RS = Kernel(gemm_reduce_scatter,
            lambda c: empty(c.a, (c.a.shape[0] // c.world_size, c.b.shape[1]), _out_dtype(c)),
            _rs_cuda,
            examples=lambda shape: [(*args, "sum", "0", 1) for args in _examples(shape)])


def all_gather_gemm(a: Tensor, b: Tensor, scale_a: Tensor | None, scale_b: Tensor | None,
                    out_dtype: torch.dtype | None, group_name: str, world_size: int) -> Tensor:
    return gemm_comms_ref.all_gather_gemm(**Call(locals()))


def _ag_cuda(c: Call) -> Tensor:
    if c.a.device.type != "cuda":
        return all_gather_gemm(**c)
    return kernels("gemm_comms").all_gather_gemm(**c)


AG = Kernel(all_gather_gemm,
            lambda c: empty(c.a, (c.a.shape[0] * c.world_size, c.b.shape[1]), _out_dtype(c)),
            _ag_cuda,
            examples=lambda shape: [(*args, "0", 1) for args in _examples(shape)])

KERNELS = (RS, AG)


def _values(op: Operation) -> dict[str, object]:
    return {"group_name": op.group}  # type: ignore[attr-defined]


LOWERINGS = {fused.GemmReduceScatterOp.name: Lowering(RS, _values),
             fused.AllGatherGemmOp.name: Lowering(AG, _values)}
