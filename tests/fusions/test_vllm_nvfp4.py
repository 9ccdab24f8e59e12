"""NVFP4 as vLLM's emulation computes it (`ref_nvfp4_quant`, spelled in `vllm_ops`): the block
scale `gs * (amax * (1 / 6))`, both reciprocals through `get_reciprocal` (`1 / (t + (t == 0) *
1e8)`), the e2m1 rounding as masked writes of float values (`cast_to_fp4`), values and block
scales kept as f32. raise-quant proves the rounding and raises the chain to `quant.nvfp4`
between `nvfp4_pack` and `nvfp4_unpack` (exact conversions), so SiLU·Mul + NVFP4 fuses and the
dequantized activations, the GEMM and its output are eager's bits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import vllm_ops as V

from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

D = 64  # SiLU·Mul output width (4 NVFP4 blocks)


class _SiluMulNvfp4(torch.nn.Module):
    """SiLU·Mul -> NVFP4 quant-dequant (vLLM's emulation) -> a linear, as vLLM's emulated
    NVFP4 linear runs on a GPU without FP4 GEMMs."""

    def __init__(self, rounding=V.round_e2m1_values):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.register_buffer("global_scale", torch.tensor([448.0 * 6.0 / 8.0]))
        self.register_buffer("weight", (torch.randn(32, D, generator=g) / D**0.5).bfloat16())
        self.rounding = rounding

    def forward(self, x):
        y = F.silu(x[..., :D]) * x[..., D:]
        rows, cols = y.shape
        q, scale = V.emulated_nvfp4_quant(y, self.global_scale, self.rounding)
        q = q.reshape(rows, cols // 16, 16)
        dq = (q * (scale.unsqueeze(-1) / self.global_scale)).reshape(rows, cols).to(y.dtype)
        return dq @ self.weight.t()


def _x(tokens: int = 37, seed: int = 0) -> torch.Tensor:
    return (torch.randn(tokens, 2 * D, generator=torch.Generator().manual_seed(seed)) * 3
            ).bfloat16()


def _report(compiled: Compiled):
    (report,) = compiled.reports
    assert report.error is None
    return report


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("mode", ["static", "mark_dynamic", "dynamic_true"])
def test_emulated_nvfp4_raises_and_fuses_with_silu_mul(mode: str, seed: int) -> None:
    """In every shape mode (under dynamic=True the rounding's bounds, Python floats, come as
    lifted inputs read as their traced values)."""
    kw = {"static": {"dynamic": False}, "mark_dynamic": {"dynamic_dims": ((0, 0),)},
          "dynamic_true": {"dynamic": True}}[mode]
    model = _SiluMulNvfp4()
    raised = compile_and_run(model, [_x(seed=seed)], options={"optimization_level": 0}, **kw)
    assert _report(raised).raised["quant_nvfp4"] == 1
    assert_bit_exact(raised.outputs, raised.eager)  # raising changes no bit
    fused = compile_and_run(model, [_x(seed=seed)], options={"optimization_level": 2}, **kw)
    report = _report(fused)
    assert report.raised["quant_nvfp4"] == 1 and report.raised["silu_mul"] == 1
    assert report.fused("fuse-act-quant") == 1
    assert_bit_exact(fused.outputs, fused.eager)


def _round_ties_wrong(v: torch.Tensor) -> torch.Tensor:
    """`cast_to_fp4` with every band open below and closed above: a tie on 0.75, 1.75 or 3.5
    rounds down to the odd value (3.5 to 3, not 4)."""
    sign = torch.sign(v)
    a = torch.abs(v)
    for low, high, value in V._E2M1_BANDS:
        a[(a > low) & (a <= high)] = value
    a[a > 5.0] = 6.0
    return a * sign


def test_a_rounding_off_at_a_tie_is_a_near_miss() -> None:
    """The rounding is proven at every boundary, not sampled: this one is right except at the
    ties, and is left alone with the value it gets wrong."""
    compiled = compile_and_run(_SiluMulNvfp4(_round_ties_wrong), [_x()],
                               options={"optimization_level": 2})
    report = _report(compiled)
    assert report.raised["quant_nvfp4"] == 0
    missed = [m.reason for p in report.raise_passes for m in p.missed]
    assert any("the rounding to e2m1 values gives -3.0 for -3.5, not -4.0" in r for r in missed), missed
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_pack_and_unpack_are_exact() -> None:
    """The conversions around the raised op lose nothing: every e2m1 value (±0 included) and
    every fp8 block scale comes back, with the scales' rank as asked."""
    from irfuse.fusions import library_ops

    values, scales = library_ops._nvfp4_values((130, 64))
    values[0, :16] = torch.tensor([0.0, -0.0, 0.5, -0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                                   -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
    packed, swizzled = torch.ops.irfuse.nvfp4_pack(values, scales.unsqueeze(-1))
    back, back_scales = torch.ops.irfuse.nvfp4_unpack(packed, swizzled, 3)
    assert torch.equal(back.view(torch.int32), values.view(torch.int32))  # -0.0 stays -0.0
    assert torch.equal(back_scales, scales.unsqueeze(-1))
