"""Which value a view of a rebuilt buffer reads back: the piece written there.

An op vLLM calls in place on views of one buffer (`_C.rotary_embedding` or FlashInfer's rotary
on `q[..., nope:]` and on MLA's k_pe, a view of the kv projection) reaches the IR functionalized:
the buffer rebuilt by scattering each new piece into the old one (`as_strided_scatter`,
`slice_scatter`), then read again through the same views (`split`, `slice`, `unsqueeze`, ...).
`scattered_source(value)` finds, through those views and the scatters of other pieces, the piece
a view reads back when it covers exactly that piece's elements, so a fusion can see the rotated
k_pe that vLLM's cache write stores. Storage is described as (sizes, strides, offset) over the
rebuilt buffer's contiguous layout; only the leading (token) dim may be symbolic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from irfuse.raising import aten_ops
from irfuse.raising.match import Call, producer, tensor_type

VIEWS = (aten_ops.UNSQUEEZE, aten_ops.SQUEEZE_DIM, aten_ops.SQUEEZE_DIMS, aten_ops.SQUEEZE,
         aten_ops.ALIAS, aten_ops.SLICE_TENSOR, *aten_ops.SPLITS, *aten_ops.RESHAPES,
         aten_ops.AS_STRIDED)
"""The view ops followed from a read back up to the rebuilt buffer."""
SCATTERS = (aten_ops.AS_STRIDED_SCATTER, aten_ops.SLICE_SCATTER)


@dataclass(frozen=True)
class Region:
    """Elements of a buffer: `sizes` (ints, or a symbol for the leading dim) at `strides`
    from `offset`, in storage elements of the buffer's contiguous layout."""

    sizes: tuple[object, ...]
    strides: tuple[int, ...]
    offset: int

    def key(self) -> tuple[object, ...]:
        """What two regions of the same elements in the same order share (size-1 dims
        dropped)."""
        dims = tuple((n, s) for n, s in zip(self.sizes, self.strides, strict=True) if n != 1)
        return (dims, self.offset)

    def row_span(self) -> tuple[int, int, int] | None:
        """(row stride, first, end) of the elements each row of the leading dim covers."""
        if len(self.sizes) < 2 or not all(isinstance(n, int) for n in self.sizes[1:]):
            return None
        extent = sum((n - 1) * s for n, s in zip(self.sizes[1:], self.strides[1:], strict=True))
        return self.strides[0], self.offset, self.offset + extent + 1


def _contiguous(dims: tuple[object, ...]) -> Region | None:
    if not dims or not all(isinstance(n, int) for n in dims[1:]):
        return None
    strides, step = [], 1
    for n in reversed(dims):
        strides.append(step)
        step *= n if isinstance(n, int) else 1
    return Region(tuple(dims), tuple(reversed(strides)), 0)


def _view_strides(sizes: list[int], strides: list[int], new: list[int]) -> list[int] | None:
    """torch's rule for `view` (`computeStride`): the strides of shape `new` over the elements
    of (`sizes`, `strides`) in order, or None where it needs a copy."""
    if not sizes:
        return [1] * len(new) if all(n == 1 for n in new) else None
    out = [0] * len(new)
    view_d = len(new) - 1
    chunk_base = strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(sizes) - 1, -1, -1):
        tensor_numel *= sizes[d]
        if d == 0 or (sizes[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or new[view_d] == 1):
                out[view_d] = view_numel * chunk_base
                view_numel *= new[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base = strides[d - 1]
                tensor_numel = view_numel = 1
    return out if view_d == -1 else None


def _reshaped(r: Region, new: tuple[object, ...]) -> Region | None:
    """`r` viewed as shape `new`, its leading dim kept."""
    if not new or r.sizes[0] != new[0] or not all(isinstance(n, int) for n in new[1:]):
        return None
    tail = _view_strides(list(r.sizes[1:]), list(r.strides[1:]), list(new[1:]))  # type: ignore[arg-type]
    return None if tail is None else Region(tuple(new), (r.strides[0], *tail), r.offset)


def _apply(r: Region, found: Call, value: SSAValue) -> Region | None:
    """The region of `value`, made by the view `found` of a tensor of region `r`."""
    out = tensor_type(value)
    if out is None:
        return None
    target = found.target
    if target in (*aten_ops.RESHAPES, aten_ops.ALIAS, aten_ops.SQUEEZE, aten_ops.SQUEEZE_DIM,
                  aten_ops.SQUEEZE_DIMS, aten_ops.UNSQUEEZE):  # the same elements, reshaped
        return _reshaped(r, tuple(out.dims))
    if target == aten_ops.AS_STRIDED:
        stride, offset = found.arg(2, "stride"), found.arg(3, "storage_offset", 0)
        if r != _contiguous(r.sizes) or not all(isinstance(s, int) for s in stride) \
                or not isinstance(offset, int):
            return None
        return Region(tuple(out.dims), tuple(stride), offset)
    if target == aten_ops.SLICE_TENSOR:
        return _sliced(r, out.dims, found.arg(1, "dim", 0), found.arg(2, "start", 0),
                       found.arg(4, "step", 1))
    sizes, index = found.arg(1), value.index  # type: ignore[attr-defined]  # a split's piece
    if isinstance(sizes, int):
        start = index * sizes
    elif isinstance(sizes, list) and all(isinstance(n, int) for n in sizes):
        start = sum(sizes[:index])
    else:
        return None
    return _sliced(r, out.dims, found.arg(2, "dim", 0), start, 1)


def _sliced(r: Region, dims: Sequence[object], dim: object, start: object, step: object
            ) -> Region | None:
    """The region of `dims` that starts at `start` along `dim` of `r`, every `step`-th."""
    start = 0 if start is None else start
    if not all(isinstance(v, int) for v in (dim, start, step)) or start < 0:  # type: ignore[operator]
        return None
    dim %= len(r.sizes)  # type: ignore[operator]
    strides = list(r.strides)
    offset = r.offset + start * strides[dim]  # type: ignore[operator, index]
    strides[dim] *= step  # type: ignore[index, operator]
    return Region(tuple(dims), tuple(strides), offset)


def _region_of_scatter(found: Call) -> Region | None:
    """The region of the buffer a scatter writes its source into."""
    src = tensor_type(found.arg(1))
    acc = tensor_type(found.arg(0))
    if src is None or acc is None:
        return None
    if found.target == aten_ops.AS_STRIDED_SCATTER:
        stride, offset = found.arg(3, "stride"), found.arg(4, "storage_offset", 0)
        if not all(isinstance(s, int) for s in stride) or not isinstance(offset, int):
            return None
        return Region(tuple(src.dims), tuple(stride), offset)
    whole = _contiguous(tuple(acc.dims))  # slice_scatter(acc, src, dim, start, end, step)
    return None if whole is None else _sliced(whole, src.dims, found.arg(2, "dim", 0),
                                              found.arg(3, "start", 0), found.arg(5, "step", 1))


def scattered_source(value: SSAValue, path: list[Operation] | None = None,
                     straddled: list[SSAValue] | None = None) -> SSAValue | None:
    """The piece scattered into a rebuilt buffer that `value`, a view of that buffer, reads
    back, when the view covers exactly that piece's elements (scatters of pieces it does not
    touch are looked through); None otherwise. `path` collects the views passed, users first;
    `straddled`, where there is no such piece, the pieces the view reads part of (or may)."""
    straddled = [] if straddled is None else straddled
    views: list[tuple[Call, SSAValue]] = []
    while (found := producer(value, *VIEWS)) is not None:
        views.append((found, value))
        value = found.arg(0)
    scatter = producer(value, *SCATTERS)
    base_type = tensor_type(value)
    region = None if scatter is None or base_type is None else _contiguous(tuple(base_type.dims))
    for found, result in reversed(views):
        region = None if region is None else _apply(region, found, result)
    while scatter is not None and region is not None:
        written = _region_of_scatter(scatter)
        if written is not None and written.key() == region.key():
            if path is not None:
                path.extend(f.op for f, _ in views)
            return scatter.arg(1)
        mine = region.row_span()
        theirs = None if written is None else written.row_span()
        if mine is not None and theirs is not None and mine[0] == theirs[0] \
                and (mine[2] <= theirs[1] or theirs[2] <= mine[1]):  # another piece: past it
            scatter = producer(scatter.arg(0), *SCATTERS)
            continue
        # Inside a piece that is itself rebuilt (functionalization v1 scatters a sub-buffer):
        # the region in that piece's own layout, then its scatters; else a piece read in part.
        inner = None if written is None else _within(region, written, scatter.arg(1))
        if inner is None:
            straddled.append(scatter.arg(1))
            return None
        region, scatter = inner, producer(scatter.arg(1), *SCATTERS)
    return None


def _within(region: Region, written: Region, piece: SSAValue) -> Region | None:
    """`region` of a buffer in the coordinates of `piece`, the (contiguous) tensor written at
    `written`, where `written` is one dense run of each row holding all of `region`'s."""
    t = tensor_type(piece)
    own = None if t is None else _contiguous(tuple(t.dims))
    mine, theirs = region.row_span(), written.row_span()
    if own is None or mine is None or theirs is None or own.sizes != written.sizes \
            or own.strides[1:] != written.strides[1:] or own.strides[0] != theirs[2] - theirs[1] \
            or not theirs[1] <= mine[1] <= mine[2] <= theirs[2]:
        return None
    return Region(region.sizes, (own.strides[0], *region.strides[1:]),
                  region.offset - written.offset)
