"""Raising after cse-pure: a pure value two chains share is cloned into the region of the one
raised first (`irfuse.raising.match.clone_shared`), so turning cse-pure on loses no raised op.

cse-pure runs before the raising passes by default (`pipeline.CANONICALIZE_PASSES`). The built-in
models it changes most raise exactly their `.expected` counts, bit-exact: the first norm's
`x.to(f32)` shared with the next residual add (llama), a group quant's `scale.unsqueeze(-1)`
shared with the GEMM's dequant (llama-fp8-group128), `1.0 / sqrt(v)` traced as
`reciprocal(sqrt(v)) * 1.0` (llama-square). Small modules check the quant cases one by one, and
IR-level tests the helper itself: what it refuses (an op that is not pure) and that a refused
raise leaves the IR as it was. Multi-query attention (one k/v head expanded to all heads by SDPA's
math fallback, as old-architecture Falcon runs it) raises as GQA with one k/v head.
"""

from __future__ import annotations

import pathlib
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

from irfuse import models, pipeline, remarks
from irfuse.context import make_context
from irfuse.models import quant as Q
from irfuse.raising.match import NoMatch, clone_shared, func_blocks, unclone
from irfuse.raising.raise_rms_norm import RaiseRmsNorm
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

FN = torch.float8_e4m3fn


def test_cse_pure_runs_before_raising() -> None:
    assert pipeline.CANONICALIZE_PASSES == ("cse-pure",)


def _raise_missed(compiled: Compiled) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.raise_passes for m in p.missed]


@pytest.mark.parametrize("name", ["llama", "llama-fp8-group128", "llama-square"])
def test_built_in_models_raise_their_expected_counts(name: str) -> None:
    built = models.build(name, num_layers=1)
    compiled = compile_and_run(built.model, built.clone_inputs(),
                               dynamic_dims=tuple(built.dynamic_dims.items()))
    assert_bit_exact(compiled.outputs, compiled.eager)
    assert compiled.fused("cse-pure") > 0
    raised = compiled.raised()
    assert {k: raised[k] for k in built.expected} == built.expected
    assert not [r for r in _raise_missed(compiled) if "used outside" in r]


# --- quants whose values cse-pure made shared ----------------------------------------------------


class Quantize(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn
        self.register_buffer("scale", torch.tensor([0.02]))
        self.register_buffer("scale2", torch.tensor([0.03]))

    def forward(self, x: torch.Tensor):
        return self.fn(self, x)


def _quantized(fn, tmp_path: pathlib.Path) -> tuple[Compiled, str]:
    x = torch.randn(16, 256, generator=torch.Generator().manual_seed(0)).mul(3)
    compiled = compile_and_run(Quantize(fn), [x.to(torch.bfloat16)],
                               options={"dump_dir": str(tmp_path)})
    assert_bit_exact(compiled.outputs, compiled.eager)
    (dumped,) = tmp_path.rglob("*-raise-quant.mlir")
    return compiled, dumped.read_text()


def test_a_scaled_value_used_outside_is_cloned(tmp_path: pathlib.Path) -> None:
    def fn(m, x):
        y = x.float() / m.scale
        return y.clamp(-448.0, 448.0).to(FN), y

    compiled, _ = _quantized(fn, tmp_path)
    assert compiled.raised()["quant_fp8"] == 1


def test_group_scale_unsqueeze_shared_with_a_dequant(tmp_path: pathlib.Path) -> None:
    """cse-pure merges the quant's `scale.unsqueeze(-1)` with the dequant's: the op's scale
    result is the [T, G] scale and the dequant reads the original unsqueeze of it."""

    def fn(m, x):
        q, s = Q.quant_fp8_group(x, 128)
        t = x.shape[0]
        return (q.float().view(t, 2, 128) * s.unsqueeze(-1)).view(t, 256).to(x.dtype)

    compiled, text = _quantized(fn, tmp_path)
    assert compiled.fused("cse-pure") == 1
    assert compiled.raised()["quant_fp8"] == 1
    scale = re.search(r"%\S+, %(\S+) = quant\.fp8 .*scale_out !irfuse.tensor<\[\S+, 2\], f32>",
                      text)
    assert scale is not None, text
    assert f'aten.call "aten::unsqueeze.default"(%{scale.group(1)}, -1)' in text


def test_quants_sharing_a_leading_cast_take_x_itself(tmp_path: pathlib.Path) -> None:
    """Two static quants of one bf16 x: cse-pure makes their `x.float()` one value; each region
    takes its own copy, so both ops quantize the bf16 x (which fuse-norm-quant needs)."""

    def fn(m, x):
        return ((x.float() / m.scale).clamp(-448.0, 448.0).to(FN),
                (x.float() / m.scale2).clamp(-448.0, 448.0).to(FN))

    compiled, text = _quantized(fn, tmp_path)
    assert compiled.fused("cse-pure") == 1
    assert compiled.raised()["quant_fp8"] == 2
    operand_types = re.findall(r"= quant\.fp8 .* : \((!irfuse\.tensor<[^>]+>)", text)
    assert len(operand_types) == 2 and all(t.endswith("bf16>") for t in operand_types), text


# --- the helper on IR ----------------------------------------------------------------------------

T = "!irfuse.tensor<[s0, 64], f32>"
R = "!irfuse.tensor<[s0, 1], f32>"


def _norm_ir(cast: str) -> str:
    return f"""
func.func @f(%x: !irfuse.tensor<[s0, 64], bf16>) -> ({T}, {T}) {{
  %x32 = aten.call "{cast}"(%x, {"dtype = f32" if cast.startswith("aten") else "f32"}) : (!irfuse.tensor<[s0, 64], bf16>) -> {T}
  %sq = aten.call "aten::pow.Tensor_Scalar"(%x32, 2) : ({T}) -> {T}
  %var = aten.call "aten::mean.dim"(%sq, [-1], true) : ({T}) -> {R}
  %ve = aten.call "aten::add.Tensor"(%var, 1.0e-06) : ({R}) -> {R}
  %rstd = aten.call "aten::rsqrt.default"(%ve) : ({R}) -> {R}
  %n = aten.call "aten::mul.Tensor"(%x32, %rstd) : ({T}, {R}) -> {T}
  func.return %n, %x32 : {T}, {T}
}}"""


def _parse(text: str) -> ModuleOp:
    module = Parser(make_context(), f"builtin.module {{{text}}}").parse_module()
    assert isinstance(module, ModuleOp)
    return module


def _printed(module: ModuleOp) -> str:
    import io

    out = io.StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue()


def test_clone_shared_clones_a_pure_value_and_unclone_undoes_it() -> None:
    module = _parse(_norm_ir("aten::_to_copy.default"))
    before = _printed(module)
    (block,) = func_blocks(module)
    ops = list(block.ops)[:-1]
    chain, pairs = clone_shared(ops, [ops[-1].results[0]])
    (original, copy), = pairs
    assert original is ops[0] and chain[0] is copy and chain[1:] == ops[1:]
    assert {u.operation for u in original.results[0].uses} == {block.last_op}
    assert {u.operation for u in copy.results[0].uses} == {ops[1], ops[-1]}
    unclone(pairs)
    assert _printed(module) == before


def test_an_impure_shared_value_is_not_cloned() -> None:
    module = _parse(_norm_ir("prims::convert_element_type.default"))
    (block,) = func_blocks(module)
    ops = list(block.ops)[:-1]
    with pytest.raises(NoMatch, match="prims::convert_element_type.default is not pure"):
        clone_shared(ops, [ops[-1].results[0]])
    with remarks.collecting() as sink:
        RaiseRmsNorm().apply(make_context(), module)
    assert [m.reason for m in sink.missed] == [
        "not an RMSNorm: an intermediate value of the norm is used outside it "
        "(prims::convert_element_type.default is not pure)"]
    assert "norm.rms_norm" not in _printed(module)


# --- multi-query attention through SDPA's math fallback ------------------------------------------


class Sdpa(nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _sdpa(q_heads: int, kv_heads: int) -> Compiled:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, h, 6, 16, generator=g).to(torch.bfloat16)
               for h in (q_heads, kv_heads, kv_heads))
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    compiled = compile_and_run(Sdpa(), [q, k, v, mask], dynamic_dims=())
    assert_bit_exact(compiled.outputs, compiled.eager)
    return compiled


def test_one_kv_head_broadcast_is_gqa() -> None:
    compiled = _sdpa(4, 1)
    assert compiled.raised()["attention"] == 1
    assert _raise_missed(compiled) == []


def test_a_broadcast_query_is_not_attention_gqa() -> None:
    compiled = _sdpa(1, 4)
    assert compiled.raised()["attention"] == 0
    assert _raise_missed(compiled) == ["not attention: a bmm operand of the attention is broadcast"]
