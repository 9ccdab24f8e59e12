"""raise-vllm-ops on real graphs: vLLM's custom ops (`torch.ops._C.*`, our stand-ins from
`vllm_ops.py`), functionalized by aot_autograd in both forms (`auto_functionalized` and `_v2`),
raised whole; exact counts, bit-exact outputs at O0, remarks for near misses, and the norm/act +
quant fusions firing at O2 on a Llama-style decoder layer written with the ops the way vLLM's
layers call them (`forward_cuda` of RMSNorm, QuantFP8, SiluAndMul, RotaryEmbedding)."""

from __future__ import annotations

import operator
import re

import pytest
import torch
import torch.nn.functional as F
import vllm_ops as V
from torch import nn

from irfuse import backend
from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

H = 64  # hidden size
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 16
INTER = 128
BF16 = torch.bfloat16
VERSIONS = pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _x(rows: int = 8, width: int = H, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, width, generator=_gen(seed)).to(BF16)


class _Wrap(nn.Module):
    def __init__(self, fn, **tensors: torch.Tensor):
        super().__init__()
        self.fn = fn
        for name, t in tensors.items():
            self.register_buffer(name, t)

    def forward(self, *args):
        return self.fn(self, *args)


def _run(module: nn.Module, *inputs, v2: bool = True, exact: bool = True,
         options: dict | None = None, dynamic=((0, 0),)) -> Compiled:
    with torch._inductor.config.patch(enable_auto_functionalized_v2=v2):
        compiled = compile_and_run(module, inputs, dynamic_dims=dynamic, options=options)
    if exact:
        assert_bit_exact(compiled.outputs, compiled.eager)
    return compiled


def _record(compiled: Compiled):
    (report,) = {r.graph: r for r in compiled.reports}.values()
    (record,) = [p for p in report.raise_passes if p.name == "raise-vllm-ops"]
    return report, record


def _missed(compiled: Compiled) -> list[str]:
    return [m.reason for m in _record(compiled)[1].missed]


WEIGHT = (torch.rand(H, generator=_gen(1)) + 0.5).to(BF16)
SCALE = torch.tensor([0.01], dtype=torch.float32)


# --- every op, alone, in both functionalized forms ------------------------------------------------


def _wide(x: torch.Tensor) -> torch.Tensor:
    """`[T, 2H]` from x: two groups of 64 per row."""
    return torch.cat([x, x * 2], -1)


CASES = {
    # name: (fn(self, x, other), expected raised counts)
    "rms_norm": (lambda m, x, r: V.vllm_rms_norm(x, m.w, 1e-6), {"rms_norm": 1}),
    "rms_norm_eps": (lambda m, x, r: V.vllm_rms_norm(x * 2, m.w, 3e-4), {"rms_norm": 1}),
    "fused_add_rms_norm": (
        lambda m, x, r: V.vllm_fused_add_rms_norm(x + 1, x * 3 - r[0], m.w, 1e-5),
        {"add_rms_norm": 1},
    ),
    "static_fp8": (lambda m, x, r: V.vllm_scaled_fp8_quant(x, m.s)[0], {"quant_fp8": 1}),
    "dynamic_fp8": (lambda m, x, r: V.vllm_scaled_fp8_quant(x), {"quant_fp8": 1}),
    "per_token_fp8": (
        lambda m, x, r: V.vllm_scaled_fp8_quant(x, per_token=True), {"quant_fp8": 1}
    ),
    "per_token_fp8_ub": (
        lambda m, x, r: V.vllm_scaled_fp8_quant(x, per_token=True, scale_ub=m.s),
        {"quant_fp8": 1},
    ),
    "fnuz": (
        lambda m, x, r: V.vllm_scaled_fp8_quant(x, m.s, dtype=torch.float8_e4m3fnuz)[0],
        {"quant_fp8": 1},
    ),
    # vLLM's CUDA group quant on [8, 128] (two groups of 64): row-major scales, column-major
    # (a permuted [G, T] buffer), TMA-aligned (empty_strided), UE8M0.
    "group_fp8": (lambda m, x, r: V.vllm_per_token_group_quant_fp8(_wide(x), 64),
                  {"quant_fp8": 1}),
    "group_fp8_col_major": (
        lambda m, x, r: V.vllm_per_token_group_quant_fp8(_wide(x), 64, column_major_scales=True),
        {"quant_fp8": 1},
    ),
    "group_fp8_tma": (
        lambda m, x, r: V.vllm_per_token_group_quant_fp8(
            _wide(x), 64, column_major_scales=True, tma_aligned_scales=True),
        {"quant_fp8": 1},
    ),
    "group_fp8_ue8m0": (
        lambda m, x, r: V.vllm_per_token_group_quant_fp8(
            _wide(x), 64, column_major_scales=True, use_ue8m0=True),
        {"quant_fp8": 1},
    ),
    "silu_and_mul": (lambda m, x, r: V.vllm_silu_and_mul(x), {"silu_mul": 1}),
    "gelu_and_mul": (lambda m, x, r: V.vllm_gelu_and_mul(x), {"silu_mul": 1}),
    "gelu_tanh_and_mul": (lambda m, x, r: V.vllm_gelu_and_mul(x, "tanh"), {"silu_mul": 1}),
    "norm_quant_act": (
        lambda m, x, r: V.vllm_scaled_fp8_quant(
            V.vllm_silu_and_mul(V.vllm_rms_norm(x, m.w, 1e-6)), m.s)[0],
        {"rms_norm": 1, "silu_mul": 1, "quant_fp8": 1},
    ),
}


@VERSIONS
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_op_raises_exactly(name: str, v2: bool) -> None:
    fn, expected = CASES[name]
    module = _Wrap(fn, w=WEIGHT, s=SCALE)
    compiled = _run(module, _x(), _x(seed=2))
    raised = {k: n for k, n in compiled.raised().items() if n}
    assert raised == expected
    assert _missed(compiled) == []


def test_scale_ub_must_be_static() -> None:
    """A `scale_ub` computed in the graph is no static operand: the quant is left, remarked."""
    module = _Wrap(lambda m, x: V.vllm_scaled_fp8_quant(x, per_token=True,
                                                         scale_ub=x.float().abs().amax()
                                                         .reshape(1)), w=WEIGHT)
    compiled = _run(module, _x())
    assert compiled.raised().get("quant_fp8", 0) == 0
    assert any("scale_ub is not a graph input or constant" in r for r in _missed(compiled))


def test_computed_static_scale_is_a_near_miss() -> None:
    module = _Wrap(lambda m, x: V.vllm_scaled_fp8_quant(x, x.float().abs().amax().reshape(1)),
                   w=WEIGHT)
    compiled = _run(module, _x())
    assert compiled.raised().get("quant_fp8", 0) == 0
    assert _missed(compiled) == [
        "not an FP8 quant (_C.static_scaled_fp8_quant): quant scale is not a graph input or "
        "constant"
    ]


def _group_call(x: torch.Tensor, scales: torch.Tensor, group: int = 64, eps: float = 1e-10,
                transposed: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    q = torch.empty(x.shape, dtype=V.FP8)
    torch.ops._C.per_token_group_fp8_quant(x, q, scales, group, eps, -448.0, 448.0, False,
                                           transposed, False)
    return q, scales


@VERSIONS
@pytest.mark.parametrize(("call", "reason"), [
    (lambda x: _group_call(x, torch.empty(x.shape[0], 2), eps=0.01),
     "eps 0.01: irfuse's group scales floor amax below 1/512 only"),
    (lambda x: _group_call(x, torch.empty(x.shape[0], 4), group=32),
     "group size 32: irfuse quantizes groups of 128 or 64"),
    # Column-major scales the call does not say are transposed.
    (lambda x: _group_call(x, torch.empty(2, x.shape[0]).permute(-1, -2)),
     "its output_s is"),
], ids=["eps", "group-32", "unflagged-transpose"])
def test_group_quant_near_misses(call, reason: str, v2: bool) -> None:
    """vLLM's CUDA group quant where irfuse's group scheme would compute something else: left,
    with the reason."""
    compiled = _run(_Wrap(lambda m, x: call(_wide(x))), _x(), v2=v2)
    assert compiled.raised().get("quant_fp8", 0) == 0
    (missed,) = _missed(compiled)
    assert missed.startswith("not an FP8 group quant (_C.per_token_group_fp8_quant): " + reason)


@VERSIONS
def test_cuda_nvfp4_quant_is_named_not_raised(v2: bool) -> None:
    """vLLM's CUDA NVFP4 quant (`_C.scaled_fp4_quant.out`) rounds by approximate reciprocals:
    not raised, and the report says why where it sits after a norm."""
    gs = torch.tensor([448.0 * 6 / 4], dtype=torch.float32)
    module = _Wrap(lambda m, x: V.vllm_scaled_fp4_quant(V.vllm_rms_norm(x, m.w, 1e-6), m.gs),
                   w=WEIGHT, gs=gs)
    compiled = _run(module, _x(), v2=v2)
    assert {k: n for k, n in compiled.raised().items() if n} == {"rms_norm": 1}
    (missed,) = _missed(compiled)
    assert missed.startswith("_C.scaled_fp4_quant.out: vLLM's CUDA NVFP4 quant is not raised")


def test_weight_of_another_dtype_is_a_near_miss() -> None:
    module = _Wrap(lambda m, x: V.vllm_rms_norm(x, m.w, 1e-6), w=WEIGHT.float())
    compiled = _run(module, _x())
    assert compiled.raised().get("rms_norm", 0) == 0
    assert _missed(compiled) == [
        "not an RMSNorm (_C.rms_norm): the weight is f32, not the input's bf16"
    ]


def test_per_tensor_scale_buffer_must_be_zeros() -> None:
    def fn(m, x):
        out = torch.empty(x.shape, dtype=V.FP8)
        scale = torch.empty(1, dtype=torch.float32)
        torch.ops._C.dynamic_scaled_fp8_quant(out, x, scale)
        return out, scale

    compiled = _run(_Wrap(fn), _x())
    assert compiled.raised().get("quant_fp8", 0) == 0
    assert any("scale buffer is not a new zero tensor" in r for r in _missed(compiled))


# --- vLLM's FP8 linear on CUDA (cutlass_scaled_mm) ----------------------------------------------


N_OUT = 32
W8 = (torch.randn(N_OUT, H, generator=_gen(3)) / 4).to(V.FP8)  # [N, K], as vLLM stores it
CHANNEL = (torch.rand(N_OUT, 1, generator=_gen(4)) + 0.5) / 64  # vLLM's channel-wise [N, 1]
BIAS = torch.randn(N_OUT, generator=_gen(5)).to(BF16)


def _linear(x, w8, w_scale, per_token: bool = False, bias=None):
    """vLLM's FP8 linear with a dynamic activation quant (`Fp8LinearOp` on CUTLASS)."""
    q, s = V.vllm_scaled_fp8_quant(x, per_token=per_token)
    return V.vllm_cutlass_scaled_mm(q, w8.t(), s, w_scale, BF16, bias)


@VERSIONS
@pytest.mark.parametrize("per_token, w_scale, bias", [
    (False, CHANNEL, None), (True, CHANNEL.reshape(1, -1), BIAS), (True, SCALE, None),
    (False, CHANNEL.reshape(-1), None)], ids=["tensor-channel", "token-row-bias",
                                              "token-tensor", "tensor-flat"])
def test_cutlass_scaled_mm_raises(per_token, w_scale, bias, v2) -> None:
    """Per-tensor or per-token activation scales with a per-tensor or channel-wise weight scale
    (a channel-wise one in any of the layouts CUTLASS reads flat: one view makes it `[1, N]`):
    one gemm.scaled_matmul, bit-exact at O0."""
    module = _Wrap(lambda m, x: _linear(x, m.w8, m.ws, per_token, m.b if bias is not None
                                        else None), w8=W8, ws=w_scale,
                   **({} if bias is None else {"b": bias}))
    compiled = _run(module, _x(), v2=v2)
    assert {k: n for k, n in compiled.raised().items() if n} == {"quant_fp8": 1,
                                                                 "scaled_gemm": 1}
    assert _missed(compiled) == []


def test_unfused_cutlass_gemm_leaves_no_unread_node(tmp_path) -> None:
    """Unfused, the raised GEMM runs as its decomposition, which reads the `[N, 1]` weight scale
    as stored: the `[1, N]` view made for gemm.scaled_matmul is not in the emitted graph."""
    module = _Wrap(lambda m, x: _linear(x, m.w8, m.ws), w8=W8, ws=CHANNEL)
    _run(module, _x(), options={"dump_dir": str(tmp_path)})
    (emitted,) = tmp_path.rglob("*-emitted.py")
    code = emitted.read_text()
    assert "cutlass_scaled_mm" in code and "aten.view.default(arg1_1, [1, 32])" not in code
    # FX frees a node's name on its own line when nothing reads it.
    unread = [line for line in code.splitlines()
              if re.match(r"\s*(\w+) = [^;]*;\s+(?:\w+ = )*\1 = None", line)]
    assert unread == []


def test_cutlass_scaled_mm_near_misses() -> None:
    """An int8 product and DeepSeek's block scales are not gemm.scaled_matmul: left, with why."""
    i8 = torch.randint(-8, 8, (N_OUT, H), generator=_gen(6), dtype=torch.int8)
    int8 = _Wrap(lambda m, x: V.vllm_cutlass_scaled_mm(
        (x * 4).to(torch.int8), m.w.t(), m.s, m.s, BF16), w=i8, s=SCALE)
    compiled = _run(int8, _x())
    assert compiled.raised().get("scaled_gemm", 0) == 0
    assert _missed(compiled) == ["not an FP8 GEMM (_C.cutlass_scaled_mm): its a and b are i8 "
                                 "and i8, not fp8"]
    w = (torch.randn(128, 256, generator=_gen(7)) / 4).to(V.FP8)
    block = _Wrap(lambda m, x: V.vllm_cutlass_scaled_mm(
        x.to(V.FP8), m.w.t(), m.sa, m.sb, BF16), w=w, sa=torch.full((8, 2), 0.5),
        sb=torch.full((2, 1), 0.25))
    compiled = _run(block, _x(width=256), dynamic=())
    assert compiled.raised().get("scaled_gemm", 0) == 0
    assert _missed(compiled) == ["not an FP8 GEMM (_C.cutlass_scaled_mm): its a_scales is [8, 2]: "
                                 "neither per-tensor nor per-token [8, 1] (block scales are not "
                                 "raised)"]


# --- RoPE ------------------------------------------------------------------------------------------


def _rope_by_operands(q, k, positions, cache, head_size: int, is_neox: bool, f32: bool):
    """attn.rope computed from its operands alone (the stand-in op on copies of q and k): vLLM's
    `_C` rotary, or FlashInfer's where the rope reads as rotating in float32."""
    q = q.clone()
    k = None if k is None else k.clone()
    op = torch.ops.vllm.flashinfer_rotary_embedding if f32 else torch.ops._C.rotary_embedding
    op(positions, q, k, head_size, cache, is_neox)
    return q, k


@pytest.fixture
def rope_from_operands(monkeypatch):
    """Emit every unfused `attn.rope` as rope of its operands instead of its decomposition
    region: bit-exact outputs then show that the raised op's operands (the views built before
    it) and results (what the rebuilt values read) mean what the region computes, and that
    `rotates_in_f32` (the reading the fused kernels take) tells FlashInfer's rope from `_C`'s."""
    from irfuse.dialects.attn import RopeOp
    from irfuse.emit import fx_emit
    from irfuse.fusions.rope_readings import rotates_in_f32

    emit_op = fx_emit._Emitter.emit_op
    emitted: list[int] = []

    def emit(self, op):
        if not isinstance(op, RopeOp) or op.positions is None:
            return emit_op(self, op)
        args = [None if v is None else self.nodes[v]
                for v in (op.q, op.k, op.positions, op.cos_sin_cache)]
        node = self.graph.call_function(
            _rope_by_operands, (*args, op.head_dim.value.data, bool(op.is_neox.value.data),
                                rotates_in_f32(op)))
        for i, result in enumerate(op.results):
            self.nodes[result] = self.graph.call_function(operator.getitem, (node, i))
        emitted.append(1)

    monkeypatch.setattr(fx_emit._Emitter, "emit_op", emit)
    return emitted


def _qkv_fn(is_neox: bool, with_key: bool, heads: bool, widths=None,
            rope=V.vllm_rotary_embedding):
    """vLLM's attention: q, k, v split from one qkv buffer, rotated in place (flat, as vLLM's
    layers call it, or viewed as heads first) by `rope` (`_C`'s, or FlashInfer's)."""
    widths = widths or [HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM]

    def fn(m, positions, x):
        q, k, v = (x * 2).split(widths, -1)
        if heads:
            q, k = q.reshape(-1, HEADS, HEAD_DIM), k.reshape(-1, KV_HEADS, HEAD_DIM)
        q2, k2 = rope(positions, q, k if with_key else None, HEAD_DIM, m.cache, is_neox)
        return q2 * 1, (k2 if with_key else k) * 1, v * 1

    return fn


ROPE_FORMS = [(True, True, False), (False, True, True), (False, False, False), (True, False, True)]
"""(is_neox, with_key, heads): each of the three both ways, each pair of them."""


@VERSIONS
@pytest.mark.parametrize(("is_neox", "with_key", "heads"), ROPE_FORMS,
                         ids=[f"{'neox' if n else 'gptj'}-{'qk' if k else 'q'}-"
                              f"{'heads' if h else 'flat'}" for n, k, h in ROPE_FORMS])
def test_rotary_embedding_on_qkv_views(is_neox: bool, with_key: bool, heads: bool, v2: bool,
                                       rope_from_operands) -> None:
    """q and k are views of one qkv buffer (v2: `_query_slice_*` / `_query_size` ... into one
    base; v1: the split pieces, flat or head-split): one attn.rope on `[T, heads, head_size]`
    views, the new qkv rebuilt around it, bit-exact even when computed from the raised op's
    operands; a partial rotary_dim (8 of 16)."""
    module = _Wrap(_qkv_fn(is_neox, with_key, heads), cache=V.rope_cache(HEAD_DIM // 2))
    x = _x(width=(HEADS + 2 * KV_HEADS) * HEAD_DIM)
    compiled = _run(module, torch.arange(8) + 3, x, v2=v2, dynamic=((0, 0), (1, 0)))
    assert compiled.raised()["rope"] == 1
    assert _missed(compiled) == []
    assert rope_from_operands == [1]


def test_rotary_embedding_on_own_tensors(rope_from_operands) -> None:
    """q and k that are no views (v2: their own bases, no view metadata) raise as they are."""
    def fn(m, positions, x):
        q = (x[:, : HEADS * HEAD_DIM] * 2).reshape(-1, HEADS, HEAD_DIM)
        k = (x[:, HEADS * HEAD_DIM:] * 3).reshape(-1, KV_HEADS, HEAD_DIM)
        return V.vllm_rotary_embedding(positions, q, k, HEAD_DIM, m.cache, True)

    module = _Wrap(fn, cache=V.rope_cache(HEAD_DIM))
    for v2 in (True, False):
        compiled = _run(module, torch.arange(8), _x(width=(HEADS + KV_HEADS) * HEAD_DIM),
                        v2=v2, dynamic=((0, 0), (1, 0)))
        assert compiled.raised()["rope"] == 1
        assert _missed(compiled) == []
    assert rope_from_operands == [1, 1]


def test_overlapping_query_and_key_is_a_near_miss() -> None:
    """v2 rotates q then k in one buffer: when they overlap, k reads q's rotated values, which
    no attn.rope of the two views computes (v1 copies each argument, so it is raised there)."""
    def fn(m, positions, x):
        qkv = x * 2
        q, k = qkv[:, : HEADS * HEAD_DIM], qkv[:, HEAD_DIM: (HEADS + 1) * HEAD_DIM]
        V.vllm_rotary_embedding(positions, q, k, HEAD_DIM, m.cache, True)
        return qkv * 1

    module = _Wrap(fn, cache=V.rope_cache(HEAD_DIM))
    x = _x(width=(HEADS + 1) * HEAD_DIM)
    v2 = _run(module, torch.arange(8), x, dynamic=((0, 0), (1, 0)))
    assert v2.raised()["rope"] == 0
    assert _missed(v2) == [
        "not a RoPE (_C.rotary_embedding): its query and key overlap in their base (or cannot "
        "be told apart)"
    ]


# --- FlashInfer's RoPE (vllm.flashinfer_rotary_embedding: DeepSeek's, an f32 cache) ---------------

VLLM_NAMESPACE = pytest.mark.skipif(not V.VLLM_NAMESPACE,
                                    reason="vLLM's own ops own the vllm namespace")
FLASHINFER_FORMS = [(True, False), (False, True)]
"""(is_neox, heads): each style, flat and head-split."""


@VLLM_NAMESPACE
@VERSIONS
@pytest.mark.parametrize(("is_neox", "heads"), FLASHINFER_FORMS,
                         ids=[f"{'neox' if n else 'gptj'}-{'heads' if h else 'flat'}"
                              for n, h in FLASHINFER_FORMS])
def test_flashinfer_rotary_embedding_on_qkv_views(is_neox: bool, heads: bool, v2: bool,
                                                  rope_from_operands) -> None:
    """FlashInfer's rope as DeepSeek calls it (its f32 cache, a partial rotary_dim here) on q and
    k split from one qkv buffer: one attn.rope as for `_C`'s, bit-exact even when computed from
    the raised op's operands with the float32 reading `rotates_in_f32` gives it."""
    module = _Wrap(_qkv_fn(is_neox, True, heads, rope=V.vllm_flashinfer_rotary_embedding),
                   cache=V.rope_cache(HEAD_DIM // 2, dtype=torch.float32))
    x = _x(width=(HEADS + 2 * KV_HEADS) * HEAD_DIM)
    compiled = _run(module, torch.arange(8) + 3, x, v2=v2, dynamic=((0, 0), (1, 0)))
    assert compiled.raised()["rope"] == 1
    assert _missed(compiled) == []
    assert rope_from_operands == [1]


@VLLM_NAMESPACE
@VERSIONS
def test_flashinfer_rope_with_a_bf16_cache_is_a_remark(v2: bool) -> None:
    """A cache in the model dtype is not FlashInfer's (which refuses it at run time, as the
    stand-in does): left, and the report says so."""
    module = _Wrap(_qkv_fn(True, True, False, rope=V.vllm_flashinfer_rotary_embedding),
                   cache=V.rope_cache(HEAD_DIM))
    x = _x(width=(HEADS + 2 * KV_HEADS) * HEAD_DIM)
    with pytest.raises(ValueError, match="cos_sin_cache should be float32"):
        _run(module, torch.arange(8), x, v2=v2, dynamic=((0, 0), (1, 0)))
    compiled = Compiled(None, None, backend.reports())
    assert compiled.raised()["rope"] == 0
    assert _missed(compiled) == [
        "not a RoPE (vllm.flashinfer_rotary_embedding): the cos_sin_cache is bf16, not the f32 "
        "cache its kernel reads"
    ]


@VERSIONS
@pytest.mark.parametrize(("offset", "inverse", "why"), [
    (4, False, "it rotates from dim 4 of each head (rope_dim_offset)"),
    (0, True, "it rotates by -sin (inverse)")], ids=["offset", "inverse"])
def test_rotary_embedding_off_the_head_start_or_inverse_is_a_remark(offset, inverse, why,
                                                                    v2: bool) -> None:
    """vLLM 0.32's `_C.rotary_embedding` may rotate from `rope_dim_offset` on, or by -sin
    (`inverse`): attn.rope says neither, so the call stays, bit-exact, with a remark."""
    def rope(positions, q, k, head_size, cache, is_neox):
        return V.vllm_rotary_embedding(positions, q, k, head_size, cache, is_neox, offset,
                                       inverse)

    module = _Wrap(_qkv_fn(True, True, False, rope=rope), cache=V.rope_cache(HEAD_DIM // 2))
    compiled = _run(module, torch.arange(8), _x(width=(HEADS + 2 * KV_HEADS) * HEAD_DIM),
                    v2=v2, dynamic=((0, 0), (1, 0)))
    assert compiled.raised()["rope"] == 0
    assert _missed(compiled) == [f"not a RoPE (_C.rotary_embedding): {why}"]


# --- vLLM ops named, not raised --------------------------------------------------------------------


@VERSIONS
def test_deepgemm_packed_group_quant_is_named_not_raised(v2: bool) -> None:
    """DeepGEMM's FP8 group quant (`_C.per_token_group_fp8_quant_packed`, UE8M0 scales packed
    into int32) after a norm: the norm is raised, the quant named in the report."""
    module = _Wrap(lambda m, x: V.vllm_per_token_group_quant_fp8_packed(
        V.vllm_rms_norm(_wide(x), m.w, 1e-6), 128), w=torch.cat([WEIGHT, WEIGHT]))
    compiled = _run(module, _x(), v2=v2)
    assert {k: n for k, n in compiled.raised().items() if n} == {"rms_norm": 1}
    (missed,) = _missed(compiled)
    assert missed.startswith("_C.per_token_group_fp8_quant_packed: vLLM's FP8 group quant for "
                             "DeepGEMM")


@VLLM_NAMESPACE
@VERSIONS
@pytest.mark.parametrize(("sections", "interleaved", "is_neox"), [
    ((4, 2, 2), False, True), ((4, 2, 2), True, True), ((2, 3, 3), True, False),
    ((5, 3, 0), False, False),
], ids=["sections", "interleaved", "interleaved-gptj", "no-width-gptj"])
def test_rocm_mrope_is_raised(v2: bool, sections, interleaved: bool, is_neox: bool) -> None:
    """ROCm's multimodal rope (`vllm.mrope`, [3, T] positions) on q and k split from one qkv
    buffer: one attn.rope on the op's positions and cache, with its sections, bit for bit."""
    def fn(m, positions, x):
        q, k, v = (x * 2).split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], -1)
        q, k = V.vllm_mrope(positions, q, k, HEAD_DIM, m.cache, sections, interleaved, is_neox)
        return q * 1, k * 1, v * 1

    module = _Wrap(fn, cache=V.rope_cache(HEAD_DIM))
    positions = torch.randint(0, 64, (3, 8), generator=_gen(3))
    compiled = _run(module, positions, _x(width=(HEADS + 2 * KV_HEADS) * HEAD_DIM), v2=v2,
                    dynamic=((0, 1), (1, 0)))
    assert compiled.raised()["rope"] == 1
    assert _missed(compiled) == []


# --- a Llama-style decoder layer -------------------------------------------------------------------


class _Fp8Linear(nn.Module):
    """Static per-tensor FP8 activations (QuantFP8 -> `_C.static_scaled_fp8_quant`) times a
    per-tensor FP8 weight, by `_scaled_mm` with row-wise scales (its fast CPU path)."""

    def __init__(self, out_features: int, in_features: int, seed: int):
        super().__init__()
        w = torch.randn(out_features, in_features, generator=_gen(seed)) / in_features**0.5
        w_scale = w.abs().amax() / 448.0
        self.register_buffer("weight", (w / w_scale).to(V.FP8))
        self.register_buffer("weight_scale", w_scale.reshape(1))
        self.register_buffer("input_scale", torch.tensor([4.0 / 448.0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xq, scale = V.vllm_scaled_fp8_quant(x, self.input_scale)
        return self.gemm(xq, scale)

    def gemm(self, xq: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return torch._scaled_mm(
            xq, self.weight.t(), scale_a=scale.expand(xq.shape[0], 1).contiguous(),
            scale_b=self.weight_scale.expand(1, self.weight.shape[0]).contiguous(),
            out_dtype=BF16,
        )


class VllmDecoderLayer(nn.Module):
    """Llama's decoder layer as vLLM runs it with custom ops on: fused_add_rms_norm (rms_norm in
    the first layer), static FP8 qkv / gate_up / down projections, rotary_embedding on the flat
    q and k split from qkv (vLLM's LlamaAttention; `heads`: on head-split views of them), SDPA
    with GQA, silu_and_mul."""

    def __init__(self, seed: int = 0, heads: bool = False):
        super().__init__()
        self.heads = heads
        self.register_buffer("in_norm", (torch.rand(H, generator=_gen(seed + 1)) + 0.5).to(BF16))
        self.register_buffer("post_norm", (torch.rand(H, generator=_gen(seed + 2)) + 0.5)
                             .to(BF16))
        self.qkv = _Fp8Linear((HEADS + 2 * KV_HEADS) * HEAD_DIM, H, seed + 3)
        self.o = nn.Linear(HEADS * HEAD_DIM, H, bias=False, dtype=BF16)
        nn.init.normal_(self.o.weight, std=H**-0.5, generator=_gen(seed + 4))
        self.gate_up = _Fp8Linear(2 * INTER, H, seed + 5)
        self.down = _Fp8Linear(H, INTER, seed + 6)
        self.register_buffer("cache", V.rope_cache(HEAD_DIM))

    def forward(self, positions, hidden, residual=None):
        if residual is None:
            residual = hidden
            hidden = V.vllm_rms_norm(hidden, self.in_norm, 1e-6)
        else:
            hidden, residual = V.vllm_fused_add_rms_norm(hidden, residual, self.in_norm, 1e-6)
        qkv = self.qkv(hidden)
        q, k, v = qkv.split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], -1)
        if self.heads:
            q = q.reshape(-1, HEADS, HEAD_DIM)
            k = k.reshape(-1, KV_HEADS, HEAD_DIM)
        q, k = V.vllm_rotary_embedding(positions, q, k, HEAD_DIM, self.cache, True)
        q = q.reshape(-1, HEADS, HEAD_DIM)
        k = k.reshape(-1, KV_HEADS, HEAD_DIM)
        v = v.reshape(-1, KV_HEADS, HEAD_DIM)
        attn = F.scaled_dot_product_attention(
            q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True,
            enable_gqa=True,
        ).transpose(0, 1).reshape(-1, HEADS * HEAD_DIM)
        hidden, residual = V.vllm_fused_add_rms_norm(self.o(attn), residual, self.post_norm,
                                                     1e-6)
        act = V.vllm_silu_and_mul(self.gate_up(hidden))
        return self.down(act), residual


class VllmModel(nn.Module):
    def __init__(self, layers: int = 2, heads: bool = False):
        super().__init__()
        self.layers = nn.ModuleList(VllmDecoderLayer(10 * i, heads) for i in range(layers))

    def forward(self, positions, hidden):
        residual = None
        for layer in self.layers:
            hidden, residual = layer(positions, hidden, residual)
        return hidden, residual


LAYERS = 2


def _model_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(8), _x(seed=5)


@VERSIONS
@pytest.mark.parametrize("heads", [False, True], ids=["flat", "heads"])
def test_decoder_layer_raises_every_op_bit_exact_at_o0(heads: bool, v2: bool,
                                                      rope_from_operands) -> None:
    compiled = _run(VllmModel(LAYERS, heads), *_model_inputs(), v2=v2, dynamic=((0, 0), (1, 0)))
    raised = {k: n for k, n in compiled.raised().items() if n}
    assert raised == {
        "rms_norm": 1,  # the first layer's input norm
        "add_rms_norm": 2 * LAYERS - 1,
        "quant_fp8": 3 * LAYERS,  # qkv, gate_up, down
        "silu_mul": LAYERS,
        "rope": LAYERS,  # q and k rotated in the qkv buffer
        "attention": LAYERS,
        "scaled_gemm": 3 * LAYERS,
        "gemm": LAYERS,  # o_proj
    }
    assert _missed(compiled) == []
    assert len(rope_from_operands) == LAYERS  # bit-exact with rope computed from its operands


@pytest.mark.filterwarnings("ignore:irfuse.*eliminate_noops off")
def test_decoder_layer_fuses_norm_and_act_quant_at_o2() -> None:
    compiled = _run(VllmModel(LAYERS), *_model_inputs(), exact=False,
                    options={"optimization_level": 2}, dynamic=((0, 0), (1, 0)))
    report, _ = _record(compiled)
    assert report.fused("fuse-norm-quant") == 2 * LAYERS
    assert report.fused("fuse-act-quant") == LAYERS
    (out, residual), _ = compiled.outputs
    (ref, ref_residual), _ = compiled.eager
    # vLLM's norm + quant tolerance for bf16 (docs/numerics.md), relative to the output's range ...
    for a, b in ((out, ref), (residual, ref_residual)):
        err = ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
        assert err < 1e-2
    # ... and on the CPU even bit for bit: the fused ops keep the raised ops' arithmetic (the
    # static quant's `x * (1 / s)`, fused_add_rms_norm's sum rounded to bf16: `round_sum`).
    assert_bit_exact(compiled.outputs, compiled.eager)
