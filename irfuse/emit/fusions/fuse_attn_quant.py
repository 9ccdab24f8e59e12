"""fuse_attn_quant: attention -> static FP8 quant of its output, the quantized output written by
the attention kernel (prefill, causal or masked, and paged decode over gathered pages). On from
O2 on sm90, where it measured faster than SDPA + Inductor's quant below 4096 tokens; from 4096
tokens kernel choice leaves prefill to SDPA (vLLM's O2 leaves the fusion off, #25689).

Kernel `attention_quant_fp8_static`: q, k, v in SDPA's `[B, H, T, D]` layout (GQA), an optional
mask, the output scale; returns the output token-major `[B * T, Hq * Dv]` in FP8, as the quant
saw it. Per-group, NVFP4 and MLA attention are not fused yet (remarks).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from xdsl.dialects.builtin import FloatData

from irfuse.dialects import aten, fused, kernel
from irfuse.emit import dispatch
from irfuse.emit.declare import Choice, Fusion, Kernel, Support, everywhere
from irfuse.emit.dispatch import check_fp8, empty, kernels
from irfuse.emit.kernel_call import Args, flag, kernel_call
from irfuse.emit.kernels import quant_ref
from irfuse.rewrites.fuse_attn_quant import KERNEL, AttnQuantPattern

SCHEMA = ("(Tensor q, Tensor k, Tensor v, Tensor? mask, Tensor scale, float softmax_scale, "
          "bool causal, ScalarType out_dtype, bool divide=False) -> Tensor")


def _token_major(o: torch.Tensor) -> torch.Tensor:
    """`[B, H, T, Dv]` -> `[B * T, H * Dv]`."""
    b, h, t, d = o.shape
    return o.transpose(1, 2).reshape(b * t, h * d)


def _ref(q, k, v, mask, scale, softmax_scale, causal, out_dtype, divide=False):
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                       scale=softmax_scale, enable_gqa=q.shape[-3] != k.shape[-3])
    return quant_ref.quant_fp8_static(_token_major(o), scale, out_dtype, divide)


def _cuda(q, k, v, mask, scale, softmax_scale, causal, out_dtype, divide=False):
    if (mask is None and out_dtype == torch.float8_e4m3fn and not divide
            and dispatch.use_triton(ATTN_QUANT, q, out_dtype)):
        out = kernels("attention_quant").attention_fp8(
            q, k, v, scale, softmax_scale=softmax_scale, causal=causal)
        return _token_major(out).contiguous()
    return _ref(q, k, v, mask, scale, softmax_scale, causal, out_dtype, divide)


def _fake(q, k, v, mask, scale, softmax_scale, causal, out_dtype, divide=False):
    check_fp8(q, out_dtype)
    b, h, t, _ = q.shape
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
    (1, Choice("triton", "docs/benchmarks.md: 1.27x / 1.02x the unfused graph at prefill T 512 / "
               "2048, 2.5-3.0x at paged decode, batch 16-64 (H100, 2026-12-05)")),
    (4096, Choice("inductor", "docs/benchmarks.md: 0.90x the unfused graph (SDPA + Inductor's "
                  "quant) at prefill T 8192 (H100, 2026-12-05)")),
)}

ATTN_QUANT = Kernel(KERNEL, SCHEMA, _ref, _cuda, _fake, _SM90, single_tensor=True,
                    examples=_examples)


def _lower(op: fused.AttentionQuantOp, platform: str) -> kernel.CallOp:
    a = Args()
    assert op.output_scale is not None, "static FP8 has an output scale"
    template = [a.tensor(op.q), a.tensor(op.k), a.tensor(op.v), a.optional(op.mask),
                a.tensor(op.output_scale), FloatData(op.scale.value.data),
                flag(op.causal.value.data), op.out.type.dtype]  # type: ignore[union-attr]
    keywords = {"divide": aten.TRUE} if op.divide is not None else {}
    return kernel_call(ATTN_QUANT, a, template, op, platform, keywords)


FUSION = Fusion(
    name="fuse-attn-quant",
    flag="fuse_attn_quant",
    kind="fusion",
    fuses="attention -> static FP8 quant of its output",
    quant="required",
    schemes=("fp8-static-tensor",),
    range_rule="all",
    platforms={**everywhere("triton", None), "cuda:sm90": Support("triton", 2)},
    vllm_pass="AttnFusionPass",
    note="on from O2 where measured (sm90), below 4096 tokens; vLLM's O2 leaves it off "
    "(#25689); per-group, NVFP4 and MLA not fused yet",
    patterns=(AttnQuantPattern(),),
    lowerings={fused.AttentionQuantOp.name: _lower},  # type: ignore[dict-item]
    kernels=(ATTN_QUANT,),
    size_aware=True,
)
