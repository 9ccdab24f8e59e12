"""What a fusion is, declared once: the vocabulary of `irfuse.fusions`.

A `Fusion` is light metadata, one `<flag>/__init__.py` each: its pass and `PassConfig` flag
with the flag's doc line and its threshold fields (`Threshold`), what it fuses, its support-
matrix row (platforms, schemes, default levels), its compile-range rule (`RangeRule`), the flag
it implies and the names of its patterns. The `PassConfig`, the support matrix, the compile
ranges and the CLI's tables are read off these declarations alone, so reading them imports
neither xDSL nor torch's compiler nor Triton.

What a fusion runs is in two modules of its folder, loaded here on first use (`Fusion.load`):
`pattern.py` (its rewrite patterns) and, for a fusion with kernels, `ops.py` (its `irfuse::`
custom ops, declared from their typed references by `irfuse.fusions.kernel_decl.Kernel`, and
how its fused ops lower to them). The pass registry, custom-op registration, kernel choice and
select-kernels ask the declarations for these.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal

from irfuse.platform import Platform

PLATFORM_CLASSES: tuple[str, ...] = ("cpu", "cuda:sm80", "cuda:sm90", "cuda:sm100", "rocm")
"""Support-matrix columns: capability 80-89 (Ampere/Ada), 90-99 (Hopper), 100 and up."""


def platform_class(platform: Platform) -> str | None:
    """The support-matrix column of a platform; None for CUDA older than sm80."""
    if platform.kind != "cuda":
        return platform.kind
    cap = platform.capability or 0
    if cap >= 100:
        return "cuda:sm100"
    if cap >= 90:
        return "cuda:sm90"
    if cap >= 80:
        return "cuda:sm80"
    return None


@functools.cache
def _class_of(platform: str) -> str | None:
    return platform_class(Platform.parse(platform))


# --- the support matrix's vocabulary ---------------------------------------------------------


@dataclass(frozen=True)
class Scheme:
    """A quantization scheme and the hardware it needs."""

    name: str
    description: str
    cuda_min_capability: int | None = None  # None: any CUDA irfuse supports
    rocm_archs: tuple[str, ...] | None = None  # None: any ROCm; (): not on ROCm


_FP8_ROCM = ("gfx942", "gfx950")
SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme("none", "no quantization (bf16/fp16/fp32 activations)"),
        Scheme("fp8-static-tensor", "FP8 static per-tensor scale", 89, _FP8_ROCM),
        Scheme("fp8-dynamic-token", "FP8 dynamic per-token scales", 89, _FP8_ROCM),
        Scheme("fp8-dynamic-tensor", "FP8 dynamic per-tensor scale", 89, _FP8_ROCM),
        Scheme("fp8-group-128", "FP8 dynamic per-group scales, group 128", 89, _FP8_ROCM),
        Scheme("fp8-group-64", "FP8 dynamic per-group scales, group 64", 89, _FP8_ROCM),
        Scheme("nvfp4", "NVFP4: E2M1 values, FP8 scales per block of 16", 89, ()),
    )
}
"""A quantized model's linear-layer scheme, as `support_matrix.can_apply` takes it."""

FP8_SCHEMES = ("fp8-static-tensor", "fp8-dynamic-token", "fp8-group-128", "fp8-group-64")

Quant = Literal["required", "optional", "independent"]


@dataclass(frozen=True)
class Support:
    """How a pass runs on one platform class: its kernel backend (`reference`, `triton`,
    `flashinfer`, `torch` collectives, `symm_mem`, `aiter`, or `ir` for a rewrite that needs no
    kernel) and the lowest O level that turns it on by default (None: never)."""

    backend: str
    default_level: int | None
    schemes: tuple[str, ...] | None = None  # narrows the fusion's schemes here; None: all


ALL_PLATFORMS_UNSUPPORTED = "CUDA older than sm80 is not supported"


def everywhere(gpu_backend: str, level: int | None) -> dict[str, Support]:
    """The reference on the CPU and `gpu_backend` on every GPU class, on from `level`."""
    return {c: Support("reference" if c == "cpu" else gpu_backend, level)
            for c in PLATFORM_CLASSES}


# --- thresholds and compile ranges -----------------------------------------------------------

Fill = Callable[[Platform, int | None, int | None, int | None], float | int | None]
"""(platform, hidden, tp, itemsize) -> a threshold's value there, or None where it has none."""


@dataclass(frozen=True)
class Threshold:
    """A `PassConfig` field that tunes its fusion (vLLM's name, type, default and meaning).

    `fill`: the platform's value, which `irfuse.config.resolve` sets where the field is unset
    while the fusion is on (`source` names it in the notes: "FlashInfer's cap"); `required`:
    without a value the fusion cannot run, so it is turned off (else it runs unbounded)."""

    name: str
    type: type  # int or float
    doc: str
    default: int | float | None = None
    fill: Fill | None = None
    source: str = ""
    required: bool = False

    @property
    def nullable(self) -> bool:
        return self.default is None


RANGE_KINDS: dict[str, str] = {
    "all": "every range",
    "up-to": "ranges up to the threshold's token count",
    "up-to-mb": "ranges up to the threshold's size of activations (MB / (hidden x itemsize) "
    "tokens); every range without a size cap",
    "from": "ranges from the threshold's token count up; a token count TP does not divide is "
    "padded to a multiple of TP and sliced back (full graph); in a piecewise graph (vLLM's "
    "splitting_ops without Inductor partition) only single sizes TP divides, as vLLM",
}
"""The kinds of compile-range rule a fusion can declare (`irfuse.ranges` implements them)."""


@dataclass(frozen=True)
class RangeRule:
    """Which compile ranges a fusion runs in: a kind of RANGE_KINDS bounded by a `PassConfig`
    threshold field (its own or, for a fusion that works on another's output, that one's)."""

    kind: str = "all"
    threshold: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in RANGE_KINDS:
            raise ValueError(f"unknown range rule kind {self.kind!r}")
        if (self.kind == "all") != (self.threshold is None):
            raise ValueError(f"range rule {self.kind!r}: a threshold exactly when not 'all'")

    def __str__(self) -> str:
        return self.kind if self.threshold is None else f"{self.kind} {self.threshold}"


ALL_RANGES = RangeRule()


# --- the declaration -------------------------------------------------------------------------


@functools.cache
def _load(module: str) -> ModuleType | None:
    """`module`, imported on first use; None where the fusion has no such module. This is the
    one place a fusion's matching and kernels are imported: the declarations are read by the
    config, the CLI and the support matrix, which must not pay for xDSL, torch's compiler or
    Triton (tests/backend/test_config.py checks that `import irfuse.config` stays light)."""
    if importlib.util.find_spec(module) is None:
        return None
    return importlib.import_module(module)


@dataclass(frozen=True)
class Fusion:
    """One pass of the support matrix: a fusion (one `PassConfig` flag) or a utility rewrite.

    `doc`: the flag's line in PassConfig's docstring; `fuses`: the support matrix's text.
    `quant`: `required` (it fuses a quant: a model with another scheme or none has nothing to
    fuse), `optional` (`schemes` are the quants it also folds in) or `independent`. `needs_tp`:
    it rewrites tensor-parallel collectives. `implies`: the flag of a pass whose output it
    rewrites, which the config turns on with it. `noops_hide_matches`: reshapes that change
    nothing can hide its pattern (the config warns when the pass with `removes_noops` is off).
    `patterns`: the names of its pattern classes in `pattern.py` (at least one). `size_aware`: kernel choice depends on
    the token count, so each compile range's size class is passed as `max_tokens`.
    `candidate`: the name of the predicate in `irfuse.fusions.candidates` that says, apart from
    the patterns, which raised ops the pass could take (each left unfused needs a remark); None:
    no such accounting (a utility rewrite).
    """

    flag: str
    kind: Literal["fusion", "utility"]
    doc: str
    fuses: str
    quant: Quant
    schemes: tuple[str, ...]
    platforms: Mapping[str, Support] = field(hash=False)
    range_rule: RangeRule = ALL_RANGES
    thresholds: tuple[Threshold, ...] = ()
    unsupported: str = ALL_PLATFORMS_UNSUPPORTED  # why not on the classes it does not list
    needs_tp: bool = False
    implies: str | None = None
    noops_hide_matches: bool = False
    removes_noops: bool = False
    vllm_pass: str = ""
    note: str = ""
    patterns: tuple[str, ...] = ()
    size_aware: bool = False
    candidate: str | None = None

    @property
    def name(self) -> str:
        """The pass name: the flag in kebab case."""
        return self.flag.replace("_", "-")

    def __post_init__(self) -> None:
        if not self.patterns:
            raise ValueError(f"fusion {self.flag}: declares no pattern")

    def load(self, part: str) -> ModuleType | None:
        """This fusion's `pattern` or `ops` module (None where it has none)."""
        return _load(f"{__package__}.{self.flag}.{part}")

    @functools.cached_property
    def pattern_objects(self) -> tuple[Any, ...]:
        """Its rewrite patterns (`irfuse.raising.driver.AnchorPattern`s), in declared order."""
        module = self.load("pattern") if self.patterns else None
        return tuple(getattr(module, name)() for name in self.patterns)

    @functools.cached_property
    def kernels(self) -> tuple[Any, ...]:
        """Its `irfuse::` custom ops (`irfuse.fusions.kernel_decl.Kernel`s): `ops.KERNELS`."""
        ops = self.load("ops")
        return () if ops is None else tuple(ops.KERNELS)

    @functools.cached_property
    def kernel_by_name(self) -> dict[str, Any]:
        return {k.name: k for k in self.kernels}

    @functools.cached_property
    def lowerings(self) -> Mapping[str, Any]:
        """Fused op name -> how it lowers to one of its kernels (`ops.LOWERINGS`)."""
        ops = self.load("ops")
        return {} if ops is None else dict(ops.LOWERINGS)

    def schemes_on(self, platform: str) -> tuple[str, ...]:
        """The quant schemes this fusion folds in on `platform` (its own, or the narrower list
        of the platform's support entry)."""
        sup = self.platforms.get(_class_of(platform) or "")
        return self.schemes if sup is None or sup.schemes is None else sup.schemes

    @functools.cached_property
    def pass_class(self) -> type:
        """The fusion's xDSL ModulePass: its patterns through the driver, gated by its kernels."""
        builder = _load(f"{__package__}.fusion_pass")
        assert builder is not None
        return builder.fusion_pass(self)
