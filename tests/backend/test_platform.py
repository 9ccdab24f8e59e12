"""Platform: text form and parsing, validation, detection (mocked GPUs on the CPU machine)."""

from __future__ import annotations

import types

import pytest
import torch

from irfuse.platform import Platform, detect


@pytest.mark.parametrize(
    ("platform", "text"),
    [
        (Platform("cpu"), "cpu"),
        (Platform("cuda", capability=80), "cuda:sm80"),
        (Platform("cuda", capability=90), "cuda:sm90"),
        (Platform("cuda", capability=100), "cuda:sm100"),
        (Platform("cuda", capability=120), "cuda:sm120"),
        (Platform("rocm"), "rocm"),
        (Platform("rocm", arch="gfx942"), "rocm:gfx942"),
    ],
)
def test_str_and_parse_are_inverse(platform: Platform, text: str) -> None:
    assert str(platform) == text
    assert Platform.parse(text) == platform


@pytest.mark.parametrize(
    ("text", "capability"),
    [("cuda:sm_90", 90), ("cuda:sm90a", 90), ("CUDA:SM100", 100), (" cuda:sm89 ", 89)],
)
def test_parse_accepts_common_spellings(text: str, capability: int) -> None:
    assert Platform.parse(text) == Platform("cuda", capability=capability)


@pytest.mark.parametrize(
    "text", ["cuda", "nvidia", "cuda:90", "cuda:sm", "rocm:mi300", "", "cpu:0"])
def test_parse_rejects_bad_strings_naming_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"bad platform .*expected 'cpu', 'cuda:smNN'") as e:
        Platform.parse(text)
    assert repr(text) in str(e.value)


def test_parse_of_bare_cuda_says_capability_is_needed() -> None:
    with pytest.raises(ValueError, match="needs its capability"):
        Platform.parse("cuda")


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(TypeError, match="must be a string"):
        Platform.parse(90)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "tpu"}, "not one of cpu, cuda, rocm"),
        ({"kind": "cuda"}, "needs an integer capability"),
        ({"kind": "cuda", "capability": 5}, "out of range"),
        ({"kind": "cpu", "capability": 90}, "only CUDA platforms have a capability"),
        ({"kind": "cuda", "capability": 90, "arch": "gfx942"}, "only ROCm platforms have an arch"),
        ({"kind": "rocm", "arch": "mi300"}, "not a gfx name"),
    ],
)
def test_invalid_platforms_are_rejected(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Platform(**kwargs)


def test_kind_predicates() -> None:
    cpu, cuda, rocm = Platform("cpu"), Platform("cuda", capability=90), Platform("rocm")

    def flags(p: Platform) -> tuple[bool, ...]:
        return (p.is_cpu, p.is_cuda, p.is_rocm, p.is_cuda_alike)

    assert flags(cpu) == (True, False, False, False)
    assert flags(cuda) == (False, True, False, True)
    assert flags(rocm) == (False, False, True, True)


def test_platform_is_hashable_and_frozen() -> None:
    p = Platform("cuda", capability=90)
    assert {p: 1}[Platform.parse("cuda:sm90")] == 1
    with pytest.raises(AttributeError):
        p.capability = 100  # type: ignore[misc]


def test_detect_cpu_device() -> None:
    assert detect("cpu") == Platform("cpu")
    assert detect(torch.device("cpu")) == Platform("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the GPU-less default")
def test_detect_without_gpu_is_cpu() -> None:
    assert detect() == Platform("cpu")
    with pytest.raises(ValueError, match="sees no CUDA/ROCm GPU"):
        detect("cuda:0")


def test_detect_rejects_other_device_types() -> None:
    with pytest.raises(ValueError, match="not 'meta'"):
        detect("meta")


def _fake_gpus(monkeypatch: pytest.MonkeyPatch, *, hip: str | None, caps: dict[int, tuple]) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: caps[i])
    monkeypatch.setattr(
        torch.cuda, "get_device_properties",
        lambda i=0: types.SimpleNamespace(gcnArchName="gfx942:sramecc+:xnack-"))
    monkeypatch.setattr(torch.version, "hip", hip)


def test_detect_cuda_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpus(monkeypatch, hip=None, caps={0: (9, 0), 1: (10, 0)})
    assert detect() == Platform("cuda", capability=90)
    assert detect("cuda:1") == Platform("cuda", capability=100)
    assert detect(1) == Platform("cuda", capability=100)
    assert str(detect("cuda")) == "cuda:sm90"


def test_detect_rocm_arch(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpus(monkeypatch, hip="6.2.0", caps={0: (9, 4)})
    assert detect() == Platform("rocm", arch="gfx942")
    assert str(detect("cuda:0")) == "rocm:gfx942"


@pytest.mark.gpu
def test_detect_real_gpu() -> None:
    p = detect()
    if torch.version.hip:
        assert p.is_rocm
    else:
        major, minor = torch.cuda.get_device_capability()
        assert p == Platform("cuda", capability=major * 10 + minor)
