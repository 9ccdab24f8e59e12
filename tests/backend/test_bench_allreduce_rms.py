"""benchmarks/bench_allreduce_rms.py's pure-Python parts on the CPU: it imports, parses its
arguments (and refuses bad ones), formats its table, and says it needs GPUs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).parents[2] / "benchmarks" / "bench_allreduce_rms.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_allreduce_rms", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_arguments(bench):
    args = bench.parse_args(["--tokens", "1,64,8192", "--quant", "fp8", "--world", "4"])
    assert args.tokens == [1, 64, 8192] and args.quant == ["fp8"] and args.world == 4
    assert args.hidden == 8192
    default = bench.parse_args([])
    assert default.tokens == list(bench.DEFAULT_TOKENS) and default.quant == ["none", "fp8"]
    assert default.residual == ["add"] and default.group == "torch"
    first = bench.parse_args(["--residual", "add,none", "--group", "vllm"])
    assert first.residual == ["add", "none"] and first.group == "vllm"
    for bad in (["--quant", "int4"], ["--tokens", "1,x"], ["--tokens", "0"], ["--world", "1"],
                ["--hidden", "100"], ["--residual", "mul"], ["--group", "nccl"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def test_table(bench):
    rows = [{"quant": "none", "residual": "none", "T": 1, "mb": 0.02, "check": "ok",
             "nccl+inductor": 20.0, "nccl+triton": 18.0, "flashinfer": 10.0, "symm_mem": 12.0},
            {"quant": "fp8", "residual": "add", "T": 8192, "mb": 128.0, "check": "ok",
             "nccl+inductor": 400.0, "nccl+triton": 380.0}]
    table = bench.markdown(rows, "header")
    assert ("| none | none | 1 | 0.02 | 20.0 | 18.0 | 0.90 | 10.0 | 0.50 | 12.0 | 0.60 | ok |"
            in table)
    assert "| fp8 | add | 8192 | 128.00 | 400.0 | 380.0 | 0.95 | - | - | - | - | ok |" in table
    assert "symm_mem µs | symm_mem / inductor | check |" in table
    assert "fused / unfused: median 0.75, 0.50-0.95" in table


def test_needs_gpus_on_the_cpu(bench, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine runs the benchmark itself")
    assert bench.main(["--tokens", "1"]) == 2
    assert "needs CUDA GPUs" in capsys.readouterr().err


def test_symm_mem_candidate_is_dropped_with_its_reason(bench, capsys):
    import torch

    from irfuse.models.dist import fake_process_group

    x = torch.randn(4, 64, dtype=torch.bfloat16)
    with fake_process_group(2) as pg:
        assert bench._symm_mem(x, x, x[0], None, pg.group_name, "none") is None
    assert "symm_mem at 4 tokens: the input is on cpu, not a CUDA device" in capsys.readouterr().out
