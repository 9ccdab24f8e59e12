"""raise-vllm-attention: vLLM's attention calls, as its engine puts them in the graph, raised whole.

`vllm.unified_kv_cache_update` becomes `attn.vllm_kv_cache_update` (`KvCacheUpdatePattern`), MLA's
`vllm.unified_mla_kv_cache_update` `attn.vllm_mla_kv_cache_update` (`MlaKvCacheUpdatePattern`).
`vllm.unified_attention_with_output` and its MLA variant write their output buffer, so they reach
the post-grad graph as `auto_functionalized[_v2]` calls on a fresh buffer; each becomes
`attn.vllm_attention` / `attn.vllm_mla_attention`, whose result is the output's new value, and
the graph's reads of the buffer read that result (`AttentionPattern`: the IR before and after).

The layer name is a string constant or vLLM's hoisted `LayerName` input (`vllm_layers`). Left
alone with a remark: a call that already writes its output quantized (`output_scale`,
`output_block_scale`: vLLM fused it), MLA's quant-group and DCP arguments, an output buffer that
is not a fresh tensor made for the call, or one viewed in another way.
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint, Rewriter

from irfuse.dialects.attn import (
    VllmAttentionOp,
    VllmKvCacheUpdateOp,
    VllmMlaAttentionOp,
    VllmMlaKvCacheUpdateOp,
)
from irfuse.dialects.irfuse import TensorType
from irfuse.ir.shapes import mul_dim
from irfuse.raising.aten_ops import (
    AUTO_FUNCTIONALIZED,
    AUTO_FUNCTIONALIZED_V2,
    FLATTEN_USING_INTS,
    VIEWS,
    VLLM_UNIFIED_ATTENTION_WITH_OUTPUT,
    VLLM_UNIFIED_KV_CACHE_UPDATE,
    VLLM_UNIFIED_MLA_ATTENTION_WITH_OUTPUT,
    VLLM_UNIFIED_MLA_KV_CACHE_UPDATE,
)
from irfuse.raising.driver import (
    NO_CANDIDATE,
    REWROTE,
    AnchorPattern,
    CallPattern,
    Outcome,
    PatternPass,
    Site,
)
from irfuse.raising.match import (
    Call,
    NoMatch,
    call,
    discard,
    producer,
    raise_chain,
    size_matches,
    tensor_type,
    with_private,
)
from irfuse.raising.vllm_functionalized import (
    ALLOCS,
    Functionalized,
    aten_call,
    read_functionalized,
    view_ops,
)
from irfuse.raising.vllm_layers import layer_name_of

ATTENTION_MUTABLE = ("output", "output_block_scale")
"""The mutable (`Tensor!`) arguments of both attention ops, in schema order."""
MLA_UNSUPPORTED = ("quant_group_size", "quant_scale_ue8m0", "quant_col_major",
                   "quant_tma_aligned", "q_dcp_replicated")
"""MLA arguments the raised op does not carry: raised only when None."""
_NAMES = {VLLM_UNIFIED_ATTENTION_WITH_OUTPUT: "vllm.unified_attention_with_output",
          VLLM_UNIFIED_MLA_ATTENTION_WITH_OUTPUT: "vllm.unified_mla_attention_with_output",
          VLLM_UNIFIED_KV_CACHE_UPDATE: "vllm.unified_kv_cache_update"}


def layer(value: Any) -> tuple[str, SSAValue | None]:
    """(name, run-time operand) of a `layer_name` argument; NoMatch when it is neither form."""
    found = layer_name_of(value)
    if found is None:
        raise NoMatch("its layer_name is neither a string constant nor vLLM's LayerName input "
                      "(a graph input import marked with its traced name)")
    return found


def _tensor(args: dict[str, Any], name: str, rank: int | None = None) -> SSAValue:
    value = args.get(name)
    t = tensor_type(value)
    if t is None:
        raise NoMatch(f"its {name} argument is not a tensor")
    if rank is not None and t.rank != rank:
        raise NoMatch(f"its {name} is {list(t.dims)}, not rank {rank}")
    return value  # type: ignore[return-value]


def _dep(args: dict[str, Any]) -> SSAValue | None:
    dep = args.get("kv_cache_dummy_dep")
    if dep is None:
        return None
    t = tensor_type(dep)
    if t is None or t.rank != 1:
        raise NoMatch("its kv_cache_dummy_dep is not a 1-D tensor")
    return dep


# --- the cache write -----------------------------------------------------------------------------


def _raise_kv_update(found: Call) -> None:
    k = found.arg(0, "key")
    v = found.arg(1, "value")
    name, ln = layer(found.arg(2, "layer_name"))
    for what, x in (("key", k), ("value", v)):
        t = tensor_type(x)
        if t is None or t.rank != 3:
            raise NoMatch(f"its {what} is not a [tokens, kv_heads, head_dim] tensor")
    raised = VllmKvCacheUpdateOp(k, v, ln, layer_name=name, result_type=found.result.type)
    raise_chain(raised, [found.op], [found.result], "vLLM op", verify=True)


class KvCacheUpdatePattern(CallPattern):
    """`vllm.unified_kv_cache_update(key, value, layer_name) -> Tensor`, functional in its
    schema (the cache write is a side effect vLLM orders by the dummy it returns): a plain call,
    raised to `attn.vllm_kv_cache_update`."""

    targets = (VLLM_UNIFIED_KV_CACHE_UPDATE,)
    remark = "not a vLLM KV-cache write (vllm.unified_kv_cache_update)"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        _raise_kv_update(found)
        return REWROTE


def _raise_mla_kv_update(found: Call) -> None:
    kv_c = _tensor_arg(found, 0, "kv_c_normed", 2)
    k_pe = _tensor_arg(found, 1, "k_pe")
    name, ln = layer(found.arg(2, "layer_name"))
    kv_cache_dtype = found.arg(3, "kv_cache_dtype")
    if not isinstance(kv_cache_dtype, str):
        raise NoMatch("its kv_cache_dtype is not a string constant")
    k_scale = _tensor_arg(found, 4, "k_scale")
    raised = VllmMlaKvCacheUpdateOp(kv_c, k_pe, k_scale, ln, layer_name=name,
                                    kv_cache_dtype=kv_cache_dtype,
                                    result_type=found.result.type)
    raise_chain(raised, [found.op], [found.result], "vLLM op", verify=True)


def _tensor_arg(found: Call, index: int, name: str, rank: int | None = None) -> SSAValue:
    return _tensor({name: found.arg(index, name)}, name, rank)


class MlaKvCacheUpdatePattern(CallPattern):
    """`vllm.unified_mla_kv_cache_update(kv_c_normed, k_pe, layer_name, kv_cache_dtype, k_scale)
    -> Tensor`: MLA's latent-cache write, a plain call like `KvCacheUpdatePattern`'s, raised to
    `attn.vllm_mla_kv_cache_update`."""

    targets = (VLLM_UNIFIED_MLA_KV_CACHE_UPDATE,)
    remark = "not a vLLM MLA KV-cache write (vllm.unified_mla_kv_cache_update)"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        _raise_mla_kv_update(found)
        return REWROTE


# --- the attention calls ---------------------------------------------------------------------------


def _output(fn: Functionalized) -> tuple[SSAValue, list[Operation], list[Operation],
                                           SSAValue | None]:
    """(the value the raised op stands for, the ops that make it inside the region, the buffer
    ops that may move in, the new base the graph reads, when that is another value)."""
    view = fn.views.get("output")
    if view is None:  # v1: the output tensor itself, its new value a result
        if fn.args.get("output") is None:
            raise NoMatch("its output is not a tensor")
        buffer = fn.args["output"]
        y = fn.outs["output"]
        return y, [], _fresh(buffer), None
    base_t = tensor_type(view.base)
    if base_t is None:
        raise NoMatch("its output has no tensor base")
    makers = _fresh(view.base)
    if view.kind in ("base", "alias"):
        return view.new_base, [], makers, None
    if view.kind != "strided" or not _splits_rows(view, base_t):
        raise NoMatch(f"its output is a {view.kind} view of its buffer, not the buffer split "
                      "into heads ([T, H * Dv] viewed [T, H, Dv])")
    inside = view_ops(view, view.new_base)
    return inside[-1].results[0], inside, makers, view.new_base


def _fresh(buffer: SSAValue) -> list[Operation]:
    """The ops that made the output buffer, a fresh tensor (maybe viewed): those the call alone
    uses move into the region. NoMatch for any other buffer."""
    ops: list[Operation] = []
    value = buffer
    while (found := producer(value, *VIEWS)) is not None:
        ops.append(found.op)
        value = found.arg(0)
    maker = producer(value, *ALLOCS)
    if maker is None:
        raise NoMatch("its output buffer is not a fresh tensor made for the call")
    return [*ops, maker.op]


def _splits_rows(view: Any, base: TensorType) -> bool:
    """The as_strided view is `[T, H, Dv]` row-major over a `[T, H * Dv]` base."""
    size, stride = list(view.size), list(view.stride)
    if base.rank != 2 or len(size) != 3 or view.offset not in (0, None):
        return False
    h, dv = size[1], size[2]
    if not (isinstance(h, int) and isinstance(dv, int)):
        return False
    return (size_matches(size[0], base.dims[0]) and base.dims[1] == h * dv
            and stride == [h * dv, dv, 1])


def _raise_attention(fn: Functionalized, order: dict[Operation, float]) -> None:
    args = fn.args
    mla = fn.target == VLLM_UNIFIED_MLA_ATTENTION_WITH_OUTPUT
    if args.get("output_scale") is not None or args.get("output_block_scale") is not None:
        raise NoMatch("it already writes its output quantized (output_scale / "
                      "output_block_scale: vLLM fused the quant)")
    if mla:
        for extra in MLA_UNSUPPORTED:
            if args.get(extra) is not None:
                raise NoMatch(f"its {extra} is set (not raised)")
    name, ln = layer(args.get("layer_name"))
    dep = _dep(args)
    y, inside, makers, new_base = _output(fn)
    anchor = fn.found.op
    if mla:
        q = _tensor(args, "q", 3)
        raised: Operation = VllmMlaAttentionOp(
            q, _tensor(args, "kv_c_normed"), _tensor(args, "k_pe"), dep, ln, layer_name=name,
            result_type=y.type)
    else:
        q = _tensor(args, "query", 3)
        raised = VllmAttentionOp(q, _tensor(args, "key", 3), _tensor(args, "value", 3), dep, ln,
                                 layer_name=name, result_type=y.type)
    try:
        raised.verify()
    except Exception as err:  # noqa: BLE001 (a VerifyException: the remark says why)
        discard(raised, *inside)
        raise NoMatch(f"the matched values do not make a valid {raised.name}: {err}") from None
    point = InsertPoint.after(anchor)
    for op in inside:
        op.location = anchor.location
        Rewriter.insert_op(op, point)
        point = InsertPoint.after(op)
    chain = with_private([anchor], makers)
    chain.sort(key=lambda o: order.get(o, -1))
    chain += inside
    after: list[Operation] = []
    if new_base is not None and any(u.operation not in chain for u in new_base.uses):
        yt = tensor_type(y)
        assert yt is not None
        flat = aten_call(FLATTEN_USING_INTS, [y, 1, 2], (yt.dims[0], mul_dim(yt.dims[1], yt.dims[2])),
                     yt.dtype)
        flat.location = anchor.location
        flat.results[0].name_hint = new_base.name_hint
        Rewriter.insert_op(flat, point)
        after.append(flat)
        ours = set(chain) | set(after)
        new_base.replace_uses_with_if(flat.results[0], lambda use: use.operation not in ours)
    try:
        raise_chain(raised, chain, [y], "vLLM op")
    except NoMatch:
        if after:
            after[0].results[0].replace_all_uses_with(new_base)  # type: ignore[arg-type]
        discard(*after, *reversed(inside))
        raise


class AttentionPattern(AnchorPattern):
    """A functionalized `vllm.unified_attention_with_output` or its MLA variant.

    ```mlir
    %dep = aten.call "vllm::unified_kv_cache_update.default"(%k, %v, %ln)
    %buf = aten.call "aten::empty.memory_format"([%t, 4096], ...)
    %none, %new = aten.call tuple "hop:auto_functionalized_v2"(
        #aten.target<"vllm::unified_attention_with_output.default">, query = %q, key = %k,
        value = %v, layer_name = %ln, output_scale = none, kv_cache_dummy_dep = %dep,
        _output_base_index = 0, _output_size = (%t, 32, 128), _output_stride = (4096, 128, 1),
        _output_storage_offset = 0, _output_block_scale_base_index = none, _all_bases = [%buf])
    // becomes
    %dep = attn.vllm_kv_cache_update %k, %v, layer %ln {
        layer_name = "model.layers.0.self_attn.attn"}
    %o = attn.vllm_attention %q, %k, %v, kv_cache_dep %dep, layer %ln {layer_name = ...}
    %new = aten.call "aten::flatten.using_ints"(%o, 1, 2)   // what the graph read: the new buffer
    ```

    `vllm.unified_attention_with_output(query, key, value, output!, layer_name, output_scale?,
    output_block_scale!?, kv_cache_dummy_dep?)` writes `output` (and `output_block_scale`), so it
    reaches the post-grad graph as `auto_functionalized[_v2]`; vLLM's `Attention.forward` passes
    a fresh `[T, H * Dv]` buffer viewed `[T, H, Dv]` (v2: the base and the view's size / stride
    / offset). It becomes `attn.vllm_attention` whose result is the view's new value
    `[T, H, Dv]`; the region keeps the buffer, the call and the view of its new base. Where the
    graph read the new base, it reads the result flattened (the same elements: the view is the
    base's row-major split into heads). `vllm.unified_mla_attention_with_output(q, kv_c_normed,
    k_pe, output!, layer_name, ...)` alike, to `attn.vllm_mla_attention`; its output is the flat
    buffer itself.
    """

    targets = (AUTO_FUNCTIONALIZED, AUTO_FUNCTIONALIZED_V2)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        found = call(op)
        assert found is not None
        target = found.arg(0)
        if target not in (VLLM_UNIFIED_ATTENTION_WITH_OUTPUT,
                          VLLM_UNIFIED_MLA_ATTENTION_WITH_OUTPUT):
            return NO_CANDIDATE
        try:
            fn = read_functionalized(found, ATTENTION_MUTABLE, viewed=True)
            _raise_attention(fn, site.order)
        except NoMatch as miss:
            raise NoMatch(f"not a vLLM attention ({_NAMES[target]}): {miss}") from None
        return REWROTE


class RaiseVllmAttention(PatternPass):
    """Raise vLLM's attention calls (`vllm.unified_attention_with_output`, its MLA variant and
    the two cache writes, `vllm.unified_kv_cache_update` and MLA's) to `attn.vllm_*` ops. No
    options."""

    name = "raise-vllm-attention"
    patterns = (AttentionPattern(), KvCacheUpdatePattern(), MlaKvCacheUpdatePattern())
