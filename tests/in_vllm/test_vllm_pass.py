"""irfuse's vLLM pass without an engine: how vLLM's config names it, what config it reads from
vLLM, and what its cache key (`uuid()`) depends on."""

from __future__ import annotations

import types

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (make test installs it into "
                    ".venv-vllm and runs these tests there)")

import irfuse  # noqa: E402
from irfuse import vllm_plugin  # noqa: E402
from irfuse.config import ConfigError  # noqa: E402
from irfuse.vllm_plugin import IrfuseVllmPass  # noqa: E402


def test_vllm_resolves_the_qualified_name_to_irfuses_pass():
    from vllm.config import CompilationConfig

    cc = CompilationConfig(inductor_passes={"post_grad_custom_post_pass": "irfuse.vllm_pass"})
    # Not wrapped in vLLM's CallableInductorPass: irfuse's own uuid() is the cache key.
    assert cc.inductor_compile_config["post_grad_custom_post_pass"] is irfuse.vllm_pass
    assert irfuse.vllm_pass is vllm_plugin.vllm_pass


def _vllm_config(**pass_flags) -> types.SimpleNamespace:
    pass_config = types.SimpleNamespace(fuse_norm_quant=False, eliminate_noops=True,
                                        fuse_rope_kvcache_cat_mla=False, **pass_flags)
    cc = types.SimpleNamespace(pass_config=pass_config)
    return types.SimpleNamespace(compilation_config=cc, optimization_level=3,
                                 scheduler_config=types.SimpleNamespace(max_num_batched_tokens=512))


def test_config_read_from_vllm_then_overridden(monkeypatch):
    monkeypatch.setattr(vllm_plugin, "_current_vllm_config", lambda: _vllm_config())
    monkeypatch.setenv(vllm_plugin.OPTIONS_ENV, '{"pass_config": {"eliminate_noops": false}}')
    config = IrfuseVllmPass({"strict": True}).config()
    assert config.optimization_level == 3
    assert config.max_num_batched_tokens == 512
    assert config.pass_config.fuse_norm_quant is False  # vLLM's value
    assert config.pass_config.eliminate_noops is False  # the environment's override
    assert config.pass_config.fuse_act_quant is None  # unset: irfuse's level fills it
    assert config.strict is True


def test_bad_options_are_one_clear_error(monkeypatch):
    with pytest.raises(ConfigError, match="unknown key 'nope'"):
        IrfuseVllmPass({"nope": 1})
    monkeypatch.setenv(vllm_plugin.OPTIONS_ENV, "{not json")
    with pytest.raises(ConfigError, match="IRFUSE_VLLM_OPTIONS is not JSON"):
        IrfuseVllmPass().config()


def test_uuid_follows_config_version_sources_and_kernel_choices(monkeypatch):
    monkeypatch.setattr(vllm_plugin, "_current_vllm_config", lambda: _vllm_config())
    monkeypatch.delenv(vllm_plugin.OPTIONS_ENV, raising=False)
    base = IrfuseVllmPass().uuid()
    assert IrfuseVllmPass().uuid() == base  # stable: a warm restart finds its artifacts
    assert IrfuseVllmPass({"dump_dir": "/tmp/elsewhere"}).uuid() == base  # dumping changes no code
    changed = {
        IrfuseVllmPass({"pass_config": {"enable_qk_norm_rope_fusion": True}}).uuid(),
        IrfuseVllmPass({"optimization_level": 1}).uuid(),
    }
    real_choices = vllm_plugin._kernel_choices
    for name, value in [
        ("_current_vllm_config", lambda: _vllm_config(fuse_act_quant=True)),  # vLLM's PassConfig
        ("_version", lambda: "0.0.0-other"),
        ("_source_digest", lambda: "0" * 64),
        ("_kernel_choices", lambda p: {**real_choices(p), "qk_norm_rope": [[1, "triton"]]}),
    ]:
        with monkeypatch.context() as m:
            m.setattr(vllm_plugin, name, value)
            changed.add(IrfuseVllmPass().uuid())
    assert base not in changed and len(changed) == 6


def test_plugin_registers_the_custom_ops():
    import torch

    vllm_plugin.register()
    assert hasattr(torch.ops.irfuse, "qk_norm_rope")
    from vllm.config import CompilationConfig as VllmCompilationConfig

    assert VllmCompilationConfig.init_backend._irfuse_noted
    vllm_plugin.register()  # twice (vLLM loads plugins once per process, maybe more): no harm
    assert not hasattr(VllmCompilationConfig.init_backend.__wrapped__, "_irfuse_noted")


def test_vllms_cpu_build_has_no_fp8_quant_kernel():
    """Why no engine test shows the FP8 fusions inside vLLM: the CPU build registers its FP8
    quant ops without a schema (an FP8 engine fails at its first quant, `expected at most 0
    argument(s)`). When this fails, vLLM's CPU build can run FP8: add an FP8 engine run."""
    import torch
    import vllm._custom_ops  # noqa: F401  (loads vLLM's _C ops)

    for name in ("static_scaled_fp8_quant", "dynamic_scaled_fp8_quant",
                 "dynamic_per_token_scaled_fp8_quant"):
        op = getattr(torch.ops._C, name, None)
        assert op is None or op.default._schema.arguments == [], name


def _real_vllm_config(**pass_flags):
    from vllm.config import CompilationConfig as VllmCompilationConfig
    from vllm.config import VllmConfig

    return VllmConfig(compilation_config=VllmCompilationConfig(pass_config=pass_flags))


def test_flags_the_user_set_are_told_from_vllms_defaults():
    """vLLM's level fills unset flags in place; the plugin notes the user's flags first, as
    given (vLLM's CPU platform then forces QK norm + RoPE off: irfuse still sees the True)."""
    cfg = _real_vllm_config(fuse_attn_quant=False, enable_qk_norm_rope_fusion=True)
    pc = cfg.compilation_config.pass_config
    assert getattr(pc, vllm_plugin.USER_SET) == {"fuse_attn_quant": False,
                                                 "enable_qk_norm_rope_fusion": True}
    assert pc.enable_qk_norm_rope_fusion is False and pc.fuse_norm_quant is False  # vLLM's
    read = vllm_plugin.from_vllm(cfg)
    assert read["pass_config"] == {"fuse_attn_quant": False, "enable_qk_norm_rope_fusion": True,
                                   "rope_kvcache_fusion_max_token_num": 256}
    assert read["optimization_level"] == 2


def test_no_options_gives_irfuses_defaults_at_vllms_level(monkeypatch):
    cfg = _real_vllm_config(fuse_act_padding=False)
    monkeypatch.setattr(vllm_plugin, "_current_vllm_config", lambda: cfg)
    monkeypatch.delenv(vllm_plugin.OPTIONS_ENV, raising=False)
    config, sources = IrfuseVllmPass({"pass_config": {"fuse_rope_kvcache": True}}) \
        .config_and_sources()
    assert config.pass_config.fuse_norm_quant is None  # vLLM resolved it; irfuse's level fills
    assert config.pass_config.fuse_act_padding is False
    assert sources == {"fuse_act_padding": "vllm", "fuse_rope_kvcache": "irfuse"}
    from irfuse.config import resolve_explained

    res = resolve_explained(config, platform="cpu", quant_scheme="none", tp_size=None)
    assert res.config.pass_config.eliminate_noops is True  # irfuse's O1+ on the CPU
    steps = [{"flag": "fuse_rope_kvcache", "name": "fuse-rope-kvcache", "runs": False,
              "reason": "range [1, 512] goes beyond 256"}]
    off = vllm_plugin.off_reasons(res, steps, sources)
    assert off["fuse-act-padding"] == "turned off by the user in vLLM's pass_config"
    assert off["fuse-norm-quant"] == "no quantization it fuses in the graph"
    assert off["enable-qk-norm-rope-fusion"] == "opt-in on cpu: not measured faster there"
    assert off["fuse-rope-kvcache"] == "range [1, 512] goes beyond 256"
    assert "eliminate-noops" not in off
    assert list(off) == [r.name for r in vllm_plugin.support_matrix.passes() if r.name in off]


def test_the_off_line_is_logged_once(caplog):
    from irfuse.config import resolve_explained

    res = resolve_explained({"pass_config": {"fuse_attn_quant": False}}, platform="cpu",
                            quant_scheme="none")
    off = vllm_plugin.off_reasons(res, [], {"fuse_attn_quant": "vllm"})
    vllm_plugin._LOGGED.clear()
    with caplog.at_level("INFO", logger="vllm.irfuse"):
        vllm_plugin._log_once(res, off, "engine-1")
        vllm_plugin._log_once(res, {}, "engine-1")  # a later compile of the same engine
        vllm_plugin._log_once(res, off, "engine-2")
    first, second = caplog.records
    assert first.getMessage() == second.getMessage()
    assert first.getMessage().startswith("irfuse: O2 on cpu: on: eliminate-noops, ")
    assert "fuse-attn-quant (turned off by the user in vLLM's pass_config)" in first.getMessage()
