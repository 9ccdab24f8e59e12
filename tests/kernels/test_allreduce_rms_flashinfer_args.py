"""The arguments irfuse passes to FlashInfer's fused all-reduce, checked on the CPU against a
stand-in for `flashinfer.comm` that computes what FlashInfer's kernel computes with them.

What the stand-in follows (include/flashinfer/comm/trtllm_allreduce_fusion.cuh): the sum and the
norm in float32, rounded once to the input dtype; static FP8 reads `scale_factor` as the
dequantization scale s and writes `fp8(y * (1.f / s))` (saturating); NVFP4 reads it as the global
scale and multiplies by it, and its FP4 conversion exists only for `__CUDA_ARCH__ >= 1000` (it
returns 0 below: zero codes on sm90). So: irfuse must pass s (not 1 / s) and the global scale (not
its reciprocal), must not call FlashInfer for NVFP4 below sm100, nor for a quant that divides by
its scale. The GPU runs with the real FlashInfer are in test_allreduce_rms_gpu.py.

The process group is torch's fake backend (one process; its all-reduce returns the input), the
device capability and platform are patched, and NCCL + Triton is the reference path.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
import torch
from xdsl.parser import Parser

from irfuse.context import make_context
from irfuse.dialects.irfuse import set_target
from irfuse.fusions.fuse_allreduce_rms import ops as fusion
from irfuse.kernels import allreduce_rms, dispatch, quant_ref
from irfuse.models.dist import fake_process_group
from irfuse.passes import instantiate
from irfuse.pipeline import kernel_records

EPS = 1e-5
FP8_MAX = 448.0


class StandIn:
    """`flashinfer.comm` as far as irfuse calls it; records every call's arguments."""

    AllReduceFusionPattern = SimpleNamespace(
        kARResidualRMSNorm="kARResidualRMSNorm",
        kARResidualRMSNormFP8Quant="kARResidualRMSNormFP8Quant",
        kARResidualRMSNormFP4Quant="kARResidualRMSNormFP4Quant")
    QuantizationSFLayout = SimpleNamespace(SWIZZLED_128x4="SWIZZLED_128x4")

    def __init__(self, arch: int):
        self.arch = arch  # major compute capability the kernel was "built" for
        self.calls: list[dict] = []
        self.workspaces: list[dict] = []

    def create_allreduce_fusion_workspace(self, backend, world_size, rank, max_token_num,
                                          hidden_dim, dtype, group=None):
        self.workspaces.append(dict(backend=backend, world_size=world_size,
                                    max_token_num=max_token_num, hidden_dim=hidden_dim))
        return object()

    def allreduce_fusion(self, input, workspace, pattern, launch_with_pdl,
                         trigger_completion_at_end, output, residual_out, norm_out, quant_out,
                         scale_out, residual_in, rms_gamma, rms_eps, scale_factor, use_oneshot,
                         fp32_acc, weight_bias=0.0, layout_code=None):
        self.calls.append(dict(pattern=pattern, scale_factor=scale_factor,
                               layout_code=layout_code, rms_eps=rms_eps))
        total = input.float() + residual_in.float()  # the one-rank all-reduce, then the add
        residual_out.copy_(total)
        rstd = torch.rsqrt(total.pow(2).mean(-1, keepdim=True) + rms_eps)
        y = (total * rstd * rms_gamma.float()).to(input.dtype)
        if pattern == "kARResidualRMSNorm":
            norm_out.copy_(y)
        elif pattern == "kARResidualRMSNormFP8Quant":
            q = (y.float() * (1.0 / scale_factor)).clamp(-FP8_MAX, FP8_MAX)
            quant_out.copy_(q.to(quant_out.dtype))
        elif self.arch < 10:  # FP4: compiled out below sm100
            quant_out.zero_()
            scale_out.zero_()
        else:
            q, s = quant_ref.quant_nvfp4(y, scale_factor)
            quant_out.copy_(q)
            scale_out.copy_(s)


@pytest.fixture
def group():
    with fake_process_group(2) as pg:
        yield pg.group_name


def _on_gpu(monkeypatch, major: int) -> StandIn:
    """Pretend the tensors live on an sm{major}0 GPU with the stand-in FlashInfer installed."""
    comm = StandIn(major)
    monkeypatch.setattr(allreduce_rms, "flashinfer_comm", lambda: comm)
    monkeypatch.setattr(allreduce_rms, "capability", lambda x: (major, 0))
    monkeypatch.setattr(allreduce_rms, "_WORKSPACES", {})
    monkeypatch.setattr(allreduce_rms, "FLASHINFER_FALLBACKS", {})
    monkeypatch.setattr(allreduce_rms, "_WARNED", set())
    monkeypatch.setattr(dispatch, "platform_of", lambda device: f"cuda:sm{major}0")
    monkeypatch.setattr(dispatch, "use_triton", lambda *args, **kwargs: False)  # NCCL + ref
    return comm


def _inputs(tokens: int = 8, hidden: int = 64):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, hidden, generator=g).to(torch.bfloat16)
    residual = torch.randn(tokens, hidden, generator=g).to(torch.bfloat16)
    weight = (1 + 0.1 * torch.randn(hidden, generator=g)).to(torch.bfloat16)
    return x, residual, weight


def test_the_stand_in_takes_every_argument_irfuse_passes():
    # The stand-in's signature is the real one's as irfuse calls it (keywords only).
    params = set(inspect.signature(StandIn.allreduce_fusion).parameters) - {"self"}
    source = inspect.getsource(allreduce_rms.flashinfer_fused)
    passed = {p for p in params if f"{p}=" in source}
    assert passed == params - {"weight_bias", "layout_code"}  # those two go through **extra


def test_static_fp8_passes_the_dequantization_scale(monkeypatch, group):
    comm = _on_gpu(monkeypatch, 9)
    x, residual, weight = _inputs()
    scale = torch.tensor([0.05])  # 1 / s = 20: passing 1 / s instead would shrink q 400 times
    q, r = fusion.STATIC.run_cuda(x, residual, weight, scale, group, EPS, 0.0,
                               torch.float8_e4m3fn)
    (call,) = comm.calls
    assert call["pattern"] == "kARResidualRMSNormFP8Quant"
    assert call["scale_factor"].dtype == torch.float32 and call["scale_factor"].dim() == 0
    assert call["scale_factor"].item() == scale.item()
    assert comm.workspaces[0]["backend"] == "trtllm"
    q_ref, r_ref = fusion.all_reduce_rms_norm_quant_fp8_static(x, residual, weight, scale, group, EPS, 0.0,
                                      torch.float8_e4m3fn)
    assert torch.equal(r, r_ref)
    # FlashInfer rounds the norm once (the reference rounds before the weight product): codes
    # agree to one FP8 step.
    torch.testing.assert_close(q.float(), q_ref.float(), rtol=0.13, atol=2 ** -6)
    assert q.float().abs().max() > 20  # y * 20, not y / 20


def test_a_quant_that_divides_runs_nccl_and_the_reference(monkeypatch, group):
    comm = _on_gpu(monkeypatch, 9)
    x, residual, weight = _inputs()
    scale = torch.tensor([0.05])
    q, r = fusion.STATIC.run_cuda(x, residual, weight, scale, group, EPS, 0.0,
                               torch.float8_e4m3fn, divide=True)
    assert comm.calls == []
    assert allreduce_rms.FLASHINFER_FALLBACKS == {
        "all_reduce_rms_norm_quant_fp8_static": allreduce_rms.DIVIDED_FP8}
    q_ref, r_ref = fusion.all_reduce_rms_norm_quant_fp8_static(x, residual, weight, scale, group, EPS, 0.0,
                                      torch.float8_e4m3fn, divide=True)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(r, r_ref)


def test_nvfp4_below_sm100_runs_nccl_and_triton_not_flashinfer(monkeypatch, group):
    comm = _on_gpu(monkeypatch, 9)
    x, residual, weight = _inputs()
    gs = torch.tensor(448 * 6 / 4.0)
    q, s, r = fusion.NVFP4.run_cuda(x, residual, weight, gs, group, EPS, 0.0)
    assert comm.calls == []  # FlashInfer would have written zero codes
    assert allreduce_rms.FLASHINFER_FALLBACKS["all_reduce_rms_norm_quant_nvfp4"] \
        == allreduce_rms.NVFP4_BELOW_SM100
    q_ref, s_ref, r_ref = fusion.all_reduce_rms_norm_quant_nvfp4(x, residual, weight, gs, group, EPS, 0.0)
    assert torch.equal(q, q_ref) and torch.equal(s.view(torch.uint8), s_ref.view(torch.uint8))
    assert q.count_nonzero() > 0


def test_the_runtime_check_refuses_nvfp4_below_sm100(monkeypatch, group):
    _on_gpu(monkeypatch, 9)
    x, residual, weight = _inputs()
    reason = allreduce_rms.flashinfer_reason(x, residual, weight, group, 0.0, False, "nvfp4")
    assert reason == f"{allreduce_rms.NVFP4_BELOW_SM100}; this GPU is sm90"
    assert allreduce_rms.flashinfer_reason(x, residual, weight, group, 0.0, False, "fp8") is None
    _on_gpu(monkeypatch, 10)
    assert allreduce_rms.flashinfer_reason(x, residual, weight, group, 0.0, False, "nvfp4") \
        is None


def test_nvfp4_from_sm100_passes_the_global_scale(monkeypatch, group):
    comm = _on_gpu(monkeypatch, 10)
    x, residual, weight = _inputs()
    gs = torch.tensor(448 * 6 / 4.0)
    q, s, r = fusion.NVFP4.run_cuda(x, residual, weight, gs, group, EPS, 0.0)
    (call,) = comm.calls
    assert call["pattern"] == "kARResidualRMSNormFP4Quant"
    assert call["layout_code"] == "SWIZZLED_128x4"
    assert call["scale_factor"].item() == gs.item()
    q_ref, s_ref, _ = fusion.all_reduce_rms_norm_quant_nvfp4(x, residual, weight, gs, group, EPS, 0.0)
    assert q.shape == q_ref.shape and s.shape == s_ref.shape
    # Same codes but where the once-rounded norm crosses a rounding boundary.
    assert (q == q_ref).float().mean() > 0.9


NVFP4_CASE = """
builtin.module {
func.func @nvfp4(%x: !irfuse.tensor<[256, 64], bf16>, %res: !irfuse.tensor<[256, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %gs: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[256, 32], ui8>, !irfuse.tensor<[256, 4], f8E4M3FN>) {
  %r = coll.all_reduce %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[256, 64], bf16>) -> !irfuse.tensor<[256, 64], bf16>
  %y, %ro = norm.add_rms_norm %r, %res, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[256, 64], bf16>, !irfuse.tensor<[256, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[256, 64], bf16>, !irfuse.tensor<[256, 64], bf16>)
  %q, %b = quant.nvfp4 %y, %gs : (!irfuse.tensor<[256, 64], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[256, 32], ui8>, !irfuse.tensor<[256, 4], f8E4M3FN>)
  func.return %q, %b : !irfuse.tensor<[256, 32], ui8>, !irfuse.tensor<[256, 4], f8E4M3FN>
}
}
"""


@pytest.mark.parametrize("platform, op, why", [
    # sm90 folds no NVFP4 quant (the declaration's schemes there): all-reduce + norm fuse, the
    # quant stays separate; the kernel's own rule (NCCL + Triton, FlashInfer writes zero codes
    # below sm100) is what a direct call gets.
    ("cuda:sm90", "all_reduce_rms_norm", "FlashInfer where it can run the call, else NCCL + "
     "Triton (vLLM's rule); symm_mem not measured yet"),
    ("cuda:sm100", "all_reduce_rms_norm_quant_nvfp4", "not measured yet"),
])
def test_the_report_says_which_path_nvfp4_takes(platform, op, why):
    ctx = make_context()
    module = Parser(ctx, NVFP4_CASE).parse_module()
    set_target(module, platform)
    for name in ("fuse-allreduce-rms", "select-kernels"):
        instantiate(name).apply(ctx, module)
    (record,) = kernel_records(module, platform)
    assert (record.op, record.impl, record.reason, record.calls) \
        == (op, "triton", why, 1)
    assert fusion.NVFP4.choose("cuda:sm90") == fusion.NVFP4_CHOICE
