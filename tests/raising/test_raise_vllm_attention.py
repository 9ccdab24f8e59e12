"""raise-vllm-attention and vLLM IR's norms on real traced graphs: vLLM 0.32's attention calls as
its `Attention.forward` makes them (stand-ins: `vllm_attention.py`), functionalized in both forms;
exact counts, outputs and KV caches bit-exact at O0, remarks for near misses."""

from __future__ import annotations

import pytest
import torch
import vllm_attention as VA
from torch import nn

from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

pytestmark = pytest.mark.skipif(not VA.AVAILABLE, reason="vLLM's own ops own the vllm namespace")

BF16 = torch.bfloat16
HEADS, KV_HEADS, HEAD = 4, 2, 16
Q, KV = HEADS * HEAD, KV_HEADS * HEAD
VERSIONS = pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])


def _layer(name: str = "model.layers.0.self_attn.attn", **kw) -> VA.Layer:
    return VA.Layer(name, HEADS, KV_HEADS, HEAD, num_blocks=16, block_size=4, **kw)


class Attend(nn.Module):
    """qkv -> split -> vLLM's cache write and attention -> o (times 2, a use of the output)."""

    def __init__(self, layer: VA.Layer):
        super().__init__()
        self.layer = layer

    def forward(self, qkv):
        q, k, v = qkv.split([Q, KV, KV], -1)
        return VA.attention(self.layer, q, k, v) * 2


def _qkv(tokens: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(tokens, Q + 2 * KV, generator=torch.Generator().manual_seed(seed)).to(BF16)


def run_in_context(module: nn.Module, inputs, layers: list[VA.Layer], seq_lens: list[int],
                   query_lens: list[int] | None = None, *, v2: bool = True,
                   options: dict | None = None) -> tuple[Compiled, list[torch.Tensor]]:
    """Compile and run `module` in a forward context over `layers` (one batch for all), check
    outputs and every layer's cache bit-exact against eager from the same starting caches;
    returns the compiled run and the caches eager left."""
    meta, slots = VA.decode_batch(seq_lens, 4, 16, query_lens)
    for layer in layers:  # the context's older tokens
        layer.kv_cache.copy_(torch.randn(layer.kv_cache.shape,
                                         generator=torch.Generator().manual_seed(7)).to(BF16))
    start = [layer.kv_cache.clone() for layer in layers]
    with VA.forward_context({x.layer_name: meta for x in layers},
                            {x.layer_name: slots for x in layers}):
        with torch.no_grad():
            eager = module(*inputs)
        want = [layer.kv_cache.clone() for layer in layers]
        for layer, s in zip(layers, start, strict=True):
            layer.kv_cache.copy_(s)
        with torch._inductor.config.patch(enable_auto_functionalized_v2=v2):
            compiled = compile_and_run(module, inputs, dynamic_dims=((0, 0),), options=options)
    assert_bit_exact(compiled.outputs[0], eager)
    for layer, w in zip(layers, want, strict=True):
        assert torch.equal(layer.kv_cache, w), layer.layer_name  # (eager ran again: same writes)
    return compiled, want


def _record(compiled: Compiled, name: str = "raise-vllm-attention"):
    (report,) = {r.graph: r for r in compiled.reports}.values()
    (record,) = [p for p in report.raise_passes if p.name == name]
    return report, record


@VERSIONS
@pytest.mark.parametrize("query_lens", [None, [2, 1, 3]], ids=["decode", "mixed"])
def test_attention_and_cache_write_raise_bit_exact(v2, query_lens):
    layer = _layer()
    tokens = sum(query_lens or [1, 1, 1])
    compiled, _ = run_in_context(Attend(layer), [_qkv(tokens)], [layer], [5, 3, 7], query_lens,
                                 v2=v2)
    report, record = _record(compiled)
    assert report.raised["vllm_attention"] == 1 and report.raised["vllm_kv_cache_update"] == 1
    assert not record.missed


def test_mla_raises():
    layer = VA.Layer("mla0", HEADS, 1, 24, mla_v_dim=8)

    class Mla(nn.Module):
        def forward(self, x):
            q, kv_c, k_pe = x.split([HEADS * 12, 32, 8], -1)
            return VA.mla_attention(layer, q.reshape(-1, HEADS, 12), kv_c,
                                    k_pe.reshape(-1, 1, 8)) + 1

    x = torch.randn(5, HEADS * 12 + 40, generator=torch.Generator().manual_seed(3)).to(BF16)
    meta, _ = VA.decode_batch([5], 4, 16, [5])
    with VA.forward_context({"mla0": meta}, {}):
        compiled = compile_and_run(Mla(), [x])
    assert_bit_exact(compiled.outputs, compiled.eager)
    assert compiled.reports[-1].raised["vllm_mla_attention"] == 1


def test_already_quantized_attention_is_a_remark():
    """vLLM's own fusion gives the call an FP8 output and its scale: left to vLLM, said why."""
    layer = _layer(output_quant=("static_tensor",))

    class Quantized(nn.Module):
        def forward(self, qkv):
            q, k, v = qkv.split([Q, KV, KV], -1)
            out = torch.empty(q.shape[0], HEADS, HEAD, dtype=torch.float8_e4m3fn)
            torch.ops.vllm.unified_attention_with_output(
                q.view(-1, HEADS, HEAD), k.view(-1, KV_HEADS, HEAD), v.view(-1, KV_HEADS, HEAD),
                out, layer.layer_name, output_scale=torch.tensor([0.05]))
            return out.view(-1, Q).float()

    compiled, _ = run_in_context(Quantized(), [_qkv(3)], [layer], [5, 3, 7])
    report, record = _record(compiled)
    assert report.raised["vllm_attention"] == 0
    assert any("already writes its output quantized" in m.reason for m in record.missed)


class IrNorms(nn.Module):
    """vLLM IR's norms as `RMSNorm.forward` calls them with ir_enable_torch_wrap."""

    def __init__(self, weight_dtype: torch.dtype = BF16):
        super().__init__()
        self.register_buffer("w", (torch.rand(64, generator=torch.Generator().manual_seed(1))
                                   + 0.5).to(weight_dtype))

    def forward(self, x, residual):
        y = torch.ops.vllm_ir.rms_norm(x, self.w, 1e-6)
        out, res = torch.ops.vllm_ir.fused_add_rms_norm(y * 3, residual, self.w, 1e-5)
        return out, res, torch.ops.vllm_ir.rms_norm(res, None, 1e-6)


def test_vllm_ir_norms_raise_bit_exact():
    g = torch.Generator().manual_seed(0)
    x, r = (torch.randn(7, 64, generator=g).to(BF16) for _ in range(2))
    compiled = compile_and_run(IrNorms(), [x, r], dynamic_dims=((0, 0), (1, 0)))
    assert_bit_exact(compiled.outputs, compiled.eager)
    report, record = _record(compiled, "raise-vllm-ops")
    assert report.raised["rms_norm"] == 2 and report.raised["add_rms_norm"] == 1
    assert not record.missed


def test_vllm_ir_norm_with_f32_weight_is_a_remark():
    g = torch.Generator().manual_seed(0)
    x, r = (torch.randn(7, 64, generator=g).to(BF16) for _ in range(2))
    compiled = compile_and_run(IrNorms(torch.float32), [x, r], dynamic_dims=((0, 0), (1, 0)))
    assert_bit_exact(compiled.outputs, compiled.eager)
    _, record = _record(compiled, "raise-vllm-ops")
    assert any("vLLM IR multiplies in the weight's dtype" in m.reason for m in record.missed)
