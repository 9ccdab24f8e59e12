"""Benchmark of attention with the FP8 output quant fused (`irfuse.kernels.attention_quant`)
against the unfused graph, on one GPU.

Prefill (B 1, Hq 32, Hk 8, D 128, bf16, causal; T from --tokens), side by side:
- `sdpa`: `F.scaled_dot_product_attention(..., is_causal=True, enable_gqa=True)` alone;
- `unfused`: SDPA + the static FP8 quant (`(o.float() / s).clamp(-448, 448).to(fp8)`) under
  `torch.compile` (Inductor, static shapes): the graph irfuse would otherwise run;
- `kernel+quant`: irfuse's kernel storing bf16, then Inductor's quant (what the epilogue saves);
- `fused`: irfuse's kernel with the FP8 epilogue (default launch shape; with --sweep also the
  best of several shapes, `best`).

Decode as the compiled model runs it (`decode (compiled model)` rows; Hq 32, Hk 8, D 128, bf16,
block size 16, ragged contexts up to the --contexts value; batch from --batches): the paged
model's step (`irfuse/models/paged.py`) gathers every sequence's pages through its block-table
row and runs SDPA with the `[B, 1, 1, S]` bool mask of valid positions, so fuse_attn_quant's
op is reached masked over gathered keys. Every candidate includes the gather (Inductor):
- `sdpa`: the gather and the masked SDPA (token-major), under `torch.compile`;
- `unfused`: the same with the static FP8 quant, under `torch.compile` (Inductor);
- `kernel+quant`: the gather, irfuse's masked kernel storing bf16, then Inductor's quant;
- `fused`: the fused op's CUDA entry (`fuse_attn_quant.ops.PAGED_QUANT.run_cuda`: fuse-attn-quant reads
  this gather + length mask as `fused.paged_decode_quant`, whose paged decode kernel reads the
  pages in place, with the FP8 epilogue): exactly what the compiled model calls; with --sweep
  also other launch shapes of that kernel;
- `gather+masked` (in the sweep column): the gather, then the masked prefill kernel with the
  FP8 epilogue (`fuse_attn_quant.ops.ATTN_QUANT.run_cuda`), what a decode over gathered pages ran before.

Library baselines (`--lib-decode`, `--lib-prefill`; `lib_markdown`'s table), Qwen3-8B heads
(32 q / 8 kv) and Llama-3-70B's heads on one GPU at TP8 (8 q / 1 kv), D 128, bf16:
- decode: irfuse's paged decode + FP8 (the fused op's CUDA entry, default launch shape; then the
  tile shapes of `DECODE_TILES`, the chunk sizes of `DECODE_CHUNKS` with the best tile, and PDL,
  each stage timed beside the entry) against FlashInfer's `BatchDecodeWithPagedKVCacheWrapper`
  (CUDA-core and tensor-core, planned for CUDA graphs) + Inductor's quant, over one paged cache
  (pages of 16 at shuffled places; ragged lengths in [C/2, C] or all at C), with the K+V read
  floor (those bytes over the copy bandwidth measured in the run); `n` rows also NVFP4
  (FlashInfer + irfuse's NVFP4 quant kernel against the fused NVFP4 epilogue);
- prefill (B 1, causal): irfuse's `attention_fp8` against SDPA (Inductor) + quant, SDPA through
  cuDNN + quant and FlashInfer's `BatchPrefillWithPagedKVCacheWrapper` (fa2, fa3) + quant.
A library that cannot run a row is dropped from it with the reason printed
(`attention_libs.py`).

MLA prefill (DeepSeek-V2-Lite-shaped: H 16, qk nope 128 + rope 64, v 128, kv_lora_rank 512,
bf16, causal, token-major as vLLM's MLA; T from --mla-tokens):
- `sdpa`: the unfused MLA alone (kv_b GEMM, `[k_nope | k_pe]`, SDPA) under `torch.compile`;
- `unfused`: the same with the static FP8 quant, under `torch.compile` (Inductor);
- `fused`: irfuse's `mla_attention_quant.mla_attention_fp8` (the kv_b GEMM, then the Triton
  kernel with the FP8 epilogue), and with --sweep the best of several shapes. Its CUDA choice
  stays `inductor` (unfused) in `irfuse/fusions/fuse_attn_quant/__init__.py` until this measures it.

NVFP4 prefill (the prefill shape; T from --nvfp4-tokens): the output token-major `[T, Hq * D]`
quantized to NVFP4 (codes and swizzled block scales, global scale 448 * 6 / amax):
- `sdpa`: SDPA and the token-major copy alone (under `torch.compile`);
- `unfused`: the same, then irfuse's NVFP4 quant kernel (`nvfp4.quant_nvfp4`, what irfuse runs
  for an unfused `quant.nvfp4` on CUDA);
- `kernel+quant`: irfuse's kernel storing bf16, the token-major copy, then that quant kernel;
- `fused`: `attention_quant.attention_nvfp4` (the NVFP4 epilogue), and with --sweep the best
  shape. Its CUDA choice stays `inductor` (unfused) in `irfuse/fusions/fuse_attn_quant/__init__.py`
  until this measures it. Its check is that of `tests/kernels/test_attention_nvfp4_kernel.py`.

Every candidate's output is checked against the eager unfused graph first (the test criterion of
`tests/kernels/test_attention_quant_kernel.py`). Timings are CUDA-graph replays
(`triton.testing.do_bench_cudagraph`, median) in interleaved rounds (the helpers of
`bench_norm_act_quant.py`). Ratios are unfused / fused (above 1: the fused kernel wins).

    PYTHONPATH=. python3 benchmarks/bench_attention_quant.py --sweep --out attn.md --json attn.json
    PYTHONPATH=. python3 benchmarks/bench_attention_quant.py --tokens '' --mla-tokens '' \
        --nvfp4-tokens '' --decode '' --lib-decode default --lib-prefill default --lib-out lib.md
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import asdict, replace
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_norm_act_quant as nq  # noqa: E402 (timing helpers, by path)

from irfuse.fusions.fuse_attn_quant import ops as decl  # noqa: E402
from irfuse.kernels import (  # noqa: E402
    attention_quant,
    attention_quant_ref,
    dispatch,  # noqa: E402
    mla_attention_quant,
    nvfp4,
    quant_ref,
)
from irfuse.kernels import mla_attention_quant_ref as mla_ref  # noqa: E402
from irfuse.kernels.compare import agreement  # noqa: E402
from irfuse.kernels.qk_norm_rope_ref import to_cache  # noqa: E402

FP8 = torch.float8_e4m3fn
HQ, HK, D, PAGE = 32, 8, 128, 16
SM_SCALE = D ** -0.5
PREFILL_SWEEP = tuple(attention_quant.PrefillConfig(*c) for c in (
    (64, 64, 4, 3), (64, 64, 4, 4), (128, 64, 8, 3), (128, 64, 4, 3), (128, 128, 8, 2),
    (128, 32, 4, 3), (64, 128, 4, 2), (64, 32, 4, 4), (128, 64, 8, 3, False),
    (64, 64, 4, 3, False)))
DECODE_SWEEP = tuple(attention_quant.DecodeConfig(*c) for c in (
    (32, 4, 2), (64, 4, 2), (64, 4, 3), (128, 4, 2), (128, 8, 2), (64, 2, 2), (64, 4, 1),
    (64, 4, 2, 1), (64, 4, 2, 2), (64, 4, 2, 4), (64, 4, 2, 8), (64, 4, 2, 16),
    (128, 4, 2, 4), (128, 4, 2, 8), (64, 4, 3, 1, False, True), (64, 4, 3, 2, True, True),
    (64, 4, 4, 1, False, True), (64, 4, 4, 2, True, True), (128, 8, 2, 2, True, True)))


MLA_H, MLA_NOPE, MLA_ROPE, MLA_V, MLA_RANK = 16, 128, 64, 128, 512
MLA_KW = dict(num_heads=MLA_H, nope=MLA_NOPE, v_dim=MLA_V,
              softmax_scale=(MLA_NOPE + MLA_ROPE) ** -0.5, causal=True, batch_major=False)
MLA_SWEEP = tuple(mla_attention_quant.MlaConfig(*c) for c in (
    (64, 64, 4, 3), (128, 64, 8, 2), (128, 32, 8, 2), (64, 32, 4, 2), (128, 64, 4, 2)))


def quant(o: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return (o.float() / s).clamp(-448.0, 448.0).to(FP8)


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=SM_SCALE,
                                          enable_gqa=True)


def sdpa_quant(q, k, v, s):
    return quant(sdpa(q, k, v), s)


def gather_masked(kc, vc, table, lens):
    """What the paged model runs before its attention: the pages gathered through the block
    table (`[B, Hk, S, D]`, strided) and the `[B, 1, 1, S]` mask of valid positions."""
    keys = kc[table.long()].flatten(1, 2).transpose(1, 2)
    values = vc[table.long()].flatten(1, 2).transpose(1, 2)
    mask = torch.arange(keys.shape[2], device=kc.device)[None, :] < lens[:, None]
    return keys, values, mask[:, None, None, :]


def masked_decode(q, kc, vc, table, lens):
    """The paged model's decode attention, token-major `[B, Hq * D]` in the model dtype."""
    keys, values, mask = gather_masked(kc, vc, table, lens)
    o = F.scaled_dot_product_attention(q[:, :, None, :], keys, values, attn_mask=mask,
                                       scale=SM_SCALE, enable_gqa=True)
    return attention_quant_ref.token_major(o)


def masked_decode_quant(q, kc, vc, table, lens, s):
    return quant(masked_decode(q, kc, vc, table, lens), s)


def sdpa_token_major(q, k, v):
    return attention_quant_ref.token_major(sdpa(q, k, v))


def mla(q, kv_c, k_pe, w):
    return mla_ref.mla_attention(q, kv_c, k_pe, w, None, **MLA_KW)


def mla_quant(q, kv_c, k_pe, w, s):
    return quant(mla(q, kv_c, k_pe, w), s)


def check(out: torch.Tensor, ref: torch.Tensor, s: torch.Tensor) -> str:
    """The kernel tests' criterion (bf16): one FP8 step + u * max|ref|, mean 1e-2, 10% codes."""
    sf = float(s)
    b = ref.float() * sf
    agr = agreement(out.float() * sf, b, 0.125, sf * 2.0**-9 + 2.0**-8 * float(b.abs().max()),
                    codes=(out.view(torch.uint8), ref.view(torch.uint8)))
    return "ok" if agr.ok(1e-2, 0.10) else f"MISMATCH ({agr})"


def check_nvfp4(out: tuple[torch.Tensor, torch.Tensor], ref: tuple[torch.Tensor, torch.Tensor],
                gs: torch.Tensor) -> str:
    """The NVFP4 kernel tests' criterion against the unfused graph: dequantized mean error
    within 1e-2, at most 5% of the code bytes and of the block scales differing."""
    (codes, sf), (rcodes, rsf) = out, ref
    if codes.shape != rcodes.shape or sf.shape != rsf.shape:
        return f"MISMATCH (shapes {tuple(codes.shape)} {tuple(sf.shape)})"
    a = quant_ref.dequant_nvfp4(codes, sf, gs)
    b = quant_ref.dequant_nvfp4(rcodes, rsf, gs)
    rel = float((a - b).abs().mean() / b.abs().mean())
    codes_off = float((codes != rcodes).float().mean())
    scales_off = float((sf.view(torch.uint8) != rsf.view(torch.uint8)).float().mean())
    if rel <= 1e-2 and codes_off <= 0.05 and scales_off <= 0.05:
        return "ok"
    return f"MISMATCH (mean rel err {rel:.2e}, codes {codes_off:.2e}, scales {scales_off:.2e})"


def _cfg(c: Any) -> str:
    return ",".join(str(v) for v in asdict(c).values())


def _time(timed: dict, args) -> dict[str, float]:
    return nq.interleaved_us(timed, args.rep, args.rounds)


def prefill_row(t: int, compiled: dict, args) -> dict:
    q = torch.randn(1, HQ, t, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, HK, t, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, HK, t, D, device="cuda", dtype=torch.bfloat16)
    o = sdpa(q, k, v)
    s = (o.float().abs().amax() / 300.0).reshape(1)
    ref = quant(o, s)

    def fused(c=None):
        return attention_quant.attention_fp8(q, k, v, s, softmax_scale=SM_SCALE, causal=True,
                                             config=c)

    def kernel_quant():
        o = attention_quant.attention(q, k, v, softmax_scale=SM_SCALE, causal=True)
        return compiled["quant"](o, s)

    default = attention_quant.prefill_config(t, t, D, True)
    row: dict[str, Any] = {"case": "prefill", "T": t, "default_cfg": _cfg(default),
                           "check": check(fused(), ref, s),
                           "unfused_check": check(compiled["prefill"](q, k, v, s), ref, s),
                           "kernel_quant_check": check(kernel_quant(), ref, s)}
    timed = {"sdpa": lambda: sdpa(q, k, v), "unfused": lambda: compiled["prefill"](q, k, v, s),
             "kernel_quant": kernel_quant, "fused": fused}
    row["sweep"] = _sweep(timed, PREFILL_SWEEP if args.sweep else (), default, fused,
                          lambda out: check(out, ref, s))
    return _finish(row, _time(timed, args), t)


def nvfp4_row(t: int, compiled: dict, args, device: str = "cuda") -> dict:
    q = torch.randn(1, HQ, t, D, device=device, dtype=torch.bfloat16)
    k = torch.randn(1, HK, t, D, device=device, dtype=torch.bfloat16)
    v = torch.randn(1, HK, t, D, device=device, dtype=torch.bfloat16)
    o = sdpa_token_major(q, k, v)
    gs = (448.0 * 6.0 / o.float().abs().amax()).reshape(1)
    ref = quant_ref.quant_nvfp4(o, gs)

    def fused(c=None):
        return attention_quant.attention_nvfp4(q, k, v, gs, softmax_scale=SM_SCALE, causal=True,
                                               config=c)

    def unfused():
        return nvfp4.quant_nvfp4(compiled["token_major"](q, k, v), gs)

    def kernel_quant():
        o = attention_quant.attention(q, k, v, softmax_scale=SM_SCALE, causal=True)
        return nvfp4.quant_nvfp4(compiled["to_token_major"](o), gs)

    default = attention_quant.prefill_config(t, t, D, True)
    row: dict[str, Any] = {"case": "prefill-nvfp4", "T": t, "default_cfg": _cfg(default),
                           "check": check_nvfp4(fused(), ref, gs),
                           "unfused_check": check_nvfp4(unfused(), ref, gs),
                           "kernel_quant_check": check_nvfp4(kernel_quant(), ref, gs)}
    timed = {"sdpa": lambda: compiled["token_major"](q, k, v), "unfused": unfused,
             "kernel_quant": kernel_quant, "fused": fused}
    row["sweep"] = _sweep(timed, PREFILL_SWEEP if args.sweep else (), default, fused,
                          lambda out: check_nvfp4(out, ref, gs))
    return _finish(row, _time(timed, args), t)


def _sweep(timed: dict, configs, default, fused, judge) -> dict:
    """Add each launch shape of `configs` but the default whose output `judge` finds "ok" to
    `timed`; returns the verdicts of those that do not."""
    failed = {}
    for c in configs:
        if c != default:
            verdict = judge(fused(c))
            if verdict == "ok":
                timed[_cfg(c)] = lambda c=c: fused(c)
            else:
                failed[_cfg(c)] = verdict
    return failed


def mla_row(t: int, compiled: dict, args) -> dict:
    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, device="cuda") * scale).to(torch.bfloat16)

    q, kv_c = rnd(t, MLA_H, MLA_NOPE + MLA_ROPE), rnd(t, MLA_RANK)
    k_pe, w = rnd(t, 1, MLA_ROPE), rnd(MLA_H * (MLA_NOPE + MLA_V), MLA_RANK, scale=MLA_RANK ** -0.5)
    o = mla(q, kv_c, k_pe, w)
    s = (o.float().abs().amax() / 300.0).reshape(1)
    ref = quant(o, s)

    def fused(c=None):
        return mla_attention_quant.mla_attention_fp8(q, kv_c, k_pe, w, s, config=c, **MLA_KW)

    default = mla_attention_quant.mla_config(t, t)
    row: dict[str, Any] = {"case": "mla", "T": t, "default_cfg": _cfg(default),
                           "check": check(fused(), ref, s),
                           "unfused_check": check(compiled["mla"](q, kv_c, k_pe, w, s), ref, s),
                           "kernel_quant_check": "-"}
    timed = {"sdpa": lambda: compiled["mla_bf16"](q, kv_c, k_pe, w),
             "unfused": lambda: compiled["mla"](q, kv_c, k_pe, w, s), "fused": fused}
    row["sweep"] = _sweep(timed, MLA_SWEEP if args.sweep else (), default, fused,
                          lambda out: check(out, ref, s))
    return _finish(row, _time(timed, args), t)


def decode_model_row(b: int, ctx: int, compiled: dict, args, device: str = "cuda") -> dict:
    """A decode step as the compiled paged model runs it (module docstring)."""
    blocks = ctx // PAGE
    num_blocks = b * blocks
    gen = torch.Generator().manual_seed(b * ctx)
    kc = torch.randn(num_blocks, PAGE, HK, D, device=device, dtype=torch.bfloat16)
    vc = torch.randn(num_blocks, PAGE, HK, D, device=device, dtype=torch.bfloat16)
    table = torch.randperm(num_blocks, generator=gen).to(device, torch.int32).reshape(b, blocks)
    lens = torch.randint(ctx // 2, ctx + 1, (b,), generator=gen, dtype=torch.int32)
    lens[0] = ctx
    lens = lens.to(device)
    q = torch.randn(b, HQ, D, device=device, dtype=torch.bfloat16)
    s = (masked_decode(q, kc, vc, table, lens).float().abs().amax() / 300.0).reshape(1)
    ref = masked_decode_quant(q, kc, vc, table, lens, s)
    q4 = q[:, :, None, :]

    def fused(c=None):
        if c is None:  # the fused op's CUDA entry, as the compiled model calls it
            return decl.PAGED_QUANT.run_cuda(q4, kc, vc, table, lens, s, SM_SCALE, FP8, True)
        out = attention_quant.paged_decode_fp8(q, kc, vc, table, lens, s,
                                               softmax_scale=SM_SCALE, config=c)
        return out.reshape(b, -1)

    def masked_kernel():  # before fuse-attn-quant read the pages in place: gather, masked kernel
        keys, values, mask = compiled["gather"](kc, vc, table, lens)
        return decl.ATTN_QUANT.run_cuda(q4, keys, values, mask, s, SM_SCALE, False, FP8, True)

    def kernel_quant():
        keys, values, mask = compiled["gather"](kc, vc, table, lens)
        o = attention_quant.attention(q4, keys, values, softmax_scale=SM_SCALE, causal=False,
                                      mask=mask)
        return compiled["token_major_quant"](o, s)

    default = attention_quant.decode_config(b, HK, blocks * PAGE, D,
                                            attention_quant.device_sms(kc.device))
    entry = "triton" if dispatch.use_triton(decl.PAGED_QUANT, q, FP8) else "reference"
    row: dict[str, Any] = {"case": "decode-model", "B": b, "ctx": ctx,
                           "default_cfg": f"{_cfg(default)}; entry {entry}",
                           "check": check(fused(), ref, s),
                           "masked_check": check(masked_kernel(), ref, s),
                           "unfused_check": check(
                               compiled["decode_masked"](q, kc, vc, table, lens, s), ref, s),
                           "kernel_quant_check": check(kernel_quant(), ref, s)}
    timed = {"sdpa": lambda: compiled["decode_masked_bf16"](q, kc, vc, table, lens),
             "unfused": lambda: compiled["decode_masked"](q, kc, vc, table, lens, s),
             "kernel_quant": kernel_quant, "fused": fused, "gather+masked": masked_kernel}
    row["sweep"] = _sweep(timed, DECODE_SWEEP if args.sweep else (), default, fused,
                          lambda out: check(out, ref, s))
    row["kv_bytes"] = 2 * b * HK * blocks * PAGE * D * kc.element_size()  # the gathered K, V
    return _finish(row, _time(timed, args), None)


# --- library baselines: FlashInfer (and SDPA's backends) + the quant, against irfuse fused -----

SHAPES = {"qwen3-8b": (32, 8), "llama70b-tp8": (8, 1)}
"""Query / KV heads (head size D): Qwen3-8B, and Llama-3-70B's heads on one GPU at TP8."""
LIB_DECODE_GRID = ("qwen3-8b:1x8192r,1x32768r,4x32768r,16x2048n,16x2048r,16x8192,16x8192r,"
                   "64x2048,64x2048r,64x8192n,64x8192r,256x512r,256x2048r;"
                   "llama70b-tp8:1x32768r,16x8192r,64x8192,64x8192r,256x2048rn,256x8192r")
"""`shape:BxC[r][n],...;...`: batch B, context C (r: ragged lengths in [C/2, C], the first at
C; otherwise every sequence at C), n: NVFP4 columns too."""
LIB_PREFILL_GRID = "qwen3-8b:512,2048,8192;llama70b-tp8:2048,8192"
DECODE_TILES = tuple(attention_quant.DecodeConfig(*c[:3], even=c[3], prefetch=c[4]) for c in (
    (64, 4, 2, True, False), (64, 4, 2, False, False), (32, 4, 4, False, True),
    (64, 4, 3, False, True), (64, 8, 3, False, True), (16, 4, 6, False, True)))
"""Launch shapes tried at the default split count (block_n, warps, stages, even, prefetch); the
first is the kernel's earlier default (even splits of each sequence, page numbers not
prefetched), `EARLIER` in the table."""
EARLIER = "64,4,2,even"
DECODE_CHUNKS = (256, 512, 1024, 2048, 4096)
"""Tokens per split tried with the best tile (the split count is capacity / chunk)."""


def parse_grid(spec: str) -> list[tuple[str, str]]:
    """`shape:item,item;shape:...` -> [(shape, item)]."""
    out = []
    for part in filter(None, spec.split(";")):
        shape, items = part.split(":")
        if shape not in SHAPES:
            raise ValueError(f"unknown shape {shape!r} (known: {', '.join(SHAPES)})")
        out += [(shape, item) for item in filter(None, items.split(","))]
    return out


def paged_case(hq: int, hk: int, b: int, ctx: int, ragged: bool, device: str = "cuda",
               seed: int = 0):
    """q [B, Hq, D], caches [blocks, PAGE, Hk, D] with every sequence's pages at shuffled
    places (and spare blocks), an int32 block table [B, ctx / PAGE] and int32 lengths."""
    blocks = ctx // PAGE
    num_blocks = b * blocks + 8
    gen = torch.Generator().manual_seed(seed)
    kc = torch.randn(num_blocks, PAGE, hk, D, device=device, dtype=torch.bfloat16)
    vc = torch.randn(num_blocks, PAGE, hk, D, device=device, dtype=torch.bfloat16)
    table = torch.randperm(num_blocks, generator=gen)[: b * blocks].reshape(b, blocks)
    if ragged:
        lens = torch.randint(ctx // 2, ctx + 1, (b,), generator=gen, dtype=torch.int32)
        lens[0] = ctx
    else:
        lens = torch.full((b,), ctx, dtype=torch.int32)
    q = torch.randn(b, hq, D, device=device, dtype=torch.bfloat16)
    return q, kc, vc, table.to(device, torch.int32), lens.to(device)


def fp8_caches(kc: torch.Tensor, vc: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """The caches as vLLM's per-tensor FP8 cache holds them (`x / scale` saturated to e4m3, each
    scale putting the cache's largest value at 224) and the scales, by the names the kernel
    takes."""
    out, scales = [], {}
    for name, c in (("k_scale", kc), ("v_scale", vc)):
        scale = (c.float().abs().amax() / 224.0).reshape(1)
        out.append(to_cache(c, FP8, scale))
        scales[name] = scale
    return out[0], out[1], scales


def _cfg_name(c: Any) -> str:
    fields = [str(c.block_n), str(c.num_warps), str(c.num_stages)]
    if c.splits is not None:
        fields.append(f"s{c.splits}")
    fields += [f for f, on in (("even", c.even), ("pf", c.prefetch), ("pdl", c.pdl)) if on]
    return ",".join(fields)


def _l2_bytes(device) -> int:
    if torch.device(device).type != "cuda":
        return 0
    return getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20)


def lib_decode_row(shape: str, item: str, compiled: dict, args, copy_bw: float,
                   device: str = "cuda") -> dict:
    """irfuse's paged decode + FP8 (the fused op's CUDA entry; then tile shapes, chunk sizes
    and PDL, each stage timed in interleaved rounds beside the entry) against FlashInfer's paged
    decode (CUDA-core and tensor-core) + Inductor's quant, over one cache; with `n` also NVFP4
    (FlashInfer + irfuse's NVFP4 quant kernel against the fused NVFP4 epilogue)."""
    from attention_libs import Unavailable, flashinfer_decode

    hq, hk = SHAPES[shape]
    dims, flags = item.rstrip("rn"), item[len(item.rstrip("rn")):]
    b, ctx = (int(x) for x in dims.split("x"))
    ragged, nv = "r" in flags, "n" in flags
    q, kc, vc, table, lens = paged_case(hq, hk, b, ctx, ragged, device, seed=b * ctx + hq)
    scales: dict[str, torch.Tensor] = {}
    if getattr(args, "fp8_cache", False):
        nv = False  # the NVFP4 columns are of the bf16 cache's rows
        kc, vc, scales = fp8_caches(kc, vc)
    tokens = int(lens.long().clamp(max=ctx).sum())
    kv_bytes = 2 * tokens * hk * D * kc.element_size()
    if scales:  # the reference over the values the FP8 caches stand for, attended in float32
        # as `attention_quant_ref.paged_decode` reads an FP8 cache (`x * scale` rounded to bf16
        # first would move about a tenth of the output codes, FlashInfer's and irfuse's alike)
        o = masked_decode(q.float(), *(c.float().mul(s) for c, s in (
            (kc, scales["k_scale"]), (vc, scales["v_scale"]))), table, lens).to(q.dtype)
    else:
        o = masked_decode(q, kc, vc, table, lens)  # [B, Hq * D] bf16
    s = (o.float().abs().amax() / 300.0).reshape(1)
    ref = quant(o, s)
    q4 = q[:, :, None, :]

    def fused(c):
        return attention_quant.paged_decode_fp8(q, kc, vc, table, lens, s,
                                                softmax_scale=SM_SCALE, config=c,
                                                **scales).reshape(b, -1)

    def entry():
        if scales:  # the in-vLLM op's path (`paged_decode_in_place`): the default shape
            return fused(None)
        return decl.PAGED_QUANT.run_cuda(q4, kc, vc, table, lens, s, SM_SCALE, FP8, True)

    sms = attention_quant.device_sms(kc.device)
    default = attention_quant.decode_config(b, hk, ctx, D, sms)
    splits = default.splits or attention_quant.decode_splits(b * hk, ctx, default.block_n, sms)
    row: dict[str, Any] = {
        "case": "lib-decode", "shape": shape, "B": b, "ctx": ctx, "ragged": ragged,
        "kv_cache": "fp8" if scales else "bf16",
        "kv_bytes": kv_bytes, "floor_us": kv_bytes / copy_bw * 1e6,
        "l2": kv_bytes < _l2_bytes(kc.device), "default_cfg": _cfg_name(replace(default, splits=splits)),
        "check": check(entry(), ref, s), "dropped": {}, "failed": {}}
    base: dict[str, Any] = {"irfuse": entry}
    for tc in (False, True):
        name = "fi_tc" if tc else "fi_cc"
        try:
            run, backend = flashinfer_decode(q, kc, vc, table, lens, SM_SCALE, tc,
                                             *(float(x) for x in scales.values()))
        except Unavailable as e:
            row["dropped"][name] = str(e)
            print(f"  {shape} {item}: {name} dropped: {e}", flush=True)
            continue
        row[f"{name}_backend"] = backend
        row[f"{name}_check"] = check(compiled["quant_dyn"](run().reshape(b, -1), s), ref, s)
        base[name] = run
        base[name + "+q"] = lambda run=run: compiled["quant_dyn"](run().reshape(b, -1), s)

    def stage(variants: dict[str, Any], extra: dict[str, Any]) -> dict[str, float]:
        timed = dict(extra)
        for name, c in variants.items():
            verdict = check(fused(c), ref, s)
            if verdict == "ok":
                timed[name] = lambda c=c: fused(c)
            else:
                row["failed"][name] = verdict
        return _time(timed, args)

    def nvfp4_entries(best) -> dict[str, Any]:
        """With `n`: the fused NVFP4 decode (default shape and `best`), and FlashInfer's
        outputs through irfuse's NVFP4 quant kernel."""
        if not nv:
            return {}
        gs = (448.0 * 6.0 / o.float().abs().amax()).reshape(1)
        ref4 = quant_ref.quant_nvfp4(o, gs)

        def fused4(c=None):
            return attention_quant.paged_decode_nvfp4(q, kc, vc, table, lens, gs,
                                                      softmax_scale=SM_SCALE, config=c)

        row["nvfp4_check"] = check_nvfp4(fused4(), ref4, gs)
        row["nvfp4_best_check"] = check_nvfp4(fused4(best), ref4, gs)
        out = {"nvfp4": fused4, "nvfp4_best": lambda: fused4(best)}
        for name in ("fi_cc", "fi_tc"):
            if name in base:
                out[name + "+nvfp4"] = lambda run=base[name]: nvfp4.quant_nvfp4(
                    run().reshape(b, -1), gs)
        return out

    if getattr(args, "lib_sweep", "full") == "light":
        # The earlier default and the other tile of `decode_config`'s rule, at its splits.
        other = (attention_quant.DecodeConfig(64, 4, 2) if default.prefetch
                 else attention_quant.DecodeConfig(64, 4, 4, prefetch=True))
        light = {EARLIER: DECODE_TILES[0],
                 "other tile": replace(other, splits=splits, even=default.even),
                 **lib_configs(args)}
        extra = nvfp4_entries(default)
        extra.pop("nvfp4_best", None)
        us = stage(light, {**base, **extra})
        row["irfuse_us"] = us["irfuse"]
        row["variants"] = {k: round(v, 2) for k, v in us.items()
                           if k not in base and k not in extra}
        row["best_cfg"], row["best_us"] = min([("default", row["irfuse_us"]),
                                               *row["variants"].items()], key=lambda kv: kv[1])
        _fi_cells(row, us)
        row.update({k + "_us": us[k] for k in extra})
        if nv:
            row["nvfp4_best_us"] = row["nvfp4_us"]
        return row
    times = [stage({_cfg_name(t): t for t in DECODE_TILES}, base)]
    tiles = {k: v for k, v in times[0].items() if k not in base}
    best_tile = next(t for t in DECODE_TILES if _cfg_name(t) == min(tiles, key=tiles.get)) \
        if tiles else default
    tried = []
    max_tiles = -(-ctx // best_tile.block_n)
    for chunk in DECODE_CHUNKS:
        n = -(-ctx // chunk)
        if 1 < n <= max_tiles and n != splits:
            tried.append(replace(best_tile, splits=n, even=False))
    if b * hk >= sms:
        tried.append(replace(best_tile, splits=1, even=False))
    if splits > 1:
        tried.append(replace(best_tile, even=not best_tile.even))
    cands = {_cfg_name(c): c for c in tried}
    times.append(stage(cands, {"irfuse": entry}))
    # Stages are compared through the entry timed in each: a later stage scaled to the first.
    to_first = times[0]["irfuse"] / times[1]["irfuse"]
    ranked = {**tiles, **{k: v * to_first for k, v in times[1].items() if k != "irfuse"}}
    by_name = {_cfg_name(c): c for c in (*DECODE_TILES, *cands.values())}
    best = by_name[min(ranked, key=ranked.get)] if ranked else default
    last: dict[str, Any] = {"irfuse": entry, **nvfp4_entries(best)}
    times.append(stage({_cfg_name(best): best, _cfg_name(replace(best, pdl=True)):
                        replace(best, pdl=True)}, last))
    final = {k: v for k, v in times[2].items() if k in (_cfg_name(best),
                                                         _cfg_name(replace(best, pdl=True)))}
    row["irfuse_us"] = times[0]["irfuse"]  # beside FlashInfer, in the same rounds
    scale = [row["irfuse_us"] / t["irfuse"] for t in times]
    row["variants"] = {k: round(v * scale[i], 2) for i, t in enumerate(times)
                       for k, v in t.items() if k not in base and k not in last}
    row["variants"].update({k: round(v * scale[2], 2) for k, v in final.items()})
    row["best_cfg"], row["best_us"] = min([("default", row["irfuse_us"]),
                                           *row["variants"].items()], key=lambda kv: kv[1])
    _fi_cells(row, times[0])
    for k in ("nvfp4", "nvfp4_best", "fi_cc+nvfp4", "fi_tc+nvfp4"):
        if k in times[2]:
            row[k + "_us"] = times[2][k] * scale[2]
    return row


def _fi_cells(row: dict, us: dict[str, float]) -> None:
    """FlashInfer's times of a decode row, and the best of its two + quant."""
    for name in ("fi_cc", "fi_tc", "fi_cc+q", "fi_tc+q"):
        if name in us:
            row[name + "_us"] = us[name]
    fi = [row[k] for k in ("fi_cc+q_us", "fi_tc+q_us") if k in row]
    row["fi_best_us"] = min(fi) if fi else None


def lib_prefill_row(shape: str, t: int, compiled: dict, args, device: str = "cuda") -> dict:
    """irfuse's causal prefill + FP8 (`attention_fp8`, default launch shape) against SDPA
    (its default backend under Inductor, and cuDNN) + Inductor's quant and FlashInfer's paged
    prefill (fa2, fa3; keys and values in a paged cache of 16-token pages at shuffled places)
    + the quant; B 1."""
    from attention_libs import Unavailable, flashinfer_prefill, sdpa_cudnn

    hq, hk = SHAPES[shape]
    q = torch.randn(1, hq, t, D, device=device, dtype=torch.bfloat16)
    k = torch.randn(1, hk, t, D, device=device, dtype=torch.bfloat16)
    v = torch.randn(1, hk, t, D, device=device, dtype=torch.bfloat16)
    o = sdpa(q, k, v)
    s = (o.float().abs().amax() / 300.0).reshape(1)
    ref = quant(o, s)
    ref_tm = attention_quant_ref.token_major(ref.view(torch.uint8)).view(FP8)
    row: dict[str, Any] = {"case": "lib-prefill", "shape": shape, "T": t, "dropped": {}}

    def fused():
        return attention_quant.attention_fp8(q, k, v, s, softmax_scale=SM_SCALE, causal=True)

    row["check"] = check(fused(), ref, s)
    timed: dict[str, Any] = {"irfuse": fused, "sdpa+q": lambda: compiled["prefill"](q, k, v, s)}
    try:
        call, note = sdpa_cudnn(q, k, v, SM_SCALE)
        row["cudnn_note"] = note
        row["cudnn_check"] = check(compiled["quant_dyn"](call(), s), ref, s)
        timed["cudnn+q"] = lambda: compiled["quant_dyn"](call(), s)
    except Unavailable as e:
        row["dropped"]["cudnn"] = str(e)
        print(f"  {shape} T={t}: cudnn dropped: {e}", flush=True)
    blocks = -(-t // PAGE)
    num_blocks = blocks + 8
    perm = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(t))[:blocks]
    table = perm.to(device, torch.int32).reshape(1, blocks)
    kc = torch.zeros(num_blocks, PAGE, hk, D, device=device, dtype=torch.bfloat16)
    vc = torch.zeros_like(kc)
    rows = torch.arange(t, device=device)
    kc[table[0, rows // PAGE].long(), rows % PAGE] = k[0].transpose(0, 1)
    vc[table[0, rows // PAGE].long(), rows % PAGE] = v[0].transpose(0, 1)
    q_tm = q[0].transpose(0, 1).contiguous()  # [T, Hq, D]
    for backend in ("fa2", "fa3"):
        try:
            call, got = flashinfer_prefill(q_tm, kc, vc, table, t, SM_SCALE, backend)
        except Unavailable as e:
            row["dropped"][backend] = str(e)
            print(f"  {shape} T={t}: {backend} dropped: {e}", flush=True)
            continue
        row[f"{backend}_check"] = check(compiled["quant_dyn"](call().reshape(t, -1), s), ref_tm,
                                        s)
        timed[f"{backend}+q"] = lambda call=call: compiled["quant_dyn"](call().reshape(t, -1), s)
    us = _time(timed, args)
    row.update({f"{k}_us": v for k, v in us.items()})
    lib = {k: v for k, v in us.items() if k != "irfuse"}
    row["lib_best"], row["lib_best_us"] = min(lib.items(), key=lambda kv: kv[1])
    row["tflops"] = 4 * t * t / 2 * D * hq / (us["irfuse"] * 1e-6) / 1e12
    return row


def lib_configs(args) -> dict[str, attention_quant.DecodeConfig]:
    """`--lib-configs`' launch shapes by their spec (`DecodeConfig.parse`)."""
    try:
        return {spec: attention_quant.DecodeConfig.parse(spec)
                for spec in getattr(args, "lib_configs", [])}
    except ValueError as err:
        raise SystemExit(f"bench_attention_quant: --lib-configs: {err}") from None


def lib_markdown(rows: list[dict], command: str, copy_bw: float,
                 configs: tuple[str, ...] = ()) -> str:
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    lines = [f"`{command}` ({dev}, torch {torch.__version__}; copy {copy_bw / 1e12:.2f} TB/s)",
             ""]
    dec = [r for r in rows if r["case"] == "lib-decode"]
    if dec:
        lines += ["| shape | B x ctx | KV MB | floor µs | FI CUDA-core + q | FI tensor-core + q | "
                  "irfuse fused | FI best / irfuse | irfuse % floor | best irfuse (shape) | "
                  "FI best / best | best % floor | earlier shape | check |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in dec:
            fib = r["fi_best_us"]
            cells = [f"{r.get(k, float('nan')):.1f}" if k in r else "-"
                     for k in ("fi_cc+q_us", "fi_tc+q_us")]
            ratio = f"{fib / r['irfuse_us']:.2f}" if fib else "-"
            ratio_b = f"{fib / r['best_us']:.2f}" if fib else "-"
            lines.append(
                f"| {r['shape']} | {r['B']} x {'<=' if r['ragged'] else ''}{r['ctx']} | "
                f"{r['kv_bytes'] / 1e6:.0f}{' L2' if r['l2'] else ''} | {r['floor_us']:.1f} | "
                f"{cells[0]} | {cells[1]} | {r['irfuse_us']:.1f} | {ratio} | "
                f"{100 * r['floor_us'] / r['irfuse_us']:.0f} | {r['best_us']:.1f} "
                f"({r['best_cfg']}) | {ratio_b} | {100 * r['floor_us'] / r['best_us']:.0f} | "
                f"{r['variants'].get(EARLIER, float('nan')):.1f} | {r['check']} |")
        if configs:
            lines += ["", "| shape | B x ctx | irfuse fused (default shape) | "
                      + " | ".join(configs) + " |", "|---|---|---|" + "---|" * len(configs)]
            lines += [f"| {r['shape']} | {r['B']} x {'<=' if r['ragged'] else ''}{r['ctx']} | "
                      f"{r['irfuse_us']:.1f} ({r['default_cfg']}) | "
                      + " | ".join(f"{r['variants'][c]:.1f}" if c in r["variants"] else
                                   r["failed"].get(c, "-") for c in configs) + " |"
                      for r in dec]
        nv = [r for r in dec if "nvfp4_us" in r]
        if nv:
            lines += ["", "| shape | B x ctx | FI CUDA-core + NVFP4 | FI tensor-core + NVFP4 | "
                      "irfuse fused NVFP4 | with the best FP8 shape | FI best / irfuse | check |",
                      "|---|---|---|---|---|---|---|---|"]
            for r in nv:
                fi = [r[k] for k in ("fi_cc+nvfp4_us", "fi_tc+nvfp4_us") if k in r]
                cells = [f"{r[k]:.1f}" if k in r else "-"
                         for k in ("fi_cc+nvfp4_us", "fi_tc+nvfp4_us")]
                lines.append(
                    f"| {r['shape']} | {r['B']} x {'<=' if r['ragged'] else ''}{r['ctx']} | "
                    f"{cells[0]} | {cells[1]} | {r['nvfp4_us']:.1f} | {r['nvfp4_best_us']:.1f} | "
                    f"{min(fi) / r['nvfp4_us']:.2f} | {r['nvfp4_check']} |" if fi else
                    f"| {r['shape']} | {r['B']} x {'<=' if r['ragged'] else ''}{r['ctx']} | "
                    f"- | - | {r['nvfp4_us']:.1f} | "
                    f"{r['nvfp4_best_us']:.1f} | - | {r['nvfp4_check']} |")
    pre = [r for r in rows if r["case"] == "lib-prefill"]
    if pre:
        lines += ["", "| shape | T | irfuse fused | SDPA (Inductor) + q | SDPA cuDNN + q | "
                  "FI fa2 + q | FI fa3 + q | best library / irfuse | irfuse TFLOP/s | check |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in pre:
            cells = [f"{r[k]:.1f}" if k in r else "-"
                     for k in ("sdpa+q_us", "cudnn+q_us", "fa2+q_us", "fa3+q_us")]
            lines.append(f"| {r['shape']} | {r['T']} | {r['irfuse_us']:.1f} | "
                         f"{' | '.join(cells)} | {r['lib_best_us'] / r['irfuse_us']:.2f} "
                         f"({r['lib_best']}) | {r['tflops']:.0f} | {r['check']} |")
    dropped = {f"{r['shape']} " + (f"{r['B']}x{r['ctx']}" if "B" in r else f"T{r['T']}")
               + f" {k}": v for r in rows for k, v in r.get("dropped", {}).items()}
    lines += ["", "µs, CUDA-graph replay, median of interleaved rounds; + q: Inductor's static "
              "FP8 quant of the library's bf16 output (NVFP4: irfuse's NVFP4 quant kernel). "
              "Floor: K and V bytes read (each sequence's tokens) over the copy bandwidth "
              "measured in this run (read + write counted). Ratios above 1: irfuse faster. "
              "Decode shapes (block_n, warps, stages[, splits][, even][, pf: page numbers "
              "prefetched][, pdl]); the default's split count is the policy's; earlier shape: "
              f"({EARLIER}) at the policy's split count, the kernel's earlier default. L2: the "
              "K and V bytes fit the L2, so replays read them from it."]
    if any(r.get("kv_cache") == "fp8" for r in dec):
        lines += ["", "KV caches: vLLM's per-tensor FP8 (e4m3, `x / scale`), read by irfuse's "
                  "kernel and by FlashInfer with the k and v scales; the check is against the "
                  "decode over the values they stand for."]
    if dropped:
        lines += ["", "Dropped: " + "; ".join(f"{k}: {v}" for k, v in dropped.items())]
    return "\n".join(lines) + "\n"


def _finish(row: dict, us: dict[str, float], t: int | None) -> dict:
    row["sdpa_us"] = us.pop("sdpa", None)
    row["unfused_us"] = us.pop("unfused")
    row["kernel_quant_us"] = us.pop("kernel_quant", None)
    row["fused_us"] = us.pop("fused")
    row["sweep"].update({k: round(v, 2) for k, v in us.items()})
    row["best_us"], row["best_cfg"] = min([(row["fused_us"], row["default_cfg"]),
                                           *((v, k) for k, v in us.items())])
    row["ratio"] = row["unfused_us"] / row["fused_us"]
    row["best_ratio"] = row["unfused_us"] / row["best_us"]
    if t is not None and row["case"] == "mla":  # QK^T over nope + rope, PV over v
        flops = 2 * t * t / 2 * (MLA_NOPE + MLA_ROPE + MLA_V) * MLA_H
        row["tflops"] = flops / (row["fused_us"] * 1e-6) / 1e12
    elif t is not None:  # causal attention FLOPs: 2 matmuls of T x T/2 x D per head
        row["tflops"] = 4 * t * t / 2 * D * HQ / (row["fused_us"] * 1e-6) / 1e12
    else:
        row["tbps"] = row["kv_bytes"] / (row["fused_us"] * 1e-6) / 1e12
    return row


def markdown(rows: list[dict], command: str) -> str:
    lines = [f"`{command}` ({torch.cuda.get_device_name()}, torch {torch.__version__})", "",
             "| case | SDPA µs | unfused (Inductor) µs | irfuse bf16 + quant µs | fused µs | "
             "unfused / fused | best fused µs (shape) | unfused / best | fused rate | check |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["case"] in ("prefill", "prefill-nvfp4", "mla"):
            name, rate = f"{r['case']} T={r['T']}", f"{r['tflops']:.0f} TFLOP/s"
        else:
            name = f"decode (compiled model) B={r['B']} ctx={r['ctx']}"
            rate = f"{r['tbps']:.2f} TB/s KV"
        sd = f"{r['sdpa_us']:.1f}" if r["sdpa_us"] is not None else "-"
        kq = f"{r['kernel_quant_us']:.1f}" if r["kernel_quant_us"] is not None else "-"
        lines.append(
            f"| {name} | {sd} | {r['unfused_us']:.1f} | {kq} | "
            f"{r['fused_us']:.1f} | {r['ratio']:.2f} | {r['best_us']:.1f} ({r['best_cfg']}) | "
            f"{r['best_ratio']:.2f} | {rate} | {r['check']} / {r['unfused_check']} / "
            f"{r['kernel_quant_check']} |")
    lines += ["", "Shapes: prefill (block_m, block_n, warps, stages, heavy_first); decode "
              "(block_n, warps, stages, splits); decode (compiled model) as prefill, over "
              "the folded GQA group, the entry the fused op took; mla (block_m, block_n, "
              "warps, stages). "
              "Check: fused / unfused / bf16+quant against the eager unfused graph. MLA's "
              "SDPA column is the unfused MLA (kv_b GEMM + SDPA) without the quant; "
              "prefill-nvfp4's is SDPA and the token-major copy, its unfused column that "
              "plus irfuse's NVFP4 quant kernel."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="512,2048,8192")
    p.add_argument("--batches", default="16,32,64")
    p.add_argument("--contexts", default="2048,8192")
    p.add_argument("--decode", default="model",
                   help="decode rows of the compiled model ('model'), or ''")
    p.add_argument("--mla-tokens", default="512,2048", help="MLA prefill sizes ('' for none)")
    p.add_argument("--nvfp4-tokens", default="512,2048",
                   help="prefill sizes with the NVFP4 output quant ('' for none)")
    p.add_argument("--lib-decode", default="",
                   help="paged decode rows against FlashInfer: 'default' (the preset grid) or "
                   "'shape:BxC[r][n],...;...' (r: ragged lengths, n: NVFP4 too)")
    p.add_argument("--lib-prefill", default="",
                   help="prefill rows against FlashInfer and SDPA's backends: 'default' or "
                   "'shape:T,...;...'")
    p.add_argument("--lib-sweep", choices=("full", "light"), default="full",
                   help="decode rows: the staged launch-shape sweep, or only the earlier "
                   "default and the other tile of decode_config's rule")
    p.add_argument("--lib-configs", nargs="*", default=[],
                   help="with --lib-sweep light: also time the fused decode at these launch "
                   "shapes (block_n:warps:stages:splits[:even][:prefetch])")
    p.add_argument("--fp8-cache", action="store_true",
                   help="decode rows against FlashInfer: vLLM's per-tensor FP8 caches (k_scale, "
                   "v_scale) for both")
    p.add_argument("--lib-out", help="write the library table here")
    p.add_argument("--rep", type=int, default=10, help="ms of replays per measurement")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    p.add_argument("--sweep", action="store_true", help="also time other launch shapes")
    p.add_argument("--out", help="write the markdown table here")
    p.add_argument("--json", help="write the raw rows here")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    command = "PYTHONPATH=. python3 benchmarks/bench_attention_quant.py " + shlex.join(
        argv if argv is not None else sys.argv[1:])
    nq._raise_recompile_limits()
    torch.manual_seed(0)
    compiled = {"prefill": torch.compile(sdpa_quant, dynamic=False),
                "quant": torch.compile(quant, dynamic=False),
                "mla": torch.compile(mla_quant, dynamic=False),
                "mla_bf16": torch.compile(mla, dynamic=False),
                "token_major": torch.compile(sdpa_token_major, dynamic=False),
                "to_token_major": torch.compile(attention_quant_ref.token_major,
                                                dynamic=False),
                "gather": torch.compile(gather_masked, dynamic=False),
                "decode_masked": torch.compile(masked_decode_quant, dynamic=False),
                "decode_masked_bf16": torch.compile(masked_decode, dynamic=False),
                "token_major_quant": torch.compile(
                    lambda o, s: quant(attention_quant_ref.token_major(o), s), dynamic=False)}
    decode_kinds = [k for k in args.decode.split(",") if k]
    cases = [("prefill", int(t)) for t in args.tokens.split(",") if t] + [
        ("mla", int(t)) for t in args.mla_tokens.split(",") if t] + [
        ("nvfp4", int(t)) for t in args.nvfp4_tokens.split(",") if t] + [
        (kind, (int(b), int(c))) for kind in decode_kinds for b in args.batches.split(",") if b
        for c in args.contexts.split(",") if c]
    compiled["quant_dyn"] = torch.compile(quant, dynamic=True)
    lib = [("lib-decode", x) for x in parse_grid(
        LIB_DECODE_GRID if args.lib_decode == "default" else args.lib_decode)] + [
        ("lib-prefill", (shape, int(t))) for shape, t in parse_grid(
            LIB_PREFILL_GRID if args.lib_prefill == "default" else args.lib_prefill)]
    copy_bw = max(nq.copy_bandwidths(args.rep).values()) if lib else 0.0
    rows: list[dict] = []
    for kind, size in lib:
        t0 = time.time()
        try:
            row = (lib_decode_row(*size, compiled, args, copy_bw) if kind == "lib-decode"
                   else lib_prefill_row(*size, compiled, args))
        except Exception as e:  # noqa: BLE001 (report and go on: one run, many rows)
            print(f"{kind} {size}: FAILED {type(e).__name__}: {e}", flush=True)
            continue
        rows.append(row)
        brief = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items()
                 if k.endswith("_us") or k in ("check", "best_cfg", "default_cfg")}
        print(f"{kind} {size}: {brief} [{time.time() - t0:.1f}s]", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
        torch.cuda.empty_cache()
    if lib:
        table = lib_markdown(rows, command, copy_bw, tuple(args.lib_configs))
        if args.lib_out:
            with open(args.lib_out, "w") as f:
                f.write(table)
        print(table, flush=True)
    lib_rows, rows = rows, []
    for kind, size in cases:
        t0 = time.time()
        try:
            row = (prefill_row(size, compiled, args) if kind == "prefill"
                   else mla_row(size, compiled, args) if kind == "mla"
                   else nvfp4_row(size, compiled, args) if kind == "nvfp4"
                   else decode_model_row(*size, compiled, args))
        except Exception as e:  # noqa: BLE001 (report and go on: one run, many rows)
            print(f"{kind} {size}: FAILED {type(e).__name__}: {e}", flush=True)
            continue
        rows.append(row)
        print(f"{kind} {size}: unfused {row['unfused_us']:.1f} fused {row['fused_us']:.1f} "
              f"({row['ratio']:.2f}) best {row['best_us']:.1f} {row['best_cfg']} "
              f"{row['check']} sweep {row['sweep']} [{time.time() - t0:.1f}s]", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(lib_rows + rows, f, indent=1)
        torch.cuda.empty_cache()
    if cases:
        table = markdown(rows, command)
        if args.out:
            with open(args.out, "w") as f:
                f.write(table)
        print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(lib_rows + rows, f, indent=1)
    complete = len(rows) == len(cases) and len(lib_rows) == len(lib)
    return 0 if complete and all(r["check"] == "ok" for r in lib_rows + rows) else 1


if __name__ == "__main__":
    sys.exit(main())
