"""irfuse inside a real vLLM engine at TP 2 (the CPU build, 2 workers on this machine's 2 cores):
greedy tokens and what the reports say (`tp_engine.py` says what runs).

vLLM's CPU engine spells its TP all-reduce `_C.shm_allreduce` (its communicator's shared memory,
on group `tp:0`); irfuse raises it to the group's all-reduce. With enable_sp (irfuse's own
option: vLLM 0.32 has no SP pass) the 2n + 1 all-reduces of the 2-layer Llama become vLLM's
reduce-scatter and all-gather around the norms, on a dynamic num_tokens (an odd prefill of 11
tokens is padded to 12), and the tokens are vLLM's own compile's. The two engines take about
3.5 minutes here. `IRFUSE_TP_ENGINES=all` adds the engine with fuse_allreduce_rms (5 fused, the
same tokens; 90 s more); `IRFUSE_TP_ENGINES=none` skips them.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (make test installs it into "
                    ".venv-vllm and runs these tests there)")

from irfuse.cli import load_report  # noqa: E402

ENGINE = pathlib.Path(__file__).with_name("tp_engine.py")
CHOICE = os.environ.get("IRFUSE_TP_ENGINES", "")
RUNS = ["vllm", "irfuse-sp"] + (["irfuse-ar"] if CHOICE == "all" else [])
if CHOICE == "none":
    pytest.skip("IRFUSE_TP_ENGINES=none", allow_module_level=True)


@pytest.fixture(scope="module")
def engines(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("vllm-tp2")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(root / "inductor"),
               VLLM_CACHE_ROOT=str(root / "vllm-cache"), PYTHONUNBUFFERED="1")
    env.pop("IRFUSE_DUMP_DIR", None)
    proc = subprocess.run([sys.executable, str(ENGINE), str(root / "out.json"), *RUNS],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-6000:]
    results = json.loads((root / "out.json").read_text())
    for name, run in results.items():
        assert "error" not in run, f"{name}: {run['error']}\n{proc.stderr[-4000:]}"
    return results


def _reports(engines: dict, run: str) -> list:
    dump = pathlib.Path(engines[run]["dump"])
    return [load_report(json.loads(p.read_text())) for p in sorted(dump.rglob("report.json"))]


@pytest.mark.parametrize("run", RUNS[1:])
def test_tp2_engine_tokens_equal_vllms_own_compile(engines, run):
    assert [len(t) for t in engines["vllm"]["tokens"]] == [4, 4]
    assert engines[run]["tokens"] == engines["vllm"]["tokens"]


@pytest.mark.parametrize("run, pass_name", [("irfuse-sp", "enable-sp"),
                                            ("irfuse-ar", "fuse-allreduce-rms")])
def test_each_rank_fuses_every_all_reduce(engines, run, pass_name):
    if run not in engines:
        pytest.skip("IRFUSE_TP_ENGINES=all runs it")
    reports = _reports(engines, run)
    assert len(reports) == 2  # one compile per rank (vLLM's CPU build: one range)
    for report in reports:
        assert report.error is None
        assert report.raised["all_reduce"] == 5  # vLLM's _C.shm_allreduce on tp:0
        assert sum(p.count for p in report.passes if p.name == pass_name) == 5  # 2n + 1
    if run == "irfuse-sp":
        for emitted in pathlib.Path(engines[run]["dump"]).rglob("*-emitted.py"):
            code = emitted.read_text()
            assert code.count("torch.ops.vllm.reduce_scatter.default(") == 5
            assert code.count("torch.ops.vllm.all_gather.default(") == 5
            assert code.count("= torch.ops.aten.constant_pad_nd.default(") >= 5
