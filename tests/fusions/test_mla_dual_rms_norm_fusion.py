"""fuse-mla-dual-rms-norm end to end on the CPU: DeepSeek-V3-style MLA's q_a and kv_a norms (two
slices of the fused q_a / kv_a projection) become one `irfuse::mla_dual_rms_norm` call per layer,
bit for bit eager; V2-Lite (no q latent) has no candidate."""

from __future__ import annotations

import pytest

import irfuse.models as M
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

PASS = "fuse-mla-dual-rms-norm"


def _run(built: M.BuiltModel, pass_config: dict) -> Compiled:
    return compile_and_run(built.model, built.example_inputs,
                           dynamic_dims=tuple(built.dynamic_dims.items()),
                           options={"optimization_level": 1, "pass_config": pass_config})


def _missed(compiled: Compiled) -> list[str]:
    return [m.reason for r in compiled.reports for p in r.passes if p.name == PASS
            for m in p.missed]


@pytest.mark.parametrize("norm_style", ["vllm", "hf"])
def test_the_latent_norms_fuse_bit_exact(norm_style):
    built = M.build("mla", size="tiny", num_layers=2, norm_style=norm_style)
    compiled = _run(built, {"fuse_mla_dual_rms_norm": True})
    assert compiled.fused(PASS) == 2, _missed(compiled)
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_v2_lite_has_no_pair():
    built = M.build("mla-lite", size="tiny", num_layers=1)
    compiled = _run(built, {"fuse_mla_dual_rms_norm": True})
    assert compiled.fused(PASS) == 0
    assert _missed(compiled) == []
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_off_by_default_at_o3():
    built = M.build("mla", size="tiny", num_layers=1)
    compiled = compile_and_run(built.model, built.example_inputs,
                               dynamic_dims=tuple(built.dynamic_dims.items()),
                               options={"optimization_level": 3})
    assert compiled.fused(PASS) == 0
