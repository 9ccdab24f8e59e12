"""raise-rope on real graphs: every RoPE spelling raised once per attention layer, bit-exact.

Small modules spell the rotation the ways vLLM and Hugging Face write it (NeoX halves, GPT-J
pairs, cos/sin from a cache by positions or passed in, partial rotary dim, f32 math, DeepSeek's
interleaved form, complex numbers); Hugging Face decoders built from configs and the built-in models check the
count (one `attn.rope` per attention layer, q and k together) on whole models. Near misses
(cos and sin of different positions, a rotation with the wrong sign) must leave their remark.
"""

from __future__ import annotations

import pytest
import torch
from hf_corpus import HF_KW, Logits, build_hf
from torch import nn

import irfuse.models as models
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

T, HQ, HK, D = 8, 4, 2, 16


def _run(fn, *inputs: torch.Tensor, dynamic) -> Compiled:
    class Wrap(nn.Module):
        def forward(self, *args):
            return fn(*args)

    compiled = compile_and_run(Wrap(), inputs, dynamic_dims=dynamic)
    assert_bit_exact(compiled.outputs, compiled.eager)
    return compiled


def _missed(compiled: Compiled) -> list[str]:
    reports = {r.graph: r for r in reversed(compiled.reports)}.values()
    return [m.reason for report in reports for record in report.raise_passes
            if record.name == "raise-rope" for m in record.missed]


def _cache(rotary_dim: int, max_positions: int = 64) -> torch.Tensor:
    inv_freq = 1.0 / (10000 ** (torch.arange(0, rotary_dim, 2).float() / rotary_dim))
    freqs = torch.outer(torch.arange(max_positions).float(), inv_freq)
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1)


def _vllm_rotate(x, cos, sin, rotary_dim: int, neox: bool):
    """vLLM's forward_native rotation of x [T, H, D] by cos/sin [T, rotary_dim / 2]."""
    x_rot = x[..., :rotary_dim]
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    x1, x2 = x_rot.chunk(2, dim=-1) if neox else (x_rot[..., ::2], x_rot[..., 1::2])
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    out = torch.cat((o1, o2), -1) if neox else torch.stack((o1, o2), -1).flatten(-2)
    return torch.cat((out, x[..., rotary_dim:]), -1)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _every_two(x):
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


LOOKUPS = {
    "index_select": lambda cache, pos: cache.index_select(0, pos),
    "index": lambda cache, pos: cache[pos],
    "embedding": lambda cache, pos: torch.nn.functional.embedding(pos, cache),
}


@pytest.mark.parametrize("lookup,neox,rotary_dim", [
    ("index_select", True, D), ("index", False, D), ("embedding", True, D // 2),
    ("index", False, 4),
])
def test_vllm_cache_forms(lookup, neox, rotary_dim):
    def rope(pos, q, k, cache):
        cos, sin = LOOKUPS[lookup](cache, pos).chunk(2, dim=-1)
        return (_vllm_rotate(q, cos, sin, rotary_dim, neox),
                _vllm_rotate(k, cos, sin, rotary_dim, neox))

    compiled = _run(rope, torch.arange(T), torch.randn(T, HQ, D), torch.randn(T, HK, D),
                    _cache(rotary_dim), dynamic=((0, 0), (1, 0), (2, 0)))
    assert compiled.raised()["rope"] == 1
    assert _missed(compiled) == []


@pytest.mark.parametrize("neox,rotary_dim", [(True, D), (False, D), (True, D // 2), (False, 8)])
def test_hugging_face_forms(neox, rotary_dim):
    rotate = _rotate_half if neox else _every_two

    def rope(q, k, cos, sin):
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)

        def one(x):
            x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
            return torch.cat(((x_rot * cos) + (rotate(x_rot) * sin), x_pass), dim=-1)

        return one(q), one(k)

    q, k = torch.randn(1, HQ, T, D), torch.randn(1, HK, T, D)
    cos, sin = torch.randn(1, T, rotary_dim), torch.randn(1, T, rotary_dim)
    compiled = _run(rope, q, k, cos, sin, dynamic=((0, 2), (1, 2), (2, 1), (3, 1)))
    assert compiled.raised()["rope"] == 1


def _stack_decomposed(a, b):
    """`torch.stack((a, b), -1)` as Inductor decomposes it (vLLM's post-grad graph)."""
    return torch.cat((a.unsqueeze(-1), b.unsqueeze(-1)), dim=-1)


def _interleaved(c):
    """`c.repeat_interleave(2, -1)` as Inductor decomposes it: unsqueeze, expand, clone, view."""
    *lead, h = c.shape
    return c.unsqueeze(-1).expand(*lead, h, 2).clone().view(*lead, 2 * h)


def test_gptj_stack_as_vllms_post_grad_graph_spells_it():
    """GPT-J pairs recombined by a `cat` of last-dim unsqueezes (a decomposed `stack`), in both
    forms: vLLM's pairs form (`ApplyRotaryEmb.forward_static`) and DeepSeek's scaling rope
    (`x * cos + rotate_gptj(x) * sin`, cos and sin interleaved), its q_pe `[T, H, R]` and k_pe
    `[T, 1, R]`. Before irfuse read this spelling the rope was passed over in silence."""
    def pairs(pos, q, k, cache):
        cos, sin = cache[pos].chunk(2, dim=-1)
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)

        def one(x):
            x1, x2 = x[..., ::2], x[..., 1::2]
            return _stack_decomposed(x1 * cos - x2 * sin, x2 * cos + x1 * sin).flatten(-2)

        return one(q), one(k)

    def deepseek(pos, q, k, cache):
        cos, sin = cache[pos].chunk(2, dim=-1)
        cos, sin = _interleaved(cos).unsqueeze(-2), _interleaved(sin).unsqueeze(-2)

        def one(x):
            rotated = _stack_decomposed(-x[..., 1::2], x[..., ::2]).view(x.shape)
            return x * cos + rotated * sin

        return one(q), one(k)

    for rope in (pairs, deepseek):
        compiled = _run(rope, torch.arange(T), torch.randn(T, HQ, D).bfloat16(),
                        torch.randn(T, 1, D).bfloat16(), _cache(D).bfloat16(),
                        dynamic=((0, 0), (1, 0), (2, 0)))
        assert compiled.raised()["rope"] == 1, rope.__name__
        assert _missed(compiled) == []


def test_gptj_pairs_from_a_pair_view():
    """GPT-J pairs read through `x.view(.., d/2, 2)`: indexed (pairs form) or unbound (HF)."""
    def rope(pos, q, k, cache):
        cos, sin = cache[pos].chunk(2, dim=-1)
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
        full_cos, full_sin = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)

        def pairs(x):
            view = x.view(*x.shape[:-1], -1, 2)
            x1, x2 = view[..., 0], view[..., 1]
            return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1).flatten(-2)

        def rotate(x):
            x1, x2 = x.view(*x.shape[:-1], -1, 2).unbind(-1)
            return torch.stack((-x2, x1), -1).flatten(-2)

        q2 = (q * 2).view(-1, HQ, D)  # a second layer's q and k, rotated the HF way
        k2 = (k * 2).view(-1, HK, D)
        return (pairs(q), pairs(k), q2 * full_cos + rotate(q2) * full_sin,
                k2 * full_cos + rotate(k2) * full_sin)

    compiled = _run(rope, torch.arange(T), torch.randn(T, HQ, D), torch.randn(T, HK, D),
                    _cache(D), dynamic=((0, 0), (1, 0), (2, 0)))
    assert compiled.raised()["rope"] == 2


def test_f32_rotation_of_a_bf16_q_and_k():
    def rope(q, k, cos, sin):
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
        qf, kf = q.float(), k.float()
        return ((qf * cos + _rotate_half(qf) * sin).to(q.dtype),
                (kf * cos + _rotate_half(kf) * sin).to(k.dtype))

    compiled = _run(rope, torch.randn(T, HQ, D).bfloat16(), torch.randn(T, HK, D).bfloat16(),
                    torch.randn(T, D), torch.randn(T, D), dynamic=((0, 0), (1, 0), (2, 0), (3, 0)))
    assert compiled.raised()["rope"] == 1


def test_deepseek_interleaved_form():
    def rope(q, k, cos, sin):
        cos = cos[..., : cos.shape[-1] // 2].unsqueeze(1)
        sin = sin[..., : sin.shape[-1] // 2].unsqueeze(1)

        def one(x):
            x1, x2 = x[..., 0::2], x[..., 1::2]
            return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

        return one(q), one(k)

    compiled = _run(rope, torch.randn(1, HQ, T, D), torch.randn(1, 1, T, D),
                    torch.randn(1, T, D), torch.randn(1, T, D),
                    dynamic=((0, 2), (1, 2), (2, 1), (3, 1)))
    assert compiled.raised()["rope"] == 1


def test_complex_form():
    """Meta's / DeepSeek-V2's RoPE through complex numbers (GPT-J pairs)."""
    def rope(q, k, freqs):
        def one(x):
            xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
            return torch.view_as_real(xc * freqs[:, None, :]).flatten(2).type_as(x)

        return one(q), one(k)

    freqs = torch.polar(torch.ones(T, D // 2), torch.randn(T, D // 2))
    compiled = _run(rope, torch.randn(T, HQ, D).bfloat16(), torch.randn(T, HK, D).bfloat16(),
                    freqs, dynamic=((0, 0), (1, 0), (2, 0)))
    assert compiled.raised()["rope"] == 1


def test_q_only_and_two_layers():
    def rope(pos, x, wq, wk, cache):
        cos, sin = cache[pos].chunk(2, dim=-1)
        for _ in range(2):  # two layers: each rotates its q and k
            q = (x @ wq).view(-1, HQ, D)
            k = (x @ wk).view(-1, HK, D)
            q, k = _vllm_rotate(q, cos, sin, D, True), _vllm_rotate(k, cos, sin, D, True)
            x = (q.sum(1) + k.sum(1)).repeat(1, 4)
        q_pe = (x @ wq).view(-1, HQ, D)  # a third rotation of q alone
        return x, _vllm_rotate(q_pe, cos, sin, D, False)

    compiled = _run(rope, torch.arange(T), torch.randn(T, 4 * D), torch.randn(4 * D, HQ * D),
                    torch.randn(4 * D, HK * D), _cache(D), dynamic=((0, 0), (1, 0)))
    assert compiled.raised()["rope"] == 3


def test_cos_and_sin_of_different_positions_are_not_raised():
    def rope(pos, pos2, q, cache):
        half = D // 2
        return _vllm_rotate(q, cache[pos][..., :half], cache[pos2][..., half:], D, True)

    compiled = _run(rope, torch.arange(T), torch.arange(T).flip(0), torch.randn(T, HQ, D),
                    _cache(D), dynamic=((0, 0), (1, 0), (2, 0)))
    assert compiled.raised()["rope"] == 0
    assert _missed(compiled) == ["not a RoPE: cos and sin come from different positions"]


def test_rotations_with_the_wrong_sign_are_not_raised():
    def rope(q, cos, sin, cos_half, sin_half):
        half = D // 2
        c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)
        bad_rotate = q * c + torch.cat((q[..., half:], -q[..., :half]), -1) * s
        ch, sh = cos_half.unsqueeze(-2), sin_half.unsqueeze(-2)
        x1, x2 = q.chunk(2, dim=-1)
        bad_pairs = torch.cat((x1 * ch + x2 * sh, x2 * ch + x1 * sh), -1)
        return bad_rotate, bad_pairs

    compiled = _run(rope, torch.randn(T, HQ, D), torch.randn(T, D), torch.randn(T, D),
                    torch.randn(T, D // 2), torch.randn(T, D // 2),
                    dynamic=((0, 0), (1, 0), (2, 0), (3, 0), (4, 0)))
    assert compiled.raised()["rope"] == 0
    assert sorted(_missed(compiled)) == [
        "not a RoPE: o1 = x1 * cos + x2 * sin: the first part has the wrong sign",
        "not a RoPE: rotate(x) = (x2, -x1) has the wrong sign; RoPE's is (-x2, x1)",
    ]


# Hugging Face decoders: Llama (2 layers) and DeepSeek-V3's MLA (1 layer, interleaved rope on q_pe
# and k_pe). One rope per layer; SiLU·Mul per gated-SiLU MLP. (Qwen3, Mistral and Gemma spell RoPE
# as Llama does; GPT-J, Phi-3, Cohere, GPT-NeoX, DeepSeek-V2 and others were checked by hand, and
# their spellings are the small modules above.)
def _deepseek_v3() -> nn.Module:
    import transformers as tf

    kw = dict(HF_KW, num_hidden_layers=1)
    kw["num_key_value_heads"] = kw["num_attention_heads"]
    config = tf.DeepseekV3Config(**kw, q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16,
                                 qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=4,
                                 first_k_dense_replace=1)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return Logits(tf.DeepseekV3ForCausalLM(config).eval())


HF_CASES = {"llama": (2, 2), "deepseek_v3": (1, 1)}  # family -> (silu_mul, rope)


@pytest.mark.parametrize("family", sorted(HF_CASES))
def test_hugging_face_decoders(family):
    pytest.importorskip("transformers")
    model = build_hf(family) if family == "llama" else _deepseek_v3()
    ids = torch.randint(0, 128, (1, 12), generator=torch.Generator().manual_seed(0))
    compiled = compile_and_run(model, [ids], dynamic_dims=[(0, 1)])
    assert_bit_exact(compiled.outputs, compiled.eager)
    silu_mul, rope = HF_CASES[family]
    raised = compiled.raised()
    assert (raised["silu_mul"], raised["rope"]) == (silu_mul, rope)
    assert _missed(compiled) == []


# Built-in models, one layer: GPT-J on half the head dim from cache[positions] (llama-square),
# MLA's q_pe and k_pe (mla), the paged decode step (paged).
BUILTIN = ("llama-square", "mla", "paged")


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_models_have_one_rope_per_layer(name):
    built = models.build(name, num_layers=1)
    compiled = compile_and_run(built.model, built.clone_inputs(),
                               dynamic_dims=list(built.dynamic_dims.items()))
    assert_bit_exact(compiled.outputs, compiled.eager)
    assert compiled.raised()["rope"] == built.expected["rope"] == 1
    assert _missed(compiled) == []
