"""FlashInfer's RoPE as vLLM calls it (`vllm.flashinfer_rotary_embedding`: DeepSeek's YaRN rope on
CUDA, its cos/sin cache float32, q and k rotated in float32 and rounded once) feeding irfuse's
RoPE fusions on the CPU: raised to `attn.rope`, read as rotating in float32 (`rope_f32` on the
fused op), and fused bit for bit eager (the stand-in computes FlashInfer's rotation):

- enable-qk-norm-rope-fusion on vLLM's Qwen3 attention (per-head `_C.rms_norm` of q and k, viewed
  back flat) with the FlashInfer rope in place of `_C.rotary_embedding`;
- fuse-rope-kvcache-cat-mla on an MLA step whose q_pe `[T, H, R]` and k_pe `[T, 1, R]` FlashInfer
  rotates (in place, on buffers of their own) before the latent-cache write.
"""

from __future__ import annotations

import pytest
import torch
import vllm_ops as V
from test_qk_norm_rope_fusion import DIMS, HK, HQ, ON, D, VllmQwen3Attention, _vllm_inputs
from test_qk_norm_rope_fusion import PASS as QK_NORM_ROPE
from test_rope_kvcache_cat_mla_fusion import PASS as ROPE_MLA
from test_rope_kvcache_cat_mla_fusion import ROPE, MlaStep
from test_rope_kvcache_cat_mla_fusion import _run as run_mla
from torch import nn

from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

pytestmark = pytest.mark.skipif(not V.VLLM_NAMESPACE,
                                reason="vLLM's own ops own the vllm namespace")
VERSIONS = pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])
STYLES = pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])


def _missed(compiled: Compiled, pass_name: str) -> list[str]:
    return [m.reason for r in compiled.reports for p in [*r.raise_passes, *r.passes]
            if p.name in ("raise-vllm-ops", pass_name) for m in p.missed]


@pytest.fixture
def dump_dir(monkeypatch, tmp_path):
    """Every stage dumped under a fresh folder (`IRFUSE_DUMP_DIR`), to read the fused op."""
    monkeypatch.setenv("IRFUSE_DUMP_DIR", str(tmp_path))
    return tmp_path


def _fused_lines(dump_dir, op_name: str) -> list[str]:
    """The lines of the last stage's IR (before emit) that hold `op_name`, over every graph."""
    lines = []
    for graph in dump_dir.glob("run-*/graph_*"):
        stages = sorted(p for p in graph.glob("*.mlir") if not p.name.endswith("-emit.mlir"))
        lines += [line for line in stages[-1].read_text().splitlines() if op_name in line]
    return lines


class FlashinferQwen3Attention(VllmQwen3Attention):
    """vLLM's Qwen3 attention (its `_C.rms_norm` q/k norms) with the rotary on FlashInfer: the
    cache float32, as DeepSeek's rope keeps it for FlashInfer."""

    def __init__(self, is_neox: bool):
        super().__init__(custom_norm=True, is_neox=is_neox)
        self.cache = V.rope_cache(D, dtype=torch.float32)

    def forward(self, positions, qkv):
        q, k, v = qkv.split([HQ * D, HK * D, HK * D], dim=-1)
        q = self.q_norm(q.view(*q.shape[:-1], HQ, D)).view(q.shape)
        k = self.k_norm(k.view(*k.shape[:-1], HK, D)).view(k.shape)
        q, k = V.vllm_flashinfer_rotary_embedding(positions, q, k, D, self.cache, self.is_neox)
        return q, k, v


@STYLES
def test_qk_norm_and_flashinfer_rope_fuse_bit_exact(is_neox, dump_dir):
    compiled = compile_and_run(FlashinferQwen3Attention(is_neox), _vllm_inputs(),
                               dynamic_dims=DIMS, options=ON)
    assert compiled.fused(QK_NORM_ROPE) == 1, _missed(compiled, QK_NORM_ROPE)
    (line,) = _fused_lines(dump_dir, "fused.qk_norm_rope")
    assert "rope_f32" in line and "cos_sin_cache" in line
    assert_bit_exact(compiled.outputs, compiled.eager)


class FlashinferRotary(nn.Module):
    """DeepSeek's rope on FlashInfer, standing in for MlaStep's `RotaryEmbedding`: q_pe and k_pe
    rotated in place on buffers of their own (the step's inputs stay untouched), the cache
    float32."""

    def __init__(self, is_neox: bool):
        super().__init__()
        self.is_neox = is_neox
        self.register_buffer("cache", V.rope_cache(ROPE, dtype=torch.float32))

    def forward(self, positions, q_pe, k_pe):
        return V.vllm_flashinfer_rotary_embedding(positions, q_pe.clone(), k_pe.clone(), ROPE,
                                                  self.cache, self.is_neox)


@VERSIONS
@STYLES
def test_flashinfer_rope_and_latent_write_fuse_bit_exact(is_neox, v2, dump_dir):
    step = MlaStep(is_neox, "index_copy")
    step.rotary = FlashinferRotary(is_neox)
    with torch._inductor.config.patch(enable_auto_functionalized_v2=v2):
        compiled = run_mla(step)
    assert compiled.raised()["rope"] == 1, _missed(compiled, ROPE_MLA)
    assert compiled.fused(ROPE_MLA) == 1, _missed(compiled, ROPE_MLA)
    (line,) = _fused_lines(dump_dir, "fused.rope_mla_kv_cache_write")
    assert "rope_f32" in line
    assert_bit_exact(compiled.outputs, compiled.eager)  # outputs and the cache
