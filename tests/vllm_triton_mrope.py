"""A stand-in for vLLM's CUDA multimodal RoPE kernel, so that tests can build the graph vLLM's
`MRotaryEmbedding.forward_cuda` gives its passes without vLLM installed.

`_triton_mrope_forward` takes vLLM's parameter list (`vllm/model_executor/layers/rotary_embedding/
mrope.py`, vLLM 0.32) and is named as vLLM's kernel, which is how irfuse recognizes its calls;
the body is our own: for each token, channel j of the rotary half takes cos and sin from the
position row (temporal, height, width) its section names, and q and k (bf16) rotate in place,
every product and sum rounded to bf16 as vLLM's kernel computes in the model dtype, NeoX
(halves) or GPT-J (even / odd pairs). `triton_mrope` launches it as vLLM does;
`functional_call` is the call Dynamo and aot_autograd make of that launch.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch._higher_order_ops.triton_kernel_wrap import (
    kernel_side_table,
    triton_kernel_wrapper_functional,
)

MODULE = "vllm.model_executor.layers.rotary_embedding.mrope"


def _triton_mrope_forward(q_ptr, k_ptr, cos, sin, num_tokens, q_token_stride, k_token_stride,
                          n_qh: tl.constexpr, n_kh: tl.constexpr, hd: tl.constexpr,
                          rd: tl.constexpr, pad_n_qh: tl.constexpr, pad_n_kh: tl.constexpr,
                          pad_rd: tl.constexpr, mrope_section_t: tl.constexpr,
                          mrope_section_h: tl.constexpr, mrope_section_w: tl.constexpr,
                          is_interleaved: tl.constexpr, is_neox_style: tl.constexpr):
    token = tl.program_id(0)
    j = tl.arange(0, pad_rd // 2)
    valid = j < rd // 2
    if is_interleaved:
        row = tl.where((j % 3 == 1) & (j < 3 * mrope_section_h), 1, 0)
        row = tl.where((j % 3 == 2) & (j < 3 * mrope_section_w), 2, row)
    else:
        row = (j >= mrope_section_t).to(tl.int32) + (
            j >= mrope_section_t + mrope_section_h).to(tl.int32)
    at = row * num_tokens * (rd // 2) + token * (rd // 2) + j
    c = tl.load(cos + at, mask=valid, other=0).to(tl.float32)[None, :]
    s = tl.load(sin + at, mask=valid, other=0).to(tl.float32)[None, :]
    _rotate_heads(q_ptr + token * q_token_stride, c, s, j, valid, n_qh, pad_n_qh, hd, rd,
                  is_neox_style)
    _rotate_heads(k_ptr + token * k_token_stride, c, s, j, valid, n_kh, pad_n_kh, hd, rd,
                  is_neox_style)


@triton.jit
def _rotate_heads(base, c, s, j, valid, heads: tl.constexpr, pad: tl.constexpr,
                  hd: tl.constexpr, rd: tl.constexpr, is_neox_style: tl.constexpr):
    h = tl.arange(0, pad)[:, None]
    mask = (h < heads) & valid[None, :]
    if is_neox_style:
        first = h * hd + j[None, :]
        second = first + rd // 2
    else:
        first = h * hd + 2 * j[None, :]
        second = first + 1
    x1 = tl.load(base + first, mask=mask, other=0).to(tl.float32)
    x2 = tl.load(base + second, mask=mask, other=0).to(tl.float32)
    tl.store(base + first, _round(_round(x1 * c) - _round(x2 * s)), mask=mask)
    tl.store(base + second, _round(_round(x2 * c) + _round(x1 * s)), mask=mask)


@triton.jit
def _round(x):
    """f32 x rounded to the nearest bf16 (ties to even), as each product and sum of the
    rotation is. By its bits: Triton's interpreter multiplies bf16 wrongly and converts f32 to
    bf16 by truncation."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


_triton_mrope_forward.__module__ = MODULE
KERNEL = triton.jit(_triton_mrope_forward)


def _launch_args(q: torch.Tensor, k: torch.Tensor, head_size: int, rotary_dim: int,
                 sections: tuple[int, int, int], interleaved: bool, is_neox: bool) -> dict:
    """The kernel's arguments other than the four tensors and the token count."""
    return {"q_token_stride": q.stride(0), "k_token_stride": k.stride(0),
            "n_qh": q.shape[1] // head_size, "n_kh": k.shape[1] // head_size, "hd": head_size,
            "rd": rotary_dim, "pad_n_qh": triton.next_power_of_2(q.shape[1] // head_size),
            "pad_n_kh": triton.next_power_of_2(k.shape[1] // head_size),
            "pad_rd": triton.next_power_of_2(rotary_dim), "mrope_section_t": sections[0],
            "mrope_section_h": sections[1], "mrope_section_w": sections[2],
            "is_interleaved": interleaved, "is_neox_style": is_neox}


def triton_mrope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 sections: tuple[int, int, int], head_size: int, rotary_dim: int,
                 interleaved: bool, is_neox: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's `triton_mrope`: q `[T, Hq * D]`, k `[T, Hk * D]` rotated in place by cos and sin
    `[3, T, rotary_dim / 2]`."""
    cos, sin = cos.contiguous(), sin.contiguous()
    KERNEL[(q.shape[0],)](q, k, cos, sin, q.shape[0],
                          **_launch_args(q, k, head_size, rotary_dim, sections, interleaved,
                                         is_neox))
    return q, k


def functional_call(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                    sections: tuple[int, int, int], head_size: int, rotary_dim: int,
                    interleaved: bool, is_neox: bool, kernel=KERNEL
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """`triton_mrope` as the functionalized call aot_autograd records (the token count a
    tensor-side argument, as Dynamo passes a symbolic size): new q and k. `kernel`: this
    stand-in, or vLLM's own."""
    kidx = kernel_side_table.add_kernel(kernel)
    cidx = kernel_side_table.add_constant_args(
        _launch_args(q, k, head_size, rotary_dim, sections, interleaved, is_neox))
    out = triton_kernel_wrapper_functional(
        kernel_idx=kidx, constant_args_idx=cidx, grid=[(q.shape[0], 1, 1)],
        tma_descriptor_metadata={},
        kwargs={"q_ptr": q, "k_ptr": k, "cos": cos.contiguous(), "sin": sin.contiguous(),
                "num_tokens": q.shape[0]},
        tensors_to_clone=["q_ptr", "k_ptr"])
    return out["q_ptr"], out["k_ptr"]
