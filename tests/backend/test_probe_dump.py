"""Dumps under faults: one run folder per process, shared stages written once, and a dump that
cannot be written never costs a fusion (one warning, the compile goes on)."""

from __future__ import annotations

import errno
import json
import pathlib
import subprocess
import sys
import warnings

import pytest
import torch

from irfuse import backend, models
from irfuse.testing import compile_and_run

IRFUSE = [sys.executable, "-m", "irfuse.cli"]


def _compile(options: dict) -> tuple[object, list[str]]:
    built = models.build("llama-fp8", size="tiny")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = compile_and_run(built.model, built.example_inputs,
                                   dynamic_dims=tuple(built.dynamic_dims.items()),
                                   options={"optimization_level": 2, **options})
    messages = [str(w.message) for w in caught if "irfuse" in str(w.message)]
    return compiled, messages


@pytest.fixture(scope="module")
def undumped_fusions() -> dict[str, int]:
    compiled, _ = _compile({})
    fused = {p: compiled.fused(p) for p in ("fuse-norm-quant", "fuse-act-quant")}
    assert all(fused.values()), fused
    return fused


def test_two_processes_with_one_dump_folder_do_not_mix_and_report_shows_the_newest(
        tmp_path: pathlib.Path) -> None:
    procs = [
        subprocess.Popen([*IRFUSE, "demo", "--size", "tiny", "--no-inductor", "--layers", str(n),
                          "--dump-dir", str(tmp_path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for n in (1, 2)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    runs = sorted(p for p in tmp_path.iterdir())
    assert len(runs) == 2 and all(p.name.startswith("run-") for p in runs)
    layers = []
    for run in runs:
        (graph,) = run.iterdir()
        numbered = sorted(p.name for p in graph.iterdir() if p.name[:2].isdigit())
        assert [int(n[:2]) for n in numbered] == list(range(len(numbered)))  # no gaps, no mix
        report = json.loads((graph / "report.json").read_text())
        layers.append(report["raised"]["add_rms_norm"] // 2)  # two residual norms a layer
    assert sorted(layers) == [1, 2]
    # Run folders are named by their start time: `irfuse report` shows the last by name.
    older, newer = runs
    shown = subprocess.run([*IRFUSE, "report", str(tmp_path)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert f"{newer.name}, the newest of 2 runs" in shown.stdout
    assert str(newer) in shown.stdout and str(older) not in shown.stdout
    every = subprocess.run([*IRFUSE, "report", "--all", str(tmp_path)], capture_output=True,
                           text=True)
    assert str(newer) in every.stdout and str(older) in every.stdout


def test_ranges_link_to_the_shared_stages(tmp_path: pathlib.Path) -> None:
    built = models.build("llama-fp8", size="tiny")
    torch._dynamo.reset()
    backend.clear_reports()
    compiled = torch.compile(built.model, backend="irfuse",
                             options={"inductor": False, "dump_dir": str(tmp_path),
                                      "compile_sizes": [4, 8]})
    with torch.no_grad():
        for i, t in enumerate((16, 4, 8)):
            inputs = built.make_inputs(t)
            if i == 0:
                built.mark_dynamic(inputs)
            compiled(*inputs)
    (graph,) = (tmp_path / run for run in tmp_path.iterdir())
    (graph,) = list(graph.iterdir())
    shared = sorted(p.name for p in graph.iterdir() if p.is_file())
    assert shared[0] == "00-dynamo.py" and any("raise-kv-cache-write" in n for n in shared)
    ranges = sorted(p for p in graph.iterdir() if p.is_dir())
    assert {"range-4-4", "range-8-8"} < {p.name for p in ranges}  # a compile size each
    for rng in ranges:
        for name in shared:
            link = rng / name
            assert link.is_symlink() and link.readlink() == pathlib.Path("..", name)
            assert link.read_bytes() == (graph / name).read_bytes()
        own = [p for p in rng.iterdir() if not p.is_symlink()]
        assert any(p.name.endswith("-emit.mlir") for p in own) and (rng / "report.json").exists()


def test_an_unwritable_dump_folder_warns_once_and_keeps_the_fusions(
        tmp_path: pathlib.Path, undumped_fusions: dict[str, int]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    compiled, messages = _compile({"dump_dir": str(blocker / "dumps")})
    assert {p: compiled.fused(p) for p in undumped_fusions} == undumped_fusions
    assert all(r.error is None for r in compiled.reports)
    assert len(messages) == 1 and "cannot write dumps under" in messages[0], messages
    assert "compiling on without them" in messages[0]


def test_a_failing_write_warns_once_keeps_the_fusions_and_leaves_no_partial_file(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
        undumped_fusions: dict[str, int]) -> None:
    """The disk fills up after a few files: the compile goes on and fuses what it fuses
    without a dump; nothing half-written is left (files are written and renamed)."""
    real = pathlib.Path.write_text
    calls = {"n": 0}

    def write_text(self: pathlib.Path, data: str, *args, **kwargs) -> int:
        if tmp_path in self.parents:
            calls["n"] += 1
            if calls["n"] > 4:
                real(self, data[: len(data) // 2], *args, **kwargs)  # a torn write
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", write_text)
    compiled, messages = _compile({"dump_dir": str(tmp_path)})
    assert {p: compiled.fused(p) for p in undumped_fusions} == undumped_fusions
    assert all(r.error is None for r in compiled.reports)
    assert len(messages) == 1 and "No space left on device" in messages[0], messages
    (graph,) = [p for run in tmp_path.iterdir() for p in run.iterdir()]
    names = sorted(p.name for p in graph.iterdir())
    assert names == ["00-dynamo.py", "01-aten.py", "02-import.mlir", "03-cse-pure.mlir"]
    assert calls["n"] == 5  # after the failure nothing more is tried

    # A second compile in the same process, same folder: no second warning.
    compiled, messages = _compile({"dump_dir": str(tmp_path)})
    assert messages == [] and compiled.fused("fuse-norm-quant") == undumped_fusions[
        "fuse-norm-quant"]
