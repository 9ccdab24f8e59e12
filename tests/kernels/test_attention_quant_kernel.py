"""Attention with the FP8 output quant fused: the torch reference against the unfused graph, the
Triton kernels against the reference.

- The reference (`attention_quant_ref`) equals the unfused torch graph bit for bit (it is the
  same computation): `F.scaled_dot_product_attention(..., enable_gqa=True)` in the model dtype,
  then `(o.float() / scale).clamp(-448, 448).to(float8_e4m3fn)`; the paged reference equals
  that graph run on each sequence's keys laid out densely.
- The kernels (`attention_quant`), under TRITON_INTERPRET=1 on the CPU (a subprocess: the
  interpreter must be on before triton loads) at tiny sizes, and on the GPU at real sizes
  (marked `gpu`). The kernels quantize the float32 output; the reference quantizes it after
  rounding to the model dtype (and its softmax adds up in another order), so codes next to an
  FP8 rounding boundary may move one code. The criterion, on dequantized values
  a = q_kernel * s, b = q_ref * s (s = scale_out):
  1. every element within one FP8 step, plus an absolute term for the attention arithmetic:
     |a - b| <= 2**-3 * max(|a|, |b|) + s * 2**-9 + u * max|b|
     (e4m3 keeps 3 mantissa bits, so neighbouring codes are at most 1/8 of the larger apart;
     s * 2**-9 is the subnormal step; u is the model dtype's unit roundoff, 2**-8 for bf16,
     2**-11 for fp16: both sides round the probabilities to the model dtype before P @ V,
     which moves outputs near zero by up to about u times the largest output, far more than
     their own FP8 step);
  2. mean |a - b| / mean |b| <= 1e-2 (docs/numerics.md: attention + quant, 1e-2);
  3. at most 10% of the codes differ at all (measured: 1.5-4% at real sizes, where rounding
     the output to bf16 first moves about 1/64 of the codes; tiny cases have few elements).
  Shapes, dtype and contiguity exactly. Scales are chosen so the outputs use the FP8 range
  (|o| / s up to about 300), and one case saturates (the clamp).
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

from irfuse.kernels import attention_quant_ref
from irfuse.kernels.compare import agreement
from irfuse.kernels.qk_norm_rope_ref import to_cache

HERE = pathlib.Path(__file__).resolve().parents[1]  # tests/: the shared helpers
sys.path.insert(0, str(HERE))

FP8 = torch.float8_e4m3fn
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
TOL = 1e-2
MAX_MISMATCH = 0.10


def _unfused(q, k, v, scale, softmax_scale, causal):
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=softmax_scale,
                                       enable_gqa=True)
    return (o.float() / scale).clamp(-448, 448).to(FP8)


def _dense(b, hq, hk, tq, tk, d, dtype, device="cpu", seed=0, transposed=False):
    gen = torch.Generator(device=device).manual_seed(seed)

    def make(h, t):
        if transposed:  # [B, T, H, D] storage seen as [B, H, T, D], as models produce it
            return torch.randn(b, t, h, d, generator=gen, device=device).to(dtype).transpose(1, 2)
        return torch.randn(b, h, t, d, generator=gen, device=device).to(dtype)

    return make(hq, tq), make(hk, tk), make(hk, tk)


def _paged(b, hq, hk, d, block_size, lens, dtype, device="cpu", seed=0, spare=3):
    """q [B, Hq, D], caches with the sequences' blocks scattered in a random order (plus spare
    blocks no sequence uses), block_table [B, max_blocks] (unused slots point at block 0)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    max_blocks = max(-(-n // block_size) for n in lens)
    used = sum(-(-n // block_size) for n in lens)
    num_blocks = used + spare
    kc = torch.randn(num_blocks, block_size, hk, d, generator=gen, device=device).to(dtype)
    vc = torch.randn(num_blocks, block_size, hk, d, generator=gen, device=device).to(dtype)
    perm = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(seed)).tolist()
    table = torch.zeros(b, max_blocks, dtype=torch.int32)
    for i, n in enumerate(lens):
        for j in range(-(-n // block_size)):
            table[i, j] = perm.pop()
    q = torch.randn(b, hq, d, generator=gen, device=device).to(dtype)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    return q, kc, vc, table.to(device), seq_lens.to(device)


def _scale_for(o: torch.Tensor, target: float = 300.0) -> torch.Tensor:
    return (o.float().abs().amax() / target).reshape(1).to(torch.float32)


UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def judge(out: torch.Tensor, ref: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> dict:
    """The module docstring's criterion for a model dtype: {"ok": bool, "detail": str}."""
    if out.shape != ref.shape or out.dtype != FP8 or not out.is_contiguous():
        return {"ok": False, "detail": f"out {tuple(out.shape)} {out.dtype} vs "
                                       f"{tuple(ref.shape)}"}
    s = float(scale)
    b = ref.float() * s
    atol = s * 2.0**-9 + UNIT_ROUNDOFF[dtype] * float(b.abs().max())
    agr = agreement(out.float() * s, b, 0.125, atol,
                    codes=(out.view(torch.uint8), ref.view(torch.uint8)))
    return {"ok": agr.ok(TOL, MAX_MISMATCH), "detail": str(agr)}


# --- the reference against the unfused graph --------------------------------------------------


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize(("b", "hq", "hk", "tq", "tk", "causal"), [
    (1, 4, 2, 24, 24, True), (2, 4, 4, 17, 17, True), (2, 8, 2, 5, 33, False),
    (1, 4, 1, 16, 16, False)])
def test_reference_is_the_unfused_graph_bit_for_bit(dtype, b, hq, hk, tq, tk, causal):
    q, k, v = _dense(b, hq, hk, tq, tk, 64, DTYPES[dtype], transposed=True)
    sm = 0.125
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm, enable_gqa=True)
    scale = _scale_for(o)
    ref = attention_quant_ref.attention_fp8(q, k, v, scale, softmax_scale=sm, causal=causal)
    assert ref.shape == (b, hq, tq, 64) and ref.dtype == FP8
    assert torch.equal(ref.view(torch.uint8), _unfused(q, k, v, scale, sm, causal).view(torch.uint8))
    # A scale that saturates: the clamp.
    tiny = scale / 100
    sat = attention_quant_ref.attention_fp8(q, k, v, tiny, softmax_scale=sm, causal=causal)
    assert sat.float().abs().max() == 448


def test_paged_reference_is_the_dense_graph_per_sequence():
    lens = [37, 5, 16]
    q, kc, vc, table, seq_lens = _paged(3, 8, 2, 64, 16, lens, torch.bfloat16)
    scale = torch.tensor([0.004])
    ref = attention_quant_ref.paged_decode_fp8(q, kc, vc, table, seq_lens, scale,
                                               softmax_scale=0.125)
    assert ref.shape == (3, 8, 64) and ref.dtype == FP8
    for b, n in enumerate(lens):
        rows = torch.cat([kc[table[b, j]] for j in range(-(-n // 16))])[:n]  # [n, Hk, D]
        vrows = torch.cat([vc[table[b, j]] for j in range(-(-n // 16))])[:n]
        k = rows.permute(1, 0, 2)[None]
        v = vrows.permute(1, 0, 2)[None]
        want = _unfused(q[b][None, :, None, :], k, v, scale, 0.125, False)[0, :, 0]
        assert torch.equal(ref[b].view(torch.uint8), want.view(torch.uint8))


def test_paged_reference_reads_an_fp8_cache_back_scaled():
    """With k_scale / v_scale the caches are e4m3, read back as `cache.float() * scale`: the
    reference is the same decode over those values, attended in float32."""
    lens = [37, 5]
    q, kc, vc, table, seq_lens = _paged(2, 8, 2, 64, 16, lens, torch.bfloat16, seed=4)
    k8, v8, ks, vs = _fp8_caches(kc, vc)
    got = attention_quant_ref.paged_decode(q, k8, v8, table, seq_lens, torch.ones(1),
                                           softmax_scale=0.125, k_scale=ks, v_scale=vs)
    for b, n in enumerate(lens):
        k = torch.cat([k8[table[b, j]] for j in range(-(-n // 16))])[:n].float() * ks
        v = torch.cat([v8[table[b, j]] for j in range(-(-n // 16))])[:n].float() * vs
        o = F.scaled_dot_product_attention(q[b].float()[None, :, None], k.permute(1, 0, 2)[None],
                                           v.permute(1, 0, 2)[None], scale=0.125,
                                           enable_gqa=True)[0, :, 0]
        assert torch.equal(got[b], o.to(torch.bfloat16))
    with pytest.raises(ValueError, match="go together"):
        attention_quant_ref.paged_decode(q, k8, v8, table, seq_lens, torch.ones(1),
                                         softmax_scale=0.125, k_scale=ks)
    with pytest.raises(ValueError, match="hold torch.float8_e4m3fn"):
        attention_quant_ref.paged_decode(q, kc, vc, table, seq_lens, torch.ones(1),
                                         softmax_scale=0.125, k_scale=ks, v_scale=vs)


_BF = torch.bfloat16


@pytest.mark.parametrize(("q", "k", "scale", "message"), [
    (torch.zeros(1, 3, 4, 16, dtype=_BF), torch.zeros(1, 2, 4, 16, dtype=_BF), torch.ones(1),
     "not a multiple"),
    (torch.zeros(1, 4, 4, 16), torch.zeros(1, 2, 4, 16), torch.ones(1), "bfloat16 or float16"),
    (torch.zeros(1, 4, 4, 16, dtype=_BF), torch.zeros(1, 2, 4, 8, dtype=_BF), torch.ones(1),
     "shapes do not match"),
    (torch.zeros(1, 4, 4, 16, dtype=_BF), torch.zeros(1, 2, 4, 16, dtype=_BF), torch.ones(2),
     "one element"),
])
def test_reference_refuses_bad_arguments(q, k, scale, message):
    with pytest.raises(ValueError, match=message):
        attention_quant_ref.attention_fp8(q, k, k.clone(), scale, softmax_scale=1.0, causal=True)


def test_paged_reference_gives_an_empty_sequence_zeros():
    # A sequence of length 0 (a padded batch slot): nothing to attend to. SDPA gives a row whose
    # mask keeps nothing zeros, and so does the graph fuse-attn-quant replaces; the reference
    # did refuse it.
    from irfuse.fusions.fuse_attn_quant import ops as fuse_attn_quant

    q, kc, vc, table, seq_lens = _paged(3, 4, 2, 64, 16, [37, 0, 5], torch.bfloat16)
    scale = torch.tensor([0.004])
    ref = attention_quant_ref.paged_decode_fp8(q, kc, vc, table, seq_lens, scale,
                                               softmax_scale=0.125)
    assert torch.equal(ref[1].float(), torch.zeros(4, 64))
    graph = fuse_attn_quant.paged_decode_quant_fp8_static(q[:, :, None], kc, vc, table, seq_lens,
                                                          scale, 0.125, FP8, True)
    assert torch.equal(ref.reshape(3, -1).view(torch.uint8), graph.view(torch.uint8))


def test_paged_reference_refuses_bad_tables():
    q, kc, vc, table, seq_lens = _paged(2, 4, 2, 16, 16, [20, 3], torch.bfloat16)
    with pytest.raises(ValueError, match="int32 or int64"):
        attention_quant_ref.paged_decode_fp8(q, kc, vc, table.float(), seq_lens, torch.ones(1),
                                             softmax_scale=1.0)
    with pytest.raises(ValueError, match="outside"):
        attention_quant_ref.paged_decode_fp8(q, kc, vc, table, seq_lens * 10, torch.ones(1),
                                             softmax_scale=1.0)


# --- the kernels against the reference --------------------------------------------------------

# (B, Hq, Hk, Tq, Tk, D, causal, dtype, transposed, config or None): GQA 2 and 4, MHA,
# lengths off the tile size, Tq != Tk (non-causal), a head size that is not a power of two,
# strided q/k/v, fp16; small tiles so that several tiles and the causal skip are exercised.
PREFILL_CASES = [
    (1, 4, 2, 16, 16, 64, True, "bf16", False, None),
    (2, 4, 2, 40, 40, 64, True, "bf16", True, None),
    (1, 4, 2, 33, 33, 64, False, "bf16", False, None),
    (2, 4, 2, 8, 40, 64, False, "bf16", False, None),
    (1, 4, 4, 24, 24, 64, True, "fp16", True, None),
    (1, 4, 1, 20, 20, 80, True, "bf16", False, None),
    (1, 4, 2, 40, 40, 64, True, "bf16", False, (32, 16, 4, 1, False)),
    (1, 4, 2, 40, 40, 64, True, "bf16", False, (16, 32, 4, 1, True)),
]
# (B, Hq, Hk, D, block_size, seq_lens, dtype, splits or None, even): GQA 2, 4 and 8 (Llama-70B
# per GPU at TP8), splits of fixed chunks (a short sequence leaves the last ones empty; more
# splits than the combine reads at once) and even splits of each sequence's own length; every
# case also with the page numbers prefetched (`DecodeConfig.prefetch`, "pf" cases).
DECODE_CASES = [
    (2, 4, 2, 64, 16, (37, 5), "bf16", None, False),
    (2, 4, 2, 64, 16, (37, 5), "bf16", 1, False),
    (2, 4, 2, 64, 16, (64, 17), "bf16", 3, False),
    (2, 4, 2, 64, 16, (64, 17), "bf16", 3, True),
    (1, 4, 1, 64, 16, (40,), "fp16", 2, False),
    (2, 8, 2, 64, 8, (23, 48), "bf16", 4, False),
    (2, 8, 2, 64, 8, (23, 48), "bf16", 4, True),
    (2, 4, 2, 64, 16, (330, 7), "bf16", 20, False),
    (2, 8, 1, 64, 16, (100, 33), "bf16", None, False),
    (2, 4, 2, 64, 16, (37, 5), "bf16", "default", False),
]


def _prefill_id(c) -> str:
    b, hq, hk, tq, tk, d, causal, dtype, tr, cfg = c
    return (f"B{b}-H{hq}/{hk}-T{tq}x{tk}-D{d}-{'causal' if causal else 'full'}-{dtype}"
            f"{'-strided' if tr else ''}{'-cfg' + '.'.join(map(str, cfg)) if cfg else ''}")


def _decode_id(c) -> str:
    b, hq, hk, d, bs, lens, dtype, splits, even = c
    return (f"B{b}-H{hq}/{hk}-D{d}-bs{bs}-L{'.'.join(map(str, lens))}-{dtype}-splits{splits}"
            f"{'-even' if even else ''}")


def _decode_config(device: str, splits: int | str | None, even: bool, prefetch: bool = False):
    """The case's launch shape; splits "default": none (`decode_config`'s)."""
    from irfuse.kernels import attention_quant

    if splits == "default":
        return None
    if prefetch:
        return attention_quant.DecodeConfig(16 if device == "cpu" else 32, 4,
                                            1 if device == "cpu" else 4, splits, even,
                                            prefetch=True)
    return attention_quant.DecodeConfig(16 if device == "cpu" else 64, 4, 1, splits, even)


def check_prefill(case, device: str, saturate: bool = False) -> dict:
    from irfuse.kernels import attention_quant

    b, hq, hk, tq, tk, d, causal, dtype, tr, cfg = case
    q, k, v = _dense(b, hq, hk, tq, tk, d, DTYPES[dtype], device, seed=tq * 7 + d, transposed=tr)
    sm = d ** -0.5
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm, enable_gqa=True)
    scale = _scale_for(o, 600.0 if saturate else 300.0)
    config = attention_quant.PrefillConfig(*cfg) if cfg else None
    out = attention_quant.attention_fp8(q, k, v, scale, softmax_scale=sm, causal=causal,
                                        config=config)
    ref = attention_quant_ref.attention_fp8(q, k, v, scale, softmax_scale=sm, causal=causal)
    return judge(out, ref, scale, DTYPES[dtype])


def check_decode(case, device: str, prefetch: bool = False) -> dict:
    from irfuse.kernels import attention_quant

    b, hq, hk, d, bs, lens, dtype, splits, even = case
    q, kc, vc, table, seq_lens = _paged(b, hq, hk, d, bs, list(lens), DTYPES[dtype], device,
                                        seed=sum(lens))
    sm = d ** -0.5
    ref_bf = attention_quant_ref.paged_decode_fp8(q, kc, vc, table, seq_lens,
                                                  torch.ones(1, device=device), softmax_scale=sm)
    scale = (ref_bf.float().abs().amax() / 300.0).reshape(1)
    config = _decode_config(device, splits, even, prefetch)
    out = attention_quant.paged_decode_fp8(q, kc, vc, table, seq_lens, scale, softmax_scale=sm,
                                           config=config)
    ref = attention_quant_ref.paged_decode_fp8(q, kc, vc, table, seq_lens, scale,
                                               softmax_scale=sm)
    return judge(out, ref, scale, DTYPES[dtype])


KV_SCALES = (0.02, 0.03)
"""vLLM's per-tensor FP8 cache scales of the FP8-cache cases (k, v): randn / 0.02 spans e4m3."""


def _fp8_caches(kc: torch.Tensor, vc: torch.Tensor):
    """The caches as vLLM's FP8 write stores them (`x / scale` saturated to e4m3), and the
    scales."""
    ks, vs = (torch.tensor([s], device=kc.device) for s in KV_SCALES)
    return to_cache(kc, FP8, ks), to_cache(vc, FP8, vs), ks, vs


def check_decode_fp8_cache(case, device: str, prefetch: bool = False) -> dict:
    """The kernel reading vLLM's per-tensor FP8 caches (`k_scale`, `v_scale`) against the
    reference, which reads them back as `cache.float() * scale` and attends in float32."""
    from irfuse.kernels import attention_quant

    b, hq, hk, d, bs, lens, dtype, splits, even = case
    q, kc, vc, table, seq_lens = _paged(b, hq, hk, d, bs, list(lens), DTYPES[dtype], device,
                                        seed=sum(lens) + 2)
    kc, vc, ks, vs = _fp8_caches(kc, vc)
    sm = d ** -0.5
    ref_bf = attention_quant_ref.paged_decode(q, kc, vc, table, seq_lens, torch.ones(1),
                                              softmax_scale=sm, k_scale=ks, v_scale=vs)
    scale = _scale_for(ref_bf).to(device)
    out = attention_quant.paged_decode_fp8(q, kc, vc, table, seq_lens, scale, softmax_scale=sm,
                                           config=_decode_config(device, splits, even, prefetch),
                                           k_scale=ks, v_scale=vs)
    ref = attention_quant_ref.paged_decode_fp8(q, kc, vc, table, seq_lens, scale,
                                               softmax_scale=sm, k_scale=ks, v_scale=vs)
    return judge(out, ref, scale, DTYPES[dtype])


def check_decode_graph(case, device: str, prefetch: bool = False) -> dict:
    """The paged kernel against what fuse-attn-quant replaces with it
    (`paged_decode_quant_fp8_static`: the pages gathered, the length mask, SDPA, the quant),
    int64 table and lengths, the first sequence's length past its table row's capacity (the mask
    then keeps the whole row). A sequence of length 0 (the mask keeps nothing; SDPA's math
    backend gives 0) stores 0 exactly."""
    from irfuse.fusions.fuse_attn_quant import ops as fuse_attn_quant
    from irfuse.kernels import attention_quant

    b, hq, hk, d, bs, lens, dtype, splits, even = case
    q, kc, vc, table, seq_lens = _paged(b, hq, hk, d, bs, list(lens), DTYPES[dtype], device,
                                        seed=sum(lens) + 1)
    table, seq_lens = table.long(), seq_lens.long()
    seq_lens[0] = table.shape[1] * bs + 7
    sm = d ** -0.5
    # The graph on the CPU: SDPA's math backend gives 0 where the mask keeps nothing (some CUDA
    # backends give NaN there).
    cpu = [t.cpu() for t in (q[:, :, None], kc, vc, table, seq_lens)]
    graph = fuse_attn_quant.gathered(*cpu)
    o = F.scaled_dot_product_attention(cpu[0], graph[0], graph[1], attn_mask=graph[2],
                                       scale=sm, enable_gqa=True)
    scale = _scale_for(o, 300.0)
    out = attention_quant.paged_decode_fp8(q, kc, vc, table, seq_lens, scale.to(device),
                                           softmax_scale=sm,
                                           config=_decode_config(device, splits, even, prefetch))
    out = out.reshape(b, -1).cpu()
    ref = fuse_attn_quant.paged_decode_quant_fp8_static(*cpu, scale, sm, FP8, True)
    empty = [i for i, n in enumerate(lens) if n == 0]
    if any(out[i].view(torch.uint8).any() for i in empty):
        return {"ok": False, "detail": f"a sequence of length 0 did not store 0: "
                                       f"{out[empty[0]].float()[:8].tolist()}"}
    return judge(out, ref, scale, DTYPES[dtype])


DECODE_GRAPH_CASES = [(2, 4, 2, 64, 16, (37, 5), "bf16", "default", False),
                      (2, 8, 2, 64, 8, (23, 48), "bf16", 4, False),
                      (3, 4, 2, 64, 16, (37, 0, 5), "bf16", 1, False),
                      (3, 4, 2, 64, 16, (37, 0, 5), "bf16", 3, False),
                      (3, 4, 2, 64, 16, (37, 0, 5), "bf16", 3, True)]
# A sequence of length 0 between others, in one program and split: the kernel must write 0 there
# as the reference does (it wrote -448, 0 * inf through the quant).
EMPTY_SEQUENCE_CASES = [(3, 4, 2, 64, 16, (37, 0, 5), "bf16", None, False),
                        (3, 4, 2, 64, 16, (37, 0, 5), "bf16", 3, False)]
# vLLM's FP8 caches: one split and several (the partials carry v's scale into the combine),
# GQA 4, fp16, an empty sequence.
FP8_CACHE_CASES = [DECODE_CASES[1], DECODE_CASES[3], DECODE_CASES[4], DECODE_CASES[5],
                   EMPTY_SEQUENCE_CASES[1]]


def _worker() -> None:
    import triton
    from interpret_worker import guard

    assert triton.knobs.runtime.interpret, "TRITON_INTERPRET=1 must be set before triton loads"
    results = {}
    for case in PREFILL_CASES:
        results[_prefill_id(case)] = guard(check_prefill, case, "cpu")
    results["saturating"] = guard(check_prefill, PREFILL_CASES[0], "cpu", True)
    for case in DECODE_CASES:
        results[_decode_id(case)] = guard(check_decode, case, "cpu")
        results["pf-" + _decode_id(case)] = guard(check_decode, case, "cpu", True)
    for case in DECODE_GRAPH_CASES:
        results["graph-" + _decode_id(case)] = guard(check_decode_graph, case, "cpu")
        results["graph-pf-" + _decode_id(case)] = guard(check_decode_graph, case, "cpu", True)
    for case in EMPTY_SEQUENCE_CASES:
        results["empty-" + _decode_id(case)] = guard(check_decode, case, "cpu")
    for case in FP8_CACHE_CASES:
        results["fp8kv-" + _decode_id(case)] = guard(check_decode_fp8_cache, case, "cpu")
    print(json.dumps(results))


@pytest.fixture(scope="module")
def interpreted() -> dict:
    from interpret_worker import run_worker

    return run_worker(__file__)


@pytest.mark.parametrize("case", PREFILL_CASES, ids=_prefill_id)
def test_prefill_kernel_matches_reference_interpreted(interpreted, case):
    r = interpreted[_prefill_id(case)]
    assert r["ok"], r["detail"]


def test_prefill_kernel_saturates_interpreted(interpreted):
    assert interpreted["saturating"]["ok"], interpreted["saturating"]["detail"]


@pytest.mark.parametrize("prefetch", ["", "pf-"], ids=["plain", "prefetch"])
@pytest.mark.parametrize("case", DECODE_CASES, ids=_decode_id)
def test_decode_kernel_matches_reference_interpreted(interpreted, case, prefetch):
    r = interpreted[prefetch + _decode_id(case)]
    assert r["ok"], r["detail"]


@pytest.mark.parametrize("prefetch", ["", "pf-"], ids=["plain", "prefetch"])
@pytest.mark.parametrize("case", DECODE_GRAPH_CASES, ids=_decode_id)
def test_decode_kernel_is_the_graph_it_replaces_interpreted(interpreted, case, prefetch):
    r = interpreted["graph-" + prefetch + _decode_id(case)]
    assert r["ok"], r["detail"]


@pytest.mark.parametrize("case", EMPTY_SEQUENCE_CASES, ids=_decode_id)
def test_decode_kernel_writes_zeros_for_an_empty_sequence_interpreted(interpreted, case):
    r = interpreted["empty-" + _decode_id(case)]
    assert r["ok"], r["detail"]


@pytest.mark.parametrize("case", FP8_CACHE_CASES, ids=_decode_id)
def test_decode_kernel_reads_vllms_fp8_cache_interpreted(interpreted, case):
    r = interpreted["fp8kv-" + _decode_id(case)]
    assert r["ok"], r["detail"]


GPU_PREFILL = [(b, 32, 8, t, t, 128, causal, dtype, tr, None)
               for b, t in ((1, 512), (2, 1000), (1, 2048))
               for causal in (True, False) for dtype in ("bf16", "fp16") for tr in (False, True)
               if not (dtype == "fp16" and tr)] + [
    (1, 32, 8, 8192, 8192, 128, True, "bf16", False, None),
    (1, 32, 32, 300, 300, 64, True, "bf16", False, None),
    (2, 16, 2, 100, 700, 96, False, "bf16", True, None),
]
GPU_DECODE = [(b, 32, 8, 128, 16, lens, "bf16", splits, even)
              for b, lens in ((16, (2048,) * 16), (3, (1, 2047, 513)), (64, (8192,) * 64),
                              (32, tuple(range(100, 100 + 32 * 250, 250))))
              for splits, even in ((None, False), (1, False), (7, False), (7, True),
                                   (40, False))] + [
    (4, 32, 8, 128, 16, (777, 64, 5000, 16), "fp16", None, False),
    (64, 32, 8, 128, 16, tuple(range(2000, 2000 + 64 * 61, 61)), "bf16", "default", False),
    (16, 32, 8, 128, 16, tuple(range(100, 100 + 16 * 300, 300)), "bf16", "default", False),
    (8, 8, 1, 128, 16, (32768, 1, 9000, 17, 4096, 30000, 100, 2048), "bf16", None, False)]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_PREFILL, ids=_prefill_id)
def test_prefill_kernel_matches_reference_on_gpu(case):
    r = check_prefill(case, "cuda")
    assert r["ok"], r["detail"]


@pytest.mark.gpu
@pytest.mark.parametrize("case", [(16, 32, 8, 128, 16, (2048,) * 16, "bf16", None, False),
                                  (3, 32, 8, 128, 16, (1, 2047, 513), "bf16", 7, False),
                                  (4, 32, 8, 128, 16, (1000, 0, 513, 0), "bf16", None, False),
                                  (4, 32, 8, 128, 16, (1000, 0, 513, 0), "bf16", 1, False),
                                  (4, 8, 1, 128, 16, (9000, 0, 64, 2), "bf16", 16, True),
                                  (64, 32, 8, 128, 16, tuple(range(1000, 1000 + 64 * 97, 97)),
                                   "bf16", "default", False)],
                         ids=_decode_id)
@pytest.mark.parametrize("prefetch", [False, True], ids=["plain", "prefetch"])
def test_decode_kernel_is_the_graph_it_replaces_on_gpu(case, prefetch):
    r = check_decode_graph(case, "cuda", prefetch)
    assert r["ok"], r["detail"]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_DECODE, ids=_decode_id)
@pytest.mark.parametrize("prefetch", [False, True], ids=["plain", "prefetch"])
def test_decode_kernel_matches_reference_on_gpu(case, prefetch):
    r = check_decode(case, "cuda", prefetch)
    assert r["ok"], r["detail"]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_DECODE[:5] + GPU_DECODE[-4:], ids=_decode_id)
@pytest.mark.parametrize("prefetch", [False, True], ids=["plain", "prefetch"])
def test_decode_kernel_reads_vllms_fp8_cache_on_gpu(case, prefetch):
    r = check_decode_fp8_cache(case, "cuda", prefetch)
    assert r["ok"], r["detail"]


@pytest.mark.gpu
def test_kernels_refuse_cpu_tensors_and_are_captured_by_a_cuda_graph():
    from irfuse.kernels import attention_quant

    q, k, v = _dense(1, 8, 2, 64, 64, 128, torch.bfloat16)
    with pytest.raises(RuntimeError, match="need CUDA tensors"):
        attention_quant.attention_fp8(q, k, v, torch.ones(1), softmax_scale=0.1, causal=True)
    q, k, v = (t.cuda() for t in _dense(1, 8, 2, 256, 256, 128, torch.bfloat16))
    s = torch.tensor([0.003], device="cuda")
    qd, kc, vc, table, lens = _paged(4, 8, 2, 128, 16, [300, 1, 64, 1000], torch.bfloat16, "cuda")
    pdl = attention_quant.DecodeConfig(32, 4, 4, 8, prefetch=True, pdl=True)
    attention_quant.attention_fp8(q, k, v, s, softmax_scale=0.1, causal=True)
    attention_quant.paged_decode_fp8(qd, kc, vc, table, lens, s, softmax_scale=0.1)
    attention_quant.paged_decode_fp8(qd, kc, vc, table, lens, s, softmax_scale=0.1, config=pdl)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = attention_quant.attention_fp8(q, k, v, s, softmax_scale=0.1, causal=True)
        dec = attention_quant.paged_decode_fp8(qd, kc, vc, table, lens, s, softmax_scale=0.1)
        dec_pdl = attention_quant.paged_decode_fp8(qd, kc, vc, table, lens, s, softmax_scale=0.1,
                                                   config=pdl)
    q.copy_(torch.randn_like(q))
    qd.copy_(torch.randn_like(qd))
    g.replay()
    torch.cuda.synchronize()
    want = attention_quant.attention_fp8(q, k, v, s, softmax_scale=0.1, causal=True)
    want_dec = attention_quant.paged_decode_fp8(qd, kc, vc, table, lens, s, softmax_scale=0.1)
    want_pdl = attention_quant.paged_decode_fp8(qd, kc, vc, table, lens, s, softmax_scale=0.1,
                                                config=pdl)
    assert torch.equal(out.view(torch.uint8), want.view(torch.uint8))
    assert torch.equal(dec.view(torch.uint8), want_dec.view(torch.uint8))
    assert torch.equal(dec_pdl.view(torch.uint8), want_pdl.view(torch.uint8))


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()
