"""fuse_attn_quant: attention -> static FP8 or NVFP4 quant of its output, the quantized output
written by the attention kernel (prefill, causal or masked; paged decode, reading the KV cache's
pages in place; MLA). On from O2 on sm90 where measured faster (H100, docs/benchmarks.md):
prefill below 4096 tokens (FP8 and NVFP4), MLA prefill (FP8), paged decode (FP8); from 4096
tokens kernel choice leaves prefill to SDPA. vLLM's O2 leaves the fusion off (#25689).

Kernel `attention_quant_fp8_static`: q, k, v in SDPA's `[B, H, T, D]` layout (GQA), or `[H, T, D]`
without a batch dim, an optional mask (bool or additive float, any broadcast shape, read by
strides), the output scale; returns the output token-major `[B * T, Hq * Dv]` in FP8, as the
quant saw it.

Kernel `paged_decode_quant_fp8_static`: a decode over a paged KV cache (`fused.paged_decode_quant`:
q `[B, Hq, 1, D]`, the caches, block table and sequence lengths); the CPU runs the unfused graph
(pages gathered, length mask, SDPA, quant), CUDA the paged decode kernel, 3.4-3.8x that graph.

Kernel `mla_attention_quant_fp8_static`: MLA (`attn.mla_attention`'s operands: q, the latent
kv_c, the shared k_pe, kv_b's weight; token-major or batch-major, an optional mask); returns
`[tokens, H * v]` in FP8.

Kernels `attention_quant_nvfp4`, `paged_decode_quant_nvfp4` and `mla_attention_quant_nvfp4`: the
same operands with the NVFP4 global scale for the scale; they return the packed e2m1 codes
`[tokens, H * Dv / 2]` and the swizzled block scales, as `quant.nvfp4` gives them. The CPU runs
the reference (the unfused graph); on CUDA the prefill's Triton NVFP4 epilogue is measured and
taken on sm90, the paged decode's and MLA's are not measured and stay unfused. Per-group output
quants are not fused (remarks).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from xdsl.dialects.builtin import FloatData, IntAttr

from irfuse.dialects import aten, fused, kernel
from irfuse.fusions.declare import Choice, Fusion, Kernel, Support, everywhere
from irfuse.fusions.fuse_attn_quant.pattern import (
    KERNEL,
    MLA_KERNEL,
    MLA_NVFP4_KERNEL,
    NVFP4_KERNEL,
    PAGED_KERNEL,
    PAGED_NVFP4_KERNEL,
    AttnQuantPattern,
)
from irfuse.fusions.kernel_call import Args, flag, kernel_call
from irfuse.kernels import attention_quant_ref, dispatch, mla_attention_quant_ref, quant_ref
from irfuse.kernels.dispatch import check_fp8, empty, fake_nvfp4, kernels

SCHEMA = ("(Tensor q, Tensor k, Tensor v, Tensor? mask, Tensor scale, float softmax_scale, "
          "bool causal, ScalarType out_dtype, bool divide=False) -> Tensor")


_token_major = attention_quant_ref.token_major


def _sdpa(q, k, v, mask, softmax_scale, causal):
    """The model's attention, token-major `[B * T, H * Dv]` in the model dtype."""
    return _token_major(F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, scale=softmax_scale,
        enable_gqa=q.shape[-3] != k.shape[-3]))


def _ref(q, k, v, mask, scale, softmax_scale, causal, out_dtype, divide=False):
    return quant_ref.quant_fp8_static(_sdpa(q, k, v, mask, softmax_scale, causal), scale,
                                      out_dtype, divide)


def _kernel_takes(q, mask) -> bool:
    """Whether the Triton attention kernels take this call: a head size up to theirs (256), and
    a mask, if any, that is bool or floating point (SDPA's two kinds; the kernel reads it
    broadcast, with GQA, by strides). Anything else runs the reference, which raises SDPA's own
    error where SDPA would."""
    return q.shape[-1] <= attention_quant_ref.KERNEL_MAX_HEAD_DIM and _mask_kind_ok(mask)


def _mask_kind_ok(mask) -> bool:
    return mask is None or mask.dtype == torch.bool or mask.is_floating_point()


def _cuda(q, k, v, mask, scale, softmax_scale, causal, out_dtype, divide=False):
    # Either quant spelling (models divide, `x / s`): the kernel's epilogue is within a float32
    # rounding of both, far inside its FP8 step (see `_fp8_out`). Masked calls too: the paged
    # model's decode (gathered pages, a `[B, 1, 1, S]` mask of valid positions) runs the kernel.
    if (out_dtype == torch.float8_e4m3fn and _kernel_takes(q, mask)
            and dispatch.use_triton(ATTN_QUANT, q, out_dtype)):
        q4, k4, v4, m4 = _batched(q, k, v, mask)
        out = kernels("attention_quant").attention_fp8(
            q4, k4, v4, scale, softmax_scale=softmax_scale, causal=causal, mask=m4)
        return _token_major(out).contiguous()
    return _ref(q, k, v, mask, scale, softmax_scale, causal, out_dtype, divide)


def _batched(q, k, v, mask):
    """q, k, v (and the mask) as the kernels' `[B, H, T, D]`: an attention without a batch dim
    (`[H, T, D]`) as one batch of one."""
    if q.dim() == 4:
        return q, k, v, mask
    return q[None], k[None], v[None], None if mask is None else mask[None]


def _fake(q, k, v, mask, scale, softmax_scale, causal, out_dtype, divide=False):
    check_fp8(q, out_dtype)
    *batch, h, t, _ = q.shape
    b = batch[0] if batch else 1
    return empty(q, (b * t, h * v.shape[-1]), out_dtype)


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


_SM90 = {"cuda:sm90": (
    (1, Choice("triton", "docs/benchmarks.md: 1.34x / 1.08x the unfused graph at prefill T 512 / "
               "2048 (H100, 2026-12-06); a paged decode goes to paged_decode_quant instead")),
    (4096, Choice("inductor", "docs/benchmarks.md: 0.94x / 0.90x the unfused graph (SDPA + "
                  "Inductor's quant) at prefill T 4096 / 8192 (H100, 2026-12-05/06)")),
)}

ATTN_QUANT = Kernel(KERNEL, SCHEMA, _ref, _cuda, _fake, _SM90, single_tensor=True,
                    examples=_examples)


# --- attention -> NVFP4 -------------------------------------------------------------------------

NVFP4_SCHEMA = ("(Tensor q, Tensor k, Tensor v, Tensor? mask, Tensor global_scale, "
                "float softmax_scale, bool causal) -> (Tensor, Tensor)")


def _nvfp4_ref(q, k, v, mask, global_scale, softmax_scale, causal):
    return quant_ref.quant_nvfp4(_sdpa(q, k, v, mask, softmax_scale, causal), global_scale)


def _nvfp4_cuda(q, k, v, mask, global_scale, softmax_scale, causal):
    if (q.shape[-1] % quant_ref.NVFP4_BLOCK == 0 and _kernel_takes(q, mask)
            and dispatch.use_triton(ATTN_QUANT_NVFP4, q)):
        q4, k4, v4, m4 = _batched(q, k, v, mask)
        return kernels("attention_quant").attention_nvfp4(
            q4, k4, v4, global_scale, softmax_scale=softmax_scale, causal=causal, mask=m4)
    return _nvfp4_ref(q, k, v, mask, global_scale, softmax_scale, causal)


def _nvfp4_fake(q, k, v, mask, global_scale, softmax_scale, causal):
    quant_ref.check_model_dtype(q)
    *batch, h, t, _ = q.shape
    b = batch[0] if batch else 1
    return fake_nvfp4(q.new_empty((b * t, h * v.shape[-1])), h * v.shape[-1])


def _nvfp4_examples(shape: tuple[int, ...]) -> list[tuple]:
    """`_examples`' calls with the NVFP4 global scale for the output scale."""
    return [(q, k, v, mask, torch.tensor([448.0 * 6 / 4]), sm, causal)
            for q, k, v, mask, _, sm, causal, *_ in _examples(shape)]


_SM90_NVFP4 = {"cuda": ((1, Choice("inductor", "measured on sm90 only: attention + NVFP4 stays "
                                    "unfused on other GPUs until measured there")),),
               "cuda:sm90": (
    (1, Choice("triton", "docs/benchmarks.md: 1.22x / 1.07x the unfused graph (SDPA, irfuse's "
               "NVFP4 quant kernel) at prefill T 512 / 2048 (H100, 2026-12-06)")),
    (4096, Choice("inductor", "not measured from 4096 tokens, where the FP8 kernel already loses "
                  "to SDPA (0.94x at T 4096, H100)")),
)}

ATTN_QUANT_NVFP4 = Kernel(NVFP4_KERNEL, NVFP4_SCHEMA, _nvfp4_ref, _nvfp4_cuda, _nvfp4_fake,
                          _SM90_NVFP4, examples=_nvfp4_examples)


def _quant_call(fp8: Kernel, nvfp4: Kernel, a: Args, template: list, op, platform: str
                ) -> kernel.CallOp:
    """The call of a fused attention op's kernel: the NVFP4 one, or the FP8 one with the output
    dtype and the quant's spelling (`divide`)."""
    if op.scheme.is_nvfp4:
        return kernel_call(nvfp4, a, template, op, platform)
    template.append(op.out.type.dtype)
    keywords = {"divide": aten.TRUE} if op.divide is not None else {}
    return kernel_call(fp8, a, template, op, platform, keywords)


def _lower(op: fused.AttentionQuantOp, platform: str) -> kernel.CallOp:
    a = Args()
    assert op.output_scale is not None, "static FP8 and NVFP4 have an output scale"
    template = [a.tensor(op.q), a.tensor(op.k), a.tensor(op.v), a.optional(op.mask),
                a.tensor(op.output_scale), FloatData(op.scale.value.data),
                flag(op.causal.value.data)]
    return _quant_call(ATTN_QUANT, ATTN_QUANT_NVFP4, a, template, op, platform)


# --- paged decode -> FP8 / NVFP4 -----------------------------------------------------------------

PAGED_SCHEMA = ("(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, Tensor seq_lens, "
                "Tensor scale, float softmax_scale, ScalarType out_dtype, bool divide=False) "
                "-> Tensor")


def _gathered(q, k_cache, v_cache, block_table, seq_lens):
    """What the unfused graph attends over: each sequence's pages end to end, `[B, Hk, S, D]`,
    and the `[B, 1, 1, S]` mask of its first `seq_lens[b]` positions."""
    keys = k_cache[block_table].flatten(1, 2).transpose(1, 2)
    values = v_cache[block_table].flatten(1, 2).transpose(1, 2)
    positions = torch.arange(keys.shape[2], device=q.device)
    return keys, values, (positions[None, :] < seq_lens[:, None])[:, None, None, :]


def _paged_ref(q, k_cache, v_cache, block_table, seq_lens, scale, softmax_scale, out_dtype,
               divide=False):
    k, v, mask = _gathered(q, k_cache, v_cache, block_table, seq_lens)
    return _ref(q, k, v, mask, scale, softmax_scale, False, out_dtype, divide)


def _paged_cuda(q, k_cache, v_cache, block_table, seq_lens, scale, softmax_scale, out_dtype,
                divide=False):
    # Either quant spelling, as `_cuda`. The kernel reads positions [0, min(seq_lens[b], S)) of
    # each sequence through its table row: the graph's masked attention over the gathered pages.
    if (out_dtype == torch.float8_e4m3fn
            and q.shape[-1] <= attention_quant_ref.KERNEL_MAX_HEAD_DIM
            and dispatch.use_triton(PAGED_QUANT, q, out_dtype)):
        out = kernels("attention_quant").paged_decode_fp8(
            q[:, :, 0], k_cache, v_cache, block_table, seq_lens, scale,
            softmax_scale=softmax_scale)
        return out.reshape(out.shape[0], -1)
    return _paged_ref(q, k_cache, v_cache, block_table, seq_lens, scale, softmax_scale,
                      out_dtype, divide)


def _paged_fake(q, k_cache, v_cache, block_table, seq_lens, scale, softmax_scale, out_dtype,
                divide=False):
    check_fp8(q, out_dtype)
    b, h, _, d = q.shape
    return empty(q, (b, h * d), out_dtype)


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


PAGED_QUANT = Kernel(
    PAGED_KERNEL, PAGED_SCHEMA, _paged_ref, _paged_cuda, _paged_fake,
    {"cuda:sm90": ((1, Choice("triton", "docs/benchmarks.md: 3.44-3.75x the unfused decode "
                              "(pages gathered, masked SDPA, Inductor's quant) at batch 16-64, "
                              "context 2048-8192 (H100, 2026-12-06)")),)},
    single_tensor=True, examples=_paged_examples)

PAGED_NVFP4_SCHEMA = ("(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, "
                      "Tensor seq_lens, Tensor global_scale, float softmax_scale) "
                      "-> (Tensor, Tensor)")


def _paged_nvfp4_ref(q, k_cache, v_cache, block_table, seq_lens, global_scale, softmax_scale):
    k, v, mask = _gathered(q, k_cache, v_cache, block_table, seq_lens)
    return _nvfp4_ref(q, k, v, mask, global_scale, softmax_scale, False)


def _paged_nvfp4_cuda(q, k_cache, v_cache, block_table, seq_lens, global_scale, softmax_scale):
    if (q.shape[-1] % quant_ref.NVFP4_BLOCK == 0
            and q.shape[-1] <= attention_quant_ref.KERNEL_MAX_HEAD_DIM
            and dispatch.use_triton(PAGED_QUANT_NVFP4, q)):
        return kernels("attention_quant").paged_decode_nvfp4(
            q[:, :, 0], k_cache, v_cache, block_table, seq_lens, global_scale,
            softmax_scale=softmax_scale)
    return _paged_nvfp4_ref(q, k_cache, v_cache, block_table, seq_lens, global_scale,
                            softmax_scale)


def _paged_nvfp4_fake(q, k_cache, v_cache, block_table, seq_lens, global_scale, softmax_scale):
    quant_ref.check_model_dtype(q)
    b, h, _, d = q.shape
    return fake_nvfp4(q.new_empty((b, h * d)), h * d)


def _paged_nvfp4_examples(shape: tuple[int, ...]) -> list[tuple]:
    """`_paged_examples`' calls with the NVFP4 global scale for the output scale."""
    return [(*call[:5], torch.tensor([448.0 * 6 / 4]), call[6])
            for call in _paged_examples(shape)]


PAGED_QUANT_NVFP4 = Kernel(
    PAGED_NVFP4_KERNEL, PAGED_NVFP4_SCHEMA, _paged_nvfp4_ref, _paged_nvfp4_cuda,
    _paged_nvfp4_fake,
    {"cuda": ((1, Choice("inductor", "not measured on a GPU yet: paged decode + NVFP4 stays "
                         "unfused until benchmarks/bench_attention_quant.py measures it")),)},
    examples=_paged_nvfp4_examples)


def _lower_paged(op: fused.PagedDecodeQuantOp, platform: str) -> kernel.CallOp:
    a = Args()
    template = [a.tensor(op.q), a.tensor(op.k_cache), a.tensor(op.v_cache),
                a.tensor(op.block_table), a.tensor(op.seq_lens), a.tensor(op.output_scale),
                FloatData(op.scale.value.data)]
    return _quant_call(PAGED_QUANT, PAGED_QUANT_NVFP4, a, template, op, platform)


# --- MLA ----------------------------------------------------------------------------------------

MLA_SCHEMA = ("(Tensor q, Tensor kv_c, Tensor k_pe, Tensor kv_b_weight, Tensor? mask, "
              "Tensor scale, int num_heads, int qk_nope_head_dim, int v_head_dim, "
              "float softmax_scale, bool causal, bool batch_major, ScalarType out_dtype, "
              "bool divide=False) -> Tensor")


def _mla_ref(q, kv_c, k_pe, kv_b_weight, mask, scale, num_heads, qk_nope_head_dim, v_head_dim,
             softmax_scale, causal, batch_major, out_dtype, divide=False):
    return mla_attention_quant_ref.mla_attention_fp8(
        q, kv_c, k_pe, kv_b_weight, mask, scale, num_heads=num_heads, nope=qk_nope_head_dim,
        v_dim=v_head_dim, softmax_scale=softmax_scale, causal=causal, batch_major=batch_major,
        out_dtype=out_dtype, divide=divide)


def _mla_kernel_takes(q, k_pe, mask, nope, v_dim) -> bool:
    """Whether the Triton MLA kernels take this call: head parts up to their 256 and a mask, if
    any, bool or floating point (as `_kernel_takes`)."""
    return (max(nope, k_pe.shape[-1], v_dim) <= attention_quant_ref.KERNEL_MAX_HEAD_DIM
            and _mask_kind_ok(mask))


def _mla_cuda(q, kv_c, k_pe, kv_b_weight, mask, scale, num_heads, qk_nope_head_dim,
              v_head_dim, softmax_scale, causal, batch_major, out_dtype, divide=False):
    # Either quant spelling, as `_cuda`; masked (batch-major) calls too.
    if (out_dtype == torch.float8_e4m3fn and _mla_kernel_takes(q, k_pe, mask, qk_nope_head_dim,
                                                                v_head_dim)
            and dispatch.use_triton(MLA_ATTN_QUANT, q, out_dtype)):
        return kernels("mla_attention_quant").mla_attention_fp8(
            q, kv_c, k_pe, kv_b_weight, scale, num_heads=num_heads, nope=qk_nope_head_dim,
            v_dim=v_head_dim, softmax_scale=softmax_scale, causal=causal,
            batch_major=batch_major, mask=mask)
    return _mla_ref(q, kv_c, k_pe, kv_b_weight, mask, scale, num_heads, qk_nope_head_dim,
                    v_head_dim, softmax_scale, causal, batch_major, out_dtype, divide)


def _mla_fake(q, kv_c, k_pe, kv_b_weight, mask, scale, num_heads, qk_nope_head_dim,
              v_head_dim, softmax_scale, causal, batch_major, out_dtype, divide=False):
    check_fp8(q, out_dtype)
    tokens = q.shape[0] * q.shape[2] if batch_major else q.shape[0]
    return empty(q, (tokens, num_heads * v_head_dim), out_dtype)


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


MLA_ATTN_QUANT = Kernel(
    MLA_KERNEL, MLA_SCHEMA, _mla_ref, _mla_cuda, _mla_fake,
    {"cuda": ((1, Choice("inductor", "measured on sm90 only: MLA + quant stays unfused on "
                         "other GPUs until measured there")),),
     "cuda:sm90": ((1, Choice("triton", "docs/benchmarks.md: 1.19x / 1.09x the unfused MLA "
                              "(kv_b GEMM, SDPA, Inductor's quant) at prefill T 512 / 2048 "
                              "(H100, 2026-12-06)")),)},
    single_tensor=True, examples=_mla_examples)


MLA_NVFP4_SCHEMA = ("(Tensor q, Tensor kv_c, Tensor k_pe, Tensor kv_b_weight, Tensor? mask, "
                    "Tensor global_scale, int num_heads, int qk_nope_head_dim, int v_head_dim, "
                    "float softmax_scale, bool causal, bool batch_major) -> (Tensor, Tensor)")


def _mla_nvfp4_ref(q, kv_c, k_pe, kv_b_weight, mask, global_scale, num_heads,
                   qk_nope_head_dim, v_head_dim, softmax_scale, causal, batch_major):
    return mla_attention_quant_ref.mla_attention_nvfp4(
        q, kv_c, k_pe, kv_b_weight, mask, global_scale, num_heads=num_heads,
        nope=qk_nope_head_dim, v_dim=v_head_dim, softmax_scale=softmax_scale, causal=causal,
        batch_major=batch_major)


def _mla_nvfp4_cuda(q, kv_c, k_pe, kv_b_weight, mask, global_scale, num_heads,
                    qk_nope_head_dim, v_head_dim, softmax_scale, causal, batch_major):
    if (v_head_dim % quant_ref.NVFP4_BLOCK == 0
            and _mla_kernel_takes(q, k_pe, mask, qk_nope_head_dim, v_head_dim)
            and dispatch.use_triton(MLA_ATTN_QUANT_NVFP4, q)):
        return kernels("mla_attention_quant").mla_attention_nvfp4(
            q, kv_c, k_pe, kv_b_weight, global_scale, num_heads=num_heads,
            nope=qk_nope_head_dim, v_dim=v_head_dim, softmax_scale=softmax_scale,
            causal=causal, batch_major=batch_major, mask=mask)
    return _mla_nvfp4_ref(q, kv_c, k_pe, kv_b_weight, mask, global_scale, num_heads,
                          qk_nope_head_dim, v_head_dim, softmax_scale, causal, batch_major)


def _mla_nvfp4_fake(q, kv_c, k_pe, kv_b_weight, mask, global_scale, num_heads,
                    qk_nope_head_dim, v_head_dim, softmax_scale, causal, batch_major):
    quant_ref.check_model_dtype(q)
    tokens = q.shape[0] * q.shape[2] if batch_major else q.shape[0]
    return fake_nvfp4(q.new_empty((tokens, num_heads * v_head_dim)), num_heads * v_head_dim)


def _mla_nvfp4_examples(shape: tuple[int, ...]) -> list[tuple]:
    """`_mla_examples`' calls with the NVFP4 global scale for the output scale."""
    return [(*call[:5], torch.tensor([448.0 * 6 / 4]), *call[6:12])
            for call in _mla_examples(shape)]


MLA_ATTN_QUANT_NVFP4 = Kernel(
    MLA_NVFP4_KERNEL, MLA_NVFP4_SCHEMA, _mla_nvfp4_ref, _mla_nvfp4_cuda, _mla_nvfp4_fake,
    {"cuda": ((1, Choice("inductor", "not measured on a GPU yet: MLA + NVFP4 stays unfused "
                         "until measured against the unfused graph (MLA, then irfuse's NVFP4 "
                         "quant kernel)")),)},
    examples=_mla_nvfp4_examples)


def _lower_mla(op: fused.MlaAttentionQuantOp, platform: str) -> kernel.CallOp:
    a = Args()
    assert op.output_scale is not None, "static FP8 and NVFP4 have an output scale"
    template = [a.tensor(op.q), a.tensor(op.kv_c), a.tensor(op.k_pe), a.tensor(op.kv_b_weight),
                a.optional(op.mask), a.tensor(op.output_scale), IntAttr(op.num_heads.value.data),
                IntAttr(op.qk_nope_head_dim.value.data), IntAttr(op.v_head_dim.value.data),
                FloatData(op.scale.value.data), flag(op.causal.value.data),
                flag(op.batch_major.value.data)]
    return _quant_call(MLA_ATTN_QUANT, MLA_ATTN_QUANT_NVFP4, a, template, op, platform)


FUSION = Fusion(
    name="fuse-attn-quant",
    flag="fuse_attn_quant",
    kind="fusion",
    fuses="attention or MLA -> static FP8 or NVFP4 quant of its output",
    quant="required",
    schemes=("fp8-static-tensor", "nvfp4"),
    range_rule="all",
    platforms={**everywhere("triton", None), "cuda:sm90": Support("triton", 2)},
    vllm_pass="AttnFusionPass",
    note="on from O2 where measured (sm90): prefill below 4096 tokens, paged decode (read in "
    "place), MLA prefill; vLLM's O2 leaves it off (#25689); NVFP4 outputs fused on the CPU and "
    "for sm90 prefill; per-group not fused",
    patterns=(AttnQuantPattern(),),
    lowerings={fused.AttentionQuantOp.name: _lower,  # type: ignore[dict-item]
               fused.PagedDecodeQuantOp.name: _lower_paged,  # type: ignore[dict-item]
               fused.MlaAttentionQuantOp.name: _lower_mla},  # type: ignore[dict-item]
    kernels=(ATTN_QUANT, MLA_ATTN_QUANT, ATTN_QUANT_NVFP4, MLA_ATTN_QUANT_NVFP4, PAGED_QUANT,
             PAGED_QUANT_NVFP4),
    size_aware=True,
)
