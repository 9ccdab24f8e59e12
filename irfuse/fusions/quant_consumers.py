"""What the norm/activation + quant fusions share: finding the quants that consume a value.

A producer (a norm, a SiLU·Mul) fuses with the quants of its output. Linear layers often flatten
the leading dims before quantizing (`view(-1, H)`), so a consumer is a quant of the value itself
or of such a flattening view. `quant_consumers` finds them, merges identical ones (same scheme,
scale operands, fp8 dtype and `divide` / `reciprocal` spelling: CSE restricted to quants, so that one kernel
writes each output once) and says why a value cannot fuse when it has other users.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import IntAttr
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects import aten
from irfuse.dialects.irfuse import Dim, TensorType, tensor_type
from irfuse.dialects.quant import QuantFp8Op, QuantNvfp4Op
from irfuse.ir import call_args
from irfuse.raising.aten_ops import (
    FLATTEN_USING_INTS,
    RESHAPE_AS,
    RESHAPES,
)
from irfuse.raising.match import NoMatch, call, users
from irfuse.raising.raise_quant import quant_op_scheme, support_matrix_scheme


def divides(quant: Operation) -> bool:
    """Whether a quant scales by `x / s` (its unit property `divide`) rather than `x * (1 / s)`."""
    return quant.properties.get("divide") is not None


def reciprocates(quant: Operation) -> bool:
    """Whether a dynamic quant scales by `x * (1 / s)` (its unit property `reciprocal`) rather
    than `x / s`."""
    return quant.properties.get("reciprocal") is not None


def scheme_name(quant: Operation) -> str:
    """The support-matrix name of a quant op's scheme (`fp8-static-tensor`, `nvfp4`, ...), what
    `Site.require_scheme` judges a site by."""
    return support_matrix_scheme(quant_op_scheme(quant))


@dataclass
class Consumer:
    """A quant of a value, maybe through a view that flattens the value's leading dims."""

    quant: QuantFp8Op | QuantNvfp4Op
    view: aten.CallOp | None

    def key(self) -> tuple:
        q = self.quant
        operands = tuple(q.operands[1:])
        scheme = getattr(q, "scheme", None)
        view = None if self.view is None else (self.view.template, tuple(self.view.operands[1:]))
        return (q.name, scheme, divides(q), reciprocates(q), operands, q.results[0].type, view)


def _flattens(value: SSAValue, view: aten.CallOp) -> bool:
    """`view` reshapes `value` [..., H] to [N, H] (same last dim, rank 2)."""
    src, dst = value.type, view.results[0].type
    return (
        isinstance(src, TensorType)
        and isinstance(dst, TensorType)
        and dst.rank == 2
        and src.rank >= 2
        and src.dims[-1] == dst.dims[-1]
        and src.dtype == dst.dtype
    )


def quant_consumers(value: SSAValue, order: dict[Operation, int]) -> list[Consumer]:
    """The quants consuming `value`, in program order (`order`: the block's op positions; a
    value's use list is in no stable order, and the fused op's outputs follow this one, so the
    same IR always fuses the same way); [] when none does (the value is not a candidate).

    Raises NoMatch when some user of `value` is not a quant: the unquantized value is then still
    needed, and fusing would compute the norm or activation twice.
    """
    found: list[Consumer] = []
    others: list[str] = []
    for user in users(value):
        if isinstance(user, QuantFp8Op | QuantNvfp4Op) and user.x is value:
            found.append(Consumer(user, None))
            continue
        view = call(user, *RESHAPES)
        if view is not None and _flattens(value, user):  # type: ignore[arg-type]
            inner = users(view.result)
            quants = [q for q in inner if isinstance(q, QuantFp8Op | QuantNvfp4Op)]
            if quants and len(quants) == len(inner):
                found.extend(Consumer(q, user) for q in quants)  # type: ignore[arg-type]
                continue
        others.append(user.name if not isinstance(user, aten.CallOp) else user.target.data)
    if found and others:
        raise NoMatch(
            f"its output is also used unquantized (by {', '.join(sorted(set(others)))}), "
            "so the fused kernel would not replace it"
        )
    found.sort(key=lambda c: order.get(c.quant, len(order)))
    return found


def merge_identical(consumers: list[Consumer], rewriter: PatternRewriter) -> list[Consumer]:
    """Replace quants identical to an earlier one by it; return the distinct consumers."""
    distinct: dict[tuple, Consumer] = {}
    for consumer in consumers:
        first = distinct.setdefault(consumer.key(), consumer)
        if first is consumer:
            continue
        for old, new in zip(consumer.quant.results, first.quant.results, strict=True):
            rewriter.replace_all_uses_with(old, new)
        rewriter.erase(consumer.quant)
        if consumer.view is not None and consumer.view is not first.view:
            if not consumer.view.results[0].uses:
                rewriter.erase(consumer.view)
    return list(distinct.values())


def flatten_leading(value: SSAValue, rows: Dim, before: Operation,
                    rewriter: PatternRewriter) -> SSAValue:
    """`value` [..., H] flattened to [rows, H] (inserted before `before`), the input-side twin
    of the `view(-1, H)` a linear layer applies to its input."""
    src = value.type
    assert isinstance(src, TensorType)
    new = aten.CallOp(
        FLATTEN_USING_INTS,
        [value],
        [call_args.OperandRefAttr(IntAttr(0)), IntAttr(0), IntAttr(src.rank - 2)],
        [tensor_type((rows, src.dims[-1]), src.dtype)],
    )
    rewriter.insert(new, InsertPoint.before(before))
    return new.results[0]


def reshape_as(value: SSAValue, like: SSAValue, before: Operation,
               rewriter: PatternRewriter) -> SSAValue:
    """`value` reshaped back to the shape of `like` (inserted before `before`)."""
    like_type = like.type
    assert isinstance(like_type, TensorType)
    src = value.type
    assert isinstance(src, TensorType)
    new = aten.CallOp(
        RESHAPE_AS,
        [value, like],
        [call_args.OperandRefAttr(IntAttr(0)), call_args.OperandRefAttr(IntAttr(1))],
        [tensor_type(like_type.dims, src.dtype)],
    )
    rewriter.insert(new, InsertPoint.before(before))
    return new.results[0]
