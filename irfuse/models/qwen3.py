"""Qwen3-style decoder: the Llama layout plus a per-head RMSNorm of q and of k.

Qwen3 normalises q and k over head_dim on their `[T, heads, head_dim]` views, after the qkv
projection and before RoPE (each counts as one `rms_norm`). Everything else is the Llama
decoder of `irfuse.models.llama`, so every spelling and quant scheme applies here too.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from irfuse.models import llama
from irfuse.models.config import ModelConfig, ModelOptions


def _qwen3(opts: ModelOptions) -> ModelOptions:
    return dataclasses.replace(opts, qk_norm=True)


def make_model(cfg: ModelConfig, opts: ModelOptions, *, dtype: torch.dtype,
               device: torch.device, gen: torch.Generator | None) -> nn.Module:
    return llama.LlamaForCausalLM(cfg, _qwen3(opts), dtype=dtype, device=device, gen=gen)


make_inputs = llama.make_inputs
DYNAMIC_DIMS = llama.DYNAMIC_DIMS


def expected_counts(cfg: ModelConfig, opts: ModelOptions) -> dict[str, int]:
    return llama.expected_counts(cfg, _qwen3(opts))
