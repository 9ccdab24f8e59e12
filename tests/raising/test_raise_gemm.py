"""raise-gemm on real graphs: linear layers (2-D and 3-D activations, bias), `_scaled_mm` (per-tensor,
row-wise, expanded per-tensor, bias, out_dtype), batch-of-one `bmm`, dequantized products; exact
counts, unchanged outputs, and the remarks of near misses."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import irfuse.pipeline as pipeline
from irfuse import models
from irfuse.models import quant as Q
from irfuse.raising.match import strip_views
from irfuse.testing import assert_bit_exact, compile_and_run

FN = torch.float8_e4m3fn


class Product(nn.Module):
    """Runs `fn(self, x)` with a bf16 weight [N, K], an fp8 copy with per-tensor and per-channel
    scales, and a bias, all buffers (graph inputs)."""

    def __init__(self, fn, k: int = 64, n: int = 32):
        super().__init__()
        self.fn = fn
        g = torch.Generator().manual_seed(1)
        w = torch.randn(n, k, generator=g)
        self.register_buffer("w", w.to(torch.bfloat16))
        self.register_buffer("bias", torch.randn(n, generator=g).to(torch.bfloat16))
        self.register_buffer("wq", (w / 0.01).clamp(-448, 448).to(FN))
        self.register_buffer("w_scale", torch.tensor([0.01]))
        self.register_buffer("w_scale_rows", torch.full((1, n), 0.01))
        self.register_buffer("x_scale", torch.tensor([0.05]))

    def forward(self, x):
        return self.fn(self, x)


def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)


def _raise(fn, x: torch.Tensor, monkeypatch: pytest.MonkeyPatch):
    """Compile and run; return the compiled result and the top-level raised ops of its graph."""
    seen: list = []
    original = pipeline.count_raised

    def spy(module):
        seen.extend(op for op in module.body.block.first_op.regions[0].blocks[0].ops
                    if op.name.startswith(("gemm.", "quant.")))
        return original(module)

    monkeypatch.setattr(pipeline, "count_raised", spy)
    compiled = compile_and_run(Product(fn), [x])
    assert_bit_exact(compiled.outputs, compiled.eager)
    return compiled, seen


def _gemm_remarks(compiled) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.raise_passes if p.name == "raise-gemm"
            for m in p.missed]


def _quantize(m, x):
    return Q.quant_fp8_static(x, m.x_scale)


PLAIN = {
    "linear-2d": lambda m, x: F.linear(x, m.w),
    "linear-2d-bias": lambda m, x: F.linear(x, m.w, m.bias),
    "linear-3d": lambda m, x: F.linear(x.view(2, -1, 64), m.w),
    "linear-3d-bias": lambda m, x: F.linear(x.view(2, -1, 64), m.w, m.bias),
    "matmul-transposed": lambda m, x: x @ m.w.t(),
    "bmm-batch-of-one": lambda m, x: torch.bmm(x.unsqueeze(0), m.w.t().unsqueeze(0)).squeeze(0),
    "dequantized": lambda m, x: F.linear((_quantize(m, x).float() * m.x_scale).to(torch.bfloat16),
                                         (m.wq.float() * m.w_scale).to(torch.bfloat16)),
}


def test_plain_products(monkeypatch):
    compiled, ops = _raise(lambda m, x: tuple(fn(m, x) for fn in PLAIN.values()), _x(16, 64),
                           monkeypatch)
    raised = compiled.raised()
    assert (raised["gemm"], raised["scaled_gemm"]) == (len(PLAIN), 0), _gemm_remarks(compiled)
    gemms = [op for op in ops if op.name == "gemm.matmul"]
    assert sum(op.bias is not None for op in gemms) == 2
    assert all(op.a.type.rank == 2 and op.b.type.dims == (64, 32) for op in gemms)


SCALED = {
    "per-tensor": lambda m, x: torch._scaled_mm(_quantize(m, x), m.wq.t(), scale_a=m.x_scale,
                                                scale_b=m.w_scale, out_dtype=torch.bfloat16),
    "expanded-per-tensor": lambda m, x: torch._scaled_mm(
        _quantize(m, x), m.wq.t(), scale_a=m.x_scale.expand(x.shape[0], 1).contiguous(),
        scale_b=m.w_scale.expand(1, 32).contiguous(), out_dtype=torch.bfloat16),
    "row-wise-bias-f32": lambda m, x: torch._scaled_mm(
        *Q.quant_fp8_per_token(x)[:1], m.wq.t(), scale_a=Q.quant_fp8_per_token(x)[1],
        scale_b=m.w_scale_rows, bias=m.bias.float(), out_dtype=torch.float32),
}


def test_scaled_products(monkeypatch):
    compiled, ops = _raise(lambda m, x: tuple(fn(m, x) for fn in SCALED.values()), _x(16, 64),
                           monkeypatch)
    raised = compiled.raised()
    assert (raised["scaled_gemm"], raised["gemm"]) == (len(SCALED), 0), _gemm_remarks(compiled)
    scaled = [op for op in ops if op.name == "gemm.scaled_matmul"]
    # The expanded per-tensor scales are folded: the op takes the one-element scales.
    per_tensor = [op for op in scaled if op.scale_a.type.dims == (1,)]
    assert len(per_tensor) == 2 and all(op.scale_b.type.dims == (1,) for op in per_tensor)
    (row_wise,) = [op for op in scaled if op.bias is not None]
    assert row_wise.scale_a.type.dims[1:] == (1,) and str(row_wise.out_dtype) == "f32"
    # Each quantized activation feeds its scaled GEMM directly.
    assert all(op.a.owner.name == "quant.fp8" for op in scaled)


def test_quant_through_views_of_a_3d_activation(monkeypatch):
    """A linear layer on a 3-D activation quantized before the reshape: the GEMM is 2-D and
    `strip_views` finds the quant behind the `view(-1, K)`."""

    def fn(m, x):
        q = _quantize(m, x)
        y = torch._scaled_mm(q.view(-1, 64), m.wq.t(), scale_a=m.x_scale, scale_b=m.w_scale,
                             out_dtype=torch.bfloat16)
        return y.view(2, -1, 32)

    compiled, ops = _raise(fn, _x(2, 8, 64), monkeypatch)
    (gemm,) = [op for op in ops if op.name == "gemm.scaled_matmul"]
    source, views = strip_views(gemm.a)
    assert source.owner.name == "quant.fp8" and len(views) == 1


NOT_RAISED = {
    "addmm-beta": (lambda m, x: torch.addmm(m.bias, x, m.w.t(), beta=0.5), "beta or alpha"),
    "addmm-full-input": (lambda m, x: torch.addmm(x @ m.w.t(), x, m.w.t()),
                         "not a bias of 32 elements"),
    "fast-accum": (lambda m, x: torch._scaled_mm(_quantize(m, x), m.wq.t(), scale_a=m.x_scale,
                                                 scale_b=m.w_scale, out_dtype=torch.bfloat16,
                                                 use_fast_accum=True), "use_fast_accum"),
    "bmm-of-a-slice": (lambda m, x: torch.bmm(x.view(2, -1, 64)[:1], m.w.t()[None]).squeeze(0),
                       "not a reshaped 2-D tensor"),
}


def test_near_misses(monkeypatch):
    fns = [fn for fn, _ in NOT_RAISED.values()]
    compiled, ops = _raise(lambda m, x: tuple(fn(m, x) for fn in fns), _x(16, 64), monkeypatch)
    reasons = _gemm_remarks(compiled)
    for case, (_, reason) in NOT_RAISED.items():
        assert any(reason in r for r in reasons), (case, reasons)
    # `addmm-full-input` computes one plain product for its input: the only GEMM raised.
    assert [op.name for op in ops if op.name.startswith("gemm.")] == ["gemm.matmul"]


def test_batched_bmm_is_left_alone(monkeypatch):
    compiled, ops = _raise(lambda m, x: torch.bmm(x.view(4, -1, 64), m.w.t().expand(4, 64, 32)),
                           _x(16, 64), monkeypatch)
    assert compiled.raised()["gemm"] == 0 and not _gemm_remarks(compiled)


MODELS = ["llama-fp8", "qwen3-fp8-per-token", "llama-custom-ops", "llama-hf"]
KINDS = ("quant_fp8", "quant_nvfp4", "gemm", "scaled_gemm")


@pytest.mark.parametrize("name", MODELS)
def test_models(name):
    """The raised GEMM and quant counts equal the model's own (one layer, to keep it quick)."""
    if models.MODELS[name].uses_custom_ops:
        pytest.importorskip("irfuse.emit.custom_ops")
    built = models.build(name, num_layers=1)
    compiled = compile_and_run(built.model, built.clone_inputs(),
                               dynamic_dims=tuple(built.dynamic_dims.items()))
    raised = compiled.raised()
    assert {k: raised[k] for k in KINDS} == {k: built.expected[k] for k in KINDS}
    assert built.expected["gemm"] + built.expected["scaled_gemm"] > 0
    assert_bit_exact(compiled.outputs, compiled.eager)
