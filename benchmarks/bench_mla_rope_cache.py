"""Benchmark of MLA's RoPE of q_pe / k_pe + the latent-cache write of `[kv_c | rotated k_pe]`
on one GPU (fuse_rope_kvcache_cat_mla's kernel, `irfuse.kernels.mla_rope_cache`).

DeepSeek-V3's shapes per tensor-parallel rank (`--heads`, default 16 = 128 / TP8): q_pe the
rope part (64) of each `[T, H, 192]` query head, k_pe `[T, 1, 64]`, kv_c `[T, 512]`, a bf16
latent cache `[blocks, 64, 576]` (FlashMLA's block size) written at shuffled slots. The unfused
code is DeepSeek's scaling rope as vLLM runs it natively on the CPU or without FlashInfer
(`DeepseekScalingRotaryEmbedding.forward_native`: GPT-J pairs, cos / sin repeated pairwise,
bf16 cache) followed by the latent write (`cache.view(-1, 576)[slots] = cat(kv_c, k_rot)`) under
`torch.compile` (Inductor, static shapes): what a user runs where vLLM's own fused op is not
available; vLLM's CUDA `concat_and_cache_mla_rope_fused` is not installed on the bench machine.
irfuse: one Triton launch. Floor: an SM copy of the same bytes. CUDA-graph replay, medians of
interleaved rounds (`bench_norm_act_quant.py`'s helpers); every candidate is checked against
eager first (each element within 2 bf16 ulps of its pair's magnitude; the cache likewise).
`--fp8`: vLLM's FP8 latent cache (kv_cache_dtype "fp8"): rows stored as `clamp(row / k_scale)`
in e4m3, checked within 2 e4m3 steps.

    PYTHONPATH=. python3 benchmarks/bench_mla_rope_cache.py --rounds 3 --out table.md [--fp8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_norm_act_quant as nq  # noqa: E402 (timing helpers, by path)
from bench_qk_norm_rope import _raise_recompile_limits  # noqa: E402

from irfuse.kernels import mla_rope_cache  # noqa: E402
from irfuse.kernels.qk_norm_rope import RopeConfig  # noqa: E402

NOPE, ROPE, LATENT, BLOCK = 128, 64, 512, 64
MAX_POS = 163840
DEFAULT_TOKENS = (1, 16, 64, 256, 1024, 4096)


FP8 = torch.float8_e4m3fn


def make(t: int, heads: int, fp8: bool = False) -> dict:
    q = torch.randn(t, heads, NOPE + ROPE, device="cuda", dtype=torch.bfloat16)
    inv_freq = 1.0 / (1e4 ** (torch.arange(0, ROPE, 2, device="cuda").float() / ROPE))
    f = torch.arange(MAX_POS, device="cuda").float()[:, None] * inv_freq[None, :]
    blocks = -(-2 * t // BLOCK) + 1
    return {"q_pe": q[..., NOPE:],
            "k_pe": torch.randn(t, 1, ROPE, device="cuda", dtype=torch.bfloat16),
            "kv_c": torch.randn(t, LATENT, device="cuda", dtype=torch.bfloat16),
            "pos": torch.randint(0, MAX_POS, (t,), device="cuda"),
            "table": torch.cat([f.cos(), f.sin()], dim=-1).to(torch.bfloat16),
            "cache": torch.zeros(blocks, BLOCK, LATENT + ROPE, device="cuda",
                                 dtype=FP8 if fp8 else torch.bfloat16),
            "scale": torch.tensor([0.5], device="cuda") if fp8 else None,
            "slots": torch.randperm(blocks * BLOCK, device="cuda")[:t]}


def _deepseek_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    rotated = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    return x * cos + rotated * sin


def unfused(q_pe, k_pe, kv_c, pos, table, cache, slots, scale=None):
    """DeepSeek's native rope of q_pe and k_pe, then the latent-cache write (into an FP8 cache:
    `clamp(row / scale)`, vLLM's `concat_and_cache_mla`)."""
    cos, sin = table[pos].chunk(2, dim=-1)
    cos = cos.repeat_interleave(2, dim=-1).unsqueeze(-2)
    sin = sin.repeat_interleave(2, dim=-1).unsqueeze(-2)
    q_rot, k_rot = _deepseek_rope(q_pe, cos, sin), _deepseek_rope(k_pe, cos, sin)
    rows = torch.cat([kv_c, k_rot[:, 0]], dim=-1)
    if scale is not None:
        rows = (rows.float() / scale).clamp(-448.0, 448.0).to(FP8)
    cache.view(-1, LATENT + ROPE)[slots] = rows
    return q_rot, k_rot


SWEEP = tuple(RopeConfig(*c) for c in (
    (1, 8, 1), (2, 8, 2), (4, 8, 4), (8, 8, 4), (1, 16, 2), (2, 16, 4), (4, 16, 4), (4, 16, 8),
    (8, 16, 8), (2, 32, 8), (4, 32, 8)))
"""Launch shapes (tokens, heads a program, warps) timed with --sweep."""


def irfuse(d: dict, config: RopeConfig | None = None):
    return mla_rope_cache.rope_mla_kv_cache_write(
        d["q_pe"], d["k_pe"], d["kv_c"], None, None, d["pos"], d["table"], d["cache"],
        d["slots"], is_neox=False, rotary_dim=ROPE, k_scale=d["scale"], config=config)


def nbytes(t: int, heads: int, fp8: bool = False) -> int:
    """q_pe and k_pe read and written, kv_c read, the cache rows written (1 byte a value in
    FP8), the table rows, positions and slots read (bf16 values, int64 indices)."""
    return (2 * (2 * t * (heads + 1) * ROPE + t * LATENT + t * ROPE)
            + (1 if fp8 else 2) * t * (LATENT + ROPE) + 16 * t)


def _close(a: torch.Tensor, b: torch.Tensor, step: float = 2 * 2.0**-7) -> str | None:
    """None where a agrees with b: each element within `step` (2 bf16 ulps; 2 e4m3 steps for an
    FP8 cache) of its GPT-J pair's magnitude (a rotated value near zero is the difference of two
    products: Inductor, which rounds once, and eager, which rounds each product, differ there by
    an ulp of the products; they differ so in about a third of the elements)."""
    a, b = a.float(), b.float()
    mag = b.unflatten(-1, (-1, 2)).norm(dim=-1).repeat_interleave(2, dim=-1)
    far = ((a - b).abs() > step * (torch.maximum(a.abs(), b.abs()) + mag) * (1 + 1e-6)).any()
    off = (a != b).float().mean().item()
    return None if not far.item() else f"{off:.2%} off, some beyond 2 ulps"


def measure(t: int, heads: int, compiled, bw: float, args) -> dict:
    d = make(t, heads, args.fp8)
    eager = d["cache"].clone()
    ref = unfused(d["q_pe"], d["k_pe"], d["kv_c"], d["pos"], d["table"], eager, d["slots"],
                  d["scale"])
    cache_step = 2 * 2.0**-3 if args.fp8 else 2 * 2.0**-7

    def check(fn) -> str:
        d["cache"].zero_()
        out = fn()
        for name, a, b, step in (("q", out[0], ref[0], 2 * 2.0**-7),
                                 ("k", out[1], ref[1], 2 * 2.0**-7),
                                 ("cache", d["cache"], eager, cache_step)):
            problem = _close(a, b, step)
            if problem:
                return f"MISMATCH {name}: {problem}"
        return "ok"

    def ind():
        return compiled(d["q_pe"], d["k_pe"], d["kv_c"], d["pos"], d["table"], d["cache"],
                        d["slots"], d["scale"])

    row = {"T": t, "heads": heads, "bytes": nbytes(t, heads, args.fp8),
           "check": check(lambda: irfuse(d)),
           "inductor_check": check(ind)}
    timed = {"inductor": ind, "irfuse": lambda: irfuse(d)}
    for c in SWEEP if args.sweep else ():
        if check(lambda c=c: irfuse(d, c)) == "ok":
            timed[_cfg(c)] = lambda c=c: irfuse(d, c)
    us = nq.interleaved_us(timed, args.rep, args.rounds)
    row["inductor_us"], row["irfuse_us"] = us.pop("inductor"), us.pop("irfuse")
    row["best_us"], row["best_cfg"] = min([(row["irfuse_us"], "default"),
                                           *((v, k) for k, v in us.items())])
    row["same_copy_us"] = nq.same_size_copy_us(row["bytes"], args.rep)
    row["speedup"] = row["inductor_us"] / row["irfuse_us"]
    row["copy_frac"] = row["bytes"] / (row["irfuse_us"] * 1e-6) / bw
    return row


def _cfg(c: RopeConfig) -> str:
    return f"{c.tokens}/{c.heads}/{c.num_warps}"


def markdown(rows: list[dict], command: str, copy: str) -> str:
    lines = [f"`{command}` ({torch.cuda.get_device_name()}, torch {torch.__version__}, "
             f"triton {__import__('triton').__version__}, 1 GiB copy {copy})", "",
             "| heads | T | MB | Inductor µs | irfuse µs | Inductor / irfuse | best shape µs "
             "(tokens/heads/warps) | % copy BW irfuse | same-size copy µs | check irfuse / "
             "Inductor |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['heads']} | {r['T']} | {r['bytes'] / 1e6:.2f} | "
                     f"{r['inductor_us']:.1f} | {r['irfuse_us']:.1f} | {r['speedup']:.2f} | "
                     f"{r['best_us']:.1f} ({r['best_cfg']}) | "
                     f"{100 * r['copy_frac']:.0f} | {r['same_copy_us']:.1f} | {r['check']} / "
                     f"{r['inductor_check']} |")
    sp = [r["speedup"] for r in rows]
    if sp:
        lines += ["", f"Inductor / irfuse median {statistics.median(sp):.2f}, "
                  f"{min(sp):.2f}-{max(sp):.2f}; irfuse faster in {sum(x > 1 for x in sp)} of "
                  f"{len(sp)} rows."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default=",".join(map(str, DEFAULT_TOKENS)))
    p.add_argument("--heads", default="16,128", help="query heads per rank (TP8, TP1)")
    p.add_argument("--rep", type=int, default=10, help="ms of replays per measurement")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    p.add_argument("--sweep", action="store_true", help="also time the launch shapes of SWEEP")
    p.add_argument("--out", help="write the markdown table here")
    p.add_argument("--fp8", action="store_true", help="vLLM's FP8 latent cache (k_scale 0.5)")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    command = "PYTHONPATH=. python3 benchmarks/bench_mla_rope_cache.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    _raise_recompile_limits()
    torch.manual_seed(0)
    bws = nq.copy_bandwidths(args.rep)
    bw = max(bws.values())
    copy = ", ".join(f"{k} {v / 1e12:.2f} TB/s" for k, v in bws.items())
    compiled = torch.compile(unfused, dynamic=False)
    rows: list[dict] = []
    for heads in (int(h) for h in args.heads.split(",")):
        for t in (int(t) for t in args.tokens.split(",")):
            t0 = time.time()
            try:
                row = measure(t, heads, compiled, bw, args)
            except Exception as e:  # noqa: BLE001 (report and go on: one run, many rows)
                print(f"heads={heads} T={t}: FAILED {type(e).__name__}: {e}", flush=True)
                continue
            rows.append(row)
            print(f"heads={heads} T={t}: Inductor {row['inductor_us']:.1f} irfuse "
                  f"{row['irfuse_us']:.1f} ({row['speedup']:.2f}x) best {row['best_us']:.1f} "
                  f"{row['best_cfg']} {row['check']} "
                  f"[{time.time() - t0:.1f}s]", flush=True)
    table = markdown(rows, command, copy)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    print(table)
    return 0 if rows and all(r["check"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
