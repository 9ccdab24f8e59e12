"""vLLM's compile-fusion test model fuses alike in all three shape modes.

The model (`vllm_ops.FusionTestModel`, the shape of vLLM's norm + quant fusion test) takes the
hidden states `x [T, 64]` as its input, so under `torch.compile(..., dynamic=True)` its hidden
size is a symbol too. Written with vLLM's `_C` ops (whose fake kernels check no sizes) nothing
in the graph said that symbol is the norm weight's 64; irfuse settles vLLM's op size contracts
in the ShapeEnv before import (`irfuse.raising.size_contracts`: a Dynamo guard, so a call where
they differ is traced again). Static shapes, `mark_dynamic` on the tokens and `dynamic=True`
then raise and fuse the same sites, bit-exact with eager.
"""

from __future__ import annotations

import pytest
import torch
import vllm_ops as V

from irfuse import support_matrix
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

LAYERS = 4
BOTH = ("fuse_norm_quant",)
OPTIONS = {"optimization_level": 2,
           "pass_config": {f: f in BOTH for f in support_matrix.FLAGS}}
OPTIONS_ACT = {"optimization_level": 2,
               "pass_config": {f: f == "fuse_act_quant" for f in support_matrix.FLAGS}}
MODES = {
    "static": {"dynamic": False},
    "mark_dynamic": {"dynamic_dims": ((0, 0),)},
    "dynamic_true": {"dynamic": True},
}

pytestmark = pytest.mark.filterwarnings("ignore:irfuse.*eliminate_noops off")


def _x(tokens: int = 9, hidden: int = 64, seed: int = 3) -> torch.Tensor:
    return torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(seed)).to(
        torch.bfloat16)


def _counts(compiled: Compiled) -> tuple[dict[str, int], int, list[str]]:
    (report,) = compiled.reports
    assert report.error is None
    missed = [m.reason for p in report.raise_passes for m in p.missed]
    return ({k: n for k, n in report.raised.items() if n}, report.fused("fuse-norm-quant"),
            missed)


@pytest.mark.parametrize("per_token", [False, True], ids=["static", "per_token"])
@pytest.mark.parametrize("custom_ops", [True, False], ids=["custom_ops", "native"])
def test_fusion_model_fuses_alike_in_every_shape_mode(custom_ops: bool, per_token: bool) -> None:
    model = V.FusionTestModel(layers=LAYERS, custom_ops=custom_ops, per_token=per_token)
    results = {mode: compile_and_run(model, [_x()], options=OPTIONS, **kw)
               for mode, kw in MODES.items()}
    raised, fused, missed = _counts(results["static"])
    assert fused == LAYERS - 1  # every norm but the last feeds a quant (vLLM's test: the same)
    assert raised["quant_fp8"] == LAYERS - 1
    assert raised.get("rms_norm", 0) + raised.get("add_rms_norm", 0) == LAYERS
    assert missed == []
    for mode, compiled in results.items():
        assert _counts(compiled) == (raised, fused, missed), mode
        assert_bit_exact(compiled.outputs, compiled.eager)


def test_dynamic_true_guards_the_hidden_size() -> None:
    """The hidden size is guarded equal to the weight's: another hidden size is traced again
    (and fails in vLLM's op, as eager does), never run by kernels built for 64."""
    model = V.FusionTestModel(layers=2, custom_ops=True)
    compiled = torch.compile(model, backend="irfuse", dynamic=True,
                             options={"inductor": False, "strict": True, **OPTIONS})
    with torch.no_grad():
        assert_bit_exact(compiled(_x()), model(_x()))
        assert_bit_exact(compiled(_x(tokens=5)), model(_x(tokens=5)))  # no retrace
        frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        with pytest.raises(Exception):  # noqa: B017, PT011 (eager's error, whatever torch names it)
            model(_x(hidden=32))
        with pytest.raises(Exception):  # noqa: B017, PT011
            compiled(_x(hidden=32))
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > frames


def _add_norm(m, x, r):
    return V.vllm_fused_add_rms_norm(x * 1, r * 1, m.w, 1e-6)


class _AddNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", (torch.rand(64, generator=torch.Generator().manual_seed(1))
                                   + 0.5).to(torch.bfloat16))

    def forward(self, x, residual):
        return _add_norm(self, x, residual)


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])
@pytest.mark.parametrize("mode", ["mark_both", "dynamic_true"])
def test_fused_add_rms_norm_with_two_token_symbols(mode: str, v2: bool) -> None:
    """x and the residual marked dynamic separately carry two token symbols; the op requires
    one shape, so they are guarded equal and the op raises."""
    kw = ({"dynamic_dims": ((0, 0), (1, 0))} if mode == "mark_both" else {"dynamic": True})
    with torch._inductor.config.patch(enable_auto_functionalized_v2=v2):
        compiled = compile_and_run(_AddNorm(), [_x(), _x(seed=4)], options=OPTIONS, **kw)
    raised, _, missed = _counts(compiled)
    assert raised == {"add_rms_norm": 1}
    assert missed == []
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_fused_add_rms_norm_with_unequal_token_counts_is_a_remark() -> None:
    """Traced with x and the residual of different lengths (vLLM's fake kernel checks nothing,
    so the trace goes through), the sizes are not guarded equal: the op is not raised, with a
    remark, and the call fails in vLLM's op as eager does."""
    from irfuse import backend

    torch._dynamo.reset()
    backend.clear_reports()
    x, residual = _x(tokens=8), _x(tokens=5, seed=4)
    for t in (x, residual):
        torch._dynamo.mark_dynamic(t, 0)
    compiled = torch.compile(_AddNorm(), backend="irfuse",
                             options={"inductor": False, "strict": True, **OPTIONS})
    with torch.no_grad(), pytest.raises(RuntimeError):
        compiled(x, residual)
    (report,) = backend.reports()
    assert report.raised["add_rms_norm"] == 0
    missed = [m.reason for p in report.raise_passes for m in p.missed]
    assert any("not a residual add + RMSNorm (_C.fused_add_rms_norm): the residual is" in r
               for r in missed), missed


def test_a_hidden_size_marked_dynamic_is_not_specialized() -> None:
    """A hidden dim the caller marked dynamic stays symbolic (Dynamo refuses a compile that
    specializes it): the contract with the weight's 64 is not guarded, the norm is a remark, and
    the graph runs unfused, bit-exact."""
    model = V.FusionTestModel(layers=2, custom_ops=True)
    compiled = compile_and_run(model, [_x()], options=OPTIONS, dynamic_dims=((0, 0), (0, 1)))
    raised, fused, missed = _counts(compiled)
    assert fused == 0 and "rms_norm" not in raised
    assert any("not an RMSNorm (_C.rms_norm): the weight is [64]" in r for r in missed), missed
    assert_bit_exact(compiled.outputs, compiled.eager)


class _SiluMulQuant(torch.nn.Module):
    """vLLM's SiLU·Mul + FP8 test model (tests/compile/test_silu_mul_quant_fusion.py): x [T, 2H]
    through `SiluAndMul` (native: `d = x.shape[-1] // 2; silu(x[..., :d]) * x[..., d:]`, or the
    `_C` op) and a static FP8 quant."""

    def __init__(self, custom_ops: bool):
        super().__init__()
        self.custom_ops = custom_ops
        self.register_buffer("scale", torch.tensor([0.05]))

    def forward(self, x):
        if self.custom_ops:
            y = V.vllm_silu_and_mul(x)
        else:
            d = x.shape[-1] // 2
            y = torch.nn.functional.silu(x[..., :d]) * x[..., d:]
        return V.native_fp8_quant(y, self.scale)[0]


@pytest.mark.parametrize("custom_ops", [False, True], ids=["native", "custom_ops"])
def test_silu_mul_with_a_symbolic_width_fuses_under_dynamic_true(custom_ops: bool) -> None:
    # Under dynamic=True the width is a symbol s: the halves are `s // 2` and `s - s // 2` wide,
    # equal only for an even s. irfuse guards the evenness (vLLM's op contract), so they raise as
    # one SiLU·Mul and fuse; an odd width would be traced again.
    model = _SiluMulQuant(custom_ops)
    compiled = compile_and_run(model, [_x(hidden=256)], options=OPTIONS_ACT, dynamic=True)
    (report,) = compiled.reports
    assert report.raised["silu_mul"] == 1
    assert report.fused("fuse-act-quant") == 1
    assert [m.reason for p in report.raise_passes for m in p.missed] == []
    assert_bit_exact(compiled.outputs, compiled.eager)
    # Another even width runs the same graph, bit-exact.
    from irfuse import backend

    compiled_fn = torch.compile(model, backend="irfuse", dynamic=True, options=OPTIONS_ACT)
    backend.clear_reports()
    torch._dynamo.reset()
    with torch.no_grad():
        for hidden in (256, 192):
            x = _x(tokens=5, hidden=hidden)
            assert_bit_exact(compiled_fn(x), model(x))
    assert len(backend.reports()) == 1
