"""Llama-style decoder, written as vLLM's model code lays it out (flat [T] token batches).

embedding -> N x [input norm (residual add fused from layer 1 on), fused qkv projection, RoPE,
GQA causal SDPA, o projection, residual add + post-attention norm, fused gate_up projection,
SiLU·Mul, down projection] -> residual add + final norm -> optional pad -> optional lm_head.

The decoder layer and the model take the attention module from a factory, so the Qwen3
(per-head q/k norm), MLA and paged-KV-cache models reuse them. Random draws happen in a fixed
order per shape, so two spellings of the same model built from the same seed hold the same
weights (quantized from the same float32 master weights): their outputs can be compared.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from irfuse.models.config import ModelConfig, ModelOptions, zero_counts
from irfuse.models.layers import (
    HFRotaryEmbedding,
    RMSNorm,
    RotaryEmbedding,
    apply_hf_rotary,
    causal_attention,
    frozen,
    randn,
    silu_mul,
)
from irfuse.models.quant import gemm_kind, make_linear, quant_kind


def master_weight(out_features: int, in_features: int, gen: torch.Generator | None,
                  device: torch.device) -> torch.Tensor:
    """float32 [out, in] weight with std 1 / sqrt(in), drawn from `gen`."""
    return randn((out_features, in_features), gen, device, std=in_features ** -0.5)


def make_norm(size: int, cfg: ModelConfig, opts: ModelOptions, dtype: torch.dtype,
              device: torch.device, gen: torch.Generator | None) -> RMSNorm:
    return RMSNorm(size, cfg.eps, opts.norm_style, gemma=opts.gemma_norm, dtype=dtype,
                   device=device, gen=gen)


def rotary_dim(head_dim: int, opts: ModelOptions) -> int:
    dim = int(head_dim * opts.rotary_fraction)
    return dim - dim % 2


class LlamaAttention(nn.Module):
    """Fused qkv projection, (per-head q/k norm), RoPE, causal GQA SDPA, o projection."""

    def __init__(self, cfg: ModelConfig, opts: ModelOptions, *, dtype: torch.dtype,
                 device: torch.device, gen: torch.Generator | None,
                 rotary: RotaryEmbedding | None) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = (
            cfg.num_heads, cfg.num_kv_heads, cfg.head_dim)
        self.gqa_style, self.is_neox = opts.gqa_style, opts.rope_style == "neox"
        self.scale = cfg.head_dim ** -0.5
        q_size, kv_size = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        self.qkv_proj = make_linear(master_weight(q_size + 2 * kv_size, cfg.hidden, gen, device),
                                    dtype, opts)
        self.o_proj = make_linear(master_weight(cfg.hidden, q_size, gen, device), dtype, opts)
        self.qk_norm = opts.qk_norm
        if opts.qk_norm:
            self.q_norm = make_norm(cfg.head_dim, cfg, opts, dtype, device, gen)
            self.k_norm = make_norm(cfg.head_dim, cfg, opts, dtype, device, gen)
        # One module shared by every layer, as vLLM's get_rope shares its cache.
        self.rotary = rotary
        self.reduce: nn.Module = nn.Identity()  # tensor parallelism puts a collective here

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    def project_qkv(self, positions: torch.Tensor, x: torch.Tensor,
                    cos_sin: tuple[torch.Tensor, torch.Tensor] | None
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """qkv projection, per-head norms and RoPE: q [T, Hq, D], k and v [T, Hk, D]."""
        qkv = self.qkv_proj(x)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = q.view(-1, self.num_heads, self.head_dim)
        k = k.view(-1, self.num_kv_heads, self.head_dim)
        v = v.view(-1, self.num_kv_heads, self.head_dim)
        if self.qk_norm:
            q = self.q_norm(q)
            k = self.k_norm(k)
        if cos_sin is None:
            q, k = self.rotary(positions, q, k)
        else:
            q, k = apply_hf_rotary(q, k, cos_sin[0], cos_sin[1], self.is_neox)
        return q, k, v

    def forward(self, positions: torch.Tensor, x: torch.Tensor,
                cos_sin: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        q, k, v = self.project_qkv(positions, x, cos_sin)
        out = causal_attention(q, k, v, self.gqa_style, self.scale)
        return self.reduce(self.o_proj(out))


class LlamaMLP(nn.Module):
    """gate_up projection (fused, or separate gate and up), SiLU·Mul, down projection."""

    def __init__(self, cfg: ModelConfig, opts: ModelOptions, *, dtype: torch.dtype,
                 device: torch.device, gen: torch.Generator | None) -> None:
        super().__init__()
        self.silu_style = opts.silu_style
        gate_up = master_weight(2 * cfg.intermediate, cfg.hidden, gen, device)
        if opts.silu_style == "separate":
            self.gate_proj = make_linear(gate_up[: cfg.intermediate], dtype, opts)
            self.up_proj = make_linear(gate_up[cfg.intermediate:], dtype, opts)
        else:
            self.gate_up_proj = make_linear(gate_up, dtype, opts)
        self.down_proj = make_linear(master_weight(cfg.hidden, cfg.intermediate, gen, device),
                                     dtype, opts)
        self.reduce: nn.Module = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.silu_style == "separate":
            h = F.silu(self.gate_proj(x)) * self.up_proj(x)
        else:
            h = silu_mul(self.gate_up_proj(x), self.silu_style)
        return self.reduce(self.down_proj(h))


AttentionFactory = Callable[..., nn.Module]


class LlamaDecoderLayer(nn.Module):
    """Input norm, attention (from `attn_factory`), residual add + norm, MLP."""

    def __init__(self, cfg: ModelConfig, opts: ModelOptions, attn_factory: AttentionFactory, *,
                 rotary: RotaryEmbedding | None, dtype: torch.dtype, device: torch.device,
                 gen: torch.Generator | None) -> None:
        super().__init__()
        self.input_layernorm = make_norm(cfg.hidden, cfg, opts, dtype, device, gen)
        self.self_attn = attn_factory(cfg, opts, rotary=rotary, dtype=dtype, device=device,
                                      gen=gen)
        self.post_attention_layernorm = make_norm(cfg.hidden, cfg, opts, dtype, device, gen)
        self.mlp = LlamaMLP(cfg, opts, dtype=dtype, device=device, gen=gen)

    def forward(self, positions: torch.Tensor, x: torch.Tensor, residual: torch.Tensor | None,
                **attn_args) -> tuple[torch.Tensor, torch.Tensor]:
        if residual is None:
            residual = x
            x = self.input_layernorm(x)
        else:
            x, residual = self.input_layernorm(x, residual)
        x = self.self_attn(positions, x, **attn_args)
        x, residual = self.post_attention_layernorm(x, residual)
        return self.mlp(x), residual


def make_rotary(cfg: ModelConfig, opts: ModelOptions, head_dim: int, dtype: torch.dtype,
                device: torch.device) -> RotaryEmbedding:
    return RotaryEmbedding(head_dim, rotary_dim(head_dim, opts), cfg.max_positions,
                           cfg.rope_theta, opts.rope_style == "neox",
                           index=opts.rope_cache_index, dtype=dtype, device=device)


class LlamaForCausalLM(nn.Module):
    """`forward(input_ids [T] int64, positions [T] int64) -> logits [T, vocab]`.

    Without an lm_head it returns the final hidden states [T, hidden (+ lm_head_pad)].
    """

    def __init__(self, cfg: ModelConfig, opts: ModelOptions, *, dtype: torch.dtype,
                 device: torch.device, gen: torch.Generator | None,
                 attn_factory: AttentionFactory | None = None,
                 rotary_head_dim: int | None = None) -> None:
        super().__init__()
        self.cfg, self.opts = cfg, opts
        self.embed_tokens = frozen(randn((cfg.vocab, cfg.hidden), gen, device).to(dtype))
        self.hf_rotary: HFRotaryEmbedding | None = None
        self.rotary: RotaryEmbedding | None = None
        if opts.rope_source == "hf":
            self.hf_rotary = HFRotaryEmbedding(rotary_dim(cfg.head_dim, opts), cfg.rope_theta,
                                               opts.rope_style == "neox", device=device)
        else:
            self.rotary = make_rotary(cfg, opts, rotary_head_dim or cfg.head_dim, dtype, device)
        attn_factory = attn_factory or LlamaAttention
        layers = [
            LlamaDecoderLayer(cfg, opts, attn_factory, rotary=self.rotary, dtype=dtype,
                              device=device, gen=gen)
            for _ in range(cfg.num_layers)
        ]
        self.layers = nn.ModuleList(layers)
        self.norm = make_norm(cfg.hidden, cfg, opts, dtype, device, gen)
        self.lm_head_pad = opts.lm_head_pad
        self.lm_head = None
        if opts.lm_head:
            head = master_weight(cfg.vocab, cfg.hidden, gen, device)
            if opts.lm_head_pad:
                extra = master_weight(cfg.vocab, opts.lm_head_pad, gen, device)
                head = torch.cat([head, extra], dim=1)
            self.lm_head = make_linear(head, dtype, opts, quantized=False)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = F.embedding(input_ids, self.embed_tokens)
        cos_sin = self.hf_rotary(positions, x.dtype) if self.hf_rotary is not None else None
        residual = None
        for layer in self.layers:
            x, residual = layer(positions, x, residual, cos_sin=cos_sin)
        x, _ = self.norm(x, residual)
        if self.lm_head_pad:
            x = F.pad(x, (0, self.lm_head_pad))
        return self.lm_head(x) if self.lm_head is not None else x


# --- registry hooks ----------------------------------------------------------------------------


def make_model(cfg: ModelConfig, opts: ModelOptions, *, dtype: torch.dtype,
               device: torch.device, gen: torch.Generator | None) -> nn.Module:
    return LlamaForCausalLM(cfg, opts, dtype=dtype, device=device, gen=gen)


def make_inputs(cfg: ModelConfig, opts: ModelOptions, num_tokens: int, seed: int, *,
                dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, ...]:
    """(input_ids [T], positions [T]): one sequence of T tokens (a prefill)."""
    gen = torch.Generator().manual_seed(seed + 1)
    input_ids = torch.randint(0, cfg.vocab, (num_tokens,), generator=gen, dtype=torch.int64)
    positions = torch.arange(num_tokens, dtype=torch.int64)
    return input_ids.to(device), positions.to(device)


DYNAMIC_DIMS = {0: 0, 1: 0}


def count_linears(counts: dict[str, int], opts: ModelOptions, n: int) -> None:
    """Add n quantized-or-not linears: a quant each (if quantized) and a GEMM each."""
    kind = quant_kind(opts)
    if kind is not None:
        counts[kind] += n
        counts[gemm_kind(opts)] += n
    else:
        counts["gemm"] += n


def count_decoder_common(cfg: ModelConfig, opts: ModelOptions) -> dict[str, int]:
    """Counts shared by every decoder here: norms, SiLU·Mul, MLP linears, lm_head, pad, TP."""
    n = cfg.num_layers
    counts = zero_counts()
    counts["rms_norm"] = 1  # layer 0's input norm has no residual to add
    counts["add_rms_norm"] = 2 * n  # N post-attention norms, N - 1 input norms, final norm
    counts["silu_mul"] = n
    count_linears(counts, opts, n * (3 if opts.silu_style == "separate" else 2))
    if opts.lm_head:
        counts["gemm"] += 1
    if opts.lm_head_pad:
        counts["pad"] += 1
    if opts.tp_collective in ("all_reduce", "inplace"):
        counts["all_reduce"] = 2 * n
    elif opts.tp_collective == "rs_ag":
        counts["reduce_scatter"] = counts["all_gather"] = 2 * n
    return counts


def expected_counts(cfg: ModelConfig, opts: ModelOptions) -> dict[str, int]:
    n = cfg.num_layers
    counts = count_decoder_common(cfg, opts)
    if opts.qk_norm:
        counts["rms_norm"] += 2 * n
    counts["rope"] = n
    counts["attention"] = n
    count_linears(counts, opts, 2 * n)  # qkv, o
    return counts
