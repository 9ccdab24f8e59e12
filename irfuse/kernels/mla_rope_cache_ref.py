"""Torch reference of MLA's RoPE of q_pe and k_pe with the latent-cache write of
`[kv_c | rotated k_pe]` (vLLM's `concat_and_cache_mla_rope_fused`).

- q_pe `[T, H, R]`, k_pe `[T, 1, R]` (one rope key shared by the heads), any strides, one dtype
  of bf16 / fp16 / fp32; kv_c `[T, L]` of that dtype.
- RoPE exactly as `qk_norm_rope_ref.rope_heads` (NeoX halves or GPT-J pairs over the first
  `rotary_dim` dims, the rest passed through; tables from `positions` + `cos_sin_cache` or from
  `cos`, `sin`; products rounded in the model dtype, or in float32 once with `rope_f32`), so it
  equals the unfused rope bit for bit in the spellings that module names.
- The row `cat([kv_c, k_rot], -1)` goes to `kv_cache [num_blocks, block_size, L + R]` at
  `slot_mapping` (slot s: block s // block_size, row s % block_size; slots < 0 skipped, vLLM's
  padding), in place: in the model dtype, or into a float8_e4m3fn cache with `k_scale` as
  `clamp(row / k_scale, -448, 448)` (vLLM's `concat_and_cache_mla` with an "fp8" cache).

Returns the rotated q_pe and k_pe, new and contiguous. Errors are ValueErrors naming what is wrong.
"""

from __future__ import annotations

import torch

from irfuse.kernels.qk_norm_rope_ref import FP8, rope_heads, rope_tables, to_cache
from irfuse.kernels.qk_norm_rope_ref import check_args as check_rope_args


def _fail(msg: str) -> None:
    raise ValueError(f"irfuse: rope_mla_kv_cache_write: {msg}")


def check_args(q_pe, k_pe, kv_c, cos, sin, positions, cos_sin_cache, kv_cache, slot_mapping,
               rotary_dim: int, k_scale=None) -> None:
    """Validate the arguments (shapes and dtypes only: no device sync)."""
    shapes = check_rope_args(q_pe, k_pe, None, None, cos, sin, positions, cos_sin_cache,
                             rotary_dim)
    if shapes.kv_heads != 1:
        _fail(f"k_pe must have one head ([T, 1, R]), not {shapes.kv_heads}")
    t = shapes.tokens
    if not isinstance(kv_c, torch.Tensor) or kv_c.dim() != 2 or kv_c.shape[0] != t:
        _fail(f"kv_c must be a [{t}, kv_lora_rank] tensor")
    if kv_c.dtype != q_pe.dtype:
        _fail(f"kv_c's dtype {kv_c.dtype} is not q_pe's {q_pe.dtype}")
    width = kv_c.shape[1] + shapes.head_dim
    if (not isinstance(kv_cache, torch.Tensor) or kv_cache.dim() != 3
            or kv_cache.shape[2] != width):
        _fail(f"kv_cache must be a [num_blocks, block_size, {width}] tensor")
    if kv_cache.dtype == FP8:
        if (not isinstance(k_scale, torch.Tensor) or k_scale.numel() != 1 or k_scale.dim() > 1
                or k_scale.dtype != torch.float32):
            _fail("an FP8 cache needs k_scale as a float32 tensor of shape [] or [1]")
    elif kv_cache.dtype != q_pe.dtype:
        _fail(f"kv_cache holds {kv_cache.dtype}: neither the model dtype ({q_pe.dtype}) nor "
              f"{FP8}")
    if (not isinstance(slot_mapping, torch.Tensor) or slot_mapping.dim() != 1
            or slot_mapping.dtype not in (torch.int64, torch.int32)):
        _fail("slot_mapping must be a 1-D int64 (or int32) tensor")
    if slot_mapping.shape[0] != t:
        _fail(f"slot_mapping has {slot_mapping.shape[0]} entries for {t} tokens")


def rope_mla_kv_cache_write(q_pe, k_pe, kv_c, cos, sin, positions, cos_sin_cache, kv_cache,
                            slot_mapping, *, is_neox: bool, rotary_dim: int,
                            rope_f32: bool = False, k_scale: torch.Tensor | None = None
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE of q_pe and k_pe, and `[kv_c | rotated k_pe]` into kv_cache at slot_mapping (in
    place; slots < 0 skipped; an FP8 cache scaled by k_scale): returns (q_out, k_out),
    contiguous (module docstring)."""
    check_args(q_pe, k_pe, kv_c, cos, sin, positions, cos_sin_cache, kv_cache, slot_mapping,
               rotary_dim, k_scale)
    c, s = rope_tables(cos, sin, positions, cos_sin_cache, rotary_dim)
    q_out = rope_heads(q_pe, c, s, is_neox=is_neox, rotary_dim=rotary_dim,
                       rope_f32=rope_f32).contiguous()
    k_out = rope_heads(k_pe, c, s, is_neox=is_neox, rotary_dim=rotary_dim,
                       rope_f32=rope_f32).contiguous()
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].long()
    rows = torch.cat([kv_c, k_out[:, 0]], dim=-1)[keep]
    block_size = kv_cache.shape[1]
    kv_cache[slots // block_size, slots % block_size] = to_cache(rows, kv_cache.dtype, k_scale)
    return q_out, k_out
