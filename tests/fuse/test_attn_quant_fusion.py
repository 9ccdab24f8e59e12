"""fuse-attn-quant end to end on the CPU: attention whose output is quantized to static FP8 becomes
one `irfuse::attention_quant_fp8_static` call, in the built-in decoders (prefill, GQA by
`enable_gqa` or `repeat_kv`), the paged decode step and Hugging Face Llama / Qwen3 / Mistral with
FP8 linears, outputs bit for bit those of eager (the reference is the unfused graph); a scheme the
kernel does not write is refused by name.
"""

from __future__ import annotations

import pytest
from hf_corpus import build_hf, input_ids, quantize_linears

import irfuse.models as M
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
], ids=["llama", "repeat-kv", "qwen3", "paged-decode", "mla-fp8"])
def test_builtin_models_fuse_every_layer_bit_exact(name, overrides):
    built = M.build(name, size="tiny", num_layers=2, **overrides)
    compiled = compile_and_run(built.model, built.example_inputs,
                               dynamic_dims=tuple(built.dynamic_dims.items()), options=ON)
    assert compiled.fused(PASS) == 2, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


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


def test_hugging_face_deepseek_v2_raises_mla_and_says_it_does_not_fuse_it():
    """DeepSeek-V2's attention (bf16 kv_b) is `attn.mla_attention`, one per layer; an FP8 quant
    of its output would be a remark (no MLA kernel yet), here there is none to fuse."""
    model = build_hf("deepseek_v2")
    compiled = compile_and_run(model, [input_ids(12)], dynamic_dims=((0, 1),), options=ON)
    assert compiled.raised()["mla_attention"] == model.lm.config.num_hidden_layers
    assert compiled.fused(PASS) == 0
    assert_bit_exact(compiled.outputs, compiled.eager)
