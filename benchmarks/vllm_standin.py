"""vLLM 0.32's attention ops on a machine without vLLM, backed by FlashInfer, for the
end-to-end benchmark of vLLM-shaped graphs (`bench_e2e_vllm.py`).

Registers `vllm::unified_kv_cache_update` and `vllm::unified_attention_with_output` with vLLM
0.32's schemas (`vllm/model_executor/layers/attention/attention.py`; the layer name typed as
`irfuse.kernels.vllm_context.layer_name_type()` decides: `str` without vLLM), whose bodies do
what vLLM's FlashInfer backend does on sm90:

- the cache of a layer is one tensor `[num_blocks, kv_heads, block_size, 2 * head_dim]` (k then
  v on the last dim), stored NHD (`[num_blocks, block_size, kv_heads, 2 * head_dim]` in memory,
  the logical tensor a permuted view: vLLM's default layout) or HND (contiguous as it reads);
- `unified_kv_cache_update` is `FlashInferImpl.do_kv_cache_update`: vLLM's
  `reshape_and_cache_flash` (one launch writing k and v at the slots), here a Triton kernel of
  the same shape (`_write_kv_kernel`; torch indexing on the CPU);
- `unified_attention_with_output` is `FlashInferImpl.forward` for a decode-only or a
  prefill-only batch: FlashInfer's `BatchDecodeWithPagedKVCacheWrapper` (tensor cores, planned
  for CUDA graphs, as vLLM plans it) or `BatchPrefillWithPagedKVCacheWrapper` (causal, backend
  "auto") over the cache's k and v views, each planned once per step outside the graph
  (`plan_step`); no fused output quant (`fused_output_quant_supported` is False, as FlashInfer's
  is on sm90). On the CPU (the smoke path) a torch reference: pages gathered, masked SDPA.
- `kv_cache_dtype="fp8"` (`plan_step`): vLLM's per-tensor FP8 cache, allocated as uint8 and read
  as e4m3; the write stores `clamp(x / scale)` with the layer's `_k_scale` / `_v_scale`
  (`KV_SCALES`), FlashInfer reads the pages with those scales, and the reference dequantizes.

The forward context is this module's: `plan_step` builds one step's metadata (block table,
sequence lengths, slot mapping, the planned wrapper) for every layer, `set_step` makes it
current, and `get_attention_context` (installed with `vllm_context.set_provider`) returns
(metadata, layer, kv_cache, slot_mapping) by layer name as vLLM's does. `describe` tells
irfuse's compile-time layer facts (`irfuse.raising.vllm_layers.set_provider`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from irfuse.kernels import qk_norm_rope_ref, vllm_context
from irfuse.kernels.norm_quant import div_rn_by
from irfuse.kernels.triton_support import check_device
from irfuse.raising import vllm_layers

LAYER_NAME = vllm_context.layer_name_type()
SCHEMAS = {
    "unified_kv_cache_update": (
        f"unified_kv_cache_update(Tensor key, Tensor value, {LAYER_NAME} layer_name) -> Tensor"),
    "unified_attention_with_output": (
        f"unified_attention_with_output(Tensor query, Tensor key, Tensor value, "
        f"Tensor(a3!) output, {LAYER_NAME} layer_name, Tensor? output_scale=None, "
        "Tensor(a6!)? output_block_scale=None, Tensor? kv_cache_dummy_dep=None) -> ()"),
}
BACKEND = "FLASHINFER"
KV_SCALES = (0.05, 0.125)
"""The k and v scales of an FP8 cache (vLLM's `_k_scale`, `_v_scale`)."""
FP8 = torch.float8_e4m3fn


# --- layers and the forward context ----------------------------------------------------------


class _Backend:
    @staticmethod
    def get_name() -> str:
        return BACKEND


class Impl:
    """`FlashInferImpl`'s attributes irfuse reads, and its two calls."""

    alibi_slopes = None
    sinks = None
    logits_soft_cap = None
    sliding_window = None

    def __init__(self, layer: Layer):
        self.num_heads, self.num_kv_heads = layer.num_heads, layer.num_kv_heads
        self.head_size = layer.head_size
        self.scale = layer.head_size ** -0.5

    @staticmethod
    def fused_output_quant_supported(quant_key: Any) -> bool:
        return False  # FlashInfer writes a quantized output only through trtllm-gen (sm100)

    def do_kv_cache_update(self, layer: Layer, key: torch.Tensor, value: torch.Tensor,
                           kv_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
        k_cache, v_cache = as_stored(kv_cache).transpose(1, 2).split(self.head_size, dim=-1)
        write_kv(key, value, k_cache, v_cache, slot_mapping, **kv_scales(layer))

    def forward(self, layer: Layer, query, key, value, kv_cache, meta: Metadata, *, output,
                output_scale=None, output_block_scale=None) -> torch.Tensor:
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("FlashInfer on sm90 writes no quantized output")
        n = meta.num_actual_tokens
        q = query[:n]
        if meta.wrapper is not None:
            out = output[:n]
            scales = ({} if layer.kv_cache_dtype == "auto" else
                      {"k_scale": layer._k_scale_float, "v_scale": layer._v_scale_float})
            meta.wrapper.run(q if q.is_contiguous() else q.contiguous(),
                             flashinfer_views(kv_cache, self.head_size, meta.layout), out=out,
                             **scales)
        else:
            output[:n] = reference_attention(q, kv_cache, meta, self.head_size, self.scale,
                                             **kv_scales(layer))
        return output


class Layer:
    """An attention layer as vLLM's forward context holds it."""

    def __init__(self, name: str, num_heads: int, num_kv_heads: int, head_size: int):
        self.layer_name = name
        self.num_heads, self.num_kv_heads, self.head_size = num_heads, num_kv_heads, head_size
        self.kv_cache = torch.empty(0)
        self.kv_cache_dtype = "auto"
        self._k_scale = self._v_scale = None  # float32 [1] tensors for an FP8 cache
        self._k_scale_float = self._v_scale_float = 1.0
        self.kv_sharing_target_layer_name = None
        self.attn_backend = _Backend()
        self.impl = Impl(self)


@dataclass
class Metadata:
    """One step's attention metadata (vLLM's common fields), shared by every layer."""

    query_start_loc: torch.Tensor  # [B + 1] int32
    seq_lens: torch.Tensor  # [B] int32
    block_table: torch.Tensor  # [B, max_blocks] int32
    slot_mapping: torch.Tensor  # [T] int64
    positions: torch.Tensor  # [T] int64 (the model's input)
    num_actual_tokens: int
    max_query_len: int
    layout: str = "NHD"
    wrapper: Any = None  # the planned FlashInfer wrapper (None: the torch reference)
    caches: dict[str, torch.Tensor] = field(default_factory=dict)
    kv_cache_dtype: str = "auto"  # or "fp8": vLLM's per-tensor FP8 cache


LAYERS: dict[str, Layer] = {}
_CURRENT: list[Metadata | None] = [None]


def get_attention_context(layer_name: str):
    """vLLM's `get_attention_context`: (metadata, layer, kv_cache, slot_mapping)."""
    meta = _CURRENT[0]
    if meta is None:
        raise RuntimeError("no forward context: call vllm_standin.set_step first")
    layer = LAYERS[layer_name]
    return meta, layer, layer.kv_cache, meta.slot_mapping


def describe(layer_name: str):
    """irfuse's compile-time facts of a layer (what irfuse's vLLM plugin reads from vLLM)."""
    if layer_name not in LAYERS:
        return None
    return {"backend": BACKEND, "output_quant": []}


def set_step(meta: Metadata | None) -> None:
    """Make `meta` the current forward context and point every layer at its caches (and its
    cache kind and scales)."""
    _CURRENT[0] = meta
    if meta is not None:
        for name, cache in meta.caches.items():
            layer = LAYERS[name]
            layer.kv_cache = cache
            layer.kv_cache_dtype = meta.kv_cache_dtype
            fp8 = meta.kv_cache_dtype != "auto"
            layer._k_scale, layer._v_scale = (
                (torch.tensor([s], device=cache.device) for s in KV_SCALES) if fp8
                else (None, None))
            layer._k_scale_float, layer._v_scale_float = KV_SCALES if fp8 else (1.0, 1.0)


def as_stored(kv_cache: torch.Tensor) -> torch.Tensor:
    """The cache as its values are stored: vLLM's uint8 FP8 cache viewed as e4m3."""
    return kv_cache.view(FP8) if kv_cache.dtype == torch.uint8 else kv_cache


def kv_scales(layer: Layer) -> dict[str, torch.Tensor]:
    """The layer's k_scale and v_scale where its cache is FP8 ({} in the model dtype)."""
    if layer.kv_cache_dtype == "auto":
        return {}
    return {"k_scale": layer._k_scale, "v_scale": layer._v_scale}


# --- the cache write ---------------------------------------------------------------------------


def _write_kv_kernel_fn():
    import triton
    import triton.language as tl

    @triton.jit
    def _write_kv_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, slot_ptr, ks_ptr, vs_ptr, skt, skh, svt,
                         svh, kcb, kcn, kch, vcb, vcn, vch, block_size,
                         H: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr,
                         BLOCK_D: tl.constexpr, SCALED: tl.constexpr):
        """Token t's k and v `[H, D]` into the caches at slot_mapping[t] (skipped below 0);
        SCALED: into FP8 caches as `clamp(x / scale)`, divided as torch divides."""
        t = tl.program_id(0)
        slot = tl.load(slot_ptr + t).to(tl.int64)
        if slot >= 0:
            blk = slot // block_size
            off = slot % block_size
            h = tl.arange(0, BLOCK_H)[:, None]
            d = tl.arange(0, BLOCK_D)[None, :]
            mask = (h < H) & (d < D)
            t64 = t.to(tl.int64)
            k = tl.load(k_ptr + t64 * skt + h * skh + d, mask=mask)
            v = tl.load(v_ptr + t64 * svt + h * svh + d, mask=mask)
            if SCALED:  # (div_rn_by: torch's quotient without a division per element)
                ks = tl.load(ks_ptr)
                vs = tl.load(vs_ptr)
                k = tl.clamp(div_rn_by(k.to(tl.float32), ks, tl.math.div_rn(1.0, ks), True),
                             -448.0, 448.0)
                v = tl.clamp(div_rn_by(v.to(tl.float32), vs, tl.math.div_rn(1.0, vs), True),
                             -448.0, 448.0)
            k = k.to(kc_ptr.dtype.element_ty)
            v = v.to(vc_ptr.dtype.element_ty)
            tl.store(kc_ptr + blk * kcb + off * kcn + h * kch + d, k, mask=mask)
            tl.store(vc_ptr + blk * vcb + off * vcn + h * vch + d, v, mask=mask)

    return _write_kv_kernel


_KERNEL: list[Any] = []


def write_kv(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor,
             v_cache: torch.Tensor, slot_mapping: torch.Tensor, triton_kernel: bool | None = None,
             k_scale: torch.Tensor | None = None, v_scale: torch.Tensor | None = None) -> None:
    """`reshape_and_cache_flash`: key / value `[>= n, H, D]` into the caches `[blocks,
    block_size, H, D]` (any strides, last dim contiguous) at the n slots; e4m3 caches with
    `k_scale` / `v_scale` as `clamp(x / scale, -448, 448)`. One Triton launch on CUDA and under
    Triton's interpreter (or with `triton_kernel`), torch indexing otherwise."""
    n = slot_mapping.shape[0]
    scaled = k_scale is not None
    if triton_kernel is None:
        triton_kernel = key.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"
    if not triton_kernel:
        qk_norm_rope_ref.write_cache(k_cache, key[:n], slot_mapping, k_scale)
        qk_norm_rope_ref.write_cache(v_cache, value[:n], slot_mapping, v_scale)
        return
    import triton

    if not _KERNEL:
        _KERNEL.append(_write_kv_kernel_fn())
    check_device(key, value, k_cache, v_cache, slot_mapping)  # interpreted: torch's casts
    for x in (key, value, k_cache, v_cache):
        if x.stride(-1) != 1:
            raise ValueError("write_kv: the last dim must be contiguous")
    h, d = key.shape[1], key.shape[2]
    if n:
        _KERNEL[0][(n,)](key, value, k_cache, v_cache, slot_mapping,
                         k_scale if scaled else slot_mapping, v_scale if scaled else slot_mapping,
                         key.stride(0), key.stride(1), value.stride(0), value.stride(1),
                         k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                         v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
                         k_cache.shape[1], H=h, D=d, BLOCK_H=triton.next_power_of_2(h),
                         BLOCK_D=triton.next_power_of_2(d), SCALED=scaled, num_warps=4)


# --- the attention -----------------------------------------------------------------------------


def new_cache(num_blocks: int, kv_heads: int, block_size: int, head_dim: int, layout: str,
              dtype: torch.dtype, device: torch.device, gen: torch.Generator | None = None
              ) -> torch.Tensor:
    """A layer's cache, logically `[num_blocks, kv_heads, block_size, 2 * head_dim]`, stored
    per `layout` (NHD: `[blocks, block_size, heads, 2D]` in memory), random normal values
    (`dtype` uint8: vLLM's FP8 cache, e4m3 codes of those values)."""
    if layout == "NHD":
        shape = (num_blocks, block_size, kv_heads, 2 * head_dim)
    elif layout == "HND":
        shape = (num_blocks, kv_heads, block_size, 2 * head_dim)
    else:
        raise ValueError(f"unknown layout {layout!r}")
    phys = torch.empty(shape, dtype=dtype, device=device)
    values = torch.randn(shape, generator=gen) if gen is not None else torch.randn(
        shape, device=device)
    as_stored(phys).copy_(values.to(as_stored(phys).dtype))
    return phys.permute(0, 2, 1, 3) if layout == "NHD" else phys


def flashinfer_views(kv_cache: torch.Tensor, head_dim: int, layout: str
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """The (k, v) FlashInfer reads in `layout` (NHD `[blocks, block_size, heads, D]`, HND
    `[blocks, heads, block_size, D]`), views of the cache as vLLM's backend makes them."""
    phys = as_stored(kv_cache).permute(0, 2, 1, 3) if layout == "NHD" else as_stored(kv_cache)
    k, v = phys.split(head_dim, dim=-1)
    return k, v


def reference_attention(q: torch.Tensor, kv_cache: torch.Tensor, meta: Metadata,
                        head_dim: int, scale: float, k_scale: torch.Tensor | None = None,
                        v_scale: torch.Tensor | None = None) -> torch.Tensor:
    """Causal attention of each sequence's new tokens over its pages, in f32, `[n, H, D]` in
    q's dtype (torch: the CPU smoke path and the checks); an FP8 cache read as `x * scale`."""
    k_cache, v_cache = as_stored(kv_cache).transpose(1, 2).split(head_dim, dim=-1)
    ks, vs = (1.0, 1.0) if k_scale is None else (k_scale.float(), v_scale.float())
    bs = kv_cache.shape[2]
    out = torch.empty_like(q)
    starts = meta.query_start_loc.tolist()
    for b, length in enumerate(meta.seq_lens.tolist()):
        qs, qe = starts[b], starts[b + 1]
        pos = torch.arange(length, device=q.device)
        blocks = meta.block_table[b].long()[pos // bs]
        keys = k_cache[blocks, pos % bs].transpose(0, 1).float() * ks
        values = v_cache[blocks, pos % bs].transpose(0, 1).float() * vs
        queries = q[qs:qe].transpose(0, 1).float()
        qpos = torch.arange(length - (qe - qs), length, device=q.device)
        mask = pos[None, :] <= qpos[:, None]
        o = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=scale,
                                           enable_gqa=True)
        out[qs:qe] = o.transpose(0, 1).to(q.dtype)
    return out


def _plan(meta: Metadata, num_heads: int, num_kv_heads: int, head_dim: int, block_size: int,
          dtype: torch.dtype, decode: bool, kv_dtype: torch.dtype) -> Any:
    """FlashInfer's wrapper for the step, planned once (decode: tensor cores, CUDA-graph
    buffers, as vLLM's FlashInfer backend builds it; prefill: causal, backend "auto")."""
    import attention_libs as libs
    import flashinfer

    indptr, indices, last = libs.page_list(meta.block_table, meta.seq_lens, block_size)
    ws = libs.workspace(meta.block_table.device)
    scale = head_dim ** -0.5
    if decode:
        w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            ws, meta.layout, use_cuda_graph=True, use_tensor_cores=True,
            paged_kv_indptr_buffer=indptr, paged_kv_indices_buffer=indices,
            paged_kv_last_page_len_buffer=last)
        w.plan(indptr, indices, last, num_heads, num_kv_heads, head_dim, block_size,
               q_data_type=dtype, kv_data_type=kv_dtype, sm_scale=scale)
    else:
        w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, meta.layout, backend="auto")
        w.plan(meta.query_start_loc, indptr, indices, last, num_heads, num_kv_heads, head_dim,
               block_size, causal=True, sm_scale=scale, q_data_type=dtype,
               kv_data_type=kv_dtype)
    meta.plan_buffers = (indptr, indices, last)  # type: ignore[attr-defined]
    return w


def plan_step(layer_names: list[str], *, batch: int, context: int, prefill: int,
              num_heads: int, num_kv_heads: int, head_dim: int, block_size: int,
              dtype: torch.dtype, device: torch.device, layout: str = "NHD",
              flashinfer: bool | None = None, seed: int = 0, ragged: bool = False,
              kv_cache_dtype: str = "auto") -> Metadata:
    """One step's metadata and caches: a decode step (`batch` sequences of `context` cached
    tokens, one new token each; `ragged`: cached lengths drawn in [context / 2, context], the
    first at `context`, as a serving batch mixes them) when `prefill` is 0, else one sequence of
    `prefill` new tokens; pages of each sequence at random places; random cache contents, in
    `dtype` or, with `kv_cache_dtype` "fp8", vLLM's FP8 cache."""
    if kv_cache_dtype not in ("auto", "fp8"):
        raise ValueError(f"kv_cache_dtype must be 'auto' or 'fp8', got {kv_cache_dtype!r}")
    cache_dtype = dtype if kv_cache_dtype == "auto" else torch.uint8
    gen = torch.Generator().manual_seed(seed)
    if prefill:
        seq_lens, query_lens = [prefill], [prefill]
    else:
        cached = [context] * batch
        if ragged and batch:
            cached = [context] + torch.randint(context // 2, context + 1, (batch - 1,),
                                               generator=gen).tolist()
        seq_lens, query_lens = [n + 1 for n in cached], [1] * batch
    per_seq = -(-max(seq_lens) // block_size)
    num_blocks = len(seq_lens) * per_seq + 1
    table = torch.randperm(num_blocks, generator=gen)[: len(seq_lens) * per_seq]
    table = table.view(len(seq_lens), per_seq).to(torch.int32)
    slots, positions = [], []
    for b, (n, ql) in enumerate(zip(seq_lens, query_lens, strict=True)):
        for p in range(n - ql, n):
            slots.append(int(table[b, p // block_size]) * block_size + p % block_size)
            positions.append(p)
    starts = torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()], dtype=torch.int32)
    meta = Metadata(starts.to(device), torch.tensor(seq_lens, dtype=torch.int32, device=device),
                    table.to(device), torch.tensor(slots, dtype=torch.int64, device=device),
                    torch.tensor(positions, dtype=torch.int64, device=device),
                    sum(query_lens), max(query_lens), layout, kv_cache_dtype=kv_cache_dtype)
    for name in layer_names:
        meta.caches[name] = new_cache(num_blocks, num_kv_heads, block_size, head_dim, layout,
                                      cache_dtype, device, gen if device.type == "cpu" else None)
    if flashinfer is None:
        flashinfer = device.type == "cuda"
    if flashinfer:
        meta.wrapper = _plan(meta, num_heads, num_kv_heads, head_dim, block_size, dtype,
                             decode=not prefill, kv_dtype=dtype if kv_cache_dtype == "auto"
                             else FP8)
    return meta


# --- the ops -----------------------------------------------------------------------------------


def _kv_cache_update(key, value, layer_name):
    _, layer, kv_cache, slots = get_attention_context(vllm_context.name_of(layer_name))
    if slots is not None:
        layer.impl.do_kv_cache_update(layer, key, value, kv_cache, slots)
    return key.new_empty(0)


def _kv_cache_update_fake(key, value, layer_name):
    return torch.empty(0, dtype=key.dtype, device=key.device)


def _attention(query, key, value, output, layer_name, output_scale=None,
               output_block_scale=None, kv_cache_dummy_dep=None):
    meta, layer, kv_cache, _ = get_attention_context(vllm_context.name_of(layer_name))
    layer.impl.forward(layer, query, key, value, kv_cache, meta, output=output,
                       output_scale=output_scale, output_block_scale=output_block_scale)


def _nothing(*args, **kwargs) -> None:
    """The fake of an op that only writes its mutable arguments."""


_LIBS: list[torch.library.Library] = []


def register() -> bool:
    """Register the ops (once; False where `vllm::` already has them: vLLM itself, or the
    tests' stand-ins) and install the context and layer-fact providers."""
    registered = False
    if not hasattr(torch.ops.vllm, "unified_attention_with_output"):
        lib = torch.library.Library("vllm", "FRAGMENT")  # noqa: TOR901
        impls = {"unified_kv_cache_update": (_kv_cache_update, _kv_cache_update_fake),
                 "unified_attention_with_output": (_attention, _nothing)}
        for name, schema in SCHEMAS.items():
            lib.define(schema)
            impl, fake = impls[name]
            lib.impl(name, impl, "CompositeExplicitAutograd")
            torch.library.register_fake(f"vllm::{name}", fake, lib=lib)
        _LIBS.append(lib)
        registered = True
    vllm_context.set_provider(get_attention_context)
    vllm_layers.set_provider(describe)
    return registered


def attention(layer: Layer, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """vLLM 0.32's `Attention.forward` (opaque ops, no query quant): q `[T, H * D]` or
    `[T, H, D]`, k / v likewise with the KV heads; the cache write, then the attention into a
    fresh `[T, H * D]` buffer."""
    h, hkv, d = layer.num_heads, layer.num_kv_heads, layer.head_size
    output = torch.empty(q.shape[0], h * d, dtype=q.dtype, device=q.device)
    q = q.view(-1, h, d)
    output = output.view(-1, h, d)
    k = k.view(-1, hkv, d)
    v = v.view(-1, hkv, d)
    dep = torch.ops.vllm.unified_kv_cache_update(k, v, layer.layer_name)
    torch.ops.vllm.unified_attention_with_output(q, k, v, output, layer.layer_name,
                                                 kv_cache_dummy_dep=dep)
    return output.view(-1, h * d)


def warm(num_heads: int = 32, num_kv_heads: int = 8, head_dim: int = 128,
         block_size: int = 16, layout: str = "NHD", steps: tuple[str, ...] = ("decode", "prefill")
         ) -> list[str]:
    """Build FlashInfer's modules the stand-in runs (tensor-core decode, paged prefill "auto";
    bf16, `head_dim`) once, so that a benchmark never waits on nvcc; one line per module."""
    lines = []
    dev = torch.device("cuda")
    for prefill in [0 if s == "decode" else 37 for s in steps]:
        what = f"prefill {prefill}" if prefill else "decode"
        try:
            meta = plan_step([], batch=2, context=40, prefill=prefill, num_heads=num_heads,
                             num_kv_heads=num_kv_heads, head_dim=head_dim,
                             block_size=block_size, dtype=torch.bfloat16, device=dev,
                             layout=layout)
            cache = new_cache(int(meta.block_table.max()) + 1, num_kv_heads, block_size,
                              head_dim, layout, torch.bfloat16, dev)
            q = torch.randn(meta.num_actual_tokens, num_heads, head_dim, device=dev,
                            dtype=torch.bfloat16)
            out = torch.empty_like(q)
            meta.wrapper.run(q, flashinfer_views(cache, head_dim, layout), out=out)
            torch.cuda.synchronize()
            lines.append(f"{what}: built ({type(meta.wrapper).__name__}, "
                         f"{getattr(meta.wrapper, '_backend', '?')})")
        except Exception as e:  # noqa: BLE001 (reported)
            lines.append(f"{what}: {type(e).__name__}: {str(e)[:300]}")
    return lines


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    for line in warm(steps=tuple(sys.argv[1:]) or ("decode", "prefill")):
        print(line, flush=True)

