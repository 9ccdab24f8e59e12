"""Torch reference of MLA attention (DeepSeek-V2/V3 prefill) whose output is quantized to FP8
(static per-tensor scale) or NVFP4: the unfused graph of `attn.mla_attention` -> `quant.fp8`
(or `quant.nvfp4`), literally.

The latent `kv_c` is up-projected by kv_b's weight `[H * (nope + v), rank]` (one GEMM in the
model dtype, as the model computes it), split per head into `k_nope` and `v`; the key is
`[k_nope | k_pe]` with the one roped `k_pe` shared by all heads; SDPA in the model dtype; the
output, token-major and flattened to `[tokens, H * v]`, is quantized as `quant_ref` does
(`divide`: `x / s`, else `x * (1 / s)`; NVFP4: `quant_ref.quant_nvfp4`).

Layouts (those of `attn.mla_attention`):
- token-major (vLLM's): q `[T, H, nope + rope]`, kv_c `[T, rank]`, k_pe `[T, 1, rope]`, one
  sequence, no mask; output `[T, H * v]`.
- batch-major (Hugging Face's SDPA layout): q `[B, H, L, nope + rope]`, kv_c `[B, 1, Lk, rank]`,
  k_pe `[B, 1, Lk, rope]`, an optional bool or additive mask broadcasting to `[B, H, L, Lk]`;
  output `[B * L, H * v]`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from irfuse.kernels import quant_ref

ATTN_DTYPES: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16)


def check_mla_args(q: torch.Tensor, kv_c: torch.Tensor, k_pe: torch.Tensor,
                   kv_b_weight: torch.Tensor, num_heads: int, nope: int, v_dim: int,
                   batch_major: bool) -> None:
    """The argument errors of the MLA kernels (ValueError): ranks, head split, dtypes."""
    rank = kv_b_weight.shape[-1]
    if kv_b_weight.dim() != 2 or kv_b_weight.shape[0] != num_heads * (nope + v_dim):
        raise ValueError(f"irfuse: kv_b_weight must be [{num_heads} * ({nope} + {v_dim}), rank], "
                         f"got {tuple(kv_b_weight.shape)}")
    want = (4, 4, 4) if batch_major else (3, 2, 3)
    if (q.dim(), kv_c.dim(), k_pe.dim()) != want:
        layout = "batch-major" if batch_major else "token-major"
        raise ValueError(f"irfuse: {layout} MLA takes q, kv_c, k_pe of ranks {want}, got "
                         f"{(q.dim(), kv_c.dim(), k_pe.dim())}")
    heads = q.shape[1]
    rope = k_pe.shape[-1]
    if heads != num_heads or q.shape[-1] != nope + rope or kv_c.shape[-1] != rank:
        raise ValueError(f"irfuse: MLA shapes do not match: q {tuple(q.shape)}, kv_c "
                         f"{tuple(kv_c.shape)}, k_pe {tuple(k_pe.shape)}, kv_b_weight "
                         f"{tuple(kv_b_weight.shape)}, {num_heads} heads, nope {nope}")
    for name, t in (("kv_c", kv_c), ("k_pe", k_pe), ("kv_b_weight", kv_b_weight)):
        if q.dtype not in ATTN_DTYPES or t.dtype != q.dtype:
            raise ValueError(f"irfuse: MLA takes bfloat16 or float16 q, kv_c, k_pe and kv_b "
                             f"weight of one dtype, got q {q.dtype}, {name} {t.dtype}")


def up_project(kv_c: torch.Tensor, kv_b_weight: torch.Tensor, num_heads: int,
               batch_major: bool) -> torch.Tensor:
    """kv_b's GEMM: `[tokens, H, nope + v]` (token-major) or `[B, H, Lk, nope + v]`."""
    rank = kv_b_weight.shape[-1]
    kv = kv_c.reshape(-1, rank) @ kv_b_weight.t()
    if not batch_major:
        return kv.view(kv_c.shape[0], num_heads, -1)
    b, lk = kv_c.shape[0], kv_c.shape[-2]
    return kv.view(b, lk, num_heads, -1).transpose(1, 2)


def mla_attention(q: torch.Tensor, kv_c: torch.Tensor, k_pe: torch.Tensor,
                  kv_b_weight: torch.Tensor, mask: torch.Tensor | None, *, num_heads: int,
                  nope: int, v_dim: int, softmax_scale: float, causal: bool,
                  batch_major: bool) -> torch.Tensor:
    """MLA in the model dtype, token-major and flattened: `[tokens, H * v]`."""
    check_mla_args(q, kv_c, k_pe, kv_b_weight, num_heads, nope, v_dim, batch_major)
    if not batch_major and mask is not None:
        raise ValueError("irfuse: token-major MLA takes no mask")
    kv = up_project(kv_c, kv_b_weight, num_heads, batch_major)
    k_nope, v = kv.split([nope, v_dim], dim=-1)
    if batch_major:
        k = torch.cat([k_nope, k_pe.expand(-1, num_heads, -1, -1)], dim=-1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                           scale=softmax_scale)
        b, h, lq, dv = o.shape
        return o.transpose(1, 2).reshape(b * lq, h * dv)
    k = torch.cat([k_nope, k_pe.expand(-1, num_heads, -1)], dim=-1)
    o = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                       v.transpose(0, 1)[None], is_causal=causal,
                                       scale=softmax_scale)
    return o[0].transpose(0, 1).reshape(q.shape[0], num_heads * v_dim)


def mla_attention_fp8(q: torch.Tensor, kv_c: torch.Tensor, k_pe: torch.Tensor,
                      kv_b_weight: torch.Tensor, mask: torch.Tensor | None,
                      scale_out: torch.Tensor, *, num_heads: int, nope: int, v_dim: int,
                      softmax_scale: float, causal: bool, batch_major: bool,
                      out_dtype: torch.dtype = torch.float8_e4m3fn,
                      divide: bool = False) -> torch.Tensor:
    """quant(MLA): `[tokens, H * v]` in `out_dtype`; arguments as the module docstring."""
    o = mla_attention(q, kv_c, k_pe, kv_b_weight, mask, num_heads=num_heads, nope=nope,
                      v_dim=v_dim, softmax_scale=softmax_scale, causal=causal,
                      batch_major=batch_major)
    return quant_ref.quant_fp8_static(o, scale_out, out_dtype, divide)


def mla_attention_nvfp4(q: torch.Tensor, kv_c: torch.Tensor, k_pe: torch.Tensor,
                        kv_b_weight: torch.Tensor, mask: torch.Tensor | None,
                        global_scale: torch.Tensor, *, num_heads: int, nope: int, v_dim: int,
                        softmax_scale: float, causal: bool, batch_major: bool,
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 of MLA: (packed uint8 `[tokens, H * v / 2]`, swizzled block scales), as
    `quant_ref.quant_nvfp4` gives them; arguments as `mla_attention_fp8`."""
    o = mla_attention(q, kv_c, k_pe, kv_b_weight, mask, num_heads=num_heads, nope=nope,
                      v_dim=v_dim, softmax_scale=softmax_scale, causal=causal,
                      batch_major=batch_major)
    return quant_ref.quant_nvfp4(o, global_scale)
