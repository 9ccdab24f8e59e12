"""irfuse's collective fusions under vLLM's own parallel state: 2 gloo ranks, vLLM's TP group
`tp:0` (its GroupCoordinator, whose device group torch knows under another name), vLLM's
collective ops and layers (`tp_runs.py` says what runs).

One module fixture runs `tp_runs.py` once (both ranks, every case); each test reads what the
ranks recorded. Counts are vLLM's own asserted counts for these models: 4 matches of the
AR + RMSNorm pass and of sequence parallelism on its all-reduce + RMSNorm test model
(tests/compile/distributed/test_fusion_all_reduce.py, test_sequence_parallelism.py), 1 per
async-TP test model (test_async_tp.py), and 2n + 1 / 2n + 1 / 4n (n = 2 layers) on a decoder of
vLLM's own layers (its end-to-end counts for Llama). Every fused graph runs, on both ranks, and
gives the unfused graph's output bit for bit (Inductor's kernels round differently: within vLLM's
bf16 tolerance, atol = rtol = 1e-2, elementwise).
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

RUNS = pathlib.Path(__file__).with_name("tp_runs.py")
sys.path.insert(0, str(RUNS.parent))
import tp_runs  # noqa: E402

PASS = {"ar": "fuse-allreduce-rms", "sp": "enable-sp", "sp_quant": "enable-sp",
        "async_tp": "fuse-gemm-comms"}
EXPECTED = {
    ("ar_norm", "ar"): 4, ("ar_norm", "sp"): 4,
    ("ar_norm_custom", "ar"): 4, ("ar_norm_custom", "sp"): 4,
    ("ar_norm_fp8", "ar"): 4, ("ar_norm_fp8", "sp"): 4, ("ar_norm_fp8", "sp_quant"): 4,
    ("mm_rs", "async_tp"): 1, ("ag_mm", "async_tp"): 1, ("scaled_mm_rs", "async_tp"): 1,
    ("ag_scaled_mm", "async_tp"): 1, ("cutlass_mm_rs", "async_tp"): 1,
    ("ag_cutlass_mm", "async_tp"): 1,
    ("decoder", "ar"): 5, ("decoder", "sp"): 5, ("decoder", "async_tp"): 8,
}
"""The fused count of the config's pass per compile where it runs (vLLM's asserted counts)."""

CASES = [f"{m}/{c}/{mode}" for m, c, mode in tp_runs.CASES + tp_runs.INDUCTOR_CASES]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[dict]:
    root = tmp_path_factory.mktemp("vllm-tp")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(root / "inductor"),
               PYTHONUNBUFFERED="1")
    env.pop("IRFUSE_DUMP_DIR", None)
    proc = subprocess.run([sys.executable, str(RUNS), str(root)], env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return [json.loads((root / f"rank{r}.json").read_text()) for r in range(tp_runs.WORLD)]


def test_the_tp_group_is_vllms_coordinator(runs):
    for rank in runs:
        assert rank["group"]["unique_name"] == "tp:0"
        assert rank["group"]["device_group"] != "tp:0"  # torch's name of its device group


def _case(runs: list[dict], key: str) -> list[dict]:
    found = [rank["cases"][key] for rank in runs]
    for run in found:
        assert "error" not in run, f"{key}: {run.get('error')}\n{run.get('traceback')}"
    return found


@pytest.mark.parametrize("key", CASES)
def test_fused_counts_are_vllms_and_the_graph_runs(runs, key):
    model, config, mode = key.split("/")
    want = EXPECTED[(model, config)]
    for run in _case(runs, key):
        compiles = run["compiles"]
        assert all(c["error"] is None for c in compiles), compiles
        counts = [c["fused"].get(PASS[config], 0) for c in compiles]
        if mode == "ranges":
            # Two compiles, split at the pass's threshold, as vLLM's compile ranges: AR + RMSNorm
            # below FlashInfer's cap, SP and async TP from sp_min_token_num.
            assert [c["range"][0] for c in compiles] == [1, tp_runs.SPLIT + (config == "ar")]
            assert counts == ([want, 0] if config == "ar" else [0, want]), compiles
            below, above = (c["missed"] for c in compiles)
            skipped = above if config == "ar" else below
            assert any("goes beyond" in m or "starts below" in m for m in skipped), skipped
        else:
            assert counts == [want], compiles
        if config == "sp_quant":
            assert [c["fused"].get("fuse-norm-quant", 0) for c in compiles] == [3]
        if mode == "inductor":  # Inductor's kernels round differently: vLLM's bf16 tolerance
            assert run["within_vllm_tol"], (key, run["max_diff"])
        else:
            assert run["max_diff"] == 0.0, (key, run["max_diff"])


def _ops(runs: list[dict], key: str) -> tuple[dict, dict]:
    (first, *others) = _case(runs, key)
    for other in others:
        assert (other["ops_before"], other["ops_after"]) == (first["ops_before"],
                                                             first["ops_after"])
    return first["ops_before"], first["ops_after"]


@pytest.mark.parametrize("model, n", [("ar_norm", 4), ("ar_norm_fp8", 4), ("decoder", 5)])
def test_op_counts_before_and_after(runs, model, n):
    # AR + RMSNorm: every vLLM all-reduce is in a fused op (FP8: the quant folded in).
    assert _ops(runs, f"{model}/ar/static") == ({"vllm.all_reduce": n},
                                               {"irfuse.all_reduce_rms_norm": n})
    # SP: each all-reduce is vLLM's own reduce-scatter, each norm's output vLLM's all-gather;
    # a dynamic token count is padded before each reduce-scatter (the first residual is the
    # first all-reduce's shard: nothing replicated to pad and slice).
    assert _ops(runs, f"{model}/sp/static") == (
        {"vllm.all_reduce": n}, {"vllm.reduce_scatter": n, "vllm.all_gather": n})
    assert _ops(runs, f"{model}/sp/dynamic")[1] == {
        "vllm.reduce_scatter": n, "vllm.all_gather": n, "constant_pad_nd": n}


def test_async_tp_op_counts(runs):
    for model, before, after in [
        ("mm_rs", "vllm.reduce_scatter", "irfuse.gemm_reduce_scatter"),
        ("scaled_mm_rs", "vllm.reduce_scatter", "irfuse.gemm_reduce_scatter"),
        ("ag_mm", "vllm.all_gather", "irfuse.all_gather_gemm"),
        ("ag_scaled_mm", "vllm.all_gather", "irfuse.all_gather_gemm"),
        ("cutlass_mm_rs", "vllm.reduce_scatter", "irfuse.gemm_reduce_scatter"),
        ("ag_cutlass_mm", "vllm.all_gather", "irfuse.all_gather_gemm"),
    ]:
        for mode in ("static", "dynamic"):
            assert _ops(runs, f"{model}/async_tp/{mode}") == ({before: 1}, {after: 1}), model
    # The decoder: o and down into reduce-scatters (4), gate_up and the next qkv after
    # all-gathers (4); the embedding's reduce-scatter (its input is no GEMM) and the final norm's
    # gather (the model's output) stay vLLM's collectives.
    assert _ops(runs, "decoder/async_tp/static") == (
        {"vllm.all_reduce": 5},
        {"vllm.reduce_scatter": 1, "vllm.all_gather": 1, "irfuse.gemm_reduce_scatter": 4,
         "irfuse.all_gather_gemm": 4})
