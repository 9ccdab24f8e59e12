"""raise-vllm-ops: vLLM's own custom ops (`torch.ops._C.*`, FlashInfer's rotary as
`torch.ops.vllm.*`), functionalized, raised whole to the semantic op that means the same.

vLLM's out-variant ops reach the graph as `auto_functionalized[_v2]` calls with the written
tensors as extra results (`vllm_functionalized` reads them). The ops this pass knows are MUTABLE's
(norms, the FP8 quants and CUDA's group quant, SiLU·Mul and GeGLU, the rotary ops through
`raise_vllm_rotary`, the FP8 linear's `cutlass_scaled_mm`); each becomes `norm.*`, `quant.fp8`,
`act.silu_mul`, `attn.rope` or `gemm.scaled_matmul`, taking along the fresh output buffers only
the call uses, so the fusions see vLLM's ops as they see torch's. vLLM IR's functional norms
(`vllm_ir.*`, with `ir_enable_torch_wrap`) become `norm.rms_norm` / `norm.add_rms_norm` alike. The
call stays in the decomposition region (no result bit changes); UNRAISED's ops are named in a
remark where they appear. `filecheck/raise/raise-vllm-*.mlir` show each op.
"""
from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import f32
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from irfuse.dialects import aten
from irfuse.dialects.act import SiluMulOp
from irfuse.dialects.gemm import ScaledMatmulOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.norm import AddRmsNormOp, RmsNormOp
from irfuse.dialects.quant import GROUP_SIZES, QuantFp8Op, QuantScheme
from irfuse.ir import call_args
from irfuse.ir.shapes import is_float, is_fp8, is_one_element
from irfuse.raising.aten_ops import (
    AUTO_FUNCTIONALIZED,
    AUTO_FUNCTIONALIZED_V2,
    EMPTY_STRIDED,
    FULL,
    NEW_EMPTY_STRIDED,
    NEW_ZEROS,
    PERMUTE,
    VIEW,
    VLLM_CUTLASS_SCALED_MM,
    VLLM_DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT,
    VLLM_DYNAMIC_SCALED_FP8_QUANT,
    VLLM_FLASHINFER_ROTARY_EMBEDDING,
    VLLM_FUSED_ADD_RMS_NORM,
    VLLM_GELU_AND_MUL,
    VLLM_GELU_TANH_AND_MUL,
    VLLM_IR_FUSED_ADD_RMS_NORM,
    VLLM_IR_RMS_NORM,
    VLLM_MROPE,
    VLLM_PER_TOKEN_GROUP_FP8_QUANT,
    VLLM_PER_TOKEN_GROUP_FP8_QUANT_PACKED,
    VLLM_RMS_NORM,
    VLLM_ROTARY_EMBEDDING,
    VLLM_SCALED_FP4_QUANT_OUT,
    VLLM_SILU_AND_MUL,
    VLLM_STATIC_SCALED_FP8_QUANT,
    VLLM_TRITON_MROPE,
    ZEROS,
    ZEROS_LIKE,
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
    as_cast,
    call,
    producer,
    raise_chain,
    size_matches,
    strip_views,
    tensor_type,
    users,
    with_private,
)
from irfuse.raising.raise_quant import FP8_BOUND
from irfuse.raising.raise_vllm_rotary import (
    MROPES,
    ROTARY_CACHE_DTYPES,
    VllmKernelPattern,
    raise_rotary,
)
from irfuse.raising.vllm_functionalized import (
    ALLOCS,
    FP8_DTYPES,
    Functionalized,
    aten_call,
    constant_arg,
    float_input,
    read_functionalized,
    tensor_arg,
)

MUTABLE: dict[str, tuple[str, ...]] = {
    VLLM_RMS_NORM: ("result",),
    VLLM_FUSED_ADD_RMS_NORM: ("input", "residual"),
    VLLM_STATIC_SCALED_FP8_QUANT: ("result",),
    VLLM_DYNAMIC_SCALED_FP8_QUANT: ("result", "scale"),
    VLLM_DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT: ("result", "scale"),
    VLLM_PER_TOKEN_GROUP_FP8_QUANT: ("output_q", "output_s"),
    VLLM_SILU_AND_MUL: ("result",),
    VLLM_GELU_AND_MUL: ("out",),
    VLLM_GELU_TANH_AND_MUL: ("out",),
    VLLM_ROTARY_EMBEDDING: ("query", "key"),
    VLLM_FLASHINFER_ROTARY_EMBEDDING: ("query", "key"),
    VLLM_MROPE: ("query", "key"),
    VLLM_CUTLASS_SCALED_MM: ("out",),
}
"""vLLM's ops this pass knows -> their mutable (`Tensor!`) arguments, in schema order."""

WHAT = {
    VLLM_RMS_NORM: "an RMSNorm",
    VLLM_FUSED_ADD_RMS_NORM: "a residual add + RMSNorm",
    VLLM_STATIC_SCALED_FP8_QUANT: "an FP8 quant",
    VLLM_DYNAMIC_SCALED_FP8_QUANT: "an FP8 quant",
    VLLM_DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT: "an FP8 quant",
    VLLM_PER_TOKEN_GROUP_FP8_QUANT: "an FP8 group quant",
    VLLM_SILU_AND_MUL: "a SiLU·Mul",
    VLLM_GELU_AND_MUL: "a GeGLU",
    VLLM_GELU_TANH_AND_MUL: "a GeGLU",
    VLLM_ROTARY_EMBEDDING: "a RoPE",
    VLLM_FLASHINFER_ROTARY_EMBEDDING: "a RoPE",
    VLLM_MROPE: "a multimodal RoPE",
    VLLM_TRITON_MROPE: "a multimodal RoPE",
    VLLM_CUTLASS_SCALED_MM: "an FP8 GEMM",
}

UNRAISED: dict[str, str] = {
    VLLM_SCALED_FP4_QUANT_OUT: (
        "vLLM's CUDA NVFP4 quant is not raised: its block scale and the factor it multiplies by "
        "are taken through approximate reciprocals (`gs * (amax * rcp(6))`, `rcp(sb * "
        "rcp(gs))`), which round other than irfuse's NVFP4 (`docs/numerics.md`), so the norm "
        "or SiLU·Mul before it stays unfused"),
    VLLM_PER_TOKEN_GROUP_FP8_QUANT_PACKED: (
        "vLLM's FP8 group quant for DeepGEMM (Blackwell, groups of 128) is not raised: it writes "
        "UE8M0 scales packed four to an int32, TMA-aligned, a layout irfuse's group kernels do "
        "not write, so the norm or SiLU·Mul before it stays unfused"),
}
"""vLLM ops on the way to a fusion that irfuse knows and does not raise -> why (a remark in the
report where they appear, as functionalized calls or, for a Triton kernel, its wrapper's call)."""

VIEWED = (*ROTARY_CACHE_DTYPES, VLLM_MROPE, VLLM_PER_TOKEN_GROUP_FP8_QUANT)
"""Ops whose mutable arguments may be views: vLLM's q and k, split from one qkv buffer (raised
with the views rebuilt around the raised op); a group quant's column-major scales, a transposed
buffer (`_group_scales`)."""
GROUP_EPS_MAX = 1.0 / 512.0
"""The largest `eps` (the amax floor of vLLM's CUDA group quant) irfuse's group scheme agrees
with wherever a group's amax is at least 1/512 (`docs/numerics.md`)."""
ZERO_FILLS = (ZEROS, ZEROS_LIKE, NEW_ZEROS)


# --- checks ------------------------------------------------------------------------------------


def _written_like(fn: Functionalized, name: str, dims: tuple, dtype: Any, what: str) -> None:
    t = tensor_type(fn.args.get(name))
    if t is None or t.dims != dims or t.dtype != dtype:
        got = "none" if t is None else f"{list(t.dims)} {t.dtype}"
        raise NoMatch(f"its {name} buffer is {got}, not the {list(dims)} {dtype} {what}")


def _static_scale(value: Any, what: str) -> SSAValue:
    """A one-element f32 graph input or constant (maybe reshaped or cast on the way)."""
    t = tensor_type(value)
    if t is None:
        raise NoMatch(f"{what} is not a tensor")
    source = value
    while True:
        source, _ = strip_views(source)
        cast = as_cast(source)
        if cast is None:
            break
        source = cast[0]
    if not isinstance(source, BlockArgument) and not isinstance(
        getattr(source, "owner", None), aten.GetAttrOp
    ):
        raise NoMatch(f"{what} is not a graph input or constant")
    if not is_one_element(t.dims) or t.dtype != f32:
        raise NoMatch(f"{what} is {list(t.dims)} {t.dtype}, not one f32 element")
    return value


def _norm_weight(fn: Functionalized, x: SSAValue) -> SSAValue:
    weight = tensor_arg(fn, "weight")
    xt, wt = tensor_type(x), tensor_type(weight)
    if wt.dims != xt.dims[-1:]:  # type: ignore[union-attr]
        raise NoMatch(f"the weight is {list(wt.dims)}, not [{xt.dims[-1]}]")  # type: ignore
    if wt.dtype != xt.dtype:  # type: ignore[union-attr]
        raise NoMatch(f"the weight is {wt.dtype}, not the input's {xt.dtype}")  # type: ignore
    return weight


# --- one builder per op: (raised op, the values its results stand for) ---------------------------


def _rms_norm(fn: Functionalized) -> tuple[Operation, list[SSAValue]]:
    x = tensor_arg(fn, "input")
    float_input(x)
    xt = tensor_type(x)
    weight = _norm_weight(fn, x)
    eps = constant_arg(fn, "epsilon", float)
    _written_like(fn, "result", xt.dims, xt.dtype, "norm output")  # type: ignore[union-attr]
    out = fn.outs["result"]
    return RmsNormOp(x, weight, eps=eps, result_type=out.type), [out]


def _fused_add_rms_norm(fn: Functionalized) -> tuple[Operation, list[SSAValue]]:
    x = tensor_arg(fn, "input")
    residual = tensor_arg(fn, "residual")
    float_input(x)
    xt = tensor_type(x)
    if tensor_type(residual) != xt:
        raise NoMatch(f"the residual is {tensor_type(residual)}, not the input's {xt}")
    weight = _norm_weight(fn, x)
    eps = constant_arg(fn, "epsilon", float)
    y, residual_out = fn.outs["input"], fn.outs["residual"]
    raised = AddRmsNormOp(
        x, residual, weight, eps=eps, round_sum=xt.dtype != f32,  # type: ignore[union-attr]
        result_types=(y.type, residual_out.type),
    )
    return raised, [y, residual_out]


def _fp8_result(fn: Functionalized, x: SSAValue, name: str = "result") -> Any:
    """The fp8 dtype of the buffer `name` the quant writes, which has x's shape."""
    xt = tensor_type(x)
    rt = tensor_type(fn.args.get(name))
    if rt is None or rt.dtype not in FP8_DTYPES:
        raise NoMatch(f"its {name} is {rt and rt.dtype}, not f8E4M3FN or f8E4M3FNUZ")
    _written_like(fn, name, xt.dims, rt.dtype, "quantized input")  # type: ignore[union-attr]
    return rt.dtype


def _static_fp8(fn: Functionalized) -> tuple[Operation, list[SSAValue]]:
    x = tensor_arg(fn, "input")
    float_input(x)
    dtype = _fp8_result(fn, x)
    if fn.args.get("group_shape") is not None:
        raise NoMatch(f"group_shape {fn.args['group_shape']}: irfuse raises per-tensor static "
                      "scales only")
    scale = _static_scale(fn.args.get("scale"), "quant scale")
    q = fn.outs["result"]
    raised = QuantFp8Op(x, scale, scheme=QuantScheme.static_tensor(), fp8_dtype=dtype,
                        result_types=[q.type, None])
    return raised, [q]


def _dynamic_fp8(fn: Functionalized) -> tuple[Operation, list[SSAValue]]:
    x = tensor_arg(fn, "input")
    float_input(x)
    dtype = _fp8_result(fn, x)
    scale = tensor_arg(fn, "scale")
    st = tensor_type(scale)
    if not is_one_element(st.dims) or st.dtype != f32:  # type: ignore[union-attr]
        raise NoMatch(f"its scale buffer is {st}, not one f32 element")
    maker = producer(scale, *ZERO_FILLS, FULL)
    if maker is None or (maker.target == FULL and maker.arg(1) != 0):
        raise NoMatch("its scale buffer is not a new zero tensor (vLLM's kernel takes the max "
                      "with what the buffer holds)")
    q, s = fn.outs["result"], fn.outs["scale"]
    raised = QuantFp8Op(x, scheme=QuantScheme.dynamic_tensor(), fp8_dtype=dtype,
                        result_types=[q.type, s.type])
    return raised, [q, s]


def _per_token_fp8(fn: Functionalized) -> tuple[Operation, list[SSAValue]]:
    x = tensor_arg(fn, "input")
    float_input(x)
    dtype = _fp8_result(fn, x)
    xt = tensor_type(x)
    _written_like(fn, "scale", (*xt.dims[:-1], 1), f32, "per-token scale")  # type: ignore
    ub = fn.args.get("scale_ub")
    if ub is not None:
        ub = _static_scale(ub, "scale_ub")
    q, s = fn.outs["result"], fn.outs["scale"]
    raised = QuantFp8Op(x, None, ub, scheme=QuantScheme.dynamic_token(), fp8_dtype=dtype,
                        result_types=[q.type, s.type])
    return raised, [q, s]


def _group_fp8(fn: Functionalized) -> tuple[Operation, list[SSAValue]]:
    """`per_token_group_fp8_quant(input, output_q, output_s, group_size, eps, fp8_min, fp8_max,
    scale_ue8m0, dummy_is_scale_transposed, dummy_is_tma_aligned)`, vLLM's CUDA group quant,
    as `fp8_utils.per_token_group_quant_fp8` calls it: a `group` scheme with its flags."""
    x = tensor_arg(fn, "input")
    float_input(x)
    xt = tensor_type(x)
    group = constant_arg(fn, "group_size", int)
    if group not in GROUP_SIZES:
        raise NoMatch(f"group size {group}: irfuse quantizes groups of 128 or 64")
    hidden = xt.dims[-1] if xt.dims else None  # type: ignore[union-attr]
    if not isinstance(hidden, int) or hidden % group:
        raise NoMatch(f"group size {group} does not divide the static hidden size {hidden}")
    eps = constant_arg(fn, "eps", float)
    if not 0.0 <= eps <= GROUP_EPS_MAX:
        raise NoMatch(f"eps {eps}: irfuse's group scales floor amax below 1/512 only")
    dtype = _fp8_result(fn, x, "output_q")
    bound = FP8_BOUND[dtype]
    if (fn.args.get("fp8_min"), fn.args.get("fp8_max")) != (-bound, bound):
        raise NoMatch(f"its range is [{fn.args.get('fp8_min')}, {fn.args.get('fp8_max')}], not "
                      f"[-{bound}, {bound}] of {dtype}")
    col_major = bool(fn.args.get("dummy_is_scale_transposed", False))
    tma = bool(fn.args.get("dummy_is_tma_aligned", False))
    ue8m0 = constant_arg(fn, "scale_ue8m0", bool)
    scale = _group_scales(fn, xt, hidden // group, col_major, tma)  # type: ignore[arg-type]
    q = fn.outs["output_q"]
    scheme = QuantScheme.per_group(group, col_major=col_major, ue8m0=ue8m0, tma_aligned=tma)
    raised = QuantFp8Op(x, scheme=scheme, fp8_dtype=dtype, result_types=[q.type, scale.type])
    return raised, [q, scale]


def _group_scales(fn: Functionalized, xt: TensorType, groups: int, col_major: bool,
                  tma: bool) -> SSAValue:
    """The value the scales written into `output_s` stand for, `[..., G]` (the layout is the
    scheme's flags): the written buffer itself, row-major or TMA-aligned (`empty_strided`
    `[T, G]`), or for column-major scales the `[T, G]` transpose of a `[G, T]` buffer, as the
    graph reads it after the call (auto_functionalized_v2 regenerates the view: that `permute`
    joins the chain) or passes it in (v1: the permute and its buffer join the chain)."""
    logical = (*xt.dims[:-1], groups)
    if col_major and len(xt.dims) != 2:
        raise NoMatch(f"column-major scales of an input of rank {len(xt.dims)}, not 2")
    if tma and not col_major:
        raise NoMatch("TMA-aligned scales that are not column-major")
    view = fn.views.get("output_s")
    if view is None or view.kind == "base":
        st = tensor_type(fn.args.get("output_s"))
        if st is None or st.dims != logical or st.dtype != f32:
            raise NoMatch(f"its output_s is {st}, not the {list(logical)} f32 group scales")
        maker = producer(fn.args.get("output_s"), *ALLOCS, PERMUTE)
        strided = maker is not None and maker.target in (EMPTY_STRIDED, NEW_EMPTY_STRIDED)
        if maker is not None and maker.target == PERMUTE:
            base = producer(maker.arg(0), *ALLOCS)
            if not col_major or tma or base is None:
                raise NoMatch("its output_s is a transposed buffer the call does not say it is")
            fn.buffers.extend((maker.op, base.op))
        elif maker is None or strided != tma or (col_major and not tma):
            raise NoMatch("its output_s is not a new buffer laid out as its flags say "
                          f"(transposed {col_major}, TMA-aligned {tma})")
        return fn.outs["output_s"]
    base, t = tensor_type(view.base), xt.dims[0]
    size, stride = tuple(view.size), tuple(view.stride)
    if not (col_major and not tma and view.kind == "strided" and base is not None
            and base.dims == (groups, t) and len(size) == len(stride) == 2
            and size_matches(size[0], t) and size_matches(size[1], groups)
            and size_matches(stride[0], 1) and size_matches(stride[1], t)
            and size_matches(view.offset, 0)):
        raise NoMatch("its output_s is a view other than the transpose of a new [G, T] buffer")
    readers = users(view.new_base)
    permute = call(readers[0], PERMUTE) if len(readers) == 1 else None
    if permute is None or permute.arg(1) not in ([-1, -2], [1, 0]):
        raise NoMatch("its transposed scales are not read back through one permute")
    if (maker := producer(view.base, *ALLOCS)) is not None:
        fn.buffers.append(maker.op)
    fn.after.append(permute.op)
    return permute.op.results[0]


def symbolic_half(dim: object) -> str | None:
    """The IR's text of `dim // 2` for a symbolic dim (`s27` -> `(s27//2)`), None for anything
    else."""
    if not isinstance(dim, str) or not dim.isidentifier():
        return None
    return f"({dim}//2)"


def _silu_and_mul(fn: Functionalized, activation: str = "silu",
                  out: str = "result") -> tuple[Operation, list[SSAValue]]:
    """`silu_and_mul(result, input)`, or GeGLU's `gelu[_tanh]_and_mul(out, input)`."""
    x = tensor_arg(fn, "input")
    float_input(x)
    xt = tensor_type(x)
    last = xt.dims[-1] if xt.dims else None  # type: ignore[union-attr]
    # A symbolic width is one `size_contracts` guarded even (the op's contract); its half is
    # the output's `(s//2)`.
    half = last // 2 if isinstance(last, int) else symbolic_half(last)
    if half is None or isinstance(last, int) and last % 2:
        raise NoMatch(f"the input's last dim {last} is not an even size")
    _written_like(fn, out, (*xt.dims[:-1], half), xt.dtype, "output")  # type: ignore
    y = fn.outs[out]
    return SiluMulOp(x, result_type=y.type, activation=activation), [y]


def _cutlass_scaled_mm(fn: Functionalized) -> tuple[Operation, list[SSAValue]]:
    """`cutlass_scaled_mm(out, a, b, a_scales, b_scales, bias)`, vLLM's FP8 linear on CUDA
    (`ops.cutlass_scaled_mm`): `(a * a_scales) @ (b * b_scales) (+ bias)` into `out`. a_scales
    is per-tensor or per-token `[M, 1]`; b_scales per-tensor or per-channel, N values that
    CUTLASS reads flat (`[N, 1]` as vLLM stores a channel-wise weight scale, `[1, N]` or `[N]`),
    raised as gemm.scaled_matmul's `[1, N]` through a view. Block scales (DeepSeek's) and int8
    products are not a gemm.scaled_matmul."""
    a, b = tensor_arg(fn, "a"), tensor_arg(fn, "b")
    at, bt = tensor_type(a), tensor_type(b)
    assert at is not None and bt is not None
    if not (is_fp8(at.dtype) and is_fp8(bt.dtype)):
        raise NoMatch(f"its a and b are {at.dtype} and {bt.dtype}, not fp8")
    if len(at.dims) != 2 or len(bt.dims) != 2:
        raise NoMatch(f"its a and b are {list(at.dims)} and {list(bt.dims)}, not 2-D")
    m, n = at.dims[0], bt.dims[1]
    out_type = tensor_type(fn.args.get("out"))
    if out_type is None or not is_float(out_type.dtype):
        raise NoMatch("its out buffer is not a float tensor")
    _written_like(fn, "out", (m, n), out_type.dtype, "product")
    scale_a, scale_b = tensor_arg(fn, "a_scales"), tensor_arg(fn, "b_scales")
    sa, sb = tensor_type(scale_a), tensor_type(scale_b)
    assert sa is not None and sb is not None
    if sa.dtype != f32 or sb.dtype != f32:
        raise NoMatch(f"its scales are {sa.dtype} and {sb.dtype}, not f32")
    if not is_one_element(sa.dims) and sa.dims != (m, 1):
        raise NoMatch(f"its a_scales is {list(sa.dims)}: neither per-tensor nor per-token "
                      f"[{m}, 1] (block scales are not raised)")
    if not (is_one_element(sb.dims) or sb.dims == (1, n)):
        if not isinstance(n, int) or sb.dims not in ((n,), (n, 1)):
            raise NoMatch(f"its b_scales is {list(sb.dims)}: neither per-tensor nor per-channel "
                          f"({n} values; block scales are not raised)")
        view = aten_call(VIEW, [scale_b, [1, n]], (1, n), f32)
        view.results[0].name_hint = f"{scale_b.name_hint or 'b_scales'}_row"
        view.location = fn.found.op.location
        fn.prelude.append(view)
        scale_b = view.results[0]
    y = fn.outs["out"]
    raised = ScaledMatmulOp(a, b, scale_a, scale_b, fn.args.get("bias"),
                            out_dtype=out_type.dtype, result_type=y.type)
    return raised, [y]


BUILDERS = {
    VLLM_RMS_NORM: _rms_norm,
    VLLM_FUSED_ADD_RMS_NORM: _fused_add_rms_norm,
    VLLM_STATIC_SCALED_FP8_QUANT: _static_fp8,
    VLLM_DYNAMIC_SCALED_FP8_QUANT: _dynamic_fp8,
    VLLM_DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT: _per_token_fp8,
    VLLM_PER_TOKEN_GROUP_FP8_QUANT: _group_fp8,
    VLLM_SILU_AND_MUL: _silu_and_mul,
    VLLM_GELU_AND_MUL: lambda fn: _silu_and_mul(fn, "gelu", "out"),
    VLLM_GELU_TANH_AND_MUL: lambda fn: _silu_and_mul(fn, "gelu_tanh", "out"),
    VLLM_CUTLASS_SCALED_MM: _cutlass_scaled_mm,
}


def vllm_target(op: Operation) -> str | None:
    """The vLLM op an `auto_functionalized[_v2]` call stands for, if it is one of MUTABLE."""
    if not isinstance(op, aten.CallOp) or op.target.data not in (AUTO_FUNCTIONALIZED,
                                                                 AUTO_FUNCTIONALIZED_V2):
        return None
    first = op.template.data[0] if op.template.data else None
    if not isinstance(first, call_args.TargetAttr) or first.text.data not in MUTABLE:
        return None
    return first.text.data


def _raise(candidate: Operation, order: dict[Operation, int]) -> None:
    found = call(candidate)
    assert found is not None
    fn = read_functionalized(found, MUTABLE[found.arg(0)], found.arg(0) in VIEWED)
    if fn.target in ROTARY_CACHE_DTYPES or fn.target in MROPES:
        raise_rotary(fn)
        return
    raised, outputs = BUILDERS[fn.target](fn)
    ops = with_private([candidate, *fn.after], fn.buffers)
    ops.sort(key=lambda o: order[o])
    raise_chain(raised, ops, outputs, "vLLM op", verify=True, prelude=fn.prelude)


class VllmOpPattern(AnchorPattern):
    """A functionalized vLLM op (`auto_functionalized[_v2]` of one of MUTABLE)."""

    targets = (AUTO_FUNCTIONALIZED, AUTO_FUNCTIONALIZED_V2)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        target = vllm_target(op)
        if target is None:
            first = call(op)
            known = first.arg(0) if first is not None else None
            if isinstance(known, str) and known in UNRAISED:
                name = known.removesuffix(".default").replace("::", ".")
                raise NoMatch(f"{name}: {UNRAISED[known]}")
            return NO_CANDIDATE
        try:
            _raise(op, site.order)
        except NoMatch as miss:  # the remark names the vLLM op
            name = target.removesuffix(".default").replace("::", ".")
            raise NoMatch(f"not {WHAT[target]} ({name}): {miss}") from None
        return REWROTE


# --- vLLM IR's norms (`torch.ops.vllm_ir.*`, with compilation_config.ir_enable_torch_wrap) ------


def _raise_ir_norm(found: Call) -> None:
    """`vllm_ir.rms_norm(x, weight?, epsilon, variance_size=None)` and
    `vllm_ir.fused_add_rms_norm(x, x_residual, weight?, epsilon, variance_size=None)`: functional
    ops (vLLM functionalizes the `maybe_inplace` overload before aot_autograd), their native
    numerics those of `norm.rms_norm` / `norm.add_rms_norm` (f32 sum, not rounded before the
    norm) when the weight is in x's dtype: `x.to(weight.dtype) * weight`, then x's dtype."""
    fused_add = found.target == VLLM_IR_FUSED_ADD_RMS_NORM
    x = found.arg(0, "x")
    residual = found.arg(1, "x_residual") if fused_add else None
    at = 2 if fused_add else 1
    weight = found.arg(at, "weight")
    eps = found.arg(at + 1, "epsilon")
    if found.arg(at + 2, "variance_size") is not None:
        raise NoMatch("its variance_size is set (a norm over part of the row)")
    xt = tensor_type(x)
    if xt is None or not is_float(xt.dtype):
        raise NoMatch("its x is not a float tensor")
    if isinstance(eps, int) and not isinstance(eps, bool):
        eps = float(eps)
    if not isinstance(eps, float):
        raise NoMatch("its epsilon is not a constant float")
    if weight is not None:
        wt = tensor_type(weight)
        if wt is None or wt.dims != xt.dims[-1:]:
            raise NoMatch(f"its weight is {wt}, not [{xt.dims[-1]}]")
        if wt.dtype != xt.dtype:
            raise NoMatch(f"its weight is {wt.dtype}, not x's {xt.dtype} (vLLM IR multiplies in "
                          "the weight's dtype, which norm.rms_norm reads as x's)")
    results = list(found.op.results)
    if fused_add:
        if tensor_type(residual) != xt:
            raise NoMatch(f"its x_residual is {tensor_type(residual)}, not x's {xt}")
        raised: Operation = AddRmsNormOp(x, residual, weight, eps=eps,
                                         result_types=(results[0].type, results[1].type))
    else:
        raised = RmsNormOp(x, weight, eps=eps, result_type=results[0].type)
    raise_chain(raised, [found.op], results, "vLLM IR op", verify=True)


class VllmIrNormPattern(CallPattern):
    """`vllm_ir.rms_norm` / `vllm_ir.fused_add_rms_norm`."""

    targets = (VLLM_IR_RMS_NORM, VLLM_IR_FUSED_ADD_RMS_NORM)
    remark = "not an RMSNorm (vLLM IR's norm op)"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        _raise_ir_norm(found)
        return REWROTE


class RaiseVllmOps(PatternPass):
    """Raise vLLM's functionalized custom ops (`_C.rms_norm`, `_C.static_scaled_fp8_quant`, ...)
    and vLLM IR's norms (`vllm_ir.rms_norm`, `vllm_ir.fused_add_rms_norm`) to semantic ops. No
    options."""

    name = "raise-vllm-ops"
    patterns = (VllmOpPattern(), VllmKernelPattern(), VllmIrNormPattern())
