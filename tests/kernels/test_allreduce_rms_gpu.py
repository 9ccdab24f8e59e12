"""The CUDA paths of the fused all-reduce + RMSNorm (+ quant) on 2 GPUs (NCCL ranks): FlashInfer's
trtllm fusion (where installed; its NVFP4 fusion from sm100 only, refused below), NCCL +
irfuse's Triton kernels, and torch's symmetric-memory all-reduce (one-shot up to 128 KiB, here
T <= 64, two-shot above, one buffer reused; it needs NVLink P2P between the GPUs: a fallback to
NCCL fails the test) + the same Triton kernels, each against the reference composition on the
same ranks (the all-reduce, then the norm and quant references).

    PYTHONPATH=. python -m pytest -q -m "gpu and dist" tests/kernels/test_allreduce_rms_gpu.py

Skips with fewer than 2 GPUs. Tolerances: the norm and residual within two bf16 ulps on 99% of
elements (FlashInfer normalizes in float32 and rounds once), FP8 codes within one code."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist

from irfuse.models.dist import spawn_ranks

pytestmark = [
    pytest.mark.gpu, pytest.mark.dist,
    pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                       reason="needs 2 CUDA GPUs"),
]

FP8 = torch.float8_e4m3fn


def _close(a: torch.Tensor, b: torch.Tensor, rel: float) -> bool:
    a, b = a.float(), b.float()
    far = (a - b).abs() > rel * torch.maximum(a.abs(), b.abs()) + 1e-6
    return far.float().mean().item() <= 0.01


def _worker(rank: int, world: int, out_dir: str) -> None:
    from irfuse.kernels import allreduce_rms, allreduce_rms_ref, quant_ref
    from irfuse.kernels import allreduce_symm_mem as sm
    from irfuse.kernels.dispatch import fake_nvfp4

    name = dist.group.WORLD.group_name
    results = {}
    for t in (1, 7, 64, 300):
        g = torch.Generator(device="cuda").manual_seed(rank + 10 * t)
        x = torch.randn(t, 1024, device="cuda", dtype=torch.bfloat16, generator=g)
        r = torch.randn(t, 1024, device="cuda", dtype=torch.bfloat16, generator=g)
        w = (torch.rand(1024, device="cuda", generator=g) + 0.5).to(torch.bfloat16)
        s = torch.tensor(0.5, device="cuda")  # not 1: a reciprocal mix-up shows
        gs = torch.tensor(448.0 * 6 / 8.0, device="cuda")
        y_ref, r_ref = allreduce_rms_ref.all_reduce_rms_norm(x, r, w, name, 1e-5, 0.0)
        y0_ref, r0_ref = allreduce_rms_ref.all_reduce_rms_norm(x, None, w, name, 1e-5, 0.0)
        q_ref = quant_ref.quant_fp8_static(y_ref, s, FP8)
        ok = {}
        y, res = allreduce_rms.nccl_norm(x, r, w, name, 1e-5, 0.0, False, False, True)
        ok["triton norm"] = _close(y, y_ref, 2 ** -6) and _close(res, r_ref, 2 ** -7)
        q, res = allreduce_rms.nccl_static(x, r, w, s, name, 1e-5, 0.0, FP8, False, False,
                                           False, True)
        ok["triton fp8"] = _close(q, q_ref, 2 ** -3) and _close(res, r_ref, 2 ** -7)
        q4, sf4, _ = allreduce_rms.nccl_nvfp4(x, r, w, gs, name, 1e-5, 0.0, False, False, True)
        d = quant_ref.dequant_nvfp4(q4, sf4, gs)
        ok["triton nvfp4"] = _close(d, y_ref.float(), 0.5)
        why = sm.reason(x, name)
        if why is None:
            shot = "one-shot" if sm.one_shot(x.numel() * x.element_size()) else "two-shot"
            y, res = allreduce_rms.nccl_norm(x, r, w, name, 1e-5, 0.0, False, False, True,
                                             symm="gpu test")
            y0, res0 = allreduce_rms.nccl_norm(x, None, w, name, 1e-5, 0.0, False, False, True,
                                               symm="gpu test")
            q, res8 = allreduce_rms.nccl_static(x, r, w, s, name, 1e-5, 0.0, FP8, False, False,
                                                False, True, symm="gpu test")
            ok[f"symm_mem {shot}"] = (name not in sm.FALLBACKS
                                      and _close(y, y_ref, 2 ** -6) and _close(res, r_ref, 2 ** -7)
                                      and _close(y0, y0_ref, 2 ** -6)
                                      and _close(res0, r0_ref, 2 ** -7)
                                      and _close(q, q_ref, 2 ** -3)
                                      and _close(res8, r_ref, 2 ** -7))
        else:
            ok["symm_mem skipped: " + why] = False  # bf16 on CUDA with 2 ranks: it must run
        reason = allreduce_rms.flashinfer_reason(x, r, w, name, 0.0, False)
        if reason is None:
            y, res = allreduce_rms.flashinfer_fused(x, r, w, name, 1e-5, 0.0,
                                                    "kARResidualRMSNorm")
            ok["flashinfer norm"] = _close(y, y_ref, 2 ** -6) and _close(res, r_ref, 2 ** -7)
            y, res = allreduce_rms.flashinfer_fused(x, None, w, name, 1e-5, 0.0,
                                                    "kARResidualRMSNorm")
            ok["flashinfer no residual"] = (_close(y, y0_ref, 2 ** -6)
                                            and _close(res, r0_ref, 2 ** -7))
            q = torch.empty(x.shape, dtype=FP8, device="cuda")
            _, res = allreduce_rms.flashinfer_fused(x, r, w, name, 1e-5, 0.0,
                                                    "kARResidualRMSNormFP8Quant", quant_out=q,
                                                    scale_factor=s)
            ok["flashinfer fp8"] = _close(q, q_ref, 2 ** -3) and _close(res, r_ref, 2 ** -7)
            nvfp4 = allreduce_rms.flashinfer_reason(x, r, w, name, 0.0, False, "nvfp4")
            if torch.cuda.get_device_capability()[0] >= 10:
                q4, sf4 = fake_nvfp4(x, x.shape[-1])
                _, res = allreduce_rms.flashinfer_fused(
                    x, r, w, name, 1e-5, 0.0, "kARResidualRMSNormFP4Quant", quant_out=q4,
                    scale_out=sf4, scale_factor=gs)
                d = quant_ref.dequant_nvfp4(q4, sf4, gs)
                ok["flashinfer nvfp4"] = nvfp4 is None and _close(d, y_ref.float(), 0.5)
            else:  # FlashInfer's FP4 conversion is compiled out below sm100: irfuse refuses it
                ok["flashinfer nvfp4 refused"] = (nvfp4 or "").startswith(
                    allreduce_rms.NVFP4_BELOW_SM100)
        else:
            ok["flashinfer skipped: " + reason] = True
        results[t] = ok
    results["symm_mem buffers"] = {"one per group, dtype and hidden": len(sm.BUFFERS) == 1}
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))


def test_cuda_paths_match_the_reference_on_two_gpus(tmp_path):
    spawn_ranks(2, _worker, str(tmp_path), backend="nccl", init_file=str(tmp_path / "init"))
    for rank in range(2):
        results = torch.load(tmp_path / f"rank{rank}.pt")
        bad = {t: [k for k, v in ok.items() if not v] for t, ok in results.items()}
        assert not any(bad.values()), bad
