"""`irfuse`: the command line.

    irfuse demo [--model M] [--size S] [--tokens T] [--dump-dir D] [--no-inductor] [vLLM flags]
    irfuse passes [--platform P] [--scheme S] [--markdown | --json]
    irfuse config [vLLM flags: -O2 -cc.pass_config.fuse_norm_quant=False ...] [--platform P]
    irfuse report PATH            (a report.json, or a dump folder: every report under it)

`irfuse-opt` (irfuse/opt.py) is the IR optimizer driver.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time
from collections.abc import Sequence

from irfuse.remarks import Remark
from irfuse.report import PassRecord, Report, StageRecord


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"demo": demo_main, "passes": _passes, "config": _config, "report": report_main}
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        print(__doc__.strip())
        if argv and argv[0] not in ("-h", "--help"):
            print(f"\nirfuse: unknown command '{argv[0]}'", file=sys.stderr)
            return 2
        return 0
    from irfuse.config import ConfigError

    try:
        return commands[argv[0]](argv[1:])
    except ConfigError as e:  # a bad flag or value: say which, no traceback
        print(f"irfuse {argv[0]}: {e}", file=sys.stderr)
        return 2


def _passes(argv: Sequence[str]) -> int:
    from irfuse.cli_config import passes_main

    return passes_main(list(argv))


def _config(argv: Sequence[str]) -> int:
    from irfuse.cli_config import config_main

    return config_main(list(argv))


# --- report -----------------------------------------------------------------------------------


def load_report(data: dict) -> Report:
    """A Report from its JSON form (the inverse of Report.to_dict)."""

    def records(items: list[dict], count: str, missed: str) -> list[PassRecord]:
        return [
            PassRecord(p["name"], p[count], [Remark(**r) for r in p[missed]], p["ms"])
            for p in items
        ]

    return Report(
        graph=data["graph"],
        range=data["range"],
        platform=data["platform"],
        config=data["config"],
        raised=data["raised"],
        raise_passes=records(data.get("raise", []), "raised", "not_raised"),
        passes=records(data["passes"], "fused", "not_fused"),
        stages=[StageRecord(**s) for s in data["stages"]],
        error=data.get("error"),
    )


def report_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="irfuse report", description="print compile reports")
    parser.add_argument("path", help="a report.json or a dump folder")
    args = parser.parse_args(argv)
    path = pathlib.Path(args.path)
    files = sorted(path.rglob("report.json")) if path.is_dir() else [path]
    if not files:
        print(f"irfuse report: no report.json under {path}", file=sys.stderr)
        return 1
    for file in files:
        try:
            report = load_report(json.loads(file.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as err:
            print(f"irfuse report: {file}: not a compile report ({err})", file=sys.stderr)
            return 1
        print(f"{file}:\n{report.format_table()}\n")
    return 0


# --- demo -------------------------------------------------------------------------------------


def demo_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="irfuse demo",
        description="compile a built-in FP8 Llama-style model with irfuse, check it against "
        "eager and print the report",
    )
    parser.add_argument("--model", default="llama-fp8", help="a built-in model (irfuse.models)")
    parser.add_argument("--size", default=None, help="tiny, small (CPU default), llama-8b (GPU)")
    parser.add_argument("--layers", type=int, default=None, help="override the layer count")
    parser.add_argument("--tokens", type=int, default=None, help="num_tokens of the input")
    parser.add_argument("--dump-dir", default=None, help="where the stage dumps go")
    parser.add_argument("--no-inductor", action="store_true", help="run the emitted graph as is")
    args, rest = parser.parse_known_args(argv)

    import torch

    from irfuse import backend, models
    from irfuse.config import CompilationConfig

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
    device = "cuda" if cuda else "cpu"
    built = models.build(args.model, size=size, device=device, **overrides)
    inputs = built.example_inputs
    if args.tokens is not None:
        inputs = built.make_inputs(args.tokens)
    dump_dir = args.dump_dir or config.dump_dir or tempfile.mkdtemp(prefix="irfuse-demo-")
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
    print(f"dumps: {dump_dir}  (irfuse report {dump_dir})")
    return 0 if error <= tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
