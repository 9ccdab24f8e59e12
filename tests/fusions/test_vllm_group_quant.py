"""vLLM's CUDA group quant (`_C.per_token_group_fp8_quant`, what `QuantFP8.forward_cuda` calls
for block-FP8 models such as DeepSeek-V3 or Qwen3-FP8) fuses as irfuse's own group quant does:
the norm before it (fuse-norm-quant) and the SiLU·Mul before it (fuse-act-quant), with every
scale layout vLLM's GEMMs ask for (row-major, column-major, UE8M0) kept, bit for bit on the CPU;
TMA-aligned scales are raised and left with the reason. A group whose amax is below 1/512 is the
one place the fused kernel differs from vLLM's op (as vLLM's own fused kernel does): its scale is
floored at 1 / (448 * 512), the dequantized values agree to the FP8 rounding
(`docs/numerics.md`)."""

from __future__ import annotations

import pytest
import torch
import vllm_ops as V
from torch import nn

from irfuse.emit import kernel_choice
from irfuse.kernels import dispatch
from irfuse.testing import EVERY_PASS, assert_bit_exact, assert_nothing_silent, compile_and_run

H, INTER, LAYERS, GROUP = 256, 512, 3, 128
BF16 = torch.bfloat16
LAYOUTS = {
    "row": {},
    "col": {"column_major_scales": True},
    "col-ue8m0": {"column_major_scales": True, "use_ue8m0": True},
    "row-64": {"group": 64},
}


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


class BlockFp8Mlp(nn.Module):
    """vLLM's decoder MLP with block-FP8 linears and custom ops on: fused_add_rms_norm, group
    quant of the norm's output for gate_up, silu_and_mul, group quant for down. The block GEMM
    is written as its dequantized matmul (`q * s` per group), which reads the scales through
    their strides as vLLM's GEMMs do."""

    def __init__(self, layout: dict, layers: int = LAYERS):
        super().__init__()
        self.layout = dict(layout)
        self.group = self.layout.pop("group", GROUP)
        self.register_buffer("norm_w", (torch.rand(layers, H, generator=_gen(1)) + 0.5).to(BF16))
        self.register_buffer("gate_up", torch.randn(layers, H, 2 * INTER, generator=_gen(2))
                             .div(H**0.5).to(BF16))
        self.register_buffer("down", torch.randn(layers, INTER, H, generator=_gen(3))
                             .div(INTER**0.5).to(BF16))

    def _linear(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q, s = V.vllm_per_token_group_quant_fp8(x, self.group, **self.layout)
        dq = q.float().unflatten(-1, (-1, self.group)) * s.unsqueeze(-1)
        return (dq.flatten(-2).to(BF16) @ w), s

    def forward(self, x: torch.Tensor):
        residual, scales = x, []
        hidden = torch.relu(x)
        for i in range(self.norm_w.shape[0]):
            hidden, residual = V.vllm_fused_add_rms_norm(hidden, residual, self.norm_w[i], 1e-6)
            gate_up, s1 = self._linear(hidden, self.gate_up[i])
            hidden, s2 = self._linear(V.vllm_silu_and_mul(gate_up), self.down[i])
            scales += [s1, s2]
        return hidden, residual, [s.stride() for s in scales]


def _run(layout: dict, x: torch.Tensor, v2: bool = True):
    with torch._inductor.config.patch(enable_auto_functionalized_v2=v2):
        return compile_and_run(BlockFp8Mlp(layout).to(x.device), [x],
                               options={"optimization_level": 2,
                                        "pass_config": {"fuse_norm_quant": True,
                                                        "fuse_act_quant": True}})


def _x(rows: int = 13, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, H, generator=_gen(seed)).to(BF16)


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_norm_and_act_fuse_with_vllms_group_quant_bit_exact(layout: str, v2: bool) -> None:
    compiled = _run(LAYOUTS[layout], _x(), v2)
    (report,) = compiled.reports
    assert report.raised["quant_fp8"] == 2 * LAYERS
    assert report.fused("fuse-norm-quant") == LAYERS
    assert report.fused("fuse-act-quant") == LAYERS
    (out, residual, strides), _ = compiled.outputs
    (_, _, eager_strides), _ = compiled.eager
    assert strides == eager_strides  # each scale laid out as vLLM's GEMM asked for it
    assert_bit_exact((out, residual), compiled.eager[0][:2])


def test_tma_aligned_scales_are_left_with_the_reason() -> None:
    layout = {"column_major_scales": True, "tma_aligned_scales": True}
    compiled = _run(layout, _x())
    (report,) = compiled.reports
    assert report.raised["quant_fp8"] == 2 * LAYERS
    assert report.fused("fuse-norm-quant") == report.fused("fuse-act-quant") == 0
    for name in ("fuse-norm-quant", "fuse-act-quant"):
        (record,) = [p for p in report.passes if p.name == name]
        assert [m.reason for m in record.missed] == [
            "tma-aligned group scales are not produced by the fused kernel"] * LAYERS
    assert_bit_exact(compiled.outputs, compiled.eager)


@pytest.mark.filterwarnings("ignore::UserWarning")  # the flags every pass on cannot use here
@pytest.mark.parametrize("layout", [*sorted(LAYOUTS), "tma"])
def test_every_pass_on_leaves_nothing_silent(layout: str) -> None:
    """With every pass on, each group quant site is fused or named with its reason."""
    layouts = {**LAYOUTS, "tma": {"column_major_scales": True, "tma_aligned_scales": True}}
    compiled = compile_and_run(BlockFp8Mlp(layouts[layout]), [_x()], options=EVERY_PASS)
    assert_nothing_silent(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


class _NormQuant(nn.Module):
    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.register_buffer("w", weight)

    def forward(self, x: torch.Tensor):
        hidden, _ = V.vllm_fused_add_rms_norm(torch.relu(x), x * 1, self.w, 1e-6)
        return V.vllm_per_token_group_quant_fp8(hidden, GROUP)


def test_a_group_below_amax_one_512th_differs_only_within_fp8_rounding() -> None:
    """The first group of every row normed to amax < 1/512 (tiny weights): vLLM's op scales it
    by amax / 448, the fused kernel by 1 / (448 * 512); its quantized bits differ, the values
    they stand for agree to the FP8 step. The other groups stay bit for bit."""
    weight = (torch.rand(H, generator=_gen(1)) + 0.5).to(BF16)
    weight[:GROUP] = 2e-4
    compiled = compile_and_run(_NormQuant(weight), [_x()], options={
        "optimization_level": 2, "pass_config": {"fuse_norm_quant": True}})
    (report,) = compiled.reports
    assert report.fused("fuse-norm-quant") == 1
    (q, s), _ = compiled.outputs
    (q_ref, s_ref), _ = compiled.eager
    assert (s_ref[:, 0] * 448 < 1 / 512).all() and (s[:, 0] == 1 / (448 * 512)).all()
    assert torch.equal(q[:, GROUP:].view(torch.uint8), q_ref[:, GROUP:].view(torch.uint8))
    assert torch.equal(s[:, 1:], s_ref[:, 1:])
    assert not torch.equal(q[:, :GROUP].view(torch.uint8), q_ref[:, :GROUP].view(torch.uint8))
    dq, dq_ref = (t[:, :GROUP].float() * u[:, :1] for t, u in ((q, s), (q_ref, s_ref)))
    torch.testing.assert_close(dq, dq_ref, rtol=2**-3, atol=1e-7)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["row", "col", "col-ue8m0"])
def test_on_cuda_the_triton_kernels_write_vllms_scale_layouts(layout: str) -> None:
    """On CUDA both fusions run irfuse's Triton group kernels, whose scales come out in the
    layout vLLM's GEMM asked for; the outputs stay within vLLM's per-group tolerance (5e-2 of
    the largest value: the stand-in's scale divides by a python float, which CUDA turns into a
    multiply, and the kernels' norm rounds other than torch's)."""
    x = _x().cuda()
    compiled = _run(LAYOUTS[layout], x)
    (report,) = compiled.reports
    assert report.fused("fuse-norm-quant") == report.fused("fuse-act-quant") == LAYERS
    platform = dispatch.platform_of(x.device)
    for kernel in ("add_rms_norm_quant_fp8_group", "silu_mul_quant_fp8_group"):
        assert kernel_choice.choose(kernel, platform).impl == "triton"
    (out, residual, strides), _ = compiled.outputs
    (ref, ref_residual, eager_strides), _ = compiled.eager
    assert strides == eager_strides
    for got, want in ((out, ref), (residual, ref_residual)):
        err = (got.float() - want.float()).abs().max() / want.float().abs().max()
        assert err.item() < 5e-2
