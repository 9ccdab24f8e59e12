"""enable-qk-norm-rope-fusion end to end on the CPU: per-head q/k RMSNorm -> RoPE becomes one
`irfuse::qk_norm_rope` call in every spelling models use, with outputs bit for bit those of
eager (the torch reference rounds as the model does), and the cases it leaves alone say why.

Spellings: the built-in Qwen3 decoder (vLLM's layout, the cos/sin cache or Hugging Face's cos/sin
inputs, NeoX and GPT-J, partial rotary, every norm spelling), Hugging Face's Qwen3 (norms on
`[B, T, H, D]`, the rope on the transposed view), vLLM's native Qwen3 attention (view to heads,
norm, view back, rotary on the flat q and k) and vLLM's `_C` ops functionalized, both as
auto_functionalized v2 and as v1 (vLLM compiles with `enable_auto_functionalized_v2=False`: the
raised `_C` rotary then unflattens the flat q and k it reads, and its region reads them too), alone
and with vLLM's cache write (fuse-qk-norm-rope-kvcache, and this pass then fuse-rope-kvcache).
"""

from __future__ import annotations

import pytest
import test_vllm_attention_fusions as attn_step
import torch
import vllm_attention as VA
import vllm_ops as V
from hf_corpus import build_hf, input_ids
from test_vllm_attention_fusions import AttentionLayer, run_step
from test_vllm_attention_fusions import _layer as vllm_layer
from torch import nn

import irfuse.models as M
from irfuse.fusions.candidates import SILENT
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

PASS = "enable-qk-norm-rope-fusion"
ON = {"optimization_level": 1, "pass_config": {"enable_qk_norm_rope_fusion": True}}


def _missed(compiled: Compiled, name: str = PASS) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.passes if p.name == name
            for m in p.missed]


@pytest.mark.parametrize("rope_source", ["cache", "hf"])
@pytest.mark.parametrize("rope_style", ["neox", "gptj"])
@pytest.mark.parametrize("rotary_fraction", [1.0, 0.5])
def test_builtin_qwen3_fuses_every_layer_bit_exact(rope_source, rope_style, rotary_fraction):
    built = M.build("qwen3", size="tiny", num_layers=2, rope_source=rope_source,
                    rope_style=rope_style, rotary_fraction=rotary_fraction)
    compiled = compile_and_run(built.model, built.example_inputs,
                               dynamic_dims=tuple(built.dynamic_dims.items()), options=ON)
    assert compiled.fused(PASS) == 2, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


@pytest.mark.parametrize("norm_style", ["vllm", "hf", "square", "functional", "custom_op"])
def test_every_norm_spelling(norm_style):
    built = M.build("qwen3", size="tiny", num_layers=1, norm_style=norm_style)
    compiled = compile_and_run(built.model, built.example_inputs,
                               dynamic_dims=tuple(built.dynamic_dims.items()), options=ON)
    assert compiled.fused(PASS) == 1, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_fp16_and_the_pass_is_off_by_default_on_the_cpu():
    built = M.build("qwen3", size="tiny", num_layers=1, dtype=torch.float16)
    dims = tuple(built.dynamic_dims.items())
    on = compile_and_run(built.model, built.example_inputs, dynamic_dims=dims, options=ON)
    assert on.fused(PASS) == 1, _missed(on)
    assert_bit_exact(on.outputs, on.eager)
    default = compile_and_run(built.model, built.example_inputs, dynamic_dims=dims,
                              options={"optimization_level": 3})
    assert default.fused(PASS) == 0
    assert default.raised()["rope"] == 1


@pytest.mark.parametrize("family,dynamic", [("qwen3", False), ("qwen3", True),
                                            ("qwen3_moe", True)])
def test_hugging_face_qwen3(family, dynamic):
    model = build_hf(family)
    compiled = compile_and_run(model, [input_ids(12)],
                               dynamic_dims=((0, 1),) if dynamic else (), options=ON)
    layers = model.lm.config.num_hidden_layers
    assert compiled.fused(PASS) == layers, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


# --- vLLM's spellings ----------------------------------------------------------------------------

HQ, HK, D = 4, 2, 64
DIMS = ((0, 0), (1, 0))  # positions and qkv: num_tokens, as vLLM marks them


class _VllmNorm(nn.Module):
    """vLLM's RMSNorm.forward_native (or its `_C` op)."""

    def __init__(self, eps: float, custom: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(D, dtype=torch.bfloat16) + 0.5,
                                   requires_grad=False)
        self.eps, self.custom = eps, custom

    def forward(self, x):
        if self.custom:
            return V.vllm_rms_norm(x, self.weight, self.eps)
        orig = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x.to(orig) * self.weight


def _native_rotary(positions, query, key, cache, is_neox, rotary_dim):
    """vLLM's RotaryEmbedding.forward_native on flat q and k."""
    cos, sin = cache.index_select(0, positions).chunk(2, dim=-1)
    out = []
    for x in (query, key):
        shape = x.shape
        x = x.view(positions.shape[0], -1, D)
        rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
        c, s = cos.unsqueeze(-2).to(x.dtype), sin.unsqueeze(-2).to(x.dtype)
        if is_neox:
            x1, x2 = torch.chunk(rot, 2, dim=-1)
        else:
            x1, x2 = rot[..., ::2], rot[..., 1::2]
        o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
        rot = torch.cat((o1, o2), -1) if is_neox else torch.stack((o1, o2), -1).flatten(-2)
        out.append(torch.cat((rot, rest), -1).reshape(shape))
    return out


class VllmQwen3Attention(nn.Module):
    """The qkv split, per-head norms and rotary of vLLM's Qwen3Attention."""

    def __init__(self, *, eps=1e-6, k_eps=None, custom_norm=False, custom_rope=False,
                 is_neox=True, rotary_dim=D):
        super().__init__()
        self.q_norm = _VllmNorm(eps, custom_norm)
        self.k_norm = _VllmNorm(eps if k_eps is None else k_eps, custom_norm)
        self.custom_rope, self.is_neox, self.rotary_dim = custom_rope, is_neox, rotary_dim
        self.register_buffer("cache", V.rope_cache(rotary_dim))

    def forward(self, positions, qkv):
        q, k, v = qkv.split([HQ * D, HK * D, HK * D], dim=-1)
        q = self.q_norm(q.view(*q.shape[:-1], HQ, D)).view(q.shape)
        k = self.k_norm(k.view(*k.shape[:-1], HK, D)).view(k.shape)
        if self.custom_rope:
            q, k = V.vllm_rotary_embedding(positions, q, k, D, self.cache, self.is_neox)
        else:
            q, k = _native_rotary(positions, q, k, self.cache, self.is_neox, self.rotary_dim)
        return q, k, v


def _vllm_inputs(t: int = 7):
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, 64, (t,), generator=g),
            torch.randn(t, (HQ + 2 * HK) * D, generator=g).to(torch.bfloat16)]


def _compile(model: nn.Module, v2: bool = True) -> Compiled:
    """`model` on `_vllm_inputs`, its custom ops functionalized as v2 or (as vLLM has Inductor
    do) v1."""
    with torch._inductor.config.patch(enable_auto_functionalized_v2=v2):
        return compile_and_run(model, _vllm_inputs(), dynamic_dims=DIMS, options=ON)


@pytest.mark.parametrize("custom_norm,custom_rope,v2", [
    (False, False, True),
    (True, False, True), (True, False, False),
    (False, True, True), (False, True, False),
    (True, True, True), (True, True, False),
], ids=["native", "c_norm-v2", "c_norm-v1", "c_rope-v2", "c_rope-v1", "c_ops-v2", "c_ops-v1"])
@pytest.mark.parametrize("is_neox", [True, False])
def test_vllm_native_and_custom_ops(custom_norm, custom_rope, v2, is_neox):
    """Under v1 the raised `_C` rotary reads `unflatten(view(norm, [T, H * D]))` and its region
    the flat view itself: the norm is seen through both views, and fused."""
    model = VllmQwen3Attention(custom_norm=custom_norm, custom_rope=custom_rope, is_neox=is_neox)
    compiled = _compile(model, v2)
    assert compiled.raised()["rope"] == 1 and compiled.raised()["rms_norm"] == 2
    assert compiled.fused(PASS) == 1, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_vllm_partial_rotary():
    model = VllmQwen3Attention(rotary_dim=32)
    compiled = compile_and_run(model, _vllm_inputs(), dynamic_dims=DIMS, options=ON)
    assert compiled.fused(PASS) == 1, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


class VllmQwen3VLAttention(VllmQwen3Attention):
    """Qwen3-VL's attention in vLLM: per-head norms, then the multimodal rope of `[3, T]`
    positions (ROCm's `vllm.mrope`; CUDA's Triton kernel raises the same way)."""

    def __init__(self, sections, interleaved, **kw):
        super().__init__(custom_norm=True, **kw)
        self.sections, self.interleaved = sections, interleaved

    def forward(self, positions, qkv):
        q, k, v = qkv.split([HQ * D, HK * D, HK * D], dim=-1)
        q = self.q_norm(q.view(*q.shape[:-1], HQ, D)).view(q.shape)
        k = self.k_norm(k.view(*k.shape[:-1], HK, D)).view(k.shape)
        q, k = V.vllm_mrope(positions, q, k, D, self.cache, self.sections, self.interleaved,
                            self.is_neox)
        return q, k, v


@pytest.mark.skipif(not V.VLLM_NAMESPACE, reason="vLLM's own ops own the vllm namespace")
@pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])
@pytest.mark.parametrize(("sections", "interleaved"), [((D // 4, D // 8, D // 8), False),
                                                       ((D // 4, D // 8, D // 8), True)],
                         ids=["sections", "interleaved"])
def test_vllm_multimodal_rope(v2, sections, interleaved):
    """Qwen3-VL: the norms fuse into the multimodal rope, raised with its sections."""
    model = VllmQwen3VLAttention(sections, interleaved)
    positions, qkv = _vllm_inputs()
    positions = torch.stack([positions, positions.flip(0), (positions * 7) % 64])
    with torch._inductor.config.patch(enable_auto_functionalized_v2=v2):
        compiled = compile_and_run(model, [positions, qkv], dynamic_dims=((0, 1), (1, 0)),
                                   options=ON)
    assert compiled.raised()["rope"] == 1 and compiled.raised()["rms_norm"] == 2
    assert compiled.fused(PASS) == 1, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


# --- what is left alone, and why -------------------------------------------------------------------


@pytest.mark.parametrize("custom,v2", [(False, True), (True, True), (True, False)],
                         ids=["native", "c_ops-v2", "c_ops-v1"])
def test_q_and_k_with_different_eps_is_a_remark(custom, v2):
    model = VllmQwen3Attention(k_eps=1e-5, custom_norm=custom, custom_rope=custom)
    compiled = _compile(model, v2)
    assert compiled.fused(PASS) == 0
    assert any("different eps" in m for m in _missed(compiled)), _missed(compiled)
    assert SILENT not in _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


class _NormedQKept(VllmQwen3Attention):
    """vLLM's `_C` spelling, the normed flat q also kept (a copy of it returned) before the rope
    rotates it in place."""

    def __init__(self):
        super().__init__(custom_norm=True, custom_rope=True)

    def forward(self, positions, qkv):
        q, k, v = qkv.split([HQ * D, HK * D, HK * D], dim=-1)
        q = self.q_norm(q.view(*q.shape[:-1], HQ, D)).view(q.shape)
        k = self.k_norm(k.view(*k.shape[:-1], HK, D)).view(k.shape)
        kept = q.clone()
        q, k = V.vllm_rotary_embedding(positions, q, k, D, self.cache, self.is_neox)
        return q, k, v, kept


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])
def test_normed_q_read_besides_the_rope_is_a_remark(v2):
    """Under v1 the flat view of the norm is read by the rope's unflatten and its region (which
    go with the rope) and by the copy: the norm must stay, and the report says so."""
    compiled = _compile(_NormedQKept(), v2)
    assert compiled.raised()["rope"] == 1
    assert compiled.fused(PASS) == 0
    assert any("also read elsewhere" in m for m in _missed(compiled)), _missed(compiled)
    assert SILENT not in _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


class _OnlyQNormed(VllmQwen3Attention):
    def forward(self, positions, qkv):
        q, k, v = qkv.split([HQ * D, HK * D, HK * D], dim=-1)
        q = self.q_norm(q.view(-1, HQ, D)).view(q.shape)
        return (*_native_rotary(positions, q, k, self.cache, True, D), v)


class _Olmo2(nn.Module):
    """OLMo2 normalizes all heads of q (and of k) together, then views them as heads."""

    def __init__(self):
        super().__init__()
        self.qw = nn.Parameter(torch.rand(HQ * D).to(torch.bfloat16) + 0.5, requires_grad=False)
        self.kw = nn.Parameter(torch.rand(HK * D).to(torch.bfloat16) + 0.5, requires_grad=False)
        self.register_buffer("cache", V.rope_cache(D))

    @staticmethod
    def _norm(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w

    def forward(self, positions, qkv):
        q, k, v = qkv.split([HQ * D, HK * D, HK * D], dim=-1)
        q, k = self._norm(q, self.qw), self._norm(k, self.kw)
        return (*_native_rotary(positions, q, k, self.cache, True, D), v)


@pytest.mark.parametrize("model,reason", [
    (_OnlyQNormed(), "only q is normalized"),
    (_Olmo2(), "spans all heads"),
], ids=["only-q", "olmo2"])
def test_unfusable_sites_are_remarks(model, reason):
    compiled = compile_and_run(model, _vllm_inputs(), dynamic_dims=DIMS, options=ON)
    assert compiled.fused(PASS) == 0
    assert any(reason in m for m in _missed(compiled)), _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_hugging_face_olmo2_norms_all_heads_and_says_so():
    compiled = compile_and_run(build_hf("olmo2"), [input_ids(12)], dynamic_dims=((0, 1),),
                               options=ON)
    assert compiled.fused(PASS) == 0
    assert any("spans all heads" in m for m in _missed(compiled)), _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


# --- with vLLM's cache write, as vLLM compiles Qwen3 (auto_functionalized v1) ---------------------


class _CQwen3Layer(AttentionLayer):
    """Qwen3's attention in vLLM's `_C` spelling: `_C.rms_norm` per head of q and k viewed as
    heads, viewed back flat, `_C.rotary_embedding` in place on them, vLLM's cache write and
    attention (`Attention.forward`)."""

    def forward(self, positions, qkv):
        a = attn_step
        q, k, v = qkv.split([a.Q, a.KV, a.KV], -1)
        q = V.vllm_rms_norm(q.view(*q.shape[:-1], a.HEADS, a.HEAD), self.qw, a.EPS).view(q.shape)
        k = V.vllm_rms_norm(k.view(*k.shape[:-1], a.KV_HEADS, a.HEAD), self.kw, a.EPS).view(
            k.shape)
        self.rotate(positions, q, k)
        return VA.attention(self.layer, q, k, v)

    def rotate(self, positions, q, k):
        V.vllm_rotary_embedding(positions, q, k, attn_step.HEAD, self.cache, True)


VLLM_WRITE = pytest.mark.skipif(not VA.AVAILABLE,
                                reason="vLLM's own ops own the vllm namespace")
VERSIONS = pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])


@VLLM_WRITE
@VERSIONS
def test_c_ops_norms_rope_and_vllms_write_are_one_kernel(v2):
    """fuse_qk_norm_rope_kvcache alone: the `_C` norms, the `_C` rope and vLLM's write, one
    `rope_vllm_kv_cache_update` (outputs and cache bit for bit eager: `run_step`)."""
    compiled = run_step(_CQwen3Layer(vllm_layer()), [5, 3, 7], [2, 1, 3], v2=v2,
                        pass_config={"fuse_qk_norm_rope_kvcache": True,
                                     "enable_qk_norm_rope_fusion": False,
                                     "fuse_rope_kvcache": False})
    assert compiled.raised()["rms_norm"] == 2 and compiled.raised()["rope"] == 1
    assert compiled.raised()["vllm_kv_cache_update"] == 1
    assert compiled.fused("fuse-qk-norm-rope-kvcache") == 1, \
        _missed(compiled, "fuse-qk-norm-rope-kvcache")
    kernels = {(k.op, k.impl) for r in compiled.reports for k in r.kernels}
    assert ("rope_vllm_kv_cache_update", "reference") in kernels, kernels


@VLLM_WRITE
@VERSIONS
def test_c_ops_norms_and_rope_then_rope_and_vllms_write(v2):
    """The two separate flags: this pass fuses the norms into the rope, fuse-rope-kvcache the
    fused op into vLLM's write."""
    compiled = run_step(_CQwen3Layer(vllm_layer()), [5, 3, 7], [2, 1, 3], v2=v2,
                        pass_config={"enable_qk_norm_rope_fusion": True,
                                     "fuse_rope_kvcache": True})
    assert compiled.fused(PASS) == 1, _missed(compiled)
    assert compiled.fused("fuse-rope-kvcache") == 1, _missed(compiled, "fuse-rope-kvcache")
    assert SILENT not in _missed(compiled) + _missed(compiled, "fuse-rope-kvcache")


class _MropeQwen3VLLayer(_CQwen3Layer):
    """Qwen3-VL's attention in vLLM: the `_C` per-head norms, the multimodal rope of `[3, T]`
    positions (ROCm's `vllm.mrope`, interleaved sections), vLLM's cache write and attention."""

    def rotate(self, positions, q, k):
        head = attn_step.HEAD
        rows = torch.stack([positions, positions // 2, positions % 5])
        third = head // 6
        V.vllm_mrope(rows, q, k, head, self.cache, (head // 2 - 2 * third, third, third), True)


@VLLM_WRITE
@pytest.mark.skipif(not V.VLLM_NAMESPACE, reason="vLLM's own ops own the vllm namespace")
@VERSIONS
@pytest.mark.parametrize("flags", ["two", "one"])
def test_multimodal_rope_norms_and_vllms_write(v2, flags):
    """Qwen3-VL: the norms, the multimodal rope and vLLM's write, by the two flags or by
    fuse_qk_norm_rope_kvcache alone (outputs and cache bit for bit eager: `run_step`)."""
    config = ({"enable_qk_norm_rope_fusion": True, "fuse_rope_kvcache": True} if flags == "two"
              else {"fuse_qk_norm_rope_kvcache": True, "enable_qk_norm_rope_fusion": False,
                    "fuse_rope_kvcache": False})
    compiled = run_step(_MropeQwen3VLLayer(vllm_layer()), [5, 3, 7], [2, 1, 3], v2=v2,
                        pass_config=config)
    assert compiled.raised()["rope"] == 1 and compiled.raised()["vllm_kv_cache_update"] == 1
    if flags == "two":
        assert compiled.fused(PASS) == 1, _missed(compiled)
        assert compiled.fused("fuse-rope-kvcache") == 1, _missed(compiled, "fuse-rope-kvcache")
    else:
        assert compiled.fused("fuse-qk-norm-rope-kvcache") == 1, \
            _missed(compiled, "fuse-qk-norm-rope-kvcache")
