"""A decode step over a paged KV cache, as a serving engine runs it.

`forward(hidden [T, H], positions [T], slot_mapping [T], block_tables [T, max_blocks],
seq_lens [T], k_cache_0, v_cache_0, k_cache_1, v_cache_1, ...) -> hidden [T, H]`.

T sequences each bring one new token. Per layer: input norm, qkv projection, RoPE (cos/sin
cache indexed by positions), the KV-cache write of the new k and v into the layer's caches
`[num_blocks, block_size, kv_heads, head_dim]` at `slot_mapping` (flattened view; spelled
`index_put_`, `index_copy_`, or a slice assignment that functionalizes into `slice_scatter`),
attention of each new query over its sequence's pages gathered by `block_tables` and masked by
`seq_lens`, o projection, residual add + norm, MLP; a final residual add + norm.

The caches are inputs the step mutates in place (torch.compile functionalizes the writes and
copies back). The slice spelling writes the T new tokens to slots [0, T): its inputs are built
with block_size 1 and block i holding sequence i's new token, so `slot_mapping == arange(T)`.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from irfuse.models import llama
from irfuse.models.config import ModelConfig, ModelOptions
from irfuse.models.layers import randn, repeat_kv


def write_kv(cache: torch.Tensor, new: torch.Tensor, slot_mapping: torch.Tensor, style: str
             ) -> None:
    """Write new [T, kv_heads, head_dim] into cache [blocks, block_size, kv_heads, head_dim]."""
    flat = cache.view(-1, cache.shape[-2], cache.shape[-1])
    if style == "index_put":
        flat.index_put_((slot_mapping,), new)
    elif style == "index_copy":
        flat.index_copy_(0, slot_mapping, new)
    else:
        flat[: new.shape[0]] = new


class PagedAttention(llama.LlamaAttention):
    """Llama attention whose keys and values live in a paged cache."""

    def __init__(self, cfg: ModelConfig, opts: ModelOptions, **kwargs) -> None:
        super().__init__(cfg, opts, **kwargs)
        self.kv_write = opts.kv_write

    def forward(self, positions: torch.Tensor, x: torch.Tensor, *, slot_mapping: torch.Tensor,
                block_tables: torch.Tensor, seq_lens: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, cos_sin=None) -> torch.Tensor:
        q, k, v = self.project_qkv(positions, x, cos_sin)
        write_kv(k_cache, k, slot_mapping, self.kv_write)
        write_kv(v_cache, v, slot_mapping, self.kv_write)
        num_tokens = q.shape[0]
        # [T, max_blocks, block_size, Hk, D] -> [T, Hk, S, D]
        keys = k_cache[block_tables].flatten(1, 2).transpose(1, 2)
        values = v_cache[block_tables].flatten(1, 2).transpose(1, 2)
        span = keys.shape[2]
        mask = torch.arange(span, device=x.device)[None, :] < seq_lens[:, None]
        query = q.unsqueeze(2)  # [T, Hq, 1, D]
        if self.gqa_style == "repeat_kv":
            rep = self.num_heads // self.num_kv_heads
            out = F.scaled_dot_product_attention(
                query, repeat_kv(keys, rep), repeat_kv(values, rep),
                attn_mask=mask[:, None, None, :], scale=self.scale)
        else:
            out = F.scaled_dot_product_attention(
                query, keys, values, attn_mask=mask[:, None, None, :], scale=self.scale,
                enable_gqa=self.num_heads != self.num_kv_heads)
        return self.reduce(self.o_proj(out.reshape(num_tokens, -1)))


class PagedDecodeStep(nn.Module):
    def __init__(self, cfg: ModelConfig, opts: ModelOptions, *, dtype: torch.dtype,
                 device: torch.device, gen: torch.Generator | None) -> None:
        super().__init__()
        if opts.rope_source != "cache":
            raise ValueError("the paged decode step takes RoPE from a cos/sin cache")
        self.rotary = llama.make_rotary(cfg, opts, cfg.head_dim, dtype, device)
        self.layers = nn.ModuleList(
            llama.LlamaDecoderLayer(cfg, opts, PagedAttention, rotary=self.rotary, dtype=dtype,
                                    device=device, gen=gen)
            for _ in range(cfg.num_layers))
        self.norm = llama.make_norm(cfg.hidden, cfg, opts, dtype, device, gen)

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor, slot_mapping: torch.Tensor,
                block_tables: torch.Tensor, seq_lens: torch.Tensor, *kv_caches: torch.Tensor
                ) -> torch.Tensor:
        # One slot per token: tells the compiler the two dynamic sizes are one num_tokens.
        torch._check(slot_mapping.shape[0] == hidden.shape[0])
        x, residual = hidden, None
        for i, layer in enumerate(self.layers):
            x, residual = layer(positions, x, residual, slot_mapping=slot_mapping,
                                block_tables=block_tables, seq_lens=seq_lens,
                                k_cache=kv_caches[2 * i], v_cache=kv_caches[2 * i + 1])
        x, _ = self.norm(x, residual)
        return x


def _paged_opts(opts: ModelOptions) -> ModelOptions:
    # A decode step returns hidden states: no lm_head (and so no pad before it).
    return dataclasses.replace(opts, lm_head=False, lm_head_pad=0)


def make_model(cfg: ModelConfig, opts: ModelOptions, *, dtype: torch.dtype,
               device: torch.device, gen: torch.Generator | None) -> nn.Module:
    return PagedDecodeStep(cfg, _paged_opts(opts), dtype=dtype, device=device, gen=gen)


def kv_caches(cfg: ModelConfig, num_blocks: int, gen: torch.Generator, *, dtype: torch.dtype,
              device: torch.device) -> list[torch.Tensor]:
    """A key and a value cache `[num_blocks, block_size, kv_heads, head_dim]` per layer, random
    (empty on the meta device)."""
    shape = (num_blocks, cfg.block_size, cfg.num_kv_heads, cfg.head_dim)
    if device.type == "meta":
        return [torch.empty(shape, dtype=dtype, device="meta") for _ in range(2 * cfg.num_layers)]
    return [randn(shape, gen, torch.device("cpu")).to(dtype).to(device)
            for _ in range(2 * cfg.num_layers)]


def make_inputs(cfg: ModelConfig, opts: ModelOptions, num_tokens: int, seed: int, *,
                dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Random sequences (lengths 1..max_blocks * block_size, counting the new token; all
    context_len + 1 when the config sets it)."""
    gen = torch.Generator().manual_seed(seed + 1)
    t, bs, mb = num_tokens, cfg.block_size, cfg.max_blocks_per_seq
    num_blocks = t * (mb + 1) + 1
    if cfg.context_len is None:
        seq_lens = torch.randint(1, mb * bs + 1, (t,), generator=gen, dtype=torch.int32)
    elif cfg.context_len + 1 > mb * bs:
        raise ValueError(f"context_len {cfg.context_len} + 1 new token does not fit "
                         f"max_blocks_per_seq {mb} x block_size {bs}")
    else:
        seq_lens = torch.full((t,), cfg.context_len + 1, dtype=torch.int32)
    positions = (seq_lens - 1).to(torch.int64)
    if opts.kv_write == "slice_scatter":
        if bs != 1:
            raise ValueError("kv_write='slice_scatter' writes slots [0, T): it needs block_size=1")
        # Block i (slot i) receives sequence i's new token; earlier tokens use blocks >= T.
        block_tables = (torch.randperm(num_blocks - t, generator=gen)[: t * mb] + t).view(t, mb)
        block_tables[torch.arange(t), positions] = torch.arange(t)
    else:
        block_tables = torch.randperm(num_blocks, generator=gen)[: t * mb].view(t, mb)
    block_tables = block_tables.to(torch.int32)
    rows = torch.arange(t)
    slot_mapping = (block_tables[rows, positions // bs].to(torch.int64) * bs + positions % bs)
    hidden = randn((t, cfg.hidden), gen, torch.device("cpu")).to(dtype)
    caches = kv_caches(cfg, num_blocks, gen, dtype=dtype, device=device)
    ints = (positions, slot_mapping, block_tables, seq_lens)
    return (hidden.to(device), *(x.to(device) for x in ints), *caches)


DYNAMIC_DIMS = {0: 0, 1: 0, 2: 0, 3: 0, 4: 0}


def expected_counts(cfg: ModelConfig, opts: ModelOptions) -> dict[str, int]:
    n = cfg.num_layers
    opts = _paged_opts(opts)
    counts = llama.count_decoder_common(cfg, opts)
    counts["rope"] = n
    counts["attention"] = n
    counts["kv_cache_write"] = n
    llama.count_linears(counts, opts, 2 * n)
    if opts.qk_norm:
        counts["rms_norm"] += 2 * n
    return counts
