"""The kernels of RoPE (after the per-head norms, where fused) -> paged KV-cache write, and how
`fused.rope_kv_cache_write` and `fused.rope_vllm_kv_cache_update` lower to them.

`rope_kv_cache_write` writes the rotated k and v into separate key and value caches,
`rope_kv_cache_write_flash` into vLLM's FlashAttention layout (one cache, two halves); the `_k`
kernels return the rotated k as well, for a k read besides the write (not measured apart from
the kernels without it). `rope_vllm_kv_cache_update` writes through vLLM's own cache-update call,
finding the cache by the layer name in vLLM's forward context; its Triton launch is chosen on
sm90 (choices/cuda_sm90.toml, measured inside vLLM-shaped graphs) and, not measured elsewhere,
left unfused on other CUDA GPUs and ROCm (choices/cuda.toml, rocm.toml). Each reference (what
the CPU runs) says its operands and results.
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
from irfuse.kernels import dispatch, qk_norm_rope_ref, rope_rows, vllm_context
from irfuse.kernels.dispatch import kernels


def _on_rows(fn: Callable, c: Call, return_k: bool = False) -> Any:
    """`fn` (the reference or the kernel) with the cos / sin tables (or the positions) as the
    kernel's rows; with `return_k` it returns (q_out, k_out)."""
    rows = Call(c, return_k=return_k) if return_k else Call(c)
    rows.update(_tables(c.q, c.k, c.positions, c.cos, c.sin, c.mrope_section))
    return fn(**rows)


def rope_kv_cache_write(q: Tensor, k: Tensor, v: Tensor, q_weight: Tensor | None,
                        k_weight: Tensor | None, positions: Tensor | None,
                        cos_sin_cache: Tensor | None, cos: Tensor | None, sin: Tensor | None,
                        k_cache: Written, v_cache: Written, slot_mapping: Tensor, is_neox: bool,
                        rotary_dim: int, eps: float = 0.0, weight_offset: float = 0.0,
                        weight_f32: bool = False, rope_f32: bool = False,
                        k_scale: Tensor | None = None, v_scale: Tensor | None = None,
                        mrope_section: list[int] | None = None,
                        mrope_interleaved: bool = False) -> Tensor:
    """Write the rotated k and v into `k_cache` / `v_cache` in place (slots < 0 skipped, as vLLM
    pads) and return the rotated q. Separate caches `[num_blocks, block_size, kv_heads,
    head_dim]` in the model dtype, or in FP8 with `k_scale` / `v_scale` (rows stored as
    `clamp(x / scale)`)."""
    return _on_rows(qk_norm_rope_ref.qk_norm_rope_kv, Call(locals()))


def _cuda(c: Call, return_k: bool = False) -> Any:
    fn = (kernels("qk_norm_rope").qk_norm_rope_kv if dispatch.use_triton(ROPE_KV, c.q)
          else qk_norm_rope_ref.qk_norm_rope_kv)
    return _on_rows(fn, c, return_k)


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
                              v_scale: Tensor | None = None,
                              mrope_section: list[int] | None = None,
                              mrope_interleaved: bool = False) -> Tensor:
    """`rope_kv_cache_write` on vLLM's FlashAttention layout: one `[2, num_blocks, block_size,
    kv_heads, head_dim]` cache whose halves are the key and value caches."""
    return rope_kv_cache_write(**_halves(Call(locals())))


def _flash_examples(shape: tuple[int, ...]) -> list[tuple]:
    """`_examples` with one `[2, 4, 4, 2, D]` cache in place of the two."""
    return [(*args[:9], torch.zeros(2, *args[9].shape, dtype=args[9].dtype), *args[11:])
            for args in _examples(shape)]


ROPE_KV_FLASH = Kernel(rope_kv_cache_write_flash, lambda c: _fake(_halves(c)),
                       lambda c: _cuda(_halves(c)), examples=_flash_examples)


# --- the same, with the rotated k returned too (`_k`) -------------------------------------------
# A k also read besides the write (returned, or attended to) fuses: the fused op yields it.


def rope_kv_cache_write_k(q: Tensor, k: Tensor, v: Tensor, q_weight: Tensor | None,
                          k_weight: Tensor | None, positions: Tensor | None,
                          cos_sin_cache: Tensor | None, cos: Tensor | None, sin: Tensor | None,
                          k_cache: Written, v_cache: Written, slot_mapping: Tensor,
                          is_neox: bool, rotary_dim: int, eps: float = 0.0,
                          weight_offset: float = 0.0, weight_f32: bool = False,
                          rope_f32: bool = False, k_scale: Tensor | None = None,
                          v_scale: Tensor | None = None,
                          mrope_section: list[int] | None = None,
                          mrope_interleaved: bool = False) -> tuple[Tensor, Tensor]:
    """`rope_kv_cache_write` returning the rotated k as well, (q_out, k_out), for a k read
    besides the write (`fused.rope_kv_cache_write`'s optional `k_out`)."""
    return _on_rows(qk_norm_rope_ref.qk_norm_rope_kv, Call(locals()), return_k=True)


def _fake_k(c: Call) -> tuple[Tensor, Tensor]:
    return (torch.empty_like(c.q, memory_format=torch.contiguous_format),
            torch.empty_like(c.k, memory_format=torch.contiguous_format))


ROPE_KV_K = Kernel(rope_kv_cache_write_k, _fake_k, lambda c: _cuda(c, return_k=True),
                   examples=_examples)


def rope_kv_cache_write_flash_k(q: Tensor, k: Tensor, v: Tensor, q_weight: Tensor | None,
                                k_weight: Tensor | None, positions: Tensor | None,
                                cos_sin_cache: Tensor | None, cos: Tensor | None,
                                sin: Tensor | None, kv_cache: Written, slot_mapping: Tensor,
                                is_neox: bool, rotary_dim: int, eps: float = 0.0,
                                weight_offset: float = 0.0, weight_f32: bool = False,
                                rope_f32: bool = False, k_scale: Tensor | None = None,
                                v_scale: Tensor | None = None,
                                mrope_section: list[int] | None = None,
                                mrope_interleaved: bool = False) -> tuple[Tensor, Tensor]:
    return rope_kv_cache_write_k(**_halves(Call(locals())))


ROPE_KV_FLASH_K = Kernel(rope_kv_cache_write_flash_k, lambda c: _fake_k(_halves(c)),
                         lambda c: _cuda(_halves(c), return_k=True), examples=_flash_examples)


# --- RoPE -> vLLM's own cache write --------------------------------------------------------------

LayerName = Annotated[Any, Opaque(vllm_context.layer_name_type())]
"""The layer-name argument: vLLM's `LayerName` or `str`, fixed when these kernels are declared
(see `irfuse.kernels.vllm_context`)."""


def _tables(q: Tensor, k: Tensor, positions: Tensor | None, cos: Tensor | None,
            sin: Tensor | None, mrope_section: list[int] | None) -> dict[str, Tensor | None]:
    """positions, cos and sin as the kernels take them (rows of `rope_rows`; q and k
    `[T, H, D]`)."""
    multimodal = mrope_section is not None
    lq, _ = rope_rows.layouts(q, k, positions, cos, multimodal)
    return {"positions": None, "cos": None, "sin": None,
            **rope_rows.table_args(lq, positions, cos, sin, multimodal)}


def _readings(c: Call) -> dict:
    return {"eps": c.eps, "is_neox": c.is_neox, "rotary_dim": c.rotary_dim,
            "weight_offset": c.weight_offset, "weight_f32": c.weight_f32,
            "rope_f32": c.rope_f32, "mrope_section": c.mrope_section,
            "mrope_interleaved": c.mrope_interleaved}


def rope_vllm_kv_cache_update(q: Tensor, k: Tensor, v: Tensor, q_weight: Tensor | None,
                              k_weight: Tensor | None, positions: Tensor | None,
                              cos_sin_cache: Tensor | None, cos: Tensor | None,
                              sin: Tensor | None, layer_name: LayerName, is_neox: bool,
                              rotary_dim: int, eps: float = 0.0, weight_offset: float = 0.0,
                              weight_f32: bool = False, rope_f32: bool = False,
                              mrope_section: list[int] | None = None,
                              mrope_interleaved: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """RoPE, then vLLM's own cache write (`fused.rope_vllm_kv_cache_update`,
    `irfuse/fusions/rope_vllm_write.py`): the rotated q and k and vLLM's dummy. The cache and
    slots are found where vLLM's own ops find them, through the forward context by the layer name
    (`irfuse.kernels.vllm_context`), and the write is skipped where the context has no slot
    mapping for the layer (vLLM's rule). The CPU runs this: irfuse's rope reference, then
    `unified_kv_cache_update` (the CPU backend's block interior depends on the ISA), the unfused
    graph's bits. On CUDA a cache irfuse knows (`write_in_place`: the model dtype, or vLLM's
    per-tensor FP8 where its variant is measured on) gets one Triton launch that rotates q and k
    and writes k and v in place; other caches get the Triton rope and vLLM's write."""
    readings = _readings(Call(locals()))
    t = _tables(q, k, positions, cos, sin, mrope_section)
    q_out, k_out = qk_norm_rope_ref.qk_norm_rope(q, k, q_weight, k_weight, t["cos"], t["sin"],
                                                 t["positions"], cos_sin_cache, **readings)
    dep = torch.ops.vllm.unified_kv_cache_update(k_out, v, layer_name)
    return q_out, k_out, dep


def write_in_place(q, k, v, q_weight, k_weight, positions, cos, sin, cos_sin_cache, layer_name,
                   rope_kv, readings: dict, fp8_cache_on: Callable[[], bool] = lambda: False
                   ) -> tuple[Tensor, Tensor] | None:
    """Rotate q and k and write k and v into the layer's cache with `rope_kv` (irfuse's Triton
    launch `qk_norm_rope_kv` returning k, or its reference in tests), where the context's cache
    is one irfuse knows, in the model dtype or, where `fp8_cache_on()` (asked only for such a
    cache), FP8 with the layer's scales (`vllm_context.paged_kv_cache`); (q_out, k_out), or None
    where it is not (the caller then rotates and lets vLLM write)."""
    ctx = vllm_context.attention_context(layer_name)
    if ctx.slot_mapping is None or ctx.slot_mapping.numel() != k.shape[0]:
        return None  # no write, or slots for fewer tokens than k (vLLM's write reads that)
    caches = vllm_context.paged_kv_cache(ctx.layer, ctx.kv_cache, k.shape[-1], k.dtype)
    if caches is None or v.shape[-1] != k.shape[-1] or (
            caches.k_scale is not None and not fp8_cache_on()):
        return None
    return rope_kv(q, k, v, q_weight, k_weight, cos, sin, positions, cos_sin_cache, *caches[:2],
                   ctx.slot_mapping, *caches[2:], return_k=True, **readings)


def _vllm_cuda(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    t = _tables(c.q, c.k, c.positions, c.cos, c.sin, c.mrope_section)
    positions, cos, sin = t["positions"], t["cos"], t["sin"]
    readings = _readings(c)
    triton = kernels("qk_norm_rope")
    done = write_in_place(c.q, c.k, c.v, c.q_weight, c.k_weight, positions, cos, sin,
                          c.cos_sin_cache, c.layer_name, triton.qk_norm_rope_kv, readings,
                          lambda: ROPE_VLLM_KV.runs_variant(vllm_context.FP8_CACHE,
                                                            dispatch.platform_of(c.q.device)))
    if done is not None:
        return (*done, c.q.new_empty(0))
    q_out, k_out = triton.qk_norm_rope(c.q, c.k, c.q_weight, c.k_weight, cos, sin, positions,
                                       c.cos_sin_cache, **readings)
    return q_out, k_out, torch.ops.vllm.unified_kv_cache_update(k_out, c.v, c.layer_name)


def _vllm_fake(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    return (torch.empty_like(c.q, memory_format=torch.contiguous_format),
            torch.empty_like(c.k, memory_format=torch.contiguous_format),
            torch.empty(0, dtype=c.k.dtype, device=c.k.device))


ROPE_VLLM_KV = Kernel(rope_vllm_kv_cache_update, _vllm_fake, _vllm_cuda,
                      variants=(vllm_context.FP8_CACHE,))

KERNELS = (ROPE_KV, ROPE_KV_FLASH, ROPE_KV_K, ROPE_KV_FLASH_K, ROPE_VLLM_KV)


def _lower(op: Operation, platform: str) -> InPlace:
    # Own lowering: the kernel writes the caches in place (its results are the op's first), and
    # a FlashAttention-layout cache is one kernel argument for the op's two cache operands.
    assert isinstance(op, fused.RopeKvCacheWriteOp)
    flash = op.k_cache.type.rank == 5  # type: ignore[attr-defined]
    if op.k_out is not None:  # the rotated k is read besides the write: returned too
        call = lower(ROPE_KV_FLASH_K if flash else ROPE_KV_K, op, platform,
                     {"kv_cache": op.k_cache}, result_types=[op.q_out.type, op.k_out.type])
        return InPlace(call, (call.results[0], op.k_cache, op.v_cache, call.results[1]))
    call = lower(ROPE_KV_FLASH if flash else ROPE_KV, op, platform,
                 {"kv_cache": op.k_cache}, result_types=[op.q_out.type])
    return InPlace(call, (call.results[0], op.k_cache, op.v_cache))


def _vllm_values(op: Operation) -> dict[str, object]:
    """The layer name: vLLM's hoisted `LayerName` input where the graph has it, else the name.
    (vLLM's cache is no operand: it stays in vLLM's forward context, where the kernel writes it
    in place at run time; the op's dummy result orders the attention after the write, as vLLM's
    own op does.)"""
    assert isinstance(op, fused.RopeVllmKvCacheUpdateOp)
    return {"layer_name": op.layer if op.layer is not None else op.layer_name}


LOWERINGS = {fused.RopeKvCacheWriteOp.name: _lower,
             fused.RopeVllmKvCacheUpdateOp.name: Lowering(ROPE_VLLM_KV, _vllm_values)}
