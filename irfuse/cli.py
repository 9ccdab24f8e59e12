"""`irfuse`: the command line.

    irfuse demo [--model M] [--size S] [--layers N] [--tokens T] [--dump-dir D] [--no-inductor]
                [vLLM flags]
    irfuse passes [--platform P] [--scheme S] [--markdown | --json]
    irfuse config [vLLM flags: -O2 -cc.pass_config.<flag>=False ...] [--platform P]
    irfuse report [--all] PATH    (a report.json, or a dump folder: its newest run's reports,
                                   or with --all every run's)

`irfuse-opt` (irfuse/opt.py) is the IR optimizer driver.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
from collections.abc import Sequence
from typing import Any

from irfuse.cli_config import OneLineParser, config_main, passes_main
from irfuse.config import ConfigError
from irfuse.dump import RUN_PREFIX
from irfuse.remarks import Remark
from irfuse.report import KernelRecord, PassRecord, Report, StageRecord


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"demo": demo_main, "passes": passes_main, "config": config_main,
                "report": report_main}
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        print(__doc__.strip())
        if argv and argv[0] not in ("-h", "--help"):
            print(f"\nirfuse: unknown command '{argv[0]}'", file=sys.stderr)
            return 2
        return 0
    try:
        status = commands[argv[0]](argv[1:])
        sys.stdout.flush()
        return status
    except ConfigError as e:  # a bad flag or value: say which, no traceback
        print(f"irfuse {argv[0]}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `irfuse passes | head`: the reader left; so do we, quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the flush at exit must not fail again
        return 128 + 13  # as a process killed by SIGPIPE


# --- report -----------------------------------------------------------------------------------


class BadReport(ValueError):
    """A report.json that is not a compile report: which field is wrong, and how."""


def _field(data: dict, key: str, types: type | tuple[type, ...], where: str = "",
           optional: bool = False) -> Any:
    if key not in data:
        if optional:
            return None
        raise BadReport(f"{where}{key!r} is missing")
    value = data[key]
    if value is None and optional:
        return None
    if not isinstance(value, types) or isinstance(value, bool) and bool not in _tuple(types):
        names = " or ".join(t.__name__ for t in _tuple(types))
        raise BadReport(f"{where}{key!r} is {type(value).__name__} {value!r:.60}, not {names}")
    return value


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def load_report(data: Any) -> Report:
    """A Report from its JSON form (the inverse of Report.to_dict); a field of the wrong type
    (or missing) is a BadReport naming it."""
    if not isinstance(data, dict):
        raise BadReport(f"the file holds a {type(data).__name__}, not a JSON object")
    number = (int, float)

    def records(key: str, count: str, missed: str, optional: bool) -> list[PassRecord]:
        out = []
        items = _field(data, key, list, optional=optional) or []
        for i, p in enumerate(items):
            where = f"{key}[{i}]."
            if not isinstance(p, dict):
                raise BadReport(f"{key}[{i}] is {type(p).__name__}, not an object")
            remarks = []
            for j, r in enumerate(_field(p, missed, list, where)):
                at = f"{where}{missed}[{j}]."
                if not isinstance(r, dict):
                    raise BadReport(f"{at[:-1]} is {type(r).__name__}, not an object")
                remarks.append(Remark(_field(r, "reason", str, at),
                                      str(_field(r, "location", str, at, optional=True))))
            out.append(PassRecord(_field(p, "name", str, where), _field(p, count, int, where),
                                  remarks, float(_field(p, "ms", number, where))))
        return out

    rng = _field(data, "range", list, optional=True)
    if rng is not None and (len(rng) != 2 or not all(
            v is None or isinstance(v, int) and not isinstance(v, bool) for v in rng)):
        raise BadReport(f"'range' is {rng!r:.60}, not [lo, hi] (integers, hi may be null)")
    raised = _field(data, "raised", dict)
    for kind, n in raised.items():
        if not isinstance(n, int) or isinstance(n, bool):
            raise BadReport(f"'raised'[{kind!r}] is {type(n).__name__} {n!r:.60}, not int")
    stages = []
    for i, st in enumerate(_field(data, "stages", list)):
        if not isinstance(st, dict):
            raise BadReport(f"stages[{i}] is {type(st).__name__}, not an object")
        where = f"stages[{i}]."
        stages.append(StageRecord(_field(st, "name", str, where),
                                  float(_field(st, "ms", number, where)),
                                  _field(st, "ops", int, where)))
    kernels = []
    for i, k in enumerate(_field(data, "kernels", list, optional=True) or []):
        if not isinstance(k, dict):
            raise BadReport(f"kernels[{i}] is {type(k).__name__}, not an object")
        where = f"kernels[{i}]."
        kernels.append(KernelRecord(_field(k, "op", str, where), _field(k, "impl", str, where),
                                    _field(k, "reason", str, where),
                                    _field(k, "calls", int, where)))
    off = _field(data, "off", dict, optional=True) or {}
    for name, why in off.items():
        if not isinstance(why, str):
            raise BadReport(f"'off'[{name!r}] is {type(why).__name__}, not str")
    return Report(
        graph=_field(data, "graph", str),
        range=rng,
        platform=_field(data, "platform", str),
        config=_field(data, "config", dict),
        raised=raised,
        raise_passes=records("raise", "raised", "not_raised", optional=True),
        passes=records("passes", "fused", "not_fused", optional=False),
        stages=stages,
        kernels=kernels,
        error=_field(data, "error", str, optional=True),
        host=_field(data, "host", dict, optional=True),
        off=off,
    )


def report_files(path: pathlib.Path, every_run: bool) -> tuple[list[pathlib.Path], str | None]:
    """The report.json files to show for a path, and a note on the runs left out. A dump
    folder holds one run folder per process (irfuse.dump): the newest run's reports, unless
    `every_run`."""
    if not path.is_dir():
        return [path], None
    files = sorted(path.rglob("report.json"))
    runs = sorted(p for p in path.iterdir() if p.is_dir() and p.name.startswith(RUN_PREFIX)
                  and any(p.rglob("report.json")))
    if every_run or len(runs) <= 1:
        return files, None
    newest = runs[-1]
    note = (f"irfuse report: {newest.name}, the newest of {len(runs)} runs under {path} "
            f"(--all for every run)")
    return [f for f in files if newest in f.parents], note


def report_main(argv: Sequence[str]) -> int:
    parser = OneLineParser(prog="irfuse report", description="print compile reports")
    parser.add_argument("path", help="a report.json or a dump folder")
    parser.add_argument("--all", action="store_true",
                        help="every run under a dump folder (default: the newest)")
    args = parser.parse_args(argv)
    path = pathlib.Path(args.path)
    if not path.exists():
        print(f"irfuse report: {path} does not exist", file=sys.stderr)
        return 1
    files, note = report_files(path, args.all)
    if not files:
        print(f"irfuse report: no report.json under {path}", file=sys.stderr)
        return 1
    if note:
        print(note)
    bad = []
    for file in files:
        try:
            report = load_report(json.loads(file.read_text()))
        except (OSError, UnicodeDecodeError, ValueError) as err:  # BadReport and JSON errors
            bad.append(f"{file}: not a compile report ({err})")
            continue
        print(f"{file}:\n{report.format_table()}\n")
    for line in bad:
        print(f"irfuse report: {line}", file=sys.stderr)
    if bad and len(files) > 1:
        print(f"irfuse report: {len(bad)} of {len(files)} reports could not be read",
              file=sys.stderr)
    return 1 if bad else 0


# --- demo -------------------------------------------------------------------------------------


def demo_main(argv: Sequence[str]) -> int:
    # The demo alone needs torch, Dynamo and the models: the other commands stay light.
    from irfuse import demo

    return demo.main(argv)


if __name__ == "__main__":
    sys.exit(main())
