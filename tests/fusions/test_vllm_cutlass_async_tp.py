"""fuse-gemm-comms on vLLM's FP8 linear on CUDA (`_C.cutlass_scaled_mm`, our stand-in from
`vllm_ops.py`), across 2 gloo processes: vLLM's async-TP test models with the CUTLASS GEMM
(test_async_tp.py's `TestCutlassScaledMMRSModel` and `TestAGCutlassScaledMMModel`: the GEMM into a
reduce-scatter, an all-gather into the GEMM), with the scale layouts vLLM's FP8 linears pass: a
per-tensor activation scale beside a channel-wise weight scale stored `[N, 1]`, and a per-token
one beside a per-tensor weight scale. Each fuses once (raised to gemm.scaled_matmul, then one
async-TP op) and gives the model's output on every rank bit for bit (its collectives taken in one
process)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import vllm_ops as V
from torch import nn

from irfuse.models.dist import spawn_ranks

HIDDEN, TOKENS = 32, 16
BF16 = torch.bfloat16


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


class CutlassGemmComms(nn.Module):
    """`rs`: the CUTLASS GEMM of the rank's fp8 rows, reduce-scattered; `ag`: the rows
    all-gathered, then the GEMM. `per_token`: the activation scale per row (the gathered rows'
    in `ag`) and the weight's per tensor; else per tensor and per output channel `[N, 1]`."""

    def __init__(self, kind: str, per_token: bool):
        super().__init__()
        self.kind, self.per_token = kind, per_token
        self.register_buffer("w", (torch.randn(HIDDEN, HIDDEN, generator=_gen(1)) / 4)
                             .to(V.FP8))
        w_scale = (torch.rand(HIDDEN, 1, generator=_gen(2)) + 0.5) / 8
        self.register_buffer("w_scale", w_scale[:1, 0] if per_token else w_scale)
        self.register_buffer("x_scale", torch.tensor([0.05]))

    def gemm(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        scale = (torch.linspace(0.02, 0.08, rows).reshape(rows, 1) if self.per_token
                 else self.x_scale)
        return V.vllm_cutlass_scaled_mm(x, self.w.t(), scale, self.w_scale, BF16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        group = dist.group.WORLD
        if self.kind == "ag":
            return self.gemm(funcol.all_gather_tensor(x, 0, group))
        return funcol.reduce_scatter_tensor(self.gemm(x), "sum", 0, group)


CASES = [("rs", False), ("rs", True), ("ag", False), ("ag", True)]


def _worker(rank: int, world: int, out_dir: str) -> None:
    from irfuse import backend

    for kind, per_token in CASES:
        torch._dynamo.reset()
        backend.clear_reports()
        model = CutlassGemmComms(kind, per_token)
        x = torch.randn(TOKENS, HIDDEN, generator=_gen(10 + rank)).to(V.FP8)
        compiled = torch.compile(model, backend="irfuse", options={
            "inductor": False, "strict": True,
            "pass_config": {"fuse_gemm_comms": True, "sp_min_token_num": 1}})
        with torch.no_grad():
            got = compiled(x)
        fused = sum(r.fused("fuse-gemm-comms") for r in backend.reports())
        raised = sum(r.raised.get("scaled_gemm", 0) for r in backend.reports())
        torch.save({"x": x, "got": got, "fused": fused, "raised": raised},
                   os.path.join(out_dir, f"{kind}-{per_token}-rank{rank}.pt"))


def _expected(kind: str, per_token: bool, xs: list[torch.Tensor], rank: int) -> torch.Tensor:
    """The eager model's output on `rank`, its collective taken in one process (gloo gathers no
    fp8 and reduce-scatters no bf16): the rows gathered, or the two ranks' GEMMs summed (exact in
    f32, then rounded: bf16's sum) and split by rows."""
    model = CutlassGemmComms(kind, per_token)
    with torch.no_grad():
        if kind == "ag":
            return model.gemm(torch.cat(xs))
        total = sum(model.gemm(x).float() for x in xs)
    return total.to(BF16).chunk(len(xs))[rank]


@pytest.mark.dist
def test_cutlass_gemm_fuses_with_its_collective(tmp_path: Path) -> None:
    spawn_ranks(2, _worker, str(tmp_path), init_file=str(tmp_path / "init"))
    for kind, per_token in CASES:
        runs = [torch.load(tmp_path / f"{kind}-{per_token}-rank{r}.pt") for r in range(2)]
        for rank, run in enumerate(runs):
            assert (run["raised"], run["fused"]) == (1, 1), (kind, per_token, rank)
            want = _expected(kind, per_token, [r["x"] for r in runs], rank)
            # Bit for bit: torch's scaled GEMM on the CPU (the fused op's reference) scales the
            # operands, as vLLM defines cutlass_scaled_mm and the stand-in computes it.
            assert torch.equal(run["got"], want), (kind, per_token, rank)
