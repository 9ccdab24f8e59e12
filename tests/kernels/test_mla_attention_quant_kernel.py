"""MLA attention with the FP8 output quant fused: the torch reference against the unfused graph,
the Triton kernel (`mla_attention_quant`) against the reference.

- The reference (`mla_attention_quant_ref`) is the unfused graph: kv_b's GEMM, the per-head
  split, `[k_nope | k_pe]` with the shared k_pe expanded, SDPA, the quant; here checked bit for
  bit against that graph written out with repeated k_pe and plain SDPA.
- The kernel, under TRITON_INTERPRET=1 on the CPU (a subprocess) at tiny sizes and on the GPU
  at DeepSeek-V2-Lite sizes (marked `gpu`), judged by `test_attention_quant_kernel.judge`: every
  element within one FP8 step (plus the attention arithmetic's absolute term), mean error
  <= 1e-2 (docs/numerics.md: attention + quant), at most 10% of the codes moved.
"""

from __future__ import annotations

import json
import sys

import pytest
import torch
import torch.nn.functional as F
from test_attention_quant_kernel import DTYPES, FP8, _scale_for, judge

from irfuse.kernels import mla_attention_quant_ref as ref

# (batch-major B or None for token-major, H, T, nope, rope, v, rank, causal, dtype)
CASES = [
    (None, 4, 37, 16, 8, 16, 32, True, "bf16"),
    (None, 2, 20, 32, 16, 16, 32, False, "fp16"),
    (2, 4, 33, 16, 8, 32, 32, True, "bf16"),
    (1, 2, 19, 24, 8, 16, 32, False, "bf16"),  # nope and v not powers of two apart
]
GPU_CASES = [(None, 16, t, 128, 64, 128, 512, True, d) for t in (512, 2048)
             for d in ("bf16", "fp16")] + [
    (2, 16, 1000, 128, 64, 128, 512, True, "bf16"), (1, 16, 777, 128, 64, 128, 512, False, "bf16")]


def _id(c) -> str:
    b, h, t, nope, rope, v, rank, causal, dtype = c
    layout = "token" if b is None else f"batch{b}"
    return (f"{layout}-H{h}-T{t}-{nope}+{rope}/{v}-r{rank}-{'causal' if causal else 'full'}-"
            f"{dtype}")


def _inputs(case, device="cpu"):
    b, h, t, nope, rope, v, rank, _, dtype = case
    dt = DTYPES[dtype]
    g = torch.Generator(device=device).manual_seed(t * 3 + nope)

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, device=device) * scale).to(dt)

    w = rnd(h * (nope + v), rank, scale=rank ** -0.5)
    if b is None:
        return rnd(t, h, nope + rope), rnd(t, rank), rnd(t, 1, rope), w
    return rnd(b, h, t, nope + rope), rnd(b, 1, t, rank), rnd(b, 1, t, rope), w


def _kw(case):
    b, h, _, nope, rope, v, _, causal, _ = case
    return dict(num_heads=h, nope=nope, v_dim=v, softmax_scale=(nope + rope) ** -0.5,
                causal=causal, batch_major=b is not None)


def _unfused(q, kv_c, k_pe, w, kw):
    """The graph spelled out another way: k_pe repeated per head, SDPA in [B, H, T, D]."""
    h, nope, v = kw["num_heads"], kw["nope"], kw["v_dim"]
    if not kw["batch_major"]:
        q, kv_c, k_pe = q.transpose(0, 1)[None], kv_c[None, None], k_pe.transpose(0, 1)[None]
    b, _, t, _ = kv_c.shape
    kv = torch.matmul(kv_c.reshape(b * t, -1), w.t()).view(b, t, h, nope + v).transpose(1, 2)
    k = torch.cat([kv[..., :nope], k_pe.repeat(1, h, 1, 1)], dim=-1)
    o = F.scaled_dot_product_attention(q, k, kv[..., nope:], is_causal=kw["causal"],
                                       scale=kw["softmax_scale"])
    return o.transpose(1, 2).reshape(b * q.shape[2], h * v)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_reference_is_the_unfused_graph_bit_for_bit(case):
    q, kv_c, k_pe, w = _inputs(case)
    kw = _kw(case)
    o = _unfused(q, kv_c, k_pe, w, kw)
    scale = _scale_for(o)
    want = (o.float() / scale).clamp(-448, 448).to(FP8)
    got = ref.mla_attention_fp8(q, kv_c, k_pe, w, None, scale, divide=True, **kw)
    assert got.shape == want.shape and got.dtype == FP8
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


def test_reference_refuses_bad_arguments():
    q, kv_c, k_pe, w = _inputs(CASES[0])
    kw = _kw(CASES[0])
    with pytest.raises(ValueError, match="kv_b_weight must be"):
        ref.mla_attention(q, kv_c, k_pe, w[:-1], None, **kw)
    with pytest.raises(ValueError, match="token-major MLA takes q, kv_c, k_pe of ranks"):
        ref.mla_attention(q[None], kv_c, k_pe, w, None, **kw)
    with pytest.raises(ValueError, match="one dtype"):
        ref.mla_attention(q, kv_c.float(), k_pe, w, None, **kw)
    with pytest.raises(ValueError, match="takes no mask"):
        ref.mla_attention(q, kv_c, k_pe, w, torch.ones(1, dtype=torch.bool), **kw)


def check(case, device: str) -> dict:
    from irfuse.kernels import mla_attention_quant

    q, kv_c, k_pe, w = _inputs(case, device)
    kw = _kw(case)
    scale = _scale_for(ref.mla_attention(q, kv_c, k_pe, w, None, **kw))
    out = mla_attention_quant.mla_attention_fp8(q, kv_c, k_pe, w, scale, **kw)
    want = ref.mla_attention_fp8(q, kv_c, k_pe, w, None, scale, divide=True, **kw)
    return judge(out, want, scale, DTYPES[case[-1]])


@pytest.fixture(scope="module")
def interpreted() -> dict:
    from interpret_worker import run_worker

    return run_worker(__file__)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_kernel_matches_reference_interpreted(interpreted, case):
    r = interpreted[_id(case)]
    assert r["ok"], r["detail"]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=_id)
def test_kernel_matches_reference_on_gpu(case):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    r = check(case, "cuda")
    assert r["ok"], r["detail"]


@pytest.mark.gpu
def test_declared_cuda_implementation_runs_the_triton_kernel():
    """The declaration's CUDA entry (choice `inductor` until measured, which still runs the
    Triton kernel when called) against the reference, through the custom op's Python body."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from irfuse.fusions.fuse_attn_quant.ops import MLA_ATTN_QUANT

    case = GPU_CASES[0]
    q, kv_c, k_pe, w = _inputs(case, "cuda")
    kw = _kw(case)
    scale = _scale_for(ref.mla_attention(q, kv_c, k_pe, w, None, **kw))
    args = (q, kv_c, k_pe, w, None, scale, kw["num_heads"], kw["nope"], kw["v_dim"],
            kw["softmax_scale"], kw["causal"], kw["batch_major"], FP8)
    r = judge(MLA_ATTN_QUANT.run_cuda(*args), MLA_ATTN_QUANT.reference(*args, True), scale,
              torch.bfloat16)
    assert r["ok"], r["detail"]


if __name__ == "__main__" and "--worker" in sys.argv:
    import triton
    from interpret_worker import guard

    assert triton.knobs.runtime.interpret, "TRITON_INTERPRET=1 must be set before triton loads"
    print(json.dumps({_id(c): guard(check, c, "cpu") for c in CASES}))
