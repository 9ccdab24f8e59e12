"""Torch reference of MLA's paired RMSNorms: the q latent and the kv latent, one call.

DeepSeek-V2/V3 (with `q_lora_rank`) split one projection into `q_c` and `kv_lora`, then
`kv_lora` into `kv_c` and `k_pe`, and normalize `q_c` (`q_a_layernorm`) and `kv_c`
(`kv_a_layernorm`). Each output is the RMSNorm of docs/numerics.md over its last dim, with
its own eps: `x32 = x.float()`, `n = x32 * rsqrt(mean(x32²) + eps)`, then `n.to(dtype) * weight`
(the product in the model dtype: vLLM's and Hugging Face's spelling), or, with `weight_f32` or a
nonzero `weight_offset`, `(n * (weight.float() + weight_offset)).to(dtype)` (one rounding:
`F.rms_norm`'s, Gemma's). Written with the torch ops of those spellings, so it equals the unfused
norms bit for bit (`tests/kernels/test_mla_dual_norm_kernel.py`). The inputs may be strided
slices of the projection; the outputs are new contiguous tensors in the input dtype.
"""

from __future__ import annotations

import torch

from irfuse.kernels import norm_quant_ref
from irfuse.kernels.qk_norm_rope_ref import rms_norm_heads


def check_args(q: torch.Tensor, q_weight: torch.Tensor, kv: torch.Tensor,
               kv_weight: torch.Tensor) -> None:
    """ValueError unless q and kv are float tensors of one dtype and the same leading dims, each
    with a weight of its last dim."""
    norm_quant_ref.check_norm_args(q, q_weight, None)
    norm_quant_ref.check_norm_args(kv, kv_weight, None)
    if kv.dtype != q.dtype:
        raise ValueError(f"irfuse: mla_dual_rms_norm: q is {q.dtype} but kv {kv.dtype}")
    if q.shape[:-1] != kv.shape[:-1]:
        raise ValueError(f"irfuse: mla_dual_rms_norm: q {tuple(q.shape)} and kv "
                         f"{tuple(kv.shape)} differ in their leading dims")


def mla_dual_rms_norm(q: torch.Tensor, q_weight: torch.Tensor, kv: torch.Tensor,
                      kv_weight: torch.Tensor, q_eps: float, kv_eps: float,
                      weight_offset: float = 0.0, weight_f32: bool = False,
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """(RMSNorm of q, RMSNorm of kv), contiguous, in the input dtype (module docstring)."""
    check_args(q, q_weight, kv, kv_weight)
    return (rms_norm_heads(q, q_weight, q_eps, weight_offset, weight_f32).contiguous(),
            rms_norm_heads(kv, kv_weight, kv_eps, weight_offset, weight_f32).contiguous())
