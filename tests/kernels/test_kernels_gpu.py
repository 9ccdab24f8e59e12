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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import kernel_cases  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case", kernel_cases.gpu_cases(), ids=lambda c: c.id)
def test_kernel_matches_reference_on_gpu(case: kernel_cases.Case) -> None:
    r = kernel_cases.run_case(case, "cuda")
    assert r["ok"], r["detail"]


def test_custom_ops_dispatch_to_triton_on_gpu() -> None:
    import irfuse.emit.custom_ops  # noqa: F401
    from irfuse.kernels import norm_quant_ref

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


def _bits(t: torch.Tensor) -> torch.Tensor:
    """fp8 tensors as bytes, for bitwise comparison (torch.equal has no fp8 kernel)."""
    return t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t


def test_two_tensor_custom_ops_on_gpu() -> None:
    """gate and up apart (column slices of one merged GEMM-shaped output, as a fused
    gate/up projection leaves them) give the [gate | up] form's bits, through the ops' CUDA
    dispatch, and the two-tensor op captures into a CUDA graph."""
    import irfuse.emit.custom_ops  # noqa: F401

    ops = torch.ops.irfuse
    fp8 = torch.float8_e4m3fn
    i = 14336
    big = torch.randn(48, 3 * i, device="cuda", dtype=torch.bfloat16)
    gate, up = big[:, :i], big[:, 2 * i:]
    cat = torch.cat([gate, up], -1)
    s = torch.tensor([0.02], device="cuda")
    calls = [(ops.silu_mul, ()), (ops.silu_mul_quant_fp8_static, (s, fp8)),
             (ops.silu_mul_quant_fp8_group, (128, True, False, fp8)),
             (ops.silu_mul_quant_nvfp4, (s,))]
    for op, args in calls:
        two, one = op(gate, *args, up=up), op(cat, *args)
        for a, b in zip(two if isinstance(two, tuple) else (two,),
                        one if isinstance(one, tuple) else (one,), strict=True):
            assert a.shape == b.shape and a.stride() == b.stride()
            assert torch.equal(_bits(a), _bits(b)), op
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = ops.silu_mul_quant_fp8_static(gate, s, fp8, up)
    big.copy_(torch.randn_like(big))
    g.replay()
    torch.cuda.synchronize()
    ref = ops.silu_mul_quant_fp8_static(torch.cat([gate, up], -1), s, fp8)
    assert torch.equal(out.view(torch.uint8), ref.view(torch.uint8))
