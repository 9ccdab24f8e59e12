"""Attention (prefill and paged decode) and MLA with the NVFP4 output quant fused: the Triton
epilogue against the reference.

The epilogue rounds the attention output to the model dtype (as the unfused graph stores it) and
quantizes that with `quant_ref.quant_nvfp4`'s arithmetic, so two criteria:
1. Exact: `attention_nvfp4`'s (`paged_decode_nvfp4`'s, with one split or several) codes and
   swizzled block scales (padding included) equal, byte for byte, `quant_ref.quant_nvfp4` of the
   same kernel's unquantized output (`attention` / `paged_decode`, which store `acc / l` in the
   model dtype): the epilogue adds no rounding of its own. No ties are exempt: e2m1 ties go to
   even in both.
2. Against the unfused graph (SDPA, then the quant: `attention_quant_ref.attention_nvfp4` and
   `paged_decode_nvfp4`; `mla_attention_quant_ref.mla_attention_nvfp4` for MLA, which has no
   unquantized kernel): the kernel's softmax adds in another order and with exp2, so a
   model-dtype output can land one ulp away, which moves a code (or, at a block's amax, the
   block's scale). Dequantized (`quant_ref.dequant_nvfp4`): mean |a - b| / mean |b| <= 1e-2
   (docs/numerics.md: attention + quant), at most 5% of the code bytes and 5% of the block scales
   differ (measured: up to 1.6% and 3.1%, one block of 32 in the smallest case).

Under TRITON_INTERPRET=1 on the CPU (a subprocess: the interpreter must be on before triton
loads) at tiny sizes, and on the GPU at real sizes (marked `gpu`). Cases cover GQA, a head size
that is not a power of two (masked columns), strided q/k/v, more than 128 token rows (a second
scale tile), fewer than four blocks a row (padding columns), Tq != Tk, a global scale that
saturates the block scales and codes, and decode with one split (the decode kernel quantizes)
or several (the combine kernel does).
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

from irfuse.kernels import attention_quant_ref, mla_attention_quant_ref, quant_ref

HERE = pathlib.Path(__file__).resolve().parents[1]  # tests/: the shared helpers
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "kernels"))  # the FP8 kernel tests' paged-cache builder

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
TOL = 1e-2
MAX_CODE_MISMATCH = 0.05
MAX_SCALE_MISMATCH = 0.05

# (B, Hq, Hk, Tq, Tk, D, causal, dtype, transposed, saturate, config or None)
PREFILL_CASES = [
    (1, 4, 2, 24, 24, 32, True, "bf16", False, False, None),
    (2, 2, 1, 20, 20, 48, False, "fp16", False, False, None),
    (1, 4, 4, 17, 17, 64, True, "bf16", True, False, None),
    (2, 2, 1, 70, 70, 32, True, "bf16", False, False, None),
    (1, 2, 1, 24, 24, 16, True, "bf16", False, False, None),
    (1, 2, 2, 8, 30, 32, False, "bf16", False, False, None),
    (1, 4, 2, 24, 24, 32, True, "bf16", False, True, None),
    (1, 4, 2, 40, 40, 32, True, "bf16", False, False, (32, 16, 4, 1, False)),
]
# (B, Hq, Hk, D, block_size, seq_lens, dtype, splits or None)
DECODE_CASES = [
    (2, 4, 2, 64, 16, (37, 5), "bf16", 1),
    (2, 4, 2, 32, 16, (64, 17), "bf16", 3),
    (1, 4, 1, 48, 16, (40,), "fp16", 2),
    (3, 8, 2, 16, 8, (23, 48, 1), "bf16", 1),
    (2, 4, 2, 32, 16, (330, 7), "bf16", 20),
]
# Sequences of length 0 (splits): against the graph fuse-attn-quant replaces (its mask keeps
# nothing there, and SDPA's math backend gives 0), the empty rows' codes and scales all 0.
EMPTY_CASES = [None, 1, 3]
# (layout, T, H, nope, rope, v, rank, dtype)
MLA_CASES = [
    ("token", 24, 4, 16, 8, 32, 32, "bf16"),
    ("batch", 20, 2, 32, 16, 48, 64, "fp16"),
]


def _prefill_id(c) -> str:
    b, hq, hk, tq, tk, d, causal, dtype, tr, sat, cfg = c
    return (f"B{b}-H{hq}/{hk}-T{tq}x{tk}-D{d}-{'causal' if causal else 'full'}-{dtype}"
            f"{'-strided' if tr else ''}{'-saturating' if sat else ''}"
            f"{'-cfg' + '.'.join(map(str, cfg)) if cfg else ''}")


def _decode_id(c) -> str:
    b, hq, hk, d, bs, lens, dtype, splits = c
    return f"B{b}-H{hq}/{hk}-D{d}-bs{bs}-L{'.'.join(map(str, lens))}-{dtype}-splits{splits}"


def _mla_id(c) -> str:
    layout, t, h, nope, rope, v, rank, dtype = c
    return f"{layout}-T{t}-H{h}-{nope}+{rope}/{v}-r{rank}-{dtype}"


def _dense(b, hq, hk, tq, tk, d, dtype, device, seed, transposed):
    gen = torch.Generator(device=device).manual_seed(seed)

    def make(h, t):
        if transposed:  # [B, T, H, D] storage seen as [B, H, T, D], as models produce it
            return torch.randn(b, t, h, d, generator=gen, device=device).to(dtype).transpose(1, 2)
        return torch.randn(b, h, t, d, generator=gen, device=device).to(dtype)

    return make(hq, tq), make(hk, tk), make(hk, tk)


def _global_scale(o: torch.Tensor, saturate: bool) -> torch.Tensor:
    """448 * 6 / amax (the convention), or 64 times that: block scales clamp at 448 and the
    largest codes at 6."""
    gs = 448.0 * 6.0 / float(o.float().abs().amax())
    return torch.tensor([gs * (64.0 if saturate else 1.0)], device=o.device)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def judge(out: tuple[torch.Tensor, torch.Tensor], ref: tuple[torch.Tensor, torch.Tensor],
          gs: torch.Tensor) -> dict:
    """Criterion 2 of the module docstring: {"ok": bool, "detail": str}."""
    (codes, sf), (rcodes, rsf) = out, ref
    if codes.shape != rcodes.shape or sf.shape != rsf.shape or codes.dtype != torch.uint8:
        return {"ok": False, "detail": f"shapes {tuple(codes.shape)} {tuple(sf.shape)} vs "
                                       f"{tuple(rcodes.shape)} {tuple(rsf.shape)}"}
    a = quant_ref.dequant_nvfp4(codes.cpu(), sf.cpu(), gs.cpu())
    b = quant_ref.dequant_nvfp4(rcodes.cpu(), rsf.cpu(), gs.cpu())
    rel = float((a - b).abs().mean() / b.abs().mean())
    code_mis = float((codes != rcodes).float().mean())
    k = codes.shape[-1] * 2 // quant_ref.NVFP4_BLOCK
    sa = quant_ref.unswizzle_block_scales(sf.cpu().float(), codes.shape[0], k)
    sb = quant_ref.unswizzle_block_scales(rsf.cpu().float(), codes.shape[0], k)
    scale_mis = float((sa != sb).float().mean())
    ok = (rel <= TOL and code_mis <= MAX_CODE_MISMATCH and scale_mis <= MAX_SCALE_MISMATCH
          and bool(torch.isfinite(a).all()))
    return {"ok": ok, "detail": f"mean rel err {rel:.2e}, code bytes differing {code_mis:.2e}, "
                                f"block scales differing {scale_mis:.2e}"}


def check_prefill(case, device: str) -> dict:
    from irfuse.kernels import attention_quant

    b, hq, hk, tq, tk, d, causal, dtype, tr, saturate, cfg = case
    q, k, v = _dense(b, hq, hk, tq, tk, d, DTYPES[dtype], device, tq * 7 + d, tr)
    sm = d ** -0.5
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm, enable_gqa=True)
    gs = _global_scale(o, saturate)
    config = attention_quant.PrefillConfig(*cfg) if cfg else None
    out = attention_quant.attention_nvfp4(q, k, v, gs, softmax_scale=sm, causal=causal,
                                          config=config)
    own = attention_quant.attention(q, k, v, softmax_scale=sm, causal=causal, config=config)
    exact = quant_ref.quant_nvfp4(attention_quant_ref.token_major(own), gs)
    if not (_same(out[0], exact[0]) and _same(out[1], exact[1])):
        return {"ok": False, "detail": "the epilogue differs from quant_nvfp4 of the kernel's "
                                       "own output"}
    ref = attention_quant_ref.attention_nvfp4(q, k, v, gs, softmax_scale=sm, causal=causal)
    return judge(out, ref, gs)


def check_decode(case, device: str) -> dict:
    from test_attention_quant_kernel import _paged

    from irfuse.kernels import attention_quant

    b, hq, hk, d, bs, lens, dtype, splits = case
    q, kc, vc, table, seq_lens = _paged(b, hq, hk, d, bs, list(lens), DTYPES[dtype], device,
                                        seed=sum(lens))
    sm = d ** -0.5
    o = attention_quant_ref.paged_decode(q, kc, vc, table, seq_lens, torch.ones(1),
                                         softmax_scale=sm)
    gs = _global_scale(o, False)
    config = attention_quant.DecodeConfig(16 if device == "cpu" else 64, 4, 1, splits)
    args = (q, kc, vc, table, seq_lens)
    out = attention_quant.paged_decode_nvfp4(*args, gs, softmax_scale=sm, config=config)
    own = attention_quant.paged_decode(*args, softmax_scale=sm, config=config)
    exact = quant_ref.quant_nvfp4(own.reshape(b, hq * d), gs)
    if not (_same(out[0], exact[0]) and _same(out[1], exact[1])):
        return {"ok": False, "detail": "the epilogue differs from quant_nvfp4 of the kernel's "
                                       "own output"}
    return judge(out, attention_quant_ref.paged_decode_nvfp4(*args, gs, softmax_scale=sm), gs)


def check_decode_empty(splits: int | None, device: str) -> dict:
    from test_attention_quant_kernel import _paged

    from irfuse.fusions.fuse_attn_quant import ops as fuse_attn_quant
    from irfuse.kernels import attention_quant

    q, kc, vc, table, seq_lens = _paged(3, 4, 2, 32, 16, [37, 0, 5], torch.bfloat16, device,
                                        seed=5)
    gs = torch.tensor([448.0 * 6 / 4], device=device)
    config = attention_quant.DecodeConfig(16 if device == "cpu" else 64, 4, 1, splits)
    out = attention_quant.paged_decode_nvfp4(q, kc, vc, table, seq_lens, gs, softmax_scale=0.2,
                                             config=config)
    out = (out[0].cpu(), out[1].cpu())
    # The graph on the CPU: SDPA's math backend gives 0 where the mask keeps nothing (some CUDA
    # backends give NaN there).
    ref = fuse_attn_quant.paged_decode_quant_nvfp4(*(t.cpu() for t in (q[:, :, None], kc, vc,
                                                                         table, seq_lens, gs)),
                                                   0.2)
    scales = quant_ref.unswizzle_block_scales(out[1].cpu().float(), 3, 4 * 32 // 16)
    if out[0][1].any() or scales[1].any():
        return {"ok": False, "detail": "the empty sequence's codes or block scales are not 0"}
    return judge(out, ref, gs)


def _mla_inputs(case, device: str):
    layout, t, h, nope, rope, vd, rank, dtype = case
    gen = torch.Generator(device=device).manual_seed(t + rank)
    dt = DTYPES[dtype]

    def rnd(*shape, s=1.0):
        return (torch.randn(*shape, generator=gen, device=device) * s).to(dt)

    w = rnd(h * (nope + vd), rank, s=rank ** -0.5)
    q, kv_c, k_pe = rnd(t, h, nope + rope), rnd(t, rank), rnd(t, 1, rope)
    if layout == "batch":
        q, kv_c, k_pe = q.transpose(0, 1)[None], kv_c[None, None], k_pe.transpose(0, 1)[None]
    kw = {"num_heads": h, "nope": nope, "v_dim": vd, "softmax_scale": (nope + rope) ** -0.5,
          "causal": True, "batch_major": layout == "batch"}
    return (q, kv_c, k_pe, w), kw


def check_mla(case, device: str) -> dict:
    from irfuse.kernels import mla_attention_quant

    args, kw = _mla_inputs(case, device)
    o = mla_attention_quant_ref.mla_attention(*args, None, **kw)
    gs = _global_scale(o, False)
    out = mla_attention_quant.mla_attention_nvfp4(*args, gs, **kw)
    ref = mla_attention_quant_ref.mla_attention_nvfp4(*args, None, gs, **kw)
    return judge(out, ref, gs)


def _worker() -> None:
    import triton
    from interpret_worker import guard

    assert triton.knobs.runtime.interpret, "TRITON_INTERPRET=1 must be set before triton loads"
    results = {}
    for case in PREFILL_CASES:
        results[_prefill_id(case)] = guard(check_prefill, case, "cpu")
    for case in DECODE_CASES:
        results[_decode_id(case)] = guard(check_decode, case, "cpu")
    for case in MLA_CASES:
        results[_mla_id(case)] = guard(check_mla, case, "cpu")
    for splits in EMPTY_CASES:
        results[f"empty-{splits}"] = guard(check_decode_empty, splits, "cpu")
    print(json.dumps(results))


@pytest.fixture(scope="module")
def interpreted() -> dict:
    from interpret_worker import run_worker

    return run_worker(__file__)


@pytest.mark.parametrize("case", PREFILL_CASES, ids=_prefill_id)
def test_prefill_nvfp4_epilogue_interpreted(interpreted, case):
    r = interpreted[_prefill_id(case)]
    assert r["ok"], r["detail"]


@pytest.mark.parametrize("case", DECODE_CASES, ids=_decode_id)
def test_paged_decode_nvfp4_epilogue_interpreted(interpreted, case):
    r = interpreted[_decode_id(case)]
    assert r["ok"], r["detail"]


@pytest.mark.parametrize("splits", EMPTY_CASES)
def test_paged_decode_nvfp4_of_an_empty_sequence_is_0_interpreted(interpreted, splits):
    r = interpreted[f"empty-{splits}"]
    assert r["ok"], r["detail"]


@pytest.mark.parametrize("case", MLA_CASES, ids=_mla_id)
def test_mla_nvfp4_epilogue_interpreted(interpreted, case):
    r = interpreted[_mla_id(case)]
    assert r["ok"], r["detail"]


def test_head_sizes_that_split_nvfp4_blocks_are_refused():
    from irfuse.kernels import attention_quant, mla_attention_quant

    q, k, v = _dense(1, 4, 2, 8, 8, 8, torch.bfloat16, "cpu", 0, False)
    with pytest.raises(ValueError, match="head size divisible by 16, got 8"):
        attention_quant.attention_nvfp4(q, k, v, torch.ones(1), softmax_scale=0.1, causal=True)
    from test_attention_quant_kernel import _paged

    paged = _paged(2, 4, 2, 8, 16, [5, 9], torch.bfloat16)
    with pytest.raises(ValueError, match="head size divisible by 16, got 8"):
        attention_quant.paged_decode_nvfp4(*paged, torch.ones(1), softmax_scale=0.1)
    args, kw = _mla_inputs(("token", 8, 4, 16, 8, 24, 32, "bf16"), "cpu")
    with pytest.raises(ValueError, match="v head size divisible by 16, got 24"):
        mla_attention_quant.mla_attention_nvfp4(*args, torch.ones(1), **kw)


GPU_PREFILL = [(b, 32, 8, t, t, 128, causal, "bf16", tr, False, None)
               for b, t in ((1, 512), (2, 1000), (1, 2048))
               for causal in (True, False) for tr in (False, True)] + [
    (1, 32, 32, 300, 300, 64, True, "fp16", False, False, None),
    (1, 32, 8, 512, 512, 128, True, "bf16", False, True, None),
]
GPU_DECODE = [(b, 32, 8, 128, 16, lens, "bf16", splits)
              for b, lens in ((16, (2048,) * 16), (3, (1, 2047, 513)))
              for splits in (None, 1, 7, 40)]
GPU_MLA = [("token", 1024, 16, 128, 64, 128, 512, "bf16"), ("batch", 700, 16, 128, 64, 128, 512,
                                                            "bf16")]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_PREFILL, ids=_prefill_id)
def test_prefill_nvfp4_epilogue_on_gpu(case):
    r = check_prefill(case, "cuda")
    assert r["ok"], r["detail"]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_DECODE, ids=_decode_id)
def test_paged_decode_nvfp4_epilogue_on_gpu(case):
    r = check_decode(case, "cuda")
    assert r["ok"], r["detail"]


@pytest.mark.gpu
@pytest.mark.parametrize("splits", EMPTY_CASES)
def test_paged_decode_nvfp4_of_an_empty_sequence_is_0_on_gpu(splits):
    r = check_decode_empty(splits, "cuda")
    assert r["ok"], r["detail"]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_MLA, ids=_mla_id)
def test_mla_nvfp4_epilogue_on_gpu(case):
    r = check_mla(case, "cuda")
    assert r["ok"], r["detail"]


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()
