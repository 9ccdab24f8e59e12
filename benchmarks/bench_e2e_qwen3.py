"""A serving-shaped step of a Qwen3-8B-shaped FP8 model: irfuse (O2 plus the attention family)
against plain torch.compile (Inductor) on the same graph, decode and prefill, side by side.

The model is a stack of irfuse's built-in Qwen3-style layers at the `llama-8b` size (hidden 4096,
32 q / 8 kv heads of 128, intermediate 14336), with per-head q/k RMSNorms, static FP8 linears
(`torch._scaled_mm`) and a paged KV cache (block size 16), a few layers:

- decode: `paged` (batch sequences of context tokens already cached, one new token each: RoPE,
  KV-cache write, masked attention over the pages gathered by the block tables);
- prefill: `paged-prefill` (one sequence of T tokens: RoPE, KV-cache write, causal attention over
  the keys and values read back from the cache).

irfuse runs at O2 with enable_qk_norm_rope_fusion, fuse_rope_kvcache and fuse_attn_quant on
(`--variants` adds `irfuse-o2`, O2 alone, to split the gain). Both compiles mark num_tokens
dynamic. On CUDA each (variant, step) is captured once as a CUDA graph and the graphs replayed in
interleaved rounds with the helpers of `bench_e2e_llama_fp8.py` (median over the rounds, spread,
rounds won). `--profile` lists each variant's top kernels of one forward per step (torch
profiler over plain launches). `--device cpu --tiny` runs the same code at a tiny size without
CUDA graphs (plain calls timed by the wall clock; a smoke path, its figures mean nothing).

The timing rows of each step are printed, and `--out` rewritten, as soon as the step ends (a
crash in a later step keeps them); the kernel profiles come after the table in `--out`, and
the table and notes are printed once more at the very end, after the profiles.

`--isolate` runs no timing: for the decode step only, each variant (Inductor too) with
IRFUSE_PDL unset and IRFUSE_PDL=0 is compiled, run, captured as a CUDA graph alone and
replayed, in a child process of its own (an illegal memory access poisons the CUDA context),
synchronizing after each replay; one line per (variant, pdl): ok with the replay's largest
difference from a plain launch, or FAILED with the error's last line.

    python benchmarks/bench_e2e_qwen3.py [--layers 4] [--batch 16] [--context 2048]
        [--prefill 4096] [--variants irfuse irfuse-o2] [--profile] [--out FILE.md]
        [--isolate]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_e2e_llama_fp8 as e2e  # noqa: E402 (CUDA-graph and profiler helpers, by path)

ATTENTION_FAMILY = {"enable_qk_norm_rope_fusion": True, "fuse_rope_kvcache": True,
                    "fuse_attn_quant": True}
VARIANTS = {
    "irfuse": {"optimization_level": 2, "pass_config": ATTENTION_FAMILY},
    "irfuse-o2": {"optimization_level": 2},
}
PASSES = ("enable-qk-norm-rope-fusion", "fuse-rope-kvcache", "fuse-attn-quant",
          "fuse-norm-quant", "fuse-act-quant")


def build_steps(args) -> dict[str, tuple]:
    """(step name, num_tokens) -> (built model, its inputs at num_tokens)."""
    from irfuse import models

    size = "tiny" if args.tiny else "llama-8b"
    common = dict(size=size, device=args.device, num_layers=args.layers, qk_norm=True,
                  quant="fp8", block_size=args.block_size)
    blocks = -(-(args.context + 1) // args.block_size)
    steps = {}
    if args.batch:
        decode = models.build("paged", num_tokens=args.batch, context_len=args.context,
                              max_blocks_per_seq=blocks, **common)
        steps[f"decode b{args.batch} ctx{args.context}"] = (decode, args.batch)
    if args.prefill:
        prefill = models.build("paged-prefill", num_tokens=min(args.prefill, 128), **common)
        steps[f"prefill {args.prefill}"] = (prefill, args.prefill)
    return steps


def _kernel_table_cpu(compiled, inputs, title: str, runs: int = 3) -> str:
    """The CPU ops of one forward, by self time (the smoke path's stand-in for kernels)."""
    from torch.profiler import ProfilerActivity, profile

    compiled(*inputs)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(runs):
            compiled(*inputs)
    ops = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in ops) / runs
    lines = [f"CPU ops of {title}: {total:.1f} us per forward"]
    for e in ops[:15]:
        lines.append(f"  {e.self_cpu_time_total / runs:9.1f} us  {e.count / runs:5.1f}x  "
                     f"{e.key[:100]}")
    return "\n".join(lines)


def _interleaved_cpu(fns: dict, rounds: int) -> dict[str, list[float]]:
    """µs per call of each function, one figure per round, the functions taking turns."""
    for fn in fns.values():  # each compile's cache entry is back (a reset drops them)
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e6)
    return times


def run_step(step: str, built, num_tokens: int, variants: list[str], args
             ) -> tuple[dict[str, list[float]], dict[str, torch.Tensor], dict[str, str],
                        dict[str, float], list[str]]:
    """Compile, check and time every variant on one step; returns times, outputs, fused
    counts, compile seconds and the kernel tables."""
    from irfuse import backend

    cuda = args.device == "cuda"
    runners, outputs, fused, compile_s, tables = {}, {}, {}, {}, []
    for name in variants:
        backend.clear_reports()
        kind = "inductor" if name == "inductor" else "irfuse"
        compiled = e2e._compile(built.model, kind, VARIANTS.get(name))
        inputs = built.make_inputs(num_tokens)
        built.mark_dynamic(inputs)
        start = time.perf_counter()
        with torch.no_grad():
            outputs[name] = compiled(*inputs).float()  # compiles, on fresh caches
        if cuda:
            torch.cuda.synchronize()
        compile_s[name] = time.perf_counter() - start
        if kind == "irfuse":
            fused[name] = "; ".join(
                f"range {r.range}: " + ", ".join(f"{p.name} {p.count}" for p in r.passes
                                                 if p.count)
                for r in backend.reports())
        with torch.no_grad():
            if args.profile:
                tables.append((e2e._kernel_table if cuda else _kernel_table_cpu)(
                    compiled, inputs, f"{name}, {step}"))
            if cuda:
                runners[name] = e2e._capture(lambda c=compiled, i=inputs: c(*i))
            else:
                runners[name] = lambda c=compiled, i=inputs: c(*i)
    with torch.no_grad():
        if cuda:
            times = e2e._interleaved(runners, args.rounds)
        else:
            times = _interleaved_cpu(runners, args.rounds)
    return times, outputs, fused, compile_s, tables


def _rows(step: str, times, outputs, variants: list[str]) -> list[str]:
    ind = times["inductor"]
    med = e2e._median
    rows = []
    for name in variants:
        if name == "inductor":
            continue
        irf = times[name]
        ratios = sorted(b / a for a, b in zip(ind, irf, strict=True))
        ref, out = outputs["inductor"], outputs[name]
        diff = ((out - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
        rows.append(
            f"| {step} | {name} | {med(ind):.1f} ({min(ind):.1f}-{max(ind):.1f}) | "
            f"{med(irf):.1f} ({min(irf):.1f}-{max(irf):.1f}) | {med(ind) / med(irf):.3f} | "
            f"{1 / med(ratios):.3f} ({1 / ratios[-1]:.3f}-{1 / ratios[0]:.3f}) | "
            f"{sum(r < 1.0 for r in ratios)} of {len(ratios)} | {diff:.1e} |")
    return rows


def _isolate_child(args) -> int:
    """One (variant, IRFUSE_PDL) of `--isolate`: the decode step compiled, run, captured alone,
    replayed `--rounds` times with a synchronize after each; prints one result line."""
    name = args.isolate_one
    ((step, (built, num_tokens)),) = build_steps(args).items()
    kind = "inductor" if name == "inductor" else "irfuse"
    compiled = e2e._compile(built.model, kind, VARIANTS.get(name))
    inputs = built.make_inputs(num_tokens)
    built.mark_dynamic(inputs)
    stage = "plain launch"
    try:
        with torch.no_grad():
            want = compiled(*inputs).float()
            if args.device == "cuda":
                torch.cuda.synchronize()
                stage = "capture"
                graph = e2e._capture(lambda: compiled(*inputs))
                out = graph.kept[1]
                for i in range(args.rounds):
                    stage = f"replay {i}"
                    graph.replay()
                    torch.cuda.synchronize()
            else:
                out = compiled(*inputs)
        diff = ((out.float() - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()
    except Exception as err:  # noqa: BLE001 (reported: the parent prints one line)
        last = (str(err).strip().splitlines() or [""])[0][:160]
        print(f"RESULT FAILED at {stage}: {type(err).__name__}: {last}", flush=True)
        return 1
    print(f"RESULT ok ({step}, {args.rounds} replays, max rel. diff to a plain launch "
          f"{diff:.1e})", flush=True)
    return 0


def _isolate(args, variants: list[str], argv: list[str]) -> int:
    """`--isolate`: each (variant, IRFUSE_PDL) in a child process; one line each."""
    keep = [a for a in argv if a not in ("--isolate", "--profile")]
    lines, failed = [], 0
    for name in variants:
        for pdl in (("",) if name == "inductor" else ("", "0")):
            env = {**os.environ, "IRFUSE_PDL": pdl}
            if not pdl:
                env.pop("IRFUSE_PDL")
            cmd = [sys.executable, os.path.abspath(__file__), *keep, "--prefill", "0",
                   "--isolate-one", name]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            result = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if result:
                text = result[-1][len("RESULT "):]
            else:
                tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1][:160]
                text = f"FAILED (exit {proc.returncode}): {tail}"
            failed += not text.startswith("ok")
            label = "PDL=0" if pdl else "PDL default"
            lines.append(f"isolate {name:10s} {label:11s} {text}")
            print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"Command: `python {' '.join(sys.argv)}`\n\n" + "\n".join(lines) + "\n")
    return 1 if failed else 0


def _text(head: list[str], rows: list[str], notes: list[str], tables: list[str]) -> str:
    text = "\n".join(head + rows + ["", *notes])
    if tables:
        text += "\n\nKernel profiles (one forward, plain launches):\n\n```\n" + \
            "\n\n".join(tables) + "\n```"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16, help="decode sequences (0: no decode)")
    parser.add_argument("--context", type=int, default=2048, help="decode: tokens cached")
    parser.add_argument("--prefill", type=int, default=4096, help="prefill tokens (0: none)")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=["irfuse"])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds")
    parser.add_argument("--profile", action="store_true", help="list each variant's kernels")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true",
                        help="the tiny model size (CPU smoke runs)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--isolate", action="store_true",
                        help="decode only: capture and replay each variant alone, with and "
                             "without PDL, each in a child process; ok/FAILED per line")
    parser.add_argument("--isolate-one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_e2e_qwen3: no CUDA GPU (use --device cpu --tiny for a smoke run)",
              file=sys.stderr)
        return 1
    variants = ["inductor", *args.variants]
    if args.isolate_one:
        return _isolate_child(args)
    if args.isolate:
        return _isolate(args, variants, list(sys.argv[1:] if argv is None else argv))
    device = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    replay = "CUDA-graph replay" if args.device == "cuda" else "plain calls (no CUDA graphs)"
    lines = [
        f"Qwen3-8B-shaped FP8 step ({'tiny' if args.tiny else 'hidden 4096, 32 q / 8 kv heads'}"
        f"), {args.layers} layers, q/k norms, static FP8 linears, paged KV cache (block "
        f"{args.block_size}), bf16 activations, {replay}, {device}, torch {torch.__version__}",
        "",
        f"irfuse: O2 + {', '.join(ATTENTION_FAMILY)}; irfuse-o2: O2 alone. {args.rounds} "
        "interleaved rounds; median µs per forward (min-max over the rounds); speed-up = "
        "Inductor / irfuse (above 1: irfuse faster).",
        "",
        "| step | variant | Inductor (us) | irfuse (us) | speed-up | per-round speed-up: "
        "median (min-max) | rounds irfuse faster | max rel. diff |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes, tables, rows = [], [], []
    for step, (built, num_tokens) in build_steps(args).items():
        times, outputs, fused, compile_s, step_tables = run_step(step, built, num_tokens,
                                                                 variants, args)
        step_rows = _rows(step, times, outputs, variants)
        rows += step_rows
        tables += step_tables
        notes.append(f"- {step}: compile + first run " + ", ".join(
            f"{n} {s:.0f} s" for n, s in compile_s.items()) + "; fused: " + " | ".join(
            f"{n}: {f or '-'}" for n, f in fused.items()))
        print("\n".join(step_rows), flush=True)
        if args.out:  # after every step: a crash in a later step keeps this one's figures
            with open(args.out, "w") as f:
                f.write(f"Command: `python {' '.join(sys.argv)}`\n\n"
                        f"{_text(lines, rows, notes, tables)}\n")
        del built, outputs
        if args.device == "cuda":
            torch.cuda.empty_cache()
    if tables:
        print("Kernel profiles (one forward, plain launches):\n\n" + "\n\n".join(tables))
    print(_text(lines, rows, notes, []), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
