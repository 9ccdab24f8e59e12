"""fuse_gemm_comms: async TP. GEMM -> reduce-scatter of its rows and all-gather of rows -> GEMM,
plain or FP8-scaled, each one op (`irfuse.fusions.fuse_gemm_comms.pattern`), on the collectives that
enable_sp leaves (the config turns enable_sp on with it, as vLLM does). Off at every level, as in
vLLM (#25689).

Kernels: on CUDA, torch's symmetric-memory fused ops (`torch.ops.symm_mem.fused_matmul_reduce_
scatter`, `fused_all_gather_matmul` and the scaled variants; `irfuse.kernels.gemm_comms`),
which need an NCCL group of GPUs with peer-to-peer access; symmetric memory is enabled for the
group at its first call. On the CPU, where those ops have no kernel, the pass still runs and the
reference runs: the GEMM then the functional reduce-scatter, or the functional all-gather then
the GEMM (`gemm_comms_ref`), over gloo. Not measured yet (the multi-GPU issue measures it:
`benchmarks/bench_tp_e2e.py`).
"""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import Attribute

from irfuse.dialects import aten, fused, kernel
from irfuse.fusions.declare import Fusion, Kernel, Support
from irfuse.fusions.fuse_gemm_comms.pattern import (
    ALL_GATHER_GEMM,
    GEMM_REDUCE_SCATTER,
    AllGatherGemmPattern,
    GemmReduceScatterPattern,
)
from irfuse.fusions.kernel_call import Args, kernel_call
from irfuse.kernels import gemm_comms_ref
from irfuse.kernels.dispatch import empty, kernels

# irfuse's implementation labels (reference / triton / flashinfer / inductor) have no
# "symm_mem": on CUDA the call records the default (`triton`, not measured yet) while its CUDA
# implementation runs torch's symmetric-memory op (the support matrix's backend column says
# symm_mem).


def _examples(shape: tuple[int, ...]) -> list[tuple]:
    """A bf16 call on a group of one rank (the collective is the identity). opcheck cannot take
    FP8 inputs on the CPU (its schema check does arithmetic on them); the FP8-scaled forms run
    in the gloo tests (tests/fusions/test_enable_sp.py)."""
    g = torch.Generator().manual_seed(0)
    rows = 1
    for d in shape[:-1]:
        rows *= d
    a = torch.randn(rows, shape[-1], generator=g).to(torch.bfloat16)  # a GEMM's a is 2-D
    b = (torch.randn(shape[-1], 64, generator=g) / 8).to(torch.bfloat16)
    return [(a, b, None, None, None)]


def _rs_examples(shape: tuple[int, ...]) -> list[tuple]:
    return [(*args, "sum", "0", 1) for args in _examples(shape)]


def _ag_examples(shape: tuple[int, ...]) -> list[tuple]:
    return [(*args, "0", 1) for args in _examples(shape)]


def _out_dtype(a: torch.Tensor, out_dtype: torch.dtype | None) -> torch.dtype:
    return out_dtype if out_dtype is not None else a.dtype


def _rs_cuda(a, b, scale_a, scale_b, out_dtype, reduce_op, group_name, world_size):
    if a.device.type != "cuda":
        return gemm_comms_ref.gemm_reduce_scatter(a, b, scale_a, scale_b, out_dtype, reduce_op,
                                                  group_name, world_size)
    return kernels("gemm_comms").gemm_reduce_scatter(a, b, scale_a, scale_b, out_dtype,
                                                     reduce_op, group_name, world_size)


def _rs_fake(a, b, scale_a, scale_b, out_dtype, reduce_op, group_name, world_size):
    return empty(a, (a.shape[0] // world_size, b.shape[1]), _out_dtype(a, out_dtype))


RS = Kernel(
    GEMM_REDUCE_SCATTER,
    "(Tensor a, Tensor b, Tensor? scale_a, Tensor? scale_b, ScalarType? out_dtype, "
    "str reduce_op, str group_name, int world_size) -> Tensor",
    gemm_comms_ref.gemm_reduce_scatter, _rs_cuda, _rs_fake, single_tensor=True,
    examples=_rs_examples)


def _ag_cuda(a, b, scale_a, scale_b, out_dtype, group_name, world_size):
    if a.device.type != "cuda":
        return gemm_comms_ref.all_gather_gemm(a, b, scale_a, scale_b, out_dtype, group_name,
                                              world_size)
    return kernels("gemm_comms").all_gather_gemm(a, b, scale_a, scale_b, out_dtype,
                                                 group_name, world_size)


def _ag_fake(a, b, scale_a, scale_b, out_dtype, group_name, world_size):
    return empty(a, (a.shape[0] * world_size, b.shape[1]), _out_dtype(a, out_dtype))


AG = Kernel(
    ALL_GATHER_GEMM,
    "(Tensor a, Tensor b, Tensor? scale_a, Tensor? scale_b, ScalarType? out_dtype, "
    "str group_name, int world_size) -> Tensor",
    gemm_comms_ref.all_gather_gemm, _ag_cuda, _ag_fake, single_tensor=True,
    examples=_ag_examples)


def _operands(op: fused.GemmReduceScatterOp | fused.AllGatherGemmOp) -> tuple[Args, list]:
    a = Args()
    out_dtype: Attribute = aten.NONE if op.out_dtype is None else op.out_dtype
    return a, [a.tensor(op.a), a.tensor(op.b), a.optional(op.scale_a), a.optional(op.scale_b),
               out_dtype]


def _lower_rs(op: fused.GemmReduceScatterOp, platform: str) -> kernel.CallOp:
    a, template = _operands(op)
    template += [StringAttr(op.reduce_op.data), StringAttr(op.group.data),
                 IntAttr(op.world_size.value.data)]
    return kernel_call(RS, a, template, op, platform)


def _lower_ag(op: fused.AllGatherGemmOp, platform: str) -> kernel.CallOp:
    a, template = _operands(op)
    template += [StringAttr(op.group.data), IntAttr(op.world_size.value.data)]
    return kernel_call(AG, a, template, op, platform)


FUSION = Fusion(
    name="fuse-gemm-comms",
    flag="fuse_gemm_comms",
    kind="fusion",
    fuses="GEMM -> reduce-scatter and all-gather -> GEMM become symmetric-memory "
    "overlapped ops (async TP); implies enable_sp",
    quant="optional",
    schemes=("fp8-static-tensor", "fp8-dynamic-token"),
    range_rule="from-sp-min",
    platforms={"cpu": Support("reference", None),
               **{c: Support("symm_mem", None) for c in ("cuda:sm80", "cuda:sm90",
                                                          "cuda:sm100")}},
    unsupported="torch's symmetric-memory fused GEMM + collective ops need CUDA GPUs "
    "with peer-to-peer access",
    needs_tp=True,
    vllm_pass="AsyncTPPass",
    note="vLLM's O2 leaves it off too (#25689); the CPU runs the reference (the GEMM and the "
    "functional collective, unoverlapped)",
    patterns=(GemmReduceScatterPattern(), AllGatherGemmPattern()),
    lowerings={fused.GemmReduceScatterOp.name: _lower_rs,  # type: ignore[dict-item]
               fused.AllGatherGemmOp.name: _lower_ag},
    kernels=(RS, AG),
)
