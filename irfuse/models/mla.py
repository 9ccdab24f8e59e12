"""MLA decoder: multi-head latent attention as DeepSeek-V2/V3 compute it in prefill.

Per layer: input norm; q from a low-rank path (`q_a` projection, `q_a_layernorm`, `q_b`
projection; V3 and V2 with `q_lora_rank`) or a plain q projection (V2-Lite, `q_lora_rank=None`);
`kv_a_proj_with_mqa` giving the latent `kv_c` (normed by `kv_a_layernorm`) and the shared rope
key `k_pe`; `kv_b` projection of the latent into per-head `k_nope` and `v`; RoPE (GPT-J pairs, as
DeepSeek uses) on the rope parts of q and k; attention with softmax scale
1 / sqrt(qk_nope + qk_rope) over the concatenated nope + rope dims; o projection; then the
dense SwiGLU MLP of `irfuse.models.llama` (DeepSeek's MoE layers are out of scope here).

As vLLM does, the q_a and kv_a projections read the same activation through one fused
projection (`fused_qkv_a_proj`), so a quantized model quantizes that activation once.
`pad_v=True` pads v to the q/k head dim around SDPA (as MLA prefill does for kernels that need
equal head dims) and slices the output back. `mla_kv_b_quant=False` keeps kv_b in the model
dtype in a quantized model (as vLLM's MLA dequantizes that weight), so the attention raises to
`attn.mla_attention` and its FP8 output quant can fuse with it.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from irfuse.models import llama
from irfuse.models.config import ModelConfig, ModelOptions
from irfuse.models.layers import RotaryEmbedding, causal_attention
from irfuse.models.quant import make_linear


class MLAAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, opts: ModelOptions, *, rotary: RotaryEmbedding,
                 dtype: torch.dtype, device: torch.device, gen: torch.Generator | None) -> None:
        super().__init__()
        self.num_heads = cfg.num_heads
        self.nope, self.rope, self.v_dim = (
            cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim)
        self.qk_dim = self.nope + self.rope
        self.q_lora_rank, self.kv_lora_rank = cfg.q_lora_rank, cfg.kv_lora_rank
        self.scale = self.qk_dim ** -0.5
        self.pad_v = opts.pad_v
        h, q_out = cfg.hidden, cfg.num_heads * self.qk_dim
        kv_a_out = self.kv_lora_rank + self.rope
        if self.q_lora_rank is not None:
            w = llama.master_weight(self.q_lora_rank + kv_a_out, h, gen, device)
            self.fused_qkv_a_proj = make_linear(w, dtype, opts)
            self.q_a_layernorm = llama.make_norm(self.q_lora_rank, cfg, opts, dtype, device, gen)
            self.q_b_proj = make_linear(
                llama.master_weight(q_out, self.q_lora_rank, gen, device), dtype, opts)
        else:
            w = llama.master_weight(q_out + kv_a_out, h, gen, device)
            self.fused_q_kv_a_proj = make_linear(w, dtype, opts)
        self.kv_a_layernorm = llama.make_norm(self.kv_lora_rank, cfg, opts, dtype, device, gen)
        self.kv_b_proj = make_linear(
            llama.master_weight(cfg.num_heads * (self.nope + self.v_dim), self.kv_lora_rank,
                                gen, device), dtype, opts, quantized=opts.mla_kv_b_quant)
        self.o_proj = make_linear(
            llama.master_weight(h, cfg.num_heads * self.v_dim, gen, device), dtype, opts)
        self.rotary = rotary
        self.reduce: nn.Module = nn.Identity()

    def forward(self, positions: torch.Tensor, x: torch.Tensor, **_unused) -> torch.Tensor:
        h = self.num_heads
        if self.q_lora_rank is not None:
            q_c, kv_a = self.fused_qkv_a_proj(x).split(
                [self.q_lora_rank, self.kv_lora_rank + self.rope], dim=-1)
            q = self.q_b_proj(self.q_a_layernorm(q_c))
        else:
            q, kv_a = self.fused_q_kv_a_proj(x).split(
                [h * self.qk_dim, self.kv_lora_rank + self.rope], dim=-1)
        kv_c, k_pe = kv_a.split([self.kv_lora_rank, self.rope], dim=-1)
        kv_c = self.kv_a_layernorm(kv_c)
        q = q.view(-1, h, self.qk_dim)
        q_nope, q_pe = q.split([self.nope, self.rope], dim=-1)
        k_pe = k_pe.unsqueeze(1)  # [T, 1, rope]: one rope key shared by all heads
        q_pe, k_pe = self.rotary(positions, q_pe, k_pe)
        kv = self.kv_b_proj(kv_c).view(-1, h, self.nope + self.v_dim)
        k_nope, v = kv.split([self.nope, self.v_dim], dim=-1)
        q = torch.cat([q_nope, q_pe], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(-1, h, -1)], dim=-1)
        if self.pad_v:
            v = F.pad(v, (0, self.qk_dim - self.v_dim))
        out = causal_attention(q, k, v, "enable_gqa", self.scale)
        if self.pad_v:
            out = out.view(-1, h, self.qk_dim)[..., : self.v_dim].reshape(-1, h * self.v_dim)
        return self.reduce(self.o_proj(out))


def _mla_opts(opts: ModelOptions) -> ModelOptions:
    if opts.rope_source != "cache":
        raise ValueError("the MLA model takes RoPE from a cos/sin cache (rope_source='cache')")
    if opts.silu_style == "separate" or opts.qk_norm:
        raise ValueError("the MLA model uses a fused gate_up projection and no q/k norm")
    # DeepSeek rotates the whole rope part: a rotary fraction does not apply.
    return dataclasses.replace(opts, rotary_fraction=1.0)


def make_model(cfg: ModelConfig, opts: ModelOptions, *, dtype: torch.dtype,
               device: torch.device, gen: torch.Generator | None) -> nn.Module:
    return llama.LlamaForCausalLM(cfg, _mla_opts(opts), dtype=dtype, device=device, gen=gen,
                                  attn_factory=MLAAttention,
                                  rotary_head_dim=cfg.qk_rope_head_dim)


make_inputs = llama.make_inputs
DYNAMIC_DIMS = llama.DYNAMIC_DIMS


def expected_counts(cfg: ModelConfig, opts: ModelOptions) -> dict[str, int]:
    n = cfg.num_layers
    counts = llama.count_decoder_common(cfg, opts)
    counts["rms_norm"] += n * (2 if cfg.q_lora_rank is not None else 1)  # q_a, kv_a norms
    counts["rope"] = n
    counts["mla_attention"] = n
    # fused qkv_a, q_b, kv_b, o   or   fused q_kv_a, kv_b, o (kv_b unquantized without
    # mla_kv_b_quant)
    quantized_kv_b = opts.mla_kv_b_quant or opts.quant is None
    llama.count_linears(counts, opts, n * (3 if cfg.q_lora_rank is not None else 2))
    if quantized_kv_b:
        llama.count_linears(counts, opts, n)
    else:
        counts["gemm"] += n
    # kv_b's GEMM (and the v pad, with pad_v) are operands' producers inside
    # `attn.mla_attention`: the op takes the normed latent and kv_b's weight, as vLLM's MLA does.
    counts["gemm"] -= n
    return counts
