"""The support matrix: every irfuse pass, where it can apply, and when it is on by default.

Its rows are the fusions' declarations (`irfuse.fusions`, one file each); this module answers
the questions asked of them. Per pass, a row says which `PassConfig` flag turns it on and what
it fuses; on which platform classes it can run and which kernel backend serves it there
(`irfuse.fusions.declare`: `PLATFORM_CLASSES`, `Support`); the lowest optimization level that
turns it on by default on each platform class (`irfuse.config.resolve` reads it: this is where
irfuse's level defaults differ from vLLM's, and nowhere else); which quantization schemes it
fuses; and its compile-range rule (`irfuse.ranges.applies`).

`irfuse passes` prints it, and docs/configuration.md shows the same table (a test checks that
they agree). Rows are in pipeline order (vLLM's pass order). Why a default level is what it is
(vLLM v0.17 as the baseline): each declaration's `note`, the table's notes, and
docs/configuration.md, Optimization levels.
"""

from __future__ import annotations

from irfuse.fusions import FUSIONS
from irfuse.fusions.declare import SCHEMES, Fusion, Support, platform_class
from irfuse.platform import Platform

_PASSES: tuple[Fusion, ...] = FUSIONS
_BY_NAME: dict[str, Fusion] = {p.name: p for p in _PASSES}
_BY_FLAG: dict[str, Fusion] = {p.flag: p for p in _PASSES}

FUSION_FLAGS: tuple[str, ...] = tuple(p.flag for p in _PASSES if p.kind == "fusion")
FLAGS: tuple[str, ...] = tuple(p.flag for p in _PASSES)


def passes() -> tuple[Fusion, ...]:
    """Every pass, fusions and utilities, in pipeline order."""
    return _PASSES


def info(name: str) -> Fusion:
    """The row of a pass, by its name (kebab case) or its flag (snake case)."""
    row = _BY_NAME.get(name) or _BY_FLAG.get(name)
    if row is None:
        raise ValueError(f"unknown pass {name!r}; known passes: {', '.join(_BY_NAME)}")
    return row


def support(name: str, platform: Platform) -> Support | None:
    """How the pass runs on this platform, or None where it cannot."""
    cls = platform_class(platform)
    return None if cls is None else info(name).platforms.get(cls)


def default_level(name: str, platform: Platform) -> int | None:
    """The lowest optimization level that turns the pass on by default on this platform."""
    sup = support(name, platform)
    return None if sup is None else sup.default_level


def scheme_supported(scheme: str, platform: Platform) -> tuple[bool, str]:
    """Whether the platform's hardware has what a quantization scheme needs."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown quant scheme {scheme!r}; known schemes: {', '.join(SCHEMES)}")
    s = SCHEMES[scheme]
    cuda_min = s.cuda_min_capability
    if platform.is_cuda and cuda_min is not None and (platform.capability or 0) < cuda_min:
        return False, (f"{scheme} needs CUDA sm{cuda_min} or newer (FP8 conversions), "
                       f"not {platform}")
    if platform.is_rocm and s.rocm_archs is not None:
        if not s.rocm_archs:
            return False, f"{scheme} is not supported on ROCm by irfuse's kernels"
        if platform.arch is not None and platform.arch not in s.rocm_archs:
            return False, f"{scheme} needs one of {', '.join(s.rocm_archs)}, not {platform.arch}"
    return True, ""


def can_apply(name: str, platform: Platform, scheme: str | None = None) -> tuple[bool, str]:
    """Whether the pass can apply on this platform to a model quantized with `scheme`
    (None: unknown, not checked). Returns (False, why) when it cannot; (True, "") when it can;
    (True, caveat) when it applies but leaves the model's quant out of the fusion."""
    row = info(name)
    cls = platform_class(platform)
    if cls is None:
        return False, f"{row.name}: irfuse supports CUDA from sm80; {platform} is older"
    sup = row.platforms.get(cls)
    if sup is None:
        where = ", ".join(row.platforms)
        return False, f"{row.unsupported} (it runs on {where}; this is {platform})"
    if scheme is None or row.quant == "independent":
        return True, ""
    hw_ok, hw_why = scheme_supported(scheme, platform)
    allowed = sup.schemes if sup.schemes is not None else row.schemes
    if row.quant == "required":
        if scheme == "none":
            return False, (f"{row.name} fuses a quantization ({', '.join(allowed)}); "
                           f"the model is not quantized")
        if scheme not in allowed:
            return False, (f"{row.name} does not fuse {scheme} on {platform}; "
                           f"it fuses {', '.join(allowed)}")
        if not hw_ok:
            return False, hw_why
        return True, ""
    if scheme != "none" and (scheme not in allowed or not hw_ok):
        return True, f"{row.name} applies but leaves the {scheme} quant unfused on {platform}"
    return True, ""
