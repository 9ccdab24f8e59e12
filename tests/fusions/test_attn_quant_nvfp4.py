"""fuse-attn-quant with an NVFP4 output quant: attention (prefill, GQA, the paged decode step) or
MLA whose output, token-major, feeds `quant.nvfp4` becomes one `fused.attention_quant` /
`fused.mla_attention_quant` yielding the packed codes and the swizzled block scales.

- Built-in models with NVFP4 linears (o_proj's input quantized by the custom op or in native
  torch), and Hugging Face Llama, Qwen3 and DeepSeek-V2 (MLA, kv_b in bf16) with NVFP4 linears:
  every layer's attention is raised, then fused, and the logits equal eager's bit for bit (on
  the CPU the fused op runs the reference: the unfused graph).
- The FileCheck cases of `filecheck/rewrites/fuse-attn-quant.mlir`: op counts before and after,
  the near miss's remark; on CUDA kernel choice leaves NVFP4 unfused (not measured on a GPU),
  with that reason, while FP8 still fuses.
- The CUDA entry runs the Triton kernel where kernel choice picks it and the reference where the
  kernel cannot (a mask, a head size not a multiple of 16).
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hf_corpus import build_hf, input_ids
from torch import nn
from xdsl.dialects.builtin import StringAttr
from xdsl.parser import Parser

import irfuse.models as M
from irfuse import remarks
from irfuse.context import make_context
from irfuse.dialects.irfuse import PLATFORM_ATTR
from irfuse.fusions.fuse_attn_quant import FUSION
from irfuse.fusions.fuse_attn_quant import ops as decl
from irfuse.kernels import dispatch, quant_ref
from irfuse.models.quant import Nvfp4Linear
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

PASS = "fuse-attn-quant"
ON = {"optimization_level": 1, "pass_config": {"fuse_attn_quant": True}}
FILECHECK = Path(__file__).parents[2] / "filecheck" / "rewrites" / "fuse-attn-quant.mlir"
NVFP4_CASES = ("@prefill_nvfp4", "@decode_nvfp4", "@nvfp4_head_major")


def _missed(compiled: Compiled) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.passes if p.name == PASS
            for m in p.missed]


@pytest.mark.parametrize("name,overrides", [
    ("llama-nvfp4", {}),
    ("llama-nvfp4-native", {}),
    ("llama-nvfp4", {"gqa_style": "repeat_kv"}),
    ("paged", {"quant": "nvfp4"}),
    ("mla", {"quant": "nvfp4", "mla_kv_b_quant": False}),  # attn.mla_attention, token-major
], ids=["llama", "llama-native", "repeat-kv", "paged-decode", "mla-kv-b-bf16"])
def test_builtin_nvfp4_models_fuse_every_layer_bit_exact(name, overrides):
    built = M.build(name, size="tiny", num_layers=2, **overrides)
    compiled = compile_and_run(built.model, built.example_inputs,
                               dynamic_dims=tuple(built.dynamic_dims.items()), options=ON)
    raised = compiled.raised()
    assert raised == built.expected
    assert raised["attention"] + raised["mla_attention"] == 2
    assert raised["quant_nvfp4"] >= 2  # o_proj's input among them, once per layer
    assert compiled.fused(PASS) == 2, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def _nvfp4_linears(model: nn.Module, skip: tuple[str, ...] = ()) -> int:
    """Replace the decoder layers' nn.Linears (but `skip`) by NVFP4 linears quantizing their
    input in native torch (global scale 448 * 6 / 8); return how many."""
    count = 0
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and "layers" in name and child_name not in skip:
                linear = Nvfp4Linear(child.weight.detach(), child.weight.dtype, impl="native")
                linear.input_global_scale.fill_(448.0 * 6 / 8)
                setattr(module, child_name, linear)
                count += 1
    return count


@pytest.mark.parametrize("family,skip,kind", [
    ("llama", (), "attention"),
    ("qwen3", (), "attention"),
    ("deepseek_v2", ("kv_b_proj",), "mla_attention"),  # kv_b dequantized: attn.mla_attention
])
def test_hugging_face_with_nvfp4_linears(family, skip, kind):
    model = build_hf(family)
    layers = model.lm.config.num_hidden_layers
    linears = _nvfp4_linears(model, skip)
    compiled = compile_and_run(model, [input_ids(12)], dynamic_dims=((0, 1),), options=ON)
    raised = compiled.raised()
    assert raised[kind] == layers and raised["quant_nvfp4"] == linears
    assert compiled.fused(PASS) == layers, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def _nvfp4_functions() -> str:
    """The NVFP4 functions of the FileCheck file, in one module."""
    funcs = FILECHECK.read_text().split("\nfunc.func ")
    return "\n".join("func.func " + f.split("\n}\n")[0] + "\n}" for f in funcs[1:]
                     if f.startswith(NVFP4_CASES))


def _run(text: str, platform: str | None = None) -> tuple[str, list[str], int]:
    ctx = make_context()
    module = Parser(ctx, text).parse_module()
    if platform is not None:
        module.attributes[PLATFORM_ATTR] = StringAttr(platform)
    with remarks.collecting() as sink:
        FUSION.pass_class().apply(ctx, module)
    module.verify()
    return str(module), [m.reason for m in sink.missed], sink.fused


def test_filecheck_nvfp4_cases_fuse_and_the_head_major_one_says_why():
    text = _nvfp4_functions()
    assert text.count("func.func @") == 3
    assert text.count("quant.nvfp4 ") == 3 and text.count("attn.attention ") == 3
    printed, reasons, fused = _run(text)
    assert fused == 2
    assert printed.count("fused.attention_quant") == 2
    assert printed.count("scheme = #quant.scheme<nvfp4>") == 2
    assert printed.count("quant.nvfp4 ") == 1 and printed.count("attn.attention ") == 1
    assert reasons == ["the views between the attention and the quant do not flatten its "
                       "output token-major ([B * T, H * Dv])"]


def test_sm90_fuses_measured_nvfp4_prefill_and_other_gpus_leave_it_unfused():
    """sm90 takes the measured NVFP4 prefill epilogue (the two token-major cases fuse, the
    head-major one says why not); a CUDA GPU without measurements leaves NVFP4 unfused (the
    default choice), while FP8 fuses on sm90 as before."""
    printed, reasons, fused = _run(_nvfp4_functions(), "cuda:sm90")
    assert fused == 2 and printed.count("fused.attention_quant") == 2
    assert len(reasons) == 1 and "token-major" in reasons[0], reasons
    _, reasons, fused = _run(_nvfp4_functions(), "cuda:sm100")
    assert fused == 0 and len(reasons) == 3
    fp8_text = FILECHECK.read_text().split("\n// NVFP4 output quant")[0]
    _, _, fp8_fused = _run(fp8_text, "cuda:sm90")
    assert fp8_fused == 6  # prefill, hf, decode and the three paged decodes


def _dense(t: int, d: int, hq: int = 4, hk: int = 2):
    g = torch.Generator().manual_seed(t + d)
    q = torch.randn(1, hq, t, d, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(1, hk, t, d, generator=g).to(torch.bfloat16) for _ in range(2))
    return q, k, v


def _unfused(q, k, v, mask, gs, sm, causal):
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=sm,
                                       enable_gqa=True)
    b, h, t, d = o.shape
    return quant_ref.quant_nvfp4(o.transpose(1, 2).reshape(b * t, h * d), gs)


def test_cpu_op_is_the_unfused_graph_bit_for_bit():
    q, k, v = _dense(20, 32)
    gs = torch.tensor([448.0 * 6 / 3])
    mask = torch.rand(1, 1, 20, 20, generator=torch.Generator().manual_seed(1)) > 0.4
    mask[..., 0] = True
    for m, causal in ((None, True), (mask, False)):
        out = torch.ops.irfuse.attention_quant_nvfp4(q, k, v, m, gs, 0.2, causal)
        ref = _unfused(q, k, v, m, gs, 0.2, causal)
        assert out[0].dtype == torch.uint8 and out[1].dtype == torch.float8_e4m3fn
        assert torch.equal(out[0], ref[0])
        assert torch.equal(out[1].view(torch.uint8), ref[1].view(torch.uint8))


def _fake_kernels(calls: list):
    def attention_nvfp4(q, k, v, gs, *, softmax_scale, causal, mask=None):
        calls.append((softmax_scale, causal, mask))
        b, h, t, d = q.shape
        mp, kp = quant_ref.nvfp4_scale_shape(b * t, h * d)
        return (torch.zeros(b * t, h * d // 2, dtype=torch.uint8),
                torch.zeros(mp, kp, dtype=torch.float8_e4m3fn))

    return lambda name: types.SimpleNamespace(attention_nvfp4=attention_nvfp4)


def test_cuda_entry_runs_the_kernel_where_it_can(monkeypatch):
    calls: list = []
    monkeypatch.setattr(dispatch, "use_triton", lambda *args: True)
    monkeypatch.setattr(decl, "kernels", _fake_kernels(calls))
    gs = torch.tensor([100.0])
    q, k, v = _dense(8, 32)
    codes, scales = decl.ATTN_QUANT_NVFP4.run_cuda(q, k, v, None, gs, 0.35, True)
    assert calls == [(0.35, True, None)] and codes.shape == (8, 64) and scales.shape == (128, 8)
    # A mask reaches the kernel as it is (the kernel reads it broadcast).
    mask = torch.ones(1, 1, 8, 8, dtype=torch.bool)
    decl.ATTN_QUANT_NVFP4.run_cuda(q, k, v, mask, gs, 0.35, False)
    assert calls[-1][:2] == (0.35, False) and calls[-1][2] is mask
    # A head size that splits NVFP4 blocks across heads: the reference runs.
    q, k, v = _dense(8, 8)
    out = decl.ATTN_QUANT_NVFP4.run_cuda(q, k, v, None, gs, 0.35, True)
    assert torch.equal(out[0], _unfused(q, k, v, None, gs, 0.35, True)[0])
    assert len(calls) == 2
