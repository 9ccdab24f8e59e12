"""Dumps: one folder per run, per compiled graph and per range, one numbered file per stage.

    <dump_dir>/run-<YYYYmmdd-HHMMSS.ffffff>-pid<pid>/<graph>/
        00-dynamo.py  01-aten.py  02-import.mlir  03-raise-....mlir  ...  NN-<pass>.mlir
        NN-emit.mlir  NN-emitted.py  report.json
        range-<lo>-<hi>/   (when the graph's ranges compile separately)
            00-dynamo.py -> ../00-dynamo.py  ...  (links to the shared stages: import, raise)
            NN-<pass>.mlir  ...  report.json

Each process writes into a run folder of its own, so two processes (or two runs) with one
`dump_dir` never mix their files. Each `.mlir` file starts with the irfuse-opt command that turns
the previous file into it and is printed with locations, so that command reproduces it exactly.
Dumping never costs a compile: a failed write (a full disk) warns once per dump folder and
process and the run's dump stops there; files are written under a temporary name and renamed.
"""

from __future__ import annotations

import io
import os
import pathlib
import shutil
import time

from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer

from irfuse import user_warnings

RUN_PREFIX = "run-"

_RUNS: dict[tuple[int, str], pathlib.Path] = {}  # (pid, dump root) -> this process's run folder
_WARNED: set[tuple[int, str]] = set()


def dump_failed(root: str | os.PathLike[str]) -> bool:
    """Whether a dump under `root` failed in this process (it warned once; what is there is
    incomplete)."""
    return (os.getpid(), os.path.abspath(root)) in _WARNED


def run_folder_of(root: str | os.PathLike[str]) -> pathlib.Path | None:
    """This process's run folder under `root`, if one was made."""
    return _RUNS.get((os.getpid(), os.path.abspath(root)))


def print_module(module: ModuleOp) -> str:
    out = io.StringIO()
    Printer(stream=out, print_debuginfo=True).print_op(module)
    out.write("\n")
    return out.getvalue()


def run_folder(root: str | os.PathLike[str]) -> pathlib.Path:
    """This process's run folder under a dump root (created at the first call)."""
    key = (os.getpid(), os.path.abspath(root))
    if key not in _RUNS:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
        micro = f"{time.time_ns() // 1000 % 1_000_000:06d}"
        base = pathlib.Path(root) / f"{RUN_PREFIX}{stamp}.{micro}-pid{os.getpid()}"
        path, n = base, 0
        while True:
            try:
                path.mkdir(parents=True)
                break
            except FileExistsError:
                n += 1
                path = base.with_name(f"{base.name}-{n}")
        _RUNS[key] = path
    return _RUNS[key]


class _State:
    """Shared by a graph's writer and its range writers: once a write fails, all stop."""

    def __init__(self, root: str):
        self.root = root
        self.failed = False

    def fail(self, err: OSError) -> None:
        self.failed = True
        key = (os.getpid(), os.path.abspath(self.root))
        if key in _WARNED:
            return
        _WARNED.add(key)
        user_warnings.warn(
            f"irfuse: cannot write dumps under {self.root} ({type(err).__name__}: {err}); "
            "compiling on without them (this run's dump is incomplete)")


class DumpWriter:
    """Writes the stage files of one compile into its folder, numbering them in order."""

    def __init__(self, root: str | os.PathLike[str], folder: str, *,
                 _parent: DumpWriter | None = None):
        self._state = _parent._state if _parent else _State(os.fspath(root))
        self._next = 0
        self._last_mlir: str | None = None
        self._written: list[pathlib.Path] = []
        self.dir = pathlib.Path(root) / folder  # until the run folder exists
        if self._state.failed:
            return
        try:
            base = _parent.dir if _parent else run_folder(root)
            self.dir = base / folder
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            self._state.fail(err)

    @property
    def failed(self) -> bool:
        """Whether a write failed: this dump (and the run's) is incomplete."""
        return self._state.failed

    def fork(self, subfolder: str) -> DumpWriter:
        """A writer for one compile range: a subfolder whose first files link to the files
        written so far (the stages every range shares, written once) and that numbers on."""
        child = DumpWriter(self.dir, subfolder, _parent=self)
        for path in self._written:
            target = child.dir / path.name
            if child.failed:
                break
            try:
                try:
                    target.symlink_to(os.path.join("..", path.name))
                except OSError:  # a file system without links: a copy
                    shutil.copyfile(path, target)
            except OSError as err:
                self._state.fail(err)
                break
            child._written.append(target)
        child._next = self._next
        child._last_mlir = self._last_mlir
        return child

    def _write(self, path: pathlib.Path, content: str) -> pathlib.Path | None:
        """Write under a temporary name and rename, so no file is left truncated; None once a
        write of this run's dump has failed."""
        if self._state.failed:
            return None
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            tmp.write_text(content)
            os.replace(tmp, path)
        except OSError as err:
            tmp.unlink(missing_ok=True)
            self._state.fail(err)
            return None
        return path

    def _name(self, stem: str, suffix: str) -> pathlib.Path:
        path = self.dir / f"{self._next:02d}-{stem}{suffix}"
        self._next += 1
        return path

    def _record(self, path: pathlib.Path | None) -> pathlib.Path | None:
        if path is not None:
            self._written.append(path)
        return path

    def python(self, stem: str, code: str) -> pathlib.Path | None:
        return self._record(self._write(self._name(stem, ".py"), code))

    def mlir(self, stem: str, module: ModuleOp, pass_spec: str | None = None
             ) -> pathlib.Path | None:
        """The module, printed with locations, under a first line giving the command that
        reproduces it from the file before: `irfuse-opt --print-debuginfo -p <pass_spec>`."""
        path = self._name(stem, ".mlir")
        if self._state.failed:
            return None
        header = ""
        if pass_spec is not None and self._last_mlir is not None:
            header = f"// irfuse-opt --print-debuginfo -p '{pass_spec}' {self._last_mlir}\n"
        written = self._record(self._write(path, header + print_module(module)))
        if written is not None:
            self._last_mlir = path.name
        return written

    def text(self, name: str, content: str) -> pathlib.Path | None:
        return self._write(self.dir / name, content)
