"""Programmatic dependent launch (the configs' `pdl`; `triton_support.pdl_launch`).

A kernel launched with PDL is scheduled while the kernel before it drains, so it must wait
(`griddepcontrol.wait`) before it touches global memory. Checked:

- where it stays off (CPU tensors, the interpreter), and `IRFUSE_PDL`'s values, a bad one
  refused (where the wait sits in the SASS: `test_sass_load_order.py`);
- on the GPU: each benchmarked op's default config gives the same bits with PDL as without; and a
  chain of PDL launches, each reading what the one before wrote, replayed as a CUDA graph,
  equals the chain without PDL. That is the case a missing or late wait gets wrong: every
  kernel releases the next one at its start, so the next one's programs run beside it.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys

import pytest
import torch

from irfuse.kernels import norm_quant, triton_support

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_irfuse_pdl_overrides_the_configs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IRFUSE_PDL", raising=False)
    assert triton_support.pdl_override() is None
    monkeypatch.setenv("IRFUSE_PDL", "1")
    assert triton_support.pdl_override() is True
    monkeypatch.setenv("IRFUSE_PDL", "0")
    assert triton_support.pdl_override() is False
    monkeypatch.setenv("IRFUSE_PDL", "yes")
    with pytest.raises(ValueError, match="IRFUSE_PDL must be 0 or 1"):
        triton_support.pdl_override()


def test_pdl_is_off_off_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IRFUSE_PDL", "1")
    cpu = torch.device("cpu")
    assert triton_support.pdl_launch(True, cpu) == {"PDL": False}
    assert triton_support.pdl_launch(None, cpu) == {"PDL": False}
    monkeypatch.setattr(triton_support, "interpreting", lambda: True)
    assert triton_support.pdl_launch(True, torch.device("cuda", 0)) == {"PDL": False}


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["add_rms_static", "rms_static", "add_rms_per_token",
                                "add_rms_group128", "silu_static", "silu_static_2t",
                                "silu_group128", "silu_nvfp4"])
@pytest.mark.parametrize("tokens", [1, 4096])
def test_pdl_gives_the_same_bits_on_gpu(op: str, tokens: int) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_norm_act_quant as bench
    import kernel_cases

    spec = bench.op_specs()[op]
    width = bench.INTERMEDIATE[4096] if spec.act else 4096
    d = spec.make(tokens, width)
    cfg = spec.default(tokens, width)
    assert kernel_cases.same_bits(spec.kernel(d, dataclasses.replace(cfg, pdl=True)),
                                  spec.kernel(d, dataclasses.replace(cfg, pdl=False)))


@pytest.mark.gpu
def test_a_chain_of_pdl_launches_reads_what_the_one_before_wrote() -> None:
    """Residual add + RMSNorm over 16384 rows (about 100 µs), then the same over its last 64
    rows, four times, every launch reading the one before's outputs. The 64-row launch is
    released when the big one's last programs start, so its programs run while exactly the
    rows they read are being written. Captured in a CUDA graph; every output zeroed before
    each replay, so that a read before the wait would see zeros, not a previous replay's
    values."""
    torch.manual_seed(0)
    x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x)
    w = torch.rand(4096, device="cuda", dtype=torch.bfloat16) + 0.5

    def chain(pdl: bool) -> list[torch.Tensor]:
        cfg = norm_quant.RowConfig(1, 16, early=True, vec=8, pdl=pdl)
        outs, y, res = [], x, r
        for _ in range(4):
            y, res = norm_quant.rms_norm(y, w, 1e-6, residual=res, config=cfg)
            tail = norm_quant.rms_norm(y[-64:], w, 1e-6, residual=res[-64:], config=cfg)
            outs += [y, res, *tail]
        return outs

    expected = chain(False)
    chain(True)  # compiles the PDL kernel outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = chain(True)
    for _ in range(3):
        for t in got:
            t.zero_()
        graph.replay()
        torch.cuda.synchronize()
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
