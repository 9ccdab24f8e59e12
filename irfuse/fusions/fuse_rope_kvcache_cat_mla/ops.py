"""The kernels of MLA's RoPE -> latent-cache write, and how the fused ops lower to them.

`rope_mla_kv_cache_write` (`fused.rope_mla_kv_cache_write`): q_pe `[T, H, R]`, k_pe `[T, 1, R]`
(or `[T, R]`), kv_c `[T, L]`, the rope table as positions + `cos_sin_cache` or cos and sin, the
cache `[blocks, block_size, L + R]` in the model dtype (written in place at `slot_mapping`,
slots < 0 skipped), `is_neox`, `rotary_dim`, `rope_f32`; returns the rotated q_pe and k_pe in
their layouts. The Triton kernel (`irfuse/kernels/mla_rope_cache.py`, on qk_norm_rope's
rotation) and its torch reference (`mla_rope_cache_ref.py`, the CPU path).

`rope_vllm_mla_kv_cache_update` (`fused.rope_vllm_mla_kv_cache_update`): the same rotation, then
vLLM's own write of the layer's cache, found by the layer name in vLLM's forward context
(`irfuse.kernels.vllm_context`), as vLLM's `fused_rope_unified_mla_kv_cache_update` finds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import torch
from torch import Tensor
from xdsl.ir import Operation

from irfuse.dialects import fused
from irfuse.fusions.kernel_call import InPlace, Lowering, lower
from irfuse.fusions.kernel_decl import Call, Kernel, Opaque, Written
from irfuse.kernels import dispatch, mla_rope_cache_ref, qk_norm_rope_ref, rope_rows, vllm_context
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


# --- RoPE -> vLLM's own latent-cache write -----------------------------------------------------

LayerName = Annotated[Any, Opaque(vllm_context.layer_name_type())]
"""The layer-name argument: vLLM's `LayerName` or `str` (`irfuse.kernels.vllm_context`)."""


def _rotate(fn: Callable, c: Call) -> tuple[Tensor, Tensor]:
    """q_pe and k_pe rotated by `fn` (qk_norm_rope's reference or kernel, without norms), in
    their layouts."""
    rows, lq, lk = _rows(c)
    q_out, k_out = fn(rows.q_pe, rows.k_pe, None, None, rows.cos, rows.sin, rows.positions,
                      rows.cos_sin_cache, eps=0.0, is_neox=c.is_neox, rotary_dim=c.rotary_dim,
                      rope_f32=c.rope_f32)
    return lq.restore(q_out), lk.restore(k_out)


def rope_vllm_mla_kv_cache_update(q_pe: Tensor, k_pe: Tensor, kv_c: Tensor,
                                  positions: Tensor | None, cos_sin_cache: Tensor | None,
                                  cos: Tensor | None, sin: Tensor | None, k_scale: Tensor,
                                  layer_name: LayerName, kv_cache_dtype: str, is_neox: bool,
                                  rotary_dim: int, rope_f32: bool = False
                                  ) -> tuple[Tensor, Tensor, Tensor]:
    """RoPE of q_pe and k_pe, then vLLM's `unified_mla_kv_cache_update` of `[kv_c | rotated
    k_pe]` (any `kv_cache_dtype`: vLLM's write quantizes an FP8 cache with `k_scale`): the
    rotated q_pe and k_pe and vLLM's dummy. The CPU runs this, the unfused graph's bits."""
    c = Call(locals())
    q_out, k_out = _rotate(qk_norm_rope_ref.qk_norm_rope, c)
    dep = torch.ops.vllm.unified_mla_kv_cache_update(kv_c, k_out, layer_name, kv_cache_dtype,
                                                     k_scale)
    return q_out, k_out, dep


def _vllm_cuda(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    """One Triton launch that rotates and writes the cache in place where the layer's cache is
    one irfuse knows (`vllm_context.mla_cache`: the model dtype, or vLLM's FP8 scaled by the
    call's k_scale where its variant is measured on) and every token has a slot; else the Triton
    rope and vLLM's write."""
    ctx = vllm_context.attention_context(c.layer_name)
    slots = None if ctx.slot_mapping is None else ctx.slot_mapping.flatten()
    cache = None
    fp8_off = c.kv_cache_dtype != "auto" and not ROPE_VLLM_MLA_KV.runs_variant(
        vllm_context.FP8_CACHE, dispatch.platform_of(c.q_pe.device))
    if slots is not None and slots.numel() == c.kv_c.shape[0] and not fp8_off:
        cache = vllm_context.mla_cache(ctx.layer, ctx.kv_cache,
                                       c.kv_c.shape[-1] + c.k_pe.shape[-1], c.q_pe.dtype,
                                       c.kv_cache_dtype)
    if cache is None:
        q_out, k_out = _rotate(kernels("qk_norm_rope").qk_norm_rope, c)
        return q_out, k_out, torch.ops.vllm.unified_mla_kv_cache_update(
            c.kv_c, k_out, c.layer_name, c.kv_cache_dtype, c.k_scale)
    rows, lq, lk = _rows(c)
    q_out, k_out = kernels("mla_rope_cache").rope_mla_kv_cache_write(
        rows.q_pe, rows.k_pe, c.kv_c, rows.cos, rows.sin, rows.positions, rows.cos_sin_cache,
        cache, slots, is_neox=c.is_neox, rotary_dim=c.rotary_dim, rope_f32=c.rope_f32,
        k_scale=c.k_scale if c.kv_cache_dtype != "auto" else None)
    return lq.restore(q_out), lk.restore(k_out), c.kv_c.new_empty(0)


def _vllm_fake(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    _, lq, lk = _rows(c)
    return lq.empty(c.q_pe), lk.empty(c.k_pe), c.kv_c.new_empty(0)


ROPE_VLLM_MLA_KV = Kernel(rope_vllm_mla_kv_cache_update, _vllm_fake, _vllm_cuda,
                          variants=(vllm_context.FP8_CACHE,))

KERNELS = (ROPE_MLA_KV, ROPE_VLLM_MLA_KV)


def _lower(op: Operation, platform: str) -> InPlace:
    # Own lowering: the kernel writes the cache in place (the op's third result is that operand).
    assert isinstance(op, fused.RopeMlaKvCacheWriteOp)
    call = lower(ROPE_MLA_KV, op, platform, result_types=[op.q_out.type, op.k_out.type])
    return InPlace(call, (call.results[0], call.results[1], op.kv_cache))


def _vllm_values(op: Operation) -> dict[str, object]:
    """The layer name: vLLM's hoisted `LayerName` input where the graph has it, else the name
    (the cache stays in vLLM's forward context; the dummy result orders the attention after the
    write, as vLLM's own op does)."""
    assert isinstance(op, fused.RopeVllmMlaKvCacheUpdateOp)
    return {"layer_name": op.layer if op.layer is not None else op.layer_name}


LOWERINGS = {fused.RopeMlaKvCacheWriteOp.name: _lower,
             fused.RopeVllmMlaKvCacheUpdateOp.name: Lowering(ROPE_VLLM_MLA_KV, _vllm_values)}
