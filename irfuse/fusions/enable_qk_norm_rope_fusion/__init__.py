"""enable_qk_norm_rope_fusion: per-head RMSNorm of q and of k -> RoPE in one kernel (Qwen3,
Qwen3-MoE). vLLM leaves it off at every level (its CUDA kernel is slower than Inductor on the
H100, vLLM #34391, and breaks partial rotary, #51049); irfuse's default per platform follows its
own kernel's measurement (`_SM90`, docs/benchmarks.md).

Kernel `qk_norm_rope`: q and k in the rope's layout (`[T, H, D]`, or `[B, H, T, D]`), their norm
weights `[D]`, the rope table as positions + `cos_sin_cache` or as cos and sin, and the readings
of the norm (`eps`, `weight_offset`, `weight_f32`) and of the rotation (`rope_f32`). Any rotary
dim up to head_dim, NeoX or GPT-J. `rope_rows` turns the layouts into the kernel's rows.
"""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import FloatData, IntAttr

from irfuse.dialects import aten, fused, kernel
from irfuse.fusions.declare import Choice, Fusion, Kernel, Support, everywhere
from irfuse.fusions.enable_qk_norm_rope_fusion.pattern import KERNEL, QkNormRopePattern
from irfuse.fusions.kernel_call import Args, flag, kernel_call
from irfuse.kernels import dispatch, qk_norm_rope_ref, rope_rows
from irfuse.kernels.dispatch import kernels

SCHEMA = ("(Tensor q, Tensor k, Tensor q_weight, Tensor k_weight, Tensor? positions, "
          "Tensor? cos_sin_cache, Tensor? cos, Tensor? sin, float eps, bool is_neox, "
          "int rotary_dim, float weight_offset=0., bool weight_f32=False, "
          "bool rope_f32=False) -> (Tensor, Tensor)")


def _on_rows(fn, q, k, q_weight, k_weight, positions, cos_sin_cache, cos, sin, **readings):
    """Run `fn` (the reference or the kernel) on q's and k's rows; outputs in their layouts."""
    lq, lk = rope_rows.layouts(q, k, positions, cos)
    if cos is not None:
        cos, sin = rope_rows.table_rows(cos, lq), rope_rows.table_rows(sin, lq)
    else:
        positions = positions.reshape(-1)
    q_out, k_out = fn(lq.to_rows(q), lk.to_rows(k), q_weight, k_weight, cos, sin, positions,
                      cos_sin_cache, **readings)
    return lq.restore(q_out.contiguous()), lk.restore(k_out.contiguous())


def _readings(eps, is_neox, rotary_dim, weight_offset, weight_f32, rope_f32) -> dict:
    return {"eps": eps, "is_neox": is_neox, "rotary_dim": rotary_dim,
            "weight_offset": weight_offset, "weight_f32": weight_f32, "rope_f32": rope_f32}


def _ref(q, k, q_weight, k_weight, positions, cos_sin_cache, cos, sin, eps, is_neox, rotary_dim,
         weight_offset=0.0, weight_f32=False, rope_f32=False):
    return _on_rows(qk_norm_rope_ref.qk_norm_rope, q, k, q_weight, k_weight, positions,
                    cos_sin_cache, cos, sin,
                    **_readings(eps, is_neox, rotary_dim, weight_offset, weight_f32, rope_f32))


def _cuda(q, k, q_weight, k_weight, positions, cos_sin_cache, cos, sin, eps, is_neox,
          rotary_dim, weight_offset=0.0, weight_f32=False, rope_f32=False):
    fn = (kernels("qk_norm_rope").qk_norm_rope if dispatch.use_triton(QK_NORM_ROPE, q)
          else qk_norm_rope_ref.qk_norm_rope)
    return _on_rows(fn, q, k, q_weight, k_weight, positions, cos_sin_cache, cos, sin,
                    **_readings(eps, is_neox, rotary_dim, weight_offset, weight_f32, rope_f32))


def _fake(q, k, q_weight, k_weight, positions, cos_sin_cache, cos, sin, eps, is_neox, rotary_dim,
          weight_offset=0.0, weight_f32=False, rope_f32=False):
    lq, lk = rope_rows.layouts(q, k, positions, cos)
    if cos is not None:
        cos, sin = rope_rows.table_rows(cos, lq), rope_rows.table_rows(sin, lq)
    else:
        positions = positions.reshape(-1)
    qk_norm_rope_ref.check_args(lq.to_rows(q), lk.to_rows(k), q_weight, k_weight, cos, sin,
                                positions, cos_sin_cache, rotary_dim)
    return lq.empty(q), lk.empty(k)


def _examples(shape: tuple[int, ...]) -> list[tuple]:
    """q `[T, 4, D]` for `shape` `(T, D)`, k with 2 heads; both table forms, partial rotary."""
    t, d = shape[0], shape[-1]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(t, 4, d, generator=g).to(torch.bfloat16)
    k = torch.randn(t, 2, d, generator=g).to(torch.bfloat16)
    w = (torch.rand(d, generator=g) + 0.5).to(torch.bfloat16)
    positions = torch.randint(0, 64, (t,), generator=g)
    cache = torch.randn(64, d, generator=g).to(torch.bfloat16)
    cos = torch.randn(t, 1, d // 2, generator=g)
    return [(q, k, w, w, positions, cache, None, None, 1e-6, True, d),
            (q, k, w, w, None, None, cos, cos.flip(0), 1e-5, False, d // 2, 0.0, True, True)]


_SM90 = {"cuda:sm90": ((1, Choice("triton", (
    "docs/benchmarks.md: 2.65-5.03x Inductor at T 1-16384, 32 q / 8 kv heads of 128 "
    "(H100, 2026-12-05)"))),)}

QK_NORM_ROPE = Kernel(KERNEL, SCHEMA, _ref, _cuda, _fake, _SM90, examples=_examples)


def _lower(op: fused.QkNormRopeOp, platform: str) -> kernel.CallOp:
    a = Args()
    template = [a.tensor(op.q), a.tensor(op.k), a.tensor(op.q_weight), a.tensor(op.k_weight),
                a.optional(op.positions), a.optional(op.cos_sin_cache), a.optional(op.cos),
                a.optional(op.sin), FloatData(op.eps.value.data), flag(op.is_neox.value.data),
                IntAttr(op.rotary_dim.value.data)]
    keywords = {}
    if op.weight_offset.value.data != 0.0:
        keywords["weight_offset"] = FloatData(op.weight_offset.value.data)
    if op.weight_f32 is not None:
        keywords["weight_f32"] = aten.TRUE
    if op.rope_f32 is not None:
        keywords["rope_f32"] = aten.TRUE
    return kernel_call(QK_NORM_ROPE, a, template, op, platform, keywords)


FUSION = Fusion(
    name="enable-qk-norm-rope-fusion",
    flag="enable_qk_norm_rope_fusion",
    kind="fusion",
    fuses="per-head RMSNorm of q and k -> RoPE",
    quant="independent",
    schemes=(),
    range_rule="all",
    platforms={**everywhere("triton", None), "cuda:sm90": Support("triton", 1)},
    vllm_pass="QKNormRoPEFusionPass",
    note="on from O1 where measured faster than Inductor (sm90); vLLM leaves it off: its "
    "kernel is slower than Inductor on H100 (#34391)",
    patterns=(QkNormRopePattern(),),
    lowerings={fused.QkNormRopeOp.name: _lower},  # type: ignore[dict-item]
    kernels=(QK_NORM_ROPE,),
)
