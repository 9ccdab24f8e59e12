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

The separate paged decode kernel (`decode (paged_decode kernel)` rows: every sequence at the
full context; the compiled model does not call this kernel, it is kept for comparison):
- `unfused`: the fastest unfused baseline built from torch: the cache gathered through the block
  table, SDPA of the one query over it, and the quant, all under `torch.compile` (Inductor);
- `kernel+quant`: irfuse's paged decode storing bf16, then Inductor's quant;
- `fused`: irfuse's paged decode with the quant fused (and, with --sweep, the best shape).

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
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
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
    (128, 4, 2, 4), (128, 4, 2, 8)))


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


def gather_decode_quant(q, kc, vc, table, s):
    """Decode over each sequence's whole block-table row (every sequence at full context)."""
    b = q.shape[0]
    k = kc[table.long()].reshape(b, -1, HK, D).transpose(1, 2)
    v = vc[table.long()].reshape(b, -1, HK, D).transpose(1, 2)
    o = F.scaled_dot_product_attention(q[:, :, None, :], k, v, scale=SM_SCALE, enable_gqa=True)
    return quant(o[:, :, 0, :], s)


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


def decode_row(b: int, ctx: int, compiled: dict, args) -> dict:
    blocks = ctx // PAGE
    num_blocks = b * blocks
    kc = torch.randn(num_blocks, PAGE, HK, D, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn(num_blocks, PAGE, HK, D, device="cuda", dtype=torch.bfloat16)
    table = torch.randperm(num_blocks, device="cuda").to(torch.int32).reshape(b, blocks)
    lens = torch.full((b,), ctx, dtype=torch.int32, device="cuda")
    q = torch.randn(b, HQ, D, device="cuda", dtype=torch.bfloat16)
    o = gather_decode_quant(q, kc, vc, table, torch.ones(1, device="cuda"))
    s = (o.float().abs().amax() / 300.0).reshape(1)
    ref = gather_decode_quant(q, kc, vc, table, s)

    def fused(c=None):
        return attention_quant.paged_decode_fp8(q, kc, vc, table, lens, s,
                                                softmax_scale=SM_SCALE, config=c)

    def kernel_quant():
        o = attention_quant.paged_decode(q, kc, vc, table, lens, softmax_scale=SM_SCALE)
        return compiled["quant"](o, s)

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    default = attention_quant.decode_config(b, HK, ctx, D, sms)
    splits = default.splits or attention_quant.decode_splits(b * HK, ctx, default.block_n, sms)
    row: dict[str, Any] = {"case": "decode", "B": b, "ctx": ctx,
                           "default_cfg": _cfg(default) + f" (splits {splits})",
                           "check": check(fused(), ref, s),
                           "unfused_check": check(compiled["decode"](q, kc, vc, table, s), ref, s),
                           "kernel_quant_check": check(kernel_quant(), ref, s)}
    timed = {"unfused": lambda: compiled["decode"](q, kc, vc, table, s),
             "kernel_quant": kernel_quant, "fused": fused}
    row["sweep"] = {}
    if args.sweep:
        for c in DECODE_SWEEP:
            if c != default:
                verdict = check(fused(c), ref, s)
                if verdict == "ok":
                    timed[_cfg(c)] = lambda c=c: fused(c)
                else:
                    row["sweep"][_cfg(c)] = verdict
    row["kv_bytes"] = 2 * kc.numel() * kc.element_size()
    return _finish(row, _time(timed, args), None)


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
        elif r["case"] == "decode-model":
            name = f"decode (compiled model) B={r['B']} ctx={r['ctx']}"
            rate = f"{r['tbps']:.2f} TB/s KV"
        else:
            name = f"decode (paged_decode kernel) B={r['B']} ctx={r['ctx']}"
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
              "warps, stages). The paged_decode kernel rows time a kernel the compiled "
              "model does not call. "
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
    p.add_argument("--decode", default="model,paged",
                   help="decode rows: 'model' (what the compiled model runs), 'paged' (the "
                   "separate paged_decode kernel), both comma-separated, or ''")
    p.add_argument("--mla-tokens", default="512,2048", help="MLA prefill sizes ('' for none)")
    p.add_argument("--nvfp4-tokens", default="512,2048",
                   help="prefill sizes with the NVFP4 output quant ('' for none)")
    p.add_argument("--rep", type=int, default=10, help="ms of replays per measurement")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    p.add_argument("--sweep", action="store_true", help="also time other launch shapes")
    p.add_argument("--out", help="write the markdown table here")
    p.add_argument("--json", help="write the raw rows here")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    command = "PYTHONPATH=. python3 benchmarks/bench_attention_quant.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    nq._raise_recompile_limits()
    torch.manual_seed(0)
    compiled = {"prefill": torch.compile(sdpa_quant, dynamic=False),
                "decode": torch.compile(gather_decode_quant, dynamic=False),
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
    rows: list[dict] = []
    for kind, size in cases:
        t0 = time.time()
        try:
            row = (prefill_row(size, compiled, args) if kind == "prefill"
                   else mla_row(size, compiled, args) if kind == "mla"
                   else nvfp4_row(size, compiled, args) if kind == "nvfp4"
                   else decode_model_row(*size, compiled, args) if kind == "model"
                   else decode_row(*size, compiled, args))
        except Exception as e:  # noqa: BLE001 (report and go on: one run, many rows)
            print(f"{kind} {size}: FAILED {type(e).__name__}: {e}", flush=True)
            continue
        rows.append(row)
        print(f"{kind} {size}: unfused {row['unfused_us']:.1f} fused {row['fused_us']:.1f} "
              f"({row['ratio']:.2f}) best {row['best_us']:.1f} {row['best_cfg']} "
              f"{row['check']} sweep {row['sweep']} [{time.time() - t0:.1f}s]", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
        torch.cuda.empty_cache()
    table = markdown(rows, command)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    print(table)
    return 0 if len(rows) == len(cases) and all(r["check"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
