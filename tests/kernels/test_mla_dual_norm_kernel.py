"""MLA's dual RMSNorm: the torch reference equals the two unfused norms in their spellings bit
for bit, and the Triton kernel (on the CPU under TRITON_INTERPRET=1, in a child process) equals
the reference within two bf16/fp16 ulps on strided slices of one projection."""

from __future__ import annotations

import json
import sys

import pytest
import torch
import torch.nn.functional as F

from irfuse.kernels import mla_dual_norm_ref

SHAPES = [(1, 64, 16), (5, 96, 48), (7, 1536 // 8, 512 // 8)]  # (T, q width, kv width)


def _proj(t: int, dq: int, dkv: int, dtype: torch.dtype, seed: int = 0):
    """q and kv as slices of one [T, dq + dkv + 16] projection (k_pe last), and weights."""
    g = torch.Generator().manual_seed(seed)
    proj = (torch.randn(t, dq + dkv + 16, generator=g) * 3).to(dtype)
    q, kv_lora = proj.split([dq, dkv + 16], -1)
    kv, _ = kv_lora.split([dkv, 16], -1)
    return q, (torch.rand(dq, generator=g) + 0.5).to(dtype), kv, \
        (torch.rand(dkv, generator=g) + 0.5).to(dtype)


def _vllm_native(x, w, eps):
    """vLLM's RMSNorm.forward_native (and Hugging Face's DeepseekV3RMSNorm)."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return xf.to(x.dtype) * w


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(("t", "dq", "dkv"), SHAPES)
def test_reference_is_the_unfused_norms(dtype, t, dq, dkv):
    q, qw, kv, kvw = _proj(t, dq, dkv, dtype)
    qn, kvn = mla_dual_norm_ref.mla_dual_rms_norm(q, qw, kv, kvw, 1e-6, 1e-5)
    assert torch.equal(qn, _vllm_native(q, qw, 1e-6))
    assert torch.equal(kvn, _vllm_native(kv, kvw, 1e-5))
    assert qn.is_contiguous() and kvn.is_contiguous()
    # F.rms_norm multiplies the weight in float32 and rounds once: `weight_f32`.
    qn, kvn = mla_dual_norm_ref.mla_dual_rms_norm(q, qw, kv, kvw, 1e-6, 1e-6, weight_f32=True)
    assert torch.equal(qn, F.rms_norm(q, (dq,), qw, 1e-6))
    assert torch.equal(kvn, F.rms_norm(kv, (dkv,), kvw, 1e-6))


def test_reference_errors_name_the_problem():
    q, qw, kv, kvw = _proj(4, 64, 32, torch.bfloat16)
    with pytest.raises(ValueError, match="differ in their leading dims"):
        mla_dual_norm_ref.mla_dual_rms_norm(q, qw, kv[:2], kvw, 1e-6, 1e-6)
    with pytest.raises(ValueError, match="weight shape"):
        mla_dual_norm_ref.mla_dual_rms_norm(q, qw, kv, qw, 1e-6, 1e-6)
    with pytest.raises(ValueError, match="q is torch.bfloat16 but kv torch.float16"):
        mla_dual_norm_ref.mla_dual_rms_norm(q, qw, kv.half(), kvw.half(), 1e-6, 1e-6)


CASES = [(t, dq, dkv, dtype, offset)
         for (t, dq, dkv) in SHAPES for dtype in ("bfloat16", "float16", "float32")
         for offset in (0.0, 1.0)]


def _ids(case) -> str:
    t, dq, dkv, dtype, offset = case
    return f"T{t}-q{dq}-kv{dkv}-{dtype}" + ("-offset" if offset else "")


def _compare(device: str) -> dict:
    """Each case's worst distance of the Triton kernel to the reference, in ulps."""
    from irfuse.kernels import mla_dual_norm

    out = {}
    for case in CASES:
        t, dq, dkv, dtype, offset = case
        q, qw, kv, kvw = (x.to(device) for x in _proj(t, dq, dkv, getattr(torch, dtype), seed=t))
        got = mla_dual_norm.mla_dual_rms_norm(q, qw, kv, kvw, 1e-6, 1e-5, offset)
        want = mla_dual_norm_ref.mla_dual_rms_norm(q, qw, kv, kvw, 1e-6, 1e-5, offset)
        worst = 0.0
        for g, w in zip(got, want, strict=True):
            ulp = torch.finfo(w.dtype).eps * w.float().abs().clamp_min(torch.finfo(w.dtype).tiny)
            worst = max(worst, ((g.float() - w.float()).abs() / ulp).max().item())
        out[_ids(case)] = {"ulps": worst, "contiguous": all(g.is_contiguous() for g in got)}
    return out


def _worker() -> None:
    print(json.dumps(_compare("cpu")))


@pytest.fixture(scope="module")
def interpreted() -> dict:
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    from interpret_worker import run_worker

    return run_worker(__file__)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_triton_kernel_matches_the_reference(interpreted, case):
    r = interpreted[_ids(case)]
    assert r["contiguous"]
    assert r["ulps"] <= 2.0, r


@pytest.mark.gpu
def test_triton_kernel_on_the_gpu():
    """The compiled kernel on a CUDA GPU: within two ulps of the reference there, every case."""
    results = _compare("cuda")
    bad = {k: r for k, r in results.items() if not r["contiguous"] or r["ulps"] > 2.0}
    assert not bad, bad


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()
