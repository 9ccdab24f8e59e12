"""Compile ranges: vLLM's own range and threshold cases, dispatch, and per-pass applicability."""

from __future__ import annotations

import pytest

from irfuse import ranges, thresholds
from irfuse.config import CompilationConfig, resolve
from irfuse.fusions import FUSIONS
from irfuse.platform import Platform
from irfuse.ranges import UNBOUNDED, Range

CPU = Platform("cpu")
SM80 = Platform("cuda", capability=80)
SM90 = Platform("cuda", capability=90)
SM100 = Platform("cuda", capability=100)


def _resolved(platform: Platform = CPU, **options: object) -> CompilationConfig:
    return resolve(CompilationConfig.from_options(options), platform=platform, tp_size=2,
                   hidden_size=8192, itemsize=2, quant_scheme="fp8-static-tensor",
                   flashinfer_available=True)


# ---------------------------------------------------------------------------- Range


def test_range_basics() -> None:
    r = Range(9, 32)
    assert str(r) == "[9, 32]" and r.as_list() == [9, 32]
    assert r.contains(9) and r.contains(32) and not r.contains(8) and not r.contains(33)
    assert not r.is_single_size() and Range(16, 16).is_single_size()
    fallback = Range(8193, UNBOUNDED)
    assert str(fallback) == "[8193, inf]" and fallback.as_list() == [8193, None]
    assert fallback.is_unbounded and fallback.contains(10**9)
    with pytest.raises(ValueError, match="need 1 <= lo <= hi"):
        Range(0, 4)
    with pytest.raises(ValueError, match="need 1 <= lo <= hi"):
        Range(8, 4)


# ---------------------------------------------------------------------------- vLLM's cases


def test_vllm_split_points_8_and_32() -> None:
    cfg = _resolved(optimization_level=0, compile_ranges_split_points=[8, 32])
    assert ranges.split_points(cfg, CPU, 8192, 2, 2) == [8, 32, 8192]
    assert ranges.compile_ranges(cfg, CPU, 8192, 2, 2) == [Range(1, 8), Range(9, 32),
                                                           Range(33, 8192)]
    assert ranges.ranges_from_split_points([32, 8, 8192]) == [Range(1, 8), Range(9, 32),
                                                              Range(33, 8192)]


def test_vllm_compile_sizes_and_dispatch_precedence() -> None:
    cfg = _resolved(optimization_level=0, compile_ranges_split_points=[8, 32],
                    compile_sizes=[16, 64, 128])
    rngs = ranges.compile_ranges(cfg, CPU, 8192, 2, 2)
    assert rngs == [Range(1, 8), Range(9, 32), Range(33, 8192), Range(16, 16), Range(64, 64),
                    Range(128, 128)]
    batches = [1, 4, 16, 24, 48, 64, 8192]
    hit = [ranges.range_for(n, rngs) for n in batches]
    assert hit == [Range(1, 8), Range(1, 8), Range(16, 16), Range(9, 32), Range(33, 8192),
                   Range(64, 64), Range(33, 8192)]
    assert len(set(hit)) == 5  # vLLM's test: 5 compiles for these batches


def test_dispatch_above_the_max_goes_to_the_fallback_range() -> None:
    rngs = ranges.compile_ranges(_resolved(optimization_level=0), CPU, 8192, 2, 2)
    assert rngs == [Range(1, 8192)]
    assert ranges.range_for(8193, rngs) == Range(8193, UNBOUNDED)
    assert ranges.range_for(10**6, rngs) == ranges.range_for(8193, rngs)
    with pytest.raises(ValueError, match="at least 1"):
        ranges.range_for(0, rngs)


def test_compile_size_above_the_max_is_exact_and_others_fall_back() -> None:
    cfg = _resolved(optimization_level=0, max_num_batched_tokens=64, compile_sizes=[128])
    rngs = ranges.compile_ranges(cfg, CPU, None, None, None)
    assert rngs == [Range(1, 64), Range(128, 128)]
    assert ranges.range_for(128, rngs) == Range(128, 128)
    assert ranges.range_for(100, rngs) == Range(65, UNBOUNDED)


@pytest.mark.parametrize(
    ("platform", "hidden", "tp", "itemsize", "expected"),
    [
        (SM90, 8192, 2, 2, 1024),
        (SM90, 8192, 1, 2, 512),
        (SM90, 16384, 1, 2, 256),
        (SM90, 8192, 4, 2, 2048),
        (SM90, 8192, 2, 4, 512),
        (SM90, 8191, 2, 2, None),
        (SM80, 8192, 2, 2, None),
        (SM100, 8192, 2, 2, None),
        (CPU, 8192, 2, 2, None),
        (Platform("rocm", arch="gfx942"), 8192, 2, 2, None),
        (SM90, None, 2, 2, None),
    ],
)
def test_vllm_sp_threshold(platform: Platform, hidden: int | None, tp: int, itemsize: int,
                           expected: int | None) -> None:
    assert thresholds.sp_threshold(platform, hidden, tp, itemsize) == expected


@pytest.mark.parametrize(
    ("platform", "tp", "mb", "tokens_h8192_bf16"),
    [(SM90, 2, 64, 4096), (SM90, 4, 2, 128), (SM90, 8, 0.5, 32), (SM100, 2, 64, 4096),
     (SM100, 4, 32, 2048), (SM100, 8, 1, 64)],
)
def test_flashinfer_caps(platform: Platform, tp: int, mb: float, tokens_h8192_bf16: int) -> None:
    assert thresholds.fi_allreduce_max_size_mb(platform, tp) == mb
    assert thresholds.fi_allreduce_max_tokens(mb, 8192, 2) == tokens_h8192_bf16


@pytest.mark.parametrize(("platform", "tp"), [(SM90, 16), (SM90, 1), (SM80, 2), (CPU, 2),
                                              (SM90, None)])
def test_no_flashinfer_cap(platform: Platform, tp: int | None) -> None:
    assert thresholds.fi_allreduce_max_size_mb(platform, tp) is None


# ---------------------------------------------------------------------------- split points


def test_split_points_from_every_threshold() -> None:
    cfg = _resolved(SM90, pass_config={"enable_sp": True, "fuse_rope_kvcache": True},
                    compile_ranges_split_points=[1, 100, 8192, 100])
    pc = cfg.pass_config
    assert pc.fuse_allreduce_rms and pc.enable_sp and pc.sp_min_token_num == 1024
    # AR cap 64 MB / (8192 * 2) = 4096; SP 1024 - 1; RoPE+KV 256; the user's 1 and 100 (a
    # point past max_num_batched_tokens is refused: test_config)
    assert ranges.split_points(cfg, SM90, 8192, 2, 2) == [1, 100, 256, 1023, 4096, 8192]
    assert ranges.compile_ranges(cfg, SM90, 8192, 2, 2) == [
        Range(1, 1), Range(2, 100), Range(101, 256), Range(257, 1023), Range(1024, 4096),
        Range(4097, 8192)]


def test_thresholds_at_or_above_the_max_add_no_split() -> None:
    cfg = _resolved(SM90, max_num_batched_tokens=512, pass_config={
        "sp_min_token_num": 512, "enable_sp": True, "fuse_rope_kvcache": False})
    # AR cap 4096 >= 512, SP 511 < 512 stays
    assert ranges.split_points(cfg, SM90, 8192, 2, 2) == [511, 512]


def test_split_points_need_a_resolved_config() -> None:
    with pytest.raises(ValueError, match="resolved config"):
        ranges.split_points(CompilationConfig(), CPU, 8192, 2, 2)


def test_cpu_allreduce_reference_has_no_cap_and_no_split() -> None:
    cfg = _resolved(CPU, pass_config={"fuse_allreduce_rms": True})
    assert cfg.pass_config.fuse_allreduce_rms and cfg.pass_config.fi_allreduce_fusion_max_size_mb \
        is None
    assert ranges.split_points(cfg, CPU, 8192, 2, 2) == [8192]
    assert ranges.applies("fuse-allreduce-rms", Range(8193, UNBOUNDED), cfg, 8192, 2, 2) == (
        True, "")


# ---------------------------------------------------------------------------- applicability


def test_allreduce_fusion_applies_up_to_the_cap() -> None:
    cfg = _resolved(SM90)
    assert ranges.applies("fuse-allreduce-rms", Range(1, 4096), cfg, 8192, 2, 2) == (True, "")
    ok, why = ranges.applies("fuse-allreduce-rms", Range(4097, 8192), cfg, 8192, 2, 2)
    assert not ok and "up to 4096 tokens" in why and "[4097, 8192]" in why
    ok, _ = ranges.applies("fuse-allreduce-rms", Range(8193, UNBOUNDED), cfg, 8192, 2, 2)
    assert not ok
    # the cap is clipped to max_num_batched_tokens, as vLLM does
    small = _resolved(SM90, max_num_batched_tokens=1000)
    assert not ranges.applies("fuse-allreduce-rms", Range(1001, 1001), small, 8192, 2, 2)[0]


def test_sp_applies_from_the_threshold_on_every_range_of_a_full_graph() -> None:
    cfg = _resolved(SM90, pass_config={"enable_sp": True})
    ok, why = ranges.applies("enable-sp", Range(1, 1023), cfg, 8192, 2, 2)
    assert not ok and "sp_min_token_num = 1024" in why
    # A full graph: several sizes, or one TP does not divide, are padded to a multiple of TP.
    for rng in (Range(1024, 4096), Range(2048, 2048), Range(1025, 1025),
                Range(8193, UNBOUNDED)):
        assert ranges.applies("enable-sp", rng, cfg, 8192, 2, 2) == (True, "")
        assert ranges.applies("fuse-gemm-comms", rng, cfg, 8192, 2, 2) == (True, "")


def test_sp_in_a_piecewise_graph_keeps_vllms_rule() -> None:
    cfg = _resolved(SM90, pass_config={"enable_sp": True}, piecewise=True)
    for name in ("enable-sp", "fuse-gemm-comms"):
        ok, why = ranges.applies(name, Range(1024, 4096), cfg, 8192, 2, 2)
        assert not ok and "piecewise graph" in why and "single size divisible by TP" in why \
            and "[1024, 4096] holds several sizes" in why
        assert ranges.applies(name, Range(2048, 2048), cfg, 8192, 2, 2) == (True, "")
        ok, why = ranges.applies(name, Range(1025, 1025), cfg, 8192, 2, 2)
        assert not ok and "1025 is not divisible by TP 2" in why
        assert ranges.applies(name, Range(1024, 4096), cfg, 8192, None, 2) == (True, "")


def test_rope_kvcache_applies_up_to_its_max() -> None:
    cfg = _resolved(SM90, pass_config={"fuse_rope_kvcache": True,
                                       "rope_kvcache_fusion_max_token_num": 128})
    assert ranges.applies("fuse-rope-kvcache", Range(1, 128), cfg) == (True, "")
    ok, why = ranges.applies("fuse-rope-kvcache", Range(129, 8192), cfg)
    assert not ok and "128" in why


@pytest.mark.parametrize("name", [f.name for f in FUSIONS if f.range_rule.kind == "all"])
def test_other_passes_apply_everywhere(name: str) -> None:
    cfg = _resolved(SM90)
    for rng in (Range(1, 1), Range(1, 8192), Range(8193, UNBOUNDED)):
        assert ranges.applies(name, rng, cfg, 8192, 2, 2) == (True, "")


def test_plan_lists_enabled_passes_in_pipeline_order() -> None:
    cfg = _resolved(SM90)
    names = [e["name"] for e in ranges.plan(cfg, Range(1, 256), 8192, 2, 2)]
    on = [f.name for f in FUSIONS if getattr(cfg.pass_config, f.flag)]
    assert names == on and names[:5] == ["eliminate-noops", "fuse-allreduce-rms",
                                         "fuse-norm-quant", "fuse-act-quant", "fuse-act-padding"]
    entries = ranges.plan(cfg, Range(1, 256), 8192, 2, 2)
    assert all(e["runs"] and e["reason"] == "" for e in entries)
    runs = {e["name"]: e["runs"] for e in ranges.plan(cfg, Range(4097, 8192), 8192, 2, 2)}
    # beyond the FlashInfer cap (4096 tokens) and rope_kvcache_fusion_max_token_num (256)
    assert runs == {**dict.fromkeys(on, True), "fuse-allreduce-rms": False,
                    "fuse-rope-kvcache": False}
