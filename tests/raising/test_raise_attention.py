"""raise-attention on real traced graphs: every SDPA spelling (GQA native or repeated, masks,
default scale, the decomposed math path), MLA in the built-in models and in Hugging Face's
DeepSeek-V2/V3 (batch-major), exact counts, outputs bit exact, and the reasons near misses give."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from xdsl.dialects.builtin import bf16
from xdsl.ir import Block
from xdsl.parser import Parser

from irfuse import remarks
from irfuse.context import make_context
from irfuse.dialects import attn
from irfuse.dialects.irfuse import tensor_type
from irfuse.models import build
from irfuse.models.layers import causal_attention
from irfuse.raising.raise_attention import RaiseAttention
from irfuse.testing import assert_bit_exact, compile_and_run

KINDS = ("attention", "mla_attention")
BF16 = torch.bfloat16


class Causal(torch.nn.Module):
    """Attention as a decoder layer writes it: one qkv tensor split into [T, H, D] heads, then
    `causal_attention` (transpose to SDPA's layout, SDPA, back)."""

    def __init__(self, gqa_style: str, scale: float | None = None, v_dim: int = 64):
        super().__init__()
        self.gqa_style, self.scale, self.v_dim = gqa_style, scale, v_dim

    def forward(self, qkv: torch.Tensor) -> torch.Tensor:
        q, k, v = qkv.split([256, 128, 2 * self.v_dim], -1)
        q, k, v = q.view(-1, 4, 64), k.view(-1, 2, 64), v.view(-1, 2, self.v_dim)
        return causal_attention(q, k, v, self.gqa_style, self.scale)


class RepeatInterleave(torch.nn.Module):
    def forward(self, q, k, v):
        k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Masked(torch.nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.2)


def _qkv(dims=(4, 16, 64), kv_heads=2):
    h, t, d = dims
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, h, t, d, generator=g).to(BF16)
    k = torch.randn(1, kv_heads, t, d, generator=g).to(BF16)
    v = torch.randn(1, kv_heads, t, d, generator=g).to(BF16)
    return q, k, v


def _reasons(report) -> list[str]:
    for record in report.raise_passes:
        if record.name == "raise-attention":
            return [m.reason for m in record.missed]
    raise AssertionError("raise-attention did not run")


def _cases():
    qkv = torch.randn(16, 512, generator=torch.Generator().manual_seed(1)).to(BF16)
    q, k, v = _qkv()
    q4, k4, v4 = _qkv(kv_heads=4)
    bool_mask = torch.rand(1, 1, 16, 16, generator=torch.Generator().manual_seed(2)) > 0.3
    float_mask = torch.randn(1, 1, 16, 16, generator=torch.Generator().manual_seed(3)).to(BF16)
    kv2 = "!irfuse.tensor<[1, 2, s"
    return {  # name: (model, inputs, dynamic dims, *parts of the raised op's printed line)
        "gqa-native": (Causal("enable_gqa", 0.125), [qkv], ((0, 0),),
                       "{scale = 1.250000e-01 : f64, causal = true} : (!irfuse.tensor<[1, 4, s",
                       kv2),
        "repeat-kv-default-scale": (Causal("repeat_kv"), [qkv], ((0, 0),),
                                    "{scale = 1.250000e-01 : f64, causal = true}", kv2),
        "math-path-dv-differs": (Causal("enable_gqa", 0.1, v_dim=32), [qkv[:, :448]], ((0, 0),),
                                 "{scale = 1.000000e-01 : f64, causal = true}", kv2,
                                 "32], bf16>) -> !irfuse.tensor<[1, 4, s"),
        "repeat-interleave": (RepeatInterleave(), [q, k, v], (),
                              "!irfuse.tensor<[1, 2, 16, 64], bf16>, !irfuse.tensor<[1, 2, 16"),
        "bool-mask": (Masked(), [q4, k4, v4, bool_mask], (),
                      "{scale = 2.000000e-01 : f64} : (!irfuse.tensor<[1, 4, 16, 64], bf16>, "
                      "!irfuse.tensor<[1, 4, 16, 64], bf16>, !irfuse.tensor<[1, 4, 16, 64], bf16>,"
                      " !irfuse.tensor<[1, 1, 16, 16], i1>)"),
        "float-mask": (Masked(), [q4, k4, v4, float_mask], (),
                       "!irfuse.tensor<[1, 1, 16, 16], bf16>) -> "),
    }


def _raised_line(dump_dir, op_name: str) -> str:
    (path,) = dump_dir.glob("run-*/*/*raise-attention.mlir")
    lines = [line for line in path.read_text().splitlines() if f"= {op_name} " in line]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("case", sorted(_cases()))
def test_sdpa_spellings_raise_once_and_stay_exact(case, tmp_path):
    model, inputs, dynamic, *signature = _cases()[case]
    result = compile_and_run(model, inputs, dynamic_dims=dynamic,
                             options={"dump_dir": str(tmp_path)})
    assert_bit_exact(result.outputs, result.eager)
    counts = result.raised()
    assert (counts["attention"], counts["mla_attention"]) == (1, 0)
    assert _reasons(result.reports[0]) == []
    # k and v are the un-repeated tensors, the mask the model's own.
    line = _raised_line(tmp_path, "attn.attention")
    assert all(part in line for part in signature), (signature, line)


@pytest.mark.parametrize("name", ["llama-hf", "mla", "mla-lite"])
def test_builtin_models_count_their_attention(name):
    built = build(name, num_layers=1)
    result = compile_and_run(built.model, built.example_inputs,
                             dynamic_dims=tuple(built.dynamic_dims.items()))
    assert_bit_exact(result.outputs, result.eager)
    counts = result.raised()
    assert {k: counts[k] for k in KINDS} == {k: built.expected[k] for k in KINDS}
    assert _reasons(result.reports[0]) == []


class MaskedMla(torch.nn.Module):
    """MLA's shape of k (k_nope from a kv projection, a shared k_pe broadcast to the heads) but
    with an explicit mask, which attn.mla_attention cannot carry."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(4)
        self.w = torch.nn.Parameter(torch.randn(4 * 64, 32, generator=g).to(BF16) * 0.1,
                                    requires_grad=False)

    def forward(self, q, kv_c, k_pe, mask):
        kv = (kv_c @ self.w.t()).view(-1, 4, 64)
        k_nope, v = kv.split([32, 32], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(-1, 4, -1)], dim=-1)
        q, k, v = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, F.pad(v, (0, 16)), attn_mask=mask)
        return out.squeeze(0).transpose(0, 1)


def test_mla_shaped_attention_with_a_mask_is_plain_attention():
    g = torch.Generator().manual_seed(5)
    inputs = [torch.randn(8, 4, 48, generator=g).to(BF16), torch.randn(8, 32, generator=g).to(BF16),
              torch.randn(8, 1, 16, generator=g).to(BF16),
              torch.randn(1, 1, 8, 8, generator=g).to(BF16)]
    result = compile_and_run(MaskedMla(), inputs, dynamic_dims=())
    assert_bit_exact(result.outputs, result.eager)
    counts = result.raised()
    assert (counts["attention"], counts["mla_attention"]) == (1, 0)
    assert _reasons(result.reports[0]) == [
        "not MLA attention (raised as attention): MLA attention with a mask"
    ]


# --- Hugging Face's DeepSeek: batch-major MLA -----------------------------------------------

DEEPSEEK_KW = dict(
    vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, q_lora_rank=32,
    kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
    first_k_dense_replace=2,  # dense MLPs: the layers' MoE is not what this test is about
    n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
)


def _deepseek(version: str) -> torch.nn.Module:
    import transformers as tf
    from hf_corpus import Logits

    config_cls, model_cls = {
        "v2": (tf.DeepseekV2Config, tf.DeepseekV2ForCausalLM),
        "v3": (tf.DeepseekV3Config, tf.DeepseekV3ForCausalLM),
    }[version]
    config = config_cls(**DEEPSEEK_KW)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return Logits(model_cls(config).eval().to(BF16))


@pytest.mark.parametrize("version", ["v3", "v2"])
def test_hf_deepseek_raises_one_mla_per_layer(version):
    """transformers 5 writes the key into `new_empty` (slice_scatter), builds a bool mask and runs
    SDPA's math path (v's head dim differs from q's): one batch-major MLA per layer, no plain
    attention, the kv_b GEMM inside the MLA op."""
    from hf_corpus import input_ids

    result = compile_and_run(_deepseek(version), [input_ids(8)], dynamic_dims=((0, 1),))
    assert_bit_exact(result.outputs, result.eager)
    counts = result.raised()
    layers = DEEPSEEK_KW["num_hidden_layers"]
    assert (counts["attention"], counts["mla_attention"]) == (0, layers)
    # q_a, q_b, kv_a, o and the three dense MLP projections per layer, and the LM head; kv_b is
    # inside mla_attention.
    assert counts["gemm"] == 7 * layers + 1
    assert _reasons(result.reports[0]) == []


class Hf4Mla(torch.nn.Module):
    """The attention core of transformers 4's DeepseekV3Attention: the kv_b projection of the
    3-D normed latent, k_pe expanded and joined by `cat`, v zero-padded to the q/k head dim for
    the kernel and the output sliced back (`pad_v`), batch 2."""

    def __init__(self, pad_v: bool = False, bias: bool = False):
        super().__init__()
        g = torch.Generator().manual_seed(4)
        self.pad_v = pad_v
        self.kv_b = torch.nn.Linear(32, 4 * 32, bias=bias).to(BF16)
        self.kv_b.weight.data = (torch.randn(128, 32, generator=g) * 0.1).to(BF16)

    def forward(self, q, latent, k_pe):
        b, n, _ = latent.shape
        kv = self.kv_b(latent).view(b, n, -1, 32).transpose(1, 2)
        k_nope, v = torch.split(kv, [16, 16], dim=-1)
        k = torch.cat((k_nope, k_pe.expand(*k_nope.shape[:-1], -1)), dim=-1)
        if self.pad_v:
            v = F.pad(v, [0, 8])
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
        if self.pad_v:
            out = out[..., :16]
        return out.transpose(1, 2).reshape(b, n, -1)


def _hf4_inputs():
    g = torch.Generator().manual_seed(5)
    return [torch.randn(2, 4, 8, 24, generator=g).to(BF16),
            torch.randn(2, 8, 32, generator=g).to(BF16),
            torch.randn(2, 1, 8, 8, generator=g).to(BF16)]


@pytest.mark.parametrize("pad_v", [False, True], ids=["math-path", "v-padded"])
def test_cat_key_of_a_3d_latent_is_batch_major_mla(pad_v):
    result = compile_and_run(Hf4Mla(pad_v), _hf4_inputs(), dynamic_dims=())
    assert_bit_exact(result.outputs, result.eager)
    counts = result.raised()
    assert (counts["attention"], counts["mla_attention"], counts["pad"]) == (0, 1, 0)
    assert _reasons(result.reports[0]) == []


def test_hf_mla_with_a_kv_b_bias_is_plain_attention():
    result = compile_and_run(Hf4Mla(bias=True), _hf4_inputs(), dynamic_dims=())
    assert_bit_exact(result.outputs, result.eager)
    counts = result.raised()
    assert (counts["attention"], counts["mla_attention"]) == (1, 0)
    assert _reasons(result.reports[0]) == [
        "not MLA attention (raised as attention): the kv_b projection has a bias"
    ]


def test_batch_major_mla_builder_infers_the_sdpa_layout_result():
    block = Block(arg_types=[
        tensor_type((2, 4, "s0", 24), bf16), tensor_type((2, 1, "s1", 32), bf16),
        tensor_type((2, 1, "s1", 8), bf16), tensor_type((128, 32), bf16),
        tensor_type((2, 1, "s0", "s1"), bf16),
    ])
    op = attn.MlaAttentionOp(*block.args, num_heads=4, qk_nope_head_dim=16, qk_rope_head_dim=8,
                             v_head_dim=16, kv_lora_rank=32, scale=0.2, batch_major=True)
    op.verify()
    assert op.out.type == tensor_type((2, 4, "s0", 16), bf16)


# --- near misses on IR -------------------------------------------------------------------------

Q = "!irfuse.tensor<[1, 4, s0, 64], bf16>"
LSE = "!irfuse.tensor<[1, 4, s0], f32>"
SYM = "!irfuse.sym<s0>"


def _run_pass_on(text: str) -> tuple[str, list[str]]:
    ctx = make_context()
    module = Parser(ctx, text).parse_module()
    with remarks.collecting() as sink:
        RaiseAttention().apply(ctx, module)
    module.verify()
    return str(module), [m.reason for m in sink.missed]


def test_dropout_and_a_used_logsumexp_are_not_raised():
    text = f"""
    func.func @f(%q: {Q}) -> ({Q}, {LSE}) {{
      %o, %lse = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q, %q, %q, 0.1, true) : ({Q}, {Q}, {Q}) -> ({Q}, {LSE})
      %o2, %lse2 = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%o, %q, %q, 0.0, true) : ({Q}, {Q}, {Q}) -> ({Q}, {LSE})
      func.return %o2, %lse2 : {Q}, {LSE}
    }}
    """
    printed, reasons = _run_pass_on(text)
    assert "attn." not in printed
    assert reasons == [
        "not attention: attention with dropout (p = 0.1)",
        "not attention: result #1 of _scaled_dot_product_flash_attention_for_cpu.default "
        "(logsumexp, ...) is used",
    ]


def test_default_scale_needs_a_static_head_dim():
    q = "!irfuse.tensor<[1, 4, 8, s1], f32>"
    text = f"""
    func.func @f(%q: {q}) -> {q} {{
      %o = aten.call "aten::scaled_dot_product_attention.default"(%q, %q, %q) : ({q}, {q}, {q}) -> {q}
      func.return %o : {q}
    }}
    """
    printed, reasons = _run_pass_on(text)
    assert "attn." not in printed
    assert reasons == ["not attention: default scale with a symbolic head dim"]


def test_math_path_with_unequal_q_and_k_scales_is_not_attention():
    f32 = "f32"
    t = lambda dims: f"!irfuse.tensor<[{dims}], {f32}>"  # noqa: E731
    text = f"""
    func.func @f(%t: {SYM}, %q: {t("1, 4, s0, 64")}, %k: {t("1, 4, s0, 64")}, %v: {t("1, 4, s0, 64")}) -> {t("1, 4, s0, 64")} {{
      %qs = aten.call "aten::mul.Scalar"(%q, 0.5) : ({t("1, 4, s0, 64")}) -> {t("1, 4, s0, 64")}
      %kt = aten.call "aten::transpose.int"(%k, -2, -1) : ({t("1, 4, s0, 64")}) -> {t("1, 4, 64, s0")}
      %ks = aten.call "aten::mul.Scalar"(%kt, 0.25) : ({t("1, 4, 64, s0")}) -> {t("1, 4, 64, s0")}
      %qe = aten.call "aten::expand.default"(%qs, [1, 4, %t, 64]) : ({t("1, 4, s0, 64")}, {SYM}) -> {t("1, 4, s0, 64")}
      %q3 = aten.call "aten::view.default"(%qe, [4, %t, 64]) : ({t("1, 4, s0, 64")}, {SYM}) -> {t("4, s0, 64")}
      %ke = aten.call "aten::expand.default"(%ks, [1, 4, 64, %t]) : ({t("1, 4, 64, s0")}, {SYM}) -> {t("1, 4, 64, s0")}
      %k3 = aten.call "aten::view.default"(%ke, [4, 64, %t]) : ({t("1, 4, 64, s0")}, {SYM}) -> {t("4, 64, s0")}
      %s = aten.call "aten::bmm.default"(%q3, %k3) : ({t("4, s0, 64")}, {t("4, 64, s0")}) -> {t("4, s0, s0")}
      %s4 = aten.call "aten::view.default"(%s, [1, 4, %t, %t]) : ({t("4, s0, s0")}, {SYM}, {SYM}) -> {t("1, 4, s0, s0")}
      %p = aten.call "aten::_safe_softmax.default"(%s4, -1) : ({t("1, 4, s0, s0")}) -> {t("1, 4, s0, s0")}
      %pe = aten.call "aten::expand.default"(%p, [1, 4, %t, %t]) : ({t("1, 4, s0, s0")}, {SYM}, {SYM}) -> {t("1, 4, s0, s0")}
      %p3 = aten.call "aten::view.default"(%pe, [4, %t, %t]) : ({t("1, 4, s0, s0")}, {SYM}, {SYM}) -> {t("4, s0, s0")}
      %ve = aten.call "aten::expand.default"(%v, [1, 4, %t, 64]) : ({t("1, 4, s0, 64")}, {SYM}) -> {t("1, 4, s0, 64")}
      %v3 = aten.call "aten::view.default"(%ve, [4, %t, 64]) : ({t("1, 4, s0, 64")}, {SYM}) -> {t("4, s0, 64")}
      %o = aten.call "aten::bmm.default"(%p3, %v3) : ({t("4, s0, s0")}, {t("4, s0, 64")}) -> {t("4, s0, 64")}
      %o4 = aten.call "aten::view.default"(%o, [1, 4, %t, 64]) : ({t("4, s0, 64")}, {SYM}) -> {t("1, 4, s0, 64")}
      func.return %o4 : {t("1, 4, s0, 64")}
    }}
    """
    printed, reasons = _run_pass_on(text)
    assert "attn." not in printed
    assert reasons == ["not attention: q and k are scaled by 0.5 and 0.25, not by one positive "
                       "factor"]
    # The same chain with equal factors is attention with scale 0.5 * 0.5.
    printed, reasons = _run_pass_on(text.replace("0.25", "0.5"))
    assert reasons == [] and "attn.attention %q, %k, %v {scale = 2.500000e-01 : f64}" in printed


# --- CUDA ---------------------------------------------------------------------------------------


class CudaForms(torch.nn.Module):
    """What SDPA becomes on a CUDA GPU: cuDNN or flash (bf16), the efficient kernel (f32, or a
    mask), flash with a head dim padded to 8, and the math fallback."""

    def forward(self, q, k, v, q20, q32, mask):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        b = F.scaled_dot_product_attention(q20, q20, q20, is_causal=True)
        c = F.scaled_dot_product_attention(q32, q32, q32, attn_mask=mask)
        with sdpa_kernel(SDPBackend.MATH):
            d = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return a, b, c, d


@pytest.mark.gpu
def test_cuda_sdpa_forms_raise():
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    q = torch.randn(1, 4, 32, 64, device=dev, generator=g, dtype=BF16)
    k = torch.randn(1, 2, 32, 64, device=dev, generator=g, dtype=BF16)
    q20 = torch.randn(1, 4, 32, 20, device=dev, generator=g, dtype=BF16)
    q32 = torch.randn(1, 4, 32, 64, device=dev, generator=g)
    mask = torch.rand(1, 1, 32, 32, device=dev, generator=g) > 0.3
    result = compile_and_run(CudaForms(), [q, k, k.clone(), q20, q32, mask], dynamic_dims=())
    assert_bit_exact(result.outputs, result.eager)
    assert result.raised()["attention"] == 4
    assert _reasons(result.reports[0]) == []
