"""raise-gemm: the matrix products of linear layers, plain and FP8-scaled.

Anchored at `mm`, `addmm`, 2-D `bmm` / `matmul` / `linear` and `_scaled_mm`; produces
`gemm.matmul` (with the bias of `addmm`) and `gemm.scaled_matmul` (per-tensor or row-wise
scales). A raised GEMM is 2-D, as the dialect is: the `view(-1, K)` before it, the view back after
it and the weight's transpose stay outside, and the fusions look through them
(`match.strip_views`). The matched ops stay in the decomposition region (no result bit changes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects.builtin import IntAttr, f32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects import aten
from irfuse.dialects.gemm import MatmulOp, ScaledMatmulOp
from irfuse.dialects.irfuse import tensor_type as make_tensor_type
from irfuse.ir import call_args
from irfuse.ir.shapes import is_float, is_fp8, is_one_element
from irfuse.raising.aten_ops import (
    ADDMM,
    BMM,
    CLONE,
    EXPAND,
    LINEAR,
    MATMUL,
    MATRIX_T,
    MM,
    SCALED_MM,
    VIEWS,
)
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, CallPattern, Outcome, PatternPass, Site
from irfuse.raising.match import (
    Call,
    NoMatch,
    call,
    discard,
    only_user,
    producer,
    raise_chain,
    tensor_type,
)

ANCHORS = (MM, ADDMM, BMM, MATMUL, LINEAR, SCALED_MM)


@dataclass
class _Gemm:
    """A matched product: the raised op's operands, the value it replaces, the ops it takes."""

    a: SSAValue
    b: SSAValue
    out: SSAValue
    ops: list[Operation] = field(default_factory=list)
    bias: SSAValue | None = None
    scales: tuple[SSAValue, SSAValue] | None = None  # scaled products only
    transpose_b: bool = False  # b is a linear's [N, K] weight: the op takes a new t(b)


def _dims(value: SSAValue) -> tuple:
    t = tensor_type(value)
    return () if t is None else t.dims


def _shape(dims: tuple) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _check_float(a: SSAValue, b: SSAValue) -> None:
    ta, tb = tensor_type(a), tensor_type(b)
    if ta is None or tb is None or not is_float(ta.dtype) or ta.dtype != tb.dtype:
        raise NoMatch(
            f"a product of {getattr(ta, 'dtype', '?')} and {getattr(tb, 'dtype', '?')}, not of "
            "two floats of one dtype"
        )


def _check_bias(bias: SSAValue, out: SSAValue) -> None:
    t, out_t = tensor_type(bias), tensor_type(out)
    assert out_t is not None
    if t is None or t.dims != (out_t.dims[-1],) or t.dtype != out_t.dtype:
        raise NoMatch(
            f"the added input has shape {_shape(_dims(bias))}, not a bias of {out_t.dims[-1]} "
            "elements in the output dtype"
        )


def _match_mm(found: Call) -> _Gemm:
    a, b = found.arg(0), found.arg(1, "mat2")
    _check_float(a, b)
    return _Gemm(a, b, found.result, [found.op])


def _match_addmm(found: Call) -> _Gemm:
    bias, a, b = found.arg(0), found.arg(1, "mat1"), found.arg(2, "mat2")
    if found.arg(3, "beta", 1) != 1 or found.arg(4, "alpha", 1) != 1:
        raise NoMatch("addmm with beta or alpha other than 1")
    _check_float(a, b)
    _check_bias(bias, found.result)
    return _Gemm(a, b, found.result, [found.op], bias=bias)


def _match_matmul(found: Call) -> _Gemm | None:
    a, b = found.arg(0), found.arg(1, "other")
    if len(_dims(a)) != 2 or len(_dims(b)) != 2:
        return None
    _check_float(a, b)
    return _Gemm(a, b, found.result, [found.op])


def _match_linear(found: Call) -> _Gemm | None:
    x, w, bias = found.arg(0), found.arg(1, "weight"), found.arg(2, "bias")
    if len(_dims(x)) != 2 or len(_dims(w)) != 2:
        return None
    _check_float(x, w)
    if bias is not None:
        _check_bias(bias, found.result)
    return _Gemm(x, w, found.result, [found.op], bias=bias, transpose_b=True)


def _transposed(w: SSAValue, location: Attribute) -> Operation:
    """A new `t(w)`: the `[K, N]` operand of a raised `linear`."""
    wt = tensor_type(w)
    assert wt is not None
    op = aten.CallOp(MATRIX_T, [w], [call_args.OperandRefAttr(IntAttr(0))],
                     [make_tensor_type((wt.dims[1], wt.dims[0]), wt.dtype)])
    op.location = location
    op.results[0].name_hint = f"{w.name_hint or 'weight'}_t"
    return op


def _reshaped_2d(value: SSAValue, ops: list[Operation]) -> SSAValue:
    """The 2-D tensor a `[1, M, K]` bmm operand reshapes (views, unsqueeze, a no-op expand);
    adds the reshapes to `ops`."""
    expected = _dims(value)[1:]
    while True:
        found = producer(value, *VIEWS, EXPAND)
        if found is None:
            break
        if found.target == EXPAND and _dims(found.arg(0)) != _dims(value):
            raise NoMatch("a bmm operand is broadcast by expand")
        if only_user(value) is None:
            raise NoMatch("a reshape before the bmm is used elsewhere")
        ops.append(found.op)
        value = found.arg(0)
        if len(_dims(value)) == 2:
            break
    if _dims(value) != expected:
        raise NoMatch(f"a bmm operand is not a reshaped 2-D tensor (it comes from {_dims(value)})")
    return value


def _match_bmm(found: Call) -> _Gemm | None:
    a3, b3 = found.arg(0), found.arg(1, "mat2")
    if _dims(a3)[:1] != (1,) or _dims(b3)[:1] != (1,):
        return None  # a real batch (attention): not a linear layer's product
    ops: list[Operation] = []
    a = _reshaped_2d(a3, ops)
    b = _reshaped_2d(b3, ops)
    _check_float(a, b)
    user = only_user(found.result)
    back = call(user, *VIEWS)
    if back is None or _dims(back.result) != _dims(found.result)[1:]:
        raise NoMatch("the bmm result is not reshaped back to 2-D")
    return _Gemm(a, b, back.result, [*ops, found.op, back.op])


def _folded_scale(scale: SSAValue, ops: list[Operation]) -> SSAValue:
    """`s` for a scale written `s.expand(...).contiguous()` (or `.clone()`) with one-element `s`:
    the copy and the expand join `ops`. The scale itself otherwise."""
    copy = producer(scale, CLONE)
    expand = producer(copy.arg(0), EXPAND) if copy is not None else None
    if copy is None or expand is None:
        return scale
    if only_user(scale) is None or only_user(expand.result) is None:
        return scale
    source = expand.arg(0)
    t = tensor_type(source)
    if t is None or not is_one_element(t.dims):
        return scale
    ops.extend([expand.op, copy.op])
    return source


def _match_scaled_mm(found: Call) -> _Gemm:
    a, b = found.arg(0), found.arg(1, "mat2")
    scale_a, scale_b = found.arg(2, "scale_a"), found.arg(3, "scale_b")
    bias = found.arg(4, "bias")
    if found.arg(5, "scale_result") is not None:
        raise NoMatch("_scaled_mm with scale_result")
    if found.arg(7, "use_fast_accum", False):
        raise NoMatch("_scaled_mm with use_fast_accum (the raised op does not say it)")
    ta, tb = tensor_type(a), tensor_type(b)
    if ta is None or tb is None or not is_fp8(ta.dtype) or not is_fp8(tb.dtype):
        raise NoMatch("_scaled_mm of operands that are not fp8")
    out = tensor_type(found.result)
    assert out is not None
    m, n = out.dims
    for what, scale, row_wise in (("scale_a", scale_a, (m, 1)), ("scale_b", scale_b, (1, n))):
        t = tensor_type(scale)
        if t is None or t.dtype != f32:
            raise NoMatch(f"{what} is not f32")
        if not is_one_element(t.dims) and t.dims != row_wise:
            raise NoMatch(
                f"{what} has shape {_shape(t.dims)}: neither per-tensor nor row-wise "
                f"{_shape(row_wise)}"
            )
    if bias is not None:
        _check_bias(bias, found.result)
    ops: list[Operation] = []
    scales = (_folded_scale(scale_a, ops), _folded_scale(scale_b, ops))
    return _Gemm(a, b, found.result, [*ops, found.op], bias=bias, scales=scales)


def _match(found: Call) -> _Gemm | None:
    if found.target == MM:
        return _match_mm(found)
    if found.target == ADDMM:
        return _match_addmm(found)
    if found.target == BMM:
        return _match_bmm(found)
    if found.target == MATMUL:
        return _match_matmul(found)
    if found.target == LINEAR:
        return _match_linear(found)
    return _match_scaled_mm(found)


def _raise(gemm: _Gemm, block_order: dict[Operation, int]) -> Operation:
    gemm.ops.sort(key=lambda o: block_order[o])
    last = gemm.ops[-1]
    before = [_transposed(gemm.b, last.location)] if gemm.transpose_b else []
    b = before[0].results[0] if before else gemm.b
    out_type: Attribute = gemm.out.type
    if gemm.scales is not None:
        raised: Operation = ScaledMatmulOp(
            gemm.a, b, gemm.scales[0], gemm.scales[1], gemm.bias,
            out_dtype=out_type.dtype,  # type: ignore[attr-defined]
            result_type=out_type,
        )
    else:
        raised = MatmulOp(gemm.a, b, gemm.bias, result_type=out_type)
    try:
        raised.verify()
    except VerifyException as err:
        discard(raised, *before)
        raise NoMatch(f"the raised op would not verify: {err}") from None
    raise_chain(raised, gemm.ops, [gemm.out], "product", prelude=before)
    return raised


class GemmPattern(CallPattern):
    """A matrix product anchored at its ATen op."""

    targets = ANCHORS
    remark = "not a GEMM"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        gemm = _match(found)
        if gemm is None:
            return NO_CANDIDATE
        _raise(gemm, site.order)
        return REWROTE


class RaiseGemm(PatternPass):
    """Raise matrix products (`mm`, `addmm`, 2-D `bmm`/`matmul`/`linear`, `_scaled_mm`) to `gemm`
    ops. No options."""

    name = "raise-gemm"
    patterns = (GemmPattern(),)
