"""Benchmark of residual add + RMSNorm -> zero pad (fuse_act_padding) on one GPU.

For each (H, pad multiple) and T: the unfused torch code (vLLM's spelling: f32 add, RMSNorm,
`F.pad` of the hidden dim) under `torch.compile` (Inductor, default mode, static shapes),
irfuse's kernel (`irfuse.kernels.norm_pad`) with its default launch shape and with each
swept shape, and an SM copy moving the same bytes (the kernel's floor). CUDA-graph replay
(`triton.testing.do_bench_cudagraph`, median), in interleaved rounds (the helpers of
`bench_norm_act_quant.py`). Every candidate's output is checked against eager first: the
residual and the pad columns bit for bit, the norm within two bf16 ulps (at most 1% off).

    PYTHONPATH=. python3 benchmarks/bench_act_padding.py --jobs 12 --rounds 3 --out table.md

Only sizes that pad are run (a multiple of the pad multiple is a no-op pad, which
eliminate-noops removes). Working sets under the 60 MB L2 stay cached between replays (`L2`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_norm_act_quant as nq  # noqa: E402 (timing helpers, by path)

from irfuse.kernels import norm_pad, norm_pad_ref  # noqa: E402

EPS = 1e-5
L2_BYTES = 60e6
DEFAULT_SIZES = ((2880, 128), (2880, 256), (5760, 256), (3000, 128))
DEFAULT_TOKENS = (1, 16, 256, 4096, 16384)
SWEEP = tuple(norm_pad.PadConfig(r, w, pdl) for r, w, pdl in (
    (1, 2, True), (1, 4, True), (1, 8, True), (1, 16, True), (1, 8, False), (2, 8, True),
    (2, 16, True), (4, 16, True)))


def make(t: int, h: int) -> dict:
    return {"x": torch.randn(t, h, device="cuda", dtype=torch.bfloat16),
            "r": torch.randn(t, h, device="cuda", dtype=torch.bfloat16),
            "w": (torch.rand(h, device="cuda") + 0.5).to(torch.bfloat16)}


def unfused(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, pad: int
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's RMSNorm (residual added in f32) and the router input's pad, as GPT-OSS runs them."""
    dtype = x.dtype
    h = x.float() + r.float()
    residual = h.to(dtype)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return F.pad(h.to(dtype) * w, (0, pad)), residual


def nbytes(t: int, h: int, width: int) -> int:
    """x, residual and weight read; residual_out and the padded output written (bf16)."""
    return 2 * (3 * t * h + h + t * width)


def check(out: tuple, ref: tuple, h: int) -> str:
    y, res = out
    y_ref, res_ref = ref
    if y.shape != y_ref.shape or not torch.equal(res, res_ref):
        return "MISMATCH: shape or residual"
    if not torch.equal(y[:, h:], y_ref[:, h:]):
        return "MISMATCH: pad columns"
    a, b = y[:, :h].float(), y_ref[:, :h].float()
    off = (a != b).float().mean().item()
    far = ((a - b).abs() > 2 * 2**-7 * torch.maximum(a.abs(), b.abs())).any().item()
    return "ok" if off <= 0.01 and not far else f"MISMATCH: {off:.2%} off, beyond 2 ulp {far}"


def _cfg(c: norm_pad.PadConfig) -> str:
    return ",".join(f"{k}={v}" for k, v in asdict(c).items())


def _raise_recompile_limits() -> None:
    import torch._dynamo

    for knob in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 4096)


def _warm(h: int, multiple: int, tokens: list[int]) -> str:
    """Compile Inductor's graphs and the kernels for one size into the on-disk caches."""
    _raise_recompile_limits()
    t0 = time.time()
    pad = -h % multiple
    compiled = torch.compile(unfused, dynamic=False)
    for t in tokens:
        d = make(t, h)
        compiled(d["x"], d["r"], d["w"], pad)
        for c in (None, *SWEEP):
            norm_pad.add_rms_norm_pad(d["x"], d["r"], d["w"], EPS, pad_multiple=multiple,
                                      config=c)
    torch.cuda.synchronize()
    return f"warmed H={h} multiple={multiple} in {time.time() - t0:.0f}s"


def prewarm(sizes: list[tuple[int, int]], tokens: list[int], jobs: int) -> None:
    import concurrent.futures
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        futures = [pool.submit(_warm, h, m, [t]) for h, m in sizes for t in tokens]
        for f in concurrent.futures.as_completed(futures):
            try:
                f.result()
            except Exception as e:  # noqa: BLE001 (the timing pass reports it again)
                print(f"warm-up failed: {type(e).__name__}: {e}", flush=True)


def measure(h: int, multiple: int, t: int, compiled: Any, bw: float, args) -> dict:
    pad = -h % multiple
    width = h + pad
    d = make(t, h)
    ref = unfused(d["x"], d["r"], d["w"], pad)

    def irfuse(c: norm_pad.PadConfig | None):
        return norm_pad.add_rms_norm_pad(d["x"], d["r"], d["w"], EPS, pad_multiple=multiple,
                                         config=c)

    default = norm_pad.pad_config(t, h)
    row: dict[str, Any] = {"H": h, "multiple": multiple, "width": width, "T": t,
                           "bytes": nbytes(t, h, width), "default_cfg": _cfg(default),
                           "check": check(irfuse(None), ref, h),
                           "inductor_check": check(compiled(d["x"], d["r"], d["w"], pad), ref, h)}
    timed = {"inductor": lambda: compiled(d["x"], d["r"], d["w"], pad),
             "irfuse": lambda: irfuse(None)}
    row["sweep"] = {}
    for c in SWEEP:
        if c == default:
            continue
        verdict = check(irfuse(c), ref, h)
        if verdict == "ok":
            timed[_cfg(c)] = lambda c=c: irfuse(c)
        else:
            row["sweep"][_cfg(c)] = verdict
    us = nq.interleaved_us(timed, args.rep, args.rounds)
    row["inductor_us"], row["irfuse_us"] = us.pop("inductor"), us.pop("irfuse")
    row["sweep"].update({k: round(v, 2) for k, v in us.items()})
    row["best_us"], row["best_cfg"] = min([(row["irfuse_us"], row["default_cfg"]),
                                           *((v, k) for k, v in us.items())])
    row["same_copy_us"] = nq.same_size_copy_us(row["bytes"], args.rep)
    row["l2"] = row["bytes"] < L2_BYTES
    row["ratio"] = row["irfuse_us"] / row["inductor_us"]
    row["best_ratio"] = row["best_us"] / row["inductor_us"]
    row["copy_frac"] = row["bytes"] / (row["irfuse_us"] * 1e-6) / bw
    row["inductor_copy_frac"] = row["bytes"] / (row["inductor_us"] * 1e-6) / bw
    return row


def markdown(rows: list[dict], command: str, copy: str) -> str:
    lines = [f"`{command}` ({torch.cuda.get_device_name()}, torch {torch.__version__}, "
             f"1 GiB copy {copy})", "",
             "| H -> padded | T | MB | Inductor µs | irfuse µs | irfuse / Inductor | best shape "
             "µs (rows, warps, pdl) | best / Inductor | % copy irfuse / Inductor | same-size "
             "copy µs | check |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        best = r["best_cfg"].replace("rows=", "").replace("num_warps=", "").replace("pdl=", "")
        lines.append(
            f"| {r['H']} -> {r['width']} | {r['T']} | {r['bytes'] / 1e6:.2f}"
            f"{' L2' if r['l2'] else ''} | {r['inductor_us']:.1f} | {r['irfuse_us']:.1f} | "
            f"{r['ratio']:.2f} | {r['best_us']:.1f} ({best}) | {r['best_ratio']:.2f} | "
            f"{100 * r['copy_frac']:.0f} / {100 * r['inductor_copy_frac']:.0f} | "
            f"{r['same_copy_us']:.1f} | {r['check']} / {r['inductor_check']} |")
    ratios = [r["ratio"] for r in rows]
    if ratios:
        lines += ["", f"irfuse / Inductor: median {statistics.median(ratios):.2f}, "
                  f"{min(ratios):.2f}-{max(ratios):.2f}; faster in "
                  f"{sum(x < 1 for x in ratios)} of {len(ratios)} rows."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=",".join(f"{h}:{m}" for h, m in DEFAULT_SIZES),
                   help="comma-separated H:pad_multiple")
    p.add_argument("--tokens", default=",".join(map(str, DEFAULT_TOKENS)))
    p.add_argument("--rep", type=int, default=10, help="ms of replays per measurement")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    p.add_argument("--jobs", type=int, default=1, help="processes compiling ahead")
    p.add_argument("--out", help="write the markdown table here")
    p.add_argument("--json", help="write the raw rows here")
    args = p.parse_args(argv)
    sizes = [tuple(map(int, s.split(":"))) for s in args.sizes.split(",")]
    tokens = [int(t) for t in args.tokens.split(",")]
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    for h, m in sizes:
        if norm_pad_ref.pad_amounts(h, pad_multiple=m)[1] == 0:
            p.error(f"H {h} is a multiple of {m}: nothing to pad")
    command = "PYTHONPATH=. python3 benchmarks/bench_act_padding.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    _raise_recompile_limits()
    if args.jobs > 1:
        t0 = time.time()
        prewarm(sizes, tokens, args.jobs)
        print(f"# warm-up {time.time() - t0:.0f}s", flush=True)
    torch.manual_seed(0)
    bws = nq.copy_bandwidths(args.rep)
    bw = max(bws.values())
    copy = ", ".join(f"{k} {v / 1e12:.2f} TB/s" for k, v in bws.items())
    print(f"# copy bandwidth {copy}", flush=True)
    compiled = torch.compile(unfused, dynamic=False)
    rows: list[dict] = []
    for h, m in sizes:
        for t in tokens:
            t0 = time.time()
            try:
                row = measure(h, m, t, compiled, bw, args)
            except Exception as e:  # noqa: BLE001 (report and go on: one run, many rows)
                print(f"H={h} multiple={m} T={t}: FAILED {type(e).__name__}: {e}", flush=True)
                continue
            rows.append(row)
            print(f"H={h}->{row['width']} T={t}: Inductor {row['inductor_us']:.1f} irfuse "
                  f"{row['irfuse_us']:.1f} ({row['ratio']:.2f}) best {row['best_us']:.1f} "
                  f"{row['best_cfg']} copy {row['same_copy_us']:.1f} {row['check']} "
                  f"[{time.time() - t0:.1f}s]", flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(rows, f, indent=1)
    table = markdown(rows, command, copy)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    print(table)
    complete = len(rows) == len(sizes) * len(tokens)
    return 0 if complete and all(r["check"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
