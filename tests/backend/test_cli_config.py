"""`irfuse config` and `irfuse passes`: output, errors, and the docs' copy of the matrix."""

from __future__ import annotations

import json
import pathlib

import pytest

from irfuse import support_matrix
from irfuse.cli_config import COLUMNS, config_main, passes_main, render_markdown

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _config(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert config_main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_config_prints_the_resolved_config(capsys: pytest.CaptureFixture[str]) -> None:
    out = _config(capsys, "--platform", "cuda:sm90", "--tp", "2", "--hidden", "8192",
                  "--flashinfer", "--scheme", "fp8-static-tensor", "-O", "2")
    pc = out["pass_config"]
    assert out["platform"] == "cuda:sm90" and out["tp_size"] == 2
    assert out["optimization_level"] == 2
    assert (pc["fuse_norm_quant"], pc["fuse_act_quant"], pc["fuse_allreduce_rms"],
            pc["enable_sp"]) == (True, True, True, False)
    assert pc["fi_allreduce_fusion_max_size_mb"] == 64.0


@pytest.mark.parametrize(
    "argv",
    [["-O1"], ["-O", "1"], ["-O=1"], ["--optimization-level", "1"],
     ["--compilation-config", '{"optimization_level": 1}'], ["-cc", '{"optimization_level": 1}'],
     ["-cc.optimization_level=1"]],
)
def test_config_level_spellings(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    out = _config(capsys, "--platform", "cpu", *argv)
    assert out["optimization_level"] == 1


def test_config_pass_flags_and_lists(capsys: pytest.CaptureFixture[str]) -> None:
    out = _config(capsys, "--platform", "cpu", "-cc.pass_config.fuse_norm_quant=False",
                  "-cc.compile_sizes+=8,16", "--tp", "2")
    assert out["pass_config"]["fuse_norm_quant"] is False
    assert out["pass_config"]["fuse_act_quant"] is True  # O2 default on the CPU
    assert out["compile_sizes"] == [8, 16]


def test_config_o0_turns_everything_off(capsys: pytest.CaptureFixture[str]) -> None:
    out = _config(capsys, "--platform", "cuda:sm90", "--tp", "2", "--flashinfer", "-O0")
    assert not any(out["pass_config"][f] for f in support_matrix.FLAGS)


def test_config_explain(capsys: pytest.CaptureFixture[str]) -> None:
    out = _config(capsys, "--platform", "cuda:sm90", "--tp", "2", "--hidden", "8192",
                  "--dtype", "bf16", "--flashinfer", "--explain",
                  "-cc.pass_config.enable_sp=true", "-cc.pass_config.fuse_norm_quant=true",
                  "--scheme", "nvfp4")
    assert out["config"]["pass_config"]["sp_min_token_num"] == 1024
    assert out["notes"]["enable_sp"] == "set by the user"
    assert any("fuse_norm_quant turned off" in w for w in out["warnings"])
    assert [r["range"] for r in out["compile_ranges"]] == [[1, 256], [257, 1023], [1024, 4096],
                                                           [4097, 8192], [8193, None]]
    top = out["compile_ranges"][3]["skipped"]
    assert "up to 4096 tokens" in top["fuse-allreduce-rms"]


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["-cc.pass_config.fuse_nope=1"], ["'pass_config.fuse_nope'", "fuse_norm_quant"]),
        (["-cc.pass_config.enable_sp=perhaps"], ["'pass_config.enable_sp'", "'perhaps'",
                                                 "true, false"]),
        (["--platform", "cuda"], ["bad platform 'cuda'", "cuda:smNN"]),
        (["--dtype", "int3"], ["'dtype'", "'int3'"]),
        (["--bogus"], ["unknown argument '--bogus'"]),
    ],
)
def test_config_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str],
                              fragments: list[str]) -> None:
    assert config_main(["--platform", "cpu", *argv] if "--platform" not in argv else argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("irfuse config: error: ")
    for fragment in fragments:
        assert fragment in err, err


def test_passes_text_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert passes_main([]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    for column in COLUMNS:
        assert column in header
    for row in support_matrix.passes():
        assert row.name in out and row.flag in out
    assert "Range rules (" in out and "Schemes:" in out


def test_passes_markdown_has_one_row_per_pass(capsys: pytest.CaptureFixture[str]) -> None:
    assert passes_main(["--markdown"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(support_matrix.passes())
    assert rows[1].startswith("| eliminate-noops | eliminate_noops |")
    assert all(line.count(" | ") == len(COLUMNS) - 1 for line in rows)


def test_passes_json_with_platform(capsys: pytest.CaptureFixture[str]) -> None:
    assert passes_main(["--json", "--platform", "rocm", "--scheme", "fp8-static-tensor"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["pass"] for d in data] == [r.name for r in support_matrix.passes()]
    by_name = {d["pass"]: d for d in data}
    assert by_name["fuse-norm-quant"]["can_apply"]["ok"] is True
    assert by_name["fuse-allreduce-rms"]["can_apply"]["ok"] is False
    assert by_name["fuse-norm-quant"]["default level"] == "O1"


def test_passes_platform_verdicts_in_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert passes_main(["--platform", "rocm"]) == 0
    out = capsys.readouterr().out
    assert "On rocm:" in out
    assert ("fuse-allreduce-rms: cannot apply: FlashInfer's fused all-reduce kernels are built "
            "for sm90 and sm100 only") in out
    assert "fuse-norm-quant: can apply" in out


def test_passes_bad_platform(capsys: pytest.CaptureFixture[str]) -> None:
    assert passes_main(["--platform", "tpu"]) == 2
    assert "bad platform 'tpu'" in capsys.readouterr().err


@pytest.mark.parametrize("doc", [DOCS, DOCS.parent.parent / "README.md"], ids=lambda p: p.name)
def test_docs_show_the_same_matrix(doc: pathlib.Path) -> None:
    text = doc.read_text()
    begin, end = "<!-- passes-table:begin -->\n", "<!-- passes-table:end -->"
    assert begin in text and end in text
    copy = text[text.index(begin) + len(begin):text.index(end)]
    assert copy == render_markdown(), f"{doc.name} is stale: paste `irfuse passes " \
        "--markdown` between the passes-table markers"
