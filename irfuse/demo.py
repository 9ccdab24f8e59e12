"""`irfuse demo`: compile a built-in model with irfuse, check it against eager, print the report
and a table of the fused sites.

Imported by `irfuse.cli` for this command only (it loads torch, Dynamo and the models).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch

from irfuse import backend, models
from irfuse.cli_config import OneLineParser, positive_int
from irfuse.config import CompilationConfig
from irfuse.dump import dump_failed, run_folder_of
from irfuse.emit import kernel_choice
from irfuse.report import Report


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
        problem = _inputs_too_big(built, args.model, size, args.tokens)
        if problem:
            print(f"irfuse demo: {problem}", file=sys.stderr)
            return 2
        inputs = built.make_inputs(args.tokens)
    # No dump unless asked for (a temporary folder would be left behind by every run).
    dump_dir = args.dump_dir or config.dump_dir or os.environ.get("IRFUSE_DUMP_DIR")
    options = {**config.to_dict(), "dump_dir": dump_dir, "inductor": not args.no_inductor}
    tokens = inputs[0].shape[0]
    print(
        f"irfuse demo: {args.model} ({size}, {built.config.num_layers} layers, hidden "
        f"{built.config.hidden}) on {device}, num_tokens {tokens}, "
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
    reports = backend.reports()
    for report in reports:
        print()
        print(report.format_table())
    print(f"\nfirst call (compile + run): {compile_s:.1f} s")
    verdict = "OK" if error <= tolerance else "MISMATCH"
    print("accuracy, as the relative RMS difference from eager PyTorch:")
    if baseline is not None:
        print(f"  plain torch.compile (Inductor, no irfuse): {baseline:.2e}  (how far Inductor's "
              "own kernels, which round bf16 differently, move the output: the yardstick)")
    what = ("irfuse's fused kernels, the rest compiled by Inductor" if baseline is not None
            else "irfuse's fused kernels, the rest run as emitted")
    print(f"  irfuse: {error:.2e}, tolerance {tolerance:.1e}: {verdict}  ({what}; on the CPU "
          "the fused kernels give eager's bits, so any difference is the rest's)")
    print()
    print(sites_table(reports, tokens, cuda))
    print()
    print(_dumps_line(dump_dir))
    return 0 if error <= tolerance else 1


# The measured-speed column reads the kernel-choice data, the GPU class the demo quotes.
MEASURED_PLATFORM = "cuda:sm90"
_CARDS = re.compile(r"\b(H100|H200|B200|GB200|A100|L40S?|L4|MI300X?|MI325X|MI355X)\b")
_NUMBERS = r"(\d+(?:\.\d+)?)x?(?:\s*(?:-|/)\s*(\d+(?:\.\d+)?))?x"
_TIME = re.compile(_NUMBERS + r" (?:Inductor's|the unfused \w+'s) time")
_SPEEDUP = re.compile(_NUMBERS + r" (?:the unfused|Inductor's code|Inductor at)")


def measured_speedup(reason: str) -> str:
    """A kernel choice's measurement as how many times as fast as the code it replaces
    ("1.27-1.75x as fast"; a record of time ratios is inverted), with the card it was measured
    on where the record names one; "not measured" where it has no measurement of its own."""
    card = _CARDS.search(reason)
    on = f" ({card.group(1)})" if card else " (card not recorded)"
    if "not measured alone" in reason:
        return "not measured alone (its residual form is)"
    if "not measured" in reason:
        return "not measured"
    if (m := _TIME.search(reason)) is not None:
        values = sorted(1 / float(v) for v in m.groups() if v is not None)
    elif (m := _SPEEDUP.search(reason)) is not None:
        values = sorted(float(v) for v in m.groups() if v is not None)
    else:
        return "not measured"
    if values[0] == values[-1]:
        return f"{values[0]:.2f}x as fast{on}"
    return f"{values[0]:.2f}-{values[-1]:.2f}x as fast{on}"


def sites_table(reports: Sequence[Report], tokens: int, cuda: bool) -> str:
    """The fused sites of the compiled graphs, one line per kernel: how many sites, the
    implementation that ran here, the one kernel choice takes on the GPU (`MEASURED_PLATFORM`)
    at this many tokens, and its measured speed against the unfused code there."""
    sites: dict[str, list] = {}
    for report in reports:
        for k in report.kernels:
            entry = sites.setdefault(k.op, [0, k.impl])
            entry[0] += k.calls
    if not sites:
        return "fused sites: none"
    head = (f"fused sites (speed: measured on a GPU against the unfused code, from irfuse's "
            f"kernel-choice data for {MEASURED_PLATFORM} at {tokens} tokens)")
    rows = [("kernel", "sites", "ran here", f"on {MEASURED_PLATFORM}", "measured speed")]
    for op, (calls, impl) in sites.items():
        try:
            choice = kernel_choice.choose(op, MEASURED_PLATFORM, tokens)
        except KeyError:
            rows.append((op, str(calls), impl, "?", "not measured"))
            continue
        speed = ("left to Inductor there: " + measured_speedup(choice.reason)
                 if choice.impl == "inductor" else measured_speedup(choice.reason))
        rows.append((op, str(calls), impl, choice.impl, speed))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [head]
    for r in rows:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True))
                     + "  " + r[4])
    if not cuda:
        lines.append("  (on the CPU the torch reference runs, exact but not fast: the speed is "
                     "the GPU kernel's)")
    return "\n".join(lines)


def _dumps_line(dump_dir: str | None) -> str:
    """Where the stage dumps went, or why there are none."""
    if not dump_dir:
        return "dumps: none written (--dump-dir D writes every stage)"
    if dump_failed(dump_dir):
        return (f"dumps: none complete: {dump_dir} could not be written (the warning above "
                "says why)")
    folder = run_folder_of(dump_dir) or dump_dir
    return f"dumps: {folder}  (irfuse report {dump_dir})"


def _inputs_too_big(built: Any, model: str, size: str, tokens: int) -> str | None:
    """Why the inputs of `tokens` tokens are too big for the demo, or None: their size grows
    with the token count (a paged model's caches hold every sequence's pages), estimated from
    one and two tokens' inputs, against `DEMO_INPUT_BYTES`."""
    one, two = (sum(t.numel() * t.element_size() for t in built.make_inputs(n)) for n in (1, 2))
    per_token = max(two - one, 1)
    need = one + per_token * (tokens - 1)
    if need <= DEMO_INPUT_BYTES:
        return None
    most = 1 + (DEMO_INPUT_BYTES - one) // per_token
    return (f"--tokens {tokens}: the inputs of {model} ({size}) would take {need / 2**30:.1f} "
            f"GiB; the demo takes up to {most} tokens ({DEMO_INPUT_BYTES // 2**30} GiB of "
            "inputs)")


DEMO_INPUT_BYTES = 1 << 30
"""The most the demo's inputs may take: a paged model's caches grow with every sequence."""


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

