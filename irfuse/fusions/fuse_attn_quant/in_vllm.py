"""fuse_attn_quant on vLLM's own attention call: a static FP8 or NVFP4 quant of the output of
`attn.vllm_attention` (or `attn.vllm_mla_attention`) goes into the attention.

```mlir
%o = attn.vllm_attention %q, %k, %v, kv_cache_dep %dep, layer %ln {layer_name = "L"}
%f = aten.call "aten::flatten.using_ints"(%o, 1, 2)           // [T, H * Dv], any reshapes
%y = quant.fp8 %f, scale %s {scheme = #quant.scheme<static_tensor>}
// where L's backend writes FP8 output itself (irfuse.vllm_layers: output_quant), as vLLM does:
%t = aten.call "aten::sym_size.int"(%q, 0)
%buf = aten.call "aten::new_empty"(%q, [%t, H, Dv], dtype = f8E4M3FN)
%n, %o8, %n2 = aten.call tuple "hop:auto_functionalized"(#aten.target<"vllm::unified_attention_
    with_output.default">, query = %q, ..., output = %buf, layer_name = %ln, output_scale = %s,
    output_block_scale = none, kv_cache_dummy_dep = %dep)
%y = aten.call "aten::reshape"(%o8, [-1, H * Dv])
// elsewhere, irfuse's kernel (the forward context read at run time):
%y = fused.vllm_attention_quant %q, %k, %v, %s, kv_cache_dep %dep, layer %ln {layer_name = "L",
    scheme = #quant.scheme<static_tensor>}
```

The output must reach the quant through reshapes only (they keep the row-major order, so a 2-D
end `[T, H * Dv]` is the token-major flattening), read by nothing else. Where the layer's backend
takes the quant (`impl.fused_output_quant_supported`, recorded at import), the call gets vLLM's
`output_scale` and an FP8 buffer `[T, H, Dv]` (vLLM's own replacement, so no kernel of irfuse's
runs and no measurement is needed); NVFP4 through the backend is not built here (its block-scale
buffer for a symbolic token count) and goes to irfuse's kernel instead. Elsewhere (the CPU
backend; FLASH_ATTN on sm90) the fused op's kernel runs: on the CPU the reference, vLLM's own
attention into a model-dtype buffer and the quant reference, the unfused graph's bits; on CUDA
a decode step over a backend cache irfuse knows is read in place by irfuse's paged decode kernel
with the quant epilogue; other batches run vLLM's attention, then irfuse's Triton static quant.
Kernel choice (FP8): on sm90 the fused kernel up to 16 tokens, where it was measured faster than
FlashInfer's tensor-core decode + Inductor's quant (1.01-1.11x at batch 16; docs/benchmarks.md),
vLLM's backend + the separate quant from 17 (at batch 64: 1.02x at context 2048, 0.98x at 8192);
elsewhere on CUDA and on ROCm, and for NVFP4, not measured: unfused, with the choice's reason as
the remark. On sm90 this choice splits compile ranges at 16 tokens (one more compile of the
decode sizes).

Kernels `vllm_attention_quant_fp8_static` and `vllm_attention_quant_nvfp4`: q, k, v (MLA: q,
kv_c_normed, k_pe), vLLM's dummy dependency, the layer name (`irfuse.kernels.vllm_context`:
vLLM's `LayerName` or `str`), the scale, the output buffer's dims after the tokens, `mla`;
FP8: the output dtype and the quant's spelling (`divide`). They return `[T, H * Dv]` quantized
(NVFP4: codes and swizzled block scales).
"""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Operation
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects import aten, fused, kernel
from irfuse.dialects.attn import VllmAttentionOp, VllmMlaAttentionOp
from irfuse.dialects.irfuse import OpaqueType, TensorType, sym_type, tensor_type
from irfuse.dialects.quant import NVFP4, STATIC_TENSOR, QuantFp8Op, QuantNvfp4Op, QuantScheme
from irfuse.dialects.shapes import F8E4M3FN
from irfuse.fusions.declare import Choice, Kernel
from irfuse.fusions.kernel_call import Args, flag, kernel_call
from irfuse.fusions.quant_consumers import divides
from irfuse.kernels import quant_ref, vllm_context
from irfuse.kernels.dispatch import check_fp8, empty, fake_nvfp4, kernels
from irfuse.raising import aten_ops
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, call, only_user, users
from irfuse.raising.vllm_layers import backend_output_quant

KERNEL = "vllm_attention_quant_fp8_static"
NVFP4_KERNEL = "vllm_attention_quant_nvfp4"
ATTENTION_OP = "vllm::unified_attention_with_output.default"
MLA_OP = "vllm::unified_mla_attention_with_output.default"
SYM_SIZE = "aten::sym_size.int"
NEW_EMPTY = "aten::new_empty.default"

RESHAPES = (*aten_ops.RESHAPES_AND_FLATTENS, aten_ops.ALIAS)
"""What may stand between the attention and the quant: shape changes that keep the order."""

LAYER_NAME = vllm_context.layer_name_type()
"""The kernels' layer-name type, fixed when they are declared (see vllm_context)."""

# --- the kernels ---------------------------------------------------------------------------------

SCHEMA = (f"(Tensor q, Tensor k, Tensor v, Tensor? kv_cache_dep, {LAYER_NAME} layer_name, "
          "Tensor scale, int[] out_tail, bool mla, ScalarType out_dtype, bool divide=False) "
          "-> Tensor")
NVFP4_SCHEMA = (f"(Tensor q, Tensor k, Tensor v, Tensor? kv_cache_dep, {LAYER_NAME} layer_name, "
                "Tensor global_scale, int[] out_tail, bool mla) -> (Tensor, Tensor)")


def attention_out(q, k, v, kv_cache_dep, layer_name, out_tail, mla) -> torch.Tensor:
    """vLLM's attention call of the layer into a fresh model-dtype buffer `[T, *out_tail]` (what
    the unfused graph runs), flattened `[T, H * Dv]`."""
    out = q.new_empty((q.shape[0], *out_tail))
    op = torch.ops.vllm.unified_mla_attention_with_output if mla else \
        torch.ops.vllm.unified_attention_with_output
    op(q, k, v, out, layer_name, kv_cache_dummy_dep=kv_cache_dep)
    return out.view(q.shape[0], -1)


def _ref(q, k, v, kv_cache_dep, layer_name, scale, out_tail, mla, out_dtype, divide=False):
    return quant_ref.quant_fp8_static(
        attention_out(q, k, v, kv_cache_dep, layer_name, out_tail, mla), scale, out_dtype, divide)


def paged_decode_in_place(q, layer_name, scale, paged_decode_fp8) -> torch.Tensor | None:
    """The FP8 attention of a decode-only step, read from the layer's paged cache in place by
    `paged_decode_fp8` (irfuse's kernel, or its reference in tests): `[T, H * D]`, or None where
    this step or layer is not that (prefill tokens, a backend cache or attention variant irfuse
    does not know, a KV connector): the caller then runs the reference."""
    if vllm_context.transfers_kv():
        return None
    ctx = vllm_context.attention_context(layer_name)
    meta, layer = ctx.metadata, ctx.layer
    impl = getattr(layer, "impl", None)
    d = q.shape[-1]
    caches = vllm_context.split_kv_cache(layer, ctx.kv_cache, d, q.dtype)
    if caches is None or meta is None or impl is None:
        return None
    if getattr(meta, "max_query_len", None) != 1 or not all(
            hasattr(meta, f) for f in ("block_table", "seq_lens", "num_actual_tokens")):
        return None
    if any(getattr(impl, f, None) not in (None, 0, 0.0, (-1, -1))
           for f in ("alibi_slopes", "sinks", "logits_soft_cap", "sliding_window")):
        return None
    n = int(meta.num_actual_tokens)
    if 0 < n == q.shape[0]:  # no padding rows: the kernel's output is the result
        o = paged_decode_fp8(q, caches[0], caches[1], meta.block_table[:n], meta.seq_lens[:n],
                             scale, softmax_scale=float(impl.scale))
        return o.view(n, -1)
    out = q.new_empty((q.shape[0], q.shape[1] * d), dtype=torch.float8_e4m3fn)
    if n:
        o = paged_decode_fp8(q[:n], caches[0], caches[1], meta.block_table[:n],
                             meta.seq_lens[:n], scale, softmax_scale=float(impl.scale))
        out[:n] = o.reshape(n, -1)
    return out


def _cuda(q, k, v, kv_cache_dep, layer_name, scale, out_tail, mla, out_dtype, divide=False):
    if not mla and out_dtype == torch.float8_e4m3fn and tuple(out_tail) == tuple(q.shape[1:]):
        out = paged_decode_in_place(q, layer_name, scale,
                                    kernels("attention_quant").paged_decode_fp8)
        if out is not None:
            return out
    # Any other step: vLLM's attention, then irfuse's Triton quant (one launch, as Inductor's
    # quant of the unfused graph; the reference's torch ops would be four).
    return kernels("act_quant").quant_fp8_static(
        attention_out(q, k, v, kv_cache_dep, layer_name, out_tail, mla), scale, out_dtype,
        divide=divide)


def _fake(q, k, v, kv_cache_dep, layer_name, scale, out_tail, mla, out_dtype, divide=False):
    check_fp8(q, out_dtype)
    width = 1
    for d in out_tail:
        width *= d
    return empty(q, (q.shape[0], width), out_dtype)


def _nvfp4_ref(q, k, v, kv_cache_dep, layer_name, global_scale, out_tail, mla):
    return quant_ref.quant_nvfp4(
        attention_out(q, k, v, kv_cache_dep, layer_name, out_tail, mla), global_scale)


def _nvfp4_fake(q, k, v, kv_cache_dep, layer_name, global_scale, out_tail, mla):
    quant_ref.check_model_dtype(q)
    width = 1
    for d in out_tail:
        width *= d
    return fake_nvfp4(q.new_empty((q.shape[0], width)), width)


NOT_MEASURED_IN_VLLM = Choice("inductor", (
    "not measured on a GPU yet: irfuse's attention + quant inside vLLM (paged decode read in "
    "place from vLLM's cache) stays unfused until benchmarked against vLLM's attention and "
    "the separate quant"))
_UNMEASURED = {"cuda": ((1, NOT_MEASURED_IN_VLLM),), "rocm": ((1, NOT_MEASURED_IN_VLLM),)}
FUSED_DECODE_SM90 = Choice("triton", (
    "H100 (docs/benchmarks.md, bench_e2e_vllm --attn-table, two runs): irfuse's paged decode + "
    "FP8 read in place from vLLM's FlashInfer cache at batch 16 took 54.5 us against "
    "FlashInfer's tensor-core decode + Inductor's quant 60.3 us (context 2048, 1.11x; 1.08x in "
    "the other run) and 181.7 against 186.4 us (context 8192, 1.03x; 1.01x)"))
BACKEND_FROM_17_SM90 = Choice("inductor", (
    "H100 (docs/benchmarks.md, bench_e2e_vllm --attn-table, two runs): at batch 64 irfuse's "
    "fused decode was faster at context 2048 (188.6 against 192.3 us, 1.02x; 1.007x) but "
    "slower at 8192 (721.8 against 705.8 us, 0.978x; 0.992x) than FlashInfer's tensor-core "
    "decode + Inductor's quant; 17 to 63 tokens not measured: left to vLLM's backend"))
_FP8_CHOICES = {"cuda:sm90": ((1, FUSED_DECODE_SM90), (17, BACKEND_FROM_17_SM90)),
                **_UNMEASURED}

VLLM_ATTN_QUANT = Kernel(KERNEL, SCHEMA, _ref, _cuda, _fake, _FP8_CHOICES, single_tensor=True)
VLLM_ATTN_QUANT_NVFP4 = Kernel(NVFP4_KERNEL, NVFP4_SCHEMA, _nvfp4_ref, _nvfp4_ref, _nvfp4_fake,
                               _UNMEASURED)
KERNELS = (VLLM_ATTN_QUANT, VLLM_ATTN_QUANT_NVFP4)


def _out_tail(op: fused.VllmAttentionQuantOp) -> list[int]:
    """The attention's output buffer dims after the tokens: `[H, Dv]`, MLA's `[H * Dv]`."""
    if op.mla is None:
        q, v = op.q.type, op.v.type
        return [q.dims[1], v.dims[2]]  # type: ignore[attr-defined]
    width = op.out.type.dims[1]  # type: ignore[attr-defined]
    return [width * 2 if op.scheme.is_nvfp4 else width]


def _lower(op: fused.VllmAttentionQuantOp, platform: str) -> kernel.CallOp:
    a = Args()
    template: list[Attribute] = [
        a.tensor(op.q), a.tensor(op.k), a.tensor(op.v), a.optional(op.kv_cache_dep),
        a.tensor(op.layer) if op.layer is not None else StringAttr(op.layer_name.data),
        a.tensor(op.output_scale), ArrayAttr([IntAttr(d) for d in _out_tail(op)]),
        flag(op.mla is not None)]
    if op.scheme.is_nvfp4:
        return kernel_call(VLLM_ATTN_QUANT_NVFP4, a, template, op, platform)
    template.append(op.out.type.dtype)  # type: ignore[attr-defined]
    keywords = {"divide": aten.TRUE} if op.divide is not None else {}
    return kernel_call(VLLM_ATTN_QUANT, a, template, op, platform, keywords)


LOWERINGS = {fused.VllmAttentionQuantOp.name: _lower}

# --- the pattern ---------------------------------------------------------------------------------


class VllmAttnQuantPattern(AnchorPattern):
    """vLLM's attention whose output feeds a static FP8 or NVFP4 quant through reshapes."""

    op_types = (VllmAttentionOp, VllmMlaAttentionOp)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, VllmAttentionOp | VllmMlaAttentionOp)
        views: list[Operation] = []
        end = op.out
        while (user := only_user(end)) is not None and call(user, *RESHAPES) is not None:
            views.append(user)
            end = user.results[0]
        quant = only_user(end)
        what = "vLLM's MLA attention" if isinstance(op, VllmMlaAttentionOp) else \
            "vLLM's attention"
        if not isinstance(quant, QuantFp8Op | QuantNvfp4Op):
            if any(isinstance(u, QuantFp8Op | QuantNvfp4Op) for u in users(end)):
                raise NoMatch(f"the output of {what} is also read unquantized")
            return NO_CANDIDATE
        if isinstance(quant, QuantFp8Op) and not quant.scheme.is_static:
            raise NoMatch(f"{what} + {quant.scheme.kind.data} FP8 quant: only static per-tensor "
                          "and NVFP4 output quants are fused")
        out, flat = op.out.type, end.type
        assert isinstance(out, TensorType) and isinstance(flat, TensorType)
        if flat.rank != 2 or flat.dims[0] != out.dims[0] \
                or flat.dims[1] != _width(out):
            raise NoMatch(f"the reshapes between {what} and the quant end at {list(flat.dims)}, "
                          "not its [T, H * Dv] flattening")
        kind = STATIC_TENSOR if isinstance(quant, QuantFp8Op) else NVFP4
        backend, takes = backend_output_quant(site.module, op.layer_name.data)
        if kind in takes and kind == STATIC_TENSOR:
            return _into_vllm_call(op, views, quant, rewriter)
        return _into_kernel(op, views, quant, backend, rewriter, site)


def _width(out: TensorType) -> int | None:
    """The product of the output's dims after the tokens (None where one is symbolic)."""
    width = 1
    for d in out.dims[1:]:
        if not isinstance(d, int):
            return None
        width *= d
    return width


def _erase(op: Operation, views: list[Operation], quant: Operation,
           rewriter: PatternRewriter) -> None:
    for dead in (quant, *reversed(views), op):
        rewriter.erase(dead)


def _into_kernel(op: VllmAttentionOp | VllmMlaAttentionOp, views: list[Operation],
                 quant: QuantFp8Op | QuantNvfp4Op, backend: str, rewriter: PatternRewriter,
                 site: Site) -> Outcome:
    """The fused op, where kernel choice takes irfuse's kernel on this platform."""
    nvfp4 = isinstance(quant, QuantNvfp4Op)
    try:
        site.require_kernel(NVFP4_KERNEL if nvfp4 else KERNEL)
    except NoMatch as miss:
        who = f"its backend ({backend})" if backend else "its backend (not described to irfuse)"
        raise NoMatch(f"{who} does not write this output quant itself; irfuse's kernel: {miss}")\
            from None
    if nvfp4:
        scale, results = quant.global_scale, [quant.q.type, quant.block_scale.type]
        scheme = QuantScheme.nvfp4()
    else:
        assert quant.scale is not None
        scale, results, scheme = quant.scale, [quant.q.type, None], quant.scheme
    mla = isinstance(op, VllmMlaAttentionOp)
    operands = (op.q, op.kv_c_normed, op.k_pe) if mla else (op.q, op.k, op.v)  # type: ignore[union-attr]
    fused_op = fused.VllmAttentionQuantOp(
        *operands, scale, op.kv_cache_dep, op.layer, layer_name=op.layer_name.data,
        scheme=scheme, divide=not nvfp4 and divides(quant), mla=mla, result_types=results)
    fused_op.location = op.location
    rewriter.insert(fused_op, InsertPoint.before(quant))
    for old, new in zip(quant.results, fused_op.results, strict=True):
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    _erase(op, views, quant, rewriter)
    return REWROTE


def _into_vllm_call(op: VllmAttentionOp | VllmMlaAttentionOp, views: list[Operation],
                    quant: QuantFp8Op, rewriter: PatternRewriter) -> Outcome:
    """vLLM's call with an FP8 output buffer and `output_scale` (its backend writes the quant)."""
    assert quant.scale is not None
    if divides(quant):
        raise NoMatch("the quant divides (x / s); vLLM's backends multiply by 1 / s, which can "
                      "round differently")
    mla = isinstance(op, VllmMlaAttentionOp)
    out = op.out.type
    assert isinstance(out, TensorType)
    fp8 = quant.q.type.dtype  # type: ignore[attr-defined]
    if fp8 != F8E4M3FN:
        raise NoMatch(f"the quant writes {fp8}; vLLM's backends write f8E4M3FN here")
    made: list[Operation] = []
    sizes: list[Attribute] = []
    a = Args()
    a.tensor(op.q)
    tokens = out.dims[0]
    if isinstance(tokens, int):
        sizes.append(IntAttr(tokens))
    else:
        size = aten.CallOp(SYM_SIZE, [op.q], [aten.OperandRefAttr(IntAttr(0)), IntAttr(0)],
                           [sym_type(str(tokens))])
        made.append(size)
        sizes.append(a.tensor(size.results[0]))
    sizes += [IntAttr(d) for d in out.dims[1:]]  # type: ignore[misc]
    buf_type = tensor_type(out.dims, fp8)
    buf = aten.CallOp(NEW_EMPTY, a.operands, [aten.OperandRefAttr(IntAttr(0)), ArrayAttr(sizes)],
                      [buf_type], kw_template={"dtype": fp8})
    made.append(buf)
    b = Args()
    names = ("q", "kv_c_normed", "k_pe") if mla else ("query", "key", "value")
    values = (op.q, op.kv_c_normed, op.k_pe) if mla else (op.q, op.k, op.v)  # type: ignore[union-attr]
    kw: dict[str, Attribute] = {n: b.tensor(x) for n, x in zip(names, values, strict=True)}
    kw["output"] = b.tensor(buf.results[0])
    kw["layer_name"] = b.tensor(op.layer) if op.layer is not None else \
        StringAttr(op.layer_name.data)
    kw["output_scale"] = b.tensor(quant.scale)
    kw["output_block_scale"] = aten.NONE
    kw["kv_cache_dummy_dep"] = b.optional(op.kv_cache_dep)
    none = OpaqueType(StringAttr("NoneType"))
    target = aten.TargetAttr(StringAttr(MLA_OP if mla else ATTENTION_OP))
    called = aten.CallOp(aten_ops.AUTO_FUNCTIONALIZED, b.operands, [target], [none, buf_type, none],
                         kw_template=kw, tuple_result=True)
    made.append(called)
    flat = quant.q.type
    reshape = aten.CallOp(aten_ops.RESHAPE, [called.results[1]],
                          [aten.OperandRefAttr(IntAttr(0)), ArrayAttr([IntAttr(-1),
                                                                       IntAttr(flat.dims[1])])],  # type: ignore[attr-defined]
                          [flat])
    made.append(reshape)
    for new in made:
        new.location = op.location
        rewriter.insert(new, InsertPoint.before(quant))
    reshape.results[0].name_hint = quant.q.name_hint
    rewriter.replace_all_uses_with(quant.q, reshape.results[0])
    _erase(op, views, quant, rewriter)
    return REWROTE
