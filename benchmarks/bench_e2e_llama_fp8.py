"""A Llama-3-8B-shaped FP8 stack: irfuse at O2 (norm/act + quant fusions) against plain
torch.compile (Inductor), side by side in one run, for decode (T=16) and prefill (T=4096).

The model is irfuse's built-in `llama-fp8` at the `llama-8b` size (hidden 4096, 32 heads / 8 kv
heads, intermediate 14336, static FP8 linears through `torch._scaled_mm`) with a few layers.
Both compiles mark num_tokens dynamic, as a serving engine does. Each (variant, num_tokens) is
captured once as a CUDA graph, which is how engines run decode; the graphs are then replayed in
interleaved rounds (A, B, A, B, ...), so drift of the GPU's clocks falls on both alike, and each
figure is the median over the rounds (the spread is printed: differences below it are noise;
so is the number of rounds in which irfuse was faster, a sign test's count).

    python benchmarks/bench_e2e_llama_fp8.py [--layers 4] [--tokens 16 4096] [--out FILE.md]
        [--profile] [--pdl]

`--profile` also lists, per variant and num_tokens, the GPU kernels of one forward (torch
profiler over plain launches): where the two compiles differ, kernel by kernel. `--pdl` also
runs irfuse with programmatic dependent launch off in every kernel (`IRFUSE_PDL=0` while that
variant compiles and is captured; the other runs with it unset: each launch shape's own `pdl`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

import torch


def _compile(model: torch.nn.Module, backend: str, options: dict | None):
    torch._dynamo.reset()
    if backend == "inductor":
        return torch.compile(model)
    return torch.compile(model, backend="irfuse", options=options)


def _kernel_table(compiled, inputs, title: str, runs: int = 10) -> str:
    """The GPU kernels of one forward, by total time (µs per forward, calls per forward)."""
    from torch.profiler import ProfilerActivity, profile

    compiled(*inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            compiled(*inputs)
        torch.cuda.synchronize()
    kernels = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels.sort(key=lambda e: -e.device_time_total)
    total = sum(e.device_time_total for e in kernels) / runs
    lines = [f"kernels of {title}: {total:.1f} us per forward"]
    for e in kernels[:25]:
        lines.append(f"  {e.device_time_total / runs:9.1f} us  {e.count / runs:5.1f}x  "
                     f"{e.key[:100]}")
    return "\n".join(lines)


def _capture(fn) -> torch.cuda.CUDAGraph:
    """`fn` captured as a CUDA graph (after warm-up launches on a side stream).

    The graph keeps `fn` (and so the inputs its closure holds) and the captured output alive
    (`graph.kept`): a replay reads and writes the addresses the capture saw, so inputs freed
    after the capture would hand their memory to other tensors, and a replay would then read
    garbage (block tables and slot mappings as indices: an illegal memory access)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    torch.cuda.synchronize()
    graph.kept = (fn, out)
    return graph


def _interleaved(graphs: dict[str, torch.cuda.CUDAGraph], rounds: int,
                 ms_per_round: float = 25.0) -> dict[str, list[float]]:
    """µs per replay of each graph, one figure per round, the graphs taking turns."""
    reps = {}
    for name, graph in graphs.items():  # replays per round: about `ms_per_round` of work
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(3):
            graph.replay()
        end.record()
        end.synchronize()
        reps[name] = max(3, int(ms_per_round / (begin.elapsed_time(end) / 3)))
    times: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(rounds):
        for name, graph in graphs.items():
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(reps[name]):
                graph.replay()
            end.record()
            end.synchronize()
            times[name].append(begin.elapsed_time(end) * 1e3 / reps[name])
    return times


@contextlib.contextmanager
def _environ(env: dict[str, str]):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--tokens", type=int, nargs="+", default=[16, 4096])
    parser.add_argument("--out", default=None)
    parser.add_argument("--profile", action="store_true", help="list each variant's kernels")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds")
    parser.add_argument("--pdl", action="store_true",
                        help="also irfuse without programmatic dependent launch")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_e2e_llama_fp8: needs a CUDA GPU", file=sys.stderr)
        return 1

    from irfuse import models

    built = models.build("llama-fp8", size="llama-8b", device="cuda", num_layers=args.layers)
    model = built.model
    o2 = {"optimization_level": 2}
    variants = {"inductor": ("inductor", None, {}),
                "irfuse O2": ("irfuse", o2, {"IRFUSE_PDL": ""})}  # "": each config's own
    if args.pdl:
        variants["irfuse O2, no PDL"] = ("irfuse", o2, {"IRFUSE_PDL": "0"})
    graphs: dict[str, dict[int, torch.cuda.CUDAGraph]] = {}
    compile_s: dict[str, float] = {}
    fused: dict[str, str] = {}
    outputs: dict[str, dict[int, torch.Tensor]] = {}
    for name, (kind, options, env) in variants.items():
        with _environ(env):
            _build_variant(name, kind, options, model, built, args, graphs, outputs,
                           compile_s, fused)
    results = {t: _interleaved({n: graphs[n][t] for n in variants}, args.rounds)
               for t in args.tokens}
    text = _table(args, variants, results, outputs, compile_s, fused)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"Command: `python {' '.join(sys.argv)}`\n\n{text}\n")
    return 0


def _build_variant(name, kind, options, model, built, args, graphs, outputs, compile_s,
                   fused) -> None:
    """Compile one variant, run each num_tokens once (its output kept), capture each."""
    from irfuse import backend

    backend.clear_reports()
    compiled = _compile(model, kind, options)
    graphs[name], outputs[name] = {}, {}
    start = time.perf_counter()
    for t in args.tokens:
        inputs = built.make_inputs(t)
        built.mark_dynamic(inputs)
        with torch.no_grad():
            outputs[name][t] = compiled(*inputs).float()  # compiles this range
    torch.cuda.synchronize()
    compile_s[name] = time.perf_counter() - start
    for t in args.tokens:
        inputs = built.make_inputs(t)
        with torch.no_grad():
            if args.profile:
                print(_kernel_table(compiled, inputs, f"{name}, num_tokens {t}"), flush=True)
            graphs[name][t] = _capture(lambda c=compiled, i=inputs: c(*i))
    if kind == "irfuse":
        fused[name] = "; ".join(
            f"range {r.range}: " + ", ".join(f"{p.name} {p.count}" for p in r.passes if p.count)
            for r in backend.reports()
        )


def _table(args, variants, results, outputs, compile_s, fused) -> str:
    """The results: one row per (num_tokens, irfuse variant), each against Inductor."""
    lines = [
        f"Llama-3-8B-shaped FP8 stack, {args.layers} layers, bf16 activations, CUDA-graph "
        f"replay, {torch.cuda.get_device_name()}, torch {torch.__version__}",
        "",
        f"({args.rounds} interleaved rounds; median µs per forward, min-max over the rounds)",
        "",
        "| num_tokens | variant | Inductor (us) | irfuse (us) | irfuse / Inductor | per-round "
        "ratio: median (min-max) | rounds irfuse faster | max rel. diff |",
        "|---|---|---|---|---|---|---|---|",
    ]
    mine = [n for n in variants if n != "inductor"]
    for t in args.tokens:
        ind = results[t]["inductor"]
        for name in mine:
            irf = results[t][name]
            ratios = sorted(b / a for a, b in zip(ind, irf, strict=True))
            ref, out = outputs["inductor"][t], outputs[name][t]
            diff = ((out - ref).abs().max() / ref.abs().max()).item()
            lines.append(f"| {t} | {name} | {_median(ind):.1f} ({min(ind):.1f}-{max(ind):.1f}) "
                         f"| {_median(irf):.1f} ({min(irf):.1f}-{max(irf):.1f}) | "
                         f"{_median(irf) / _median(ind):.3f} | {_median(ratios):.3f} "
                         f"({ratios[0]:.3f}-{ratios[-1]:.3f}) | "
                         f"{sum(r < 1.0 for r in ratios)} of {len(ratios)} | {diff:.1e} |")
    lines += [
        "",
        "Compile + first runs: " + ", ".join(f"{n} {compile_s[n]:.0f} s" for n in variants)
        + ". Fused by irfuse: " + (fused.get(mine[0], "-") if mine else "-") + ".",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
