"""fuse-rope-kvcache and fuse-attn-quant on vLLM 0.32's attention calls, end to end on the CPU
with the stand-ins of `vllm_attention.py` (vLLM's ops, forward context and a FlashAttention-
layout cache): a decoder layer's attention as vLLM's model code writes it (qkv split, RoPE in
vLLM's native or `_C` spelling, Qwen3's per-head norms, `Attention.forward`, the o_proj's static
FP8 quant). Outputs and the layer's KV cache bit for bit those of eager; the layouts irfuse's GPU
paths read and write checked against vLLM's own (stand-in) code; remarks where it stays unfused.
"""

from __future__ import annotations

import pytest
import torch
import vllm_attention as VA
import vllm_ops as V
from torch import nn

from irfuse.emit import kernel_choice
from irfuse.fusions.fuse_attn_quant import ops as attn_ops
from irfuse.fusions.fuse_rope_kvcache import ops as rope_ops
from irfuse.kernels import attention_quant_ref, qk_norm_rope_ref
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

pytestmark = pytest.mark.skipif(not VA.AVAILABLE, reason="vLLM's own ops own the vllm namespace")

BF16 = torch.bfloat16
FP8 = torch.float8_e4m3fn
HEADS, KV_HEADS, HEAD = 4, 2, 32
Q, KV = HEADS * HEAD, KV_HEADS * HEAD
EPS = 1e-6
ROPE, ATTN = "fuse-rope-kvcache", "fuse-attn-quant"


def native_rope(positions, x, cache, is_neox=True):
    """`RotaryEmbedding.forward_native` on one of q / k `[T, heads * D]`: the table rows by
    position, the rotation in the model dtype, the pass-through dims after the rotary ones."""
    t = positions.shape[0]
    cos, sin = cache.index_select(0, positions).chunk(2, dim=-1)
    shape = x.shape
    x = x.view(t, -1, HEAD)
    rot, rest = x[..., : cache.shape[-1]], x[..., cache.shape[-1]:]
    cos, sin = cos.unsqueeze(-2).to(x.dtype), sin.unsqueeze(-2).to(x.dtype)
    if is_neox:
        x1, x2 = torch.chunk(rot, 2, dim=-1)
    else:
        x1, x2 = rot[..., ::2], rot[..., 1::2]
    o1, o2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    rot = torch.cat((o1, o2), -1) if is_neox else torch.stack((o1, o2), -1).flatten(-2)
    return torch.cat((rot, rest), -1).reshape(shape)


class AttentionLayer(nn.Module):
    """qkv -> (per-head norms) -> RoPE -> vLLM's cache write and attention -> (static FP8 quant
    of the output, as the o_proj's input quant: `x * (1 / s)`)."""

    def __init__(self, layer: VA.Layer, rope: str = "native", qk_norm: bool = False,
                 quant: bool = False):
        super().__init__()
        self.layer, self.rope, self.qk_norm, self.quant = layer, rope, qk_norm, quant
        g = torch.Generator().manual_seed(5)
        self.register_buffer("cache", V.rope_cache(HEAD, 64))
        self.register_buffer("qw", (torch.rand(HEAD, generator=g) + 0.5).to(BF16))
        self.register_buffer("kw", (torch.rand(HEAD, generator=g) + 0.5).to(BF16))
        self.register_buffer("scale", torch.tensor([0.05]))

    def forward(self, positions, qkv):
        q, k, v = qkv.split([Q, KV, KV], -1)
        if self.qk_norm:  # Qwen3: per-head RMSNorm of q and k
            q = V.native_rms_norm(q.view(*q.shape[:-1], HEADS, HEAD), self.qw, EPS).view(q.shape)
            k = V.native_rms_norm(k.view(*k.shape[:-1], KV_HEADS, HEAD), self.kw, EPS).view(
                k.shape)
        if self.rope == "native":
            q, k = native_rope(positions, q, self.cache), native_rope(positions, k, self.cache)
        else:  # vLLM's `_C.rotary_embedding`, in place on the slices of qkv
            V.vllm_rotary_embedding(positions, q, k, HEAD, self.cache, True)
        o = VA.attention(self.layer, q, k, v)
        if not self.quant:
            return o
        return V.native_fp8_quant(o, self.scale)[0]


def _layer(**kw) -> VA.Layer:
    return VA.Layer("model.layers.0.self_attn.attn", HEADS, KV_HEADS, HEAD, num_blocks=16,
                    block_size=4, **kw)


def run_step(module: AttentionLayer, seq_lens: list[int], query_lens: list[int] | None = None,
             pass_config: dict | None = None, v2: bool = True, **options) -> Compiled:
    """One forward step in a forward context: compiled vs eager from the same cache, outputs and
    cache bit for bit."""
    layer = module.layer
    meta, slots = VA.decode_batch(seq_lens, 4, 16, query_lens)
    tokens = meta.num_actual_tokens
    g = torch.Generator().manual_seed(11)
    layer.kv_cache.copy_(torch.randn(layer.kv_cache.shape, generator=g).to(BF16))
    start = layer.kv_cache.clone()
    qkv = torch.randn(tokens, Q + 2 * KV, generator=g).to(BF16)
    positions = torch.tensor([n - 1 - i for n, ql in zip(seq_lens, query_lens or [1] * len(
        seq_lens), strict=True) for i in reversed(range(ql))])
    with VA.forward_context({layer.layer_name: meta}, {layer.layer_name: slots}):
        with torch.no_grad():
            eager = module(positions, qkv.clone())  # (the `_C` rope writes into qkv)
        want = layer.kv_cache.clone()
        layer.kv_cache.copy_(start)
        opts = {"optimization_level": 2, "pass_config": pass_config or {}, **options}
        with torch._inductor.config.patch(enable_auto_functionalized_v2=v2):
            compiled = compile_and_run(module, [positions, qkv], dynamic_dims=((0, 0), (1, 0)),
                                       options=opts)
    assert_bit_exact(compiled.outputs[0], eager)
    assert torch.equal(layer.kv_cache, want)
    assert not torch.equal(want, start)  # the step wrote the cache
    return compiled


def _missed(compiled: Compiled, name: str) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.passes if p.name == name
            for m in p.missed]


# --- RoPE + vLLM's cache write --------------------------------------------------------------------


@pytest.mark.parametrize("rope", ["native", "custom"])
@pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])
def test_rope_and_vllm_cache_write_fuse_bit_exact(rope, v2):
    compiled = run_step(AttentionLayer(_layer(), rope=rope), [5, 3, 7],
                        pass_config={"fuse_rope_kvcache": True}, v2=v2)
    assert compiled.raised()["vllm_kv_cache_update"] == 1
    assert compiled.fused(ROPE) == 1, _missed(compiled, ROPE)


def test_norms_rope_and_cache_write_are_one_kernel():
    compiled = run_step(AttentionLayer(_layer(), qk_norm=True), [5, 3, 7], [2, 1, 3],
                        pass_config={"fuse_rope_kvcache": True, "enable_qk_norm_rope_fusion": True})
    assert compiled.fused("enable-qk-norm-rope-fusion") == 1
    assert compiled.fused(ROPE) == 1, _missed(compiled, ROPE)
    kernels = {(k.op, k.impl) for r in compiled.reports for k in r.kernels}
    assert ("rope_vllm_kv_cache_update", "reference") in kernels, kernels


@pytest.mark.parametrize("rope", ["native", "custom"])
def test_qk_norm_rope_kvcache_alone_fuses_norms_rope_and_vllms_write(rope):
    """fuse_qk_norm_rope_kvcache on vLLM's own cache write: the norms, the rope and the write
    are one `rope_vllm_kv_cache_update` with the norm weights, with neither separate flag on."""
    compiled = run_step(AttentionLayer(_layer(), rope=rope, qk_norm=True), [5, 3, 7], [2, 1, 3],
                        pass_config={"fuse_qk_norm_rope_kvcache": True,
                                     "enable_qk_norm_rope_fusion": False,
                                     "fuse_rope_kvcache": False})
    assert compiled.fused("fuse-qk-norm-rope-kvcache") == 1, \
        _missed(compiled, "fuse-qk-norm-rope-kvcache")
    assert compiled.raised()["rms_norm"] == 2  # the q and k norms it took
    kernels = {(k.op, k.impl) for r in compiled.reports for k in r.kernels}
    assert ("rope_vllm_kv_cache_update", "reference") in kernels, kernels
    assert not any(op == "qk_norm_rope" for op, _ in kernels)


def test_qk_norm_rope_kvcache_takes_vllms_write_before_the_separate_fusions():
    compiled = run_step(AttentionLayer(_layer(), qk_norm=True), [5, 3, 7],
                        pass_config={"fuse_qk_norm_rope_kvcache": True,
                                     "enable_qk_norm_rope_fusion": True,
                                     "fuse_rope_kvcache": True})
    assert compiled.fused("fuse-qk-norm-rope-kvcache") == 1
    assert compiled.fused("enable-qk-norm-rope-fusion") == compiled.fused(ROPE) == 0


def test_unmeasured_gpus_leave_both_unfused_with_the_reason():
    """No GPU figures for the kernels inside vLLM but sm90's: on sm100 neither site fuses, and
    each says why (the graph is unchanged, so it still runs here)."""
    compiled = run_step(AttentionLayer(_layer(), quant=True), [5, 3, 7],
                        pass_config={"fuse_rope_kvcache": True, "fuse_attn_quant": True},
                        platform="cuda:sm100")
    assert compiled.fused(ROPE) == compiled.fused(ATTN) == 0
    assert any("not measured on a GPU yet" in m for m in _missed(compiled, ROPE))
    assert any("does not write this output quant itself" in m and "not measured" in m
               for m in _missed(compiled, ATTN))


def test_sm90_fuses_both_at_decode_sizes():
    """sm90's measured choices (docs/benchmarks.md): RoPE + the cache write always, attention +
    quant at every size (the CPU runs the fused ops' references, so the bits are the unfused
    graph's)."""
    compiled = run_step(AttentionLayer(_layer(), quant=True), [5, 3, 7],
                        pass_config={"fuse_rope_kvcache": True, "fuse_attn_quant": True},
                        platform="cuda:sm90")
    assert compiled.fused(ROPE) == compiled.fused(ATTN) == 1
    choose = kernel_choice.choose
    assert choose("rope_vllm_kv_cache_update", "cuda:sm90", 256).impl == "triton"
    assert choose("vllm_attention_quant_fp8_static", "cuda:sm90", 16).impl == "triton"
    for tokens in (17, 32, 63, 64, 256):
        choice = choose("vllm_attention_quant_fp8_static", "cuda:sm90", tokens)
        assert choice.impl == "triton" and "at every measured step" in choice.reason
    assert choose("vllm_attention_quant_nvfp4", "cuda:sm90", 16).impl == "inductor"
    # The report says what the kernels do with vLLM's FP8 cache there: measured faster on sm90
    # (their `.fp8_cache` entries), so on; on another card, unmeasured, off.
    reasons = {k.op: k.reason for r in compiled.reports for k in r.kernels}
    for op in ("rope_vllm_kv_cache_update", "vllm_attention_quant_fp8_static"):
        assert reasons[op].endswith("; run-time path fp8_cache: on")
        assert kernel_choice.kernel(op).variants_note("cuda:sm80") == \
            "; run-time path fp8_cache: off (not measured on cuda:sm80)"


# --- attention + output quant ---------------------------------------------------------------------


@pytest.mark.parametrize("query_lens", [None, [2, 1, 3]], ids=["decode", "mixed"])
def test_attention_quant_through_irfuses_kernel_bit_exact(query_lens):
    """The stand-in backend takes no output quant (as vLLM's CPU backend): irfuse's kernel, on
    the CPU vLLM's attention then the quant reference."""
    compiled = run_step(AttentionLayer(_layer(), quant=True), [5, 3, 7], query_lens,
                        pass_config={"fuse_attn_quant": True})
    assert compiled.fused(ATTN) == 1, _missed(compiled, ATTN)
    kernels = {k.op for r in compiled.reports for k in r.kernels}
    assert "vllm_attention_quant_fp8_static" in kernels, kernels


def test_attention_quant_into_vllms_call_bit_exact():
    """The backend writes FP8 output (vLLM's Triton attention): the call gets output_scale; no
    irfuse kernel runs for it."""
    compiled = run_step(AttentionLayer(_layer(output_quant=("static_tensor",)), quant=True),
                        [5, 3, 7], pass_config={"fuse_attn_quant": True})
    assert compiled.fused(ATTN) == 1, _missed(compiled, ATTN)
    kernels = {k.op for r in compiled.reports for k in r.kernels}
    assert not any("vllm_attention_quant" in k for k in kernels), kernels


def test_whole_layer_fuses_both_bit_exact():
    compiled = run_step(AttentionLayer(_layer(), qk_norm=True, quant=True), [5, 3, 7], [2, 1, 3],
                        pass_config={"fuse_rope_kvcache": True, "fuse_attn_quant": True,
                                     "enable_qk_norm_rope_fusion": True})
    assert compiled.fused(ROPE) == compiled.fused(ATTN) == 1


# --- the layouts the GPU paths read and write ---------------------------------------------------


def _decode_context(layer: VA.Layer, seq_lens: list[int]):
    meta, slots = VA.decode_batch(seq_lens, 4, 16)
    values = torch.randn(layer.kv_cache.shape, generator=torch.Generator().manual_seed(3))
    fp8 = layer.kv_cache.dtype == torch.uint8
    layer.kv_cache.copy_(values.to(VA.FP8).view(torch.uint8) if fp8 else values.to(BF16))
    return meta, slots


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
def test_paged_decode_reads_vllms_cache_in_place(kv_cache_dtype):
    """The CUDA path's views of the cache (`[B, H, N, 2D]` split as the FlashAttention backend
    splits it; vLLM's FP8 cache with the layer's scales) and metadata, run with the paged decode
    kernel's torch reference: the same attention as vLLM's (within the FP8 step), for a decode
    batch; None for a prefill batch, and for an FP8 cache where that path is not on."""
    layer = _layer(kv_cache_dtype=kv_cache_dtype, kv_scales=(0.05, 0.125))
    meta, slots = _decode_context(layer, [5, 3, 7])
    g = torch.Generator().manual_seed(4)
    q = torch.randn(3, HEADS, HEAD, generator=g).to(BF16)
    scale = torch.tensor([0.02])
    fp8 = kv_cache_dtype == "fp8"
    asked: list[bool] = []  # the run-time variant is looked up for an FP8 cache only

    def fp8_cache_on() -> bool:
        asked.append(fp8)
        return fp8

    with VA.forward_context({layer.layer_name: meta}, {layer.layer_name: slots}):
        got = attn_ops.paged_decode_in_place(q, layer.layer_name, scale,
                                             attention_quant_ref.paged_decode_fp8, fp8_cache_on)
        assert asked == ([True] if fp8 else [])
        if fp8:
            assert attn_ops.paged_decode_in_place(q, layer.layer_name, scale,
                                                  attention_quant_ref.paged_decode_fp8) is None
        want = attn_ops.vllm_attention_quant_fp8_static(
            q, q[:, :KV_HEADS], q[:, :KV_HEADS], None, layer.layer_name, scale, [HEADS, HEAD],
            False, FP8)
    assert got is not None and got.shape == want.shape == (3, Q)
    torch.testing.assert_close(got.float(), want.float(), rtol=0.13, atol=0.05)
    prefill, _ = VA.decode_batch([5, 3], 4, 16, [2, 1])
    with VA.forward_context({layer.layer_name: prefill}, {}):
        assert attn_ops.paged_decode_in_place(q, layer.layer_name, scale,
                                              attention_quant_ref.paged_decode_fp8) is None


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
def test_in_place_write_lands_where_vllms_write_does(kv_cache_dtype):
    """The CUDA path writes the rotated k and v into the strided halves of vLLM's cache: the
    same cache, bit for bit, as rotating and calling vLLM's own write (the stand-in's
    FlashAttention-layout `do_kv_cache_update`); an FP8 cache (uint8, vLLM's "fp8") holds the
    same bytes, scaled by the layer's k and v scales, where that path is on (`fp8_cache_on`)."""
    fp8 = kv_cache_dtype == "fp8"
    layer = _layer(kv_cache_dtype=kv_cache_dtype, kv_scales=(0.05, 0.125))
    meta, slots = _decode_context(layer, [5, 3, 7])
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(3, h, HEAD, generator=g).to(BF16) for h in (HEADS, KV_HEADS, KV_HEADS))
    positions = torch.tensor([4, 2, 6])
    cache = V.rope_cache(HEAD, 64)
    readings = {"eps": 0.0, "is_neox": True, "rotary_dim": HEAD, "weight_offset": 0.0,
                "weight_f32": False, "rope_f32": False}
    start = layer.kv_cache.clone()
    with VA.forward_context({layer.layer_name: meta}, {layer.layer_name: slots}):
        if fp8:  # off: vLLM's own write runs
            assert rope_ops.write_in_place(q, k, v, None, None, positions, None, None, cache,
                                           layer.layer_name, qk_norm_rope_ref.qk_norm_rope_kv,
                                           readings) is None
        got = rope_ops.write_in_place(q, k, v, None, None, positions, None, None, cache,
                                      layer.layer_name, qk_norm_rope_ref.qk_norm_rope_kv,
                                      readings, fp8_cache_on=lambda: fp8)
        written = layer.kv_cache.clone()
        layer.kv_cache.copy_(start)
        want = rope_ops.rope_vllm_kv_cache_update(q, k, v, None, None, positions, cache, None,
                                                  None, layer.layer_name, True, HEAD)
    assert got is not None
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert torch.equal(written, layer.kv_cache) and not torch.equal(written, start)
    with VA.forward_context({layer.layer_name: meta}, {}):  # no slots: vLLM writes nothing
        assert rope_ops.write_in_place(q, k, v, None, None, positions, None, None, cache,
                                       layer.layer_name, qk_norm_rope_ref.qk_norm_rope_kv,
                                       readings) is None


# --- the kernels as torch ops ---------------------------------------------------------------------


def test_opcheck_under_the_stand_in_context():
    """irfuse's vLLM kernels through torch.library.opcheck (schema, fake, dispatch), in a forward
    context (they read vLLM's: tests/kernels/test_custom_ops.py skips them)."""
    layer = _layer()
    meta, slots = _decode_context(layer, [5, 3, 7])
    g = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(3, h, HEAD, generator=g).to(BF16) for h in (HEADS, KV_HEADS, KV_HEADS))
    w = (torch.rand(HEAD, generator=g) + 0.5).to(BF16)
    positions, cache = torch.tensor([4, 2, 6]), V.rope_cache(HEAD, 64)
    dep = torch.empty(0, dtype=BF16)
    ops = torch.ops.irfuse
    with VA.forward_context({layer.layer_name: meta}, {layer.layer_name: slots}):
        torch.library.opcheck(ops.rope_vllm_kv_cache_update.default, (
            q, k, v, w, w, positions, cache, None, None, layer.layer_name, True, HEAD, EPS))
        torch.library.opcheck(ops.vllm_attention_quant_fp8_static.default, (
            q, k, v, dep, layer.layer_name, torch.tensor([0.05]), [HEADS, HEAD], False, FP8))
        torch.library.opcheck(ops.vllm_attention_quant_nvfp4.default, (
            q, k, v, None, layer.layer_name, torch.tensor([448.0 * 6 / 4]), [HEADS, HEAD],
            False))


# --- no silent miss on vLLM's own ops -------------------------------------------------------------


class KDetourLayer(AttentionLayer):
    """vLLM's cache write of a k that no rope made (`detour` None), or of the rotated k through
    a pair of transposes (`detour` True): the same elements, a layout the fused kernel does not
    follow."""

    def __init__(self, layer: VA.Layer, detour: bool | None):
        super().__init__(layer)
        self.detour = detour

    def forward(self, positions, qkv):
        q, k, v = qkv.split([Q, KV, KV], -1)
        if self.detour is not None:
            q, k = native_rope(positions, q, self.cache), native_rope(positions, k, self.cache)
        if self.detour:
            k = k.view(-1, KV_HEADS, HEAD).transpose(0, 1).transpose(0, 1).reshape(k.shape)
        return VA.attention(self.layer, q, k, v)


@pytest.mark.parametrize("detour", [None, True], ids=["no_rope", "transposed"])
def test_vllms_cache_write_of_a_rotated_k_is_fused_or_explained(detour):
    from irfuse.fusions.candidates import SILENT

    flags = {"fuse_rope_kvcache": True, "fuse_qk_norm_rope_kvcache": True}
    compiled = run_step(KDetourLayer(_layer(), detour), [5, 3, 7], pass_config=flags)
    assert compiled.raised()["vllm_kv_cache_update"] == 1
    assert compiled.fused(ROPE) == 0
    missed = _missed(compiled, ROPE)
    assert SILENT not in missed and SILENT not in _missed(compiled, "fuse-qk-norm-rope-kvcache")
    if detour is None:  # a k no rope made: no candidate, no remark
        assert missed == []
    else:  # a rotated k the pattern does not follow: a candidate, with the reason
        assert any("reaches the cache write through" in m for m in missed), missed
        assert _missed(compiled, "fuse-qk-norm-rope-kvcache") == []  # no norms: not its
