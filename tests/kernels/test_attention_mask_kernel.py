"""The Triton prefill attention kernel with an attention mask (SDPA's `attn_mask`), for its three
outputs (FP8, NVFP4, the model dtype), against SDPA with the same mask.

Masks: bool (True = attend) and additive float (random values with some -inf), broadcast from
`[B, 1, 1, S]` (the paged model's valid positions), `[1, 1, T, S]`, `[T, S]`, `[B, 1, T, S]` or
given in full `[B, Hq, T, S]`; the kernel reads them by strides, nothing is expanded. GQA (a group
of 4, and MHA), and the decode shape: one query token over keys gathered from a paged cache the
way `irfuse/models/paged.py` gathers them (strided keys, ragged `seq_lens`), where the GQA group
is folded into the tile rows. A row with every key masked: SDPA's math backend (the CPU
reference) returns 0 for it (both mask kinds; checked here on the CPU) and the kernel stores 0
(FP8 code 0, NVFP4 code 0); on the GPU, where some SDPA backends have returned NaN there
(pytorch/pytorch#110213), the reference's dead rows are taken as 0.

Criteria: FP8 and NVFP4 as tests/kernels/test_attention_quant_kernel.py and
test_attention_nvfp4_kernel.py judge the unmasked kernels (the NVFP4 epilogue also bit for bit
against `quant_nvfp4` of the kernel's own model-dtype output); the model-dtype output within one
unit in the last place of the model dtype plus 4 unit roundoffs of the largest output, mean
relative error <= 1e-2 (docs/numerics.md: attention + quant). Batch-major MLA (Hugging Face
DeepSeek-V2's masked form) with bool and float masks, FP8 and NVFP4, against the MLA reference.
Under TRITON_INTERPRET=1 on the CPU (a subprocess) at tiny sizes, and on the GPU at real sizes
(marked `gpu`).
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

from irfuse.kernels import attention_quant_ref, quant_ref

HERE = pathlib.Path(__file__).resolve().parents[1]  # tests/: the shared helpers
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "kernels"))  # the FP8 and NVFP4 kernel tests' criteria

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
ULP = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}
TOL = 1e-2

# (B, Hq, Hk, Tq, Tk, D, mask kind, mask shape, dtype); shapes: "b11s" [B, 1, 1, S], "11ts",
# "ts" (2-D), "b1ts", "full" [B, Hq, T, S]. Rows with every key masked in each bool case.
PREFILL_CASES = [
    (2, 4, 2, 20, 40, 32, "bool", "b11s", "bf16"),
    (2, 4, 2, 20, 40, 32, "bool", "11ts", "bf16"),
    (1, 4, 1, 24, 33, 64, "bool", "ts", "fp16"),
    (2, 4, 4, 17, 17, 32, "bool", "full", "bf16"),
    (2, 4, 2, 20, 40, 32, "float", "b1ts", "bf16"),
    (1, 8, 2, 24, 24, 48, "float", "full", "fp16"),
]
# (B, Hq, Hk, D, block_size, seq_lens, dtype): one query token, pages gathered by the table.
DECODE_CASES = [
    (3, 8, 2, 32, 8, (23, 48, 1), "bf16"),
    (2, 4, 4, 64, 16, (37, 5), "fp16"),
    (4, 16, 2, 32, 16, (70, 3, 16, 33), "bf16"),
]
OUTS = ("fp8", "nvfp4", "plain")
# Batch-major MLA (test_mla_attention_quant_kernel's cases: B, H, T, nope, rope, v, rank, causal,
# dtype) with a mask kind and shape over [B, H, T, T].
MLA_CASES = [
    ((2, 4, 20, 16, 8, 16, 32, False, "bf16"), "bool", "b1ts"),
    ((1, 2, 19, 24, 8, 16, 32, False, "fp16"), "float", "11ts"),
    ((2, 4, 33, 16, 8, 32, 32, False, "bf16"), "bool", "b11s"),
]


def _prefill_id(c) -> str:
    b, hq, hk, tq, tk, d, kind, shape, dtype = c
    return f"B{b}-H{hq}/{hk}-T{tq}x{tk}-D{d}-{kind}-{shape}-{dtype}"


def _decode_id(c) -> str:
    b, hq, hk, d, bs, lens, dtype = c
    return f"decode-B{b}-H{hq}/{hk}-D{d}-bs{bs}-L{'.'.join(map(str, lens))}-{dtype}"


def _mask(kind: str, shape: str, b: int, hq: int, tq: int, tk: int, dtype: torch.dtype,
          device: str, gen: torch.Generator) -> torch.Tensor:
    dims = {"b11s": (b, 1, 1, tk), "11ts": (1, 1, tq, tk), "ts": (tq, tk),
            "b1ts": (b, 1, tq, tk), "full": (b, hq, tq, tk)}[shape]
    if kind == "bool":
        m = torch.rand(dims, generator=gen, device=device) > 0.4
        m.view(-1, tk)[1] = False  # a row (or, broadcast, a sequence) that sees no key
        return m
    m = (torch.randn(dims, generator=gen, device=device) * 2).to(dtype)
    m.masked_fill_(torch.rand(dims, generator=gen, device=device) > 0.7, float("-inf"))
    m.view(-1, tk)[0] = float("-inf")
    return m


def _prefill_inputs(case, device: str):
    b, hq, hk, tq, tk, d, kind, shape, dtype = case
    dt = DTYPES[dtype]
    gen = torch.Generator(device=device).manual_seed(tq * 7 + tk + d)
    q = torch.randn(b, hq, tq, d, generator=gen, device=device).to(dt)
    k, v = (torch.randn(b, hk, tk, d, generator=gen, device=device).to(dt) for _ in range(2))
    return q, k, v, _mask(kind, shape, b, hq, tq, tk, dt, device, gen)


def _decode_inputs(case, device: str):
    """q `[B, Hq, 1, D]`, keys and values `[B, Hk, S, D]` gathered as the paged model gathers
    them (`cache[block_tables].flatten(1, 2).transpose(1, 2)`: strided), the `[B, 1, 1, S]`
    mask of valid positions."""
    from test_attention_quant_kernel import _paged

    b, hq, hk, d, bs, lens, dtype = case
    q, kc, vc, table, seq_lens = _paged(b, hq, hk, d, bs, list(lens), DTYPES[dtype], device,
                                        seed=sum(lens))
    keys = kc[table.long()].flatten(1, 2).transpose(1, 2)
    values = vc[table.long()].flatten(1, 2).transpose(1, 2)
    span = keys.shape[2]
    mask = torch.arange(span, device=device)[None, :] < seq_lens[:, None]
    return q[:, :, None, :], keys, values, mask[:, None, None, :]


def _sdpa(q, k, v, mask, sm):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=sm, enable_gqa=True)


def _dead_rows(mask: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """[B, Hq, Tq]: True where the mask hides every key."""
    m = mask.expand(shape)
    return ~m.any(-1) if m.dtype == torch.bool else torch.isinf(m).all(-1)


def check(q, k, v, mask, out_kind: str) -> dict:
    from test_attention_nvfp4_kernel import _global_scale, _same
    from test_attention_nvfp4_kernel import judge as judge_nvfp4
    from test_attention_quant_kernel import _scale_for
    from test_attention_quant_kernel import judge as judge_fp8

    from irfuse.kernels import attention_quant

    sm = q.shape[-1] ** -0.5
    o = _sdpa(q, k, v, mask, sm)
    dead = _dead_rows(mask, (*q.shape[:3], k.shape[2]))
    if q.is_cuda:
        o = o.masked_fill(dead[..., None], 0)
    elif not bool((o[dead] == 0).all()):
        return {"ok": False, "detail": "SDPA does not return 0 for a fully masked row"}
    kw = {"softmax_scale": sm, "causal": False, "mask": mask}
    if out_kind == "fp8":
        scale = _scale_for(o)
        out = attention_quant.attention_fp8(q, k, v, scale, **kw)
        if not bool((out.float()[dead] == 0).all()):
            return {"ok": False, "detail": "a fully masked row is not 0"}
        ref = (o.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
        return judge_fp8(out, ref, scale, q.dtype)
    if out_kind == "nvfp4":
        gs = _global_scale(o, False)
        out = attention_quant.attention_nvfp4(q, k, v, gs, **kw)
        own = attention_quant.attention(q, k, v, **kw)
        exact = quant_ref.quant_nvfp4(attention_quant_ref.token_major(own), gs)
        if not (_same(out[0], exact[0]) and _same(out[1], exact[1])):
            return {"ok": False, "detail": "the epilogue differs from quant_nvfp4 of the "
                                           "kernel's own output"}
        ref = quant_ref.quant_nvfp4(attention_quant_ref.token_major(o), gs)
        return judge_nvfp4(out, ref, gs)
    out = attention_quant.attention(q, k, v, **kw)
    if out.shape != o.shape or out.dtype != o.dtype:
        return {"ok": False, "detail": f"out {tuple(out.shape)} {out.dtype}"}
    a, b = out.float(), o.float()
    err = (a - b).abs()
    bound = ULP[q.dtype] * b.abs() + 4 * ULP[q.dtype] / 2 * float(b.abs().max())
    rel = float(err.mean() / b.abs().mean())
    ok = bool((err <= bound).all()) and rel <= TOL and bool((a[dead] == 0).all())
    return {"ok": ok, "detail": f"max err {float(err.max()):.2e}, mean rel {rel:.2e}"}


def _mla_id(c) -> str:
    (b, h, t, nope, rope, v, rank, _, dtype), kind, shape = c
    return f"mla-B{b}-H{h}-T{t}-{nope}+{rope}/{v}-r{rank}-{kind}-{shape}-{dtype}"


def check_mla(case, out_kind: str) -> dict:
    """Masked batch-major MLA against the MLA reference with the same mask."""
    from test_attention_nvfp4_kernel import _global_scale
    from test_attention_nvfp4_kernel import judge as judge_nvfp4
    from test_attention_quant_kernel import _scale_for
    from test_attention_quant_kernel import judge as judge_fp8
    from test_mla_attention_quant_kernel import _inputs, _kw

    from irfuse.kernels import mla_attention_quant
    from irfuse.kernels import mla_attention_quant_ref as mref

    mcase, kind, shape = case
    b, h, t = mcase[:3]
    q, kv_c, k_pe, w = _inputs(mcase)
    kw = _kw(mcase)
    mask = _mask(kind, shape, b, h, t, t, q.dtype, "cpu", torch.Generator().manual_seed(t))
    o = mref.mla_attention(q, kv_c, k_pe, w, mask, **kw)
    dead = _dead_rows(mask, (b, h, t, t)).transpose(1, 2).reshape(b * t, h)
    if out_kind == "fp8":
        scale = _scale_for(o)
        out = mla_attention_quant.mla_attention_fp8(q, kv_c, k_pe, w, scale, mask=mask, **kw)
        if not bool((out.float().view(b * t, h, -1)[dead] == 0).all()):
            return {"ok": False, "detail": "a fully masked row is not 0"}
        want = mref.mla_attention_fp8(q, kv_c, k_pe, w, mask, scale, divide=True, **kw)
        return judge_fp8(out, want, scale, q.dtype)
    gs = _global_scale(o, False)
    out = mla_attention_quant.mla_attention_nvfp4(q, kv_c, k_pe, w, gs, mask=mask, **kw)
    return judge_nvfp4(out, mref.mla_attention_nvfp4(q, kv_c, k_pe, w, mask, gs, **kw), gs)


def _worker() -> None:
    import triton
    from interpret_worker import guard

    assert triton.knobs.runtime.interpret, "TRITON_INTERPRET=1 must be set before triton loads"
    results = {}
    for case in PREFILL_CASES:
        for out in OUTS:
            results[f"{_prefill_id(case)}-{out}"] = guard(
                lambda c=case, o=out: check(*_prefill_inputs(c, "cpu"), o))
    for case in DECODE_CASES:
        for out in OUTS:
            results[f"{_decode_id(case)}-{out}"] = guard(
                lambda c=case, o=out: check(*_decode_inputs(c, "cpu"), o))
    for case in MLA_CASES:
        for out in ("fp8", "nvfp4"):
            results[f"{_mla_id(case)}-{out}"] = guard(check_mla, case, out)
    print(json.dumps(results))


@pytest.fixture(scope="module")
def interpreted() -> dict:
    from interpret_worker import run_worker

    return run_worker(__file__)


@pytest.mark.parametrize("out", OUTS)
@pytest.mark.parametrize("case", PREFILL_CASES, ids=_prefill_id)
def test_masked_prefill_matches_sdpa_interpreted(interpreted, case, out):
    r = interpreted[f"{_prefill_id(case)}-{out}"]
    assert r["ok"], r["detail"]


@pytest.mark.parametrize("out", OUTS)
@pytest.mark.parametrize("case", DECODE_CASES, ids=_decode_id)
def test_masked_decode_over_gathered_pages_matches_sdpa_interpreted(interpreted, case, out):
    r = interpreted[f"{_decode_id(case)}-{out}"]
    assert r["ok"], r["detail"]


@pytest.mark.parametrize("out", ("fp8", "nvfp4"))
@pytest.mark.parametrize("case", MLA_CASES, ids=_mla_id)
def test_masked_mla_matches_reference_interpreted(interpreted, case, out):
    r = interpreted[f"{_mla_id(case)}-{out}"]
    assert r["ok"], r["detail"]


def test_mask_operand_broadcasts_by_strides_and_refuses_bad_masks():
    """The mask as the kernel reads it: broadcast dims get stride 0, the storage is shared."""
    from irfuse.kernels.attention_quant import mask_operand

    m = torch.ones(2, 1, 1, 8, dtype=torch.bool)
    op = mask_operand(m, 2, 4, 3, 8)
    assert op is not None and op.shape == (2, 4, 3, 8) and op.dtype == torch.uint8
    assert op.stride() == (8, 0, 0, 1) and op.data_ptr() == m.data_ptr()
    assert mask_operand(torch.zeros(3, 8), 2, 4, 3, 8).stride() == (0, 0, 8, 1)
    with pytest.raises(ValueError, match="bool or floating point"):
        mask_operand(torch.ones(3, 8, dtype=torch.int32), 2, 4, 3, 8)
    with pytest.raises(ValueError, match="does not broadcast"):
        mask_operand(torch.ones(3, 7, dtype=torch.bool), 2, 4, 3, 8)


GPU_PREFILL = [(2, 32, 8, 512, 512, 128, kind, shape, "bf16")
               for kind, shape in (("bool", "b11s"), ("bool", "11ts"), ("float", "full"))] + [
    (1, 32, 32, 300, 700, 64, "bool", "ts", "fp16")]
GPU_DECODE = [(16, 32, 8, 128, 16, tuple(range(1000, 1000 + 16 * 61, 61)), "bf16"),
              (4, 32, 8, 128, 16, (777, 64, 5000, 1), "fp16"),
              (8, 16, 16, 64, 16, (300,) * 8, "bf16")]


@pytest.mark.gpu
@pytest.mark.parametrize("out", OUTS)
@pytest.mark.parametrize("case", GPU_PREFILL, ids=_prefill_id)
def test_masked_prefill_matches_sdpa_on_gpu(case, out):
    r = check(*_prefill_inputs(case, "cuda"), out)
    assert r["ok"], r["detail"]


@pytest.mark.gpu
@pytest.mark.parametrize("out", OUTS)
@pytest.mark.parametrize("case", GPU_DECODE, ids=_decode_id)
def test_masked_decode_over_gathered_pages_matches_sdpa_on_gpu(case, out):
    r = check(*_decode_inputs(case, "cuda"), out)
    assert r["ok"], r["detail"]


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()
