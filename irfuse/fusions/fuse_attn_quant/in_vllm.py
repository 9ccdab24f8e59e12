"""fuse_attn_quant on vLLM's own attention call: a static FP8 or NVFP4 quant of the output of
`attn.vllm_attention` (or `attn.vllm_mla_attention`) goes into the attention.

The output must reach the quant through reshapes only (they keep the row-major order, so a 2-D
end `[T, H * Dv]` is the token-major flattening), read by nothing else. Where the layer's backend
writes the FP8 quant itself (`impl.fused_output_quant_supported`, recorded at import), vLLM's
call gets `output_scale` and an FP8 buffer, as vLLM's own fusion does (`_into_vllm_call`).
Elsewhere, and for NVFP4, the site becomes `fused.vllm_attention_quant` where kernel choice takes
irfuse's kernel (on the CPU the reference, the unfused graph's bits); otherwise it stays unfused
with the choice's reason as the remark. On sm90 the FP8 kernel is chosen up to 16 tokens
(docs/benchmarks.md, vLLM's graph), so compile ranges split at 16: one more compile, of the
decode sizes. Kernels, their lowering and their run-time reads of vLLM's forward context:
`ops.py`; their choices: `choices/`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Operation
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects import aten, fused
from irfuse.dialects.attn import VllmAttentionOp, VllmMlaAttentionOp
from irfuse.dialects.irfuse import OpaqueType, TensorType, sym_type, tensor_type
from irfuse.dialects.quant import NVFP4, STATIC_TENSOR, QuantFp8Op, QuantNvfp4Op, QuantScheme
from irfuse.fusions.kernel_call import Args
from irfuse.fusions.quant_consumers import divides
from irfuse.ir import call_args
from irfuse.ir.shapes import F8E4M3FN
from irfuse.raising import aten_ops
from irfuse.raising.aten_ops import RESHAPES_FLATTENS_AND_ALIAS as RESHAPES
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, call, only_user, users
from irfuse.raising.vllm_layers import backend_output_quant

KERNEL = "vllm_attention_quant_fp8_static"
NVFP4_KERNEL = "vllm_attention_quant_nvfp4"
ATTENTION_OP = "vllm::unified_attention_with_output.default"
MLA_OP = "vllm::unified_mla_attention_with_output.default"
SYM_SIZE = "aten::sym_size.int"
NEW_EMPTY = "aten::new_empty.default"


class VllmAttnQuantPattern(AnchorPattern):
    """vLLM's attention whose output feeds a static FP8 or NVFP4 quant through reshapes:

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
    %y = fused.vllm_attention_quant %q, %k, %v, %s, kv_cache_dep %dep, layer %ln {
        layer_name = "L", scheme = #quant.scheme<static_tensor>}
    ```
    """

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
    """vLLM's call with an FP8 output buffer `[T, H, Dv]` and `output_scale` (its backend writes
    the quant): vLLM's own replacement, so no kernel of irfuse's runs and none needs measuring.
    NVFP4 is not built this way (its block-scale buffer for a symbolic token count)."""
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
        size = aten.CallOp(SYM_SIZE, [op.q], [call_args.OperandRefAttr(IntAttr(0)), IntAttr(0)],
                           [sym_type(str(tokens))])
        made.append(size)
        sizes.append(a.tensor(size.results[0]))
    sizes += [IntAttr(d) for d in out.dims[1:]]  # type: ignore[misc]
    buf_type = tensor_type(out.dims, fp8)
    buf = aten.CallOp(NEW_EMPTY, a.operands, [call_args.OperandRefAttr(IntAttr(0)), ArrayAttr(sizes)],
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
    kw["output_block_scale"] = call_args.NONE
    kw["kv_cache_dummy_dep"] = call_args.NONE if op.kv_cache_dep is None else \
        b.tensor(op.kv_cache_dep)
    none = OpaqueType(StringAttr("NoneType"))
    target = call_args.TargetAttr(StringAttr(MLA_OP if mla else ATTENTION_OP))
    called = aten.CallOp(aten_ops.AUTO_FUNCTIONALIZED, b.operands, [target], [none, buf_type, none],
                         kw_template=kw, tuple_result=True)
    made.append(called)
    flat = quant.q.type
    reshape = aten.CallOp(aten_ops.RESHAPE, [called.results[1]],
                          [call_args.OperandRefAttr(IntAttr(0)), ArrayAttr([IntAttr(-1),
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
