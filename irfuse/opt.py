"""`irfuse-opt`: xDSL's opt driver with irfuse's dialects and passes.

Reads IR (a file or stdin), runs `-p pass1,pass2{option=value}`, prints the IR. Supports xDSL's
`--verify-diagnostics`, `--split-input-file`, `--print-debuginfo`. Bad IR is a parse error with
file:line:col and exit status 1; an unknown pass is an error listing the known ones (status 2).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
)
from xdsl.xdsl_opt_main import xDSLOptMain

from irfuse import passes
from irfuse.context import make_context


class IRFuseOptMain(xDSLOptMain):
    def register_all_dialects(self) -> None:
        self.ctx = make_context()

    def register_all_passes(self) -> None:
        for name, factory in passes.factories().items():
            self.register_pass(name, factory)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)

    def get_input_name(self) -> str:
        return self.args.input_file or "<stdin>"


def _check_pass_names(argv: Sequence[str]) -> str | None:
    spec = None
    for i, arg in enumerate(argv):
        if arg in ("-p", "--passes") and i + 1 < len(argv):
            spec = argv[i + 1]
        elif arg.startswith("--passes="):
            spec = arg.split("=", 1)[1]
        elif arg.startswith("-p") and len(arg) > 2:
            spec = arg[2:]
    if not spec:
        return None
    depth, name, names = 0, "", []
    for ch in spec:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            names.append(name.strip())
            name = ""
        elif depth == 0:
            name += ch
    names.append(name.strip())
    for n in names:
        if n and n not in passes.PASSES:
            return str(passes.UnknownPass(n))
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    error = _check_pass_names(argv)
    if error is not None:
        print(f"irfuse-opt: error: {error}", file=sys.stderr)
        return 2
    try:
        opt = IRFuseOptMain(description="irfuse's IR optimizer driver", args=argv)
        opt.run()
    except ParseError as err:
        print(f"irfuse-opt: parse error: {err}", file=sys.stderr)
        return 1
    except ArgSpecParseError as err:
        print(f"irfuse-opt: error in the pass pipeline: {err}", file=sys.stderr)
        return 2
    except DiagnosticException as err:
        print(f"irfuse-opt: error: {err}", file=sys.stderr)
        return 1
    except FileNotFoundError as err:
        print(f"irfuse-opt: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
