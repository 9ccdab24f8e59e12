"""`benchmarks/bench_e2e_vllm.py` runs end to end on the CPU at the tiny size: vLLM's attention
ops registered by `benchmarks/vllm_standin.py` (torch reference attention on the CPU), the
stand-in's check, Inductor and irfuse compiled once each, a decode step (ragged contexts) and a
prefill step timed, irfuse's report (on the CPU every attention-family pass fuses, running the
references), and the attention table: irfuse's paged decode (interpreted) at its default launch
shape and at one given with `--decode-configs`, against the stand-in's attention + the quant.
With `--kv-cache-dtype fp8` the same over vLLM's per-tensor FP8 caches: the stand-in's scaled
write (interpreted Triton) equal to torch's, and the fused decode reading the e4m3 pages."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is not None,
                                reason="vLLM's own ops own the vllm namespace")


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
def test_the_cpu_smoke_path_writes_the_table(tmp_path, kv_cache_dtype):
    """In a process of its own: the tests' stand-ins (`vllm_attention.py`) register the same
    op names with their own forward context in this one."""
    out = tmp_path / "e2e.md"
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_e2e_vllm.py"), "--device", "cpu",
         "--tiny", "--layers", "1", "--batches", "3", "--contexts", "20", "--prefill", "16",
         "--ragged", "--rounds", "1", "--check", "--attn-table", "--decode-configs",
         "16:4:1:1:prefetch", "--kv-cache-dtype", kv_cache_dtype, "--out", str(out)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    text = out.read_text()
    assert ("FP8 (per-tensor scales)" in text) == (kv_cache_dtype == "fp8"), text[:600]
    assert text.count("cache write equal to torch's") == 2, text
    rows = [line for line in text.splitlines()
            if re.match(r"\| (decode|prefill) [^|]* \| irfuse \|", line)]
    assert [r.split(" | ")[:2] for r in rows] == [["| decode b3 ctx<=20", "irfuse"],
                                                   ["| prefill 16", "irfuse"]]
    attention = [line for line in text.splitlines()
                 if line.startswith("| decode b3 ctx<=20") and " | irfuse | " not in line]
    assert [r.split(" | ")[0] for r in attention] == [
        "| decode b3 ctx<=20", "| decode b3 ctx<=20, config 16:4:1:1:prefetch"]
    fused = next(line for line in text.splitlines() if line.startswith("- fused by irfuse:"))
    for name in ("enable-qk-norm-rope-fusion 1", "fuse-rope-kvcache 1", "fuse-attn-quant 1"):
        assert name in fused, fused
    # irfuse agrees with Inductor within FP8 rounding of one layer: one e4m3 step (2^-3 of the
    # largest value), where a value sits on a rounding boundary in one graph and not the other
    # (run alone the smoke row reads about 2.4e-2).
    for row in rows + attention:
        assert float(row.rstrip(" |").split(" | ")[-1]) <= 2**-3, row
