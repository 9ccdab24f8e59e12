"""`irfuse demo`: compile a built-in model with irfuse, check it against eager, print the report.

Imported by `irfuse.cli` for this command only (it loads torch, Dynamo and the models).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence

import torch

from irfuse import backend, models
from irfuse.cli_config import OneLineParser, positive_int
from irfuse.config import CompilationConfig


def main(argv: Sequence[str]) -> int:
    parser = OneLineParser(
        prog="irfuse demo",
        description="compile a built-in FP8 Llama-style model with irfuse, check it against "
        "eager and print the report",
    )
    parser.add_argument("--model", default="llama-fp8", help="a built-in model (irfuse.models)")
    parser.add_argument("--size", default=None, help="tiny, small (CPU default), llama-8b (GPU)")
    parser.add_argument("--layers", type=positive_int, default=None,
                        help="override the layer count")
    parser.add_argument("--tokens", type=positive_int, default=None,
                        help="num_tokens of the input (up to the model's max_positions)")
    parser.add_argument("--dump-dir", default=None,
                        help="where the stage dumps go (default: none are written)")
    parser.add_argument("--no-inductor", action="store_true", help="run the emitted graph as is")
    args, rest = parser.parse_known_args(argv)
    config = CompilationConfig.from_cli(rest)
    if args.model not in models.MODELS:
        print(f"irfuse demo: unknown model {args.model!r}; known: "
              f"{', '.join(sorted(models.MODELS))}", file=sys.stderr)
        return 2
    cuda = torch.cuda.is_available()
    size = args.size or ("llama-8b" if cuda else "small")
    overrides = {}
    if args.layers is not None:
        overrides["num_layers"] = args.layers
    elif size == "llama-8b":
        overrides["num_layers"] = 4
    problem = _demo_problem(args.model, size, args.tokens, overrides)
    if problem:
        print(f"irfuse demo: {problem}", file=sys.stderr)
        return 2
    device = "cuda" if cuda else "cpu"
    try:
        built = models.build(args.model, size=size, device=device, **overrides)
    except (models.CustomOpsUnavailable, RuntimeError, ValueError) as err:
        print(f"irfuse demo: cannot build {args.model!r}: {err}", file=sys.stderr)
        return 2
    inputs = built.example_inputs
    if args.tokens is not None:
        inputs = built.make_inputs(args.tokens)
    # No dump unless asked for (a temporary folder would be left behind by every run).
    dump_dir = args.dump_dir or config.dump_dir or os.environ.get("IRFUSE_DUMP_DIR")
    options = {**config.to_dict(), "dump_dir": dump_dir, "inductor": not args.no_inductor}
    print(
        f"irfuse demo: {args.model} ({size}, {built.config.num_layers} layers, hidden "
        f"{built.config.hidden}) on {device}, num_tokens {inputs[0].shape[0]}, "
        f"O{config.optimization_level}, Inductor {'off' if args.no_inductor else 'on'}"
    )
    backend.clear_reports()
    torch._dynamo.reset()
    compiled = torch.compile(built.model, backend="irfuse", options=options)
    with torch.no_grad():
        start = time.perf_counter()
        out = compiled(*[t.clone() for t in inputs])
        compile_s = time.perf_counter() - start
        ref = built.model(*[t.clone() for t in inputs])
    def rel_rms(a: torch.Tensor, b: torch.Tensor) -> float:
        return ((a.float() - b.float()).norm() / b.float().norm()).item()

    # The check: irfuse's output against eager's, by relative RMS error (an FP8 code that rounds
    # differently moves single logits by an FP8 step, so the largest difference says little).
    # With Inductor on, the rest of the graph is Inductor's code, which rounds differently from
    # eager by itself; the bound is then the larger of 2% and 1.5x plain torch.compile's error.
    error = rel_rms(out, ref)
    tolerance = 2e-2
    baseline = None
    if not args.no_inductor:
        torch._dynamo.reset()
        with torch.no_grad():
            plain = torch.compile(built.model)(*[t.clone() for t in inputs])
        baseline = rel_rms(plain, ref)
        tolerance = max(tolerance, 1.5 * baseline)
    for report in backend.reports():
        print()
        print(report.format_table())
    print(f"\nfirst call (compile + run): {compile_s:.1f} s")
    verdict = "OK" if error <= tolerance else "MISMATCH"
    if baseline is not None:
        print(f"|plain torch.compile - eager| / |eager| = {baseline:.2e} (RMS)")
    print(f"|irfuse - eager| / |eager| = {error:.2e} (RMS; tolerance {tolerance:.1e}): {verdict}")
    if dump_dir:
        print(f"dumps: {dump_dir}  (irfuse report {dump_dir})")
    else:
        print("dumps: none written (--dump-dir D writes every stage)")
    return 0 if error <= tolerance else 1


def _demo_problem(model: str, size: str, tokens: int | None, overrides: dict) -> str | None:
    """Why the demo cannot run a model at this size and token count, or None. The inputs are
    one sequence of `tokens` positions, which must fit the model's RoPE cache."""
    spec = models.MODELS[model]
    if size not in spec.sizes:
        return f"--size {size}: model {model!r} comes in {', '.join(spec.sizes)}"
    if spec.options.get("tp_collective"):
        return f"--model {model}: a tensor-parallel model needs a process group; the demo runs one"
    _, cfg, _ = models.resolve(model, size, **overrides)
    if tokens is not None and spec.family != "paged" and tokens > cfg.max_positions:
        return (f"--tokens {tokens}: {model} ({size}) has positions (its RoPE cache) up to "
                f"{cfg.max_positions}")
    return None
