"""Every Triton kernel against its torch reference on the GPU, at real sizes.

T in {1, 16, 4096} x H in {4096, 8192} (SiLU·Mul: intermediate H), bf16, each kernel and
quant scheme; criteria as in `kernel_cases` (quantizers alone bit-exact, after a norm or SiLU
at most 1% of codes one step off and the mean error within vLLM's tolerances).
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import kernel_cases  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case", kernel_cases.gpu_cases(), ids=lambda c: c.id)
def test_kernel_matches_reference_on_gpu(case: kernel_cases.Case) -> None:
    r = kernel_cases.run_case(case, "cuda")
    assert r["ok"], r["detail"]


def test_custom_ops_dispatch_to_triton_on_gpu() -> None:
    import irfuse.emit.custom_ops  # noqa: F401
    from irfuse.emit.kernels import norm_quant_ref

    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x)
    w = torch.rand(4096, device="cuda", dtype=torch.bfloat16) + 0.5
    s = torch.tensor([0.02], device="cuda")
    *qs, res = torch.ops.irfuse.add_rms_norm_quant_fp8_static(x, r, w, [s], 1e-6, 0.0,
                                                             torch.float8_e4m3fn)
    qs_ref, res_ref = norm_quant_ref.rms_norm_quant_fp8_static(x, w, [s], 1e-6, 0.0,
                                                               torch.float8_e4m3fn, r)
    assert torch.equal(res, res_ref)
    assert (qs[0].float() != qs_ref[0].float()).float().mean().item() < 0.01
    # A CUDA graph captures the op (no host sync, no allocation outside the pool); the kernel
    # is compiled by a first call, outside the capture.
    torch.ops.irfuse.silu_mul_quant_fp8_static(x, s, torch.float8_e4m3fn)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = torch.ops.irfuse.silu_mul_quant_fp8_static(x, s, torch.float8_e4m3fn)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    ref = torch.ops.irfuse.silu_mul_quant_fp8_static(x, s, torch.float8_e4m3fn)
    assert (out.float() != ref.float()).float().mean().item() < 0.01
