"""Dumps: one folder per compiled graph and range, one numbered file per stage.

    <dump_dir>/<graph>[-range-<lo>-<hi>]/
        00-dynamo.py  01-aten.py  02-import.mlir  03-raise-....mlir  ...  NN-<pass>.mlir
        NN-emit.mlir  NN-emitted.py  report.json

Each `.mlir` file starts with a comment giving the irfuse-opt command that turns the previous
file into it, and is printed with locations, so `irfuse-opt --print-debuginfo -p <pass>` on the
file before reproduces it exactly.
"""

from __future__ import annotations

import io
import os
import pathlib

from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer


def print_module(module: ModuleOp) -> str:
    out = io.StringIO()
    Printer(stream=out, print_debuginfo=True).print_op(module)
    out.write("\n")
    return out.getvalue()


class DumpWriter:
    """Writes the stage files of one compile into its folder, numbering them in order."""

    def __init__(self, root: str | os.PathLike[str], folder: str):
        self.dir = pathlib.Path(root) / folder
        self.dir.mkdir(parents=True, exist_ok=True)
        self._next = 0
        self._last_mlir: str | None = None
        self._written: list[pathlib.Path] = []

    def fork(self, subfolder: str) -> DumpWriter:
        """A writer for one compile range: a subfolder that starts with copies of the files
        written so far (the stages every range shares) and numbers on from there."""
        child = DumpWriter(self.dir, subfolder)
        for path in self._written:
            target = child.dir / path.name
            target.write_bytes(path.read_bytes())
            child._written.append(target)
        child._next = self._next
        child._last_mlir = self._last_mlir
        return child

    def _name(self, stem: str, suffix: str) -> pathlib.Path:
        path = self.dir / f"{self._next:02d}-{stem}{suffix}"
        self._next += 1
        self._written.append(path)
        return path

    def python(self, stem: str, code: str) -> pathlib.Path:
        path = self._name(stem, ".py")
        path.write_text(code)
        return path

    def mlir(self, stem: str, module: ModuleOp, pass_spec: str | None = None) -> pathlib.Path:
        path = self._name(stem, ".mlir")
        header = ""
        if pass_spec is not None and self._last_mlir is not None:
            header = f"// irfuse-opt --print-debuginfo -p '{pass_spec}' {self._last_mlir}\n"
        path.write_text(header + print_module(module))
        self._last_mlir = path.name
        return path

    def text(self, name: str, content: str) -> pathlib.Path:
        path = self.dir / name
        path.write_text(content)
        return path
