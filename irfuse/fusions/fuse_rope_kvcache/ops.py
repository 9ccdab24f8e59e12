"""The kernels of RoPE (after the per-head norms, where fused) -> paged KV-cache write, and how
`fused.rope_kv_cache_write` lowers to them.

`rope_kv_cache_write` writes the rotated k and v into `k_cache` / `v_cache` in place (slots < 0
skipped, as vLLM pads) and returns the rotated q. Separate key and value caches
`[num_blocks, block_size, kv_heads, head_dim]` in the model dtype, or in FP8 with `k_scale` /
`v_scale` (rows stored as `clamp(x / scale)`). `rope_kv_cache_write_flash`: the same on vLLM's
FlashAttention layout, one `[2, num_blocks, block_size, kv_heads, head_dim]` cache whose halves
are the key and value caches.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from xdsl.ir import Operation

from irfuse.dialects import fused
from irfuse.fusions.kernel_call import InPlace, lower
from irfuse.fusions.kernel_decl import Call, Kernel, Written
from irfuse.kernels import dispatch, qk_norm_rope_ref, rope_rows
from irfuse.kernels.dispatch import kernels


def _on_rows(fn: Callable, c: Call) -> Tensor:
    """`fn` (the reference or the kernel) with the cos / sin tables (or the positions) as the
    kernel's rows."""
    lq, _ = rope_rows.layouts(c.q, c.k, c.positions, c.cos)
    rows = Call(c)
    if c.cos is not None:
        rows["cos"], rows["sin"] = rope_rows.table_rows(c.cos, lq), rope_rows.table_rows(c.sin, lq)
    else:
        rows["positions"] = c.positions.reshape(-1)
    return fn(**rows)


def rope_kv_cache_write(q: Tensor, k: Tensor, v: Tensor, q_weight: Tensor | None,
                        k_weight: Tensor | None, positions: Tensor | None,
                        cos_sin_cache: Tensor | None, cos: Tensor | None, sin: Tensor | None,
                        k_cache: Written, v_cache: Written, slot_mapping: Tensor, is_neox: bool,
                        rotary_dim: int, eps: float = 0.0, weight_offset: float = 0.0,
                        weight_f32: bool = False, rope_f32: bool = False,
                        k_scale: Tensor | None = None, v_scale: Tensor | None = None) -> Tensor:
    return _on_rows(qk_norm_rope_ref.qk_norm_rope_kv, Call(locals()))


def _cuda(c: Call) -> Tensor:
    fn = (kernels("qk_norm_rope").qk_norm_rope_kv if dispatch.use_triton(ROPE_KV, c.q)
          else qk_norm_rope_ref.qk_norm_rope_kv)
    return _on_rows(fn, c)


def _fake(c: Call) -> Tensor:
    return torch.empty_like(c.q, memory_format=torch.contiguous_format)


def _examples(shape: tuple[int, ...]) -> list[tuple]:
    """q `[T, 4, D]` for `shape` `(T, D)`, k and v with 2 heads, caches of 4 blocks of 4."""
    t, d = shape[0], shape[-1]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(t, 4, d, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(t, 2, d, generator=g).to(torch.bfloat16) for _ in range(2))
    w = (torch.rand(d, generator=g) + 0.5).to(torch.bfloat16)
    positions = torch.randint(0, 64, (t,), generator=g)
    cache = torch.randn(64, d, generator=g).to(torch.bfloat16)
    caches = [torch.zeros(4, 4, 2, d, dtype=torch.bfloat16) for _ in range(2)]
    slots = torch.randperm(16, generator=g)[:t]
    return [(q, k, v, None, None, positions, cache, None, None, *caches, slots, True, d),
            (q, k, v, w, w, positions, cache[:, : d // 2], None, None, *caches, slots, False,
             d // 2, 1e-6)]


ROPE_KV = Kernel(rope_kv_cache_write, _fake, _cuda, examples=_examples)


def _halves(c: Call) -> Call:
    """`c` on one FlashAttention-layout cache `[2, blocks, block_size, heads, head_dim]` as the
    separate caches' call: its two halves, views, so the writes land in it."""
    kv_cache = c.pop("kv_cache")
    if kv_cache.dim() != 5 or kv_cache.shape[0] != 2:
        raise ValueError(f"irfuse: {ROPE_KV_FLASH.name}: kv_cache must be [2, num_blocks, "
                         f"block_size, kv_heads, head_dim], not {list(kv_cache.shape)}")
    return Call(c, k_cache=kv_cache[0], v_cache=kv_cache[1])


def rope_kv_cache_write_flash(q: Tensor, k: Tensor, v: Tensor, q_weight: Tensor | None,
                              k_weight: Tensor | None, positions: Tensor | None,
                              cos_sin_cache: Tensor | None, cos: Tensor | None,
                              sin: Tensor | None, kv_cache: Written, slot_mapping: Tensor,
                              is_neox: bool, rotary_dim: int, eps: float = 0.0,
                              weight_offset: float = 0.0, weight_f32: bool = False,
                              rope_f32: bool = False, k_scale: Tensor | None = None,
                              v_scale: Tensor | None = None) -> Tensor:
    return rope_kv_cache_write(**_halves(Call(locals())))


def _flash_examples(shape: tuple[int, ...]) -> list[tuple]:
    """`_examples` with one `[2, 4, 4, 2, D]` cache in place of the two."""
    return [(*args[:9], torch.zeros(2, *args[9].shape, dtype=args[9].dtype), *args[11:])
            for args in _examples(shape)]


ROPE_KV_FLASH = Kernel(rope_kv_cache_write_flash, lambda c: _fake(_halves(c)),
                       lambda c: _cuda(_halves(c)), examples=_flash_examples)

KERNELS = (ROPE_KV, ROPE_KV_FLASH)


def _lower(op: Operation, platform: str) -> InPlace:
    # Own lowering: the kernel writes the caches in place (its results are the op's first), and
    # a FlashAttention-layout cache is one kernel argument for the op's two cache operands.
    assert isinstance(op, fused.RopeKvCacheWriteOp)
    flash = op.k_cache.type.rank == 5  # type: ignore[attr-defined]
    call = lower(ROPE_KV_FLASH if flash else ROPE_KV, op, platform,
                 {"kv_cache": op.k_cache}, result_types=[op.q_out.type])
    return InPlace(call, (call.results[0], op.k_cache, op.v_cache))


LOWERINGS = {fused.RopeKvCacheWriteOp.name: _lower}
