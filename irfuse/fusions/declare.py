"""What a fusion is, declared once: the vocabulary of `irfuse.fusions`.

A `Fusion` names its pass and `PassConfig` flag, its patterns, the fused ops it produces with
their lowerings to kernel calls, its `Kernel`s (each an `irfuse::` custom op with schema, torch
reference, CUDA implementation, fake and measured choice per platform), its compile-range rule,
whether kernel choice depends on size, and its support-matrix row. The pass registry, the
support matrix, custom-op registration, kernel choice and the emit lowerings are all read off
these declarations.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.fusions import candidates
from irfuse.platform import Platform
from irfuse.raising.driver import AnchorPattern, run_patterns
from irfuse.raising.match import NoMatch

if TYPE_CHECKING:
    from xdsl.ir import Operation, SSAValue

    from irfuse.dialects import kernel

IMPLS = ("reference", "triton", "flashinfer", "symm_mem", "inductor")
"""Kernel implementations: the torch reference (always right, never fast), irfuse's Triton
kernel, FlashInfer's kernel, `symm_mem` (a collective through torch's symmetric memory, then
irfuse's Triton kernel), or `inductor`: the pass leaves the pattern to Inductor, whose code
was measured faster there."""

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


@dataclass(frozen=True)
class Choice:
    """An implementation (one of IMPLS) and the measurement or rule that justifies it."""

    impl: str
    reason: str

    def __post_init__(self) -> None:
        if self.impl not in IMPLS:
            raise ValueError(f"irfuse: unknown implementation {self.impl!r}")


Steps = tuple[tuple[int, Choice], ...]
"""A choice per size step: ((from_tokens, choice), ...), the first from 1 token."""

CPU_REFERENCE = Choice("reference", "the CPU runs the torch reference (Triton needs a GPU)")
NOT_MEASURED = Choice("triton", "not measured yet")
NOT_MEASURED_ROCM = Choice("triton", "not measured yet (Triton emits float8_e4m3fnuz on ROCm)")
DEFAULT_CHOICES: Mapping[str, Steps] = {
    "cpu": ((1, CPU_REFERENCE),), "cuda": ((1, NOT_MEASURED),), "rocm": ((1, NOT_MEASURED_ROCM),),
}
"""What every kernel runs where its declaration records no measurement."""


@dataclass(frozen=True)
class Kernel:
    """One `irfuse::` custom op. `choices` adds measured entries to DEFAULT_CHOICES, keyed by
    platform (`cuda:sm90`) or family (`cuda`, `rocm`); the lookup tries the exact platform first.
    `single_tensor`: it returns one tensor (else a tuple or list, unpacked by emit).
    `flashinfer`: its CUDA implementation has a FlashInfer launcher (the choice may select it).
    `examples(shape)`: argument tuples for an input x of `shape`, each a call of the op that the
    custom-op tests run through `torch.library.opcheck` and compare against the fake."""

    name: str
    schema: str
    reference: Callable
    cuda: Callable
    fake: Callable
    choices: Mapping[str, Steps] = field(default_factory=dict, hash=False)
    single_tensor: bool = False
    flashinfer: bool = False
    examples: Callable[[tuple[int, ...]], Sequence[tuple]] | None = None

    def steps(self, platform: str) -> Steps | None:
        table = {**DEFAULT_CHOICES, **self.choices}
        return table.get(platform) or table.get(platform.split(":", 1)[0])

    def choose(self, platform: str, num_tokens: int | None = None) -> Choice:
        """The implementation on `platform`; where it splits by size, `num_tokens` (the top of
        the compile range) picks the step, and without it the choice for few tokens is given,
        its reason naming the split."""
        steps = self.steps(platform)
        if steps is None:
            return Choice("reference", f"platform {platform!r} has no kernels; the reference runs")
        if num_tokens is None:
            first = steps[0][1]
            if len(steps) == 1:
                return first
            split = "; ".join(f"from {t} tokens: {c.impl}" for t, c in steps[1:])
            return Choice(first.impl, f"{first.reason} [{split}]")
        chosen = steps[0][1]
        for min_tokens, choice in steps:
            if num_tokens >= min_tokens:
                chosen = choice
        return chosen


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

RANGE_RULES: dict[str, str] = {
    "all": "every range",
    "below-fi-cap": "ranges up to the FlashInfer size cap "
    "(fi_allreduce_fusion_max_size_mb / (hidden x itemsize) tokens)",
    "from-sp-min": "single-size ranges from sp_min_token_num up whose size TP divides (the "
    "token dim is split TP ways, and irfuse cannot pad the caller's tokens)",
    "up-to-rope-kvcache-max": "ranges up to rope_kvcache_fusion_max_token_num tokens",
}
"""Compile-range rules a fusion can declare (`irfuse.ranges.applies` implements them)."""

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


@functools.cache
def _class_of(platform: str) -> str | None:
    return platform_class(Platform.parse(platform))


# --- the declaration -------------------------------------------------------------------------

Lowering = Callable[["Operation", str], "kernel.CallOp | InPlace"]
"""Builds the kernel call for a fused op on a platform."""


@dataclass(frozen=True)
class InPlace:
    """A lowering whose kernel writes some of the fused op's operands in place (a KV cache):
    `call` returns the op's other results; `results` are the values that replace each result of
    the op, in order (a call result, or the operand the kernel wrote)."""

    call: kernel.CallOp
    results: tuple[SSAValue, ...]


@dataclass(frozen=True)
class Fusion:
    """One pass of the support matrix: a fusion (one `PassConfig` flag) or a utility rewrite.

    `quant`: `required` (it fuses a quant: a model with another scheme or none has nothing to
    fuse), `optional` (`schemes` are the quants it also folds in) or `independent`. `needs_tp`:
    it rewrites tensor-parallel collectives. `patterns` empty: not implemented yet (the row
    still drives the config and says so in reports). `size_aware`: kernel choice depends on the
    token count, so each compile range's size class is passed as `max_tokens`.
    """

    name: str
    flag: str
    kind: Literal["fusion", "utility"]
    fuses: str
    quant: Quant
    schemes: tuple[str, ...]
    range_rule: str
    platforms: Mapping[str, Support] = field(hash=False)
    unsupported: str = ALL_PLATFORMS_UNSUPPORTED  # why not on the classes it does not list
    needs_tp: bool = False
    vllm_pass: str = ""
    note: str = ""
    patterns: tuple[AnchorPattern, ...] = ()
    lowerings: Mapping[str, Lowering] = field(default_factory=dict, hash=False)
    kernels: tuple[Kernel, ...] = ()
    size_aware: bool = False

    def __post_init__(self) -> None:
        if self.range_rule not in RANGE_RULES:
            raise ValueError(f"{self.name}: unknown range rule {self.range_rule!r}")

    @property
    def implemented(self) -> bool:
        return bool(self.patterns)

    @functools.cached_property
    def kernel_by_name(self) -> dict[str, Kernel]:
        return {k.name: k for k in self.kernels}

    def gate(self, kernel_name: str, platform: str, max_tokens: int | None) -> None:
        """Raise NoMatch where `kernel_name` is left to Inductor on `platform` at the sizes the
        graph is compiled for (the driver's kernel gate)."""
        choice = self.kernel_by_name[kernel_name].choose(platform, max_tokens)
        if choice.impl == "inductor":
            where = platform if max_tokens is None else f"{platform} at {max_tokens}+ tokens"
            raise NoMatch(f"left to Inductor on {where}: {choice.reason}")

    def schemes_on(self, platform: str) -> tuple[str, ...]:
        """The quant schemes this fusion folds in on `platform` (its own, or the narrower list
        of the platform's support entry)."""
        sup = self.platforms.get(_class_of(platform) or "")
        return self.schemes if sup is None or sup.schemes is None else sup.schemes

    def scheme_gate(self, scheme: str, platform: str) -> None:
        """Raise NoMatch where this fusion does not fold a quant of `scheme` (a
        `support_matrix.SCHEMES` name) into its fused op on `platform`: each site is judged by
        its own scheme, whatever the graph's other quants are (the driver's scheme gate)."""
        allowed = self.schemes_on(platform)
        if self.quant != "independent" and scheme not in allowed:
            raise NoMatch(f"{self.name} does not fuse {scheme} on {platform}; it fuses "
                          f"{', '.join(allowed)}")

    @functools.cached_property
    def pass_class(self) -> type[ModulePass]:
        """The fusion's ModulePass: its patterns through the driver, gated by its kernels."""
        return _fusion_pass(self)


def _fusion_pass(fusion: Fusion) -> type[ModulePass]:
    gate = fusion.gate if fusion.kernels else None

    @dataclass(frozen=True)
    class FusionPass(ModulePass):
        name: ClassVar[str] = fusion.name
        declaration: ClassVar[Fusion] = fusion

        max_tokens: int | None = None  # the compile range's size class (size-aware fusions)

        def apply(self, ctx: Context, op: ModuleOp) -> None:
            run_patterns(op, fusion.patterns, gate=gate, max_tokens=self.max_tokens,
                         scheme_gate=fusion.scheme_gate)
            candidates.account(fusion.name, op)  # no candidate left unexplained

    FusionPass.__name__ = FusionPass.__qualname__ = "".join(
        w.capitalize() for w in fusion.name.split("-"))
    FusionPass.__doc__ = f"{fusion.name}: {fusion.fuses}."
    return FusionPass


def kernels_of(fusions: Sequence[Fusion]) -> tuple[Kernel, ...]:
    return tuple(k for f in fusions for k in f.kernels)
