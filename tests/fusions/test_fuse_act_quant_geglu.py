"""fuse-act-quant on GeGLU (`gelu(gate) * up`, Gemma's MLP) end to end on the CPU.

GeGLU is the gated-activation op (`act.silu_mul`) with `activation` gelu_tanh or gelu, so it
fuses with the quant that follows exactly as SiLU·Mul does: small modules in each spelling (the
fused gate_up split `gelu(x[..., :d]) * x[..., d:]`, separate gate and up, vLLM's
`_C.gelu[_tanh]_and_mul`) and each approximate, followed by a static per-tensor, per-group 128 /
64 FP8 or NVFP4 quant, compile at O1 (Inductor off). Each must raise one gated activation and one
quant, fuse them into one `irfuse::gelu_mul_quant_*` call (the kernel list holds nothing else), and
match eager bit for bit (the CPU runs the torch reference, which is the composition:
docs/numerics.md). A dynamic per-token quant, which has no fused kernel, leaves a remark; on sm90
the GeGLU kernels are Triton (measured), on other GPUs they stay unfused until measured there.
The Gemma model with FP8 linears: tests/fusions/test_fusion_e2e.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import vllm_ops as V
from torch import nn

from irfuse.emit import kernel_choice
from irfuse.models import quant as Q
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

PASS = "fuse-act-quant"
D = 128  # the gated activation's output width (a multiple of the 128 group and 16 block)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _t(*shape: int, seed: int = 0) -> torch.Tensor:
    return (torch.randn(*shape, generator=_gen(seed)) * 2).to(torch.bfloat16)


# --- the GeGLU spellings: (inputs) -> y [T, D] ----------------------------------------------------


def split(approximate: str):
    return lambda x: F.gelu(x[..., :D], approximate=approximate) * x[..., D:]


def chunk(approximate: str):
    return lambda x: (lambda g, u: u * F.gelu(g, approximate=approximate))(*x.chunk(2, -1))


def vllm_op(approximate: str):
    return lambda x: V.vllm_gelu_and_mul(x, approximate)


FORMS = {"split": split, "chunk": chunk, "vllm_op": vllm_op}
ACTIVATION = {"tanh": "gelu_tanh", "none": "gelu"}


# --- the quants: y -> outputs ----------------------------------------------------------------------

SCALE = torch.tensor([0.015])  # 1 / 0.015 is inexact in float32: `y / s` is what eager computes


def static(y):
    return Q.quant_fp8_static(y, SCALE)


def group128(y):
    return Q.quant_fp8_group(y, 128)


def group64_col_major(y):
    return Q.quant_fp8_group(y, 64, col_major=True)


GLOBAL_SCALE = torch.tensor([448.0 * 6.0 / 12.0])  # a calibrated global scale (a weight)


def nvfp4(y):
    return Q.quant_nvfp4(y, GLOBAL_SCALE)


SCHEMES = {"static": (static, "fp8_static"), "group128": (group128, "fp8_group"),
           "group64": (group64_col_major, "fp8_group"), "nvfp4": (nvfp4, "nvfp4")}


def _run(fn, *inputs: torch.Tensor, options: dict | None = None) -> Compiled:
    class Wrap(nn.Module):
        def forward(self, *args):
            return fn(*args)

    opts = {"optimization_level": 1, **(options or {})}
    compiled = compile_and_run(Wrap(), inputs, dynamic_dims=[(0, 0)], options=opts)
    assert_bit_exact(compiled.outputs, compiled.eager)
    return compiled


def _missed(compiled: Compiled) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.passes if p.name == PASS
            for m in p.missed]


# Every scheme in both approximates for vLLM's spelling; the other spellings in a few of them.
CASES = [("split", a, s) for a in ("tanh", "none") for s in sorted(SCHEMES)] + [
    ("chunk", "tanh", "static"), ("chunk", "none", "nvfp4"),
    ("vllm_op", "tanh", "group64"), ("vllm_op", "none", "static"), ("vllm_op", "tanh", "nvfp4")]


@pytest.mark.parametrize("form,approximate,scheme", CASES, ids=["-".join(c) for c in CASES])
def test_geglu_quant_fuses_bit_exact(form: str, approximate: str, scheme: str) -> None:
    quant, kernel = SCHEMES[scheme]
    act = FORMS[form](approximate)
    # Token counts that are no multiple of the 128-row NVFP4 scale tile.
    compiled = _run(lambda x: quant(act(x)), _t(37, 2 * D))
    (report,) = compiled.reports
    # Before: one gated activation and one quant raised; after: one fused call, nothing else.
    quant_kind = "quant_nvfp4" if scheme == "nvfp4" else "quant_fp8"
    assert report.raised["silu_mul"] == 1 and report.raised[quant_kind] == 1
    assert report.fused(PASS) == 1
    assert [(k.op, k.impl, k.calls) for k in report.kernels] == [
        (f"gelu_mul_quant_{kernel}", "reference", 1)]
    stages = {s.name: s.ops for s in report.stages}
    assert stages["fuse"] < stages["import"]
    assert _missed(compiled) == []


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_separate_gate_and_up_projections(approximate: str) -> None:
    gate, up = nn.Linear(64, D, bias=False), nn.Linear(64, D, bias=False)
    for lin in (gate, up):
        lin.to(torch.bfloat16)
    compiled = _run(lambda x: static(F.gelu(gate(x), approximate=approximate) * up(x)),
                    _t(9, 64))
    (report,) = compiled.reports
    assert report.fused(PASS) == 1
    assert [k.op for k in report.kernels] == ["gelu_mul_quant_fp8_static"]


def test_silu_and_geglu_in_one_graph_pick_their_kernels() -> None:
    def fn(x):
        a = static(F.silu(x[..., :D]) * x[..., D:])
        b = group128(F.gelu(x[..., :D], approximate="tanh") * x[..., D:])
        return a, b

    compiled = _run(fn, _t(5, 2 * D))
    (report,) = compiled.reports
    assert report.fused(PASS) == 2
    assert sorted(k.op for k in report.kernels) == ["gelu_mul_quant_fp8_group",
                                                    "silu_mul_quant_fp8_static"]


def test_geglu_with_a_per_token_quant_is_not_fused_and_says_so() -> None:
    compiled = _run(lambda x: Q.quant_fp8_per_token(split("tanh")(x)), _t(8, 2 * D))
    (report,) = compiled.reports
    assert report.fused(PASS) == 0
    # The pass is off for the scheme (the support row names the ones it fuses); run on IR
    # alone it says "GeGLU (tanh GELU) + dynamic_token FP8 quant has no fused kernel"
    # (filecheck/rewrites/fuse-act-quant-geglu.mlir).
    (reason,) = _missed(compiled)
    assert "fuse-act-quant does not fuse fp8-dynamic-token" in reason


def test_geglu_output_also_used_unquantized_is_not_fused() -> None:
    def fn(x):
        y = split("none")(x)
        return static(y), y + 1

    compiled = _run(fn, _t(8, 2 * D))
    (report,) = compiled.reports
    assert report.fused(PASS) == 0


def test_geglu_kernels_fuse_where_measured_and_stay_unfused_elsewhere() -> None:
    for name in ("gelu_mul_quant_fp8_static", "gelu_mul_quant_fp8_group", "gelu_mul_quant_nvfp4"):
        sm90 = kernel_choice.choose(name, "cuda:sm90")  # bench_geglu_quant.py on an H100
        assert sm90.impl == "triton" and "Inductor's time" in sm90.reason, (name, sm90)
        for platform in ("cuda:sm100", "rocm"):
            choice = kernel_choice.choose(name, platform)
            assert choice.impl == "inductor", (name, platform)
            assert choice.reason.startswith("not measured on a GPU yet")
        assert kernel_choice.choose(name, "cpu").impl == "reference"
    assert kernel_choice.choose("silu_mul_quant_fp8_static", "cuda:sm90").impl == "triton"
