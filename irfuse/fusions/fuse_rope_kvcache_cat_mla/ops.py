"""The kernel of MLA's RoPE -> latent-cache write, `rope_mla_kv_cache_write`, and how
`fused.rope_mla_kv_cache_write` lowers to it: q_pe `[T, H, R]`, k_pe `[T, 1, R]` (or `[T, R]`),
kv_c `[T, L]`, the rope table as positions + `cos_sin_cache` or cos and sin, the cache
`[blocks, block_size, L + R]` in the model dtype (written in place at `slot_mapping`, slots < 0
skipped), `is_neox`, `rotary_dim`, `rope_f32`; returns the rotated q_pe and k_pe in their
layouts. The Triton kernel (`irfuse/kernels/mla_rope_cache.py`, on qk_norm_rope's rotation) and
its torch reference (`mla_rope_cache_ref.py`, the CPU path).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from xdsl.ir import Operation

from irfuse.dialects import fused
from irfuse.fusions.kernel_call import InPlace, lower
from irfuse.fusions.kernel_decl import Call, Kernel, Written
from irfuse.kernels import dispatch, mla_rope_cache_ref, rope_rows
from irfuse.kernels.dispatch import kernels


def _rows(c: Call) -> tuple[Call, rope_rows.RowLayout, rope_rows.RowLayout]:
    """`c` with q_pe and k_pe as rows `[T, heads, R]` (and the tables, or the positions, as the
    kernel's rows), and their layouts (which restore the outputs)."""
    lq, lk = rope_rows.layouts(c.q_pe, c.k_pe, c.positions, c.cos)
    rows = Call(c, q_pe=lq.to_rows(c.q_pe), k_pe=lk.to_rows(c.k_pe),
                **rope_rows.table_args(lq, c.positions, c.cos, c.sin))
    return rows, lq, lk


def _on_rows(fn: Callable, c: Call) -> tuple[Tensor, Tensor]:
    """`fn` (the reference or the kernel) on the rows; outputs in q_pe's and k_pe's layouts."""
    rows, lq, lk = _rows(c)
    q_out, k_out = fn(**rows)
    return lq.restore(q_out), lk.restore(k_out)


def rope_mla_kv_cache_write(q_pe: Tensor, k_pe: Tensor, kv_c: Tensor, positions: Tensor | None,
                            cos_sin_cache: Tensor | None, cos: Tensor | None, sin: Tensor | None,
                            kv_cache: Written, slot_mapping: Tensor, is_neox: bool,
                            rotary_dim: int, rope_f32: bool = False) -> tuple[Tensor, Tensor]:
    return _on_rows(mla_rope_cache_ref.rope_mla_kv_cache_write, Call(locals()))


def _cuda(c: Call) -> tuple[Tensor, Tensor]:
    fn = (kernels("mla_rope_cache").rope_mla_kv_cache_write
          if dispatch.use_triton(ROPE_MLA_KV, c.q_pe)
          else mla_rope_cache_ref.rope_mla_kv_cache_write)
    return _on_rows(fn, c)


def _fake(c: Call) -> tuple[Tensor, Tensor]:
    rows, lq, lk = _rows(c)
    mla_rope_cache_ref.check_args(rows.q_pe, rows.k_pe, rows.kv_c, rows.cos, rows.sin,
                                  rows.positions, rows.cos_sin_cache, rows.kv_cache,
                                  rows.slot_mapping, rows.rotary_dim)
    return lq.empty(c.q_pe), lk.empty(c.k_pe)


def _examples(shape: tuple[int, ...]) -> list[tuple]:
    """q_pe `[T, 4, D]` for `shape` `(T, D)`, k_pe `[T, 1, D]`, a latent of 2 * D, a cache of
    4 blocks of 4; NeoX with positions (k_pe as `[T, D]`), GPT-J on half the dims with
    half-width cos / sin `[T, 1, D / 4]`."""
    t, d = shape[0], shape[-1]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(t, 4, d, generator=g).to(torch.bfloat16)
    k = torch.randn(t, 1, d, generator=g).to(torch.bfloat16)
    kv_c = torch.randn(t, 2 * d, generator=g).to(torch.bfloat16)
    positions = torch.randint(0, 64, (t,), generator=g)
    table = torch.randn(64, d, generator=g).to(torch.bfloat16)
    cos = torch.randn(t, 1, d // 4, generator=g)
    cache = torch.zeros(4, 4, 3 * d, dtype=torch.bfloat16)
    slots = torch.randperm(16, generator=g)[:t]
    return [(q, k[:, 0], kv_c, positions, table, None, None, cache, slots, True, d),
            (q, k, kv_c, None, None, cos, cos.flip(0), cache, slots, False, d // 2, True)]


ROPE_MLA_KV = Kernel(rope_mla_kv_cache_write, _fake, _cuda, examples=_examples)

KERNELS = (ROPE_MLA_KV,)


def _lower(op: Operation, platform: str) -> InPlace:
    # Own lowering: the kernel writes the cache in place (the op's third result is that operand).
    assert isinstance(op, fused.RopeMlaKvCacheWriteOp)
    call = lower(ROPE_MLA_KV, op, platform, result_types=[op.q_out.type, op.k_out.type])
    return InPlace(call, (call.results[0], call.results[1], op.kv_cache))


LOWERINGS = {fused.RopeMlaKvCacheWriteOp.name: _lower}
