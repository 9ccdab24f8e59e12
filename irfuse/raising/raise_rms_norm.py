"""raise-rms-norm: RMSNorm, and the residual add before it, however the model spells it.

Anchored at the norm's reciprocal square root (`rsqrt`, `1 / sqrt`, `reciprocal(sqrt)`) or at a
whole norm op (`aten.rms_norm`, `_fused_rms_norm`, irfuse's custom ops). Produces `norm.rms_norm`
or, with the residual add, `norm.add_rms_norm` (eps and weight_offset as properties; `round_sum`
when the model adds in a non-f32 dtype and normalizes that rounded sum, as Hugging Face does).
The matched ops stay in the decomposition region, so raising changes no result bit. A LayerNorm,
a reduction over another dim or an eps that is not a constant is left alone with a remark;
`filecheck/raise/raise-rms-norm.mlir` shows the spellings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects.builtin import f32
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from irfuse.dialects.norm import AddRmsNormOp, RmsNormOp
from irfuse.raising.aten_ops import (
    ADD,
    ADD_TENSOR,
    DIV,
    FUSED_RMS_NORM,
    IRFUSE_ADD_RMS_NORM,
    IRFUSE_RMS_NORM,
    MEAN_DIM,
    MUL,
    MUL_TENSOR,
    POW_TENSOR_SCALAR,
    RECIPROCAL,
    RMS_NORM,
    RSQRT,
    SQRT,
    SUB_TENSOR,
    SUM_DIM_INT_LIST,
)
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, CallPattern, Outcome, PatternPass, Site
from irfuse.raising.match import (
    Call,
    NoMatch,
    as_cast,
    call,
    commutative_operands,
    is_last_dim,
    only_user,
    producer,
    raise_chain,
    rank,
    scalar_of,
    tensor_type,
    users,
)
from irfuse.raising.raise_rope import is_rotation_sum

WHOLE_OPS = (
    RMS_NORM,
    FUSED_RMS_NORM,
    IRFUSE_RMS_NORM,
    IRFUSE_ADD_RMS_NORM,
)

# torch.finfo(dtype).eps, the eps `rms_norm` uses when none is given.
_DTYPE_EPS = {"bf16": 0.0078125, "f16": 0.0009765625, "f32": 1.1920928955078125e-07}


@dataclass
class _Norm:
    """A matched norm: what the raised op takes and returns, and the ops it replaces."""

    x: SSAValue
    weight: SSAValue | None
    eps: float
    out: SSAValue
    ops: list[Operation] = field(default_factory=list)
    weight_offset: float = 0.0
    residual: SSAValue | None = None
    residual_out: SSAValue | None = None
    round_sum: bool = False


def _rstd_source(anchor: Call) -> tuple[SSAValue, list[Operation]]:
    """The `mean + eps` value a reciprocal square root is taken of, and the ops doing it."""
    if anchor.target == RSQRT:
        return anchor.arg(0), [anchor.op]
    if anchor.target == RECIPROCAL:
        sqrt = producer(anchor.arg(0), SQRT)
        if sqrt is None:
            raise NoMatch("reciprocal of something other than a square root")
        return sqrt.arg(0), [sqrt.op, anchor.op]
    # 1 / sqrt(v)
    if scalar_of(anchor.arg(0)) != 1:
        raise NoMatch("division of something other than 1 by a square root")
    sqrt = producer(anchor.arg(1), SQRT)
    if sqrt is None:
        raise NoMatch("1 / something other than a square root")
    return sqrt.arg(0), [sqrt.op, anchor.op]


def _mean_of_square(value: SSAValue) -> tuple[SSAValue, float, list[Operation]]:
    """value = mean(x32^2, -1, keepdim) + eps: return (x32, eps, ops)."""
    add = producer(value, *ADD)
    if add is None:
        raise NoMatch("no eps is added to the mean square")
    for mean, eps_value in commutative_operands(add):
        eps = scalar_of(eps_value)
        if eps is not None and isinstance(mean, SSAValue):
            break
    else:
        raise NoMatch("eps is not a constant")
    if add.arg(2, "alpha", 1) != 1:
        raise NoMatch("eps is added with an alpha")
    square, reduce_ops = _mean(mean)
    x32 = _square_base(square)
    return x32, float(eps), [square.owner, *reduce_ops, add.op]  # type: ignore[list-item]


def _mean(value: SSAValue) -> tuple[SSAValue, list[Operation]]:
    """value = mean(s, -1, keepdim) (or sum / N): return (s, ops)."""
    mean = producer(value, MEAN_DIM)
    if mean is not None:
        _check_reduction(mean)
        return mean.arg(0), [mean.op]
    scaled = producer(value, *DIV, *MUL)
    if scaled is None:
        raise NoMatch("the rstd is not of a mean")
    total = producer(scaled.arg(0), SUM_DIM_INT_LIST)
    factor = scalar_of(scaled.arg(1, "other"))
    if total is None or factor is None:
        raise NoMatch("the rstd is not of a mean (sum / N)")
    _check_reduction(total)
    n = tensor_type(total.arg(0)).dims[-1]  # type: ignore[union-attr]
    expected = n if scaled.target in DIV else (1.0 / n if isinstance(n, int) else None)
    if not isinstance(n, int) or factor != expected:
        raise NoMatch(f"sum scaled by {factor}, not divided by the hidden size {n}")
    return total.arg(0), [total.op, scaled.op]


def _check_reduction(reduction: Call) -> None:
    source = reduction.arg(0)
    r = rank(source)
    if r is None or not is_last_dim(reduction.arg(1, "dim"), r):
        raise NoMatch(f"norm reduces over dim {reduction.arg(1, 'dim')}, not the last dim")
    if reduction.arg(2, "keepdim", False) is not True:
        raise NoMatch("the mean square is taken without keepdim")
    if reduction.kwargs.get("dtype") is not None:
        raise NoMatch("the mean square is taken with a dtype")


def _square_base(square: SSAValue) -> SSAValue:
    power = producer(square, POW_TENSOR_SCALAR)
    if power is not None:
        if power.arg(1, "exponent") != 2:
            raise NoMatch(f"x is raised to {power.arg(1)}, not squared")
        return power.arg(0)
    product = producer(square, MUL_TENSOR)
    if product is not None and product.arg(0) is product.arg(1):
        return product.arg(0)
    raise NoMatch("the mean is not of a square")


def _match_decomposed(anchor: Call, product: Operation | None = None) -> _Norm:
    source, rstd_ops = _rstd_source(anchor)
    x32, eps, mean_ops = _mean_of_square(source)
    rstd = anchor.result
    normed = only_user(rstd)
    one = call(normed, *MUL)
    if one is not None and any(
        v is rstd and scalar_of(c) == 1 for v, c in commutative_operands(one)
    ):
        # `1.0 / sqrt(v)` traces as `reciprocal(sqrt(v)) * 1.0`: an exact identity.
        rstd_ops.append(one.op)
        rstd = one.result
        normed = only_user(rstd)
    scale = call(normed, *MUL)
    if scale is None or x32 not in (scale.arg(0), scale.arg(1)):
        raise NoMatch("the rstd does not scale the normalized value")
    if scale.arg(0) is scale.arg(1):
        raise NoMatch("the rstd scales itself")
    if _is_centered(x32):
        raise NoMatch("a LayerNorm: the normalized value is x - mean(x)")
    ops = [*mean_ops, *rstd_ops, scale.op]
    x = x32
    cast_in = as_cast(x32)
    if cast_in is not None:
        x = cast_in[0]
        ops.insert(0, x32.owner)  # type: ignore[arg-type]
    norm = _Norm(x=x, weight=None, eps=eps, out=scale.result, ops=ops)
    _match_weight(norm, product)
    return norm


def _is_centered(value: SSAValue) -> bool:
    """Whether `value` is `x - mean(x, -1, keepdim)`: what a LayerNorm normalizes (Cohere's, once
    cse-pure has made its two `x - mean` one value, reads as an RMSNorm of that difference)."""
    sub = producer(value, SUB_TENSOR)
    if sub is None or sub.arg(2, "alpha", 1) != 1:
        return False
    mean = producer(sub.arg(1, "other"), MEAN_DIM)
    return mean is not None and mean.arg(0) is sub.arg(0)


def _normalized(norm: _Norm) -> tuple[SSAValue, Operation | None]:
    """The normalized value the weight multiplies: the norm's output, or its cast when that
    cast is its only user (and the cast)."""
    value = norm.out
    user = only_user(value)
    cast = as_cast(user.results[0]) if user is not None and user.results else None
    if cast is not None and cast[0] is value:
        return user.results[0], user  # type: ignore[union-attr]
    return value, None


def _weight_products(norm: _Norm, order: dict[Operation, float]) -> list[Operation]:
    """The users of the normalized value that multiply it by a weight, in program order: more
    than one where several norms share one input and one normalization (cse-pure merged their
    identical chains), each with its own weight."""
    value, _ = _normalized(norm)
    found = []
    for user in users(value):
        product = call(user, MUL_TENSOR)
        if product is not None and any(
            base is value and _weight_of(norm, other, record=False)
            for base, other in commutative_operands(product)
        ):
            found.append(user)
    return sorted(found, key=lambda o: order.get(o, len(order)))


def _match_weight(norm: _Norm, product_user: Operation | None = None) -> None:
    """Extend a matched normalization by its weight product (the only user of the normalized
    value, or `product_user`, one of several) and output cast."""
    value, cast_op = _normalized(norm)
    cast = None
    if cast_op is not None:
        norm.ops.append(cast_op)
        cast = as_cast(value)
    user = only_user(value) if product_user is None else product_user
    product = call(user, MUL_TENSOR)
    if product is not None:
        for base, other in commutative_operands(product):
            if base is value and _weight_of(norm, other):
                norm.ops.append(product.op)
                value = product.result
                break
    if cast is None:
        user = only_user(value)
        late_cast = as_cast(user.results[0]) if user is not None and user.results else None
        if late_cast is not None and late_cast[0] is value and norm.weight is not None:
            norm.ops.append(user)  # type: ignore[arg-type]
            value = user.results[0]  # type: ignore[union-attr]
    norm.out = value


def _weight_of(norm: _Norm, value: object, record: bool = True) -> bool:
    """Whether `value` is the norm's weight (a 1-D tensor of the hidden size), maybe cast, maybe
    Gemma's `1 + w`; records it on `norm`. The offset is the norm's `weight_offset` only when it
    is added in f32 (as the kernels add it); `1 + w` added in a narrower dtype rounds the sum,
    so that sum itself is the weight (the add stays outside, computing it)."""
    if not isinstance(value, SSAValue) or rank(value) != 1:
        return False
    ops: list[Operation] = []
    offset = 0.0
    plus = producer(value, *ADD)
    if plus is not None and tensor_type(value).dtype != f32:  # type: ignore[union-attr]
        plus = None
    if plus is not None:
        for w, one in commutative_operands(plus):
            if scalar_of(one) == 1 and isinstance(w, SSAValue) and plus.arg(2, "alpha", 1) == 1:
                ops.append(plus.op)
                value, offset = w, 1.0
                break
        else:
            return False
    cast = as_cast(value)
    if cast is not None and only_user(value) is not None:
        ops.insert(0, value.owner)  # type: ignore[arg-type]
        value = cast[0]
    hidden = tensor_type(norm.x).dims[-1]  # type: ignore[union-attr]
    if tensor_type(value).dims != (hidden,):  # type: ignore[union-attr]
        return False
    if not record:
        return True
    norm.weight, norm.weight_offset = value, offset
    norm.ops.extend(ops)
    return True


def _match_residual(norm: _Norm) -> None:
    """Extend a norm by the residual add that feeds it, in the model dtype or in f32."""
    add = producer(norm.x, ADD_TENSOR)
    if add is None or add.arg(2, "alpha", 1) != 1 or len(add.args) < 2:
        return
    if is_rotation_sum(add):
        return  # a q/k norm after RoPE (HunYuan): the sum is the rotation, not a residual
    a, b = add.arg(0), add.arg(1)
    x_type = tensor_type(norm.x)
    if tensor_type(a) != x_type or tensor_type(b) != x_type:
        return
    cast_a, cast_b = as_cast(a), as_cast(b)
    if (
        x_type.dtype == f32
        and cast_a is not None
        and cast_b is not None
        and tensor_type(cast_a[0]) == tensor_type(cast_b[0])
    ):
        # vLLM: x.float() + residual.float(); the new residual is the sum rounded back (or
        # nothing, in the last layer, where that residual is dead). A cast that other code
        # reads too (one residual added to several norms, merged by cse-pure) stays for it: the
        # chain takes its own copy (`raise_chain`).
        # The new residual is the sum rounded back to the inputs' dtype where the model rounds
        # it (the f32 sum's other readers, another norm of the same sum, keep the f32 add: the
        # chain takes its own copy); the f32 sum itself only where nothing rounds it.
        back = [u for u in users(norm.x) if (c := as_cast(u.results[0])) and c[0] is norm.x
                and u.results[0].type == tensor_type(cast_a[0])]
        norm.ops[:0] = [a.owner, b.owner, add.op]  # type: ignore[list-item]
        norm.residual_out = norm.x
        if back:
            norm.ops.append(back[0])
            norm.residual_out = back[0].results[0]
        norm.x, norm.residual = cast_a[0], cast_b[0]
        return
    # The model's own add (Hugging Face: `hidden = residual + hidden`): the norm reads the sum
    # as rounded to the add's dtype, which differs from the f32 sum unless that dtype is f32.
    norm.ops.insert(0, add.op)
    norm.residual_out = norm.x
    norm.round_sum = x_type.dtype != f32
    norm.x, norm.residual = a, b


def _match_whole(found: Call) -> _Norm:
    if found.target.startswith("irfuse::"):
        eps = found.arg(2 if found.target == IRFUSE_RMS_NORM else 3, "eps")
        offset = found.arg(3 if found.target == IRFUSE_RMS_NORM else 4,
                           "weight_offset", 0.0)
        if found.target == IRFUSE_RMS_NORM:
            return _Norm(found.arg(0), found.arg(1), eps, found.result, [found.op],
                         weight_offset=offset)
        out, residual_out = found.op.results
        return _Norm(found.arg(0), found.arg(2), eps, out, [found.op], weight_offset=offset,
                     residual=found.arg(1), residual_out=residual_out)
    x = found.arg(0)
    shape = found.arg(1, "normalized_shape")
    if not isinstance(shape, list) or len(shape) != 1:
        raise NoMatch(f"rms_norm over {shape}: only the last dim is an RMSNorm irfuse fuses")
    eps = found.arg(3, "eps")
    if eps is None:
        eps = _DTYPE_EPS.get(str(tensor_type(x).dtype))
    if found.target == FUSED_RMS_NORM and found.op.results[1].uses:
        raise NoMatch("the rstd of _fused_rms_norm is used")
    return _Norm(x, found.arg(2, "weight"), float(eps), found.op.results[0], [found.op])


def _raise(norm: _Norm, block_order: dict[Operation, int]) -> Operation:
    norm.ops.sort(key=lambda o: block_order[o])
    if norm.residual is not None:
        assert norm.residual_out is not None
        raised: Operation = AddRmsNormOp(
            norm.x,
            norm.residual,
            norm.weight,
            eps=norm.eps,
            weight_offset=norm.weight_offset,
            round_sum=norm.round_sum,
            result_types=(norm.out.type, norm.residual_out.type),
        )
        outputs = [norm.out, norm.residual_out]
    else:
        raised = RmsNormOp(
            norm.x, norm.weight, eps=norm.eps, weight_offset=norm.weight_offset,
            result_type=norm.out.type,
        )
        outputs = [norm.out]
    raise_chain(raised, norm.ops, outputs, "norm")
    return raised


class RmsNormPattern(CallPattern):
    """An RMSNorm anchored at its reciprocal square root, or a whole norm op."""

    targets = (RSQRT, RECIPROCAL, *DIV, *WHOLE_OPS)
    remark = "not an RMSNorm"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        if found.target in DIV and producer(found.arg(1), SQRT) is None:
            return NO_CANDIDATE
        if found.target == RECIPROCAL and producer(found.arg(0), SQRT) is None:
            return NO_CANDIDATE
        if found.target not in WHOLE_OPS:
            # Several norms of one input, each with its own weight, normalize once after
            # cse-pure: one norm per weight product (each takes its own copy of the shared
            # normalization), then the rest as one norm.
            while True:
                norm = _match_decomposed(found)
                products = _weight_products(norm, site.order)
                if norm.weight is not None or not products or len(
                        users(_normalized(norm)[0])) < 2:
                    break
                norm = _match_decomposed(found, products[0])
                _match_residual(norm)
                _raise(norm, site.order)
        else:
            norm = _match_whole(found)
        if norm.residual is None and not found.target.startswith("irfuse::"):
            _match_residual(norm)
        _raise(norm, site.order)
        return REWROTE


class RaiseRmsNorm(PatternPass):
    """Raise RMSNorm (and residual add + RMSNorm) chains to `norm` ops. No options."""

    name = "raise-rms-norm"
    patterns = (RmsNormPattern(),)
