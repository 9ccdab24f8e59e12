"""fuse_rope_kvcache_cat_mla (vLLM 0.32): MLA's RoPE of q_pe and k_pe -> the latent-cache write
of `[kv_c | rotated k_pe]`, in one kernel, in every compile range.

vLLM's `MLARoPEKVCacheCatFusionPass` (CUDA and ROCm; `concat_and_cache_mla_rope_fused`) is on
from O2 where the KV-cache update is inside the compiled graph (full graph, or Inductor's graph
partition). Here: the Triton kernel `rope_mla_kv_cache_write` (`irfuse/kernels/mla_rope_cache.py`)
and its torch reference (`mla_rope_cache_ref.py`, the CPU path), for a latent cache in the model
dtype (an FP8 latent cache is not fused yet). Opt-in everywhere until measured on a GPU.

Kernel `rope_mla_kv_cache_write`: q_pe `[T, H, R]`, k_pe `[T, 1, R]` (or `[T, R]`), kv_c
`[T, L]`, the rope table as positions + `cos_sin_cache` or cos and sin, the cache `[blocks,
block_size, L + R]` (written in place at `slot_mapping`, slots < 0 skipped), `is_neox`,
`rotary_dim`, `rope_f32`; returns the rotated q_pe and k_pe in their layouts.
"""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import IntAttr

from irfuse.dialects import aten, fused
from irfuse.fusions.declare import Fusion, InPlace, Kernel, everywhere
from irfuse.fusions.fuse_rope_kvcache_cat_mla.pattern import KERNEL, RopeMlaKvCachePattern
from irfuse.fusions.kernel_call import Args, flag, kernel_call
from irfuse.kernels import dispatch, mla_rope_cache_ref, rope_rows
from irfuse.kernels.dispatch import kernels

SCHEMA = ("(Tensor q_pe, Tensor k_pe, Tensor kv_c, Tensor? positions, Tensor? cos_sin_cache, "
          "Tensor? cos, Tensor? sin, Tensor(a!) kv_cache, Tensor slot_mapping, bool is_neox, "
          "int rotary_dim, bool rope_f32=False) -> (Tensor, Tensor)")


def _on_rows(fn, q_pe, k_pe, kv_c, positions, cos_sin_cache, cos, sin, kv_cache, slot_mapping,
             **readings):
    """Run `fn` on q_pe's and k_pe's rows `[T, heads, R]`; outputs in their layouts."""
    lq, lk = rope_rows.layouts(q_pe, k_pe, positions, cos)
    if cos is not None:
        cos, sin = rope_rows.table_rows(cos, lq), rope_rows.table_rows(sin, lq)
    else:
        positions = positions.reshape(-1)
    q_out, k_out = fn(lq.to_rows(q_pe), lk.to_rows(k_pe), kv_c, cos, sin, positions,
                      cos_sin_cache, kv_cache, slot_mapping, **readings)
    return lq.restore(q_out), lk.restore(k_out)


def _ref(q_pe, k_pe, kv_c, positions, cos_sin_cache, cos, sin, kv_cache, slot_mapping, is_neox,
         rotary_dim, rope_f32=False):
    return _on_rows(mla_rope_cache_ref.rope_mla_kv_cache_write, q_pe, k_pe, kv_c, positions,
                    cos_sin_cache, cos, sin, kv_cache, slot_mapping, is_neox=is_neox,
                    rotary_dim=rotary_dim, rope_f32=rope_f32)


def _cuda(q_pe, k_pe, kv_c, positions, cos_sin_cache, cos, sin, kv_cache, slot_mapping, is_neox,
          rotary_dim, rope_f32=False):
    fn = (kernels("mla_rope_cache").rope_mla_kv_cache_write
          if dispatch.use_triton(ROPE_MLA_KV, q_pe)
          else mla_rope_cache_ref.rope_mla_kv_cache_write)
    return _on_rows(fn, q_pe, k_pe, kv_c, positions, cos_sin_cache, cos, sin, kv_cache,
                    slot_mapping, is_neox=is_neox, rotary_dim=rotary_dim, rope_f32=rope_f32)


def _fake(q_pe, k_pe, kv_c, positions, cos_sin_cache, cos, sin, kv_cache, slot_mapping, is_neox,
          rotary_dim, rope_f32=False):
    lq, lk = rope_rows.layouts(q_pe, k_pe, positions, cos)
    if cos is not None:
        cos, sin = rope_rows.table_rows(cos, lq), rope_rows.table_rows(sin, lq)
    else:
        positions = positions.reshape(-1)
    mla_rope_cache_ref.check_args(lq.to_rows(q_pe), lk.to_rows(k_pe), kv_c, cos, sin, positions,
                                  cos_sin_cache, kv_cache, slot_mapping, rotary_dim)
    return lq.empty(q_pe), lk.empty(k_pe)


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


ROPE_MLA_KV = Kernel(KERNEL, SCHEMA, _ref, _cuda, _fake, examples=_examples)


def _lower(op: fused.RopeMlaKvCacheWriteOp, platform: str) -> InPlace:
    a = Args()
    template = [a.tensor(op.q_pe), a.tensor(op.k_pe), a.tensor(op.kv_c), a.optional(op.positions),
                a.optional(op.cos_sin_cache), a.optional(op.cos), a.optional(op.sin),
                a.tensor(op.kv_cache), a.tensor(op.slot_mapping), flag(op.is_neox.value.data),
                IntAttr(op.rotary_dim.value.data)]
    keywords = {"rope_f32": aten.TRUE} if op.rope_f32 is not None else {}
    call = kernel_call(ROPE_MLA_KV, a, template, op, platform, keywords,
                       result_types=[op.q_out.type, op.k_out.type])
    return InPlace(call, (call.results[0], call.results[1], op.kv_cache))


FUSION = Fusion(
    name="fuse-rope-kvcache-cat-mla",
    flag="fuse_rope_kvcache_cat_mla",
    kind="fusion",
    fuses="MLA's RoPE of q_pe / k_pe -> [kv_c | k_pe] latent-cache write",
    quant="independent",
    schemes=(),
    range_rule="all",
    platforms=everywhere("triton", None),
    vllm_pass="MLARoPEKVCacheCatFusionPass",
    note="vLLM 0.32; opt-in until measured on a GPU; vLLM turns it on from O2 on CUDA and ROCm "
    "where the KV-cache update is inside the compiled graph (splitting_ops without it, or "
    "Inductor's graph partition); a cache in the model dtype only (vLLM also fuses FP8)",
    patterns=(RopeMlaKvCachePattern(),),
    lowerings={fused.RopeMlaKvCacheWriteOp.name: _lower},  # type: ignore[dict-item]
    kernels=(ROPE_MLA_KV,),
)
