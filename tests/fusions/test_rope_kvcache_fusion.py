"""fuse-rope-kvcache end to end on the CPU: RoPE -> paged KV-cache write becomes one
`irfuse::rope_kv_cache_write` call that writes the caches in place, and with
enable-qk-norm-rope-fusion also on, the per-head norms join it (one kernel for norm, rope and
write). Outputs and caches bit for bit those of eager; ranges past
rope_kvcache_fusion_max_token_num and rotated keys read elsewhere stay unfused, with a reason.
"""

from __future__ import annotations

import pytest
import torch
from rope_writes import RopeTable, paged_write_inputs

import irfuse.models as M
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

PASS = "fuse-rope-kvcache"
BOTH = {"fuse_rope_kvcache": True, "enable_qk_norm_rope_fusion": True}


def _run(built: M.BuiltModel, pass_config: dict, **options) -> Compiled:
    return compile_and_run(built.model, built.example_inputs,
                           dynamic_dims=tuple(built.dynamic_dims.items()),
                           options={"optimization_level": 1, "pass_config": pass_config,
                                    **options})


def _missed(compiled: Compiled, name: str = PASS) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.passes if p.name == name
            for m in p.missed]


@pytest.mark.parametrize("name", ["paged", "paged-index-copy", "paged-slice", "paged-prefill"])
def test_every_cache_write_spelling_fuses_bit_exact(name):
    built = M.build(name, size="tiny", num_layers=2)
    compiled = _run(built, {"fuse_rope_kvcache": True})
    assert compiled.fused(PASS) == 2, _missed(compiled)
    assert compiled.raised()["kv_cache_write"] == 2
    assert_bit_exact(compiled.outputs, compiled.eager)  # the output and every cache


@pytest.mark.parametrize("rope_style", ["neox", "gptj"])
def test_norm_rope_and_write_become_one_kernel(rope_style):
    built = M.build("paged", size="tiny", num_layers=2, qk_norm=True, rope_style=rope_style,
                    rotary_fraction=0.5)
    compiled = _run(built, BOTH)
    assert compiled.fused("enable-qk-norm-rope-fusion") == 2
    assert compiled.fused(PASS) == 2, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_the_kernel_writes_the_caches_it_is_given():
    """With Inductor compiling the rest, the kernel still writes the cache inputs (nothing is
    copied back): the written rows agree with eager up to Inductor's own rounding upstream, the
    others are untouched."""
    built = M.build("paged", size="tiny", num_layers=1, qk_norm=True)
    compiled = _run(built, BOTH, inductor=True)
    assert compiled.fused(PASS) == 1
    outputs, caches = compiled.outputs
    eager_outputs, eager_caches = compiled.eager
    slots = built.example_inputs[2]
    for got, want, old in zip(caches, eager_caches, built.example_inputs, strict=True):
        torch.testing.assert_close(got, want, rtol=2e-2, atol=5e-2)
        if got.dim() == 4:  # a cache: the rows no slot names are as they were
            kept = torch.ones(got.shape[0] * got.shape[1], dtype=torch.bool)
            kept[slots] = False
            assert torch.equal(got.flatten(0, 1)[kept], old.flatten(0, 1)[kept])
    torch.testing.assert_close(outputs, eager_outputs, rtol=2e-2, atol=5e-2)


def test_ranges_past_the_token_limit_are_left_alone():
    built = M.build("paged", size="tiny", num_layers=1)
    compiled = _run(built, {"fuse_rope_kvcache": True, "rope_kvcache_fusion_max_token_num": 2})
    assert compiled.fused(PASS) == 0
    assert_bit_exact(compiled.outputs, compiled.eager)


class _PrefillWrite(RopeTable):
    """A prefill step that attends over the new keys directly and also writes them."""

    def forward(self, positions, q, k, v, k_cache, v_cache, slots):
        q, k = self._rope(q, positions), self._rope(k, positions)
        k_cache.view(-1, 2, 64).index_put_((slots,), k)
        v_cache.view(-1, 2, 64).index_put_((slots,), v)
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(0, 1), k.transpose(0, 1).repeat_interleave(2, 0),
            v.transpose(0, 1).repeat_interleave(2, 0), is_causal=True)


class _ReturnedKey(_PrefillWrite):
    """The rotated k written and returned (a layer that hands its keys on)."""

    def forward(self, positions, q, k, v, k_cache, v_cache, slots):
        q, k = self._rope(q, positions), self._rope(k, positions)
        k_cache.view(-1, 2, 64).index_put_((slots,), k)
        v_cache.view(-1, 2, 64).index_put_((slots,), v)
        return q, k


@pytest.mark.parametrize("model", [_PrefillWrite, _ReturnedKey], ids=["attended", "returned"])
def test_a_rotated_k_read_besides_the_write_fuses_and_is_returned(model):
    # The fused op yields the rotated k too (the `_k` kernels): before, fuse-rope-kvcache left
    # such a write alone.
    compiled = compile_and_run(model(), paged_write_inputs(), dynamic_dims=(),
                               options={"optimization_level": 1,
                                        "pass_config": {"fuse_rope_kvcache": True}})
    assert compiled.raised()["kv_cache_write"] == 1
    assert compiled.fused(PASS) == 1
    assert _missed(compiled) == []
    assert_bit_exact(compiled.outputs, compiled.eager)


class _FlashLayoutWrite(_PrefillWrite):
    """vLLM's FlashAttention layout: one [2, blocks, block_size, heads, head_dim] cache split by
    unbind or by indexing, bf16 or FP8 (k and v quantized by static per-tensor FP8, x / s)."""

    def __init__(self, split: str, fp8: bool = False, order: str = "kv"):
        super().__init__()
        self.split, self.fp8, self.order = split, fp8, order

    def forward(self, positions, q, k, v, kv_cache, slots, k_scale, v_scale):
        q, k = self._rope(q, positions), self._rope(k, positions)
        if self.fp8:
            k = (k.float() / k_scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
            v = (v.float() / v_scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        kc, vc = kv_cache.unbind(0) if self.split == "unbind" else (kv_cache[0], kv_cache[1])
        writes = [(kc, k), (vc, v)]
        for cache, new in writes if self.order == "kv" else writes[::-1]:
            cache.view(-1, 2, 64).index_put_((slots,), new)
        return q


def _flash_inputs(fp8: bool = False, t: int = 6) -> list:
    g = torch.Generator().manual_seed(0)
    dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    return [torch.arange(t), *(torch.randn(t, h, 64, generator=g).bfloat16() for h in (4, 2, 2)),
            torch.randn(2, 4, 4, 2, 64, generator=g).to(dtype),
            torch.randperm(16, generator=g)[:t], torch.tensor(0.01), torch.tensor([0.02])]


@pytest.mark.parametrize("split,fp8,order", [("unbind", False, "kv"), ("index", False, "kv"),
                                             ("index", False, "vk"), ("unbind", True, "kv")])
def test_the_flash_attention_layout_fuses_bit_exact(split, fp8, order):
    """Both halves written by one kernel call into the one cache; the rows no slot names keep
    their old values (eager's cache is compared whole)."""
    compiled = compile_and_run(_FlashLayoutWrite(split, fp8, order), _flash_inputs(fp8),
                               dynamic_dims=tuple((i, 0) for i in (0, 1, 2, 3, 5)),
                               options={"optimization_level": 1,
                                        "pass_config": {"fuse_rope_kvcache": True}})
    assert compiled.raised()["kv_cache_write"] == 1
    assert compiled.fused(PASS) == 1, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_a_flash_layout_write_of_one_half_only_is_a_remark():
    class OneHalf(_FlashLayoutWrite):
        def forward(self, positions, q, k, v, kv_cache, slots, k_scale, v_scale):
            q, k = self._rope(q, positions), self._rope(k, positions)
            kv_cache[0].view(-1, 2, 64).index_put_((slots,), k)
            return q

    compiled = compile_and_run(OneHalf("index"), _flash_inputs(), dynamic_dims=(),
                               options={"optimization_level": 1,
                                        "pass_config": {"fuse_rope_kvcache": True}})
    missed = [m.reason for r in compiled.reports for p in r.raise_passes
              if p.name == "raise-kv-cache-write" for m in p.missed]
    assert any("no write of the matching k or v cache" in m for m in missed), missed
    assert_bit_exact(compiled.outputs, compiled.eager)


class _DecodeWrite(_PrefillWrite):
    """RoPE, then the cache writes (the k cache optionally FP8, as a scaled cast), q returned."""

    def __init__(self, fp8: bool = False):
        super().__init__()
        self.fp8 = fp8

    def forward(self, positions, q, k, v, k_cache, v_cache, slots, k_scale):
        q, k = self._rope(q, positions), self._rope(k, positions)
        if self.fp8:
            k = (k.float() / k_scale).to(torch.float8_e4m3fn)
        k_cache.view(-1, 2, 64).index_put_((slots,), k)
        v_cache.view(-1, 2, 64).index_put_((slots,), v)
        return q


def _decode_inputs(t: int = 6, fp8: bool = False) -> list:
    g = torch.Generator().manual_seed(0)
    k_dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    return [torch.arange(t), *(torch.randn(t, h, 64, generator=g).bfloat16() for h in (4, 2, 2)),
            torch.zeros(4, 4, 2, 64, dtype=k_dtype), torch.zeros(4, 4, 2, 64, dtype=torch.bfloat16),
            torch.randperm(16, generator=g)[:t], torch.tensor(0.5)]


def test_a_slot_mapping_with_a_symbol_of_its_own_fuses():
    """vLLM marks positions, q, k, v and the slot mapping dynamic one by one: five symbols for
    one token count. The write means one slot per new token; the kernel checks the lengths."""
    dims = ((0, 0), (1, 0), (2, 0), (3, 0), (6, 0))
    compiled = compile_and_run(_DecodeWrite(), _decode_inputs(), dynamic_dims=dims,
                               options={"optimization_level": 1,
                                        "pass_config": {"fuse_rope_kvcache": True}})
    assert compiled.fused(PASS) == 1, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_the_fused_write_checks_one_slot_per_token():
    model = _DecodeWrite()
    compiled = torch.compile(model, backend="irfuse", options={
        "optimization_level": 1, "inductor": False, "pass_config": {"fuse_rope_kvcache": True}})
    inputs = _decode_inputs()
    inputs[6] = inputs[6][:5]
    with pytest.raises(Exception, match="slot"):
        compiled(*inputs)


class _Fp8CacheWrite(_PrefillWrite):
    """RoPE, then k and v quantized by static per-tensor FP8 (`x / s` clamped, or `x * (1 / s)`)
    into FP8 caches: vLLM's fp8 kv_cache_dtype with k_scale / v_scale."""

    def __init__(self, spelling: str = "div"):
        super().__init__()
        self.spelling = spelling

    def _quant(self, x, scale):
        x = x.float() / scale if self.spelling == "div" else x.float() * scale.reciprocal()
        return x.clamp(-448.0, 448.0).to(torch.float8_e4m3fn)

    def forward(self, positions, q, k, v, k_cache, v_cache, slots, k_scale, v_scale):
        q, k = self._rope(q, positions), self._rope(k, positions)
        k_cache.view(-1, 2, 64).index_put_((slots,), self._quant(k, k_scale))
        v_cache.view(-1, 2, 64).index_put_((slots,), self._quant(v, v_scale))
        return q


def _fp8_inputs(t: int = 6) -> list:
    g = torch.Generator().manual_seed(0)
    fp8 = torch.float8_e4m3fn
    return [torch.arange(t), *(4 * torch.randn(t, h, 64, generator=g).bfloat16() for h in (4, 2, 2)),
            torch.zeros(4, 4, 2, 64, dtype=fp8), torch.zeros(4, 4, 2, 64, dtype=fp8),
            torch.randperm(16, generator=g)[:t], torch.tensor(0.01), torch.tensor([0.02])]


def test_an_fp8_cache_write_fuses_with_its_scales_bit_exact():
    """Values past 448 after scaling (4 sigma / 0.01) are clamped alike in eager and the kernel."""
    inputs = _fp8_inputs()
    compiled = compile_and_run(_Fp8CacheWrite(), inputs, dynamic_dims=tuple((i, 0) for i in (0, 1, 2, 3, 6)),
                               options={"optimization_level": 1,
                                        "pass_config": {"fuse_rope_kvcache": True}})
    assert compiled.raised()["quant_fp8"] == 2
    assert compiled.fused(PASS) == 1, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)
    _, caches = compiled.outputs
    assert (caches[4].float().abs() == 448).any()  # some rows were clamped


def test_an_fp8_cache_quantized_by_a_reciprocal_is_a_remark():
    compiled = compile_and_run(_Fp8CacheWrite("reciprocal"), _fp8_inputs(), dynamic_dims=(),
                               options={"optimization_level": 1,
                                        "pass_config": {"fuse_rope_kvcache": True}})
    assert compiled.fused(PASS) == 0
    assert any("x * (1 / s)" in m for m in _missed(compiled)), _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_an_unclamped_fp8_cache_write_is_a_remark():
    compiled = compile_and_run(_DecodeWrite(fp8=True), _decode_inputs(fp8=True),
                               dynamic_dims=(), options={
                                   "optimization_level": 1,
                                   "pass_config": {"fuse_rope_kvcache": True}})
    assert compiled.fused(PASS) == 0
    assert any("FP8 cache" in m for m in _missed(compiled)), _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


class _ReorderedKeyWrite(_DecodeWrite):
    """The rotated k written through a reordering of its elements (transposed, copied,
    transposed back): still the rotated k, but not the rope's own tensor."""

    def forward(self, positions, q, k, v, k_cache, v_cache, slots, k_scale):
        q, k = self._rope(q, positions), self._rope(k, positions)
        k = k.transpose(0, 1).contiguous().transpose(0, 1)
        k_cache.view(-1, 2, 64).index_put_((slots,), k)
        v_cache.view(-1, 2, 64).index_put_((slots,), v)
        return q


def test_a_write_of_the_rotated_k_through_other_ops_is_a_remark():
    # No silent miss: the candidate (a write of a value made from a rotated k) gets its reason.
    compiled = compile_and_run(_ReorderedKeyWrite(), _decode_inputs(), dynamic_dims=(),
                               options={"optimization_level": 1,
                                        "pass_config": {"fuse_rope_kvcache": True}})
    assert compiled.raised()["kv_cache_write"] == 1
    assert compiled.fused(PASS) == 0
    missed = _missed(compiled)
    assert len(missed) == 1 and "reaches the cache write through aten::transpose" in missed[0], missed
    assert_bit_exact(compiled.outputs, compiled.eager)
