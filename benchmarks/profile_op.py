"""Run one benchmarked op a few times on the GPU, for a profiler to capture (Nsight Compute).

The op, its inputs and its kernels are those of `bench_norm_act_quant.py`: irfuse's kernel with
its default launch shape (or that shape with `--config` fields replaced) and, with `--inductor`,
the unfused code under `torch.compile`. Each runs once (compiling it), then `--iters` times, so
a profiler filtering on kernel names skips the first launch (`ncu --launch-skip 1`).

    ncu --clock-control none --set full -k regex:_norm_group --launch-skip 1 --launch-count 1 \\
        python3 benchmarks/profile_op.py --op add_rms_group128 --tokens 4096 --hidden 4096
    python3 benchmarks/profile_op.py --op add_rms_static --tokens 4096 --config num_warps=8,vec=0
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench_norm_act_quant as bench  # noqa: E402 (the benchmark's op table, by path)


def parse_fields(text: str, cfg: object) -> object:
    """`cfg` with the comma-separated `field=value` items of `text` replaced (ints, booleans)."""
    if not text:
        return cfg
    names = {f.name: f.type for f in dataclasses.fields(cfg)}
    changes = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or key not in names:
            raise SystemExit(f"--config: {item!r} is not field=value with a field of "
                             f"{type(cfg).__name__} ({', '.join(names)})")
        current = getattr(cfg, key)
        if isinstance(current, bool):
            if value not in ("True", "False", "1", "0"):
                raise SystemExit(f"--config: {key} takes True/False, not {value!r}")
            changes[key] = value in ("True", "1")
        else:
            changes[key] = type(current)(value)
    return dataclasses.replace(cfg, **changes)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", required=True, choices=sorted(bench.op_specs()))
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=4096, choices=sorted(bench.INTERMEDIATE),
                   help="hidden size (the SiLU·Mul ops take its intermediate size)")
    p.add_argument("--config", default="", help="fields of irfuse's default config to replace")
    p.add_argument("--inductor", action="store_true", help="also run Inductor's code")
    p.add_argument("--iters", type=int, default=3, help="launches of each after the first")
    args = p.parse_args(argv)
    spec = bench.op_specs()[args.op]
    width = bench.INTERMEDIATE[args.hidden] if spec.act else args.hidden
    d = spec.make(args.tokens, width)
    cfg = parse_fields(args.config, spec.default(args.tokens, width))
    print(f"{spec.label}, T {args.tokens}, width {width}: {bench._cfg_str(cfg)}", flush=True)
    runs = {"irfuse": lambda: spec.kernel(d, cfg)}
    if args.inductor:
        compiled = torch.compile(spec.eager, dynamic=False)
        runs["inductor"] = lambda: compiled(d)
    sync = torch.cuda.synchronize if bench.DEVICE == "cuda" else (lambda: None)
    for fn in runs.values():  # compile, then the launches a profiler keeps
        fn()
    sync()
    for name, fn in runs.items():
        for _ in range(args.iters):
            fn()
        sync()
        print(f"ran {name} {args.iters} times", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
