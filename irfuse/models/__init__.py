"""Built-in reference models: the corpus that exercises every spelling irfuse raises.

Ordinary `nn.Module`s written as vLLM / Hugging Face model code writes them: Llama-style and
Qwen3-style decoders (bf16, FP8 static, FP8 per-token, FP8 per-tensor, FP8 per-group 128/64 and
NVFP4), an MLA decoder (DeepSeek-V2/V3), paged-KV-cache decode and prefill steps and
tensor-parallel variants. `build(name, size=..., **overrides)` returns a `BuiltModel`: the model
in eval mode, example inputs, the num_tokens dims to mark dynamic, and the exact count of each
raised op.

Sizes: "tiny" (CPU tests), "small" (CPU demo), "llama-8b" (Llama-3-8B shape) and, for MLA,
"deepseek-v2-lite"; the large ones are meant for `device="meta"`. Overrides may name any field of
`ModelConfig` (sizes) or `ModelOptions` (spellings, `irfuse.models.config`), e.g.
`build("llama", norm_style="square", eps=1e-5, num_layers=4)`. Tensor-parallel models
(`ModelSpec.distributed`) need a process group: `with irfuse.models.dist.fake_process_group(2):
build("llama-tp")` traces as rank 0 of 2.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Any

import torch
import torch.distributed as torch_dist
from torch import nn

from irfuse.models import llama, mla, paged, paged_prefill, qwen3, tp
from irfuse.models.config import (
    CONFIG_FIELDS,
    OPTION_FIELDS,
    RAISED_KINDS,
    SIZES,
    ModelConfig,
    ModelOptions,
)
from irfuse.models.layers import CustomOpsUnavailable, require_custom_ops
from irfuse.models.quant import calibrate

__all__ = [
    "MODELS", "RAISED_KINDS", "SIZES", "BuiltModel", "CustomOpsUnavailable", "ModelConfig",
    "ModelOptions", "ModelSpec", "build",
]

FAMILIES: dict[str, ModuleType] = {"llama": llama, "qwen3": qwen3, "mla": mla, "paged": paged,
                                   "paged_prefill": paged_prefill}
DECODER_SIZES = ("tiny", "small", "llama-8b")
MLA_SIZES = ("tiny", "small", "deepseek-v2-lite")


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: a family plus the spelling and size overrides that define it."""

    name: str
    family: str
    description: str
    options: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    sizes: tuple[str, ...] = DECODER_SIZES

    @property
    def default_options(self) -> ModelOptions:
        return ModelOptions(**self.options)

    @property
    def distributed(self) -> bool:
        """Needs an initialised process group (see `irfuse.models.dist.fake_process_group`)."""
        return self.default_options.tp_collective is not None

    @property
    def uses_custom_ops(self) -> bool:
        """Calls `torch.ops.irfuse.*` (building raises CustomOpsUnavailable without them)."""
        return self.default_options.uses_custom_ops


@dataclass
class BuiltModel:
    """A built model, its example inputs and num_tokens dims, and `expected`: raised kind ->
    exact count in the model (kinds the model lacks present with 0), counted so:
    - `rms_norm`: a norm with no residual add feeding it: layer 0's input norm, each per-head q
      and k norm (Qwen3: 2 per layer), MLA's q_a and kv_a norms (2 per layer, 1 without q_lora).
    - `add_rms_norm`: a residual add feeding a norm counts once, not also as `rms_norm`: each
      post-attention norm, the input norms of layers 1..N-1 and the final norm (2N in all).
    - `quant_fp8` / `quant_nvfp4`: one per quantized linear (its activation quant); `gemm` or
      `scaled_gemm`: one per linear: `scaled_gemm` for FP8 per-tensor / per-token linears whose
      GEMM is `torch._scaled_mm`, `gemm` for bf16 linears, the lm_head (never quantized) and the
      emulated (dequantize + matmul) GEMMs of per-group FP8 and NVFP4. Weight dequantization is
      not a quant.
    - `silu_mul`: one per MLP. `rope`: one per attention layer (q and k rotated together count
      once). `kv_cache_write`: one per layer (k and v written together).
    - `attention`: one SDPA per layer (Llama, Qwen3, paged); `mla_attention`: one per MLA layer
      (instead of `attention`); it contains the kv_b projection (its weight is an operand, as in
      vLLM's MLA) and the v pad of `pad_v`, which therefore do not count as `gemm` / `pad`.
    - `all_reduce`, `reduce_scatter`, `all_gather`: one per collective (2 per TP layer each used).
    - `pad`: one per `F.pad` of the last dim (before the lm_head with `lm_head_pad`).
    """

    name: str
    model: nn.Module
    example_inputs: tuple[torch.Tensor, ...]
    dynamic_dims: dict[int, int]  # input index -> its num_tokens dim
    expected: dict[str, int]  # raised kind -> exact count
    config: ModelConfig
    options: ModelOptions
    make_inputs: Callable[..., tuple[torch.Tensor, ...]]  # (num_tokens, seed=0) -> inputs

    def mark_dynamic(self, inputs: tuple[torch.Tensor, ...] | None = None
                     ) -> tuple[torch.Tensor, ...]:
        """`torch._dynamo.mark_dynamic` on every num_tokens dim; returns the inputs."""
        inputs = self.example_inputs if inputs is None else inputs
        for index, dim in self.dynamic_dims.items():
            torch._dynamo.mark_dynamic(inputs[index], dim)
        return inputs

    def clone_inputs(self) -> tuple[torch.Tensor, ...]:
        """Fresh copies of the example inputs (the paged step mutates its caches: run it on these
        and compare the caches as well as the output)."""
        return tuple(t.clone() for t in self.example_inputs)


def _spec(name: str, family: str, description: str, sizes: tuple[str, ...] = DECODER_SIZES,
          config: Mapping[str, Any] | None = None, **options: Any) -> ModelSpec:
    return ModelSpec(name, family, description, MappingProxyType(options),
                     MappingProxyType(dict(config or {})), sizes)


_FP8_GROUP = dict(quant="fp8-group")
_SPECS = [
    # Llama, bf16, one spelling family each.
    _spec("llama", "llama", "vLLM-style bf16 Llama: fp32 norm math, RoPE from a cos/sin cache "
          "(index_select), SiLU·Mul by slicing, SDPA with enable_gqa",
          rope_cache_index="index_select"),
    _spec("llama-hf", "llama", "HF-style bf16 Llama: HF RMSNorm, cos/sin computed per forward, "
          "rotate_half, separate gate/up projections, repeat_kv",
          norm_style="hf", rope_source="hf", silu_style="separate", gqa_style="repeat_kv"),
    _spec("llama-square", "llama", "x*x / sum / 1/sqrt RMSNorm, GPT-J RoPE on half the head dim, "
          "SiLU·Mul by split, lm_head input padded by F.pad",
          norm_style="square", rope_style="gptj", rotary_fraction=0.5, silu_style="split",
          lm_head_pad=64, config=dict(eps=1e-5)),
    _spec("llama-functional", "llama", "F.rms_norm, SiLU·Mul by chunk", norm_style="functional",
          silu_style="chunk"),
    _spec("llama-gemma-norm", "llama", "Gemma (1 + w) RMSNorm weighting (HF form), HF RoPE, "
          "silu as a * sigmoid(a)", norm_style="hf", gemma_norm=True, rope_source="hf",
          silu_style="sigmoid", gqa_style="repeat_kv"),
    _spec("llama-custom-ops", "llama", "torch.ops.irfuse norms, SiLU·Mul and static FP8 quant",
          norm_style="custom_op", silu_style="custom_op", quant="fp8", quant_impl="custom_op"),
    # Llama, quantized.
    _spec("llama-fp8", "llama", "FP8 static per-tensor (x / s, clamp), _scaled_mm", quant="fp8"),
    _spec("llama-fp8-per-token", "llama", "FP8 dynamic per-token with scale_ub, row-wise "
          "_scaled_mm, SiLU·Mul by chunk", quant="fp8-per-token", scale_ub=True,
          silu_style="chunk"),
    _spec("llama-fp8-per-tensor", "llama", "FP8 dynamic per-tensor, HF norms",
          quant="fp8-per-tensor", norm_style="hf"),
    _spec("llama-fp8-group128", "llama", "FP8 per-group 128, row-major scales", **_FP8_GROUP),
    _spec("llama-fp8-group64", "llama", "FP8 per-group 64, column-major UE8M0 scales, HF norms",
          group_size=64, group_col_major=True, group_ue8m0=True, norm_style="hf",
          **_FP8_GROUP),
    _spec("llama-nvfp4", "llama", "NVFP4 activations via torch.ops.irfuse.quant_nvfp4",
          quant="nvfp4", quant_impl="custom_op"),
    _spec("llama-nvfp4-native", "llama", "NVFP4 activations quantized in native torch",
          quant="nvfp4"),
    # Qwen3.
    _spec("qwen3", "qwen3", "HF-style bf16 Qwen3: per-head q/k RMSNorm, HF RoPE, separate "
          "gate/up", norm_style="hf", rope_source="hf", silu_style="separate",
          gqa_style="repeat_kv"),
    _spec("qwen3-fp8", "qwen3", "Qwen3, FP8 static (x * s.reciprocal(), clamp_min/clamp_max)",
          quant="fp8", scale_spelling="reciprocal", clamp_spelling="clamp_minmax"),
    _spec("qwen3-fp8-per-token", "qwen3", "Qwen3, FP8 dynamic per-token, HF norms",
          quant="fp8-per-token", norm_style="hf"),
    _spec("qwen3-fp8-group128", "qwen3", "Qwen3, FP8 per-group 128, column-major scales",
          group_col_major=True, **_FP8_GROUP),
    # MLA.
    _spec("mla", "mla", "DeepSeek-V3-style MLA (q_lora), bf16, GPT-J RoPE", sizes=MLA_SIZES,
          rope_style="gptj"),
    _spec("mla-lite", "mla", "DeepSeek-V2-Lite-style MLA (no q_lora), v padded around SDPA, "
          "HF norms", sizes=MLA_SIZES, rope_style="gptj", pad_v=True, norm_style="hf",
          config=dict(q_lora_rank=None)),
    _spec("mla-fp8-group128", "mla", "DeepSeek-V3-style MLA, FP8 per-group 128 with "
          "column-major scales", sizes=MLA_SIZES, rope_style="gptj", group_col_major=True,
          **_FP8_GROUP),
    # Paged KV cache decode step.
    _spec("paged", "paged", "paged-KV decode step, cache write by index_put_",
          kv_write="index_put"),
    _spec("paged-index-copy", "paged", "paged-KV decode step, cache write by index_copy_, "
          "repeat_kv attention, FP8 static (x * inv_s, torch.max/min)", kv_write="index_copy",
          gqa_style="repeat_kv", quant="fp8", scale_spelling="inv_scale",
          clamp_spelling="minmax"),
    _spec("paged-slice", "paged", "paged-KV decode step, cache write by slice assignment "
          "(slice_scatter), block size 1", kv_write="slice_scatter",
          config=dict(block_size=1, max_blocks_per_seq=64)),
    _spec("paged-prefill", "paged_prefill", "paged-KV prefill step: one sequence, cache write "
          "by index_put_, causal attention over the keys and values read back from the cache"),
    # Tensor parallel (need a process group: irfuse.models.dist.fake_process_group).
    _spec("llama-tp", "llama", "`llama` sharded for TP, functional all_reduce",
          rope_cache_index="index_select", tp_collective="all_reduce"),
    _spec("llama-fp8-tp", "llama", "`llama-fp8` sharded for TP, functional all_reduce, "
          "x * inv_s with clamp_min/clamp_max", quant="fp8", scale_spelling="inv_scale",
          clamp_spelling="clamp_minmax", tp_collective="all_reduce"),
    _spec("llama-tp-inplace", "llama", "`llama` sharded for TP, in-place dist.all_reduce",
          rope_cache_index="index_select", tp_collective="inplace"),
    _spec("llama-tp-rs-ag", "llama", "`llama` sharded for TP, reduce_scatter + all_gather",
          rope_cache_index="index_select", tp_collective="rs_ag"),
]
MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in _SPECS}


def resolve(name: str, size: str = "tiny", **overrides: Any
            ) -> tuple[ModelSpec, ModelConfig, ModelOptions]:
    """The spec, config and options `build` would use (no weights made)."""
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; known: {sorted(MODELS)}")
    spec = MODELS[name]
    if size not in spec.sizes:
        raise ValueError(f"model {name!r} has sizes {spec.sizes}, not {size!r}")
    cfg_kw = {**SIZES[size], **spec.config}
    opt_kw = dict(spec.options)
    for key, value in overrides.items():
        if key in CONFIG_FIELDS:
            cfg_kw[key] = value
        elif key in OPTION_FIELDS:
            opt_kw[key] = value
        else:
            raise TypeError(f"unknown override {key!r}; ModelConfig fields: "
                            f"{sorted(CONFIG_FIELDS)}; ModelOptions fields: "
                            f"{sorted(OPTION_FIELDS)}")
    return spec, ModelConfig(**cfg_kw), ModelOptions(**opt_kw)


def build(name: str, *, size: str = "tiny", dtype: torch.dtype = torch.bfloat16,
          device: str | torch.device = "cpu", seed: int = 0,
          group: torch_dist.ProcessGroup | None = None, **overrides: Any) -> BuiltModel:
    """Build model `name` at `size` with deterministic weights from `seed`.

    Static quant scales are calibrated on the example inputs (not on the meta device).
    Tensor-parallel models shard for the rank of `group` (default: the default group, which must
    be initialised). Raises CustomOpsUnavailable when a custom-op spelling is selected and
    `torch.ops.irfuse` lacks the ops.
    """
    spec, cfg, opts = resolve(name, size, **overrides)
    device = torch.device(device)
    if opts.uses_custom_ops:
        require_custom_ops()
    if opts.tp_collective is not None:
        if spec.family not in ("llama", "qwen3"):
            raise ValueError(f"tensor parallelism is built for Llama/Qwen3 models, not "
                             f"{spec.family}")
        if group is None:
            if not torch_dist.is_initialized():
                raise RuntimeError(f"{name!r} is tensor-parallel: initialise a process group "
                                   "first (irfuse.models.dist.fake_process_group for tracing)")
            group = torch_dist.group.WORLD
    family = FAMILIES[spec.family]
    gen = torch.Generator().manual_seed(seed)
    model = family.make_model(cfg, opts, dtype=dtype, device=device, gen=gen)
    make_inputs = functools.partial(_make_inputs, family, cfg, opts, dtype, device)
    example_inputs = make_inputs(cfg.num_tokens, seed)
    if opts.quant is not None and opts.calibrate and device.type != "meta":
        calibrate(model, example_inputs)
    if opts.tp_collective is not None:
        tp.shard(model, group, opts.tp_collective)
    model.eval()
    return BuiltModel(
        name=name, model=model, example_inputs=example_inputs,
        dynamic_dims=dict(family.DYNAMIC_DIMS), expected=family.expected_counts(cfg, opts),
        config=cfg, options=opts, make_inputs=make_inputs,
    )


def _make_inputs(family: ModuleType, cfg: ModelConfig, opts: ModelOptions, dtype: torch.dtype,
                 device: torch.device, num_tokens: int, seed: int = 0
                 ) -> tuple[torch.Tensor, ...]:
    return family.make_inputs(cfg, opts, num_tokens, seed, dtype=dtype, device=device)

