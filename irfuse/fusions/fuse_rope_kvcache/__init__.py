"""fuse_rope_kvcache: RoPE of q and k (after their per-head norms when enable_qk_norm_rope_fusion
has fused them) -> the paged KV-cache write, in one kernel, for ranges up to
rope_kvcache_fusion_max_token_num tokens (vLLM's rule: decode-sized batches, where the separate
write is a launch of its own). vLLM has it only on ROCm with AITER; irfuse's default per platform
follows its kernel's measurement (`_SM90`, docs/benchmarks.md).

Kernel `rope_kv_cache_write`: writes the rotated k and v into `k_cache` / `v_cache` in place
(slots < 0 skipped, as vLLM pads) and returns the rotated q. Separate key and value caches
`[num_blocks, block_size, kv_heads, head_dim]` in the model dtype, or in FP8 with `k_scale` /
`v_scale` (rows stored as `clamp(x / scale)`). Kernel `rope_kv_cache_write_flash`: the same on
vLLM's FlashAttention layout, one `[2, num_blocks, block_size, kv_heads, head_dim]` cache whose
halves are the key and value caches. The `_k` kernels (`rope_kv_cache_write_k`,
`rope_kv_cache_write_flash_k`) return the rotated k as well, for a k read besides the write.
"""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import FloatData, IntAttr

from irfuse.dialects import aten, fused
from irfuse.fusions.declare import Choice, Fusion, InPlace, Kernel, Support, everywhere
from irfuse.fusions.fuse_rope_kvcache.pattern import (
    FLASH_KERNEL,
    FLASH_KERNEL_K,
    KERNEL,
    KERNEL_K,
    RopeKvCachePattern,
)
from irfuse.fusions.kernel_call import Args, flag, kernel_call
from irfuse.kernels import dispatch, qk_norm_rope_ref, rope_rows
from irfuse.kernels.dispatch import kernels

SCHEMA = ("(Tensor q, Tensor k, Tensor v, Tensor? q_weight, Tensor? k_weight, Tensor? positions, "
          "Tensor? cos_sin_cache, Tensor? cos, Tensor? sin, Tensor(a!) k_cache, "
          "Tensor(b!) v_cache, Tensor slot_mapping, bool is_neox, int rotary_dim, float eps=0., "
          "float weight_offset=0., bool weight_f32=False, bool rope_f32=False, "
          "Tensor? k_scale=None, Tensor? v_scale=None) -> Tensor")


def _on_rows(fn, q, k, v, q_weight, k_weight, positions, cos_sin_cache, cos, sin, k_cache,
             v_cache, slot_mapping, k_scale, v_scale, **readings):
    lq, _ = rope_rows.layouts(q, k, positions, cos)
    if cos is not None:
        cos, sin = rope_rows.table_rows(cos, lq), rope_rows.table_rows(sin, lq)
    else:
        positions = positions.reshape(-1)
    return fn(q, k, v, q_weight, k_weight, cos, sin, positions, cos_sin_cache, k_cache, v_cache,
              slot_mapping, k_scale, v_scale, **readings)


def _readings(is_neox, rotary_dim, eps, weight_offset, weight_f32, rope_f32) -> dict:
    return {"eps": eps, "is_neox": is_neox, "rotary_dim": rotary_dim,
            "weight_offset": weight_offset, "weight_f32": weight_f32, "rope_f32": rope_f32}


def _ref(q, k, v, q_weight, k_weight, positions, cos_sin_cache, cos, sin, k_cache, v_cache,
         slot_mapping, is_neox, rotary_dim, eps=0.0, weight_offset=0.0, weight_f32=False,
         rope_f32=False, k_scale=None, v_scale=None, return_k=False):
    return _on_rows(qk_norm_rope_ref.qk_norm_rope_kv, q, k, v, q_weight, k_weight, positions,
                    cos_sin_cache, cos, sin, k_cache, v_cache, slot_mapping, k_scale, v_scale,
                    **_readings(is_neox, rotary_dim, eps, weight_offset, weight_f32, rope_f32),
                    return_k=return_k)


def _cuda(q, k, v, q_weight, k_weight, positions, cos_sin_cache, cos, sin, k_cache, v_cache,
          slot_mapping, is_neox, rotary_dim, eps=0.0, weight_offset=0.0, weight_f32=False,
          rope_f32=False, k_scale=None, v_scale=None, return_k=False):
    fn = (kernels("qk_norm_rope").qk_norm_rope_kv if dispatch.use_triton(ROPE_KV, q)
          else qk_norm_rope_ref.qk_norm_rope_kv)
    return _on_rows(fn, q, k, v, q_weight, k_weight, positions, cos_sin_cache, cos, sin,
                    k_cache, v_cache, slot_mapping, k_scale, v_scale,
                    **_readings(is_neox, rotary_dim, eps, weight_offset, weight_f32, rope_f32),
                    return_k=return_k)


def _fake(q, k, v, q_weight, k_weight, positions, cos_sin_cache, cos, sin, k_cache, v_cache,
          slot_mapping, is_neox, rotary_dim, eps=0.0, weight_offset=0.0, weight_f32=False,
          rope_f32=False, k_scale=None, v_scale=None):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


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


_SM90 = {"cuda:sm90": ((1, Choice("triton", (
    "docs/benchmarks.md: QK norm + RoPE + KV write 5.37-8.34x Inductor's code at T 1-1024 "
    "(H100, 2026-12-05)"))),)}

ROPE_KV = Kernel(KERNEL, SCHEMA, _ref, _cuda, _fake, _SM90, single_tensor=True,
                 examples=_examples)

# The same with the rotated k returned too (`_k`): a k also read besides the write (returned,
# or attended to) fuses, the fused op yielding it. Not measured apart from the kernel above.
SCHEMA_K = SCHEMA.replace(") -> Tensor", ") -> (Tensor, Tensor)")


def _fake_k(q, k, *args, **kwargs):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            torch.empty_like(k, memory_format=torch.contiguous_format))


def _ref_k(*args, **kwargs):
    return _ref(*args, **kwargs, return_k=True)


def _cuda_k(*args, **kwargs):
    return _cuda(*args, **kwargs, return_k=True)


ROPE_KV_K = Kernel(KERNEL_K, SCHEMA_K, _ref_k, _cuda_k, _fake_k, examples=_examples)

FLASH_SCHEMA = SCHEMA.replace("Tensor(a!) k_cache, Tensor(b!) v_cache", "Tensor(a!) kv_cache")


def _halves(fn):
    """`fn` (a separate-caches implementation) on the two halves of one FlashAttention-layout
    cache `[2, blocks, block_size, heads, head_dim]`: views, so the writes land in it."""
    def on_halves(q, k, v, q_weight, k_weight, positions, cos_sin_cache, cos, sin, kv_cache,
                  *rest, **kwargs):
        if kv_cache.dim() != 5 or kv_cache.shape[0] != 2:
            raise ValueError(f"irfuse: {FLASH_KERNEL}: kv_cache must be [2, num_blocks, "
                             f"block_size, kv_heads, head_dim], not {list(kv_cache.shape)}")
        return fn(q, k, v, q_weight, k_weight, positions, cos_sin_cache, cos, sin, kv_cache[0],
                  kv_cache[1], *rest, **kwargs)
    return on_halves


def _flash_examples(shape: tuple[int, ...]) -> list[tuple]:
    """`_examples` with one `[2, 4, 4, 2, D]` cache in place of the two."""
    return [(*args[:9], torch.zeros(2, *args[9].shape, dtype=args[9].dtype), *args[11:])
            for args in _examples(shape)]


ROPE_KV_FLASH = Kernel(FLASH_KERNEL, FLASH_SCHEMA, _halves(_ref), _halves(_cuda), _halves(_fake),
                       _SM90, single_tensor=True, examples=_flash_examples)
ROPE_KV_FLASH_K = Kernel(FLASH_KERNEL_K, SCHEMA_K.replace(
    "Tensor(a!) k_cache, Tensor(b!) v_cache", "Tensor(a!) kv_cache"), _halves(_ref_k),
    _halves(_cuda_k), _halves(_fake_k), examples=_flash_examples)


def _lower(op: fused.RopeKvCacheWriteOp, platform: str) -> InPlace:
    a = Args()
    flash = op.k_cache.type.rank == 5  # one FlashAttention-layout cache, given as both
    caches = [a.tensor(op.k_cache)] if flash else [a.tensor(op.k_cache), a.tensor(op.v_cache)]
    template = [a.tensor(op.q), a.tensor(op.k), a.tensor(op.v), a.optional(op.q_weight),
                a.optional(op.k_weight), a.optional(op.positions), a.optional(op.cos_sin_cache),
                a.optional(op.cos), a.optional(op.sin), *caches, a.tensor(op.slot_mapping),
                flag(op.is_neox.value.data), IntAttr(op.rotary_dim.value.data)]
    keywords = {}
    if op.eps is not None:
        keywords["eps"] = FloatData(op.eps.value.data)
    if op.weight_offset.value.data != 0.0:
        keywords["weight_offset"] = FloatData(op.weight_offset.value.data)
    if op.weight_f32 is not None:
        keywords["weight_f32"] = aten.TRUE
    if op.rope_f32 is not None:
        keywords["rope_f32"] = aten.TRUE
    keywords |= a.keyword("k_scale", op.k_scale) | a.keyword("v_scale", op.v_scale)
    if op.k_out is not None:  # the rotated k is read besides the write: returned too
        call = kernel_call(ROPE_KV_FLASH_K if flash else ROPE_KV_K, a, template, op, platform,
                           keywords, result_types=[op.q_out.type, op.k_out.type])
        return InPlace(call, (call.results[0], op.k_cache, op.v_cache, call.results[1]))
    call = kernel_call(ROPE_KV_FLASH if flash else ROPE_KV, a, template, op, platform, keywords,
                       result_types=[op.q_out.type])
    return InPlace(call, (call.results[0], op.k_cache, op.v_cache))


FUSION = Fusion(
    name="fuse-rope-kvcache",
    flag="fuse_rope_kvcache",
    kind="fusion",
    fuses="RoPE on q/k (after their norms) -> KV-cache write",
    quant="independent",
    schemes=(),
    range_rule="up-to-rope-kvcache-max",
    platforms={**everywhere("triton", None), "cuda:sm90": Support("triton", 1)},
    vllm_pass="RopeKVCacheFusionPass",
    note="on from O1 where measured faster than Inductor (sm90); vLLM turns it on at O1 only "
    "with ROCm AITER",
    patterns=(RopeKvCachePattern(),),
    lowerings={fused.RopeKvCacheWriteOp.name: _lower},  # type: ignore[dict-item]
    kernels=(ROPE_KV, ROPE_KV_FLASH, ROPE_KV_K, ROPE_KV_FLASH_K),
)
