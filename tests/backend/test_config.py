"""PassConfig / CompilationConfig: levels per platform, user-set wins, the post-init rules,
validation messages, JSON round trip and vLLM's command-line syntax."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import warnings
from dataclasses import fields

import pytest

from irfuse import support_matrix
from irfuse.config import (
    CliText,
    CompilationConfig,
    ConfigError,
    PassConfig,
    itemsize_of,
    parse_cli,
    resolve,
    resolve_explained,
)
from irfuse.fusions import FUSIONS
from irfuse.platform import Platform

FLAGS = support_matrix.FLAGS

# A Llama-70B-like TP-2 FP8 model on a machine with FlashInfer.
FACTS = {"tp_size": 2, "hidden_size": 8192, "itemsize": 2, "quant_scheme": "fp8-static-tensor",
         "flashinfer_available": True}


def _on(cfg: CompilationConfig) -> set[str]:
    return {f for f in FLAGS if getattr(cfg.pass_config, f)}


def test_defaults_are_unset() -> None:
    pc = PassConfig()
    assert all(getattr(pc, f) is None for f in FLAGS)
    assert pc.fi_allreduce_fusion_max_size_mb is None and pc.sp_min_token_num is None
    assert pc.rope_kvcache_fusion_max_token_num == 256
    cc = CompilationConfig()
    assert cc.optimization_level == 2
    assert (cc.max_num_batched_tokens, cc.inductor, cc.strict, cc.debug) == (8192, True, False,
                                                                              False)
    assert cc.compile_sizes is None and cc.platform is None and cc.tp_size is None


def test_passconfig_fields_are_the_declared_flags_and_thresholds() -> None:
    names = [f.name for f in fields(PassConfig)]
    assert names == [n for f in FUSIONS for n in (f.flag, *(t.name for t in f.thresholds))]
    for f in FUSIONS:
        for t in f.thresholds:
            assert getattr(PassConfig(), t.name) == t.default
    assert "compile_ranges_split_points" in [f.name for f in fields(CompilationConfig)]


def test_reading_the_config_does_not_import_the_compiler() -> None:
    """The PassConfig is read off the fusions' declarations alone: importing it leaves xDSL,
    torch's compiler, Triton, the patterns and the kernels unloaded."""
    heavy = ["xdsl", "torch._inductor", "triton", "irfuse.kernels.dispatch",
             "irfuse.fusions.kernel_decl", *(f"irfuse.fusions.{f.flag}.{part}" for f in FUSIONS
                                             for part in ("pattern", "ops"))]
    code = f"import sys, irfuse.config\nprint([m for m in {heavy!r} if m in sys.modules])"
    root = pathlib.Path(__file__).resolve().parents[2]
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=path),
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


# ---------------------------------------------------------------------------- levels

O1_ON = {"eliminate_noops", "fuse_norm_quant", "fuse_act_quant", "fuse_act_padding"}
NO_FP8 = {"eliminate_noops", "fuse_act_padding"}
SM90_O1 = {"enable_qk_norm_rope_fusion", "fuse_rope_kvcache"}  # measured faster there
SM90_O2 = {"fuse_allreduce_rms", "fuse_attn_quant", "fuse_rope_kvcache_cat_mla"}
EXPECTED_ON = {
    # platform: {level: flags on}
    "cpu": {0: set(), 1: O1_ON, 2: O1_ON},
    "cuda:sm80": {0: set(), 1: NO_FP8, 2: NO_FP8},  # no FP8 below sm89
    "cuda:sm89": {0: set(), 1: O1_ON, 2: O1_ON},
    "cuda:sm90": {0: set(), 1: O1_ON | SM90_O1, 2: O1_ON | SM90_O1 | SM90_O2},
    "cuda:sm100": {0: set(), 1: O1_ON, 2: O1_ON | {"fuse_allreduce_rms"}},
    "rocm": {0: set(), 1: O1_ON, 2: O1_ON},
    "rocm:gfx90a": {0: set(), 1: NO_FP8, 2: NO_FP8},  # no FP8 on MI200
}


@pytest.mark.parametrize("platform", list(EXPECTED_ON))
@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_level_defaults_per_platform(platform: str, level: int) -> None:
    cfg = resolve(CompilationConfig(optimization_level=level), platform=platform, **FACTS)
    assert _on(cfg) == EXPECTED_ON[platform][min(level, 2)]
    assert all(getattr(cfg.pass_config, f) is False for f in FLAGS if f not in _on(cfg))


def _declared_on(platform: str, level: int) -> set[str]:
    """The flags the declarations turn on at `level` for FACTS' model: the rows whose
    `default_level` on the platform is at most `level` and that can apply to its quant scheme
    (FACTS meets the TP and FlashInfer conditions of the rows that have them)."""
    plat = Platform.parse(platform)
    return {
        row.flag for row in support_matrix.passes()
        if (lowest := support_matrix.default_level(row.name, plat)) is not None
        and level >= lowest
        and support_matrix.can_apply(row.name, plat, FACTS["quant_scheme"])[0]
    }


@pytest.mark.parametrize("platform", list(EXPECTED_ON))
@pytest.mark.parametrize("level", [0, 1, 2])
def test_level_defaults_come_from_the_declarations(platform: str, level: int) -> None:
    # The table above is what the fusions' declarations say (a default level changed in a
    # declaration shows here), and the config resolves to exactly that.
    assert _declared_on(platform, level) == EXPECTED_ON[platform][level]


# vLLM v0.17's level defaults for FACTS' model on Hopper, as its docs give them
# (docs/configuration.md, "Optimization levels"): under Inductor its custom ops are
# off, so O1 turns on no fusion (norm/act + quant need custom ops, act padding and RoPE + KV
# cache need ROCm AITER); O2 adds all-reduce + RMSNorm (TP > 1, FlashInfer, sm90/sm100);
# attention + quant, SP and AsyncTP stay off (IS_QUANTIZED / IS_DENSE are False, #25689).
VLLM_SM90_FUSIONS_ON = {0: set(), 1: set(), 2: {"fuse_allreduce_rms"}}
# Where irfuse differs, and why: its own kernels (or the reference) replace vLLM's custom ops,
# and each default below is the one its declaration gives (measured faster than Inductor on
# Hopper for the sm90-only ones).
IRFUSE_SM90_EXTRA = {
    0: set(),
    1: {"fuse_norm_quant", "fuse_act_quant", "fuse_act_padding", *SM90_O1},
    2: {"fuse_norm_quant", "fuse_act_quant", "fuse_act_padding", *SM90_O1, "fuse_attn_quant",
        "fuse_rope_kvcache_cat_mla"},  # (vLLM 0.32 turns the MLA one on from O2 too)
}


@pytest.mark.parametrize("level", [0, 1, 2])
def test_sm90_defaults_beside_vllms(level: int) -> None:
    cfg = resolve(CompilationConfig(optimization_level=level), platform="cuda:sm90", **FACTS)
    fusions = _on(cfg) - {"eliminate_noops"}
    assert VLLM_SM90_FUSIONS_ON[level] <= fusions  # nothing vLLM turns on is off in irfuse
    assert fusions - VLLM_SM90_FUSIONS_ON[level] == IRFUSE_SM90_EXTRA[level]


@pytest.mark.parametrize("platform", list(EXPECTED_ON))
def test_o3_is_o2(platform: str) -> None:
    o2 = resolve(CompilationConfig(optimization_level=2), platform=platform, **FACTS)
    o3 = resolve(CompilationConfig(optimization_level=3), platform=platform, **FACTS)
    assert o2.pass_config == o3.pass_config


@pytest.mark.parametrize(
    ("facts", "on"),
    [
        ({"tp_size": 1}, False),
        ({"tp_size": None}, False),
        ({"tp_size": 16}, False),  # FlashInfer has no cap for 16 (vLLM's table has 2, 4, 8)
        ({"flashinfer_available": False}, False),
        ({"tp_size": 4}, True),
        ({"tp_size": 8}, True),
    ],
)
def test_allreduce_fusion_o2_conditions(facts: dict, on: bool) -> None:
    cfg = resolve(CompilationConfig(), platform="cuda:sm90", **{**FACTS, **facts})
    assert cfg.pass_config.fuse_allreduce_rms is on


@pytest.mark.parametrize(
    ("scheme", "norm", "act"),
    [
        ("none", False, False),
        ("nvfp4", False, True),
        ("fp8-dynamic-token", True, False),
        ("fp8-group-128", True, True),
        ("fp8-dynamic-tensor", False, False),
        (None, True, True),  # unknown scheme: not checked
    ],
)
def test_quant_scheme_gates_level_defaults(scheme: str | None, norm: bool, act: bool) -> None:
    cfg = resolve(CompilationConfig(optimization_level=1), platform="cuda:sm90",
                  **{**FACTS, "quant_scheme": scheme})
    assert (cfg.pass_config.fuse_norm_quant, cfg.pass_config.fuse_act_quant) == (norm, act)


@pytest.mark.parametrize(
    ("schemes", "norm", "act"),
    [
        # A graph's quants in order of first use: a pass is off only when none of its schemes
        # is one the pass fuses; each site is then judged by its own scheme.
        (("fp8-dynamic-tensor", "fp8-static-tensor"), True, True),
        (("fp8-static-tensor", "fp8-dynamic-tensor"), True, True),
        (("fp8-dynamic-tensor", "nvfp4"), False, True),
        (("fp8-dynamic-tensor", "fp8-dynamic-tensor"), False, False),
    ],
)
def test_a_graph_with_several_schemes_is_gated_by_all_of_them(schemes, norm, act) -> None:
    res = resolve_explained(CompilationConfig(optimization_level=1), platform="cuda:sm90",
                            **{**FACTS, "quant_scheme": schemes})
    pc = res.config.pass_config
    assert (pc.fuse_norm_quant, pc.fuse_act_quant) == (norm, act)
    if not norm:
        assert "does not fuse fp8-dynamic-tensor" in res.notes["fuse_norm_quant"]


def test_fi_cap_filled_per_capability_and_tp() -> None:
    def cap(platform: str, tp: int) -> float | None:
        cfg = resolve(CompilationConfig(), platform=platform, **{**FACTS, "tp_size": tp})
        return cfg.pass_config.fi_allreduce_fusion_max_size_mb

    assert [cap("cuda:sm90", tp) for tp in (2, 4, 8)] == [64.0, 2.0, 0.5]
    assert [cap("cuda:sm100", tp) for tp in (2, 4, 8)] == [64.0, 32.0, 1.0]
    user = CompilationConfig(pass_config={"fi_allreduce_fusion_max_size_mb": 10})
    assert resolve(user, platform="cuda:sm90", **FACTS).pass_config \
        .fi_allreduce_fusion_max_size_mb == 10.0


# ---------------------------------------------------------------------------- user-set wins


def test_user_set_wins_over_every_level() -> None:
    for level in (0, 1, 2, 3):
        on = CompilationConfig(optimization_level=level, pass_config={"fuse_norm_quant": True,
                                                                      "fuse_act_quant": False})
        cfg = resolve(on, platform="cpu", **FACTS)
        assert cfg.pass_config.fuse_norm_quant is True
        assert cfg.pass_config.fuse_act_quant is False


def test_user_can_turn_on_an_opt_in_pass() -> None:
    cfg = resolve(CompilationConfig(pass_config={"enable_qk_norm_rope_fusion": True,
                                                 "fuse_attn_quant": True}),
                  platform="cuda:sm90", **FACTS)
    assert cfg.pass_config.enable_qk_norm_rope_fusion is True
    assert cfg.pass_config.fuse_attn_quant is True


def test_resolve_copies_and_is_idempotent() -> None:
    user = CompilationConfig(pass_config={"fuse_norm_quant": False})
    once = resolve(user, platform="cuda:sm90", **FACTS)
    assert user.pass_config.fuse_act_quant is None and user.platform is None  # untouched
    assert resolve(once, **FACTS) == once
    assert once.platform == "cuda:sm90" and once.tp_size == 2
    assert once.is_resolved() and not user.is_resolved()


def test_config_overrides_win_over_the_facts() -> None:
    cfg = resolve(CompilationConfig(platform="cuda:sm90", tp_size=4), platform="cpu", tp_size=2,
                  hidden_size=8192, itemsize=2, flashinfer_available=True)
    assert (cfg.platform, cfg.tp_size) == ("cuda:sm90", 4)
    assert cfg.pass_config.fi_allreduce_fusion_max_size_mb == 2.0  # sm90, TP 4


def test_platform_override_in_config_is_used() -> None:
    cfg = resolve(CompilationConfig(platform="cuda:sm100", tp_size=4), hidden_size=8192,
                  itemsize=2, quant_scheme="fp8-static-tensor", flashinfer_available=True)
    assert cfg.platform == "cuda:sm100"
    assert cfg.pass_config.fuse_allreduce_rms is True
    assert cfg.pass_config.fi_allreduce_fusion_max_size_mb == 32.0


# ---------------------------------------------------------------------------- post-init rules


def test_gemm_comms_implies_sp() -> None:
    res = resolve_explained(CompilationConfig(pass_config={"fuse_gemm_comms": True}),
                            platform="cuda:sm90", **FACTS)
    pc = res.config.pass_config
    assert pc.enable_sp is True and pc.fuse_gemm_comms is True
    assert pc.sp_min_token_num == 1024
    assert "implied by fuse_gemm_comms" in res.notes["enable_sp"]


def test_gemm_comms_overrides_explicit_sp_false_with_a_warning() -> None:
    res = resolve_explained(
        CompilationConfig(pass_config={"fuse_gemm_comms": True, "enable_sp": False}),
        platform="cuda:sm90", **FACTS)
    assert res.config.pass_config.enable_sp is True
    assert any("fuse_gemm_comms implies it" in w for w in res.warnings)


def test_sp_needs_tp_above_one() -> None:
    res = resolve_explained(CompilationConfig(pass_config={"enable_sp": True}),
                            platform="cuda:sm90", **{**FACTS, "tp_size": 1})
    assert res.config.pass_config.enable_sp is False
    assert any("enable_sp turned off" in w and "TP is 1" in w for w in res.warnings)


def test_sp_without_threshold_is_turned_off_unless_the_user_sets_one() -> None:
    res = resolve_explained(CompilationConfig(pass_config={"enable_sp": True}),
                            platform="cpu", **FACTS)
    assert res.config.pass_config.enable_sp is False
    assert any("set pass_config.sp_min_token_num" in w for w in res.warnings)
    cfg = resolve(CompilationConfig(pass_config={"enable_sp": True, "sp_min_token_num": 4}),
                  platform="cpu", **FACTS)
    assert cfg.pass_config.enable_sp is True and cfg.pass_config.sp_min_token_num == 4
    small = resolve(CompilationConfig(pass_config={"enable_sp": True}), platform="cuda:sm90",
                    **{**FACTS, "hidden_size": 4096})
    assert small.pass_config.enable_sp is False  # hidden below 8192: no threshold


def test_pass_that_cannot_apply_is_turned_off_with_a_warning() -> None:
    res = resolve_explained(CompilationConfig(pass_config={"fuse_allreduce_rms": True}),
                            platform="cuda:sm80", **FACTS)
    assert res.config.pass_config.fuse_allreduce_rms is False
    assert any("fuse_allreduce_rms turned off" in w and "built for sm90 and sm100 only" in w
               for w in res.warnings)
    hopper = resolve(CompilationConfig(pass_config={"fuse_allreduce_rms": True}),
                     platform="cuda:sm90", **FACTS)
    assert hopper.pass_config.fuse_allreduce_rms is True


def test_strict_makes_an_impossible_user_flag_an_error() -> None:
    cfg = CompilationConfig(strict=True, pass_config={"fuse_allreduce_rms": True})
    with pytest.raises(ConfigError, match=r"pass_config.fuse_allreduce_rms=True cannot apply"):
        resolve(cfg, platform="cuda:sm80", **FACTS)


@pytest.mark.parametrize(
    ("platform", "facts", "on", "message"),
    [
        ("cuda:sm90", {"flashinfer_available": False}, False, "not installed"),
        ("cuda:sm90", {"tp_size": 16}, False, "supports TP 2, 4, 8, not 16"),
        ("cuda:sm80", {}, False, "sm90 and sm100 only"),
        ("cpu", {}, True, None),  # the CPU reference, for tests: no size cap
    ],
)
def test_user_allreduce_fusion_requirements(platform: str, facts: dict, on: bool,
                                            message: str | None) -> None:
    res = resolve_explained(CompilationConfig(pass_config={"fuse_allreduce_rms": True}),
                            platform=platform, **{**FACTS, **facts})
    assert res.config.pass_config.fuse_allreduce_rms is on
    if message:
        assert any(message in w for w in res.warnings), res.warnings
    else:
        assert res.config.pass_config.fi_allreduce_fusion_max_size_mb is None


def test_noop_elimination_off_warns_but_keeps_the_fusions() -> None:
    res = resolve_explained(CompilationConfig(pass_config={"eliminate_noops": False}),
                            platform="cpu", **FACTS)
    assert res.config.pass_config.eliminate_noops is False
    assert res.config.pass_config.fuse_norm_quant is True
    assert any("eliminate_noops off" in w for w in res.warnings)


def test_dump_dir_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IRFUSE_DUMP_DIR", "/tmp/env-dumps")
    assert resolve(CompilationConfig(), platform="cpu").dump_dir == "/tmp/env-dumps"
    assert resolve(CompilationConfig(dump_dir="/tmp/mine"), platform="cpu").dump_dir == \
        "/tmp/mine"


def test_unknown_quant_scheme_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"'quant_scheme': 'int4'.*fp8-static-tensor"):
        resolve(CompilationConfig(), platform="cpu", quant_scheme="int4")


def test_itemsize_of() -> None:
    import torch

    assert [itemsize_of(d) for d in ("bf16", "bfloat16", "float16", "fp32", torch.bfloat16,
                                     torch.float32)] == [2, 2, 2, 4, 2, 4]
    with pytest.raises(ConfigError, match="'dtype'"):
        itemsize_of("int3")


# ---------------------------------------------------------------------------- validation


def test_from_options_accepts_dicts_and_objects() -> None:
    a = CompilationConfig.from_options({"optimization_level": 1, "pass_config":
                                        {"fuse_norm_quant": False}, "dump_dir": "/tmp/d"})
    b = CompilationConfig.from_options({"optimization_level": 1, "pass_config":
                                        PassConfig(fuse_norm_quant=False), "dump_dir": "/tmp/d"})
    assert a == b
    assert a.pass_config.fuse_norm_quant is False and a.optimization_level == 1
    assert CompilationConfig.from_options(None) == CompilationConfig()
    assert CompilationConfig.from_options(a) == a and CompilationConfig.from_options(a) is not a


def test_unknown_top_level_key_names_key_value_and_known_fields() -> None:
    with pytest.raises(ConfigError) as e:
        CompilationConfig.from_options({"cudagraph_mode": "FULL"})
    msg = str(e.value)
    assert "'cudagraph_mode'" in msg and "'FULL'" in msg
    assert "known CompilationConfig fields" in msg and "pass_config" in msg


def test_unknown_pass_config_key_lists_every_passconfig_field() -> None:
    with pytest.raises(ConfigError) as e:
        CompilationConfig.from_options({"pass_config": {"fuse_nrm_quant": True}})
    msg = str(e.value)
    assert "'pass_config.fuse_nrm_quant'" in msg and "True" in msg
    for f in fields(PassConfig):
        assert f.name in msg


@pytest.mark.parametrize(
    ("options", "key", "allowed"),
    [
        ({"pass_config": {"fuse_norm_quant": "yes"}}, "pass_config.fuse_norm_quant",
         "true, false"),
        ({"pass_config": {"enable_sp": 1}}, "pass_config.enable_sp", "true, false"),
        ({"pass_config": {"sp_min_token_num": 0}}, "pass_config.sp_min_token_num",
         "integer >= 1"),
        ({"pass_config": {"fi_allreduce_fusion_max_size_mb": -1}},
         "pass_config.fi_allreduce_fusion_max_size_mb", "number of MB >= 0"),
        ({"pass_config": {"rope_kvcache_fusion_max_token_num": None}},
         "pass_config.rope_kvcache_fusion_max_token_num", "integer >= 1"),
        ({"optimization_level": 7}, "optimization_level", "0, 1, 2 or 3"),
        ({"max_num_batched_tokens": 0}, "max_num_batched_tokens", "integer >= 1"),
        ({"compile_sizes": "a,b"}, "compile_sizes", "list of integers"),
        ({"compile_ranges_split_points": 8}, "compile_ranges_split_points", "list of integers"),
        ({"inductor": "maybe"}, "inductor", "true, false"),
        ({"dump_dir": 5}, "dump_dir", "a string"),
        ({"tp_size": 0}, "tp_size", "integer >= 1"),
        ({"platform": "gpu"}, "platform", "expected 'cpu', 'cuda:smNN'"),
        ({"pass_config": [1]}, "pass_config", "an object"),
    ],
)
def test_bad_values_name_key_value_and_allowed(options: dict, key: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as e:
        CompilationConfig.from_options(options)
    msg = str(e.value)
    assert f"'{key}'" in msg and allowed in msg
    bad = options[key.split(".")[0]] if "." not in key else options["pass_config"][
        key.split(".")[1]]
    assert repr(bad) in msg


def test_configerror_is_a_valueerror() -> None:
    assert issubclass(ConfigError, ValueError)


def test_python_constructor_validates_and_refuses_strings_for_bools_numbers_lists() -> None:
    # Only the command line's text ("False", "64", "8,16") is read as a bool, a number or a
    # list: from Python or JSON a string there is a mistake, named in one line.
    pc = PassConfig(fuse_norm_quant=CliText("False"), sp_min_token_num=CliText("64"))
    assert pc.fuse_norm_quant is False and pc.sp_min_token_num == 64
    for bad, key in (({"fuse_norm_quant": "False"}, "fuse_norm_quant"),
                     ({"sp_min_token_num": "64"}, "sp_min_token_num"),
                     ({"fuse_act_quant": "on"}, "fuse_act_quant")):
        with pytest.raises(ConfigError, match=rf"pass_config\.{key}"):
            PassConfig(**bad)  # type: ignore[arg-type]
    for bad, key in (({"strict": "false"}, "strict"), ({"compile_sizes": "8"}, "compile_sizes"),
                     ({"compile_sizes": [8, "16"]}, "compile_sizes"),
                     ({"max_num_batched_tokens": "1024"}, "max_num_batched_tokens")):
        with pytest.raises(ConfigError, match=rf"bad value for '{key}'") as err:
            CompilationConfig.from_options(bad)
        assert "\n" not in str(err.value)
    cc = CompilationConfig(optimization_level="O3", platform="CUDA:SM90")  # type: ignore[arg-type]
    assert cc.optimization_level == 3 and cc.platform == "cuda:sm90"


def test_command_line_text_becomes_bools_numbers_and_lists() -> None:
    cfg = CompilationConfig.from_cli(["-cc.strict=False", "-cc.compile_sizes=8,16",
                                      "-cc.pass_config.fuse_norm_quant=false"])
    assert cfg.strict is False and cfg.compile_sizes == [8, 16]
    assert cfg.pass_config.fuse_norm_quant is False


def test_unknown_rocm_arch_and_split_points_past_the_top_are_refused() -> None:
    with pytest.raises(ConfigError, match="gfx000 is not a ROCm architecture"):
        CompilationConfig.from_options({"platform": "rocm:gfx000"})
    with pytest.raises(ConfigError, match="4096 lie past it"):
        CompilationConfig.from_options({"max_num_batched_tokens": 1024,
                                        "compile_ranges_split_points": [512, 4096]})
    assert CompilationConfig(platform="rocm:gfx942").platform == "rocm:gfx942"


@pytest.mark.parametrize(("text", "value"), [(CliText("True"), True), (CliText("true"), True),
                                            (CliText("False"), False), (CliText("false"), False),
                                            (True, True), (False, False)])
def test_boolean_spellings(text: object, value: bool) -> None:
    assert PassConfig(enable_sp=text).enable_sp is value  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- JSON


def test_json_round_trip_of_a_resolved_config() -> None:
    cfg = resolve(CompilationConfig(optimization_level=3, compile_sizes=[16, 64],
                                    compile_ranges_split_points=[8, 32],
                                    pass_config={"enable_sp": True}),
                  platform="cuda:sm90", **FACTS)
    text = cfg.to_json()
    back = CompilationConfig.from_json(text)
    assert back == cfg
    assert back.to_json() == text
    data = json.loads(text)
    assert list(data) == [f.name for f in fields(CompilationConfig)]
    assert list(data["pass_config"]) == [f.name for f in fields(PassConfig)]
    assert data["pass_config"]["sp_min_token_num"] == 1024


def test_json_round_trip_of_an_unresolved_config_keeps_unset_fields() -> None:
    cfg = CompilationConfig(pass_config={"fuse_norm_quant": False})
    back = CompilationConfig.from_json(cfg.to_json())
    assert back == cfg and back.pass_config.fuse_act_quant is None


@pytest.mark.parametrize(("text", "message"), [("{", "bad JSON"), ("[1, 2]", "JSON object"),
                                               ('{"pass_config": {"x": 1}}', "pass_config.x")])
def test_from_json_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        CompilationConfig.from_json(text)


# ---------------------------------------------------------------------------- CLI syntax


@pytest.mark.parametrize(
    "argv",
    [["-O1"], ["-O", "1"], ["-O=1"], ["--optimization-level", "1"], ["--optimization-level=1"],
     ["-cc.optimization_level=1"], ["-cc", '{"optimization_level": 1}']],
)
def test_level_spellings(argv: list[str]) -> None:
    assert CompilationConfig.from_cli(argv).optimization_level == 1


@pytest.mark.parametrize(
    ("argv", "value"),
    [
        (["-cc.pass_config.fuse_norm_quant=False"], False),
        (["-cc.pass_config.fuse_norm_quant=false"], False),
        (["-cc.pass_config.fuse_norm_quant=True"], True),
        (["-cc.pass_config.fuse_norm_quant=true"], True),
        (["-cc.pass_config.fuse_norm_quant", "False"], False),
        (["--compilation-config.pass_config.fuse_norm_quant=true"], True),
        (["-cc.pass-config.fuse-norm-quant=False"], False),
        (["--compilation-config", '{"pass_config": {"fuse_norm_quant": false}}'], False),
        (["--compilation-config={\"pass_config\": {\"fuse_norm_quant\": true}}"], True),
        (["-cc", '{"pass_config": {"fuse_norm_quant": true}}'], True),
        (["-cc={\"pass_config\": {\"fuse_norm_quant\": false}}"], False),
    ],
)
def test_pass_config_spellings(argv: list[str], value: bool) -> None:
    assert CompilationConfig.from_cli(argv).pass_config.fuse_norm_quant is value


def test_dotted_values_are_json_with_string_fallback() -> None:
    cfg = CompilationConfig.from_cli([
        "-cc.max_num_batched_tokens=4096", "-cc.dump_dir=/tmp/dumps", "-cc.platform=cuda:sm90",
        "-cc.pass_config.fi_allreduce_fusion_max_size_mb=0.5", "-cc.compile_sizes=[1, 2]",
        "-cc.pass_config.sp_min_token_num=null"])
    assert cfg.max_num_batched_tokens == 4096
    assert cfg.dump_dir == "/tmp/dumps" and cfg.platform == "cuda:sm90"
    assert cfg.pass_config.fi_allreduce_fusion_max_size_mb == 0.5
    assert cfg.compile_sizes == [1, 2] and cfg.pass_config.sp_min_token_num is None


def test_list_append_and_recursive_merge() -> None:
    argv = ["-cc.compile_sizes=[1, 2]", "-cc.compile_sizes+=4,8", "-cc.compile_sizes+=16",
            "-cc", '{"pass_config": {"fuse_norm_quant": false}}',
            "-cc.pass_config.fuse_act_quant=True", "-O3"]
    cfg = CompilationConfig.from_cli(argv)
    assert cfg.compile_sizes == [1, 2, 4, 8, 16]
    assert cfg.pass_config.fuse_norm_quant is False and cfg.pass_config.fuse_act_quant is True
    assert cfg.optimization_level == 3
    # `True` is not JSON: it stays the string "True" until the field's check makes it a bool
    assert parse_cli(argv)["pass_config"] == {"fuse_norm_quant": False, "fuse_act_quant": "True"}


def test_repeated_scalar_warns_and_the_last_wins() -> None:
    with pytest.warns(UserWarning, match="optimization_level given twice"):
        cfg = CompilationConfig.from_cli(["-O1", "-O3"])
    assert cfg.optimization_level == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CompilationConfig.from_cli(["-O1", "-O1"])  # the same value twice: no warning


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["-cc.pass_config.fuse_nope=1"], ["'pass_config.fuse_nope'", "value 1",
                                           "fuse_norm_quant", "sp_min_token_num"]),
        (["-cc.pass_config.fuse_norm_quant=maybe"], ["'pass_config.fuse_norm_quant'",
                                                     "'maybe'", "true, false"]),
        (["-O", "x"], ["'optimization_level'", "'x'", "0, 1, 2 or 3"]),
        (["-O7"], ["'optimization_level'", "'7'"]),
        (["--fusion"], ["unknown argument '--fusion'", "-O<level>"]),
        (["-x.y=1"], ["unknown argument '-x.y=1'"]),
        (["-cc", "notjson"], ["'-cc'", "'notjson'", "JSON object"]),
        (["-O"], ["-O needs a value"]),
        (["-cc.pass_config..x=1"], ["empty key segment"]),
        (["-cc.cudagraph_mode=FULL"], ["'cudagraph_mode'", "'FULL'", "known CompilationConfig"]),
    ],
)
def test_cli_errors(argv: list[str], fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        CompilationConfig.from_cli(argv)
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)


def test_cli_and_json_and_options_agree() -> None:
    from_cli = CompilationConfig.from_cli(["-O1", "-cc.pass_config.enable_sp=true",
                                           "-cc.pass_config.sp_min_token_num=512",
                                           "-cc.compile_sizes+=8,16"])
    from_json = CompilationConfig.from_json(
        '{"optimization_level": 1, "pass_config": {"enable_sp": true, "sp_min_token_num": 512},'
        ' "compile_sizes": [8, 16]}')
    from_py = CompilationConfig(optimization_level=1, compile_sizes=[8, 16],
                                pass_config=PassConfig(enable_sp=True, sp_min_token_num=512))
    assert from_cli == from_json == from_py


def test_resolution_to_dict_is_json() -> None:
    res = resolve_explained(CompilationConfig(), platform=Platform("cuda", capability=90),
                            **FACTS)
    data = json.loads(json.dumps(res.to_dict()))
    assert data["platform"] == "cuda:sm90"
    assert data["facts"]["tp_size"] == 2
    assert set(data["notes"]) >= set(FLAGS)
