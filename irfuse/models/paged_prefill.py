"""A prefill step over a paged KV cache, as vLLM's FlashAttention backend runs one.

`forward(hidden [T, H], positions [T], slot_mapping [T], k_cache_0, v_cache_0, ...) -> [T, H]`.

One sequence of T new tokens (no earlier context). Per layer: the decoder of
`irfuse.models.paged`, except that attention is causal over the sequence's keys and values read
back from the caches just written (`cache.view(-1, Hk, D)[slot_mapping]`), which is how an engine
whose attention kernel reads the paged cache runs a prefill; the rotated k is therefore read only
by the cache write. The slot mapping scatters the T tokens over random blocks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from irfuse.models import llama, paged
from irfuse.models.config import ModelConfig, ModelOptions
from irfuse.models.layers import randn, repeat_kv


class PrefillAttention(paged.PagedAttention):
    """Llama attention that writes its keys and values to a paged cache and reads them back."""

    def forward(self, positions: torch.Tensor, x: torch.Tensor, *, slot_mapping: torch.Tensor,
                k_cache: torch.Tensor, v_cache: torch.Tensor, cos_sin=None) -> torch.Tensor:
        q, k, v = self.project_qkv(positions, x, cos_sin)
        paged.write_kv(k_cache, k, slot_mapping, self.kv_write)
        paged.write_kv(v_cache, v, slot_mapping, self.kv_write)
        num_tokens = q.shape[0]
        keys = k_cache.view(-1, self.num_kv_heads, self.head_dim)[slot_mapping]
        values = v_cache.view(-1, self.num_kv_heads, self.head_dim)[slot_mapping]
        query, keys, values = (t.transpose(0, 1).unsqueeze(0) for t in (q, keys, values))
        if self.gqa_style == "repeat_kv":
            rep = self.num_heads // self.num_kv_heads
            out = F.scaled_dot_product_attention(query, repeat_kv(keys, rep),
                                                 repeat_kv(values, rep), is_causal=True,
                                                 scale=self.scale)
        else:
            out = F.scaled_dot_product_attention(
                query, keys, values, is_causal=True, scale=self.scale,
                enable_gqa=self.num_heads != self.num_kv_heads)
        out = out.squeeze(0).transpose(0, 1).reshape(num_tokens, -1)
        return self.reduce(self.o_proj(out))


class PagedPrefillStep(nn.Module):
    def __init__(self, cfg: ModelConfig, opts: ModelOptions, *, dtype: torch.dtype,
                 device: torch.device, gen: torch.Generator | None) -> None:
        super().__init__()
        if opts.rope_source != "cache":
            raise ValueError("the paged prefill step takes RoPE from a cos/sin cache")
        if opts.kv_write == "slice_scatter":
            raise ValueError("the paged prefill step writes by slot mapping (index_put or "
                             "index_copy)")
        self.rotary = llama.make_rotary(cfg, opts, cfg.head_dim, dtype, device)
        self.layers = nn.ModuleList(
            llama.LlamaDecoderLayer(cfg, opts, PrefillAttention, rotary=self.rotary,
                                    dtype=dtype, device=device, gen=gen)
            for _ in range(cfg.num_layers))
        self.norm = llama.make_norm(cfg.hidden, cfg, opts, dtype, device, gen)

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor, slot_mapping: torch.Tensor,
                *kv_caches: torch.Tensor) -> torch.Tensor:
        torch._check(slot_mapping.shape[0] == hidden.shape[0])
        x, residual = hidden, None
        for i, layer in enumerate(self.layers):
            x, residual = layer(positions, x, residual, slot_mapping=slot_mapping,
                                k_cache=kv_caches[2 * i], v_cache=kv_caches[2 * i + 1])
        x, _ = self.norm(x, residual)
        return x


def make_model(cfg: ModelConfig, opts: ModelOptions, *, dtype: torch.dtype,
               device: torch.device, gen: torch.Generator | None) -> nn.Module:
    return PagedPrefillStep(cfg, paged._paged_opts(opts), dtype=dtype, device=device, gen=gen)


def make_inputs(cfg: ModelConfig, opts: ModelOptions, num_tokens: int, seed: int, *,
                dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, ...]:
    """T tokens of one sequence at positions 0..T-1, in ceil(T / block_size) random blocks of a
    cache with twice as many (the others hold random earlier contents)."""
    gen = torch.Generator().manual_seed(seed + 1)
    t, bs = num_tokens, cfg.block_size
    used = -(-t // bs)
    num_blocks = 2 * used + 1
    blocks = torch.randperm(num_blocks, generator=gen)[:used]
    positions = torch.arange(t, dtype=torch.int64)
    slot_mapping = blocks[positions // bs].to(torch.int64) * bs + positions % bs
    hidden = randn((t, cfg.hidden), gen, torch.device("cpu")).to(dtype)
    caches = paged.kv_caches(cfg, num_blocks, gen, dtype=dtype, device=device)
    return (hidden.to(device), positions.to(device), slot_mapping.to(device), *caches)


DYNAMIC_DIMS = {0: 0, 1: 0, 2: 0}


def expected_counts(cfg: ModelConfig, opts: ModelOptions) -> dict[str, int]:
    return paged.expected_counts(cfg, opts)
