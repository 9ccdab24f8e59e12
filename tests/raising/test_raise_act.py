"""raise-silu-mul and raise-pad on real graphs: every spelling raised, counted exactly, bit-exact.

Small modules in each spelling go through `torch.compile(backend="irfuse")` (Inductor off), so
the passes see what aot_autograd really emits; the report's raised counts must be exact, the
outputs must equal eager's bit for bit (raising keeps the chain in the region), and near misses
must leave the remark that says why. Built-in models check the `.expected` counts of these kinds.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import irfuse.models as models
from irfuse.models.layers import custom_ops_available
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

D = 32  # half the gate_up width


def _run(fn, *inputs: torch.Tensor, dynamic=((0, 0),)) -> Compiled:
    class Wrap(nn.Module):
        def forward(self, *args):
            return fn(*args)

    compiled = compile_and_run(Wrap(), inputs, dynamic_dims=dynamic)
    assert_bit_exact(compiled.outputs, compiled.eager)
    return compiled


def _reports(compiled: Compiled) -> list:
    return list({report.graph: report for report in reversed(compiled.reports)}.values())


def _missed(compiled: Compiled, pass_name: str) -> list[str]:
    return [m.reason for report in _reports(compiled) for record in report.raise_passes
            if record.name == pass_name for m in record.missed]


def _raised_by(compiled: Compiled, pass_name: str) -> int:
    """Sites the raising pass raised (later passes may fold its ops into theirs)."""
    return sum(record.count for report in _reports(compiled) for record in report.raise_passes
               if record.name == pass_name)


def _x(width: int = 2 * D, dtype=torch.bfloat16) -> torch.Tensor:
    return torch.randn(8, width, generator=torch.Generator().manual_seed(0)).to(dtype)


SILU_MUL_SPELLINGS = {
    "slices": lambda x: F.silu(x[..., :D]) * x[..., D:],
    "slices_up_first": lambda x: x[..., D:] * F.silu(x[..., :D]),
    "chunk": lambda x: (lambda g, u: F.silu(g) * u)(*x.chunk(2, dim=-1)),
    "split": lambda x: (lambda g, u: F.silu(g) * u)(*torch.split(x, D, dim=-1)),
    "split_sizes": lambda x: (lambda g, u: u * F.silu(g))(*torch.split(x, [D, D], dim=-1)),
    "sigmoid": lambda x: x[..., :D] * torch.sigmoid(x[..., :D]) * x[..., D:],
    "sigmoid_first": lambda x: torch.sigmoid(x[..., :D]) * x[..., :D] * x[..., D:],
    "nn_silu_3d": lambda x: nn.SiLU()(x.view(2, 4, -1)[..., :D]) * x.view(2, 4, -1)[..., D:],
    "swapped_halves": lambda x: F.silu(x[..., D:]) * x[..., :D],
    # Inductor's decomposition (what vLLM's post-grad pass sees): in f32 between casts, or not.
    "exp_div_f32": lambda x: (lambda g: (g.float() / (1 + torch.exp(-g.float()))).to(g.dtype))(
        x[..., :D]) * x[..., D:],
    "exp_div": lambda x: x[..., :D] / (1 + torch.exp(-x[..., :D])) * x[..., D:],
}


@pytest.mark.parametrize("spelling", sorted(SILU_MUL_SPELLINGS))
def test_silu_mul_spellings_raise_once(spelling):
    fn = SILU_MUL_SPELLINGS[spelling]
    compiled = _run(fn, _x(), dynamic=() if spelling == "nn_silu_3d" else ((0, 0),))
    assert compiled.raised()["silu_mul"] == 1
    assert _missed(compiled, "raise-silu-mul") == []


def test_separate_gate_and_up_projections():
    gate, up = nn.Linear(16, D, bias=False), nn.Linear(16, D, bias=False)
    compiled = _run(lambda x: F.silu(gate(x)) * up(x), torch.randn(8, 16))
    assert compiled.raised()["silu_mul"] == 1


@pytest.mark.skipif(not custom_ops_available("silu_mul"), reason="torch.ops.irfuse.silu_mul missing")
def test_custom_op_is_raised_whole():
    compiled = _run(lambda x: torch.ops.irfuse.silu_mul(x), _x())
    assert compiled.raised()["silu_mul"] == 1


def test_silu_times_a_broadcast_scale_is_not_raised():
    compiled = _run(lambda a, s: F.silu(a) * s, torch.randn(8, D), torch.randn(8, 1),
                    dynamic=((0, 0), (1, 0)))
    assert compiled.raised()["silu_mul"] == 0
    (reason,) = _missed(compiled, "raise-silu-mul")
    assert "not gate and up of one shape and dtype" in reason


GEGLU_SPELLINGS = {
    "tanh_slices": (lambda x: F.gelu(x[..., :D], approximate="tanh") * x[..., D:], "gelu_tanh"),
    "none_slices_up_first": (lambda x: x[..., D:] * F.gelu(x[..., :D]), "gelu"),
    "tanh_chunk": (lambda x: (lambda g, u: F.gelu(g, approximate="tanh") * u)(
        *x.chunk(2, dim=-1)), "gelu_tanh"),
    "none_module": (lambda x: nn.GELU()(x[..., :D]) * x[..., D:], "gelu"),
}


@pytest.mark.parametrize("spelling", sorted(GEGLU_SPELLINGS))
def test_geglu_spellings_raise_once(spelling):
    """Which activation each raises to: tests/fusions/test_fuse_act_quant_geglu.py (the kernel
    it lowers to) and filecheck/raise/raise-silu-mul.mlir."""
    fn, _ = GEGLU_SPELLINGS[spelling]
    compiled = _run(fn, _x())
    assert compiled.raised()["silu_mul"] == 1
    assert _missed(compiled, "raise-silu-mul") == []


def test_geglu_separate_gate_and_up_projections():
    gate, up = nn.Linear(16, D, bias=False), nn.Linear(16, D, bias=False)
    compiled = _run(lambda x: F.gelu(gate(x), approximate="tanh") * up(x), torch.randn(8, 16))
    assert compiled.raised()["silu_mul"] == 1


def test_ungated_gelu_is_no_candidate():
    compiled = _run(lambda x: F.gelu(x, approximate="tanh") + 1, _x())
    assert compiled.raised()["silu_mul"] == 0
    assert _missed(compiled, "raise-silu-mul") == []


def test_gelu_times_a_broadcast_scale_is_not_raised_and_says_so():
    compiled = _run(lambda a, s: F.gelu(a) * s, torch.randn(8, D), torch.randn(8, 1),
                    dynamic=((0, 0), (1, 0)))
    assert compiled.raised()["silu_mul"] == 0
    (reason,) = _missed(compiled, "raise-silu-mul")
    assert reason.startswith("not a gated activation: the GELU output")
    assert "not gate and up of one shape and dtype" in reason


def test_silu_output_used_twice_is_raised_with_its_own_copy():
    """The SiLU is pure: the region takes a copy of it and the original stays for `s + 1`."""
    compiled = _run(lambda a, b: (lambda s: (s * b, s + 1))(F.silu(a)),
                    torch.randn(8, D), torch.randn(8, D), dynamic=((0, 0), (1, 0)))
    assert compiled.raised()["silu_mul"] == 1
    assert _missed(compiled, "raise-silu-mul") == []


def test_silu_used_by_an_add_only_is_ungated():
    compiled = _run(lambda a: (lambda s: (s + 1, s - 1))(F.silu(a)), torch.randn(8, D))
    assert compiled.raised()["silu_mul"] == 0
    assert _missed(compiled, "raise-silu-mul") == [
        "not a gated activation: the SiLU's output goes to aten::add.Tensor, aten::sub.Tensor, not to a "
        "product (an ungated SiLU)"]


@pytest.mark.parametrize("fn", [
    lambda x: x[..., :D] / (1 + torch.exp(-x[..., D:])) * x[..., D:],  # exp of another tensor
    lambda x: x[..., :D] / (2 + torch.exp(-x[..., :D])) * x[..., D:],  # not 1 + exp
    lambda x: torch.exp(-x[..., :D]) * x[..., D:],  # a bare exp
], ids=["other_operand", "two_plus", "bare_exp"])
def test_exp_that_is_no_silu_is_left_without_a_remark(fn):
    compiled = _run(fn, _x())
    assert compiled.raised()["silu_mul"] == 0
    assert _missed(compiled, "raise-silu-mul") == []


PADS = {
    "high": (lambda x: F.pad(x, (0, 64)), 1),
    "low_high_value": (lambda x: F.pad(x, (3, 5), value=-2.5), 1),
    "zero_other_dims": (lambda x: F.pad(x, (0, 8, 0, 0)), 1),
    "other_dim": (lambda x: F.pad(x, (0, 0, 1, 1)), 0),
    "crop": (lambda x: F.pad(x, (0, -4)), 0),
}


@pytest.mark.parametrize("case", sorted(PADS))
def test_pad_of_the_last_dim(case):
    fn, expected = PADS[case]
    compiled = _run(fn, _x())
    assert compiled.raised()["pad"] == expected
    missed = _missed(compiled, "raise-pad")
    if case == "other_dim":
        assert missed == ["not a last-dim pad: pads dim -2, not only the last dim"]
    elif case == "crop":
        assert missed == ["not a last-dim pad: negative pad amounts (0, -4) crop"]
    else:
        assert missed == []


# Built-in models that spell SiLU·Mul and pad in different ways (one layer keeps them fast).
MODELS = ("llama-square", "llama-gemma-norm", "llama-custom-ops", "mla-lite", "qwen3")


@pytest.mark.parametrize("name", MODELS)
def test_builtin_models_count_silu_mul_and_pad(name):
    if models.MODELS[name].uses_custom_ops and not custom_ops_available():
        pytest.skip("torch.ops.irfuse custom ops missing")
    built = models.build(name, num_layers=1)
    compiled = compile_and_run(built.model, built.example_inputs,
                               dynamic_dims=list(built.dynamic_dims.items()))
    assert_bit_exact(compiled.outputs, compiled.eager)
    raised = compiled.raised()
    assert raised["silu_mul"] == built.expected["silu_mul"]
    assert raised["pad"] == built.expected["pad"]
    # raise-pad raises MLA's v padding too; raise-attention then takes it into
    # attn.mla_attention (which is why mla-lite expects no top-level pad).
    v_pads = built.config.num_layers if built.options.pad_v else 0
    assert _raised_by(compiled, "raise-pad") == built.expected["pad"] + v_pads
    assert _missed(compiled, "raise-silu-mul") == []
    assert _missed(compiled, "raise-pad") == []
