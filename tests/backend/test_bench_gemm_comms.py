"""benchmarks/bench_gemm_comms.py on the CPU: its arguments, its table, that it needs GPUs, and its
smoke test (2 gloo ranks, the reference on both sides, every case, the group named as vLLM's
coordinator tp:0)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).parents[2] / "benchmarks" / "bench_gemm_comms.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_gemm_comms", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_arguments(bench):
    args = bench.parse_args(["--tokens", "8,16", "--cases", "ag,rs-rows", "--group", "vllm"])
    assert args.tokens == [8, 16] and args.cases == ["ag", "rs-rows"] and args.group == "vllm"
    assert bench.parse_args([]).cases == list(bench.CASES)
    for bad in (["--cases", "ag,xx"], ["--tokens", "a"], ["--world", "1"], ["--group", "x"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def test_table(bench):
    rows = [{"case": "ag-rows-replicated", "T": 512, "unfused": 40.0, "fused": 30.0,
             "diff": 1e-3},
            {"case": "rs", "T": 8, "error": "RuntimeError: no P2P"}]
    table = bench.markdown(rows, "header")
    assert "| ag-rows-replicated | 512 | 40.0 | 30.0 | 0.75 | 1.0e-03 |" in table
    assert "| rs | 8 | - | - | - | RuntimeError: no P2P |" in table


def test_needs_gpus_on_the_cpu(bench, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine runs the benchmark itself")
    assert bench.main(["--tokens", "8"]) == 2
    assert "needs CUDA GPUs" in capsys.readouterr().err


@pytest.mark.dist
def test_cpu_smoke_every_case(bench):
    # As the multi-GPU run calls it: a script (its ranks re-import it as __main__).
    done = subprocess.run(
        [sys.executable, str(PATH), "--device", "cpu", "--world", "2", "--tokens", "8",
         "--hidden", "64", "--intermediate", "128", "--rep", "1", "--rounds", "1",
         "--group", "vllm"], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(PATH.parents[1])})
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for case in bench.CASES:  # the reference on both sides: the same bits
        (row,) = [line for line in out.splitlines() if line.startswith(f"| {case} | 8 | ")]
        assert row.endswith("| 0.0e+00 |"), row
