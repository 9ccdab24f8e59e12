"""The platform a graph is compiled for: CPU, CUDA with its compute capability, or ROCm.

The platform decides which fusions can apply and which kernel serves each (see
`irfuse.support_matrix`), and some thresholds depend on it (see `irfuse.ranges`). It has a
short text form used by the CLI, the `platform` config override, dumps and reports:

    cpu            the CPU (torch reference kernels)
    cuda:sm90      CUDA, compute capability 9.0 (capability is major * 10 + minor)
    cuda:sm100     CUDA, compute capability 10.0
    rocm           ROCm, architecture unknown
    rocm:gfx942    ROCm on a gfx942 (MI300)

`detect()` reads the running machine through torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import torch

PlatformKind = Literal["cpu", "cuda", "rocm"]
KINDS: tuple[str, ...] = ("cpu", "cuda", "rocm")

_CUDA_RE = re.compile(r"^cuda:sm_?(\d{2,3})[a-z]?$")
_ROCM_RE = re.compile(r"^rocm(?::(gfx[0-9a-f]+))?$")
CUDA_CAPABILITIES: tuple[int, ...] = (
    50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121)
"""The compute capabilities NVIDIA has shipped, which `Platform.parse` accepts (a typo such as
`cuda:sm999` is refused). `detect()` takes whatever the GPU reports, so a newer GPU still works."""

ROCM_ARCHS: tuple[str, ...] = (
    "gfx900", "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950",
    "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151", "gfx1200", "gfx1201")
"""The ROCm architectures `Platform.parse` accepts (a typo such as `rocm:gfx000` is refused);
`detect()` takes whatever the GPU reports."""

_FORMS = ("'cpu', 'cuda:smNN' (e.g. cuda:sm90, cuda:sm100), 'rocm' or 'rocm:gfxNNN' "
          "(e.g. rocm:gfx942)")


@dataclass(frozen=True)
class Platform:
    """A compile target.

    `capability` is the CUDA compute capability as one integer (major * 10 + minor: 90 for
    sm90, 100 for sm100); it is required for CUDA and absent otherwise. `arch` is the ROCm
    architecture name (`gfx942`), optional for ROCm and absent otherwise.
    """

    kind: PlatformKind
    capability: int | None = None
    arch: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"platform kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind == "cuda":
            if not isinstance(self.capability, int) or isinstance(self.capability, bool):
                raise ValueError(
                    f"a CUDA platform needs an integer capability (90 for sm90), "
                    f"got {self.capability!r}"
                )
            if not 10 <= self.capability <= 999:
                raise ValueError(f"CUDA capability {self.capability} is out of range (10..999)")
        elif self.capability is not None:
            raise ValueError(f"only CUDA platforms have a capability, not {self.kind!r}")
        if self.kind == "rocm":
            if self.arch is not None and not re.fullmatch(r"gfx[0-9a-f]+", self.arch):
                raise ValueError(f"ROCm arch {self.arch!r} is not a gfx name like 'gfx942'")
        elif self.arch is not None:
            raise ValueError(f"only ROCm platforms have an arch, not {self.kind!r}")

    @property
    def is_cpu(self) -> bool:
        return self.kind == "cpu"

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def is_rocm(self) -> bool:
        return self.kind == "rocm"

    @property
    def is_cuda_alike(self) -> bool:
        """CUDA or ROCm: a GPU that runs Triton kernels."""
        return self.kind in ("cuda", "rocm")

    def __str__(self) -> str:
        if self.kind == "cuda":
            return f"cuda:sm{self.capability}"
        if self.kind == "rocm" and self.arch is not None:
            return f"rocm:{self.arch}"
        return self.kind

    @classmethod
    def parse(cls, text: str) -> Platform:
        """The inverse of `str()`; also accepts `cuda:sm_90` and a trailing arch letter
        (`cuda:sm90a` is sm90); a CUDA capability must be one of
        `CUDA_CAPABILITIES`, a ROCm architecture one of `ROCM_ARCHS`. Raises ValueError naming the accepted forms (TypeError for a
        non-string)."""
        if not isinstance(text, str):
            raise TypeError(f"platform must be a string like {_FORMS}; got {text!r}")
        norm = text.strip().lower()
        if norm == "cpu":
            return cls("cpu")
        m = _CUDA_RE.match(norm)
        if m:
            capability = int(m.group(1))
            if capability not in CUDA_CAPABILITIES:
                known = ", ".join(f"sm{c}" for c in CUDA_CAPABILITIES)
                raise ValueError(f"bad platform {text!r}: sm{capability} is not a CUDA compute "
                                 f"capability (known: {known}); expected {_FORMS}")
            return cls("cuda", capability=capability)
        m = _ROCM_RE.match(norm)
        if m:
            if m.group(1) is not None and m.group(1) not in ROCM_ARCHS:
                raise ValueError(f"bad platform {text!r}: {m.group(1)} is not a ROCm "
                                 f"architecture (known: {', '.join(ROCM_ARCHS)}); expected "
                                 f"{_FORMS}")
            return cls("rocm", arch=m.group(1))
        hint = " (a CUDA platform needs its capability)" if norm == "cuda" else ""
        raise ValueError(f"bad platform {text!r}{hint}: expected {_FORMS}")


def detect(device: Any = None) -> Platform:
    """The platform of `device` (a torch.device, a string like 'cuda:1', an index, or None).

    None means the current CUDA/ROCm device when one is available, else the CPU. A ROCm
    build of torch reports its GPUs through `torch.cuda` and sets `torch.version.hip`.
    """
    if device is None:
        if not torch.cuda.is_available():
            return Platform("cpu")
        dev = torch.device("cuda", torch.cuda.current_device())
    elif isinstance(device, int):
        dev = torch.device("cuda", device)
    else:
        dev = torch.device(device)
    if dev.type == "cpu":
        return Platform("cpu")
    if dev.type != "cuda":
        raise ValueError(f"irfuse compiles for cpu, cuda or rocm devices, not {dev.type!r}")
    if not torch.cuda.is_available():
        raise ValueError(f"device {dev} was asked for, but torch sees no CUDA/ROCm GPU")
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    if torch.version.hip:
        name = getattr(torch.cuda.get_device_properties(index), "gcnArchName", "") or ""
        arch = name.split(":")[0] or None  # 'gfx942:sramecc+:xnack-' -> 'gfx942'
        return Platform("rocm", arch=arch)
    major, minor = torch.cuda.get_device_capability(index)
    return Platform("cuda", capability=major * 10 + minor)
