"""Write the Triton code Inductor generates for a benchmarked op's unfused torch code.

The kernel benchmark compares irfuse's kernels with Inductor's code for the same pattern; this
shows what that code is (launch configs, loop structure, load order, cache hints), so that a gap
can be read rather than guessed. One file per (op, H, T), static shapes as in the benchmark:

    PYTHONPATH=. python3 benchmarks/inductor_code.py --ops add_rms_static --hidden 4096 \
        --tokens 4096 --out-dir /tmp/inductor-code
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_norm_act_quant as bench  # noqa: E402 (the op specs live beside this script)


def generated_code(name: str, h: int, t: int) -> str:
    """Inductor's generated module (kernels and their launch) for one op and size."""
    from torch._inductor.utils import run_and_get_code

    spec = bench.op_specs()[name]
    width = bench.INTERMEDIATE[h] if spec.act else h
    d = spec.make(t, width)
    torch._dynamo.reset()
    _, sources = run_and_get_code(torch.compile(spec.eager, dynamic=False), d)
    return "\n\n# ---- next module ----\n\n".join(sources)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", required=True, help="comma-separated: " + ", ".join(bench.op_specs()))
    p.add_argument("--hidden", default="4096")
    p.add_argument("--tokens", default="4096")
    p.add_argument("--out-dir", required=True)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    for name in args.ops.split(","):
        for h in map(int, args.hidden.split(",")):
            for t in map(int, args.tokens.split(",")):
                path = os.path.join(args.out_dir, f"inductor-{name}-H{h}-T{t}.py")
                with open(path, "w") as f:
                    f.write(generated_code(name, h, t))
                print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
