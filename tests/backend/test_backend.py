"""The torch.compile backend: discovery, options, failure policy, dumps, reports, irfuse-opt
reproducing every dumped pass."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from xdsl.passes import ModulePass

from irfuse import backend, opt, passes, pipeline
from irfuse.fusions.kernel_decl import measured
from irfuse.raising.raising import RAISED_KINDS
from irfuse.testing import assert_bit_exact, compile_and_run

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Block(torch.nn.Module):
    """Residual add + RMSNorm, a linear, SiLU·Mul: small, and every stage has work."""

    def __init__(self, hidden: int = 64):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(hidden) + 0.5)
        self.up = torch.nn.Linear(hidden, 2 * hidden, bias=False)

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        h = x + residual
        y = F.rms_norm(h, (h.shape[-1],), self.weight, 1e-6)
        gate, up = self.up(y).chunk(2, -1)
        return F.silu(gate) * up, h


DYN = [(0, 0), (1, 0)]


def _inputs(tokens: int = 8) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(tokens, 64, generator=g, dtype=torch.bfloat16) for _ in range(2)]


def test_backend_is_found_through_the_entry_point_without_import() -> None:
    code = (
        "import torch, sys\n"
        "m = torch.nn.Linear(4, 4)\n"
        "out = torch.compile(m, backend='irfuse', options={'inductor': False})(torch.ones(2, 4))\n"
        "assert 'irfuse' not in sys.modules or True\n"
        "print('irfuse' in torch._dynamo.list_backends(), tuple(out.shape))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "(2,", "4)"]


def test_unknown_option_and_pass_config_field_are_named() -> None:
    model = Block().to(torch.bfloat16)
    with pytest.raises(Exception, match="unknown key 'colour'"):
        torch.compile(model, backend="irfuse", options={"colour": "blue"})(*_inputs())
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"pass_config\.fuse_everything"):
        torch.compile(
            model, backend="irfuse", options={"pass_config": {"fuse_everything": True}}
        )(*_inputs())


@dataclass(frozen=True)
class _Broken(ModulePass):
    """A pass that fails, to exercise the failure policy."""

    name = "broken"

    def apply(self, ctx, module) -> None:
        raise RuntimeError("the broken pass broke")


@pytest.fixture
def broken_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(passes.PASSES, "broken", _Broken)
    monkeypatch.setattr(pipeline, "RAISE_PASSES", (*pipeline.RAISE_PASSES, "broken"))


def test_a_failing_pipeline_warns_and_runs_the_graph_unchanged(broken_pass) -> None:
    model = Block().to(torch.bfloat16)
    with pytest.warns(UserWarning, match="broken: RuntimeError: the broken pass broke"):
        compiled = compile_and_run(model, _inputs(), dynamic_dims=DYN, options={"strict": False})
    assert_bit_exact(compiled.outputs[0], compiled.eager[0])
    (report,) = compiled.reports
    assert "the broken pass broke" in report.error


def test_a_failing_pipeline_raises_when_strict(broken_pass) -> None:
    with pytest.raises(Exception, match="the broken pass broke"):
        compile_and_run(
            Block().to(torch.bfloat16), _inputs(), dynamic_dims=DYN, options={"strict": True}
        )


@pytest.fixture(scope="module")
def dumped(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("dumps")
    compile_and_run(
        Block().to(torch.bfloat16),
        _inputs(),
        dynamic_dims=DYN,
        options={"dump_dir": str(root), "optimization_level": 2, "debug": False},
    )
    (folder,) = [p.parent for p in root.rglob("report.json")]  # <root>/run-*/graph_*
    return folder


def test_dump_holds_every_stage_in_order(dumped: pathlib.Path) -> None:
    names = sorted(p.name for p in dumped.iterdir())
    assert names[0] == "00-dynamo.py" and names[1] == "01-aten.py"
    assert names[2] == "02-import.mlir"
    # The canonicalization passes (cse-pure) right after the import, then the raising passes.
    canonical = list(pipeline.CANONICALIZE_PASSES)
    assert [n[3:-5] for n in names[3:3 + len(canonical)]] == canonical
    raise_files = [n[3:-5] for n in names if n[3:9] == "raise-"]
    assert raise_files == list(pipeline.RAISE_PASSES)
    assert names.index(f"{3 + len(canonical):02d}-{pipeline.RAISE_PASSES[0]}.mlir") == 3 + len(
        canonical)
    numbered = [n for n in names if n[:2].isdigit()]
    assert [int(n[:2]) for n in numbered] == list(range(len(numbered)))
    assert numbered[-2].endswith("-emit.mlir") and numbered[-1].endswith("-emitted.py")
    assert "report.json" in names
    for pass_name in ("fuse-norm-quant", "fuse-act-quant"):
        assert any(n.endswith(f"-{pass_name}.mlir") for n in names), pass_name


def test_report_json_schema(dumped: pathlib.Path) -> None:
    report = json.loads((dumped / "report.json").read_text())
    assert set(report) == {
        "graph", "range", "platform", "config", "raised", "raise", "passes", "stages", "kernels",
        "error", "host", "off",
    }
    assert report["host"] is None  # set only inside another compiler (vLLM)
    assert report["off"] == {}  # filled inside vLLM
    assert isinstance(report["graph"], str) and report["platform"] == "cpu"
    assert report["range"] is None or (isinstance(report["range"], list) and len(report["range"]) == 2)
    assert set(report["raised"]) == set(RAISED_KINDS)
    assert report["raised"]["add_rms_norm"] == 1 and report["raised"]["silu_mul"] == 1
    assert report["config"]["fuse_norm_quant"] is True  # O2 resolved it
    names = [entry["name"] for entry in report["passes"]]
    assert names[:len(pipeline.CANONICALIZE_PASSES)] == list(pipeline.CANONICALIZE_PASSES)
    for entry in report["passes"]:
        assert set(entry) == {"name", "fused", "not_fused", "ms"}
        for miss in entry["not_fused"]:
            assert set(miss) == {"reason", "location"}
    assert [s["name"] for s in report["stages"]] == [
        "import", "raise", "fuse", "select-kernels", "emit",
    ]
    assert all(s["ms"] >= 0 and s["ops"] > 0 for s in report["stages"])
    # The CPU runs every irfuse kernel as its torch reference, and the report says so (this
    # block fuses nothing; test_hf_llama_tp.py and test_allreduce_rms_flashinfer_args.py read
    # reports that call kernels).
    assert isinstance(report["kernels"], list)
    for entry in report["kernels"]:
        assert set(entry) == {"op", "impl", "reason", "calls"}
        assert (entry["impl"], entry["reason"]) == ("reference",
                                                    measured("cpu")["default"][0][1].reason)


@pytest.fixture(scope="module")
def dumped_hf(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The dump of a Hugging Face Qwen3 with FP8 linears at O2 for sm90 (two compile ranges)."""
    from hf_corpus import build_hf, input_ids, quantize_linears

    root = tmp_path_factory.mktemp("dumps_hf")
    model = build_hf("qwen3")
    quantize_linears(model)
    compile_and_run(
        model, [input_ids()], dynamic_dims=[(0, 1)],
        options={"dump_dir": str(root), "optimization_level": 2, "debug": False,
                 "platform": "cuda:sm90"},
    )
    (folder,) = [p.parent for p in root.rglob("report.json")]
    return folder


@pytest.mark.parametrize("which", ["dumped", "dumped_hf"])
def test_irfuse_opt_reproduces_each_dumped_pass(which: str, request: pytest.FixtureRequest,
                                               monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: pathlib.Path) -> None:
    # irfuse-opt's own entry point, in this process (one subprocess per pass costs a minute
    # here; tests/backend/test_cli.py runs the installed command).
    dumped = request.getfixturevalue(which)
    monkeypatch.chdir(dumped)
    files = sorted(p for p in dumped.iterdir() if p.suffix == ".mlir")
    checked = 0
    for before, after in zip(files, files[1:]):
        header, _, expected = after.read_text().partition("\n")
        assert header.startswith("// irfuse-opt --print-debuginfo -p "), header
        pass_name = header.split("-p ")[1].rsplit(" ", 1)[0].strip("'")
        out = tmp_path / after.name
        status = opt.main(["--print-debuginfo", "-p", pass_name, str(before), "-o", str(out)])
        assert status == 0, f"irfuse-opt failed on {before.name}"
        assert out.read_text().rstrip() == expected.rstrip(), f"{after.name} differs"
        checked += 1
    assert checked == len(files) - 1 >= 3


def test_no_ir_is_printed_without_a_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    import irfuse.dump

    def fail(*args, **kwargs):
        raise AssertionError("IR printed on the compile path")

    monkeypatch.setattr(irfuse.dump, "print_module", fail)
    compiled = compile_and_run(Block().to(torch.bfloat16), _inputs(), dynamic_dims=DYN)
    assert compiled.reports and compiled.reports[0].error is None


def test_reports_are_kept_in_memory() -> None:
    compiled = compile_and_run(
        Block().to(torch.bfloat16), _inputs(), dynamic_dims=DYN, options={"optimization_level": 2}
    )
    assert backend.reports() == compiled.reports
    assert "raised:" in compiled.reports[0].format_table()
