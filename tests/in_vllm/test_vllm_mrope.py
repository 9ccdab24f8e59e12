"""vLLM's multimodal RoPE in its CPU and CUDA spellings. The CPU's (`forward_native`, torch code)
is raised by raise-rope and fused with Qwen3-VL's norms. The CUDA kernel (`_triton_mrope_forward`),
run by Triton's interpreter, in the call Dynamo makes of its launch: irfuse reads it by vLLM's parameter names, raises it, and the
graph, left unfused (vLLM's kernel runs) or fused with Qwen3-VL's norms (irfuse's reference
runs), equals vLLM's own torch code (`MRotaryEmbedding.forward_native`) bit for bit.

vLLM's CPU build turns Triton off, so the worker loads vLLM's `mrope.py` once more with Triton
on (its op registration skipped). The tensors are float32: Triton's interpreter multiplies bf16
wrongly (the bf16 kernel is `tests/vllm_triton_mrope.py`'s stand-in, `tests/raising/
test_user_kernels.py`)."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys
import types

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (make test installs it into "
                    ".venv-vllm and runs these tests there)")

import torch  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = "vllm.model_executor.layers.rotary_embedding.mrope"
HQ, HK, D = 4, 2, 32
FORMS = {"sections": ([8, 4, 4], False, True), "interleaved": ([6, 5, 5], True, True),
         "interleaved-gptj": ([6, 5, 5], True, False)}


def _vllm_kernel():
    """vLLM's `_triton_mrope_forward` as a Triton (interpreted) kernel, named as vLLM's."""
    import triton
    import triton.language as tl
    import vllm.triton_utils
    import vllm.utils.torch_utils as torch_utils

    shim = types.ModuleType("vllm.triton_utils")
    shim.__dict__.update(vllm.triton_utils.__dict__, triton=triton, tl=tl)
    register, real = torch_utils.direct_register_custom_op, sys.modules["vllm.triton_utils"]
    sys.modules["vllm.triton_utils"] = shim
    torch_utils.direct_register_custom_op = lambda *args, **kwargs: None
    try:
        spec = importlib.util.spec_from_file_location(
            NAME.rsplit(".", 1)[0] + "._mrope_with_triton", importlib.util.find_spec(NAME).origin)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.modules["vllm.triton_utils"], torch_utils.direct_register_custom_op = real, register
    kernel = module._triton_mrope_forward
    kernel.fn.__module__ = NAME
    return kernel


def _case(form: str) -> dict:
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding.mrope import MRotaryEmbedding
    from vllm_triton_mrope import functional_call

    from irfuse.pipeline import PipelineOptions, run

    sections, interleaved, is_neox = FORMS[form]
    kernel = _vllm_kernel()
    with set_current_vllm_config(VllmConfig()):
        rope = MRotaryEmbedding(D, D, 64, 10000.0, is_neox, torch.float32, sections, interleaved)
    g = torch.Generator().manual_seed(0)
    positions = torch.randint(0, 64, (3, 7), generator=g)
    qkv = torch.randn(7, (HQ + 2 * HK) * D, generator=g)
    weights = (torch.rand(2, D, generator=g) + 0.5)

    def norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def graph(positions, qkv, cache, weights):
        q, k, _ = qkv.split([HQ * D, HK * D, HK * D], -1)
        q = norm(q.view(-1, HQ, D), weights[0]).view(q.shape)
        k = norm(k.view(-1, HK, D), weights[1]).view(k.shape)
        cos, sin = cache[positions].chunk(2, dim=-1)
        return functional_call(q, k, cos, sin, sections, D, D, interleaved, is_neox, kernel)

    inputs = (positions, qkv, rope.cos_sin_cache, weights)
    gm = make_fx(graph, decomposition_table=select_decomp_table(), tracing_mode="fake")(*inputs)
    q, k, _ = qkv.split([HQ * D, HK * D, HK * D], -1)
    want = rope.forward_native(positions, norm(q.reshape(-1, HQ, D), weights[0]).reshape(q.shape),
                               norm(k.reshape(-1, HK, D), weights[1]).reshape(k.shape))
    out: dict = {"traced": [bool(torch.equal(a, b)) for a, b in zip(gm(*inputs), want,
                                                                      strict=True)]}
    for fuse in (False, True):
        passes = ("enable-qk-norm-rope-fusion",) if fuse else ()
        emitted, report = run(gm, PipelineOptions(platform="cpu", fusion_passes=passes))
        out["fused" if fuse else "raised"] = {
            "equal": [bool(torch.equal(a, b)) for a, b in zip(emitted(*inputs), want,
                                                              strict=True)],
            "rope": report.raised["rope"], "fused": report.fused("enable-qk-norm-rope-fusion"),
            "missed": [m.reason for p in report.raise_passes + report.passes for m in p.missed]}
    return out


@pytest.fixture(scope="module")
def interpreted() -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from interpret_worker import run_worker

    return run_worker(__file__)


@pytest.mark.parametrize("form", FORMS)
def test_vllms_cuda_mrope_kernel_is_raised_and_fused_bit_exact(interpreted, form):
    r = interpreted[form]
    assert r["traced"] == [True, True]
    assert r["raised"] == {"equal": [True, True], "rope": 1, "fused": 0, "missed": []}
    assert r["fused"] == {"equal": [True, True], "rope": 1, "fused": 1, "missed": []}


@pytest.mark.parametrize("form", FORMS)
def test_vllms_native_mrope_is_raised_and_fused_bit_exact(form):
    """The CPU's spelling under torch.compile, bf16: the norms fuse into the raised rope."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding.mrope import MRotaryEmbedding

    from irfuse.testing import assert_bit_exact, compile_and_run

    sections, interleaved, is_neox = FORMS[form]
    with set_current_vllm_config(VllmConfig()):
        rope = MRotaryEmbedding(D, D, 64, 10000.0, is_neox, torch.bfloat16, sections, interleaved)
    g = torch.Generator().manual_seed(0)

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rope = rope
            self.register_buffer("w", (torch.rand(2, D, generator=g) + 0.5).to(torch.bfloat16))

        def forward(self, positions, qkv):
            q, k, _ = qkv.split([HQ * D, HK * D, HK * D], -1)
            q = _norm_bf16(q.view(-1, HQ, D), self.w[0]).view(q.shape)
            k = _norm_bf16(k.view(-1, HK, D), self.w[1]).view(k.shape)
            return self.rope.forward_native(positions, q, k)

    inputs = [torch.randint(0, 64, (3, 7), generator=g),
              torch.randn(7, (HQ + 2 * HK) * D, generator=g).to(torch.bfloat16)]
    compiled = compile_and_run(Layer(), inputs, dynamic_dims=((0, 1), (1, 0)), options={
        "optimization_level": 1, "pass_config": {"enable_qk_norm_rope_fusion": True}})
    assert compiled.raised()["rope"] == 1
    assert compiled.fused("enable-qk-norm-rope-fusion") == 1
    assert_bit_exact(compiled.outputs, compiled.eager)


def _norm_bf16(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


if __name__ == "__main__" and "--worker" in sys.argv:
    print(json.dumps({form: _case(form) for form in FORMS}))
