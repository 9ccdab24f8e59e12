"""The support matrix: every irfuse pass, where it can apply, and when it is on by default.

This is THE one table (data, not code) that decides, per pass:
- which `PassConfig` flag turns it on and what it fuses;
- on which platform classes it can run and which kernel backend serves it there;
- the lowest optimization level that turns it on by default on each platform class
  (`irfuse.config.resolve` reads it: this is where irfuse's level defaults differ from vLLM's,
  and nowhere else);
- which quantization schemes it fuses, and its compile-range rule (`irfuse.ranges.applies`).

`irfuse passes` prints it, and docs/configuration.md shows the same table (a test checks that
they agree). Rows are in pipeline order (vLLM's pass order). `implemented` says whether the
pass exists yet, so that reports can say "not implemented yet" honestly.

Platform classes: `cpu`; `cuda:sm80` (capability 80-89, Ampere/Ada); `cuda:sm90` (90-99,
Hopper); `cuda:sm100` (100 and up, Blackwell); `rocm`. CUDA older than sm80 has none.

Kernel backends: `reference` (irfuse's torch reference, the CPU path), `triton` (irfuse's
Triton kernels), `flashinfer`, `torch` (torch collectives), `symm_mem` (torch symmetric-memory
fused GEMM + collective ops), `aiter` (ROCm AITER kernels), `ir` (an IR-only rewrite that needs
no kernel).

Why the default levels are what they are (vLLM v0.17 as the baseline):
- norm/act + quant: vLLM turns them on at O1 only when its custom ops are on, because on
  NVIDIA Inductor's code beat its CUDA kernels. irfuse's kernels are meant to beat Inductor,
  and where they do not, the pass leaves the pattern to Inductor (`irfuse.emit.kernel_choice`),
  so irfuse turns them on at O1 everywhere. On the CPU the reference runs: the CPU is where
  irfuse's fusions are tested, so they are on there too.
- all-reduce + RMSNorm: O2 on sm90/sm100 with FlashInfer and TP in {2, 4, 8}, as in vLLM. On
  the CPU its reference is for tests only (opt-in).
- attention + quant, sequence parallelism, GEMM + collective (async TP): off at every level,
  as in vLLM (its O2 constants IS_QUANTIZED / IS_DENSE are False, vLLM #25689).
- QK-norm + RoPE: off at every level, as in vLLM (slower than Inductor on H100, vLLM #34391).
- RoPE + KV cache and act padding: vLLM turns them on at O1 only with ROCm AITER; irfuse has
  no AITER binding and has not measured its own kernel, so they are opt-in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from irfuse.platform import Platform

PLATFORM_CLASSES: tuple[str, ...] = ("cpu", "cuda:sm80", "cuda:sm90", "cuda:sm100", "rocm")


@dataclass(frozen=True)
class Scheme:
    """A quantization scheme and the hardware it needs."""

    name: str
    description: str
    cuda_min_capability: int | None = None  # None: any CUDA irfuse supports
    rocm_archs: tuple[str, ...] | None = None  # None: any ROCm; (): not on ROCm


# A quantized model's linear-layer scheme, as `can_apply` and `resolve` take it.
SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme("none", "no quantization (bf16/fp16/fp32 activations)"),
        Scheme("fp8-static-tensor", "FP8 static per-tensor scale", 89, ("gfx942", "gfx950")),
        Scheme("fp8-dynamic-token", "FP8 dynamic per-token scales", 89, ("gfx942", "gfx950")),
        Scheme("fp8-dynamic-tensor", "FP8 dynamic per-tensor scale", 89, ("gfx942", "gfx950")),
        Scheme("fp8-group-128", "FP8 dynamic per-group scales, group 128", 89,
               ("gfx942", "gfx950")),
        Scheme("fp8-group-64", "FP8 dynamic per-group scales, group 64", 89,
               ("gfx942", "gfx950")),
        Scheme("nvfp4", "NVFP4: E2M1 values, FP8 scales per block of 16", 89, ()),
    )
}

RANGE_RULES: dict[str, str] = {
    "all": "every range",
    "below-fi-cap": "ranges up to the FlashInfer size cap "
    "(fi_allreduce_fusion_max_size_mb / (hidden x itemsize) tokens)",
    "from-sp-min": "single-size ranges from sp_min_token_num up whose size TP divides (the "
    "token dim is split TP ways, and irfuse cannot pad the caller's tokens)",
    "up-to-rope-kvcache-max": "ranges up to rope_kvcache_fusion_max_token_num tokens",
}

Quant = Literal["required", "optional", "independent"]


@dataclass(frozen=True)
class Support:
    """How a pass runs on one platform class."""

    backend: str
    default_level: int | None  # lowest O level that turns it on by default; None: never
    schemes: tuple[str, ...] | None = None  # narrows the pass's schemes here; None: all of them


@dataclass(frozen=True)
class PassInfo:
    """One row of the support matrix.

    `quant`: `required` (the pass fuses a quant, so a model with another scheme or none has
    nothing to fuse), `optional` (it fuses with or without a quant; `schemes` are the quants it
    also folds in) or `independent` (no quant involved). `needs_tp`: it rewrites
    tensor-parallel collectives, so it needs TP > 1.
    """

    name: str
    flag: str
    kind: Literal["fusion", "utility"]
    fuses: str
    quant: Quant
    schemes: tuple[str, ...]
    range_rule: str
    platforms: dict[str, Support] = field(hash=False)
    unsupported: str  # why it cannot run on the platform classes it does not list
    needs_tp: bool = False
    implemented: bool = False
    vllm_pass: str = ""
    note: str = ""


_FP8_ALL = ("fp8-static-tensor", "fp8-dynamic-token", "fp8-group-128", "fp8-group-64")
_ALL_PLATFORMS_UNSUPPORTED = "CUDA older than sm80 is not supported"


def _everywhere(gpu_backend: str, level: int | None) -> dict[str, Support]:
    return {
        "cpu": Support("reference", level),
        "cuda:sm80": Support(gpu_backend, level),
        "cuda:sm90": Support(gpu_backend, level),
        "cuda:sm100": Support(gpu_backend, level),
        "rocm": Support(gpu_backend, level),
    }


_PASSES: tuple[PassInfo, ...] = (
    PassInfo(
        name="eliminate-noops",
        flag="eliminate_noops",
        kind="utility",
        fuses="removes reshapes, slices and slice_scatters that do not change their input",
        quant="independent",
        schemes=(),
        range_rule="all",
        platforms={c: Support("ir", 1) for c in PLATFORM_CLASSES},
        unsupported=_ALL_PLATFORMS_UNSUPPORTED,
        vllm_pass="NoOpEliminationPass",
        implemented=True,
    ),
    PassInfo(
        name="enable-sp",
        flag="enable_sp",
        kind="fusion",
        fuses="all-reduce -> RMSNorm (+ FP8 quant) becomes reduce-scatter -> RMSNorm -> all-gather",
        quant="optional",
        schemes=("fp8-static-tensor",),
        range_rule="from-sp-min",
        platforms={
            "cpu": Support("torch", None),
            "cuda:sm80": Support("torch", None),
            "cuda:sm90": Support("torch", None),
            "cuda:sm100": Support("torch", None),
            "rocm": Support("torch", None),
        },
        unsupported=_ALL_PLATFORMS_UNSUPPORTED,
        needs_tp=True,
        vllm_pass="SequenceParallelismPass",
        note="vLLM's O2 leaves it off too (#25689)",
    ),
    PassInfo(
        name="fuse-gemm-comms",
        flag="fuse_gemm_comms",
        kind="fusion",
        fuses="GEMM -> reduce-scatter and all-gather -> GEMM become symmetric-memory "
        "overlapped ops (async TP); implies enable_sp",
        quant="optional",
        schemes=("fp8-static-tensor", "fp8-dynamic-token"),
        range_rule="from-sp-min",
        platforms={
            "cuda:sm80": Support("symm_mem", None),
            "cuda:sm90": Support("symm_mem", None),
            "cuda:sm100": Support("symm_mem", None),
        },
        unsupported="torch's symmetric-memory fused GEMM + collective ops need CUDA GPUs "
        "with peer-to-peer access",
        needs_tp=True,
        vllm_pass="AsyncTPPass",
        note="vLLM's O2 leaves it off too (#25689)",
    ),
    PassInfo(
        name="fuse-allreduce-rms",
        flag="fuse_allreduce_rms",
        kind="fusion",
        fuses="all-reduce -> (residual add +) RMSNorm (+ FP8 static / NVFP4 quant)",
        quant="optional",
        schemes=("fp8-static-tensor", "nvfp4"),
        range_rule="below-fi-cap",
        platforms={
            "cpu": Support("reference", None),
            "cuda:sm90": Support("flashinfer", 2, schemes=("fp8-static-tensor",)),
            "cuda:sm100": Support("flashinfer", 2),
        },
        unsupported="FlashInfer's fused all-reduce kernels are built for sm90 and sm100 only, "
        "and irfuse has no ROCm kernel for it",
        needs_tp=True,
        vllm_pass="AllReduceFusionPass",
        note="O2 needs FlashInfer and TP 2, 4 or 8; the CPU reference is for tests (opt-in)",
    ),
    PassInfo(
        name="fuse-norm-quant",
        flag="fuse_norm_quant",
        kind="fusion",
        fuses="(residual add +) RMSNorm -> FP8 quant",
        quant="required",
        schemes=_FP8_ALL,
        range_rule="all",
        platforms=_everywhere("triton", 1),
        unsupported=_ALL_PLATFORMS_UNSUPPORTED,
        vllm_pass="RMSNormQuantFusionPass",
        implemented=True,
    ),
    PassInfo(
        name="fuse-act-quant",
        flag="fuse_act_quant",
        kind="fusion",
        fuses="SiLU*Mul -> FP8 or NVFP4 quant",
        quant="required",
        schemes=("fp8-static-tensor", "fp8-group-128", "fp8-group-64", "nvfp4"),
        range_rule="all",
        platforms=_everywhere("triton", 1),
        unsupported=_ALL_PLATFORMS_UNSUPPORTED,
        vllm_pass="ActivationQuantFusionPass",
        implemented=True,
    ),
    PassInfo(
        name="fuse-act-padding",
        flag="fuse_act_padding",
        kind="fusion",
        fuses="residual add + RMSNorm -> pad (router GEMM input of GPT-OSS, hidden 2880)",
        quant="independent",
        schemes=(),
        range_rule="all",
        platforms={"rocm": Support("aiter", None)},
        unsupported="fuse-act-padding needs ROCm AITER kernels (vLLM runs it only on ROCm "
        "with AITER, for hidden size 2880)",
        vllm_pass="RocmAiterTritonAddRMSNormPadFusionPass",
        note="vLLM turns it on at O1 only with ROCm AITER; irfuse has no AITER binding",
    ),
    PassInfo(
        name="fuse-rope-kvcache",
        flag="fuse_rope_kvcache",
        kind="fusion",
        fuses="RoPE on q/k -> KV-cache write",
        quant="independent",
        schemes=(),
        range_rule="up-to-rope-kvcache-max",
        platforms=_everywhere("triton", None),
        unsupported=_ALL_PLATFORMS_UNSUPPORTED,
        vllm_pass="RopeKVCacheFusionPass",
        note="vLLM turns it on at O1 only with ROCm AITER; irfuse has not measured its kernel",
    ),
    PassInfo(
        name="fuse-attn-quant",
        flag="fuse_attn_quant",
        kind="fusion",
        fuses="attention (and MLA attention) -> FP8 or NVFP4 quant of its output",
        quant="required",
        schemes=("fp8-static-tensor", "fp8-group-128", "fp8-group-64", "nvfp4"),
        range_rule="all",
        platforms=_everywhere("triton", None),
        unsupported=_ALL_PLATFORMS_UNSUPPORTED,
        vllm_pass="AttnFusionPass",
        note="vLLM's O2 leaves it off too (#25689)",
    ),
    PassInfo(
        name="enable-qk-norm-rope-fusion",
        flag="enable_qk_norm_rope_fusion",
        kind="fusion",
        fuses="split qkv -> per-head RMSNorm of q and k -> RoPE",
        quant="independent",
        schemes=(),
        range_rule="all",
        platforms=_everywhere("triton", None),
        unsupported=_ALL_PLATFORMS_UNSUPPORTED,
        vllm_pass="QKNormRoPEFusionPass",
        note="vLLM leaves it off too: slower than Inductor on H100 (#34391)",
    ),
)

_BY_NAME: dict[str, PassInfo] = {p.name: p for p in _PASSES}
_BY_FLAG: dict[str, PassInfo] = {p.flag: p for p in _PASSES}

FUSION_FLAGS: tuple[str, ...] = tuple(p.flag for p in _PASSES if p.kind == "fusion")
FLAGS: tuple[str, ...] = tuple(p.flag for p in _PASSES)


def passes() -> tuple[PassInfo, ...]:
    """Every pass, fusions and utilities, in pipeline order."""
    return _PASSES


def info(name: str) -> PassInfo:
    """The row of a pass, by its name (`fuse-norm-quant`) or its flag (`fuse_norm_quant`)."""
    row = _BY_NAME.get(name) or _BY_FLAG.get(name)
    if row is None:
        raise ValueError(f"unknown pass {name!r}; known passes: {', '.join(_BY_NAME)}")
    return row


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
