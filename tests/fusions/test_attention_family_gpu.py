"""The attention-family fusions on CUDA (marked `gpu`; the GPU batch runs them): each fused call
runs irfuse's Triton kernel where its declaration chooses it, every site fuses, and the outputs
(and the caches the kernel writes) stay close to eager. Without FP8 GEMMs: the largest error under
2% of the largest value (the kernels' norms differ from torch's by a few ulps, an FP8 cache entry
by a step). The FP8 Llamas: `irfuse.testing.assert_fp8_model_close` (one moved FP8 code moves
every output the following FP8 GEMMs mix it into; its docstring gives the figures).
"""

from __future__ import annotations

import pytest
import torch

import irfuse.models as M
from irfuse.emit import kernel_choice
from irfuse.kernels import dispatch
from irfuse.testing import assert_fp8_model_close, compile_and_run

pytestmark = pytest.mark.gpu


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    got, want = got.float(), want.float()
    assert ((got - want).abs().max() / want.abs().max().clamp_min(1e-6)).item() < 2e-2


def _run(name: str, pass_config: dict, inductor: bool, **overrides) -> tuple:
    built = M.build(name, size="tiny", num_layers=2, device="cuda", **overrides)
    compiled = compile_and_run(built.model, built.clone_inputs(),
                               dynamic_dims=tuple(built.dynamic_dims.items()),
                               options={"optimization_level": 1, "inductor": inductor,
                                        "pass_config": pass_config})
    return built, compiled


@pytest.mark.parametrize("inductor", [False, True], ids=["no_inductor", "inductor"])
def test_qk_norm_rope_on_gpu(inductor):
    built, compiled = _run("qwen3", {"enable_qk_norm_rope_fusion": True}, inductor)
    assert compiled.fused("enable-qk-norm-rope-fusion") == 2
    platform = dispatch.platform_of("cuda")
    assert kernel_choice.choose("qk_norm_rope", platform).impl == "triton"
    _close(compiled.outputs[0], compiled.eager[0])


@pytest.mark.parametrize("inductor", [False, True], ids=["no_inductor", "inductor"])
def test_norm_rope_and_cache_write_on_gpu(inductor):
    built, compiled = _run("paged", {"enable_qk_norm_rope_fusion": True,
                                     "fuse_rope_kvcache": True}, inductor, qk_norm=True)
    assert compiled.fused("fuse-rope-kvcache") == 2
    (out, inputs), (ref, ref_inputs) = compiled.outputs, compiled.eager
    _close(out, ref)
    for got, want in zip(inputs, ref_inputs, strict=True):
        if got.is_floating_point():
            _close(got, want)


def test_attention_fp8_on_gpu():
    built, compiled = _run("llama-fp8", {"fuse_attn_quant": True}, False)
    assert compiled.fused("fuse-attn-quant") == 2
    assert_fp8_model_close(compiled.outputs[0], compiled.eager[0])


@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
def test_flash_layout_cache_write_on_gpu(fp8):
    """vLLM's one [2, blocks, block_size, heads, dim] cache (FP8 with k_scale / v_scale): the
    Triton kernel writes both halves; caches within one FP8 step / bf16 rounding of eager."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_rope_kvcache_fusion import _flash_inputs, _FlashLayoutWrite

    inputs = [x.cuda() for x in _flash_inputs(fp8)]
    compiled = compile_and_run(_FlashLayoutWrite("unbind", fp8).cuda(), inputs, dynamic_dims=(),
                               options={"optimization_level": 1, "inductor": False,
                                        "pass_config": {"fuse_rope_kvcache": True}})
    assert compiled.fused("fuse-rope-kvcache") == 1
    platform = dispatch.platform_of("cuda")
    assert kernel_choice.choose("rope_kv_cache_write_flash", platform).impl == "triton"
    (out, got), (ref, want) = compiled.outputs, compiled.eager
    _close(out, ref)
    _close(got[4], want[4])


def test_paged_decode_attention_fp8_runs_the_paged_kernel_on_gpu(monkeypatch):
    """The paged model's decode (pages gathered by the block table, the length mask) becomes
    `fused.paged_decode_quant` on CUDA too, where torch's SDPA decomposition hands the mask over
    as `where(m, 0, large negative)` (bf16 -65536, not -inf): every call runs the paged decode
    kernel over the caches themselves, none the masked kernel over a gathered copy."""
    from irfuse.kernels import attention_quant

    paged, masked = [], []
    paged_kernel, masked_kernel = attention_quant.paged_decode_fp8, attention_quant.attention_fp8

    def count_paged(q, k_cache, *args, **kw):
        paged.append(tuple(k_cache.shape))
        return paged_kernel(q, k_cache, *args, **kw)

    def count_masked(*args, **kw):
        masked.append(kw.get("mask") is not None)
        return masked_kernel(*args, **kw)

    monkeypatch.setattr(attention_quant, "paged_decode_fp8", count_paged)
    monkeypatch.setattr(attention_quant, "attention_fp8", count_masked)
    built, compiled = _run("paged", {"fuse_attn_quant": True}, False, quant="fp8")
    assert compiled.fused("fuse-attn-quant") == 2
    assert paged and not masked, (paged, masked)
    assert all(len(shape) == 4 for shape in paged), paged  # [num_blocks, block_size, Hk, D]
    assert_fp8_model_close(compiled.outputs[0], compiled.eager[0])
