"""fuse-rope-kvcache-cat-mla end to end on the CPU: MLA's RoPE of q_pe and k_pe and the write of
`[kv_c | rotated k_pe]` into the paged latent cache become one `irfuse::rope_mla_kv_cache_write`
call that writes the cache in place and returns the rotated q_pe and k_pe (MLA's attention reads
both), bit for bit eager, in every cache-write spelling; writes of an unrotated key are raised but
no candidate."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from xdsl.parser import Parser

from irfuse import remarks
from irfuse.context import make_context
from irfuse.models.layers import RotaryEmbedding
from irfuse.passes import instantiate
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

PASS = "fuse-rope-kvcache-cat-mla"
HEADS, NOPE, ROPE, LATENT, BLOCKS, BLOCK_SIZE = 4, 16, 16, 32, 4, 4


class MlaStep(nn.Module):
    """The MLA part of a decode step as vLLM's MLAAttention runs it: q split into nope and rope
    parts, k_pe unsqueezed to one head, RoPE of both from a cos/sin cache, the latent cache write
    of `cat([kv_c, k_pe])` at the slots, then (standing in for attention) a use of the rotated
    q and k after the write."""

    def __init__(self, is_neox: bool, write: str, rotate: bool = True):
        super().__init__()
        self.rotary = RotaryEmbedding(ROPE, ROPE, 64, 10000.0, is_neox, dtype=torch.bfloat16,
                                      device=torch.device("cpu"))
        self.write, self.rotate = write, rotate

    def forward(self, positions, q, kv_c, k_pe, cache, slots):
        q_nope, q_pe = q.split([NOPE, ROPE], dim=-1)
        k_pe = k_pe.unsqueeze(1)
        if self.rotate:
            q_pe, k_pe = self.rotary(positions, q_pe, k_pe)
        row = torch.cat([kv_c, k_pe.squeeze(1)], dim=-1)
        if self.write == "index_copy":
            cache.view(-1, cache.shape[-1]).index_copy_(0, slots, row)
        elif self.write == "index_put":
            cache.view(-1, cache.shape[-1]).index_put_((slots,), row)
        else:  # (block, offset) indexing of the 3-D cache
            cache[slots // BLOCK_SIZE, slots % BLOCK_SIZE] = row
        return torch.cat([q_nope, q_pe], dim=-1) * 2, k_pe + 1


def _inputs(t: int = 6):
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, 64, (t,), generator=g),
            torch.randn(t, HEADS, NOPE + ROPE, generator=g).bfloat16(),
            torch.randn(t, LATENT, generator=g).bfloat16(),
            torch.randn(t, ROPE, generator=g).bfloat16(),
            torch.zeros(BLOCKS, BLOCK_SIZE, LATENT + ROPE, dtype=torch.bfloat16),
            torch.randperm(BLOCKS * BLOCK_SIZE, generator=g)[:t]]


def _run(module: nn.Module, flag: bool = True) -> Compiled:
    return compile_and_run(module, _inputs(), dynamic_dims=((0, 0), (1, 0), (2, 0), (3, 0),
                                                            (5, 0)),
                           options={"optimization_level": 1,
                                    "pass_config": {"fuse_rope_kvcache_cat_mla": flag}})


def _missed(compiled: Compiled) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.passes for m in p.missed]


@pytest.mark.parametrize("write", ["index_copy", "index_put", "block_offset"])
@pytest.mark.parametrize("is_neox", [False, True], ids=["gptj", "neox"])
def test_rope_and_latent_write_fuse_bit_exact(write, is_neox):
    compiled = _run(MlaStep(is_neox, write))
    assert compiled.raised()["mla_kv_cache_write"] == 1, _missed(compiled)
    assert compiled.fused(PASS) == 1, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)  # outputs and the cache


def test_off_it_only_raises():
    compiled = _run(MlaStep(False, "index_copy"), flag=False)
    assert compiled.raised()["mla_kv_cache_write"] == 1
    assert compiled.fused(PASS) == 0
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_an_unrotated_key_is_no_candidate():
    compiled = _run(MlaStep(False, "index_copy", rotate=False))
    assert compiled.raised()["mla_kv_cache_write"] == 1
    assert compiled.fused(PASS) == 0
    assert not [m for r in compiled.reports for p in r.passes if p.name == PASS
                for m in p.missed]
    assert_bit_exact(compiled.outputs, compiled.eager)


MULTIMODAL = """
func.func @f(%q_pe: !irfuse.tensor<[s0, 4, 16], bf16>, %k_pe: !irfuse.tensor<[s0, 1, 16], bf16>, %kv_c: !irfuse.tensor<[s0, 32], bf16>, %pos: !irfuse.tensor<[3, s0], i64>, %cs: !irfuse.tensor<[64, 16], bf16>, %cache: !irfuse.tensor<[4, 4, 48], bf16>, %slots: !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[4, 4, 48], bf16>) {
  %qr, %kr = attn.rope %q_pe, k %k_pe, positions %pos, cos_sin_cache %cs {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64, mrope_section = array<i64: 4, 2, 2>} : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 1, 16], bf16>, !irfuse.tensor<[3, s0], i64>, !irfuse.tensor<[64, 16], bf16>) -> (!irfuse.tensor<[s0, 4, 16], bf16>, k_out !irfuse.tensor<[s0, 1, 16], bf16>)
  %k2 = aten.call "aten::squeeze.dim"(%kr, 1) : (!irfuse.tensor<[s0, 1, 16], bf16>) -> !irfuse.tensor<[s0, 16], bf16>
  %c2 = attn.mla_kv_cache_write %kv_c, %k2, %cache, %slots : (!irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 16], bf16>, !irfuse.tensor<[4, 4, 48], bf16>, !irfuse.tensor<[s0], i64>) -> !irfuse.tensor<[4, 4, 48], bf16>
  func.return %qr, %c2 : !irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[4, 4, 48], bf16>
}
"""


def test_a_multimodal_rope_is_a_remark():
    """The MLA kernel reads one position per token: a rope with sections into the latent-cache
    write stays unfused, with that reason."""
    module = Parser(make_context(), f"builtin.module {{{MULTIMODAL}}}").parse_module()
    with remarks.collecting() as sink:
        instantiate(PASS).apply(make_context(), module)
    assert sink.fused == 0
    assert [m.reason for m in sink.missed] == [
        "the rope is multimodal (mrope_section): the MLA kernel reads one position per token"]
    assert [op.name for op in module.walk()].count("attn.rope") == 1
