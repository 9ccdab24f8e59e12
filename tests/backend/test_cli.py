"""The command line: `irfuse demo`, `irfuse report`, `irfuse-opt`'s errors."""

from __future__ import annotations

import pathlib
import subprocess
import sys

IRFUSE = [sys.executable, "-m", "irfuse.cli"]
OPT = [sys.executable, "-m", "irfuse.opt"]


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def test_demo_runs_checks_and_reports(tmp_path: pathlib.Path) -> None:
    result = _run([*IRFUSE, "demo", "--size", "tiny", "--no-inductor", "--dump-dir", str(tmp_path)])
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "fuse-norm-quant                   4" in out
    assert "fuse-act-quant                    2" in out
    assert "irfuse: 0.00e+00, tolerance 2.0e-02: OK" in out
    # The closing table: every fused site, what ran, what the GPU runs and its measured speed.
    table = out[out.index("fused sites"):]
    for line in ("rms_norm_quant_fp8_static      1      reference  triton",
                 "add_rms_norm_quant_fp8_static  3      reference  triton",
                 "silu_mul_quant_fp8_static      2      reference  triton"):
        assert line in table, table
    assert "x as fast (H200)" in table
    run = next(tmp_path.glob("run-*"))
    assert f"dumps: {run}  (irfuse report {tmp_path})" in out
    report = _run([*IRFUSE, "report", str(tmp_path)])
    assert report.returncode == 0 and "fuse-norm-quant" in report.stdout


def test_demo_with_an_unwritable_dump_dir_says_there_are_none(tmp_path: pathlib.Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the folder should be: nothing can be made under it
    result = _run([*IRFUSE, "demo", "--size", "tiny", "--no-inductor", "--dump-dir",
                   str(blocked / "dumps")])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"dumps: none complete: {blocked / 'dumps'} could not be written" in result.stdout
    assert "cannot write dumps under" in result.stderr


def test_a_closed_pipe_ends_quietly(monkeypatch, capsys) -> None:
    # `irfuse passes | head -1`: the reader is gone before irfuse writes; no BrokenPipeError
    # traceback, the status a process killed by SIGPIPE has.
    import os

    from irfuse import cli

    read_end, write_end = os.pipe()
    os.close(read_end)
    with capsys.disabled(), os.fdopen(write_end, "w") as closed:
        monkeypatch.setattr(sys, "stdout", closed)
        assert cli.main(["passes", "--json"]) == 141


def test_warnings_point_at_the_callers_code(tmp_path: pathlib.Path) -> None:
    # A config warning and a dump warning, raised deep in irfuse during the first call of the
    # compiled model: both name this file and the line of that call, not irfuse/backend.py.
    import warnings

    import torch

    from irfuse import backend

    backend.clear_reports()
    backend._WARNED.clear()
    torch._dynamo.reset()
    blocked = tmp_path / "file"
    blocked.write_text("")
    model = torch.compile(torch.nn.Linear(4, 4), backend="irfuse", options={
        "inductor": False, "dump_dir": str(blocked / "dumps"),
        "pass_config": {"eliminate_noops": False, "fuse_norm_quant": True}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        model(torch.randn(2, 4))
    ours = [w for w in caught if str(w.message).startswith("irfuse:")]
    assert len(ours) == 2, [str(w.message) for w in caught]
    for w in ours:
        assert (w.filename, w.lineno) == (__file__, line), (w.filename, w.lineno, w.message)
