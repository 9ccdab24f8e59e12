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
    assert "|irfuse - eager| / |eager| = 0.00e+00" in out and ": OK" in out
    report = _run([*IRFUSE, "report", str(tmp_path)])
    assert report.returncode == 0 and "fuse-norm-quant" in report.stdout


def test_report_rejects_a_file_that_is_not_a_report(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "report.json"
    bad.write_text('{"graph": 1}')
    result = _run([*IRFUSE, "report", str(bad)])
    assert result.returncode == 1 and "not a compile report" in result.stderr


def test_unknown_command() -> None:
    result = _run([*IRFUSE, "frobnicate"])
    assert result.returncode == 2 and "unknown command 'frobnicate'" in result.stderr


def test_opt_unknown_pass_lists_the_known_ones(tmp_path: pathlib.Path) -> None:
    ir = tmp_path / "x.mlir"
    ir.write_text("func.func @f() {\n  func.return\n}\n")
    result = _run([*OPT, str(ir), "-p", "fuse-everything"])
    assert result.returncode == 2
    assert "unknown pass 'fuse-everything'" in result.stderr
    for known in ("raise-rms-norm", "fuse-norm-quant", "select-kernels"):
        assert known in result.stderr


def test_opt_bad_ir_names_file_line_and_column(tmp_path: pathlib.Path) -> None:
    ir = tmp_path / "bad.mlir"
    ir.write_text('func.func @f(%x: !irfuse.tensor<[8], f32>) {\n  %y = aten.call "aten::neg.default"(%x : (!irfuse.tensor<[8], f32>) -> !irfuse.tensor<[8], f32>\n  func.return\n}\n')
    result = _run([*OPT, str(ir)])
    assert result.returncode == 1
    assert f"{ir}:2:" in result.stderr and "parse error" in result.stderr


def test_demo_with_an_unknown_flag_is_a_clear_error(capsys) -> None:
    from irfuse import cli

    assert cli.main(["demo", "--platform", "cuda:sm90"]) == 2
    err = capsys.readouterr().err
    assert "irfuse demo: unknown argument '--platform'" in err and "Traceback" not in err
    assert cli.main(["demo", "--model", "nope"]) == 2
    err = capsys.readouterr().err
    assert "irfuse demo: unknown model 'nope'; known: llama, " in err and "Traceback" not in err
