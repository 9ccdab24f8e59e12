"""fuse-gemm-comms on the built-in tensor-parallel models under the fake process group: with only
fuse_gemm_comms set, the config turns enable-sp on; every reduce-scatter (after o and down) and
every all-gather (into gate_up, the next qkv, lm_head) fuses with its GEMM, plain or FP8-scaled,
and the emitted graph calls the async-TP ops (the reference on the CPU). The near misses say why.
The 2- and 4-process gloo runs against the unsharded model are in test_enable_sp.py; the CUDA
symmetric-memory kernels in tests/kernels/test_gemm_comms_gpu.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from xdsl.parser import Parser

from irfuse import remarks
from irfuse.context import make_context
from irfuse.models import build
from irfuse.models.dist import fake_process_group
from irfuse.passes import instantiate
from irfuse.testing import compile_and_run

FILECHECK = Path(__file__).parents[2] / "filecheck" / "rewrites" / "fuse-gemm-comms.mlir"


def _stage(dump: Path, suffix: str) -> str:
    (found,) = list(dump.glob(f"run-*/graph_*/*-{suffix}"))
    return found.read_text()


def _count(text: str, what: str) -> int:
    return len(re.findall(rf"= {re.escape(what)} ", text))


@pytest.mark.parametrize("name, scaled", [("llama-tp", False), ("llama-fp8-tp", True)])
def test_every_collective_fuses_with_its_gemm(tmp_path, name, scaled):
    layers = 2
    with fake_process_group(2):
        built = build(name, num_layers=layers)
        result = compile_and_run(
            built.model, built.example_inputs, dynamic_dims=(),
            options={"dump_dir": str(tmp_path), "pass_config": {
                "fuse_gemm_comms": True, "sp_min_token_num": 4, "eliminate_noops": True}})
    (report,) = result.reports
    counts = {p.name: p.count for p in report.passes}
    assert counts["enable-sp"] == 2 * layers  # implied by fuse_gemm_comms
    assert counts["fuse-gemm-comms"] == 4 * layers
    assert [m.reason for p in report.passes if p.name == "fuse-gemm-comms" for m in p.missed] \
        == []
    before, after = _stage(tmp_path, "enable-sp.mlir"), _stage(tmp_path, "fuse-gemm-comms.mlir")
    assert (_count(before, "coll.reduce_scatter"), _count(before, "coll.all_gather")) \
        == (2 * layers, 2 * layers)
    assert _count(after, "coll.reduce_scatter") == _count(after, "coll.all_gather") == 0
    # o and down into reduce-scatters; gate_up (each layer), the next layer's qkv and lm_head
    # after all-gathers. The first qkv reads the replicated embedding's norm: no collective.
    assert _count(after, "fused.gemm_reduce_scatter") == 2 * layers
    assert _count(after, "fused.all_gather_gemm") == 2 * layers
    scaled_rs = len(re.findall(r"= fused.gemm_reduce_scatter [^\n]*scale_a", after))
    scaled_ag = len(re.findall(r"= fused.all_gather_gemm [^\n]*scale_a", after))
    # FP8: every GEMM but lm_head (which stays bf16) is scaled.
    assert (scaled_rs, scaled_ag) == ((2 * layers, 2 * layers - 1) if scaled else (0, 0))
    emitted = _stage(tmp_path, "emitted.py")
    assert emitted.count("torch.ops.irfuse.gemm_reduce_scatter.default") == 2 * layers
    assert emitted.count("torch.ops.irfuse.all_gather_gemm.default") == 2 * layers
    assert "_c10d_functional" not in emitted


def test_near_misses_say_why():
    ctx = make_context()
    module = Parser(ctx, FILECHECK.read_text()).parse_module()
    with remarks.collecting() as sink:
        instantiate("fuse-gemm-comms").apply(ctx, module)
    module.verify()
    assert [m.reason for m in sink.missed] == [
        "GEMM + reduce-scatter not fused: the GEMM has a bias",
        "GEMM + reduce-scatter not fused: the GEMM's result has other users",
        "GEMM + reduce-scatter not fused: the reduction is max, not sum or avg",
        "all-gather + GEMM not fused: the coll.all_gather is not along the rows of a 2-D tensor",
        "all-gather + GEMM not fused: the gathered tensor has users besides one GEMM",
    ]
    # @plain, @scaled, @rank3 and @padded: a reduce-scatter and a gather each; @row_wise: two
    # gathers and a reduce-scatter; @padded_row_wise: a gather.
    assert sink.fused == 12
