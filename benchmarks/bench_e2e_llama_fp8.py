"""A Llama-3-8B-shaped FP8 stack: irfuse at O2 (norm/act + quant fusions) against plain
torch.compile (Inductor), side by side in one run, for decode (T=16) and prefill (T=4096).

The model is irfuse's built-in `llama-fp8` at the `llama-8b` size (hidden 4096, 32 heads / 8 kv
heads, intermediate 14336, static FP8 linears through `torch._scaled_mm`) with a few layers.
Both compiles mark num_tokens dynamic, as a serving engine does; each is timed by CUDA-graph
replay (`triton.testing.do_bench_cudagraph`), which is how engines run decode.

    python benchmarks/bench_e2e_llama_fp8.py [--layers 4] [--tokens 16 4096] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import sys
import time

import torch


def _compile(model: torch.nn.Module, backend: str, options: dict | None):
    torch._dynamo.reset()
    if backend == "inductor":
        return torch.compile(model)
    return torch.compile(model, backend="irfuse", options=options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--tokens", type=int, nargs="+", default=[16, 4096])
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_e2e_llama_fp8: needs a CUDA GPU", file=sys.stderr)
        return 1

    from triton.testing import do_bench_cudagraph

    from irfuse import backend, models

    built = models.build("llama-fp8", size="llama-8b", device="cuda", num_layers=args.layers)
    model = built.model
    variants = {
        "inductor": ("inductor", None),
        "irfuse O2": ("irfuse", {"optimization_level": 2}),
    }
    results: dict[str, dict[int, float]] = {}
    compile_s: dict[str, float] = {}
    fused: dict[str, str] = {}
    outputs: dict[str, dict[int, torch.Tensor]] = {}
    for name, (kind, options) in variants.items():
        backend.clear_reports()
        compiled = _compile(model, kind, options)
        results[name], outputs[name] = {}, {}
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
                results[name][t] = do_bench_cudagraph(lambda c=compiled, i=inputs: c(*i)) * 1e3
        if kind == "irfuse":
            fused[name] = "; ".join(
                f"range {r.range}: "
                + ", ".join(f"{p.name} {p.count}" for p in r.passes if p.count)
                for r in backend.reports()
            )

    lines = [
        f"Llama-3-8B-shaped FP8 stack, {args.layers} layers, bf16 activations, CUDA-graph "
        f"replay, {torch.cuda.get_device_name()}, torch {torch.__version__}",
        "",
        "| num_tokens | Inductor (us) | irfuse O2 (us) | irfuse / Inductor | max rel. diff |",
        "|---|---|---|---|---|",
    ]
    for t in args.tokens:
        ind, irf = results["inductor"][t], results["irfuse O2"][t]
        ref, out = outputs["inductor"][t], outputs["irfuse O2"][t]
        diff = ((out - ref).abs().max() / ref.abs().max()).item()
        lines.append(f"| {t} | {ind:.1f} | {irf:.1f} | {irf / ind:.3f} | {diff:.1e} |")
    lines += [
        "",
        f"Compile + first runs: Inductor {compile_s['inductor']:.0f} s, irfuse "
        f"{compile_s['irfuse O2']:.0f} s. Fused by irfuse: {fused.get('irfuse O2', '-')}.",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"Command: `python {' '.join(sys.argv)}`\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
