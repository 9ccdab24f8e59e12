"""fuse-attn-quant end to end on the CPU: attention whose output is quantized to static FP8 becomes
one `irfuse::attention_quant_fp8_static` call, in the built-in decoders (prefill, GQA by
`enable_gqa` or `repeat_kv`), the paged decode step, MLA (`irfuse::mla_attention_quant_fp8_static`:
the built-in token-major model and Hugging Face DeepSeek-V2's batch-major, masked one, with kv_b
in bf16) and Hugging Face Llama / Qwen3 / Mistral with FP8 linears, outputs bit for bit those
of eager (the reference is the unfused graph); a scheme the kernel does not write is refused
by name.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch
from hf_corpus import StaticFp8Linear, build_hf, input_ids, quantize_linears
from torch import nn
from xdsl.parser import Parser

import irfuse.models as M
from irfuse import remarks
from irfuse.context import make_context
from irfuse.fusions.fuse_attn_quant import FUSION
from irfuse.fusions.fuse_attn_quant import ops as decl
from irfuse.kernels import dispatch
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

PASS = "fuse-attn-quant"
ON = {"optimization_level": 1, "pass_config": {"fuse_attn_quant": True}}


def _missed(compiled: Compiled) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.passes if p.name == PASS
            for m in p.missed]


@pytest.mark.parametrize("name,overrides", [
    ("llama-fp8", {}),
    ("llama-fp8", {"gqa_style": "repeat_kv"}),
    ("qwen3-fp8", {}),
    ("paged", {"quant": "fp8"}),
    ("mla", {"quant": "fp8"}),  # kv_b in FP8: the MLA is raised as its SDPA
    ("mla", {"quant": "fp8", "mla_kv_b_quant": False}),  # attn.mla_attention, token-major
], ids=["llama", "repeat-kv", "qwen3", "paged-decode", "mla-fp8", "mla-fp8-kv-b-bf16"])
def test_builtin_models_fuse_every_layer_bit_exact(name, overrides):
    built = M.build(name, size="tiny", num_layers=2, **overrides)
    compiled = compile_and_run(built.model, built.example_inputs,
                               dynamic_dims=tuple(built.dynamic_dims.items()), options=ON)
    assert compiled.fused(PASS) == 2, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_mla_with_kv_b_unquantized_raises_what_it_expects():
    """`mla_kv_b_quant=False`: kv_b stays bf16, so each layer raises one `attn.mla_attention`
    and one linear fewer is quantized; the model's expected counts say so."""
    built = M.build("mla", size="tiny", num_layers=2, quant="fp8", mla_kv_b_quant=False)
    compiled = compile_and_run(built.model, built.example_inputs,
                               dynamic_dims=tuple(built.dynamic_dims.items()),
                               options={"optimization_level": 0})
    assert compiled.raised() == built.expected
    assert built.expected["mla_attention"] == 2 and built.expected["attention"] == 0
    quantized = M.build("mla", size="tiny", num_layers=2, quant="fp8").expected
    assert built.expected["quant_fp8"] == quantized["quant_fp8"] - 2


@pytest.mark.parametrize("family", ["llama", "qwen3", "mistral"])
def test_hugging_face_with_fp8_linears(family):
    model = build_hf(family)
    quantize_linears(model)
    compiled = compile_and_run(model, [input_ids(12)], dynamic_dims=((0, 1),), options=ON)
    assert compiled.fused(PASS) == model.lm.config.num_hidden_layers, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_a_group_quant_model_is_refused_by_name_under_strict():
    built = M.build("llama-fp8-group128", size="tiny", num_layers=1)
    with pytest.raises(Exception, match="fuse-attn-quant does not fuse fp8-group-128"):
        compile_and_run(built.model, built.example_inputs,
                        dynamic_dims=tuple(built.dynamic_dims.items()), options=ON)


def test_off_by_default():
    built = M.build("llama-fp8", size="tiny", num_layers=1)
    compiled = compile_and_run(built.model, built.example_inputs,
                               dynamic_dims=tuple(built.dynamic_dims.items()),
                               options={"optimization_level": 3})
    assert compiled.fused(PASS) == 0


def test_mla_lite_with_padded_v_fuses_within_tolerance():
    """DeepSeek-V2-Lite's spelling pads v to the qk head dim around SDPA; the fused op attends
    with the unpadded v (the same values: the pad's columns are sliced off), so SDPA blocks its
    sums another way: the attention outputs differ in the last bf16 bit, which moves an FP8
    code of o_proj's input here and there, and through two layers the logits agree to a few
    percent on average (measured 3.1%), not bit for bit."""
    built = M.build("mla-lite", size="tiny", num_layers=2, quant="fp8", mla_kv_b_quant=False)
    compiled = compile_and_run(built.model, built.example_inputs,
                               dynamic_dims=tuple(built.dynamic_dims.items()), options=ON)
    assert compiled.raised()["mla_attention"] == 2
    assert compiled.fused(PASS) == 2, _missed(compiled)
    out, ref = compiled.outputs[0].float(), compiled.eager[0].float()
    assert (out - ref).abs().mean() / ref.abs().mean() <= 5e-2


def _fp8_linears_but_kv_b(model) -> None:
    """FP8 static linears everywhere in the decoder layers but kv_b_proj (vLLM's MLA
    dequantizes that weight), so the attention raises to `attn.mla_attention`."""
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and "layers" in name and child_name != "kv_b_proj":
                setattr(module, child_name, StaticFp8Linear(child))


def test_hugging_face_deepseek_v2_mla_fuses_every_layer_bit_exact():
    """DeepSeek-V2 (batch-major MLA with a bool mask, kv_b in bf16, the other linears FP8): one
    `irfuse::mla_attention_quant_fp8_static` per layer, outputs bit for bit those of eager."""
    model = build_hf("deepseek_v2")
    _fp8_linears_but_kv_b(model)
    compiled = compile_and_run(model, [input_ids(12)], dynamic_dims=((0, 1),), options=ON)
    layers = model.lm.config.num_hidden_layers
    assert compiled.raised()["mla_attention"] == layers
    assert compiled.fused(PASS) == layers, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_hugging_face_deepseek_v2_without_an_output_quant_is_not_fused():
    model = build_hf("deepseek_v2")
    compiled = compile_and_run(model, [input_ids(12)], dynamic_dims=((0, 1),), options=ON)
    assert compiled.raised()["mla_attention"] == model.lm.config.num_hidden_layers
    assert compiled.fused(PASS) == 0
    assert_bit_exact(compiled.outputs, compiled.eager)


MLA_FILECHECK = Path(__file__).parents[2] / "filecheck" / "rewrites" / "fuse-attn-quant-mla.mlir"


def test_mla_filecheck_cases_fuse_and_near_misses_say_why():
    ctx = make_context()
    module = Parser(ctx, MLA_FILECHECK.read_text()).parse_module()
    with remarks.collecting() as sink:
        FUSION.pass_class().apply(ctx, module)
    module.verify()
    assert sink.fused == 3  # two FP8, one NVFP4
    assert str(module).count("fused.mla_attention_quant") == 3
    assert "quant.nvfp4" not in str(module)
    assert [m.reason for m in sink.missed] == [
        "the views between the MLA attention and the quant do not flatten its output "
        "token-major ([T, H * v])",
        "MLA attention + group FP8 quant has no fused kernel (static per-tensor only)",
        "the MLA attention output is also read unquantized; the fused op writes only the "
        "quantized output",
    ]


@pytest.mark.parametrize("divide", [False, True])
def test_cuda_entry_runs_the_kernel_for_either_quant_spelling(monkeypatch, divide):
    """Models quantize with `x / s` (divide): the CUDA entry must still take the Triton kernel
    where kernel choice picks it, not fall back to the reference."""
    calls = []

    def attention_fp8(q, k, v, scale, *, softmax_scale, causal, mask):
        calls.append((softmax_scale, causal, mask))
        b, h, t, _ = q.shape
        return torch.zeros(b, h, t, v.shape[-1], dtype=torch.float8_e4m3fn)

    monkeypatch.setattr(dispatch, "use_triton", lambda *args: True)
    monkeypatch.setattr(decl, "kernels",
                        lambda name: types.SimpleNamespace(attention_fp8=attention_fp8))
    q = torch.randn(1, 2, 4, 8).bfloat16()
    out = decl.ATTN_QUANT.run_cuda(q, q, q, None, torch.tensor([0.1]), 0.35, True, torch.float8_e4m3fn, divide)
    assert calls == [(0.35, True, None)]
    assert out.shape == (4, 16) and out.dtype == torch.float8_e4m3fn


def _paged_decode_call(d: int = 16):
    """The fused op's operands in the paged model's decode: one query token, keys gathered from
    pages, the `[B, 1, 1, S]` bool mask of valid positions (sequence 1 shorter)."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 1, d, generator=g).bfloat16()
    k, v = (torch.randn(2, 2, 8, d, generator=g).bfloat16() for _ in range(2))
    mask = (torch.arange(8)[None, :] < torch.tensor([8, 5])[:, None])[:, None, None, :]
    return q, k, v, mask


def _recording_kernels(monkeypatch, calls: list):
    def attention_fp8(q, k, v, scale, *, softmax_scale, causal, mask=None):
        calls.append(("fp8", mask))
        return torch.zeros(*q.shape[:3], v.shape[-1], dtype=torch.float8_e4m3fn)

    def attention_nvfp4(q, k, v, gs, *, softmax_scale, causal, mask=None):
        calls.append(("nvfp4", mask))
        return "codes", "scales"

    monkeypatch.setattr(dispatch, "use_triton", lambda *args: True)
    monkeypatch.setattr(decl, "kernels", lambda name: types.SimpleNamespace(
        attention_fp8=attention_fp8, attention_nvfp4=attention_nvfp4))


def test_cuda_entries_run_the_kernel_for_masked_attention(monkeypatch):
    """The paged model's decode reaches the fused op masked: both CUDA entries hand the mask to
    the Triton kernel (as it is: the kernel reads the broadcast by strides)."""
    calls: list = []
    _recording_kernels(monkeypatch, calls)
    q, k, v, mask = _paged_decode_call()
    fmask = torch.zeros(1, 1, 1, 8).bfloat16()
    out = decl.ATTN_QUANT.run_cuda(q, k, v, mask, torch.tensor([0.1]), 0.25, False, torch.float8_e4m3fn, True)
    decl.ATTN_QUANT.run_cuda(q, k, v, fmask, torch.tensor([0.1]), 0.25, False, torch.float8_e4m3fn)
    assert decl.ATTN_QUANT_NVFP4.run_cuda(q, k, v, mask, torch.tensor([2.0]), 0.25, False) == ("codes",
                                                                                  "scales")
    assert [kind for kind, _ in calls] == ["fp8", "fp8", "nvfp4"]
    assert calls[0][1] is mask and calls[1][1] is fmask and calls[2][1] is mask
    assert out.shape == (2, 4 * 16) and out.dtype == torch.float8_e4m3fn


def test_cuda_entries_leave_what_the_kernel_refuses_to_the_reference(monkeypatch):
    """A head size past the kernel's 256 runs the reference (the unfused graph), masked or not."""
    calls: list = []
    _recording_kernels(monkeypatch, calls)
    q, k, v, mask = _paged_decode_call(d=272)
    s = torch.tensor([0.1])
    out = decl.ATTN_QUANT.run_cuda(q, k, v, mask, s, 0.25, False, torch.float8_e4m3fn, True)
    ref = decl.attention_quant_fp8_static(q, k, v, mask, s, 0.25, False, torch.float8_e4m3fn, True)
    assert calls == []
    assert torch.equal(out.view(torch.uint8), ref.view(torch.uint8))
    codes, sf = decl.ATTN_QUANT_NVFP4.run_cuda(q, k, v, mask, torch.tensor([2.0]), 0.25, False)
    rcodes, rsf = decl.attention_quant_nvfp4(q, k, v, mask, torch.tensor([2.0]), 0.25, False)
    assert calls == [] and torch.equal(codes, rcodes) and torch.equal(sf.view(torch.uint8),
                                                                      rsf.view(torch.uint8))


def test_mla_cuda_entries_run_the_kernel_for_masked_batch_major_mla(monkeypatch):
    """Hugging Face DeepSeek-V2's MLA is batch-major and masked: both MLA CUDA entries hand the
    mask to the Triton kernel."""
    calls: list = []

    def mla_attention_fp8(*args, mask=None, **kw):
        calls.append(("fp8", mask, kw["batch_major"]))
        return "fp8 out"

    def mla_attention_nvfp4(*args, mask=None, **kw):
        calls.append(("nvfp4", mask, kw["batch_major"]))
        return "nvfp4 out"

    monkeypatch.setattr(dispatch, "use_triton", lambda *args: True)
    monkeypatch.setattr(decl, "kernels", lambda name: types.SimpleNamespace(
        mla_attention_fp8=mla_attention_fp8, mla_attention_nvfp4=mla_attention_nvfp4))
    fp8_call, nvfp4_call = decl._mla_examples((8,))[1], decl._mla_nvfp4_examples((8,))[1]
    assert fp8_call[4] is not None and nvfp4_call[4] is not None
    assert decl.MLA_ATTN_QUANT.run_cuda(*fp8_call) == "fp8 out"
    assert decl.MLA_ATTN_QUANT_NVFP4.run_cuda(*nvfp4_call) == "nvfp4 out"
    assert [(kind, bm) for kind, _, bm in calls] == [("fp8", True), ("nvfp4", True)]
    assert calls[0][1] is fp8_call[4] and calls[1][1] is nvfp4_call[4]


def test_the_paged_decode_stays_paged_after_an_automatic_dynamic_recompile():
    # Without mark_dynamic, Dynamo recompiles at the second size with every changed dim
    # symbolic: each cache's block count gets a symbol of its own. The cache writes then did
    # not pair and the decode attended over the gathered pages, with no remark.
    from irfuse import backend

    torch._dynamo.reset()
    backend.clear_reports()
    built = M.build("paged", size="tiny", quant="fp8")
    compiled = torch.compile(built.model, backend="irfuse",
                             options={"inductor": False, "optimization_level": 2, "strict": True,
                                      "pass_config": {"fuse_attn_quant": True}})
    with torch.no_grad():
        for tokens in (4, 6, 9):
            inputs = built.make_inputs(tokens, 1)
            out = compiled(*[x.clone() for x in inputs])
            assert_bit_exact(out, built.model(*[x.clone() for x in inputs]))
    reports = backend.reports()
    assert len({r.graph for r in reports}) == 2  # the static graph, then the dynamic one
    for report in reports:
        assert report.raised["kv_cache_write"] == built.config.num_layers
        assert report.fused("fuse-attn-quant") == built.config.num_layers
        chosen = {k.op for k in report.kernels}
        assert "paged_decode_quant_fp8_static" in chosen
        assert "attention_quant_fp8_static" not in chosen


def test_a_decode_over_pages_the_paged_kernel_does_not_take_says_why():
    # Keys and values gathered by two block tables: not the paged kernel's pattern. The decode
    # still fuses (over the gathered copy), and the report says why it is not the paged kernel.
    class TwoTables(nn.Module):
        def forward(self, q, kc, vc, kt, vt, lens, scale):
            keys = kc[kt].flatten(1, 2).transpose(1, 2)
            values = vc[vt].flatten(1, 2).transpose(1, 2)
            mask = torch.arange(keys.shape[2])[None, :] < lens[:, None]
            out = torch.nn.functional.scaled_dot_product_attention(
                q.unsqueeze(2), keys, values, attn_mask=mask[:, None, None, :],
                enable_gqa=True)
            flat = out.reshape(q.shape[0], -1)
            return (flat.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn)

    g = torch.Generator().manual_seed(0)
    q = torch.randn(3, 4, 64, generator=g).bfloat16()
    kc, vc = (torch.randn(16, 8, 2, 64, generator=g).bfloat16() for _ in range(2))
    kt = torch.randperm(16, generator=g)[:6].view(3, 2).int()
    vt = torch.randperm(16, generator=g)[:6].view(3, 2).int()
    lens = torch.tensor([5, 16, 9], dtype=torch.int32)
    compiled = compile_and_run(TwoTables(), [q, kc, vc, kt, vt, lens, torch.tensor([0.01])],
                               dynamic_dims=(),
                               options={"optimization_level": 1,
                                        "pass_config": {"fuse_attn_quant": True}})
    assert_bit_exact(compiled.outputs, compiled.eager)
    assert compiled.fused("fuse-attn-quant") == 1
    reasons = [m.reason for r in compiled.reports for p in r.passes
               if p.name == "fuse-attn-quant" for m in p.missed]
    assert reasons == ["a decode over gathered pages, not fused with the paged kernel (it "
                       "attends over the gathered copy): the keys and values are gathered by "
                       "different block tables"]


class _TorchSdpaBackend(nn.Module):
    """vLLM's former TORCH_SDPA backend: q/k/v [T, H, D] moved to [H, T, D] (3-D, no batch dim),
    GQA by repeat_interleave, causal SDPA, the output moved back, then the o_proj's FP8 quant."""

    def __init__(self, heads: int, kv_heads: int):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        self.register_buffer("scale", torch.tensor([0.02]))

    def forward(self, q, k, v):
        q, k, v = (x.movedim(0, x.dim() - 2) for x in (q, k, v))
        if self.heads != self.kv_heads:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=-3)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=-3)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                               scale=q.shape[-1] ** -0.5)
        out = out.movedim(q.dim() - 2, 0)
        out = out.reshape(out.shape[0], -1)
        return (out.float() / self.scale).clamp(-448, 448).to(torch.float8_e4m3fn)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("kv_heads", [2, 4], ids=["gqa", "mha"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_3d_sdpa_with_repeat_interleave_and_movedim_fuses(kv_heads, dynamic, dtype):
    # Raised, but "the attention output is 3-D, not [B, H, T, Dv]" kept it unfused.
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(9, h, 64, generator=g).to(dtype) for h in (4, kv_heads, kv_heads)]
    compiled = compile_and_run(_TorchSdpaBackend(4, kv_heads), inputs,
                               dynamic_dims=((0, 0), (1, 0), (2, 0)) if dynamic else (),
                               options={"optimization_level": 1,
                                        "pass_config": {"fuse_attn_quant": True}})
    assert compiled.raised()["attention"] == 1
    assert compiled.fused(PASS) == 1
    assert [m for r in compiled.reports for p in r.passes if p.name == PASS
            for m in p.missed] == []
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_cuda_entry_runs_the_kernel_on_3d_attention_as_one_batch(monkeypatch):
    calls = []
    _recording_kernels(monkeypatch, calls)
    q = torch.randn(4, 6, 16).bfloat16()
    out = decl.ATTN_QUANT.run_cuda(q, q, q, None, torch.tensor([0.1]), 0.25, True,
                                   torch.float8_e4m3fn)
    assert calls == [("fp8", None)]
    assert out.shape == (6, 64)
