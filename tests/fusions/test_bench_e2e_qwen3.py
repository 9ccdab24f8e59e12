"""`benchmarks/bench_e2e_qwen3.py` runs end to end on the CPU at the tiny size: both steps
compile under Inductor and irfuse, every attention-family pass fuses its site in each, and the
ratio table and kernel profiles are written (the figures themselves mean nothing on the CPU)."""

from __future__ import annotations

import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_e2e_qwen3  # noqa: E402 (a script beside the benchmarks, by path)


def test_the_cpu_smoke_path_writes_the_table(tmp_path):
    out = tmp_path / "e2e.md"
    rc = bench_e2e_qwen3.main(["--device", "cpu", "--tiny", "--layers", "1", "--batch", "2",
                               "--context", "20", "--prefill", "16", "--rounds", "1",
                               "--profile", "--out", str(out)])
    assert rc == 0
    text = out.read_text()
    rows = [line for line in text.splitlines() if re.match(r"\| (decode|prefill) ", line)]
    assert [r.split(" | ")[:2] for r in rows] == [["| decode b2 ctx20", "irfuse"],
                                                   ["| prefill 16", "irfuse"]]
    for step in ("decode b2 ctx20", "prefill 16"):
        note = next(line for line in text.splitlines() if line.startswith(f"- {step}:"))
        for name in ("enable-qk-norm-rope-fusion 1", "fuse-rope-kvcache 1",
                     "fuse-attn-quant 1"):
            assert name in note, note
        assert f"CPU ops of irfuse, {step}" in text
        assert f"CPU ops of inductor, {step}" in text
    for row in rows:  # irfuse agrees with Inductor within FP8 rounding of one layer
        assert float(row.rstrip(" |").split(" | ")[-1]) < 0.1, row


def test_the_isolate_mode_runs_each_variant_alone(tmp_path, capsys):
    """`--isolate` on the CPU: one line per (variant, IRFUSE_PDL), each from its own child."""
    out = tmp_path / "iso.md"
    rc = bench_e2e_qwen3.main(["--device", "cpu", "--tiny", "--layers", "1", "--batch", "2",
                               "--context", "20", "--rounds", "1", "--isolate",
                               "--out", str(out)])
    lines = [ln for ln in out.read_text().splitlines() if ln.startswith("isolate ")]
    assert rc == 0, lines
    assert [ln.split()[1:3] for ln in lines] == [["inductor", "PDL"], ["irfuse", "PDL"],
                                                 ["irfuse", "PDL=0"]]
    assert all(" ok (" in ln for ln in lines), lines
