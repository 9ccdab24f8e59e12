"""The async-TP kernels on CUDA (torch's symmetric-memory fused ops) against their references (the
GEMM then NCCL's reduce-scatter, NCCL's all-gather then the GEMM), on 2 GPUs of one host, bf16
and FP8 with per-tensor and row-wise scales (a gathered GEMM's row-wise scale in both of torch's
forms: the shard's rows, gathered with a, and the gathered rows), the group named as torch names
it and as vLLM's coordinator `tp:0` (irfuse.models.dist.vllm_style_groups; the kernels resolve
it to the NCCL group). Needs 2 GPUs with peer-to-peer access:

    python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_comms_gpu.py
"""

from __future__ import annotations

import os

import pytest
import torch

from irfuse.models.dist import spawn_ranks

pytestmark = [pytest.mark.gpu, pytest.mark.dist, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs")]


def _worker(rank: int, world: int, out_dir: str) -> None:
    import torch.distributed as dist

    from irfuse.models.dist import vllm_style_groups

    with vllm_style_groups(dist.group.WORLD) as coordinator:
        results = {}
        for group in (dist.group.WORLD.group_name, coordinator.unique_name):
            results.update(_cases(rank, world, group))
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))


def _cases(rank: int, world: int, group: str) -> dict:
    from irfuse.kernels import gemm_comms, gemm_comms_ref

    gen = torch.Generator(device="cuda").manual_seed(rank)
    results = {}
    for m in (256, 4096):
        a = torch.randn(m, 1024, device="cuda", generator=gen).to(torch.bfloat16)
        b = torch.randn(1024, 512, device="cuda", generator=gen).to(torch.bfloat16) / 32
        shard = a[: m // world].contiguous()
        cases = {"rs_bf16": (a, b, None, None, None), "ag_bf16": (shard, b, None, None, None)}
        if torch.cuda.get_device_capability() >= (8, 9):
            a8, shard8 = a.to(torch.float8_e4m3fn), shard.to(torch.float8_e4m3fn)
            b8 = (b * 32).to(torch.float8_e4m3fn).t().contiguous().t()  # column-major
            sa, sb = torch.tensor([0.5], device="cuda"), torch.tensor([1 / 32], device="cuda")
            rows = torch.rand(m, 1, device="cuda", generator=gen) + 0.5
            cols = torch.rand(1, 512, device="cuda", generator=gen) / 16
            cases["rs_fp8"] = (a8, b8, sa, sb, torch.bfloat16)
            cases["ag_fp8"] = (shard8, b8, sa, sb, torch.bfloat16)
            cases["rs_fp8_rows"] = (a8, b8, rows, cols, torch.bfloat16)
            cases["ag_fp8_rows_sharded"] = (shard8, b8, rows[: m // world].contiguous(), cols,
                                            torch.bfloat16)
            cases["ag_fp8_rows_replicated"] = (shard8, b8, rows, cols, torch.bfloat16)
        for key, (x, w, s1, s2, dt) in cases.items():
            if key.startswith("rs"):
                got = gemm_comms.gemm_reduce_scatter(x, w, s1, s2, dt, "sum", group, world)
                ref = gemm_comms_ref.gemm_reduce_scatter(x, w, s1, s2, dt, "sum", group, world)
            else:
                got = gemm_comms.all_gather_gemm(x, w, s1, s2, dt, group, world)
                ref = gemm_comms_ref.all_gather_gemm(x, w, s1, s2, dt, group, world)
            results[f"{group}_{key}_{m}"] = (got.cpu(), ref.cpu())
    return results


def test_symm_mem_ops_match_the_references(tmp_path):
    spawn_ranks(2, _worker, str(tmp_path), backend="nccl", init_file=str(tmp_path / "init"))
    for rank in range(2):
        for key, (got, ref) in torch.load(tmp_path / f"rank{rank}.pt").items():
            assert got.shape == ref.shape and got.dtype == ref.dtype, key
            torch.testing.assert_close(got.float(), ref.float(), rtol=1e-2, atol=1e-2, msg=key)
