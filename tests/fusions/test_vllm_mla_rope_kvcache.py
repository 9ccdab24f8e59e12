"""fuse-rope-kvcache-cat-mla on vLLM 0.32's MLA calls, end to end on the CPU with the stand-ins of
`vllm_attention.py`: MLA's attention as vLLM's `MultiHeadLatentAttentionWrapper.forward` writes
it (kv_lora split into kv_c and k_pe, k_pe unsqueezed to one head, RoPE of `q[..., nope:]` and
k_pe written back into q, `MLAAttention.forward`'s `unified_mla_kv_cache_update` then
`unified_mla_attention_with_output`), RoPE in vLLM's native, DeepSeek's, `_C` or FlashInfer
spelling (the last two in place on views of q and of the kv projection, functionalized v1 and v2). The rope and vLLM's
latent-cache write become one `fused.rope_vllm_mla_kv_cache_update`; outputs and the layer's
cache bit for bit those of eager; the in-place GPU path's layout checked against vLLM's own
(stand-in) write; remarks where it stays unfused.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import vllm_attention as VA
import vllm_ops as V
from torch import nn

from irfuse.fusions import kernel_decl
from irfuse.fusions.fuse_rope_kvcache_cat_mla import ops as mla_ops
from irfuse.fusions.kernel_decl import Call, Choice
from irfuse.kernels import dispatch, mla_rope_cache_ref, qk_norm_rope_ref, vllm_context
from irfuse.models.layers import RotaryEmbedding
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

pytestmark = pytest.mark.skipif(not VA.AVAILABLE, reason="vLLM's own ops own the vllm namespace")

BF16 = torch.bfloat16
PASS = "fuse-rope-kvcache-cat-mla"
HEADS, NOPE, ROPE, LATENT, V_DIM = 4, 16, 16, 32, 8
Q = HEADS * (NOPE + ROPE)
NAME = "model.layers.0.self_attn.mla_attn"


def deepseek_rope(positions, x, cache):
    """`DeepseekScalingRotaryEmbedding.forward_native` (GPT-J): `x * cos + rotate(x) * sin`,
    cos and sin repeated pairwise to the rotary width."""
    cos, sin = cache[positions].chunk(2, dim=-1)
    cos = cos.repeat_interleave(2, dim=-1).unsqueeze(-2)
    sin = sin.repeat_interleave(2, dim=-1).unsqueeze(-2)
    rotated = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    return x * cos + rotated * sin


class MlaAttention(nn.Module):
    """vLLM's MLA attention from `x`, q `[T, H * (nope + rope)]` beside kv_lora
    `[T, latent + rope]`.
    `rope`: "native" (`RotaryEmbedding.forward_native`, new tensors), "deepseek" (DeepSeek's
    scaling rope, native), "custom" (vLLM's `_C.rotary_embedding`, in place on the views of q
    and kv_lora), "flashinfer" (FlashInfer's, in place alike, rotating in f32) or None;
    `derive` makes the write store another k_pe than the rope's: "scale" (the rotated one times
    1.5) or "shift" (the rebuilt buffer read one element off)."""

    def __init__(self, layer: VA.Layer, rope: str | None, is_neox: bool, derive: str = ""):
        super().__init__()
        self.layer, self.rope, self.is_neox, self.derive = layer, rope, is_neox, derive
        self.rotary = RotaryEmbedding(ROPE, ROPE, 64, 10000.0, is_neox, dtype=BF16,
                                      device=torch.device("cpu"))
        self.register_buffer("k_scale", torch.tensor(1.0))

    def forward(self, positions, x):
        q, kv_lora = (x * 1.0).split([Q, LATENT + ROPE], dim=-1)  # the projections' outputs
        kv_c, k_pe = kv_lora.split([LATENT, ROPE], dim=-1)
        kv_c_normed = kv_c * 2.0  # (the kv_a_layernorm)
        k_pe = k_pe.unsqueeze(1)
        q = q.reshape(-1, HEADS, NOPE + ROPE)
        if self.rope == "native":
            q[..., NOPE:], k_pe = self.rotary(positions, q[..., NOPE:], k_pe)
        elif self.rope == "deepseek":
            cache = self.rotary.cos_sin_cache
            q[..., NOPE:], k_pe = (deepseek_rope(positions, q[..., NOPE:], cache),
                                   deepseek_rope(positions, k_pe, cache))
        elif self.rope == "custom":
            V.vllm_rotary_embedding(positions, q[..., NOPE:], k_pe, ROPE,
                                    self.rotary.cos_sin_cache, self.is_neox)
        elif self.rope == "flashinfer":  # DeepSeek on CUDA with FlashInfer: an f32 cache
            V.vllm_flashinfer_rotary_embedding(positions, q[..., NOPE:], k_pe, ROPE,
                                               self.rotary.cos_sin_cache.float(), self.is_neox)
        if self.derive == "scale":
            k_pe = k_pe * 1.5
        elif self.derive == "shift":  # a read of the rebuilt kv projection one element off
            k_pe = kv_lora[..., LATENT - 1:LATENT + ROPE - 1].unsqueeze(1)
        return VA.mla_attention(self.layer, q, kv_c_normed, k_pe, self.k_scale)


def _layer(**kw) -> VA.Layer:
    return VA.Layer(NAME, HEADS, 1, LATENT + ROPE, num_blocks=16, block_size=4, mla_v_dim=V_DIM,
                    **kw)


def run_step(module: MlaAttention, flag: bool = True, v2: bool = True) -> Compiled:
    """One decode step of three sequences in a forward context: compiled vs eager from the same
    cache, outputs and cache bit for bit."""
    layer = module.layer
    meta, slots = VA.decode_batch([5, 3, 7], 4, 16)
    g = torch.Generator().manual_seed(3)
    layer.kv_cache.copy_(torch.randn(layer.kv_cache.shape, generator=g).to(BF16))
    start = layer.kv_cache.clone()
    positions = torch.tensor([4, 2, 6])
    x = torch.randn(3, Q + LATENT + ROPE, generator=g).to(BF16)
    with VA.forward_context({NAME: meta}, {NAME: slots}):
        with torch.no_grad():
            eager = module(positions, x)
        want = layer.kv_cache.clone()
        layer.kv_cache.copy_(start)
        opts = {"optimization_level": 1, "pass_config": {"fuse_rope_kvcache_cat_mla": flag}}
        with torch._inductor.config.patch(enable_auto_functionalized_v2=v2):
            compiled = compile_and_run(module, [positions, x], dynamic_dims=((0, 0), (1, 0)),
                                       options=opts)
    assert_bit_exact(compiled.outputs[0], eager)
    assert torch.equal(layer.kv_cache, want)
    assert not torch.equal(want, start)  # the step wrote the cache
    return compiled


def _missed(compiled: Compiled) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.passes if p.name == PASS
            for m in p.missed]


@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
@pytest.mark.parametrize(("rope", "is_neox"), [
    ("native", False), ("native", True), ("deepseek", False), ("custom", False),
    ("custom", True), ("flashinfer", False)],
    ids=["native-gptj", "native-neox", "deepseek", "custom-gptj", "custom-neox", "flashinfer"])
def test_rope_and_vllms_latent_write_fuse_bit_exact(rope, is_neox, v2):
    compiled = run_step(MlaAttention(_layer(), rope, is_neox), v2=v2)
    assert compiled.raised()["vllm_mla_kv_cache_update"] == 1
    assert compiled.fused(PASS) == 1, _missed(compiled)


def test_off_it_only_raises():
    compiled = run_step(MlaAttention(_layer(), "native", False), flag=False)
    assert compiled.raised()["vllm_mla_kv_cache_update"] == 1
    assert compiled.fused(PASS) == 0


def test_an_unrotated_k_pe_is_no_candidate():
    compiled = run_step(MlaAttention(_layer(), None, False))
    assert compiled.fused(PASS) == 0
    assert _missed(compiled) == []


def test_a_k_pe_computed_from_the_rotated_one_is_explained():
    compiled = run_step(MlaAttention(_layer(), "native", False, derive="scale"))
    assert compiled.fused(PASS) == 0
    assert any("the fused kernel writes the rope's own k" in m for m in _missed(compiled)), \
        _missed(compiled)


@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
def test_a_read_of_the_rebuilt_buffer_off_the_rotated_k_pe_is_explained(v2):
    """`_C`'s rotary in place on views of the kv projection, then a write of a region of the
    rebuilt projection that straddles kv_c and the rotated k_pe: no fusion, and the report
    says why."""
    compiled = run_step(MlaAttention(_layer(), "custom", False, derive="shift"), v2=v2)
    assert compiled.fused(PASS) == 0
    assert any("reads part of a rotated piece" in m for m in _missed(compiled)), \
        _missed(compiled)


def _rope_call(q, k, kv_c, positions, cache, kv_cache_dtype="auto", k_scale=1.0) -> Call:
    return Call({"q_pe": q, "k_pe": k, "kv_c": kv_c, "positions": positions,
                 "cos_sin_cache": cache, "cos": None, "sin": None,
                 "k_scale": torch.tensor(k_scale), "layer_name": NAME,
                 "kv_cache_dtype": kv_cache_dtype, "is_neox": False, "rotary_dim": ROPE,
                 "rope_f32": False})


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
def test_in_place_path_writes_where_vllms_write_does(monkeypatch, kv_cache_dtype):
    """The GPU path's one launch (its torch reference standing in for the Triton kernel) writes
    `[kv_c | rotated k_pe]` into vLLM's `[B, 1, N, C]` latent cache where vLLM's own write puts
    it, bit for bit: in the model dtype, or into vLLM's FP8 cache (uint8, kv_cache_dtype "fp8")
    the bytes vLLM's write stores, the row / k_scale saturated to e4m3, where that path is on
    (its measured variant; off, vLLM's write). A step without slots and an FP8 write into a cache
    that is not vLLM's FP8 go to vLLM's write."""
    monkeypatch.setattr(mla_ops, "kernels", lambda name: SimpleNamespace(
        rope_mla_kv_cache_write=mla_rope_cache_ref.rope_mla_kv_cache_write,
        qk_norm_rope=qk_norm_rope_ref.qk_norm_rope))
    launched: list[str] = []
    real = mla_rope_cache_ref.rope_mla_kv_cache_write
    monkeypatch.setattr(mla_rope_cache_ref, "rope_mla_kv_cache_write",
                        lambda *a, **kw: launched.append("one launch") or real(*a, **kw))
    fp8 = kv_cache_dtype == "fp8"
    layer = _layer(kv_cache_dtype=kv_cache_dtype)
    meta, slots = VA.decode_batch([5, 3, 7], 4, 16)
    g = torch.Generator().manual_seed(8)
    values = torch.randn(layer.kv_cache.shape, generator=g)
    layer.kv_cache.copy_(values.to(VA.FP8).view(torch.uint8) if fp8 else values.to(BF16))
    start = layer.kv_cache.clone()
    q = torch.randn(3, HEADS, ROPE, generator=g).to(BF16)
    k = torch.randn(3, 1, ROPE, generator=g).to(BF16)
    kv_c = torch.randn(3, LATENT, generator=g).to(BF16)
    positions, cache = torch.tensor([4, 2, 6]), V.rope_cache(ROPE, 64)
    call = _rope_call(q, k, kv_c, positions, cache, kv_cache_dtype, 0.0625)
    if fp8:
        with VA.forward_context({NAME: meta}, {NAME: slots}):
            mla_ops._vllm_cuda(call)  # the FP8 path off: vLLM's write
        assert launched == []
        layer.kv_cache.copy_(start)
        _fp8_cache_path_on(monkeypatch, "cpu")
    with VA.forward_context({NAME: meta}, {NAME: slots}):
        got = mla_ops._vllm_cuda(call)
        written = layer.kv_cache.clone()
        layer.kv_cache.copy_(start)
        want = mla_ops.rope_vllm_mla_kv_cache_update(**call)
    assert launched == ["one launch"]
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert torch.equal(written, layer.kv_cache) and not torch.equal(written, start)
    if fp8:
        return
    with VA.forward_context({NAME: meta}, {}):  # no slots: vLLM writes nothing
        mla_ops._vllm_cuda(call)
    _fp8_cache_path_on(monkeypatch, "cpu")  # on, and still not taken: the cache is not FP8
    with pytest.raises(NotImplementedError, match="model dtype"):  # vLLM's own write runs
        with VA.forward_context({NAME: meta}, {NAME: slots}):
            mla_ops._vllm_cuda(_rope_call(q, k, kv_c, positions, cache, "fp8"))
    assert launched == ["one launch"]


def _fp8_cache_path_on(monkeypatch, platform: str) -> None:
    """Turn on the one launch into vLLM's FP8 latent cache on `platform` (its measured variant)."""
    monkeypatch.setitem(kernel_decl.measured(platform),
                        f"rope_vllm_mla_kv_cache_update.{vllm_context.FP8_CACHE}",
                        ((1, Choice("triton", "test: the FP8-cache path")),))


class _OwnWriteImpl(VA.MLAAttentionImpl):
    """A backend with a cache write of its own (as vLLM's CPU and AMX MLA backends have): irfuse
    does not write its cache."""

    def do_kv_cache_update(self, *args, **kwargs) -> None:  # type: ignore[override]
        super().do_kv_cache_update(*args, **kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize("own_write", [False, True], ids=["in-place", "vllms-write"])
@pytest.mark.parametrize("is_neox", [False, True], ids=["gptj", "neox"])
@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
def test_cuda_one_launch_writes_vllms_latent_cache(monkeypatch, is_neox, own_write,
                                                   kv_cache_dtype):
    """On CUDA irfuse's Triton launch rotates q_pe (a slice of q) and k_pe and writes
    `[kv_c | k_pe]` into the layer's `[B, 1, N, C]` cache in place, padded slots (-1) skipped;
    where the backend writes its cache its own way, the Triton rope runs and then vLLM's write.
    Either way the rotated values and the cache equal irfuse's reference rope followed by vLLM's
    (stand-in) write, bit for bit, an FP8 cache (uint8, scaled by k_scale) too."""
    _fp8_cache_path_on(monkeypatch, dispatch.platform_of("cuda"))
    layer = VA.Layer(NAME, HEADS, 1, LATENT + ROPE, num_blocks=16, block_size=4,
                     mla_v_dim=V_DIM, device="cuda", kv_cache_dtype=kv_cache_dtype)
    if own_write:
        layer.impl = _OwnWriteImpl(layer)
    meta, slots = VA.decode_batch([5, 3, 7, 2], 4, 16)
    slots[3] = -1
    g = torch.Generator().manual_seed(9)
    values = torch.randn(layer.kv_cache.shape, generator=g)
    layer.kv_cache.copy_(values.to(VA.FP8).view(torch.uint8) if kv_cache_dtype == "fp8"
                         else values.to(BF16))
    start = layer.kv_cache.clone()
    q = torch.randn(4, HEADS, NOPE + ROPE, generator=g).to(BF16).cuda()
    k = torch.randn(4, 1, ROPE, generator=g).to(BF16).cuda()
    kv_c = torch.randn(4, LATENT, generator=g).to(BF16).cuda()
    positions, cache = torch.tensor([4, 2, 6, 1]).cuda(), V.rope_cache(ROPE, 64).cuda()
    call = _rope_call(q[..., NOPE:], k, kv_c, positions, cache, kv_cache_dtype, 0.0625)
    call["k_scale"] = call["k_scale"].cuda()
    call["is_neox"] = is_neox
    with VA.forward_context({NAME: meta}, {NAME: slots.cuda()}):
        got = mla_ops._vllm_cuda(call)
        written = layer.kv_cache.clone()
        layer.kv_cache.copy_(start)
        want = mla_ops.rope_vllm_mla_kv_cache_update(**call)
    torch.cuda.synchronize()
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert torch.equal(written, layer.kv_cache) and not torch.equal(written, start)
