"""Model layers written the ways real model code writes them.

Each layer takes a spelling argument that picks one of the forms found in Hugging Face and vLLM
model code, so the built-in models exercise every form irfuse's raising must recognise:
`RMSNorm` (vLLM's, Hugging Face's, a `x * x` form, `F.rms_norm`, the custom op; Gemma's
`1 + w`), `silu_mul`, `RotaryEmbedding` (a cos/sin cache indexed by positions) and
`HFRotaryEmbedding` (cos/sin made from positions once per forward and passed to every layer),
both NeoX halves or GPT-J pairs with a partial rotary dim, and `causal_attention` (SDPA with
`enable_gqa=True` or HF's `repeat_kv`). Each says its forms.

Custom-op spellings import `irfuse.emit.custom_ops` lazily (`require_custom_ops`), so every
native spelling works without it.
"""

from __future__ import annotations

import importlib
import math

import torch
import torch.nn.functional as F
from torch import nn

CUSTOM_OP_NAMES = (
    "rms_norm", "add_rms_norm", "silu_mul", "quant_fp8_static", "quant_fp8_per_token",
    "quant_fp8_per_tensor", "quant_fp8_group", "quant_nvfp4",
)


class CustomOpsUnavailable(RuntimeError):
    """A custom-op spelling was asked for but `torch.ops.irfuse.*` is not registered."""


def require_custom_ops(*names: str) -> None:
    """Import `irfuse.emit.custom_ops` and check that the named ops are registered."""
    try:
        importlib.import_module("irfuse.emit.custom_ops")
    except ImportError as err:
        raise CustomOpsUnavailable(f"irfuse.emit.custom_ops cannot be imported: {err}") from err
    missing = [n for n in names or CUSTOM_OP_NAMES if not hasattr(torch.ops.irfuse, n)]
    if missing:
        raise CustomOpsUnavailable(f"torch.ops.irfuse lacks {missing}")


def custom_ops_available(*names: str) -> bool:
    try:
        require_custom_ops(*names)
    except CustomOpsUnavailable:
        return False
    return True


# --- deterministic initialisation --------------------------------------------------------------


def randn(shape: tuple[int, ...], gen: torch.Generator | None, device: torch.device,
          std: float = 1.0) -> torch.Tensor:
    """fp32 normal values drawn on the CPU from `gen` (empty on the meta device)."""
    if device.type == "meta":
        return torch.empty(shape, dtype=torch.float32, device="meta")
    return (torch.randn(shape, generator=gen, dtype=torch.float32) * std).to(device)


def frozen(t: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(t, requires_grad=False)


# --- RMSNorm -----------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    """RMSNorm over the last dim, optionally adding a residual first (then returning both).

    `forward(x)` returns the normed x; `forward(x, residual)` returns `(normed, new_residual)`
    where `new_residual = x + residual` (in fp32 then rounded for "vllm" and "square", in the
    model dtype for "hf" and "functional", as the models those spellings come from do).

    `style`: "vllm" (float math, residual added in fp32, `.to(dtype) * weight`), "hf"
    (Llama/Mistral/Qwen: `pow(2).mean`, `x * rsqrt(var + eps)`, `weight * x.to(dtype)`, the
    residual added in the model dtype), "square" (`x * x`, `sum / N`, `1 / sqrt`, weight applied
    in fp32 before the cast), "functional" (`F.rms_norm`), "custom_op"
    (`torch.ops.irfuse.rms_norm` / `add_rms_norm`); `gemma=True` weights by `(1 + w)` in fp32 as
    Gemma does.
    """

    def __init__(self, size: int, eps: float, style: str, *, gemma: bool = False,
                 dtype: torch.dtype, device: torch.device, gen: torch.Generator | None) -> None:
        super().__init__()
        if style == "custom_op":
            require_custom_ops("rms_norm", "add_rms_norm")
        self.size, self.eps, self.style, self.gemma = size, eps, style, gemma
        # Gemma stores w and applies (1 + w); others store the weight itself. Either way the
        # effective weight is 1 + 0.1 * noise, so the weight product is not a no-op.
        w = randn((size,), gen, device, std=0.1)
        self.weight = frozen((w if gemma else w + 1.0).to(dtype))

    def extra_repr(self) -> str:
        return f"{self.size}, eps={self.eps}, style={self.style}, gemma={self.gemma}"

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        if self.style == "custom_op":
            offset = 1.0 if self.gemma else 0.0
            if residual is None:
                return torch.ops.irfuse.rms_norm(x, self.weight, self.eps, offset)
            out, res = torch.ops.irfuse.add_rms_norm(x, residual, self.weight, self.eps, offset)
            return out, res
        return getattr(self, f"_{self.style}")(x, residual)

    def _vllm(self, x, residual):
        dtype = x.dtype
        x = x.to(torch.float32)
        if residual is not None:
            x = x + residual.to(torch.float32)
            residual = x.to(dtype)
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        if self.gemma:
            x = (x * (1.0 + self.weight.float())).to(dtype)
        else:
            x = x.to(dtype) * self.weight
        return x if residual is None else (x, residual)

    def _hf(self, x, residual):
        if residual is not None:
            x = x + residual
            residual = x
        input_dtype = x.dtype
        h = x.to(torch.float32)
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.eps)
        if self.gemma:
            out = (h * (1.0 + self.weight.float())).type_as(x)
        else:
            out = self.weight * h.to(input_dtype)
        return out if residual is None else (out, residual)

    def _square(self, x, residual):
        dtype = x.dtype
        h = x.float()
        if residual is not None:
            h = h + residual.float()
            residual = h.to(dtype)
        mean_sq = (h * h).sum(dim=-1, keepdim=True) / self.size
        h = h * (1.0 / torch.sqrt(mean_sq + self.eps))
        w = 1.0 + self.weight.float() if self.gemma else self.weight.float()
        out = (h * w).to(dtype)
        return out if residual is None else (out, residual)

    def _functional(self, x, residual):
        if residual is not None:
            x = x + residual
            residual = x
        if self.gemma:
            h = F.rms_norm(x.float(), (self.size,), eps=self.eps)
            out = (h * (1.0 + self.weight.float())).to(x.dtype)
        else:
            out = F.rms_norm(x, (self.size,), self.weight, self.eps)
        return out if residual is None else (out, residual)


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float,
                       residual: torch.Tensor | None = None, gemma: bool = False
                       ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """RMSNorm as docs/numerics.md defines it (vLLM's reference), for tests."""
    dtype = x.dtype
    h = x.float()
    if residual is not None:
        h = h + residual.float()
        residual = h.to(dtype)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    w = 1.0 + weight.float() if gemma else weight
    y = (h * w).to(dtype) if gemma else h.to(dtype) * w
    return y, residual


# --- SiLU·Mul ----------------------------------------------------------------------------------


def silu_mul(x: torch.Tensor, style: str) -> torch.Tensor:
    """silu(x[..., :d]) * x[..., d:] with d = x.shape[-1] // 2, spelled as `style` says: the
    slices, `chunk`, `split`, `a * sigmoid(a) * b`, or the custom op (separate gate/up
    projections live in the MLP that owns them)."""
    if style == "custom_op":
        return torch.ops.irfuse.silu_mul(x)
    d = x.shape[-1] // 2
    if style == "slice":
        return F.silu(x[..., :d]) * x[..., d:]
    if style == "chunk":
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up
    if style == "split":
        gate, up = torch.split(x, [d, d], dim=-1)
        return F.silu(gate) * up
    if style == "sigmoid":
        gate, up = x[..., :d], x[..., d:]
        return gate * torch.sigmoid(gate) * up
    raise ValueError(f"silu_mul style {style!r} (separate projections live in the MLP)")


# --- RoPE --------------------------------------------------------------------------------------


def _inv_freq(rotary_dim: int, base: float, device: torch.device) -> torch.Tensor:
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.float32, device=device) / rotary_dim
    return 1.0 / (base ** exponents)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int,
            is_neox: bool) -> torch.Tensor:
    """Rotate x [T, heads, head_dim] with cos/sin [T, rotary_dim / 2] (vLLM's layout)."""
    x_rot = x[..., :rotary_dim]
    cos = cos.unsqueeze(-2)
    sin = sin.unsqueeze(-2)
    if is_neox:
        x1, x2 = torch.chunk(x_rot, 2, dim=-1)
    else:
        x1, x2 = x_rot[..., ::2], x_rot[..., 1::2]
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    out = torch.cat((o1, o2), dim=-1) if is_neox else torch.stack((o1, o2), dim=-1).flatten(-2)
    if rotary_dim < x.shape[-1]:
        out = torch.cat((out, x[..., rotary_dim:]), dim=-1)
    return out


class RotaryEmbedding(nn.Module):
    """RoPE with a `cos_sin_cache` [max_positions, rotary_dim] indexed by positions (vLLM).

    `forward(positions, q, k)` takes q [T, Hq, head_dim] and k [T, Hk, head_dim] and returns
    them rotated; dims past `rotary_dim` pass through.
    """

    def __init__(self, head_dim: int, rotary_dim: int, max_positions: int, base: float,
                 is_neox: bool, *, index: str = "index", dtype: torch.dtype,
                 device: torch.device) -> None:
        super().__init__()
        self.head_dim, self.rotary_dim, self.is_neox, self.index = (
            head_dim, rotary_dim, is_neox, index)
        inv_freq = _inv_freq(rotary_dim, base, device)
        t = torch.arange(max_positions, dtype=torch.float32, device=device)
        freqs = torch.outer(t, inv_freq)
        cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(dtype)
        self.register_buffer("cos_sin_cache", cache, persistent=False)

    def forward(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.index == "index_select":
            cos_sin = self.cos_sin_cache.index_select(0, positions)
        else:
            cos_sin = self.cos_sin_cache[positions]
        cos, sin = cos_sin.chunk(2, dim=-1)
        return (_rotate(q, cos, sin, self.rotary_dim, self.is_neox),
                _rotate(k, cos, sin, self.rotary_dim, self.is_neox))


class HFRotaryEmbedding(nn.Module):
    """Makes cos/sin [T, rotary_dim] from positions, once per forward, as HF models do."""

    def __init__(self, rotary_dim: int, base: float, is_neox: bool, *, device: torch.device
                 ) -> None:
        super().__init__()
        self.rotary_dim, self.is_neox = rotary_dim, is_neox
        self.register_buffer("inv_freq", _inv_freq(rotary_dim, base, device), persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype
                ) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        if self.is_neox:
            emb = torch.cat((freqs, freqs), dim=-1)
        else:
            emb = torch.repeat_interleave(freqs, 2, dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _rotate_every_two(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_hf_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                    is_neox: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's `apply_rotary_pos_emb` on q [T, Hq, D], k [T, Hk, D], cos/sin [T, rotary_dim]."""
    rotary_dim = cos.shape[-1]
    cos = cos.unsqueeze(-2)
    sin = sin.unsqueeze(-2)
    rotate = _rotate_half if is_neox else _rotate_every_two

    def one(x: torch.Tensor) -> torch.Tensor:
        if rotary_dim == x.shape[-1]:
            return x * cos + rotate(x) * sin
        x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
        return torch.cat((x_rot * cos + rotate(x_rot) * sin, x_pass), dim=-1)

    return one(q), one(k)


# --- attention ---------------------------------------------------------------------------------


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gqa_style: str,
                     scale: float | None = None) -> torch.Tensor:
    """Causal SDPA over one sequence: q [T, Hq, D], k/v [T, Hk, D] -> [T, Hq * Dv], with
    `enable_gqa=True` or with K/V repeated as HF's `repeat_kv` does (`gqa_style`)."""
    num_tokens, num_heads = q.shape[0], q.shape[1]
    q = q.transpose(0, 1).unsqueeze(0)
    k = k.transpose(0, 1).unsqueeze(0)
    v = v.transpose(0, 1).unsqueeze(0)
    if gqa_style == "repeat_kv":
        k, v = repeat_kv(k, num_heads // k.shape[1]), repeat_kv(v, num_heads // v.shape[1])
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    else:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale,
                                             enable_gqa=k.shape[1] != num_heads)
    return out.squeeze(0).transpose(0, 1).reshape(num_tokens, -1)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """[B, Hk, T, D] -> [B, Hk * n_rep, T, D], each kv head repeated n_rep times (HF)."""
    if n_rep == 1:
        return x
    b, hk, t, d = x.shape
    return x[:, :, None, :, :].expand(b, hk, n_rep, t, d).reshape(b, hk * n_rep, t, d)


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)
