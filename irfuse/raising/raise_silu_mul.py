"""raise-silu-mul: the gated activations `silu(gate) * up` and `gelu(gate) * up`, however they
are spelled.

Anchored at the SiLU (`aten.silu`, the sigmoid of `a * sigmoid(a)`, the exp of Inductor's
decomposition `a / (1 + exp(-a))`, computed in f32 between casts where `a` is bf16 or f16, which
is what vLLM's post-grad graphs hold, or `irfuse::silu_mul`), or at the GELU of GeGLU
(`aten.gelu`, its `approximate` "tanh" or "none" giving the activation gelu_tanh or gelu).
Produces `act.silu_mul %x` when gate and up are the two halves of one tensor (slices, `chunk`,
`split`: vLLM's fused gate_up projection), else `act.silu_mul %gate, up %up` (Hugging Face's MLP),
with `activation` naming a GELU. The matched ops stay in the decomposition region (no result bit
changes). A product with a tensor of another shape or dtype is left alone with a remark.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from irfuse.dialects.act import SiluMulOp
from irfuse.raising.aten_ops import (
    ADD,
    CASTS,
    DIV_TENSOR,
    EXP,
    GELU,
    IRFUSE_SILU_MUL,
    MUL_TENSOR,
    NEG,
    SIGMOID,
    SILU,
)
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, CallPattern, Outcome, PatternPass, Site
from irfuse.raising.match import (
    Call,
    NoMatch,
    call,
    commutative_operands,
    last_dim_piece,
    only_user,
    producer,
    raise_chain,
    same_value,
    scalar_of,
    strip_casts,
    tensor_type,
)

ANCHORS = (SILU, SIGMOID, EXP, GELU, IRFUSE_SILU_MUL)


@dataclass
class _SiluMul:
    """A matched SiLU·Mul: gate (or the whole `[gate | up]`), up, the product, the ops."""

    x: SSAValue
    up: SSAValue | None
    out: SSAValue
    ops: list[Operation] = field(default_factory=list)
    activation: str = "silu"


GELU_APPROXIMATE = {"tanh": "gelu_tanh", "none": "gelu"}
"""`aten.gelu`'s `approximate` -> the gate activation."""


def _silu_of(anchor: Call) -> tuple[SSAValue, SSAValue, list[Operation]]:
    """(a, act(a), ops) for an activation anchor: `silu(a)`, `a * sigmoid(a)` or `gelu(a)`."""
    a = anchor.arg(0)
    if not isinstance(a, SSAValue):
        raise NoMatch("the SiLU's input is not a tensor")
    if anchor.target in (SILU, GELU):
        return a, anchor.result, [anchor.op]
    if anchor.target == EXP:
        found = _exp_silu(anchor)
        if found is None:
            raise NoMatch("exp is not the one of a / (1 + exp(-a)) (not a SiLU)")
        return found
    product = call(only_user(anchor.result), MUL_TENSOR)
    twin = None if product is None else _other_factor(product, anchor.result)
    if twin is None or not same_value(twin, a):
        raise NoMatch("sigmoid(a) is not multiplied by a (not a SiLU)")
    ops = [anchor.op, product.op]
    if twin is not a and only_user(twin) is product.op:
        ops.insert(0, twin.owner)  # a recomputed (`x[..., :d] * sigmoid(x[..., :d])`)
    return a, product.result, ops


def _halves(a: SSAValue, b: SSAValue) -> tuple[SSAValue, list[Operation]] | None:
    """x and the slicing ops if a and b are the first and second half of x's last dim."""
    pa, pb = last_dim_piece(a), last_dim_piece(b)
    if pa is None or pb is None or pa.source is not pb.source:
        return None
    size = tensor_type(pa.source).dims[-1]  # type: ignore[union-attr]
    half = size // 2
    if size % 2 or (pa.start, pa.stop, pb.start, pb.stop) != (0, half, half, size):
        return None
    ops = list(dict.fromkeys([*pa.ops, *pb.ops]))
    return pa.source, ops


def _match(anchor: Call) -> _SiluMul:
    if anchor.target == IRFUSE_SILU_MUL:
        return _SiluMul(anchor.arg(0), None, anchor.result, [anchor.op])
    a, silu, ops = _silu_of(anchor)
    activation = _activation(anchor)
    users = list(dict.fromkeys(use.operation for use in silu.uses))
    products = [p for u in users if (p := call(u, MUL_TENSOR)) is not None]
    if not products:
        names = sorted({found.target if (found := call(u)) else u.name for u in users})
        what = ", ".join(names) or "nothing"
        raise NoMatch(f"the SiLU's output goes to {what}, not to a product (an ungated SiLU)")
    # The SiLU's other users (a second product, anything else) keep the original: raise_chain
    # clones the SiLU into the region when it is shared.
    miss: NoMatch | None = None
    for product in products:
        try:
            b = _up_of(product, silu, a, "SiLU" if activation == "silu" else "GELU")
        except NoMatch as err:
            miss = miss or err
            continue
        break
    else:
        assert miss is not None
        raise miss
    found = _SiluMul(a, b, product.result, [*ops, product.op], activation)
    halves = _halves(a, b)
    if halves is not None:
        x, slicing = halves
        if _only_used_by(slicing, set(found.ops) | set(slicing)):
            found.x, found.up = x, None
            found.ops[:0] = slicing
    return found


def _up_of(product: Call, silu: SSAValue, a: SSAValue, what: str = "SiLU") -> SSAValue:
    """The `up` of `silu * up` (`what`: the activation's name in remarks): a tensor of a's type
    other than the activation itself."""
    for left, b in commutative_operands(product):
        if left is silu and isinstance(b, SSAValue) and b is not silu:
            break
    else:
        raise NoMatch(f"the {what} is multiplied by a scalar or by itself")
    a_type, b_type = tensor_type(a), tensor_type(b)
    if b_type != a_type or tensor_type(product.result) != a_type:
        raise NoMatch(f"the {what} output ({a_type}) is multiplied by {b_type}: not gate and up "
                      "of one shape and dtype")
    return b


def _only_used_by(ops: list[Operation], inside: set[Operation]) -> bool:
    return all(use.operation in inside for op in ops for r in op.results for use in r.uses)


def _raise(found: _SiluMul, order: dict[Operation, int]) -> Operation:
    found.ops.sort(key=lambda o: order[o])
    raised = SiluMulOp(found.x, found.up, result_type=found.out.type,
                       activation=found.activation)
    raise_chain(raised, found.ops, [found.out], "SiLU·Mul" if found.activation == "silu"
                else "GeGLU")
    return raised


class SiluMulPattern(CallPattern):
    """A SiLU·Mul anchored at its SiLU (or the sigmoid of a decomposed one), or a GeGLU at its
    GELU."""

    targets = ANCHORS
    remark = "not a gated activation"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        if found.target == SIGMOID and not _is_silu_sigmoid(found):
            return NO_CANDIDATE
        if found.target == EXP and _exp_silu(found) is None:
            return NO_CANDIDATE
        if found.target == GELU and not any(call(u.operation, MUL_TENSOR)
                                            for u in found.result.uses):
            return NO_CANDIDATE  # an ungated GELU (a GPT-style MLP): no candidate, no remark
        _raise(_match(found), site.order)
        return REWROTE


class RaiseSiluMul(PatternPass):
    """Raise SiLU·Mul and GeGLU chains (and `irfuse::silu_mul`) to `act.silu_mul`. No
    options."""

    name = "raise-silu-mul"
    patterns = (SiluMulPattern(),)


def _activation(anchor: Call) -> str:
    """The gate activation of an anchor: silu, or the GELU its `approximate` names."""
    if anchor.target != GELU:
        return "silu"
    approximate = anchor.arg(1, "approximate", "none")
    if approximate not in GELU_APPROXIMATE:
        raise NoMatch(f"GELU with approximate={approximate!r} (not 'none' or 'tanh')")
    return GELU_APPROXIMATE[approximate]


def _is_silu_sigmoid(found: Call) -> bool:
    """Whether a sigmoid is the one of a decomposed SiLU, `a * sigmoid(a)` (other sigmoids are
    no candidates and leave no remark)."""
    product = call(only_user(found.result), MUL_TENSOR)
    twin = None if product is None else _other_factor(product, found.result)
    return twin is not None and same_value(twin, found.arg(0))


def _other_factor(product: Call, factor: SSAValue) -> SSAValue | None:
    """y if `product` is `factor * y` or `y * factor` with y a tensor."""
    for x, y in commutative_operands(product):
        if x is factor and isinstance(y, SSAValue) and y is not factor:
            return y
    return None


def _exp_silu(exp: Call) -> tuple[SSAValue, SSAValue, list[Operation]] | None:
    """(a, silu(a), ops) if `exp` is the one of `a / (1 + exp(-a))` (Inductor's decomposition of
    SiLU), with `a` and the result maybe cast to f32 and back (one cast each way); else None."""
    neg = producer(exp.arg(0), NEG)
    one = call(only_user(exp.result), *ADD)
    if neg is None or one is None or only_user(neg.result) is not exp.op:
        return None
    if not any(x is exp.result and scalar_of(y) == 1 for x, y in commutative_operands(one)):
        return None
    div = call(only_user(one.result), DIV_TENSOR)
    a32 = neg.arg(0)
    if div is None or div.arg(1) is not one.result or div.arg(0) is not a32:
        return None
    ops = [neg.op, exp.op, one.op, div.op]
    a, casts = strip_casts(a32)
    if len(casts) > 1 or tensor_type(a) is None:
        return None
    result = div.result
    if casts:
        back = call(only_user(result), *CASTS)
        if back is None or tensor_type(back.result) != tensor_type(a):
            return None
        if any(use.operation not in (neg.op, div.op) for use in a32.uses):
            return None
        ops = [casts[0].op, *ops, back.op]
        result = back.result
    return a, result, ops
