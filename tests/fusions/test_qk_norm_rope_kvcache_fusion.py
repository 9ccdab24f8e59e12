"""fuse-qk-norm-rope-kvcache end to end on the CPU: with only this flag on, per-head q/k norms,
RoPE and the paged KV-cache write become one `irfuse::rope_kv_cache_write` call (the kernel the
two separate flags build together), bit for bit eager; a model without QK norm has no candidate;
with all three flags on it takes the sites first (vLLM 0.32's "supersedes both"); a rotated k read
besides the write fuses, the op returning it (the `_k` kernels)."""

from __future__ import annotations

import pytest
import torch
from rope_writes import RopeTable, paged_write_inputs

import irfuse.models as M
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

PASS = "fuse-qk-norm-rope-kvcache"


def _run(built: M.BuiltModel, pass_config: dict) -> Compiled:
    return compile_and_run(built.model, built.example_inputs,
                           dynamic_dims=tuple(built.dynamic_dims.items()),
                           options={"optimization_level": 1, "pass_config": pass_config})


def _missed(compiled: Compiled) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.passes for m in p.missed]


@pytest.mark.parametrize("rope_style", ["neox", "gptj"])
def test_the_flag_alone_builds_the_one_kernel(rope_style):
    built = M.build("paged", size="tiny", num_layers=2, qk_norm=True, rope_style=rope_style,
                    rotary_fraction=0.5)
    compiled = _run(built, {"fuse_qk_norm_rope_kvcache": True,
                            "enable_qk_norm_rope_fusion": False, "fuse_rope_kvcache": False})
    assert compiled.fused(PASS) == 2, _missed(compiled)
    assert compiled.fused("enable-qk-norm-rope-fusion") == 0
    assert compiled.fused("fuse-rope-kvcache") == 0
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_it_supersedes_the_two_separate_fusions():
    built = M.build("paged", size="tiny", num_layers=2, qk_norm=True)
    compiled = _run(built, {"fuse_qk_norm_rope_kvcache": True,
                            "enable_qk_norm_rope_fusion": True, "fuse_rope_kvcache": True})
    assert compiled.fused(PASS) == 2
    assert compiled.fused("enable-qk-norm-rope-fusion") == 0
    assert compiled.fused("fuse-rope-kvcache") == 0
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_a_model_without_qk_norm_is_no_candidate():
    built = M.build("paged", size="tiny", num_layers=1)
    compiled = _run(built, {"fuse_qk_norm_rope_kvcache": True})
    assert compiled.fused(PASS) == 0
    assert not [m for r in compiled.reports for p in r.passes if p.name == PASS
                for m in p.missed]
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_ranges_past_the_token_limit_are_left_alone():
    built = M.build("paged", size="tiny", num_layers=1, qk_norm=True)
    compiled = _run(built, {"fuse_qk_norm_rope_kvcache": True,
                            "rope_kvcache_fusion_max_token_num": 2})
    assert compiled.fused(PASS) == 0
    assert_bit_exact(compiled.outputs, compiled.eager)


class _NormedReturnedKey(RopeTable):
    """Qwen3's per-head q/k norms, RoPE, the paged write, and the rotated k returned too (a layer
    that hands its keys on)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.qw, self.kw = (torch.randn(64, generator=g).bfloat16() for _ in range(2))

    @staticmethod
    def _norm(x, w):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return w * h.to(x.dtype)

    def forward(self, positions, q, k, v, k_cache, v_cache, slots):
        q = self._rope(self._norm(q, self.qw), positions)
        k = self._rope(self._norm(k, self.kw), positions)
        k_cache.view(-1, 2, 64).index_put_((slots,), k)
        v_cache.view(-1, 2, 64).index_put_((slots,), v)
        return q, k


def test_a_rotated_k_read_besides_the_write_fuses_and_is_returned():
    compiled = compile_and_run(_NormedReturnedKey(), paged_write_inputs(), dynamic_dims=(),
                               options={"optimization_level": 1,
                                        "pass_config": {"fuse_qk_norm_rope_kvcache": True}})
    assert compiled.fused(PASS) == 1, _missed(compiled)
    assert not [m for r in compiled.reports for p in r.passes if p.name == PASS
                for m in p.missed]
    assert_bit_exact(compiled.outputs, compiled.eager)
