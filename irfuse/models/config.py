"""Shapes (`ModelConfig`) and spellings (`ModelOptions`) of the built-in reference models.

A model is a shape plus a spelling. The shape fixes sizes (hidden, heads, layers, MLA ranks,
paged-cache geometry); the spelling picks how the model code writes each op that irfuse raises
(which RMSNorm form, which RoPE layout, which SiLU·Mul form, which FP8 scheme and how its scale
and clamp are written, which KV-cache write, which collective). The registry in
`irfuse.models` names useful combinations; `build(name, **overrides)` accepts any field of
either dataclass as an override.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from irfuse.raising.raising import RAISED_KINDS

NormStyle = str  # "vllm" | "hf" | "square" | "functional" | "custom_op"
NORM_STYLES = ("vllm", "hf", "square", "functional", "custom_op")
SILU_STYLES = ("slice", "chunk", "split", "separate", "sigmoid", "custom_op")
ROPE_STYLES = ("neox", "gptj")
ROPE_SOURCES = ("cache", "hf")
ROPE_CACHE_INDEX = ("index", "index_select")
GQA_STYLES = ("enable_gqa", "repeat_kv")
QUANT_SCHEMES = (None, "fp8", "fp8-per-token", "fp8-per-tensor", "fp8-group", "nvfp4")
QUANT_IMPLS = ("native", "custom_op")
SCALE_SPELLINGS = ("div", "reciprocal", "inv_scale")
CLAMP_SPELLINGS = ("clamp", "clamp_minmax", "minmax")
SCALED_GEMMS = ("auto", "scaled_mm", "rowwise", "dequant")
KV_WRITES = ("index_put", "index_copy", "slice_scatter")
TP_COLLECTIVES = ("all_reduce", "inplace", "rs_ag", "vllm")


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of a model. Fields that a family does not use are ignored by it."""

    hidden: int = 256
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 64
    intermediate: int = 512
    vocab: int = 512
    max_positions: int = 1024
    rope_theta: float = 10000.0
    eps: float = 1e-6
    num_tokens: int = 16  # T of the example inputs
    # MLA (DeepSeek-V2/V3); q_lora_rank None means a plain q projection (V2-Lite).
    q_lora_rank: int | None = 128
    kv_lora_rank: int = 128
    qk_nope_head_dim: int = 32
    qk_rope_head_dim: int = 16
    v_head_dim: int = 32
    # Paged KV cache (decode step): num_tokens sequences, one new token each; the caches hold
    # num_tokens * (max_blocks_per_seq + 1) + 1 blocks (inputs, not weights).
    block_size: int = 16
    max_blocks_per_seq: int = 4
    # Paged decode: tokens every sequence holds before its new one (None: random lengths).
    context_len: int | None = None


# Sizes. `tiny` is for CPU tests, `small` for the CPU demo; `llama-8b` is Llama-3-8B-shaped and
# `deepseek-v2-lite` DeepSeek-V2-Lite-shaped (dense MLP), both meant for device="meta".
SIZES: dict[str, dict[str, Any]] = {
    "tiny": {},
    "small": dict(
        hidden=1024, num_layers=4, num_heads=16, num_kv_heads=4, head_dim=64,
        intermediate=2816, vocab=8192, num_tokens=64, q_lora_rank=384, kv_lora_rank=256,
        qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64, max_blocks_per_seq=8,
    ),
    "llama-8b": dict(
        hidden=4096, num_layers=32, num_heads=32, num_kv_heads=8, head_dim=128,
        intermediate=14336, vocab=128256, max_positions=8192, rope_theta=500000.0, eps=1e-5,
        num_tokens=128, max_blocks_per_seq=64,
    ),
    "deepseek-v2-lite": dict(
        hidden=2048, num_layers=27, num_heads=16, num_kv_heads=16, head_dim=192,
        intermediate=10944, vocab=102400, max_positions=8192, q_lora_rank=None,
        kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
        num_tokens=128,
    ),
}


@dataclass(frozen=True)
class ModelOptions:
    """How the model code spells each raised op (this module's docstring; the field comments)."""

    norm_style: str = "vllm"
    gemma_norm: bool = False  # weight applied as (1 + w)
    qk_norm: bool = False  # per-head q/k RMSNorm (Qwen3)
    rope_style: str = "neox"
    rope_source: str = "cache"  # "cache": cos_sin_cache[positions]; "hf": cos/sin passed in
    rope_cache_index: str = "index"
    rotary_fraction: float = 1.0
    silu_style: str = "slice"
    gqa_style: str = "enable_gqa"
    quant: str | None = None
    group_size: int = 128
    group_col_major: bool = False
    group_ue8m0: bool = False
    scale_ub: bool = False  # per-token: clamp amax by a calibrated upper bound
    quant_impl: str = "native"
    scale_spelling: str = "div"
    clamp_spelling: str = "clamp"
    fp8_dtype: torch.dtype = torch.float8_e4m3fn
    # GEMM of FP8 per-tensor / per-token linears: "scaled_mm" (_scaled_mm with the scheme's own
    # scales), "rowwise" (_scaled_mm with per-tensor scales expanded to row-wise: the CPU's
    # per-tensor _scaled_mm is a reference loop, ~60x slower), "dequant" (dequantize + matmul),
    # "auto" (rowwise on the CPU, scaled_mm elsewhere).
    scaled_gemm: str = "auto"
    lm_head: bool = True
    lm_head_pad: int = 0  # F.pad the final hidden states by this many zero columns
    pad_v: bool = False  # MLA: pad v to the q/k head dim around attention
    # MLA: kv_b in the model dtype in a quantized model (vLLM's MLA dequantizes kv_b's weight),
    # so the attention raises to attn.mla_attention rather than to its SDPA.
    mla_kv_b_quant: bool = True
    kv_write: str = "index_put"
    tp_collective: str | None = None  # None: not tensor-parallel
    calibrate: bool = True  # calibrate static scales on the example inputs

    def __post_init__(self) -> None:
        checks = [
            ("norm_style", NORM_STYLES), ("silu_style", SILU_STYLES),
            ("rope_style", ROPE_STYLES), ("rope_source", ROPE_SOURCES),
            ("rope_cache_index", ROPE_CACHE_INDEX), ("gqa_style", GQA_STYLES),
            ("quant", QUANT_SCHEMES), ("quant_impl", QUANT_IMPLS),
            ("scale_spelling", SCALE_SPELLINGS), ("clamp_spelling", CLAMP_SPELLINGS),
            ("scaled_gemm", SCALED_GEMMS), ("kv_write", KV_WRITES),
            ("tp_collective", (None, *TP_COLLECTIVES)),
        ]
        for field, allowed in checks:
            if getattr(self, field) not in allowed:
                raise ValueError(f"{field}={getattr(self, field)!r}; expected one of {allowed}")
        if self.fp8_dtype not in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
            raise ValueError(f"fp8_dtype={self.fp8_dtype}; expected float8_e4m3fn or e4m3fnuz")
        if self.group_size not in (64, 128):
            raise ValueError(f"group_size={self.group_size}; expected 64 or 128")
        if not 0.0 < self.rotary_fraction <= 1.0:
            raise ValueError(f"rotary_fraction={self.rotary_fraction}; expected in (0, 1]")
        if self.silu_style == "separate" and self.quant is not None:
            # Two quantized linears reading the same activation would quantize it twice with
            # identical chains, which CSE may merge: the count would then depend on the compiler.
            raise ValueError("silu_style='separate' is only built unquantized")

    @property
    def uses_custom_ops(self) -> bool:
        return (
            self.norm_style == "custom_op"
            or self.silu_style == "custom_op"
            or (self.quant is not None and self.quant_impl == "custom_op")
        )


def zero_counts() -> dict[str, int]:
    return dict.fromkeys(RAISED_KINDS, 0)


CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(ModelConfig))
OPTION_FIELDS = frozenset(f.name for f in dataclasses.fields(ModelOptions))
