"""Benchmark of per-head QK RMSNorm + RoPE (and + paged KV-cache write) on one GPU.

For each T (32 q / 8 kv heads of 128, bf16, NeoX or with --gptj GPT-J pairs, `positions` + a
bf16 `cos_sin_cache`): the
unfused torch code as vLLM runs it natively (split qkv -> view by heads -> RMSNorm of q and k
(`forward_native`) -> rotary (`forward_native`)) under `torch.compile` (Inductor, default mode,
static shapes), irfuse's kernel (`irfuse.kernels.qk_norm_rope`) with its default launch
shape (and, with --sweep, each swept shape), and an SM copy moving the same bytes (the floor).
The KV variant adds the cache write: Inductor runs the same code followed by `index_put_` of the
rotated k and v into vLLM's FlashAttention cache ([2, blocks, 16, 8, 128], unbound), irfuse one
launch that writes them there (`--fp8-cache`: vLLM's FP8 cache, k and v stored as
`clamp(x / scale)` in e4m3, k_scale 0.05 and v_scale 0.125, checked within 2 e4m3 steps).
CUDA-graph replay (`triton.testing.do_bench_cudagraph`, median),
in interleaved rounds (the helpers of `bench_norm_act_quant.py`). Every candidate is checked
against eager first (at most 1% of elements off, each within 2 bf16 ulps of its rotated pair's
magnitude; the caches likewise).

    PYTHONPATH=. python3 benchmarks/bench_qk_norm_rope.py --rounds 3 --out table.md

Working sets under the 60 MB L2 stay cached between replays (`L2`).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_norm_act_quant as nq  # noqa: E402 (timing helpers, by path)

from irfuse.kernels import qk_norm_rope  # noqa: E402

EPS = 1e-6
HQ, HK, D = 32, 8, 128
BLOCK = 16
MAX_POS = 32768
L2_BYTES = 60e6
DEFAULT_TOKENS = (1, 16, 128, 256, 1024, 4096, 16384)
DEFAULT_KV_TOKENS = (1, 16, 64, 128, 256, 1024)
SWEEP = tuple(qk_norm_rope.RopeConfig(*c) for c in (
    (1, 8, 1), (1, 8, 2), (1, 8, 4), (1, 4, 1), (1, 4, 2), (2, 8, 2), (2, 8, 4), (4, 8, 4),
    (4, 8, 8), (1, 8, 2, False)))


FP8 = torch.float8_e4m3fn
FP8_CACHE = [False]
"""Whether the KV variant writes vLLM's FP8 cache (`--fp8-cache`)."""


def make(t: int, kv: bool = False) -> dict:
    d = {"qkv": torch.randn(t, (HQ + 2 * HK) * D, device="cuda", dtype=torch.bfloat16),
         "qw": (torch.rand(D, device="cuda") + 0.5).to(torch.bfloat16),
         "kw": (torch.rand(D, device="cuda") + 0.5).to(torch.bfloat16),
         "pos": torch.randint(0, MAX_POS, (t,), device="cuda")}
    inv_freq = 1.0 / (1e6 ** (torch.arange(0, D, 2, device="cuda").float() / D))
    f = torch.arange(MAX_POS, device="cuda").float()[:, None] * inv_freq[None, :]
    d["cache"] = torch.cat([f.cos(), f.sin()], dim=-1).to(torch.bfloat16)
    if kv:
        blocks = -(-2 * t // BLOCK) + 1
        d["kv"] = torch.zeros(2, blocks, BLOCK, HK, D, device="cuda",
                              dtype=FP8 if FP8_CACHE[0] else torch.bfloat16)
        d["slots"] = torch.randperm(blocks * BLOCK, device="cuda")[:t]
        d["scales"] = ((torch.tensor([0.05], device="cuda"), torch.tensor([0.125], device="cuda"))
                       if FP8_CACHE[0] else (None, None))
    return d


def _rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # vLLM RMSNorm.forward_native
    orig = x.dtype
    x = x.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return x.to(orig) * w


IS_NEOX = [True]
"""The rope style timed (`--gptj`: vLLM's GPT-J pairs)."""


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """vLLM's `ApplyRotaryEmb.forward_static`, NeoX halves or GPT-J pairs."""
    cos = cos.unsqueeze(-2).to(x.dtype)
    sin = sin.unsqueeze(-2).to(x.dtype)
    if IS_NEOX[0]:
        x1, x2 = torch.chunk(x, 2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)


def unfused(qkv, qw, kw, pos, cache):
    """Qwen3's attention prologue in vLLM (native ops): split, q/k norm by head, rotary."""
    t = qkv.shape[0]
    q, k, v = qkv.split([HQ * D, HK * D, HK * D], dim=-1)
    q = _rms_norm(q.view(t, HQ, D), qw)
    k = _rms_norm(k.view(t, HK, D), kw)
    cos, sin = cache.index_select(0, pos).chunk(2, dim=-1)
    return _rope(q, cos, sin), _rope(k, cos, sin), v


def _stored(x: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    """x as the cache stores it: itself, or vLLM's FP8 `clamp(x / scale)`."""
    return x if scale is None else (x.float() / scale).clamp(-448.0, 448.0).to(FP8)


def unfused_kv(qkv, qw, kw, pos, cache, k_cache, v_cache, slots, k_scale=None, v_scale=None):
    q, k, v = unfused(qkv, qw, kw, pos, cache)
    k_cache.view(-1, HK, D).index_put_((slots,), _stored(k, k_scale))
    v_cache.view(-1, HK, D).index_put_((slots,), _stored(v.view(-1, HK, D), v_scale))
    return q


def irfuse(d: dict, cfg: qk_norm_rope.RopeConfig | None):
    t = d["qkv"].shape[0]
    q, k, _ = d["qkv"].split([HQ * D, HK * D, HK * D], dim=-1)
    return qk_norm_rope.qk_norm_rope(q.view(t, HQ, D), k.view(t, HK, D), d["qw"], d["kw"], None,
                                     None, d["pos"], d["cache"], eps=EPS, is_neox=IS_NEOX[0],
                                     rotary_dim=D, config=cfg)


def irfuse_kv(d: dict, cfg: qk_norm_rope.RopeConfig | None):
    t = d["qkv"].shape[0]
    q, k, v = d["qkv"].split([HQ * D, HK * D, HK * D], dim=-1)
    kc, vc = d["kv"].unbind(0)
    return qk_norm_rope.qk_norm_rope_kv(
        q.view(t, HQ, D), k.view(t, HK, D), v.view(t, HK, D), d["qw"], d["kw"], None, None,
        d["pos"], d["cache"], kc, vc, d["slots"], *d["scales"], eps=EPS, is_neox=IS_NEOX[0],
        rotary_dim=D, config=cfg)


def nbytes(t: int, kv: bool) -> int:
    """q and k read and written (v too with kv, k and v into the cache: 1 byte a value in FP8),
    positions and the tables' rows read (bf16)."""
    heads = HQ + HK + (HK if kv else 0)
    cache_bytes = 2 * t * HK * D if kv and FP8_CACHE[0] else 0
    return 2 * 2 * t * heads * D - cache_bytes + 8 * t + 2 * t * D + (8 * t if kv else 0)


def _close(a: torch.Tensor, b: torch.Tensor, step: float = 2 * 2.0**-7,
           most_off: float = 0.01) -> str | None:
    """None where a agrees with b: at most `most_off` off, each within `step` (2 bf16 ulps) of
    its pair's magnitude."""
    a, b = a.float(), b.float()
    if IS_NEOX[0]:
        h = D // 2
        mag = torch.sqrt(b[..., :h] ** 2 + b[..., h:] ** 2).repeat(*([1] * (b.dim() - 1)), 2)
    else:
        mag = b.unflatten(-1, (-1, 2)).norm(dim=-1).repeat_interleave(2, dim=-1)
    far = ((a - b).abs() > step * (torch.maximum(a.abs(), b.abs()) + mag) * (1 + 1e-6)).any()
    off = (a != b).float().mean().item()
    return (None if off <= most_off and not far.item()
            else f"{off:.2%} off, beyond bound {far.item()}")


def check(out, ref) -> str:
    for name, a, b in zip(("q", "k"), out, ref, strict=False):
        p = _close(a, b)
        if p:
            return f"MISMATCH {name}: {p}"
    return "ok"


def _cfg(c: qk_norm_rope.RopeConfig) -> str:
    return ",".join(f"{k}={v}" for k, v in asdict(c).items())


def _raise_recompile_limits() -> None:
    import torch._dynamo

    for knob in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 4096)


def measure(t: int, kv: bool, compiled: Any, bw: float, args) -> dict:
    d = make(t, kv)
    if kv:
        kc, vc = d["kv"].unbind(0)
        eager_kv = d["kv"].clone()
        ekc, evc = eager_kv.unbind(0)
        ref_q = unfused_kv(d["qkv"], d["qw"], d["kw"], d["pos"], d["cache"], ekc, evc,
                           d["slots"], *d["scales"])
        # FP8: a value a bf16 ulp off may land one e4m3 step off, in a few percent of them.
        cache_bound = (2 * 2.0**-3, 0.05) if FP8_CACHE[0] else (2 * 2.0**-7, 0.01)

        def check_fn(fn) -> str:
            d["kv"].zero_()
            q = fn()
            v = check((q,), (ref_q,))
            if v != "ok":
                return v
            p = _close(d["kv"], eager_kv, *cache_bound)
            return "ok" if p is None else f"MISMATCH cache: {p}"

        def ind():
            return compiled(d["qkv"], d["qw"], d["kw"], d["pos"], d["cache"], kc, vc,
                            d["slots"], *d["scales"])

        def mine(c):
            return irfuse_kv(d, c)
    else:
        ref = unfused(d["qkv"], d["qw"], d["kw"], d["pos"], d["cache"])

        def check_fn(fn) -> str:
            return check(fn(), ref)

        def ind():
            return compiled(d["qkv"], d["qw"], d["kw"], d["pos"], d["cache"])

        def mine(c):
            return irfuse(d, c)
    default = qk_norm_rope.rope_config(t, HQ + HK, D)
    row: dict[str, Any] = {"variant": "kv" if kv else "qk", "T": t, "bytes": nbytes(t, kv),
                           "default_cfg": _cfg(default), "check": check_fn(lambda: mine(None)),
                           "inductor_check": check_fn(ind)}
    timed = {"inductor": ind, "irfuse": lambda: mine(None)}
    row["sweep"] = {}
    if args.sweep:
        for c in SWEEP:
            if c == default:
                continue
            verdict = check_fn(lambda c=c: mine(c))
            if verdict == "ok":
                timed[_cfg(c)] = lambda c=c: mine(c)
            else:
                row["sweep"][_cfg(c)] = verdict
    us = nq.interleaved_us(timed, args.rep, args.rounds)
    row["inductor_us"], row["irfuse_us"] = us.pop("inductor"), us.pop("irfuse")
    row["sweep"].update({k: round(v, 2) for k, v in us.items()})
    row["best_us"], row["best_cfg"] = min([(row["irfuse_us"], row["default_cfg"]),
                                           *((v, k) for k, v in us.items())])
    row["same_copy_us"] = nq.same_size_copy_us(row["bytes"], args.rep)
    row["l2"] = row["bytes"] < L2_BYTES
    row["speedup"] = row["inductor_us"] / row["irfuse_us"]
    row["best_speedup"] = row["inductor_us"] / row["best_us"]
    row["copy_frac"] = row["bytes"] / (row["irfuse_us"] * 1e-6) / bw
    row["inductor_copy_frac"] = row["bytes"] / (row["inductor_us"] * 1e-6) / bw
    row["vs_same_copy"] = row["same_copy_us"] / row["irfuse_us"]
    return row


def markdown(rows: list[dict], command: str, copy: str) -> str:
    lines = [f"`{command}` ({torch.cuda.get_device_name()}, torch {torch.__version__}, "
             f"triton {__import__('triton').__version__}, 1 GiB copy {copy})", "",
             "| variant | T | MB | Inductor µs | irfuse µs | Inductor / irfuse | best shape µs "
             "(tokens, heads, warps, pdl) | % copy BW irfuse / Inductor | same-size copy µs "
             "(copy / irfuse) | check |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        best = r["best_cfg"]
        for k in ("tokens=", "heads=", "num_warps=", "pdl="):
            best = best.replace(k, "")
        lines.append(
            f"| {'QK norm+RoPE' if r['variant'] == 'qk' else '+ KV write'} | {r['T']} | "
            f"{r['bytes'] / 1e6:.2f}{' L2' if r['l2'] else ''} | {r['inductor_us']:.1f} | "
            f"{r['irfuse_us']:.1f} | {r['speedup']:.2f} | {r['best_us']:.1f} ({best}) | "
            f"{100 * r['copy_frac']:.0f} / {100 * r['inductor_copy_frac']:.0f} | "
            f"{r['same_copy_us']:.1f} ({r['vs_same_copy']:.2f}) | {r['check']} / "
            f"{r['inductor_check']} |")
    for variant in ("qk", "kv"):
        sp = [r["speedup"] for r in rows if r["variant"] == variant]
        if sp:
            lines += ["", f"{variant}: Inductor / irfuse median {statistics.median(sp):.2f}, "
                      f"{min(sp):.2f}-{max(sp):.2f}; irfuse faster in "
                      f"{sum(x > 1 for x in sp)} of {len(sp)} rows."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default=",".join(map(str, DEFAULT_TOKENS)))
    p.add_argument("--kv-tokens", default=",".join(map(str, DEFAULT_KV_TOKENS)),
                   help="T of the KV variant ('' for none)")
    p.add_argument("--rep", type=int, default=10, help="ms of replays per measurement")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    p.add_argument("--sweep", action="store_true", help="also time the swept launch shapes")
    p.add_argument("--gptj", action="store_true", help="GPT-J pairs instead of NeoX halves")
    p.add_argument("--fp8-cache", action="store_true", help="the KV variant into vLLM's FP8 cache")
    p.add_argument("--out", help="write the markdown table here")
    p.add_argument("--json", help="write the raw rows here")
    args = p.parse_args(argv)
    IS_NEOX[0] = not args.gptj
    FP8_CACHE[0] = args.fp8_cache
    tokens = [int(t) for t in args.tokens.split(",") if t]
    kv_tokens = [int(t) for t in args.kv_tokens.split(",") if t]
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    command = "PYTHONPATH=. python3 benchmarks/bench_qk_norm_rope.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    _raise_recompile_limits()
    torch.manual_seed(0)
    bws = nq.copy_bandwidths(args.rep)
    bw = max(bws.values())
    copy = ", ".join(f"{k} {v / 1e12:.2f} TB/s" for k, v in bws.items())
    print(f"# copy bandwidth {copy}", flush=True)
    compiled = torch.compile(unfused, dynamic=False)
    compiled_kv = torch.compile(unfused_kv, dynamic=False)
    rows: list[dict] = []
    for kv, ts in ((False, tokens), (True, kv_tokens)):
        for t in ts:
            t0 = time.time()
            try:
                row = measure(t, kv, compiled_kv if kv else compiled, bw, args)
            except Exception as e:  # noqa: BLE001 (report and go on: one run, many rows)
                print(f"kv={kv} T={t}: FAILED {type(e).__name__}: {e}", flush=True)
                continue
            rows.append(row)
            print(f"{row['variant']} T={t}: Inductor {row['inductor_us']:.1f} irfuse "
                  f"{row['irfuse_us']:.1f} ({row['speedup']:.2f}x) best {row['best_us']:.1f} "
                  f"{row['best_cfg']} copy {row['same_copy_us']:.1f} {row['check']} "
                  f"sweep {row['sweep']} [{time.time() - t0:.1f}s]", flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(rows, f, indent=1)
    table = markdown(rows, command, copy)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    print(table)
    complete = len(rows) == len(tokens) + len(kv_tokens)
    return 0 if complete and all(r["check"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
