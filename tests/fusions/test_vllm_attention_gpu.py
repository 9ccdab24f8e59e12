"""The GPU paths of the fusions on vLLM 0.32's attention ops (marked `gpu`): RoPE (+ Qwen3's
q/k norms) + vLLM's cache write as one Triton launch (`fused.rope_vllm_kv_cache_update`), and
vLLM's attention + the output's static FP8 quant (`fused.vllm_attention_quant`: a decode step
read in place from the layer's cache by irfuse's paged decode kernel with the quant epilogue;
other steps vLLM's attention, then irfuse's Triton quant).

The cache is FlashInfer's (vLLM 0.32's FLASHINFER backend, the same as FLASH_ATTN's): one tensor
`[num_blocks, kv_heads, block_size, 2 * head_dim]` per layer, k then v on the last dim, stored
HND (contiguous) or NHD (`[blocks, block_size, heads, 2D]` in memory, the logical tensor a
permuted view). vLLM's ops are the CPU stand-ins of `vllm_attention.py` on CUDA tensors (torch
attention, indexed cache write). Each test sets the two kernels' choices to irfuse's kernels on
this GPU (whatever the committed choice), compiles, and compares against the unfused eager
graph: outputs within bf16 rounding (the fused kernel's norms and rotation differ by ulps) or one
FP8 step, caches likewise; the ops alone are also compared with their CPU references.
"""

from __future__ import annotations

import pytest
import torch
import vllm_attention as VA
import vllm_ops as V
from torch import nn

from irfuse import backend
from irfuse.fusions import kernel_decl
from irfuse.fusions.fuse_attn_quant import ops as attn_ops
from irfuse.fusions.kernel_decl import Choice
from irfuse.kernels import dispatch, vllm_context
from irfuse.testing import Compiled

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not VA.AVAILABLE, reason="vLLM's own ops own the vllm namespace")]

BF16 = torch.bfloat16
FP8 = torch.float8_e4m3fn
HEADS, KV_HEADS, HEAD = 8, 2, 128
Q, KV = HEADS * HEAD, KV_HEADS * HEAD
BLOCK, BLOCKS = 16, 128
EPS = 1e-6
NAME = "model.layers.0.self_attn.attn"
ROPE, ATTN = "fuse-rope-kvcache", "fuse-attn-quant"
DEVICE = torch.device("cuda")


@pytest.fixture(autouse=True)
def irfuse_kernels(monkeypatch):
    """irfuse's kernels for both ops on this GPU's platform (and the FP8-cache write), for the
    test."""
    platform = dispatch.platform_of(DEVICE)
    on = Choice("triton", "test: irfuse's kernel")
    entries = kernel_decl.measured(platform)
    for name in ("vllm_attention_quant_fp8_static", "rope_vllm_kv_cache_update"):
        monkeypatch.setitem(entries, name, ((1, on),))
    # vLLM's FP8 cache written in the one launch (the tests of reading it set their own).
    monkeypatch.setitem(entries, f"rope_vllm_kv_cache_update.{vllm_context.FP8_CACHE}",
                        ((1, on),))
    return platform


def _layer(layout: str) -> VA.Layer:
    layer = VA.Layer(NAME, HEADS, KV_HEADS, HEAD, num_blocks=BLOCKS, block_size=BLOCK,
                     backend="FLASHINFER", device=DEVICE)
    if layout == "NHD":
        layer.kv_cache = torch.zeros(BLOCKS, BLOCK, KV_HEADS, 2 * HEAD, dtype=BF16,
                                     device=DEVICE).permute(0, 2, 1, 3)
    return layer


def _on(meta: VA.Metadata, device: torch.device) -> VA.Metadata:
    return VA.Metadata(meta.query_start_loc.to(device), meta.seq_lens.to(device),
                       meta.block_table.to(device), meta.num_actual_tokens, meta.max_query_len)


class AttentionLayer(nn.Module):
    """qkv -> (Qwen3's per-head norms) -> RoPE (vLLM's native spelling) -> vLLM's cache write
    and attention -> (the o_proj's static FP8 input quant, `x * (1 / s)`)."""

    def __init__(self, layer: VA.Layer, qk_norm: bool = False, quant: bool = False):
        super().__init__()
        self.layer, self.qk_norm, self.quant = layer, qk_norm, quant
        g = torch.Generator().manual_seed(5)
        self.register_buffer("cache", V.rope_cache(HEAD, 512).to(DEVICE))
        self.register_buffer("qw", (torch.rand(HEAD, generator=g) + 0.5).to(BF16).to(DEVICE))
        self.register_buffer("kw", (torch.rand(HEAD, generator=g) + 0.5).to(BF16).to(DEVICE))
        self.register_buffer("scale", torch.tensor([0.02], device=DEVICE))

    def forward(self, positions, qkv):
        q, k, v = qkv.split([Q, KV, KV], -1)
        if self.qk_norm:
            q = V.native_rms_norm(q.view(*q.shape[:-1], HEADS, HEAD), self.qw, EPS).view(q.shape)
            k = V.native_rms_norm(k.view(*k.shape[:-1], KV_HEADS, HEAD), self.kw, EPS).view(
                k.shape)
        q, k = self._rope(positions, q), self._rope(positions, k)
        o = VA.attention(self.layer, q, k, v)
        return V.native_fp8_quant(o, self.scale)[0] if self.quant else o

    def _rope(self, positions, x):
        cos, sin = self.cache.index_select(0, positions).chunk(2, dim=-1)
        shape = x.shape
        x = x.view(positions.shape[0], -1, HEAD)
        x1, x2 = torch.chunk(x, 2, dim=-1)
        cos, sin = cos.unsqueeze(-2).to(x.dtype), sin.unsqueeze(-2).to(x.dtype)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1).reshape(shape)


def _rel(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.float(), want.float()
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()


def _fp8_close(got: torch.Tensor, want: torch.Tensor) -> None:
    """FP8 codes at most about one step apart (e4m3: 1/8 relative), none far off."""
    assert got.dtype == want.dtype == FP8
    torch.testing.assert_close(got.float(), want.float(), rtol=0.13, atol=0.05)


def _step(module: AttentionLayer, seq_lens: list[int], query_lens: list[int] | None,
          inductor: bool = False):
    layer = module.layer
    meta, slots = VA.decode_batch(seq_lens, BLOCK, BLOCKS, query_lens)
    meta, slots = _on(meta, DEVICE), slots.to(DEVICE)
    g = torch.Generator().manual_seed(11)
    layer.kv_cache.copy_(torch.randn(layer.kv_cache.shape, generator=g).to(BF16))
    start = layer.kv_cache.clone()
    tokens = meta.num_actual_tokens
    qkv = torch.randn(tokens, Q + 2 * KV, generator=g).to(BF16).to(DEVICE)
    positions = torch.tensor([n - 1 - i for n, ql in zip(
        seq_lens, query_lens or [1] * len(seq_lens), strict=True)
        for i in reversed(range(ql))], device=DEVICE)
    options = {"optimization_level": 2, "inductor": inductor, "strict": True, "debug": True,
               "pass_config": {"fuse_rope_kvcache": True, "fuse_attn_quant": True,
                               "enable_qk_norm_rope_fusion": True}}
    with VA.forward_context({NAME: meta}, {NAME: slots}), torch.no_grad():
        eager = module(positions, qkv.clone())
        want = layer.kv_cache.clone()
        layer.kv_cache.copy_(start)
        torch._dynamo.reset()
        backend.clear_reports()
        inputs = [positions.clone(), qkv.clone()]
        for x in inputs:
            torch._dynamo.mark_dynamic(x, 0)
        out = torch.compile(module, backend="irfuse", options=options)(*inputs)
        if DEVICE.type == "cuda":
            torch.cuda.synchronize()
    got = layer.kv_cache.clone()  # the compiled step's writes alone
    assert not torch.equal(want, start)
    return Compiled((out, inputs), (eager, None), backend.reports()), eager, got, want


def _kernels(compiled) -> set[tuple[str, str]]:
    return {(k.op, k.impl) for r in compiled.reports for k in r.kernels}


def _missed(compiled, name: str) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.passes if p.name == name
            for m in p.missed]


# --- compiled graphs against the unfused eager graph ------------------------------------------


@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("qk_norm", [False, True], ids=["rope", "norm_rope"])
@pytest.mark.parametrize("query_lens", [None, [2, 1, 3]], ids=["decode", "mixed"])
def test_rope_and_cache_write_on_gpu(layout, qk_norm, query_lens):
    compiled, eager, got, want = _step(AttentionLayer(_layer(layout), qk_norm=qk_norm),
                                       [37, 5, 20], query_lens)
    assert compiled.fused(ROPE) == 1, _missed(compiled, ROPE)
    assert ("rope_vllm_kv_cache_update", "triton") in _kernels(compiled)
    assert _rel(compiled.outputs[0], eager) < 2e-2
    assert _rel(got, want) < 2e-2
    # every slot the step wrote holds its new k and v within bf16 ulps; the rest is untouched
    changed = (got != want).any(-1)
    assert _rel(got[changed], want[changed]) < 2e-2 if changed.any() else True


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
def test_one_launch_writes_the_cache_vllms_write_writes(kv_cache_dtype):
    """The CUDA path's one Triton launch (`rope_vllm_kv_cache_update`) rotates q and k and
    writes k and v into vLLM's cache: the bytes vLLM's write (the stand-in) stores after
    irfuse's rope, an FP8 cache (uint8, the layer's k and v scales) too; the rest untouched."""
    import inspect

    from irfuse.fusions.fuse_rope_kvcache import ops as rope_ops
    from irfuse.fusions.kernel_decl import Call

    layer = VA.Layer(NAME, HEADS, KV_HEADS, HEAD, num_blocks=BLOCKS, block_size=BLOCK,
                     backend="FLASHINFER", device=DEVICE, kv_cache_dtype=kv_cache_dtype,
                     kv_scales=(0.05, 0.125))
    meta, slots = VA.decode_batch([37, 5, 20], BLOCK, BLOCKS)
    g = torch.Generator().manual_seed(12)
    values = torch.randn(layer.kv_cache.shape, generator=g)
    layer.kv_cache.copy_(values.to(FP8).view(torch.uint8) if kv_cache_dtype == "fp8"
                         else values.to(BF16))
    start = layer.kv_cache.clone()
    q, k, v = (torch.randn(3, h, HEAD, generator=g).to(BF16).to(DEVICE)
               for h in (HEADS, KV_HEADS, KV_HEADS))
    positions, cache = torch.tensor([36, 4, 19], device=DEVICE), V.rope_cache(HEAD, 64).to(DEVICE)
    args = (q, k, v, None, None, positions, cache, None, None, NAME, True, HEAD)
    bound = inspect.signature(rope_ops.rope_vllm_kv_cache_update).bind(*args)
    bound.apply_defaults()
    with VA.forward_context({NAME: _on(meta, DEVICE)}, {NAME: slots.to(DEVICE)}):
        got = rope_ops._vllm_cuda(Call(bound.arguments))
        torch.cuda.synchronize()
        written = layer.kv_cache.clone()
        layer.kv_cache.copy_(start)
        want = rope_ops.rope_vllm_kv_cache_update(*args)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert torch.equal(written, layer.kv_cache) and not torch.equal(written, start)


@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("query_lens", [None, [2, 1, 3]], ids=["decode", "mixed"])
def test_attention_quant_on_gpu(layout, query_lens):
    """Decode: irfuse's paged decode read in place with the FP8 epilogue; mixed: vLLM's
    attention, then irfuse's Triton quant."""
    compiled, eager, _, _ = _step(AttentionLayer(_layer(layout), quant=True), [37, 5, 20],
                                  query_lens)
    assert compiled.fused(ATTN) == 1, _missed(compiled, ATTN)
    assert ("vllm_attention_quant_fp8_static", "triton") in _kernels(compiled)
    _fp8_close(compiled.outputs[0], eager)


@pytest.mark.parametrize("inductor", [False, True], ids=["no_inductor", "inductor"])
def test_whole_layer_both_fused_on_gpu(inductor):
    compiled, eager, got, want = _step(
        AttentionLayer(_layer("NHD"), qk_norm=True, quant=True), [300, 17, 64, 129], None,
        inductor=inductor)
    assert compiled.fused(ROPE) == compiled.fused(ATTN) == 1
    assert compiled.fused("enable-qk-norm-rope-fusion") == 1
    _fp8_close(compiled.outputs[0], eager)
    assert _rel(got, want) < 2e-2


# --- the ops alone against their CPU references -----------------------------------------------


@pytest.mark.parametrize("layout", ["HND", "NHD"])
def test_ops_match_their_cpu_references(layout):
    """`irfuse::rope_vllm_kv_cache_update` and `irfuse::vllm_attention_quant_fp8_static` on
    CUDA (the Triton launches on the cache in place) against the same calls on CPU copies (the
    references: irfuse's rope reference + vLLM's write; vLLM's attention + the quant
    reference)."""
    seq_lens = [37, 5, 20, 1]
    layer = _layer(layout)
    meta_cpu, slots_cpu = VA.decode_batch(seq_lens, BLOCK, BLOCKS)
    g = torch.Generator().manual_seed(3)
    cache_cpu = torch.randn(layer.kv_cache.shape, generator=g).to(BF16)
    if layout == "NHD":  # the same strides on the CPU
        cache_cpu = cache_cpu.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)
    layer.kv_cache.copy_(cache_cpu)
    t = len(seq_lens)
    q, k, v = (torch.randn(t, h, HEAD, generator=g).to(BF16) for h in (HEADS, KV_HEADS, KV_HEADS))
    w = (torch.rand(HEAD, generator=g) + 0.5).to(BF16)
    positions = torch.tensor([n - 1 for n in seq_lens])
    rope = V.rope_cache(HEAD, 64)
    scale = torch.tensor([0.02])
    ops = torch.ops.irfuse

    def run(dev, cache, meta, slots):
        layer.kv_cache = cache
        d = [x.to(dev) for x in (q, k, v, w, positions, rope, scale)]
        with VA.forward_context({NAME: meta}, {NAME: slots}):
            q_out, k_out, _ = ops.rope_vllm_kv_cache_update(d[0], d[1], d[2], d[3], d[3], d[4],
                                                            d[5], None, None, NAME, True, HEAD,
                                                            EPS)
            o = ops.vllm_attention_quant_fp8_static(q_out, k_out, d[2], None, NAME, d[6],
                                                    [HEADS, HEAD], False, FP8)
        return q_out.cpu(), k_out.cpu(), o.cpu(), cache.cpu()

    cuda_cache = layer.kv_cache
    got = run(DEVICE, cuda_cache, _on(meta_cpu, DEVICE), slots_cpu.to(DEVICE))
    want = run(torch.device("cpu"), cache_cpu.clone(), meta_cpu, slots_cpu)
    for a, b in zip(got[:2], want[:2], strict=True):
        assert _rel(a, b) < 2e-2
    _fp8_close(got[2], want[2])
    assert _rel(got[3], want[3]) < 2e-2


@pytest.mark.parametrize("fp8_cache_path", [True, False], ids=["in_place", "vllm_attention"])
def test_attention_quant_reads_vllms_fp8_cache_on_gpu(monkeypatch, irfuse_kernels,
                                                      fp8_cache_path):
    """vLLM's per-tensor FP8 cache (uint8, the layer's k and v scales): with the `.fp8_cache`
    path on, `irfuse::vllm_attention_quant_fp8_static` reads it in place with the paged decode
    kernel; off (unmeasured), vLLM's attention then irfuse's quant. Either against the CPU call
    (the stand-in's attention over the dequantized cache, then the quant reference)."""
    name = f"vllm_attention_quant_fp8_static.{vllm_context.FP8_CACHE}"
    impl = "triton" if fp8_cache_path else "inductor"
    monkeypatch.setitem(kernel_decl.measured(irfuse_kernels), name,
                        ((1, Choice(impl, "test: the FP8-cache path")),))
    seq_lens = [37, 5, 20, 1]
    layer = VA.Layer(NAME, HEADS, KV_HEADS, HEAD, num_blocks=BLOCKS, block_size=BLOCK,
                     backend="FLASHINFER", device=DEVICE, kv_cache_dtype="fp8",
                     kv_scales=(0.05, 0.125))
    meta_cpu, _ = VA.decode_batch(seq_lens, BLOCK, BLOCKS)
    g = torch.Generator().manual_seed(8)
    cache_cpu = torch.randn(layer.kv_cache.shape, generator=g).to(FP8).view(torch.uint8)
    layer.kv_cache.copy_(cache_cpu)
    q, k = (torch.randn(len(seq_lens), h, HEAD, generator=g).to(BF16) for h in (HEADS, KV_HEADS))
    scale = torch.tensor([0.02])
    ran = []
    in_place = attn_ops.paged_decode_in_place

    def counted(*args, **kwargs):
        out = in_place(*args, **kwargs)
        ran.append(out is not None)
        return out

    monkeypatch.setattr(attn_ops, "paged_decode_in_place", counted)

    scales = (layer._k_scale, layer._v_scale)

    def run(dev, cache, meta):
        layer.kv_cache = cache
        layer._k_scale, layer._v_scale = (x.to(dev) for x in scales)
        with VA.forward_context({NAME: meta}, {}):
            return torch.ops.irfuse.vllm_attention_quant_fp8_static(
                q.to(dev), k.to(dev), k.to(dev), None, NAME, scale.to(dev), [HEADS, HEAD], False,
                FP8).cpu()

    got = run(DEVICE, layer.kv_cache, _on(meta_cpu, DEVICE))
    assert ran == [fp8_cache_path]
    want = run(torch.device("cpu"), cache_cpu.clone(), meta_cpu)
    _fp8_close(got, want)
