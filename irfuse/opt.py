"""`irfuse-opt`: xDSL's opt driver with irfuse's dialects and passes.

Reads IR (a file of any name, or stdin), runs `-p pass1,pass2{option=value}`, prints the IR.
Supports xDSL's `--verify-diagnostics`, `--split-input-file`, `--print-debuginfo`, and
mlir-opt's `--verify-roundtrip` (the parsed IR must print and parse back, generic and custom).

Every bad input is one message and a non-zero exit status, never a traceback:

- bad IR: a parse error with file:line:col (status 1); IR that nests too deeply for the parser
  says so, with the position it reached (1); input that is not UTF-8 text names the offending
  byte's line and column (1); a directory or an unreadable file is named (1); IR that does not
  round-trip (`--verify-roundtrip`) names the form and the first line that changed (1);
- IR that parses but does not verify: `file:line:col: error: 'op.name' op <why>`, the position
  of the op in the input (or of the nearest enclosing op that has one, for an op a pass created)
  (status 1);
- an unknown pass lists the known ones; an unknown pass option lists the pass's options; an
  option value of the wrong type, or a count below 1, names the option (status 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
import sys
import typing
from collections.abc import Sequence
from io import StringIO
from typing import IO, Any

from xdsl.dialects.builtin import FileLineColLoc, ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
)
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRLexer
from xdsl.xdsl_opt_main import xDSLOptMain

from irfuse import passes
from irfuse.context import make_context


class OptError(Exception):
    """A bad input or argument, with the message irfuse-opt prints and its exit status."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


# xDSL 0.74's string-literal pattern nests `+` inside `*`, which backtracks exponentially on an
# unterminated string (a dropped `"` hangs the lexer); the same language without the nesting:
_STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')


class _LocatingParser(Parser):
    """xDSL's parser, remembering where in the input each operation starts."""

    def __init__(self, *args: Any, **kwargs: Any):
        saved = MLIRLexer._unescaped_characters_regex  # the first token is lexed in __init__
        MLIRLexer._unescaped_characters_regex = _STRING_LITERAL
        try:
            super().__init__(*args, **kwargs)
        finally:
            MLIRLexer._unescaped_characters_regex = saved
        self.lexer._unescaped_characters_regex = _STRING_LITERAL  # type: ignore[attr-defined]
        self.positions: dict[Operation, Span] = {}

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        op = super().parse_operation()
        self.positions[op] = start
        return op


def _position(span: Span, line_offset: int) -> str:
    return str(dataclasses.replace(span, line_offset=line_offset).get_location())


class IRFuseOptMain(xDSLOptMain):
    def __init__(self, *args: Any, **kwargs: Any):
        self._parser: _LocatingParser | None = None
        self._offset = 0
        self._module: ModuleOp | None = None
        self._phase = "parse"
        super().__init__(*args, **kwargs)

    def register_all_dialects(self) -> None:
        self.ctx = make_context()

    def register_all_passes(self) -> None:
        for name, factory in passes.factories().items():
            self.register_pass(name, factory)

    def register_all_frontends(self) -> None:
        def parse_mlir(io: IO[bytes]) -> ModuleOp:
            self._phase = "parse"
            text = _decode(io.read(), self.get_input_name(), self._offset)
            self._parser = _LocatingParser(self.ctx, text, self.get_input_name())
            module = self._parser.parse_module(not self.args.no_implicit_module)
            if self.args.verify_roundtrip:
                self.verify_roundtrip(module)
            return module

        self.available_frontends["mlir"] = parse_mlir

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--verify-roundtrip", action="store_true",
            help="after parsing, print the IR in its generic and its custom form and parse each "
                 "back: both must print as the parsed IR does (as mlir-opt's flag)")

    def printed(self, module: ModuleOp, generic: bool = False) -> str:
        out = StringIO()
        Printer(out, print_generic_format=generic,
                print_debuginfo=self.args.print_debuginfo).print_op(module)
        return out.getvalue()

    def verify_roundtrip(self, module: ModuleOp) -> None:
        """The module, printed generic or custom and parsed back, is the same IR (structurally,
        properties and locations included): an OptError names the form and the first printed
        line that differs (or why it did not parse back)."""
        for form, generic in (("generic", True), ("custom", False)):
            where = f"{self.get_input_name()}: error: the IR does not round-trip through its " \
                    f"{form} form"
            try:
                again = Parser(self.ctx, self.printed(module, generic), f"<{form} form>")
                reparsed = again.parse_module()
            except (ParseError, DiagnosticException) as err:
                raise OptError(f"{where}: printed, it does not parse back: {err}") from None
            if not reparsed.is_structurally_equivalent(module):
                before, after = (self.printed(m, generic=True) for m in (module, reparsed))
                diff = difflib.unified_diff(before.splitlines(), after.splitlines(), n=0,
                                            lineterm="")
                changed = [line for line in diff
                           if line[:1] in "-+" and not line.startswith(("---", "+++"))]
                raise OptError(f"{where}: " + (" / ".join(changed[:2]) or "parsed back, it prints "
                               "the same but is not the same IR (the printer rounds or drops "
                               "something)"))

    def get_input_name(self) -> str:
        return self.args.input_file or "<stdin>"

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        # Any file name is read as MLIR text: irfuse-opt has no other frontend.
        stream, _ = super().get_input_stream()
        return stream, "mlir"

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        self._offset = start_offset
        return super().parse_chunk(chunk, file_extension, start_offset)

    def apply_passes(self, prog: ModuleOp) -> None:
        self._module = prog
        self._phase = "passes"
        super().apply_passes(prog)
        self._phase = "print"

    # -- where an error is -----------------------------------------------------------------

    def op_position(self, op: Operation) -> str | None:
        """file:line:col of an op: where the parser found it, else its `loc(...)`."""
        positions = self._parser.positions if self._parser else {}
        if op in positions:
            return _position(positions[op], self._offset)
        if isinstance(op.location, FileLineColLoc):
            loc = op.location
            return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
        return None

    def locate(self, err: DiagnosticException) -> str:
        """The verifier error as `file:line:col: error: 'op' op <message>`: the first op of the
        module (in xDSL's verification order, nested ops first) that does not verify."""
        message = str(err).removeprefix("Operation does not verify: ")
        if self._phase == "parse":  # an attribute or type the parser built did not verify
            return f"{self.parse_position()}: error: {message}"
        failing = _first_unverified(self._module) if self._module is not None else None
        if failing is None:
            return f"{self.get_input_name()}: error: {message}"
        where, inside = self.op_position(failing), ""
        parent = failing.parent_op()
        while where is None and parent is not None:
            where = self.op_position(parent)
            inside = f" (in '{parent.name}')" if where else ""
            parent = parent.parent_op()
        return f"{where or self.get_input_name()}: error: '{failing.name}' op{inside}: {message}"

    def parse_position(self) -> str:
        if self._parser is None:
            return self.get_input_name()
        pos = self._parser.lexer.pos
        return _position(Span(pos, pos, self._parser.lexer.input), self._offset)


def _first_unverified(module: ModuleOp) -> Operation | None:
    def visit(op: Operation) -> Operation | None:
        for region in op.regions:
            for block in region.blocks:
                for inner in block.ops:
                    found = visit(inner)
                    if found is not None:
                        return found
        try:
            op.verify(verify_nested_ops=False)
        except Exception:  # noqa: BLE001 (any verifier failure marks the op)
            return op
        return None

    return visit(module)


def _decode(data: bytes, name: str, line_offset: int) -> str:
    """The input as text; anything that is not UTF-8 (a binary file) is an OptError naming
    the position of its first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1 + line_offset
        col = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise OptError(
            f"{name}:{line}:{col}: error: not UTF-8 text (byte 0x{data[err.start]:02x}); "
            "irfuse-opt reads MLIR text"
        ) from None


# ---------------------------------------------------------------------------- pass options


def _pipeline_spec(argv: Sequence[str]) -> str | None:
    spec = None
    for i, arg in enumerate(argv):
        if arg in ("-p", "--passes") and i + 1 < len(argv):
            spec = argv[i + 1]
        elif arg.startswith("--passes="):
            spec = arg.split("=", 1)[1]
        elif arg.startswith("-p") and len(arg) > 2 and not arg.startswith("--"):
            spec = arg[2:]
    return spec


def _option_fields(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {
        f.name: hints.get(f.name)
        for f in dataclasses.fields(cls)
        if f.init and f.name != "name"
    }


def _is_int_option(annotation: Any) -> bool:
    args = typing.get_args(annotation) or (annotation,)
    return int in args and not {float, str, bool} & set(args)


def check_pass(spec: ArgSpec) -> None:
    """An unknown pass, an unknown option, or an option value the pass cannot take is an
    OptError (status 2) naming it. irfuse's integer options are token counts: >= 1."""
    if spec.name not in passes.PASSES:
        raise OptError(str(passes.UnknownPass(spec.name)), 2)
    cls = passes.pass_class(spec.name)
    known = _option_fields(cls)
    spec = spec.normalize_parameter_names()
    for key, values in spec.parameters.items():
        if key not in known:
            takes = f"its options: {', '.join(known)}" if known else "it takes no options"
            raise OptError(f"unknown option '{key}' for pass '{spec.name}'; {takes}", 2)
        if _is_int_option(known[key]):
            ok = (len(values) == 1 and isinstance(values[0], int)
                  and not isinstance(values[0], bool) and values[0] >= 1)
            if not ok:
                shown = ",".join(str(v) for v in values) or "(nothing)"
                raise OptError(
                    f"bad value for option '{key}' of pass '{spec.name}': {shown}; "
                    "allowed: an integer >= 1", 2)
    try:
        cls.from_spec(spec)
    except (ValueError, TypeError) as err:
        raise OptError(f"bad options for pass '{spec.name}': {err}", 2) from None


def check_pipeline(argv: Sequence[str]) -> None:
    """Every pass of the `-p` pipeline exists and takes the options given (see check_pass)."""
    text = _pipeline_spec(argv)
    if not text:
        return
    try:
        specs = list(parse_pipeline(text))
    except ArgSpecParseError as err:
        raise OptError(f"error in the pass pipeline: {err}", 2) from None
    for spec in specs:
        check_pass(spec)


# ---------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    opt: IRFuseOptMain | None = None
    try:
        check_pipeline(argv)
        opt = IRFuseOptMain(description="irfuse's IR optimizer driver", args=argv)
        if opt.args.input_file and os.path.isdir(opt.args.input_file):
            raise OptError(f"{opt.args.input_file} is a directory, not an IR file")
        opt.run()
    except OptError as err:
        print(f"irfuse-opt: {err}", file=sys.stderr)
        return err.status
    except ParseError as err:
        print(f"irfuse-opt: parse error: {err}", file=sys.stderr)
        return 1
    except ArgSpecParseError as err:
        print(f"irfuse-opt: error in the pass pipeline: {err}", file=sys.stderr)
        return 2
    except DiagnosticException as err:
        where = opt.locate(err) if opt is not None else str(err)
        print(f"irfuse-opt: {where}", file=sys.stderr)
        return 1
    except RecursionError:
        if opt is not None and opt._phase == "parse":
            where = f"{opt.parse_position()}: error: the IR nests too deeply to parse"
        else:
            where = "error: the IR nests too deeply for irfuse-opt"
        print(f"irfuse-opt: {where} (Python's recursion limit is {sys.getrecursionlimit()})",
              file=sys.stderr)
        return 1
    except OSError as err:
        name = err.filename or (opt.get_input_name() if opt else "input")
        print(f"irfuse-opt: error: cannot open {name}: {err.strerror or err}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
