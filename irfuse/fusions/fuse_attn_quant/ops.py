"""The kernels of attention -> static FP8 or NVFP4 output quant, and how `fused.attention_quant`,
`fused.paged_decode_quant`, `fused.mla_attention_quant` and `fused.vllm_attention_quant` lower to
them.

Each kernel's reference (the unfused graph, which the CPU runs) says its operands and results:
`attention_quant_*` (SDPA's layout, an optional mask), `paged_decode_quant_*` (a decode over a
paged KV cache), `mla_attention_quant_*` (MLA's latent operands) and `vllm_attention_quant_*`
(vLLM's own attention call, read from its forward context at run time). The `_nvfp4` kernels
take the NVFP4 global scale for the scale and return the packed e2m1 codes and the swizzled block
scales, as `quant.nvfp4` gives them. Every fused attention op holds the softmax scale as `scale`
and the output's as `output_scale` (the kernels' `softmax_scale` and `scale` / `global_scale`):
`_values` maps them. Whether irfuse's Triton kernel runs on a GPU is kernel choice's, per
platform and token range (`choices/`: each entry's measurement, or why it stays unfused).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import torch
import torch.nn.functional as F
from torch import Tensor
from xdsl.ir import Operation

from irfuse.dialects import fused
from irfuse.fusions.kernel_call import Lowering
from irfuse.fusions.kernel_decl import Call, Kernel, Opaque
from irfuse.kernels import (
    attention_quant_ref,
    dispatch,
    mla_attention_quant_ref,
    quant_ref,
    vllm_context,
)
from irfuse.kernels.dispatch import check_fp8, empty, fake_nvfp4, kernels, platform_of

_token_major = attention_quant_ref.token_major
NVFP4_GLOBAL = 448.0 * 6 / 4  # an NVFP4 global scale for the examples


def _sdpa(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, softmax_scale: float,
          causal: bool) -> Tensor:
    """The model's attention, token-major `[B * T, H * Dv]` in the model dtype."""
    return _token_major(F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, scale=softmax_scale,
        enable_gqa=q.shape[-3] != k.shape[-3]))


def _kernel_takes(q: Tensor, mask: Tensor | None) -> bool:
    """Whether the Triton attention kernels take this call: a head size up to theirs (256), and
    a mask, if any, that is bool or floating point (SDPA's two kinds; the kernel reads it
    broadcast, with GQA, by strides). Anything else runs the reference, which raises SDPA's own
    error where SDPA would."""
    return q.shape[-1] <= attention_quant_ref.KERNEL_MAX_HEAD_DIM and _mask_kind_ok(mask)


def _mask_kind_ok(mask: Tensor | None) -> bool:
    return mask is None or mask.dtype == torch.bool or mask.is_floating_point()


# --- attention -> FP8 ---------------------------------------------------------------------------


def attention_quant_fp8_static(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
                               scale: Tensor, softmax_scale: float, causal: bool,
                               out_dtype: torch.dtype, divide: bool = False) -> Tensor:
    """q, k, v in SDPA's `[B, H, T, D]` layout (GQA), or `[H, T, D]` without a batch dim, an
    optional mask (bool or additive float, any broadcast shape, read by strides) and the output
    scale: the output token-major `[B * T, Hq * Dv]` in FP8, as the quant saw it."""
    return quant_ref.quant_fp8_static(_sdpa(q, k, v, mask, softmax_scale, causal), scale,
                                      out_dtype, divide)


def _cuda(c: Call) -> Tensor:
    # Either quant spelling (models divide, `x / s`): the kernel's epilogue is within a float32
    # rounding of both, far inside its FP8 step (see `_fp8_out`). Masked calls too: the paged
    # model's decode (gathered pages, a `[B, 1, 1, S]` mask of valid positions) runs the kernel.
    if (c.out_dtype == torch.float8_e4m3fn and _kernel_takes(c.q, c.mask)
            and dispatch.use_triton(ATTN_QUANT, c.q, c.out_dtype)):
        q, k, v, mask = _batched(c)
        out = kernels("attention_quant").attention_fp8(
            q, k, v, c.scale, softmax_scale=c.softmax_scale, causal=c.causal, mask=mask)
        return _token_major(out).contiguous()
    return attention_quant_fp8_static(**c)


def _batched(c: Call) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """q, k, v (and the mask) as the kernels' `[B, H, T, D]`: an attention without a batch dim
    (`[H, T, D]`) as one batch of one."""
    if c.q.dim() == 4:
        return c.q, c.k, c.v, c.mask
    return c.q[None], c.k[None], c.v[None], None if c.mask is None else c.mask[None]


def _rows(q: Tensor, v: Tensor) -> tuple[int, int]:
    """The token-major output's `(B * T, H * Dv)` for q `[B, H, T, D]` or `[H, T, D]`."""
    *batch, h, t, _ = q.shape
    return (batch[0] if batch else 1) * t, h * v.shape[-1]


def _fake(c: Call) -> Tensor:
    check_fp8(c.q, c.out_dtype)
    return empty(c.q, _rows(c.q, c.v), c.out_dtype)


def _examples(shape: tuple[int, ...]) -> list[tuple]:
    """q `[1, 4, T, D]`, k and v with 2 heads, for `shape` `(T, D)`; causal, and masked."""
    t, d = shape[0], shape[-1]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, t, d, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(1, 2, t, d, generator=g).to(torch.bfloat16) for _ in range(2))
    s = torch.tensor([0.05])
    mask = torch.rand(1, 1, t, t, generator=g) > 0.3
    mask[..., 0] = True
    fp8 = torch.float8_e4m3fn
    return [(q, k, v, None, s, d ** -0.5, True, fp8), (q, k, v, mask, s, 0.1, False, fp8, True)]


ATTN_QUANT = Kernel(attention_quant_fp8_static, _fake, _cuda, examples=_examples)


# --- attention -> NVFP4 -------------------------------------------------------------------------


def attention_quant_nvfp4(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
                          global_scale: Tensor, softmax_scale: float,
                          causal: bool) -> tuple[Tensor, Tensor]:
    """`attention_quant_fp8_static`'s operands with the NVFP4 global scale: the packed e2m1 codes
    `[B * T, Hq * Dv / 2]` and the swizzled block scales, as `quant.nvfp4` gives them."""
    return quant_ref.quant_nvfp4(_sdpa(q, k, v, mask, softmax_scale, causal), global_scale)


def _nvfp4_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if (c.q.shape[-1] % quant_ref.NVFP4_BLOCK == 0 and _kernel_takes(c.q, c.mask)
            and dispatch.use_triton(ATTN_QUANT_NVFP4, c.q)):
        q, k, v, mask = _batched(c)
        return kernels("attention_quant").attention_nvfp4(
            q, k, v, c.global_scale, softmax_scale=c.softmax_scale, causal=c.causal, mask=mask)
    return attention_quant_nvfp4(**c)


def _nvfp4_fake(c: Call) -> tuple[Tensor, Tensor]:
    quant_ref.check_model_dtype(c.q)
    rows, cols = _rows(c.q, c.v)
    return fake_nvfp4(c.q.new_empty((rows, cols)), cols)


def _nvfp4_examples(shape: tuple[int, ...]) -> list[tuple]:
    """`_examples`' calls with the NVFP4 global scale for the output scale."""
    return [(q, k, v, mask, torch.tensor([NVFP4_GLOBAL]), sm, causal)
            for q, k, v, mask, _, sm, causal, *_ in _examples(shape)]


ATTN_QUANT_NVFP4 = Kernel(attention_quant_nvfp4, _nvfp4_fake, _nvfp4_cuda,
                          examples=_nvfp4_examples)


# --- paged decode -> FP8 / NVFP4 -----------------------------------------------------------------


def gathered(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor,
             seq_lens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """What the unfused graph attends over: each sequence's pages end to end, `[B, Hk, S, D]`,
    and the `[B, 1, 1, S]` mask of its first `seq_lens[b]` positions."""
    keys = k_cache[block_table].flatten(1, 2).transpose(1, 2)
    values = v_cache[block_table].flatten(1, 2).transpose(1, 2)
    positions = torch.arange(keys.shape[2], device=q.device)
    return keys, values, (positions[None, :] < seq_lens[:, None])[:, None, None, :]


def paged_decode_quant_fp8_static(q: Tensor, k_cache: Tensor, v_cache: Tensor,
                                  block_table: Tensor, seq_lens: Tensor, scale: Tensor,
                                  softmax_scale: float, out_dtype: torch.dtype,
                                  divide: bool = False) -> Tensor:
    """A decode over a paged KV cache (q `[B, Hq, 1, D]`, the caches, block table and sequence
    lengths) as the unfused graph computes it (pages gathered, length mask, SDPA, quant): what
    the CPU runs; CUDA runs the paged decode kernel (docs/benchmarks.md: 3.4-3.8x that graph)."""
    k, v, mask = gathered(q, k_cache, v_cache, block_table, seq_lens)
    return attention_quant_fp8_static(q, k, v, mask, scale, softmax_scale, False, out_dtype,
                                      divide)


def _paged_cuda(c: Call) -> Tensor:
    # Either quant spelling, as `_cuda`. The kernel reads positions [0, min(seq_lens[b], S)) of
    # each sequence through its table row: the graph's masked attention over the gathered pages.
    if (c.out_dtype == torch.float8_e4m3fn
            and c.q.shape[-1] <= attention_quant_ref.KERNEL_MAX_HEAD_DIM
            and dispatch.use_triton(PAGED_QUANT, c.q, c.out_dtype)):
        out = kernels("attention_quant").paged_decode_fp8(
            c.q[:, :, 0], c.k_cache, c.v_cache, c.block_table, c.seq_lens, c.scale,
            softmax_scale=c.softmax_scale)
        return out.reshape(out.shape[0], -1)
    return paged_decode_quant_fp8_static(**c)


def _paged_fake(c: Call) -> Tensor:
    check_fp8(c.q, c.out_dtype)
    b, h, _, d = c.q.shape
    return empty(c.q, (b, h * d), c.out_dtype)


def _paged_examples(shape: tuple[int, ...]) -> list[tuple]:
    """`shape[0]` sequences of random lengths over caches of 4-token blocks (4 q / 2 kv heads,
    head size `shape[-1]`, 3 blocks a sequence)."""
    b, d = shape[0], shape[-1]
    g = torch.Generator().manual_seed(0)
    bf = torch.bfloat16
    q = torch.randn(b, 4, 1, d, generator=g).to(bf)
    k_cache, v_cache = (torch.randn(3 * b + 1, 4, 2, d, generator=g).to(bf) for _ in range(2))
    table = torch.randperm(3 * b + 1, generator=g)[: 3 * b].view(b, 3).to(torch.int32)
    lens = torch.randint(1, 13, (b,), generator=g, dtype=torch.int32)
    fp8 = torch.float8_e4m3fn
    return [(q, k_cache, v_cache, table, lens, torch.tensor([0.05]), d ** -0.5, fp8),
            (q, k_cache, v_cache, table.long(), lens.long(), torch.tensor([0.05]), 0.1, fp8,
             True)]


PAGED_QUANT = Kernel(paged_decode_quant_fp8_static, _paged_fake, _paged_cuda,
                     examples=_paged_examples)


def paged_decode_quant_nvfp4(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor,
                             seq_lens: Tensor, global_scale: Tensor,
                             softmax_scale: float) -> tuple[Tensor, Tensor]:
    k, v, mask = gathered(q, k_cache, v_cache, block_table, seq_lens)
    return attention_quant_nvfp4(q, k, v, mask, global_scale, softmax_scale, False)


def _paged_nvfp4_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if (c.q.shape[-1] % quant_ref.NVFP4_BLOCK == 0
            and c.q.shape[-1] <= attention_quant_ref.KERNEL_MAX_HEAD_DIM
            and dispatch.use_triton(PAGED_QUANT_NVFP4, c.q)):
        return kernels("attention_quant").paged_decode_nvfp4(
            c.q[:, :, 0], c.k_cache, c.v_cache, c.block_table, c.seq_lens, c.global_scale,
            softmax_scale=c.softmax_scale)
    return paged_decode_quant_nvfp4(**c)


def _paged_nvfp4_fake(c: Call) -> tuple[Tensor, Tensor]:
    quant_ref.check_model_dtype(c.q)
    b, h, _, d = c.q.shape
    return fake_nvfp4(c.q.new_empty((b, h * d)), h * d)


def _paged_nvfp4_examples(shape: tuple[int, ...]) -> list[tuple]:
    """`_paged_examples`' calls with the NVFP4 global scale for the output scale."""
    return [(*call[:5], torch.tensor([NVFP4_GLOBAL]), call[6])
            for call in _paged_examples(shape)]


PAGED_QUANT_NVFP4 = Kernel(paged_decode_quant_nvfp4, _paged_nvfp4_fake, _paged_nvfp4_cuda,
                           examples=_paged_nvfp4_examples)


# --- MLA ----------------------------------------------------------------------------------------


def mla_attention_quant_fp8_static(q: Tensor, kv_c: Tensor, k_pe: Tensor, kv_b_weight: Tensor,
                                   mask: Tensor | None, scale: Tensor, num_heads: int,
                                   qk_nope_head_dim: int, v_head_dim: int, softmax_scale: float,
                                   causal: bool, batch_major: bool, out_dtype: torch.dtype,
                                   divide: bool = False) -> Tensor:
    """MLA (`attn.mla_attention`'s operands: q, the latent kv_c, the shared k_pe, kv_b's weight;
    token-major or batch-major, an optional mask): `[tokens, H * v]` in FP8."""
    return mla_attention_quant_ref.mla_attention_fp8(
        q, kv_c, k_pe, kv_b_weight, mask, scale, num_heads=num_heads, nope=qk_nope_head_dim,
        v_dim=v_head_dim, softmax_scale=softmax_scale, causal=causal, batch_major=batch_major,
        out_dtype=out_dtype, divide=divide)


def _mla_kernel_takes(c: Call) -> bool:
    """Whether the Triton MLA kernels take this call: head parts up to their 256 and a mask, if
    any, bool or floating point (as `_kernel_takes`)."""
    return (max(c.qk_nope_head_dim, c.k_pe.shape[-1], c.v_head_dim)
            <= attention_quant_ref.KERNEL_MAX_HEAD_DIM and _mask_kind_ok(c.mask))


def _mla_kernel_args(c: Call) -> dict:
    return {"num_heads": c.num_heads, "nope": c.qk_nope_head_dim, "v_dim": c.v_head_dim,
            "softmax_scale": c.softmax_scale, "causal": c.causal, "batch_major": c.batch_major,
            "mask": c.mask}


def _mla_cuda(c: Call) -> Tensor:
    # Either quant spelling, as `_cuda`; masked (batch-major) calls too.
    if (c.out_dtype == torch.float8_e4m3fn and _mla_kernel_takes(c)
            and dispatch.use_triton(MLA_ATTN_QUANT, c.q, c.out_dtype)):
        return kernels("mla_attention_quant").mla_attention_fp8(
            c.q, c.kv_c, c.k_pe, c.kv_b_weight, c.scale, **_mla_kernel_args(c))
    return mla_attention_quant_fp8_static(**c)


def _mla_rows(c: Call) -> int:
    return c.q.shape[0] * c.q.shape[2] if c.batch_major else c.q.shape[0]


def _mla_fake(c: Call) -> Tensor:
    check_fp8(c.q, c.out_dtype)
    return empty(c.q, (_mla_rows(c), c.num_heads * c.v_head_dim), c.out_dtype)


def _mla_examples(shape: tuple[int, ...]) -> list[tuple]:
    """Token-major causal MLA over `T = shape[0]` tokens (4 heads, nope 16, rope 8, v 16, rank
    32), and batch-major with a bool mask and the `x / s` quant."""
    t = shape[0]
    g = torch.Generator().manual_seed(0)
    bf = torch.bfloat16
    w = (torch.randn(4 * 32, 32, generator=g) * 0.2).to(bf)
    q, kv_c = torch.randn(t, 4, 24, generator=g).to(bf), torch.randn(t, 32, generator=g).to(bf)
    k_pe = torch.randn(t, 1, 8, generator=g).to(bf)
    mask = torch.rand(1, 1, t, t, generator=g) > 0.3
    mask[..., 0] = True
    s, fp8 = torch.tensor([0.05]), torch.float8_e4m3fn
    return [(q, kv_c, k_pe, w, None, s, 4, 16, 16, 24 ** -0.5, True, False, fp8),
            (q.transpose(0, 1)[None], kv_c[None, None], k_pe.transpose(0, 1)[None], w, mask, s,
             4, 16, 16, 0.2, False, True, fp8, True)]


MLA_ATTN_QUANT = Kernel(mla_attention_quant_fp8_static, _mla_fake, _mla_cuda,
                        examples=_mla_examples)


def mla_attention_quant_nvfp4(q: Tensor, kv_c: Tensor, k_pe: Tensor, kv_b_weight: Tensor,
                              mask: Tensor | None, global_scale: Tensor, num_heads: int,
                              qk_nope_head_dim: int, v_head_dim: int, softmax_scale: float,
                              causal: bool, batch_major: bool) -> tuple[Tensor, Tensor]:
    return mla_attention_quant_ref.mla_attention_nvfp4(
        q, kv_c, k_pe, kv_b_weight, mask, global_scale, num_heads=num_heads,
        nope=qk_nope_head_dim, v_dim=v_head_dim, softmax_scale=softmax_scale, causal=causal,
        batch_major=batch_major)


def _mla_nvfp4_cuda(c: Call) -> tuple[Tensor, Tensor]:
    if (c.v_head_dim % quant_ref.NVFP4_BLOCK == 0 and _mla_kernel_takes(c)
            and dispatch.use_triton(MLA_ATTN_QUANT_NVFP4, c.q)):
        return kernels("mla_attention_quant").mla_attention_nvfp4(
            c.q, c.kv_c, c.k_pe, c.kv_b_weight, c.global_scale, **_mla_kernel_args(c))
    return mla_attention_quant_nvfp4(**c)


def _mla_nvfp4_fake(c: Call) -> tuple[Tensor, Tensor]:
    quant_ref.check_model_dtype(c.q)
    width = c.num_heads * c.v_head_dim
    return fake_nvfp4(c.q.new_empty((_mla_rows(c), width)), width)


def _mla_nvfp4_examples(shape: tuple[int, ...]) -> list[tuple]:
    """`_mla_examples`' calls with the NVFP4 global scale for the output scale."""
    return [(*call[:5], torch.tensor([NVFP4_GLOBAL]), *call[6:12])
            for call in _mla_examples(shape)]


MLA_ATTN_QUANT_NVFP4 = Kernel(mla_attention_quant_nvfp4, _mla_nvfp4_fake, _mla_nvfp4_cuda,
                              examples=_mla_nvfp4_examples)


# --- vLLM's own attention call -> FP8 / NVFP4 ----------------------------------------------------

LayerName = Annotated[Any, Opaque(vllm_context.layer_name_type())]
"""The layer-name argument: vLLM's `LayerName` or `str`, fixed when these kernels are declared
(see `irfuse.kernels.vllm_context`)."""


def attention_out(q: Tensor, k: Tensor, v: Tensor, kv_cache_dep: Tensor | None,
                  layer_name: Any, out_tail: list[int], mla: bool) -> Tensor:
    """vLLM's attention call of the layer into a fresh model-dtype buffer `[T, *out_tail]` (what
    the unfused graph runs), flattened `[T, H * Dv]`."""
    out = q.new_empty((q.shape[0], *out_tail))
    op = torch.ops.vllm.unified_mla_attention_with_output if mla else \
        torch.ops.vllm.unified_attention_with_output
    op(q, k, v, out, layer_name, kv_cache_dummy_dep=kv_cache_dep)
    return out.view(q.shape[0], -1)


def vllm_attention_quant_fp8_static(q: Tensor, k: Tensor, v: Tensor, kv_cache_dep: Tensor | None,
                                    layer_name: LayerName, scale: Tensor, out_tail: list[int],
                                    mla: bool, out_dtype: torch.dtype,
                                    divide: bool = False) -> Tensor:
    """vLLM's own attention call with the quant (`fused.vllm_attention_quant`, `in_vllm.py`): q,
    k, v (MLA: q, kv_c_normed, k_pe), vLLM's dummy dependency, the layer name, the scale, the
    output buffer's dims after the tokens, `mla`, the output dtype and the quant's spelling
    (`divide`): `[T, H * Dv]` in FP8. The CPU runs this, the unfused graph's bits; on CUDA a
    decode step over a backend cache irfuse knows is read in place by the paged decode kernel
    (`paged_decode_in_place`), other steps run vLLM's attention, then irfuse's Triton quant."""
    return quant_ref.quant_fp8_static(
        attention_out(q, k, v, kv_cache_dep, layer_name, out_tail, mla), scale, out_dtype, divide)


def paged_decode_in_place(q: Tensor, layer_name: Any, scale: Tensor,
                          paged_decode_fp8: Callable[..., Tensor],
                          fp8_cache_on: Callable[[], bool] = lambda: False) -> Tensor | None:
    """The FP8 attention of a decode-only step, read from the layer's paged cache in place by
    `paged_decode_fp8` (irfuse's kernel, or its reference in tests): `[T, H * D]`, or None where
    this step or layer is not that (prefill tokens, a backend cache or attention variant irfuse
    does not know, a KV connector; vLLM's per-tensor FP8 cache unless `fp8_cache_on()`, asked
    only for such a cache): the caller then runs the reference."""
    if vllm_context.transfers_kv():
        return None
    ctx = vllm_context.attention_context(layer_name)
    meta, layer = ctx.metadata, ctx.layer
    impl = getattr(layer, "impl", None)
    d = q.shape[-1]
    caches = vllm_context.paged_kv_cache(layer, ctx.kv_cache, d, q.dtype)
    if caches is None or meta is None or impl is None or (
            caches.k_scale is not None and not fp8_cache_on()):
        return None
    if getattr(meta, "max_query_len", None) != 1 or not all(
            hasattr(meta, f) for f in ("block_table", "seq_lens", "num_actual_tokens")):
        return None
    if any(getattr(impl, f, None) not in (None, 0, 0.0, (-1, -1))
           for f in ("alibi_slopes", "sinks", "logits_soft_cap", "sliding_window")):
        return None
    n = int(meta.num_actual_tokens)
    kv = {} if caches.k_scale is None else {"k_scale": caches.k_scale, "v_scale": caches.v_scale}
    if 0 < n == q.shape[0]:  # no padding rows: the kernel's output is the result
        o = paged_decode_fp8(q, caches.k_cache, caches.v_cache, meta.block_table[:n],
                             meta.seq_lens[:n], scale, softmax_scale=float(impl.scale), **kv)
        return o.view(n, -1)
    out = q.new_empty((q.shape[0], q.shape[1] * d), dtype=torch.float8_e4m3fn)
    if n:
        o = paged_decode_fp8(q[:n], caches.k_cache, caches.v_cache, meta.block_table[:n],
                             meta.seq_lens[:n], scale, softmax_scale=float(impl.scale), **kv)
        out[:n] = o.reshape(n, -1)
    return out


def _vllm_cuda(c: Call) -> Tensor:
    if (not c.mla and c.out_dtype == torch.float8_e4m3fn
            and tuple(c.out_tail) == tuple(c.q.shape[1:])):
        out = paged_decode_in_place(
            c.q, c.layer_name, c.scale, kernels("attention_quant").paged_decode_fp8,
            lambda: VLLM_ATTN_QUANT.runs_variant(vllm_context.FP8_CACHE, platform_of(c.q.device)))
        if out is not None:
            return out
    # Any other step: vLLM's attention, then irfuse's Triton quant (one launch, as Inductor's
    # quant of the unfused graph; the reference's torch ops would be four).
    return kernels("act_quant").quant_fp8_static(
        attention_out(c.q, c.k, c.v, c.kv_cache_dep, c.layer_name, c.out_tail, c.mla), c.scale,
        c.out_dtype, divide=c.divide)


def _vllm_fake(c: Call) -> Tensor:
    check_fp8(c.q, c.out_dtype)
    return empty(c.q, (c.q.shape[0], math.prod(c.out_tail)), c.out_dtype)


VLLM_ATTN_QUANT = Kernel(vllm_attention_quant_fp8_static, _vllm_fake, _vllm_cuda,
                         variants=(vllm_context.FP8_CACHE,))


def vllm_attention_quant_nvfp4(q: Tensor, k: Tensor, v: Tensor, kv_cache_dep: Tensor | None,
                               layer_name: LayerName, global_scale: Tensor, out_tail: list[int],
                               mla: bool) -> tuple[Tensor, Tensor]:
    return quant_ref.quant_nvfp4(
        attention_out(q, k, v, kv_cache_dep, layer_name, out_tail, mla), global_scale)


def _vllm_nvfp4_fake(c: Call) -> tuple[Tensor, Tensor]:
    quant_ref.check_model_dtype(c.q)
    width = math.prod(c.out_tail)
    return fake_nvfp4(c.q.new_empty((c.q.shape[0], width)), width)


VLLM_ATTN_QUANT_NVFP4 = Kernel(vllm_attention_quant_nvfp4, _vllm_nvfp4_fake)  # CUDA: reference

KERNELS = (ATTN_QUANT, MLA_ATTN_QUANT, ATTN_QUANT_NVFP4, MLA_ATTN_QUANT_NVFP4, PAGED_QUANT,
           PAGED_QUANT_NVFP4, VLLM_ATTN_QUANT, VLLM_ATTN_QUANT_NVFP4)


# --- lowering ------------------------------------------------------------------------------------


def _values(op: Operation) -> dict[str, object]:
    return {"scale": op.output_scale, "global_scale": op.output_scale,  # type: ignore[attr-defined]
            "softmax_scale": op.scale, "out_dtype": op.out.type.dtype}  # type: ignore[attr-defined]


def _vllm_values(op: Operation) -> dict[str, object]:
    """`fused.vllm_attention_quant`'s: the output scale, the layer name (vLLM's hoisted
    `LayerName` input where the graph has it, else the name) and the output buffer's dims after
    the tokens (`[H, Dv]`; MLA's `[H * Dv]`)."""
    assert isinstance(op, fused.VllmAttentionQuantOp)
    out = op.out.type
    if op.mla is None:
        tail = [op.q.type.dims[1], op.v.type.dims[2]]  # type: ignore[attr-defined]
    else:
        width = out.dims[1]  # type: ignore[attr-defined]
        tail = [width * 2 if op.scheme.is_nvfp4 else width]
    return {"scale": op.output_scale, "global_scale": op.output_scale,
            "out_dtype": out.dtype,  # type: ignore[attr-defined]
            "layer_name": op.layer if op.layer is not None else op.layer_name, "out_tail": tail}


def _by_scheme(fp8: Kernel, nvfp4: Kernel,
               values: Callable[[Operation], Mapping[str, object]] = _values) -> Lowering:
    """The NVFP4 kernel or the FP8 one, by the op's output scheme."""
    return Lowering(lambda op: nvfp4 if op.scheme.is_nvfp4 else fp8,  # type: ignore[attr-defined]
                    values)


LOWERINGS = {
    fused.AttentionQuantOp.name: _by_scheme(ATTN_QUANT, ATTN_QUANT_NVFP4),
    fused.PagedDecodeQuantOp.name: _by_scheme(PAGED_QUANT, PAGED_QUANT_NVFP4),
    fused.MlaAttentionQuantOp.name: _by_scheme(MLA_ATTN_QUANT, MLA_ATTN_QUANT_NVFP4),
    fused.VllmAttentionQuantOp.name: _by_scheme(VLLM_ATTN_QUANT, VLLM_ATTN_QUANT_NVFP4,
                                                _vllm_values),
}
