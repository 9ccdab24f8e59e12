"""vLLM's forward context as irfuse's kernels read it at run time, and the layer name's type.

irfuse's kernels that stand in for vLLM's attention and cache-update calls (the fusions' `ops.py`
on vLLM's ops) get the layer name, as vLLM's own fused ops do
(`fused_rope_and_unified_kv_cache_update`), and find the rest where vLLM keeps it:
`attention_context(layer_name)` is vLLM's `get_attention_context` (attention metadata, the
layer, its KV cache, its slot mapping), or the provider a test installs (`set_provider`, the
stand-ins of `tests/vllm_ops.py` when vLLM is not installed). `paged_kv_cache` gives the key
and value caches of the backends whose layout irfuse knows (with an FP8 cache's scales), where
irfuse's kernels write and read them, `mla_cache` an MLA layer's latent cache;
`layer_name_type()` is the schema type of the layer-name argument, `LayerName` or `str`.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

SPLIT_CACHE_BACKENDS = ("FLASH_ATTN", "TRITON_ATTN", "FLASHINFER")
"""Backends whose cache is `[B, H, N, 2 * head_size]`, k then v on the last dim (model dtype)."""


class AttentionContext(NamedTuple):
    """What `get_attention_context` returns."""

    metadata: Any
    layer: Any
    kv_cache: torch.Tensor
    slot_mapping: torch.Tensor | None


Provider = Callable[[str], AttentionContext]
_PROVIDER: list[Provider | None] = [None]


def set_provider(provider: Provider | None) -> Provider | None:
    """Read the context through `provider` instead of vLLM (tests); returns the old one."""
    old = _PROVIDER[0]
    _PROVIDER[0] = provider
    return old


def name_of(layer_name: Any) -> str:
    """The layer name as a string (vLLM's `LayerName` holds it in `.value`)."""
    return layer_name if isinstance(layer_name, str) else layer_name.value


def attention_context(layer_name: Any) -> AttentionContext:
    """The attention metadata, layer, KV cache and slot mapping of a layer in the current
    forward pass."""
    provider = _PROVIDER[0]
    if provider is not None:
        return AttentionContext(*provider(name_of(layer_name)))
    return AttentionContext(*_vllm("vllm.model_executor.layers.attention.attention",
                                   "get_attention_context")(name_of(layer_name)))


@functools.cache
def _vllm(module: str, name: str) -> Callable[..., Any]:
    """vLLM's function `name` of `module`, looked up once: the fused kernels call it on every
    run. vLLM is optional: its modules are loaded only where a vLLM forward pass asks."""
    return getattr(importlib.import_module(module), name)


def layer_name_type() -> str:
    """The schema type of a layer-name argument: vLLM's `LayerName` where vLLM uses it (torch
    >= 2.11 with `VLLM_USE_LAYERNAME`, the default), else `str`.

    Decided when the kernels are declared (their `ops.py` imported: `kernel_decl.Opaque`), from
    the `vllm.utils.torch_utils` already imported: importing it here would cost seconds to every
    irfuse import. vLLM has imported it before it loads irfuse's plugin, and
    `irfuse.vllm_plugin` imports it before irfuse's kernels; a process that imports irfuse's
    kernels before vLLM declares them with `str`, and a compiled graph that passes vLLM's
    `LayerName` to them fails when it is traced (torch's schema check names the argument)."""
    utils = sys.modules.get("vllm.utils.torch_utils")
    if utils is not None and getattr(utils, "_USE_LAYERNAME", False):
        cls = utils.LayerName
        return f"{cls.__module__}.{cls.__qualname__}"
    return "str"


def backend_name(layer: Any) -> str:
    backend = getattr(layer, "attn_backend", None)
    get_name = getattr(backend, "get_name", None)
    return get_name() if callable(get_name) else ""


FP8_CACHE_DTYPES = ("fp8", "fp8_e4m3")
"""vLLM's per-tensor-scaled FP8 cache kinds irfuse's kernels write: e4m3, each value stored as
`x / scale` saturated to +-448, as vLLM's `reshape_and_cache_flash` (CUDA and Triton) and
`concat_and_cache_mla` store it. fp8_e5m2, per-token-head scales and DeepSeek's fp8_ds_mla are
left to vLLM."""

FP8_CACHE = "fp8_cache"
"""The run-time variant (`Kernel.variants`) of irfuse's ops on vLLM's calls that writes or reads
a per-tensor FP8 cache in place: on only where the platform's choices hold a measured
`<kernel>.fp8_cache` entry; otherwise vLLM's own write or attention runs."""


class PagedKv(NamedTuple):
    """A layer's paged k and v caches (`split_kv_cache`'s views) and, for an FP8 cache, the
    layer's scales (None for a cache in the model dtype)."""

    k_cache: torch.Tensor
    v_cache: torch.Tensor
    k_scale: torch.Tensor | None
    v_scale: torch.Tensor | None


def fp8_cache(kv_cache: torch.Tensor, kv_cache_dtype: str) -> torch.Tensor | None:
    """vLLM's FP8 cache (allocated as uint8) viewed as float8_e4m3fn where its kind is one of
    FP8_CACHE_DTYPES (not on ROCm, whose FP8 is fnuz); None otherwise."""
    if kv_cache_dtype not in FP8_CACHE_DTYPES or torch.version.hip is not None:
        return None
    if kv_cache.dtype == torch.uint8:
        return kv_cache.view(torch.float8_e4m3fn)
    return kv_cache if kv_cache.dtype == torch.float8_e4m3fn else None


def _split(layer: Any, kv_cache: torch.Tensor, head_size: int
           ) -> tuple[torch.Tensor, torch.Tensor] | None:
    if backend_name(layer) not in SPLIT_CACHE_BACKENDS:
        return None
    if getattr(layer, "kv_sharing_target_layer_name", None) is not None:
        return None
    if kv_cache.dim() != 4 or kv_cache.shape[-1] != 2 * head_size:
        return None
    k_cache, v_cache = kv_cache.transpose(1, 2).split(head_size, dim=-1)
    return k_cache, v_cache


def split_kv_cache(layer: Any, kv_cache: torch.Tensor, head_size: int, dtype: torch.dtype
                   ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(k_cache, v_cache) `[num_blocks, block_size, kv_heads, head_size]`, views into the layer's
    cache, where its backend keeps k and v side by side on the content dim in `dtype`; None
    where irfuse does not know the layout (vLLM's own code then reads and writes it).

    vLLM 0.32's cache is one tensor per layer, logically `[num_blocks, kv_heads, block_size, C]`
    (`vllm.v1.kv_cache_interface`: `[B, H, N, C]`, its strides the layout's: HND is that order,
    NHD stores `[B, N, H, C]`); the FlashAttention, Triton and FlashInfer backends split it as
    `kv_cache.transpose(1, 2).split(head_size, -1)`, and irfuse's kernels write and read these
    views in place with their strides. Other backends (the CPU one, whose blocks hold k
    column-major or in AMX tiles depending on the ISA) and NVFP4, per-head-quantized or FP8
    caches are left to vLLM (`paged_kv_cache` takes FP8 ones)."""
    if getattr(layer, "kv_cache_dtype", "auto") != "auto" or kv_cache.dtype != dtype:
        return None
    return _split(layer, kv_cache, head_size)


def paged_kv_cache(layer: Any, kv_cache: torch.Tensor, head_size: int, dtype: torch.dtype
                   ) -> PagedKv | None:
    """Where irfuse's kernels write the layer's new k and v and read its context:
    `split_kv_cache`'s views of a cache in `dtype`, or of an FP8 one (`fp8_cache`) with the
    layer's `_k_scale` and `_v_scale`, as vLLM's `do_kv_cache_update` passes them; None where
    vLLM's own write and attention must run."""
    kind = getattr(layer, "kv_cache_dtype", "auto")
    if kind == "auto":
        caches = split_kv_cache(layer, kv_cache, head_size, dtype)
        return None if caches is None else PagedKv(*caches, None, None)
    cache = fp8_cache(kv_cache, kind)
    caches = None if cache is None else _split(layer, cache, head_size)
    if caches is None:
        return None
    return PagedKv(*caches, layer._k_scale, layer._v_scale)


def mla_cache(layer: Any, kv_cache: torch.Tensor, width: int, dtype: torch.dtype,
              kv_cache_dtype: str) -> torch.Tensor | None:
    """The MLA layer's latent cache `[num_blocks, block_size, kv_lora_rank + rope_dim]`, a view
    of vLLM's, where its backend writes it as vLLM's base `MLAAttentionImpl.do_kv_cache_update`
    does (`concat_and_cache_mla`: in the model dtype, `kv_cache_dtype` "auto", or FP8 scaled by
    the call's k_scale, `fp8_cache`, then float8_e4m3fn) and nothing else moves rows (no
    HiSparse cache, no prefill context parallelism); None elsewhere (vLLM's own write then
    runs). vLLM 0.32's MLA cache is `[B, 1, N, C]` (one "head"), as its fused
    `concat_and_cache_mla_rope_fused` call squeezes it."""
    update = getattr(type(getattr(layer, "impl", None)), "do_kv_cache_update", None)
    if getattr(update, "__qualname__", "") != "MLAAttentionImpl.do_kv_cache_update":
        return None
    if kv_cache_dtype != "auto":
        kv_cache = fp8_cache(kv_cache, kv_cache_dtype)
        if kv_cache is None:
            return None
    elif kv_cache.dtype != dtype:
        return None
    if getattr(layer, "hisparse_cache", None) is not None or getattr(layer, "use_pcp", False):
        return None
    if kv_cache.dim() == 4 and kv_cache.shape[1] == 1:
        kv_cache = kv_cache.squeeze(1)
    if kv_cache.dim() != 3 or kv_cache.shape[-1] != width:
        return None
    return kv_cache


def transfers_kv() -> bool:
    """Whether a KV connector moves layers in and out around attention (vLLM's
    `maybe_transfer_kv_layer` hooks, which only its own op runs)."""
    if "vllm" not in sys.modules:
        return False
    try:  # older vLLMs lack KV transfer
        has_group = _vllm("vllm.distributed.kv_transfer", "has_kv_transfer_group")
    except (ImportError, AttributeError):
        return False
    return bool(has_group())
