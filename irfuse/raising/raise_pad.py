"""raise-pad: find constant padding of the last dim, however the model spells it.

Anchored at each candidate call (`PadPattern`): `F.pad`'s `constant_pad_nd` / `pad` of the last
dim (`_amounts`), x written into a new constant tensor by `slice_scatter` or by what aot_autograd
makes of `buf[..., lo:lo + H] = x` (`_scatter_pad`), and a last-dim `cat` of x with constant
tensors (`_cat_pad`). Produces `act.pad` with `low`, `high` and `value` (the constant; 0 for
zeros) as properties and the matched calls in its decomposition region.

Does not raise, with a remark: a pad of another dim than the last (vLLM's fusion pads the GEMM
input's hidden dim only), negative amounts (a crop), a mode other than constant, a value that is
not a number; a constant buffer that is written again after x (pieces assembled into it: MLA's
key, which raise-attention takes), or a write that casts or broadcasts x; a `cat` of constant
pieces of different values, or along another dim. A `cat` or `slice_scatter` that involves no
constant tensor is no pad attempt and leaves no remark.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from irfuse.dialects.act import PadOp
from irfuse.raising import aten_ops as aten
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, CallPattern, Outcome, PatternPass, Site
from irfuse.raising.match import (
    Call,
    NoMatch,
    call,
    normalize_dim,
    only_user,
    producer,
    raise_chain,
    strip_full_slices,
    tensor_type,
)

CONSTANT_MAKERS = (aten.NEW_ZEROS, aten.ZEROS, aten.FULL, aten.NEW_FULL)


class NotAPad(Exception):
    """A candidate that is no pad attempt at all (no constant tensor in it): no remark."""


def _amounts(found: Call) -> tuple[int, int, float]:
    """(low, high, value) of a last-dim constant pad: `aten.constant_pad_nd(x, pad, value)`
    (what `F.pad` with mode "constant" becomes) or `aten.pad(x, pad, "constant", value)`, whose
    pad list pads only the last dim: `[lo, hi]`, or `[lo, hi, 0, 0, ...]`."""
    x = found.arg(0)
    t = tensor_type(x)
    if t is None or t.rank == 0:
        raise NoMatch("the padded value is not a tensor of rank >= 1")
    pad = found.arg(1, "pad")
    if found.target == aten.PAD:
        mode = found.arg(2, "mode", "constant")
        if mode != "constant":
            raise NoMatch(f"pad mode {mode!r} is not a constant pad")
        value = found.arg(3, "value")
    else:
        value = found.arg(2, "value", 0)
    if not isinstance(pad, list) or len(pad) < 2 or len(pad) % 2:
        raise NoMatch(f"pad amounts {pad} are not (low, high) pairs")
    if not all(isinstance(p, int) for p in pad):
        raise NoMatch("pad amounts are not constants")
    other = [i for i, p in enumerate(pad[2:]) if p != 0]
    if other:
        dim = -2 - other[0] // 2
        raise NoMatch(f"pads dim {dim}, not only the last dim")
    low, high = pad[0], pad[1]
    if low < 0 or high < 0:
        raise NoMatch(f"negative pad amounts ({low}, {high}) crop")
    return low, high, _number(value)


def _number(value: object) -> float:
    value = 0.0 if value is None else value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NoMatch("the pad value is not a constant number")
    return float(value)


def _constant(value: object) -> tuple[Call, float] | None:
    """(maker, value) if `value` is a new tensor filled with one constant number."""
    made = producer(value, *CONSTANT_MAKERS)
    if made is None:
        return None
    if made.target == "aten::full.default":
        fill = made.arg(1, "fill_value")
    elif made.target == "aten::new_full.default":
        fill = made.arg(2, "fill_value")
    else:
        fill = 0.0
    if isinstance(fill, bool) or not isinstance(fill, int | float):
        return None
    return made, float(fill)


def _leading_dims_and_dtype_agree(x: SSAValue, other: SSAValue) -> bool:
    xt, ot = tensor_type(x), tensor_type(other)
    return (xt is not None and ot is not None and xt.rank == ot.rank and xt.rank >= 1
            and xt.dims[:-1] == ot.dims[:-1] and xt.dtype == ot.dtype)


def _last_dim_range(found: Call, first: int, size: int) -> tuple[int, int] | None:
    """(start, stop) of a step-1 slice / slice_scatter of the last dim (dim, start, end, step
    from argument `first` on), clamped as torch clamps them; None for another dim."""
    t = tensor_type(found.arg(0))
    dim = found.arg(first, "dim", 0)
    start, end = found.arg(first + 1, "start"), found.arg(first + 2, "end")
    if t is None or not isinstance(dim, int) or normalize_dim(dim, t.rank) != t.rank - 1:
        return None
    if found.arg(first + 3, "step", 1) != 1:
        return None
    start = 0 if start is None else start
    end = size if end is None else end
    if not isinstance(start, int) or not isinstance(end, int):
        return None
    start = max(0, min(start + size if start < 0 else start, size))
    return start, max(start, min(end + size if end < 0 else end, size))


def _scatter_pad(scatter: Call) -> tuple[SSAValue, int, int, float, list[Operation], SSAValue]:
    """(x, low, high, value, ops, result) for x written into a new constant tensor:
    `slice_scatter(buf, x, -1, lo, lo + H)` into `buf` (`new_zeros`, `zeros`, `full`,
    `new_full`) of x's leading dims and dtype, `torch.slice_scatter` itself or what aot_autograd
    makes of `buf[..., lo:lo + H] = x` / `.copy_(x)` (the write through a `slice` and a `copy`
    that neither casts nor broadcasts, and through the full slices and scatters that
    `buf[:, :H]` adds on the other dims)."""
    base = scatter.arg(0)
    buffer, skipped = strip_full_slices(base)
    constant = _constant(buffer)
    if constant is None:
        raise NotAPad
    maker, value = constant
    bt = tensor_type(buffer)
    if bt is None or not isinstance(bt.dims[-1], int):
        raise NoMatch("the buffer's last dim is not a constant size")
    width = bt.dims[-1]
    span = _last_dim_range(scatter, 2, width)
    if span is None:
        raise NoMatch("x is not written along the buffer's last dim (step 1)")
    src = scatter.arg(1, "src")
    ops: list[Operation] = [maker.op, *skipped]
    copy = producer(src, aten.COPY)
    x = src
    if copy is not None:
        target = producer(copy.arg(0), aten.SLICE_TENSOR)
        if target is None or target.arg(0) is not base or _last_dim_range(target, 1, width) != span:
            raise NoMatch("the copy does not write the slice that is scattered back")
        x = copy.arg(1, "src")
        if tensor_type(x) != tensor_type(copy.result):
            raise NoMatch("the write casts or broadcasts x")
        ops += [target.op, copy.op]
    if not _leading_dims_and_dtype_agree(x, buffer):
        raise NoMatch("x and the buffer differ in their leading dims or dtype")
    size = tensor_type(x).dims[-1]  # type: ignore[union-attr]
    if not isinstance(size, int) or span[1] - span[0] != size:
        raise NoMatch("x does not fill the written range")
    ops.append(scatter.op)
    result = scatter.result
    # `buf[:, :H] = x` scatters back through the full slices it took: each one's scatter joins.
    for sliced in reversed(skipped):
        outer = call(only_user(result), aten.SLICE_SCATTER)
        inner = call(sliced)
        assert inner is not None
        if (outer is None or outer.arg(0) is not inner.arg(0) or outer.arg(1, "src") is not result
                or list(outer.args[2:]) != list(inner.args[1:])):
            raise NoMatch("the full slices of the buffer are not scattered back")
        ops.append(outer.op)
        result = outer.result
    if any(call(use.operation, aten.SLICE_SCATTER) is not None and use.index == 0
           for use in result.uses):
        raise NoMatch("the buffer is written again after x (pieces assembled into it)")
    return x, span[0], width - span[1], value, ops, result


def _cat_pad(cat: Call) -> tuple[SSAValue, int, int, float, list[Operation], SSAValue]:
    """(x, low, high, value, ops, result) for cat([constants..., x, constants...], -1): constant
    tensors of one value (x's leading dims and dtype) before x (low) and after it (high)."""
    pieces = cat.arg(0)
    if not isinstance(pieces, list) or len(pieces) < 2:
        raise NotAPad
    constants = [_constant(p) for p in pieces]
    if all(c is None for c in constants) or sum(c is None for c in constants) != 1:
        raise NotAPad  # no constant (an assembly of values), or nothing but constants
    t = tensor_type(cat.result)
    dim = cat.arg(1, "dim", 0)
    if t is None or not isinstance(dim, int) or normalize_dim(dim, t.rank) != t.rank - 1:
        raise NoMatch(f"concatenates along dim {dim}, not the last dim")
    index = next(i for i, c in enumerate(constants) if c is None)
    x = pieces[index]
    values = {c[1] for c in constants if c is not None}
    if len(values) != 1:
        raise NoMatch(f"the constant pieces hold different values {sorted(values)}")
    low = high = 0
    ops: list[Operation] = []
    for i, (piece, c) in enumerate(zip(pieces, constants, strict=True)):
        if c is None:
            continue
        pt = tensor_type(piece)
        if not _leading_dims_and_dtype_agree(x, piece) or not isinstance(pt.dims[-1], int):  # type: ignore[union-attr]
            raise NoMatch("a constant piece differs from x in its leading dims or dtype")
        if i < index:
            low += pt.dims[-1]  # type: ignore[union-attr]
        else:
            high += pt.dims[-1]  # type: ignore[union-attr]
        ops.append(c[0].op)
    return x, low, high, values.pop(), [*dict.fromkeys(ops), cat.op], cat.result


def _raise(found: Call, order: dict[Operation, float]) -> Operation:
    if found.target in (aten.CONSTANT_PAD_ND, aten.PAD):
        low, high, value = _amounts(found)
        x, ops, result = found.arg(0), [found.op], found.result
    else:
        x, low, high, value, ops, result = (_scatter_pad if found.target == aten.SLICE_SCATTER
                                            else _cat_pad)(found)
        ops = sorted(ops, key=order.__getitem__)
    raised = PadOp(x, low=low, high=high, value=value, result_type=result.type)
    raise_chain(raised, ops, [result], "pad", verify=True)
    return raised


class PadPattern(CallPattern):
    """A constant pad of the last dim, anchored at its pad, scatter or cat:

    ```mlir
    %b = aten.call "aten::new_zeros.default"(%x, [%s0, 3072])        // or zeros / full / new_full
    %t = aten.call "aten::slice.Tensor"(%b, 1, 0, 2880)
    %c = aten.call "aten::copy.default"(%t, %x)                      // buf[..., :2880] = x
    %p = aten.call "aten::slice_scatter.default"(%b, %c, 1, 0, 2880)
      ->
    %p = act.pad %x {low = 0 : i64, high = 192 : i64} decomposition { (the four calls) }
    ```
    """

    targets = (aten.CONSTANT_PAD_ND, aten.PAD, aten.SLICE_SCATTER, aten.CAT)
    remark = "not a last-dim pad"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        try:
            _raise(found, site.order)
        except NotAPad:
            return NO_CANDIDATE
        return REWROTE


class RaisePad(PatternPass):
    """Raise last-dim constant pads to `act.pad`. No options."""

    name = "raise-pad"
    patterns = (PadPattern(),)
