"""`irfuse config` (the resolved config as JSON) and `irfuse passes` (the support matrix).

`irfuse config [--platform P] [--tp N] [--hidden H] [--dtype D] [--scheme S] [--explain]
[vLLM flags...]` resolves vLLM-style flags (`-O2`, `-cc.pass_config.<flag>=False`,
`--compilation-config '{...}'`) for a platform and model facts and prints the result as JSON;
`--explain` adds why each flag has its value, the warnings, and the compile ranges with the
passes that run in each.

`irfuse passes [--markdown | --json] [--platform P [--scheme S]]` prints the support matrix:
every pass with its flag, what it fuses, its default level, range rule, platforms (with the
kernel backend), and quant schemes. `--markdown` gives the table
that docs/configuration.md (and the README) show.

`config_main(argv)` and `passes_main(argv)` return the exit status (2 on a bad argument).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import typing
from collections.abc import Sequence
from typing import Any

from irfuse import ranges, support_matrix
from irfuse.config import CompilationConfig, ConfigError, itemsize_of, resolve_explained
from irfuse.fusions.declare import RANGE_KINDS
from irfuse.platform import Platform, detect


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line naming the argument (no usage dump), status 2."""

    def error(self, message: str) -> typing.NoReturn:
        print(f"{self.prog}: error: {message} (--help for the arguments)", file=sys.stderr)
        raise SystemExit(2)


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (argparse names the argument in the error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is below 1")
    return value


# ---------------------------------------------------------------------------- irfuse config


def _config_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="irfuse config",
        allow_abbrev=False,
        description="Print the resolved compilation config as JSON.",
        epilog="Any other arguments are vLLM compilation flags: -O<level>, -O <level>, "
        "-O=<level>, --optimization-level <level>, -cc.<key>[.<key>]=<value>, "
        "-cc.<key>+=a,b, --compilation-config '<json>', -cc '<json>'.",
    )
    p.add_argument("--platform", help="cpu, cuda:smNN or rocm[:gfxNNN] (default: detected)")
    p.add_argument("--tp", type=positive_int, help="tensor-parallel size (default: unknown)")
    p.add_argument("--hidden", type=positive_int, help="hidden size of the model")
    p.add_argument("--dtype", default="bfloat16", help="model dtype (default: bfloat16)")
    p.add_argument("--scheme", choices=list(support_matrix.SCHEMES),
                   help="the model's quantization scheme (default: unknown)")
    p.add_argument("--flashinfer", action=argparse.BooleanOptionalAction, default=None,
                   help="resolve as if FlashInfer were (not) installed (default: look)")
    p.add_argument("--explain", action="store_true",
                   help="also print why each flag has its value, warnings and compile ranges")
    return p


def explain_ranges(resolution: Any) -> list[dict[str, Any]]:
    """The compile ranges of a resolution, each with the passes that run and those skipped."""
    cfg: CompilationConfig = resolution.config
    facts = resolution.facts
    hidden, tp, itemsize = facts["hidden_size"], facts["tp_size"], facts["itemsize"]
    rngs = ranges.compile_ranges(cfg, resolution.platform, hidden, tp, itemsize)
    top = max((r.hi for r in rngs if not r.is_single_size()), default=0)
    out = []
    for rng in [*rngs, ranges.Range(top + 1, ranges.UNBOUNDED)]:
        entries = ranges.plan(cfg, rng, hidden, tp, itemsize)
        out.append({
            "range": rng.as_list(),
            "runs": [e["name"] for e in entries if e["runs"]],
            "skipped": {e["name"]: e["reason"] for e in entries if not e["runs"]},
        })
    return out


def config_main(argv: Sequence[str]) -> int:
    parser = _config_parser()
    ns, rest = parser.parse_known_args(list(argv))
    try:
        cfg = CompilationConfig.from_cli(rest)
        res = resolve_explained(
            cfg,
            platform=ns.platform,
            tp_size=ns.tp,
            hidden_size=ns.hidden,
            itemsize=itemsize_of(ns.dtype),
            quant_scheme=ns.scheme,
            flashinfer_available=ns.flashinfer,
        )
        if ns.explain:
            out = res.to_dict()
            out["compile_ranges"] = explain_ranges(res)
            text = json.dumps(out, indent=2)
        else:
            text = res.config.to_json()
            for warning in res.warnings:  # --explain lists them in the JSON
                print(f"irfuse config: warning: {warning}", file=sys.stderr)
    except (ConfigError, ValueError) as e:
        print(f"irfuse config: error: {e}", file=sys.stderr)
        return 2
    print(text)
    return 0


# ---------------------------------------------------------------------------- irfuse passes

COLUMNS = ("pass", "flag", "what it fuses", "default level", "ranges", "platforms (backend)",
           "schemes")


def _level_text(row: support_matrix.Fusion) -> str:
    by_level: dict[str, list[str]] = {}
    for cls, sup in row.platforms.items():
        label = "opt-in" if sup.default_level is None else f"O{sup.default_level}"
        by_level.setdefault(label, []).append(cls)
    if len(by_level) == 1:
        return next(iter(by_level))
    return "; ".join(f"{label} ({', '.join(classes)})" for label, classes in by_level.items())


def _platforms_text(row: support_matrix.Fusion) -> str:
    by_backend: dict[str, list[str]] = {}
    for cls, sup in row.platforms.items():
        by_backend.setdefault(sup.backend, []).append(cls)
    return "; ".join(f"{', '.join(classes)} ({backend})" for backend, classes in
                     by_backend.items())


def _schemes_text(row: support_matrix.Fusion) -> str:
    if row.quant == "independent":
        return "any"
    text = ", ".join(row.schemes)
    if row.quant == "optional":
        text = f"any; fuses {text}"
    narrowed = [f"{cls}: {', '.join(sup.schemes)}" for cls, sup in row.platforms.items()
                if sup.schemes is not None]
    if narrowed:
        text += f" (only {'; '.join(narrowed)})"
    return text


def table_rows() -> list[tuple[str, ...]]:
    """The support matrix as rows of text, one per pass, in pipeline order."""
    return [
        (row.name, row.flag, row.fuses, _level_text(row), str(row.range_rule),
         _platforms_text(row),
         _schemes_text(row))
        for row in support_matrix.passes()
    ]


def _legend() -> list[tuple[str, list[str]]]:
    """The table's legend: (title, entries) sections."""
    return [
        ("Range rules (a kind, then the PassConfig threshold that bounds it)",
         [f"{name}: {text}" for name, text in RANGE_KINDS.items()]),
        ("Schemes", [f"{s.name}: {s.description}" for s in support_matrix.SCHEMES.values()]),
        ("Notes", [f"{row.name}: {row.note}" for row in support_matrix.passes() if row.note]),
    ]


def render_markdown() -> str:
    """The support matrix as a Markdown table with its legend (docs and README show it)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in table_rows()]
    for title, entries in _legend():
        lines += ["", f"{title}:", "", *(f"- {e}" for e in entries)]
    return "\n".join(lines) + "\n"


# Wrap widths of the plain-text table's columns (None: never wrapped).
_TEXT_WIDTHS = (None, None, 36, 22, None, 30, 30)


def render_text() -> str:
    """The support matrix as a plain-text table (long cells wrapped) with its legend."""
    rows = [COLUMNS, *table_rows()]
    wrapped = [
        [textwrap.wrap(cell, w) or [""] if w else [cell]
         for cell, w in zip(r, _TEXT_WIDTHS, strict=True)]
        for r in rows
    ]
    widths = [max(len(line) for r in wrapped for line in r[i]) for i in range(len(COLUMNS))]
    lines: list[str] = []
    for n, cells in enumerate(wrapped):
        height = max(len(c) for c in cells)
        for k in range(height):
            parts = [(c[k] if k < len(c) else "").ljust(w)
                     for c, w in zip(cells, widths, strict=True)]
            lines.append("  ".join(parts).rstrip())
        lines.append("  ".join("-" * w for w in widths) if n == 0 else "")
    for title, entries in _legend():
        lines += [f"{title}:", *(f"  {e}" for e in entries)]
    return "\n".join(lines) + "\n"


def passes_main(argv: Sequence[str]) -> int:
    parser = OneLineParser(
        prog="irfuse passes", allow_abbrev=False,
        description="Print the support matrix: every pass, where and when it applies.")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="a Markdown table")
    fmt.add_argument("--json", action="store_true", help="the matrix as JSON")
    parser.add_argument("--platform", help="also say whether each pass can apply here "
                        "(cpu, cuda:smNN, rocm[:gfxNNN]; 'detect' for this machine)")
    parser.add_argument("--scheme", choices=list(support_matrix.SCHEMES),
                        help="with --platform: the model's quantization scheme")
    ns = parser.parse_args(list(argv))
    try:
        plat = None
        if ns.platform:
            plat = detect() if ns.platform == "detect" else Platform.parse(ns.platform)
    except ValueError as e:
        print(f"irfuse passes: error: {e}", file=sys.stderr)
        return 2
    verdicts = {}
    if plat is not None:
        verdicts = {row.name: support_matrix.can_apply(row.name, plat, ns.scheme)
                    for row in support_matrix.passes()}
    if ns.json:
        data = []
        for row, cells in zip(support_matrix.passes(), table_rows(), strict=True):
            entry: dict[str, Any] = dict(zip(COLUMNS, cells, strict=True))
            if plat is not None:
                ok, why = verdicts[row.name]
                entry["can_apply"] = {"platform": str(plat), "ok": ok, "reason": why}
            data.append(entry)
        print(json.dumps(data, indent=2))
        return 0
    print(render_markdown() if ns.markdown else render_text(), end="")
    if plat is not None:
        scheme = f", scheme {ns.scheme}" if ns.scheme else ""
        print(f"\nOn {plat}{scheme}:")
        for name, (ok, why) in verdicts.items():
            print(f"  {name}: {'can apply' if ok else 'cannot apply'}" + (f": {why}" if why
                                                                          else ""))
    return 0
