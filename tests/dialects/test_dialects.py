"""The semantic and fused dialects: builders, verifiers, print/parse, decomposition regions.

The FileCheck suite (`filecheck/dialects/<d>/`) covers the textual forms and every verifier
message; these tests cover what only Python sees: the builders' inferred types, structural
equality after a round trip, the scheme helpers and the outline / inline helpers.
"""

from __future__ import annotations

import io
import pathlib
from collections.abc import Callable
from functools import cache

import pytest
from xdsl.context import Context
from xdsl.dialects import test as xdsl_test
from xdsl.dialects.builtin import ModuleOp, bf16, f16, f32, i1, i32, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.parser import Parser
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from irfuse.context import all_dialects, load_all
from irfuse.dialects import act, attn, coll, fused, gemm, norm, quant
from irfuse.dialects.irfuse import TensorType, YieldOp, tensor_type
from irfuse.dialects.quant import QuantScheme
from irfuse.ir.decomposition import (
    decomposition_block,
    in_decomposition,
    inline_decomposition,
    outline,
)
from irfuse.ir.shapes import F8E4M3FN, UI8, dims_agree, promote

ROOT = pathlib.Path(__file__).resolve().parents[2]
T = tensor_type
SEMANTIC_AND_FUSED = ("norm", "quant", "gemm", "attn", "act", "coll", "fused")


@cache
def _context() -> Context:
    ctx = load_all(Context())
    ctx.load_dialect(xdsl_test.Test)
    return ctx


def _print(op: Operation) -> str:
    out = io.StringIO()
    Printer(stream=out).print_op(op)
    return out.getvalue()


class Args:
    """Typed block arguments to build ops on, kept in one func so they can be printed."""

    def __init__(self) -> None:
        self.block = Block()
        self.ops: list[Operation] = []

    def __call__(self, *shape_dtype: tuple[tuple, Attribute]) -> list[SSAValue]:
        return [self.block.insert_arg(T(s, d), len(self.block.args)) for s, d in shape_dtype]

    def add(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def module(self) -> ModuleOp:
        self.block.add_op(ReturnOp())
        func = FuncOp("f", (self.block.arg_types, ()), Region(self.block))
        return ModuleOp([func])


# --- builders: inferred result types and verification -------------------------------------------

S0 = "s0"
X = ((S0, 4096), bf16)
W = ((4096,), bf16)
SCALE = ((), f32)


def _b_rms(a: Args):
    x, w = a(X, W)
    return norm.RmsNormOp(x, w, eps=1e-6), [T((S0, 4096), bf16)]


def _b_add_rms(a: Args):
    x, r, w = a(X, X, W)
    return norm.AddRmsNormOp(x, r, w, eps=1e-5, weight_offset=1.0), [T((S0, 4096), bf16)] * 2


def _b_fp8_static(a: Args):
    x, s = a(X, SCALE)
    op = quant.QuantFp8Op(x, s, scheme=QuantScheme.static_tensor())
    return op, [T((S0, 4096), F8E4M3FN)]


def _b_fp8_token(a: Args):
    x, ub = a(X, SCALE)
    op = quant.QuantFp8Op(x, scale_ub=ub, scheme=QuantScheme.dynamic_token())
    return op, [T((S0, 4096), F8E4M3FN), T((S0, 1), f32)]


def _b_fp8_group(a: Args):
    (x,) = a(X)
    op = quant.QuantFp8Op(x, scheme=QuantScheme.per_group(64, col_major=True, tma_aligned=True))
    return op, [T((S0, 4096), F8E4M3FN), T((S0, 64), f32)]


def _b_nvfp4(a: Args):
    x, gs = a(((200, 4096), bf16), SCALE)
    return quant.QuantNvfp4Op(x, gs), [T((200, 2048), UI8), T((256, 256), F8E4M3FN)]


def _b_nvfp4_symbolic(a: Args):
    x, gs = a(X, SCALE)
    op = quant.QuantNvfp4Op(x, gs)
    return op, [T((S0, 2048), UI8), T(("128*ceiling(s0/128)", 256), F8E4M3FN)]


def _b_matmul(a: Args):
    x, w, b = a(X, ((4096, 1024), bf16), ((1024,), bf16))
    return gemm.MatmulOp(x, w, b), [T((S0, 1024), bf16)]


def _b_scaled_matmul(a: Args):
    x, w, sa, sb = a(((S0, 64), F8E4M3FN), ((64, 32), F8E4M3FN), ((S0, 1), f32), ((1, 32), f32))
    return gemm.ScaledMatmulOp(x, w, sa, sb, out_dtype=bf16), [T((S0, 32), bf16)]


def _b_attention(a: Args):
    q, k, v = a(((1, 8, S0, 64), f16), ((1, 2, S0, 64), f16), ((1, 2, S0, 32), f16))
    return attn.AttentionOp(q, k, v, scale=0.125, causal=True), [T((1, 8, S0, 32), f16)]


def _b_mla(a: Args):
    q, c, p, w = a(((S0, 4, 48), bf16), ((S0, 64), bf16), ((S0, 1, 16), bf16), ((4 * 48, 64), bf16))
    op = attn.MlaAttentionOp(
        q,
        c,
        p,
        w,
        num_heads=4,
        qk_nope_head_dim=32,
        qk_rope_head_dim=16,
        v_head_dim=16,
        kv_lora_rank=64,
        scale=0.1,
        causal=True,
    )
    return op, [T((S0, 4, 16), bf16)]


def _b_rope(a: Args):
    q, k, pos, cache = a(((S0, 4, 64), bf16), ((S0, 2, 64), bf16), ((S0,), i64), ((128, 32), bf16))
    op = attn.RopeOp(
        q, k, positions=pos, cos_sin_cache=cache, is_neox=False, rotary_dim=32, head_dim=64
    )
    return op, [T((S0, 4, 64), bf16), T((S0, 2, 64), bf16)]


def _b_rope_cos_sin(a: Args):
    q, cos, sin = a(((1, 4, S0, 16), f32), ((1, 1, S0, 16), f32), ((1, 1, S0, 16), f32))
    op = attn.RopeOp(q, cos=cos, sin=sin, is_neox=True, rotary_dim=16, head_dim=16)
    return op, [T((1, 4, S0, 16), f32)]


def _b_kv_cache(a: Args):
    k, v, kc, vc, sl = a(
        ((S0, 2, 16), bf16),
        ((S0, 2, 16), bf16),
        ((8, 4, 2, 16), bf16),
        ((8, 4, 2, 16), bf16),
        ((S0,), i64),
    )
    return attn.KvCacheWriteOp(k, v, kc, vc, sl), [T((8, 4, 2, 16), bf16)] * 2


def _b_silu_mul(a: Args):
    (x,) = a(((S0, 128), bf16))
    return act.SiluMulOp(x), [T((S0, 64), bf16)]


def _b_silu_mul_two(a: Args):
    g, u = a(((S0, 64), bf16), ((S0, 64), bf16))
    return act.SiluMulOp(g, u), [T((S0, 64), bf16)]


def _b_pad(a: Args):
    (x,) = a(((S0, 2880), bf16))
    return act.PadOp(x, high=192), [T((S0, 3072), bf16)]


def _b_all_reduce(a: Args):
    (x,) = a(X)
    return coll.AllReduceOp(x, group="tp", world_size=2), [T((S0, 4096), bf16)]


def _b_reduce_scatter(a: Args):
    (x,) = a(((256, 64), bf16))
    op = coll.ReduceScatterOp(x, group="tp", world_size=4, dim=-1, reduce_op="avg")
    return op, [T((256, 16), bf16)]


def _b_all_gather(a: Args):
    (x,) = a(((64, 16), bf16))
    return coll.AllGatherOp(x, group="tp", world_size=4), [T((256, 16), bf16)]


def _b_rms_norm_quant_static(a: Args):
    x, r, w, s1, s2 = a(X, X, W, SCALE, SCALE)
    op = fused.RmsNormQuantOp(x, r, w, [s1, s2], eps=1e-6, scheme=QuantScheme.static_tensor())
    return op, [T((S0, 4096), F8E4M3FN)] * 2 + [T((S0, 4096), bf16)]


def _b_rms_norm_quant_group(a: Args):
    x, w = a(X, W)
    op = fused.RmsNormQuantOp(x, weight=w, eps=1e-6, scheme=QuantScheme.per_group(128))
    return op, [T((S0, 4096), F8E4M3FN), T((S0, 32), f32)]


def _b_silu_mul_quant(a: Args):
    (x,) = a(((S0, 512), bf16))
    op = fused.SiluMulQuantOp(x, scheme=QuantScheme.per_group(128, ue8m0=True))
    return op, [T((S0, 256), F8E4M3FN), T((S0, 2), f32)]


def _b_silu_mul_quant_nvfp4(a: Args):
    x, gs = a(((100, 64), bf16), SCALE)
    return fused.SiluMulQuantNvfp4Op(x, gs), [T((100, 16), UI8), T((128, 4), F8E4M3FN)]


def _b_all_reduce_rms_norm(a: Args):
    x, r, w, s = a(X, X, W, SCALE)
    op = fused.AllReduceRmsNormOp(
        x, r, w, s, group="tp", world_size=2, eps=1e-5, scheme=QuantScheme.static_tensor()
    )
    return op, [T((S0, 4096), F8E4M3FN), T((S0, 4096), bf16)]


def _b_qk_norm_rope(a: Args):
    q, k, qw, kw, pos, cache = a(
        ((S0, 4, 64), bf16), ((S0, 2, 64), bf16), ((64,), bf16), ((64,), bf16), ((S0,), i64),
        ((256, 32), bf16),
    )
    op = fused.QkNormRopeOp(
        q, k, qw, kw, positions=pos, cos_sin_cache=cache, eps=1e-6, is_neox=False,
        rotary_dim=32, head_dim=64, weight_f32=True,
    )
    return op, [T((S0, 4, 64), bf16), T((S0, 2, 64), bf16)]


def _b_qk_norm_rope_hf(a: Args):
    q, k, qw, kw, cos = a(
        ((1, 4, S0, 64), bf16), ((1, 2, S0, 64), bf16), ((64,), bf16), ((64,), bf16),
        ((1, 1, S0, 64), bf16),
    )
    op = fused.QkNormRopeOp(
        q, k, qw, kw, cos=cos, sin=cos, eps=1e-6, is_neox=True, rotary_dim=64, head_dim=64,
    )
    return op, [T((1, 4, S0, 64), bf16), T((1, 2, S0, 64), bf16)]


def _b_rope_kv_cache_write(a: Args):
    q, k, v, pos, cache, kc, vc, sl = a(
        ((S0, 4, 64), bf16),
        ((S0, 2, 64), bf16),
        ((S0, 2, 64), bf16),
        ((S0,), i64),
        ((256, 64), bf16),
        ((8, 4, 2, 64), bf16),
        ((8, 4, 2, 64), bf16),
        ((S0,), i64),
    )
    op = fused.RopeKvCacheWriteOp(
        q, k, v, kc, vc, sl, positions=pos, cos_sin_cache=cache, is_neox=True, rotary_dim=64,
        head_dim=64,
    )
    return op, [T((S0, 4, 64), bf16), T((8, 4, 2, 64), bf16), T((8, 4, 2, 64), bf16)]


def _b_attention_quant(a: Args):
    q, k, s = a(((1, 8, S0, 64), bf16), ((1, 2, S0, 64), bf16), SCALE)
    op = fused.AttentionQuantOp(
        q, k, k, output_scale=s, scale=0.125, causal=True, scheme=QuantScheme.static_tensor()
    )
    return op, [T((S0, 512), F8E4M3FN)]


def _b_paged_decode_quant(a: Args):
    q, kc, bt, sl, s = a(((S0, 8, 1, 64), bf16), ((33, 16, 2, 64), bf16), ((S0, 4), i32),
                         ((S0,), i32), SCALE)
    op = fused.PagedDecodeQuantOp(q, kc, kc, bt, sl, s, scale=0.125,
                                  scheme=QuantScheme.static_tensor(),
                                  result_types=[T((S0, 512), F8E4M3FN), None])
    return op, [T((S0, 512), F8E4M3FN)]


def _b_mla_attention_quant(a: Args):
    q, c, p, w = a(((S0, 4, 48), bf16), ((S0, 64), bf16), ((S0, 1, 16), bf16), ((256, 64), bf16))
    op = fused.MlaAttentionQuantOp(
        q,
        c,
        p,
        w,
        num_heads=4,
        qk_nope_head_dim=32,
        qk_rope_head_dim=16,
        v_head_dim=32,
        kv_lora_rank=64,
        scale=0.1,
        scheme=QuantScheme.per_group(64),
    )
    return op, [T((S0, 128), F8E4M3FN), T((S0, 2), f32)]


def _b_gemm_reduce_scatter(a: Args):
    x, w, s = a(((256, 64), F8E4M3FN), ((64, 32), F8E4M3FN), SCALE)
    op = fused.GemmReduceScatterOp(x, w, s, s, group="tp", world_size=4, out_dtype=bf16)
    return op, [T((64, 32), bf16)]


def _b_all_gather_gemm(a: Args):
    x, w = a(((64, 64), bf16), ((64, 32), bf16))
    return fused.AllGatherGemmOp(x, w, group="tp", world_size=2), [T((128, 32), bf16)]


def _b_add_rms_norm_pad(a: Args):
    x, r, w = a(((S0, 2880), bf16), ((S0, 2880), bf16), ((2880,), bf16))
    op = fused.RmsNormPadOp(x, r, w, eps=1e-5, high=64, round_sum=True)
    return op, [T((S0, 2944), bf16), T((S0, 2880), bf16)]


def _b_rms_norm_pad(a: Args):
    x, w = a(((S0, 3000), bf16), ((3000,), f32))
    op = fused.RmsNormPadOp(x, None, w, eps=1e-6, low=8, high=64, value=-1.0, weight_f32=True,
                            result_types=[T((S0, 3072), f32), None])
    return op, [T((S0, 3072), f32)]


def _b_vllm_attention(a: Args):
    q, k, dep = a(((S0, 8, 64), bf16), ((S0, 2, 64), bf16), ((0,), bf16))
    return attn.VllmAttentionOp(q, k, k, dep, layer_name="l0"), [T((S0, 8, 64), bf16)]


def _b_vllm_mla_attention(a: Args):
    q, kv_c, k_pe = a(((S0, 4, 24), bf16), ((S0, 32), bf16), ((S0, 1, 8), bf16))
    op = attn.VllmMlaAttentionOp(q, kv_c, k_pe, layer_name="m0",
                                 result_type=T((S0, 64), bf16))
    return op, [T((S0, 64), bf16)]


def _b_vllm_kv_cache_update(a: Args):
    k, v = a(((S0, 2, 64), bf16), ((S0, 2, 64), bf16))
    return attn.VllmKvCacheUpdateOp(k, v, layer_name="l0"), [T((0,), bf16)]


def _b_vllm_mla_kv_cache_update(a: Args):
    kv_c, k_pe, ks = a(((S0, 32), bf16), ((S0, 1, 8), bf16), ((), f32))
    op = attn.VllmMlaKvCacheUpdateOp(kv_c, k_pe, ks, layer_name="m0", kv_cache_dtype="auto")
    return op, [T((0,), bf16)]


def _b_vllm_attention_quant(a: Args):
    q, k, s = a(((S0, 8, 64), bf16), ((S0, 2, 64), bf16), SCALE)
    op = fused.VllmAttentionQuantOp(q, k, k, s, layer_name="l0",
                                    scheme=QuantScheme.static_tensor(),
                                    result_types=[T((S0, 512), F8E4M3FN), None])
    return op, [T((S0, 512), F8E4M3FN)]


def _b_rope_vllm_kv_cache_update(a: Args):
    q, k, pos, cache = a(((S0, 4, 64), bf16), ((S0, 2, 64), bf16), ((S0,), i64),
                         ((256, 64), bf16))
    op = fused.RopeVllmKvCacheUpdateOp(q, k, k, positions=pos, cos_sin_cache=cache,
                                       layer_name="l0", is_neox=True, rotary_dim=64,
                                       head_dim=64)
    return op, [T((S0, 4, 64), bf16), T((S0, 2, 64), bf16), T((0,), bf16)]


def _b_rope_vllm_mla_kv_cache_update(a: Args):
    q, k, kv_c, pos, cs, ks = a(((S0, 4, 16), bf16), ((S0, 1, 16), bf16), ((S0, 32), bf16),
                                ((S0,), i64), ((256, 16), f32), ((), f32))
    op = fused.RopeVllmMlaKvCacheUpdateOp(q, k, kv_c, ks, positions=pos, cos_sin_cache=cs,
                                          layer_name="m0", kv_cache_dtype="fp8", is_neox=False,
                                          rotary_dim=16, head_dim=16, rope_f32=True)
    return op, [T((S0, 4, 16), bf16), T((S0, 1, 16), bf16), T((0,), bf16)]


def _b_mla_kv_cache_write(a: Args):
    kv_c, k_pe, cache, sl = a(((S0, 32), bf16), ((S0, 16), bf16), ((8, 4, 48), bf16),
                              ((S0,), i64))
    return attn.MlaKvCacheWriteOp(kv_c, k_pe, cache, sl), [T((8, 4, 48), bf16)]


def _b_mla_dual_rms_norm(a: Args):
    q, qw, kv, kvw = a(((S0, 64), bf16), ((64,), bf16), ((S0, 32), bf16), ((32,), bf16))
    op = fused.MlaDualRmsNormOp(q, qw, kv, kvw, q_eps=1e-6, kv_eps=1e-5, weight_f32=True)
    return op, [T((S0, 64), bf16), T((S0, 32), bf16)]


def _b_rope_mla_kv_cache_write(a: Args):
    q, k, kv_c, pos, cs, cache, sl = a(
        ((S0, 4, 16), bf16),
        ((S0, 1, 16), bf16),
        ((S0, 32), bf16),
        ((S0,), i64),
        ((256, 16), bf16),
        ((8, 4, 48), bf16),
        ((S0,), i64),
    )
    op = fused.RopeMlaKvCacheWriteOp(q, k, kv_c, cache, sl, positions=pos, cos_sin_cache=cs,
                                     is_neox=False, rotary_dim=16, head_dim=16)
    return op, [T((S0, 4, 16), bf16), T((S0, 1, 16), bf16), T((8, 4, 48), bf16)]


BUILDERS: list[Callable[[Args], tuple[Operation, list[Attribute]]]] = [
    _b_rms,
    _b_add_rms,
    _b_fp8_static,
    _b_fp8_token,
    _b_fp8_group,
    _b_nvfp4,
    _b_nvfp4_symbolic,
    _b_matmul,
    _b_scaled_matmul,
    _b_attention,
    _b_mla,
    _b_rope,
    _b_rope_cos_sin,
    _b_kv_cache,
    _b_silu_mul,
    _b_silu_mul_two,
    _b_pad,
    _b_all_reduce,
    _b_reduce_scatter,
    _b_all_gather,
    _b_rms_norm_quant_static,
    _b_rms_norm_quant_group,
    _b_silu_mul_quant,
    _b_silu_mul_quant_nvfp4,
    _b_all_reduce_rms_norm,
    _b_qk_norm_rope,
    _b_qk_norm_rope_hf,
    _b_rope_kv_cache_write,
    _b_attention_quant,
    _b_paged_decode_quant,
    _b_mla_attention_quant,
    _b_gemm_reduce_scatter,
    _b_all_gather_gemm,
    _b_add_rms_norm_pad,
    _b_rms_norm_pad,
    _b_vllm_attention,
    _b_vllm_mla_attention,
    _b_vllm_kv_cache_update,
    _b_vllm_mla_kv_cache_update,
    _b_vllm_attention_quant,
    _b_rope_vllm_kv_cache_update,
    _b_rope_vllm_mla_kv_cache_update,
    _b_mla_kv_cache_write,
    _b_mla_dual_rms_norm,
    _b_rope_mla_kv_cache_write,
]


def test_every_op_has_a_builder_case() -> None:
    built = set()
    for build in BUILDERS:
        op, _ = build(Args())
        built.add(type(op))
    defined = {op for d in all_dialects() if d.name in SEMANTIC_AND_FUSED for op in d.operations}
    assert defined == built


@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__[3:])
def test_builder_infers_types_and_verifies(build) -> None:
    op, expected = build(Args())
    assert list(op.result_types) == expected
    op.verify()


def test_print_parse_round_trip_is_structurally_equal() -> None:
    args = Args()
    for build in BUILDERS:
        op, _ = build(args)
        args.add(op)
    module = args.module()
    module.verify()
    text = _print(module)
    parsed = Parser(_context(), text).parse_module()
    parsed.verify()
    assert parsed.is_structurally_equivalent(module)
    assert _print(parsed) == text


# --- verifiers ----------------------------------------------------------------------------------


def _rejects(build: Callable[[Args], Operation], message: str) -> None:
    op = build(Args())
    with pytest.raises(VerifyException, match=message):
        op.verify()


def test_norm_rejects_a_weight_of_another_hidden_size() -> None:
    def build(a: Args):
        x, w = a(X, ((2048,), bf16))
        return norm.RmsNormOp(x, w, eps=1e-6)

    _rejects(build, r"weight has shape \[2048\] but x's last dim is 4096")


def test_norm_accepts_a_symbol_against_an_int_but_not_two_symbols() -> None:
    a = Args()
    x, w, w2 = a(((S0, "h"), bf16), ((4096,), bf16), (("g",), bf16))
    norm.RmsNormOp(x, w, eps=1e-6).verify()
    with pytest.raises(VerifyException, match="weight has shape"):
        norm.RmsNormOp(x, w2, eps=1e-6).verify()


def test_quant_rejects_a_group_that_does_not_divide_the_hidden_size() -> None:
    def build(a: Args):
        (x,) = a(((S0, 4032), bf16))
        return quant.QuantFp8Op(
            x,
            scheme=QuantScheme.per_group(128),
            result_types=[T((S0, 4032), F8E4M3FN), T((S0, 31), f32)],
        )

    _rejects(build, "group size 128 does not divide the hidden size 4032")


def test_quant_rejects_a_static_quant_without_scale() -> None:
    def build(a: Args):
        (x,) = a(X)
        return quant.QuantFp8Op(x, scheme=QuantScheme.static_tensor())

    _rejects(build, "a static scheme needs the scale operand")


def test_attention_rejects_heads_that_do_not_group() -> None:
    def build(a: Args):
        q, k = a(((1, 6, S0, 64), f16), ((1, 4, S0, 64), f16))
        return attn.AttentionOp(q, k, k, scale=0.125)

    _rejects(build, "q's 6 heads are not a multiple of k/v's 4 heads")


def test_rope_rejects_both_forms() -> None:
    def build(a: Args):
        q, pos, cache, cs = a(((S0, 4, 64), bf16), ((S0,), i64), ((8, 64), bf16), ((S0, 64), bf16))
        return attn.RopeOp(
            q,
            positions=pos,
            cos_sin_cache=cache,
            cos=cs,
            sin=cs,
            is_neox=True,
            rotary_dim=64,
            head_dim=64,
        )

    _rejects(build, "either positions and cos_sin_cache or cos and sin, not both")


def test_collectives_reject_a_bad_world_size() -> None:
    def build(a: Args):
        (x,) = a(X)
        return coll.AllReduceOp(x, group="tp", world_size=0)

    _rejects(build, "world_size must be >= 1, got 0")


def test_fused_attention_mask_is_checked_like_attention() -> None:
    def build(a: Args):
        q, k, m, s = a(((1, 4, 8, 16), bf16), ((1, 4, 8, 16), bf16), ((1, 2, 8, 8), i1), SCALE)
        return fused.AttentionQuantOp(q, k, k, m, s, scale=0.25, scheme=QuantScheme.static_tensor())

    _rejects(build, r"mask of shape \[1, 2, 8, 8\] does not broadcast to \[1, 4, 8, 8\]")


def test_builders_refuse_to_guess_a_symbolic_derived_dim() -> None:
    a = Args()
    (x,) = a(((S0, "h"), bf16))
    with pytest.raises(ValueError, match="give result_type"):
        act.SiluMulOp(x)


# --- the scheme attribute and shape helpers ------------------------------------------------------


def test_scheme_helpers() -> None:
    static = QuantScheme.static_tensor()
    group = QuantScheme.per_group(64, col_major=True, ue8m0=True)
    nvfp4 = QuantScheme.nvfp4()
    assert static.is_static and not static.is_dynamic and static.group_size is None
    assert QuantScheme.dynamic_token().is_per_token
    assert QuantScheme.dynamic_tensor().is_per_tensor
    assert group.is_group and group.group_size == 64 and group.is_col_major and group.is_ue8m0
    assert not group.is_tma_aligned
    assert nvfp4.is_nvfp4 and not nvfp4.is_fp8 and nvfp4.group_size == 16
    assert group.scale_dims((S0, 4096)) == (S0, 64)
    assert group.scale_dims((S0, "h")) == (S0, None)
    assert QuantScheme.dynamic_token().scale_dims((2, S0, 64)) == (2, S0, 1)
    assert static.scale_dims((S0, 64)) is None
    # Cached: the same scheme is the same object.
    assert QuantScheme.per_group(64, col_major=True, ue8m0=True) is group


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "group", "group": 32}, "group size must be 128 or 64, got 32"),
        ({"kind": "group", "group": 128, "tma_aligned": True}, "tma_aligned scales need col_major"),
        ({"kind": "static_tensor", "col_major": True}, "takes no flags, got col_major"),
        ({"kind": "per_channel"}, "unknown quant scheme kind 'per_channel'"),
    ],
)
def test_scheme_rejects(kwargs: dict, message: str) -> None:
    with pytest.raises(VerifyException, match=message):
        QuantScheme.get(**kwargs)


def test_dims_agree_and_promote() -> None:
    assert dims_agree(4096, 4096) and dims_agree("s0", "s0") and dims_agree(4096, "s0")
    assert dims_agree(None, 3)
    assert not dims_agree(4096, 2048) and not dims_agree("s0", "s1")
    assert promote(bf16, f32) == f32 and promote(bf16, f16) == f32 and promote(f16, f16) == f16


# --- decomposition regions -----------------------------------------------------------------------


def _chain() -> tuple[ModuleOp, list[Operation], Operation, tuple[SSAValue, SSAValue]]:
    """x, w -> a = f(x); b = g(a, w); c = h(b): a and b are the chain a norm would replace."""
    a = Args()
    x, w = a(((S0, 64), f32), ((64,), f32))
    t = T((S0, 64), f32)
    op_a = a.add(xdsl_test.TestOp([x], [t]))
    op_b = a.add(xdsl_test.TestOp([op_a.results[0], w], [t]))
    op_c = a.add(xdsl_test.TestOp([op_b.results[0]], [t]))
    return a.module(), [op_a, op_b], op_c, (x, w)


def test_outline_then_inline_gives_back_the_original_ops() -> None:
    module, chain, consumer, (x, w) = _chain()
    original = module.clone()

    raised = norm.RmsNormOp(x, w, eps=1e-6)
    outline(raised, chain, outputs=[chain[1].results[0]])
    module.verify()
    # The op sits where the chain ended and feeds the consumer; the chain is inside it.
    assert raised.next_op is consumer and consumer.operands[0] is raised.y
    body = decomposition_block(raised)
    assert body is not None and list(body.ops)[:2] == chain
    assert isinstance(body.last_op, YieldOp) and body.last_op.operands[0] is chain[1].results[0]
    assert chain[0].operands[0] is body.args[0] and chain[1].operands[1] is body.args[1]
    assert all(in_decomposition(o) for o in chain) and not in_decomposition(consumer)
    assert "decomposition {" in _print(module)

    inlined = inline_decomposition(raised)
    assert inlined == chain
    module.verify()
    assert module.is_structurally_equivalent(original)
    assert consumer.operands[0] is chain[1].results[0] and chain[0].operands[0] is x


def test_outline_with_a_pattern_rewriter() -> None:
    module, chain, consumer, (x, w) = _chain()

    class RaiseChain(RewritePattern):
        @op_type_rewrite_pattern
        def match_and_rewrite(self, op: xdsl_test.TestOp, rewriter: PatternRewriter) -> None:
            if op is chain[1]:
                outline(norm.RmsNormOp(x, w, eps=1e-6), chain, [op.results[0]], rewriter=rewriter)

    walker = PatternRewriteWalker(RaiseChain(), apply_recursively=False)
    walker.rewrite_module(module)
    module.verify()
    raised = consumer.operands[0].owner
    assert isinstance(raised, norm.RmsNormOp) and decomposition_block(raised) is not None
    assert list(decomposition_block(raised).ops)[:2] == chain


def test_outline_maps_inputs_and_keeps_captures() -> None:
    module, chain, consumer, (x, w) = _chain()
    # The raised op takes only x; w stays a use of the value defined above the op.
    raised = norm.RmsNormOp(x, eps=1e-6)
    outline(raised, chain, [chain[1].results[0]], inputs={x: 0})
    module.verify()
    body = decomposition_block(raised)
    assert chain[0].operands[0] is body.args[0] and chain[1].operands[1] is w


def test_outline_refuses_a_chain_value_used_outside() -> None:
    module, chain, consumer, (x, w) = _chain()
    consumer.operands[0] = chain[0].results[0]  # the middle value escapes
    with pytest.raises(ValueError, match="result #0 of test.op is used outside"):
        outline(norm.RmsNormOp(x, w, eps=1e-6), chain, [chain[1].results[0]])


def test_builder_takes_a_decomposition_region() -> None:
    t = T((S0, 64), f32)
    body = Block(arg_types=[t])
    inner = xdsl_test.TestOp([body.args[0]], [t])
    body.add_ops([inner, YieldOp(inner.results[0])])
    a = Args()
    (x,) = a(((S0, 64), f32))
    op = norm.RmsNormOp(x, eps=1e-6, decomposition=Region(body))
    op.verify()
    bad = Block(arg_types=[t])
    bad.add_op(YieldOp(bad.args[0], bad.args[0]))
    with pytest.raises(VerifyException, match="decomposition yields"):
        norm.RmsNormOp(x, eps=1e-6, decomposition=Region(bad)).verify()


def test_inline_without_region_is_an_error() -> None:
    a = Args()
    (x,) = a(((S0, 64), f32))
    with pytest.raises(ValueError, match="no decomposition region"):
        inline_decomposition(norm.RmsNormOp(x, eps=1e-6))


def test_types_are_the_cached_tensor_types() -> None:
    op, _ = _b_fp8_token(Args())
    assert isinstance(op.q.type, TensorType)
    assert op.q.type is T((S0, 4096), F8E4M3FN)


# --- textual forms: filecheck/dialects/<d>/ops.mlir ---------------------------------------------


@pytest.mark.parametrize("dialect", SEMANTIC_AND_FUSED)
def test_every_op_has_a_round_trip_case(dialect: str) -> None:
    """Every op of the dialect is written in its `ops.mlir`, which lit round-trips: the one
    home of the ops' textual forms (their docstrings carry no examples)."""
    path = ROOT / "filecheck" / "dialects" / dialect / "ops.mlir"
    module = Parser(_context(), path.read_text(), str(path)).parse_module()
    written = {op.name for op in module.walk()}
    (defined,) = [d.operations for d in all_dialects() if d.name == dialect]
    missing = sorted(op.name for op in defined if op.name not in written)
    assert not missing, f"no case in {path.relative_to(ROOT)} for {', '.join(missing)}"
