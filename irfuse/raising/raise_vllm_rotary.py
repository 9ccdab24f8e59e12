"""vLLM's rotary ops raised to `attn.rope` (raise-vllm-ops): `_C.rotary_embedding`, FlashInfer's
rotary (float32 cache, rotated in float32) and the multimodal rope of Qwen2/2.5/3-VL, ROCm's
`vllm.mrope` and CUDA's Triton kernel (a user-kernel call, read by its parameter names).

vLLM rotates q and k in place, often views of one qkv buffer: the raised rope reads
`[T, heads, head_size]` views of them, its region keeps vLLM's call, and the values the graph
used afterwards (the new q and k, or the new base) are rebuilt from the rope's results, so that
every reader sees the same bits. A multimodal rope keeps its positions `[3, T]` (or the tables
at them) and its sections (`mrope_section`): the fused kernels pick each channel's row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import StringAttr, f32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects.attn import RopeOp
from irfuse.dialects.irfuse import TensorType
from irfuse.ir.shapes import mul_dim
from irfuse.raising import user_kernels
from irfuse.raising.aten_ops import (
    AS_STRIDED_SCATTER,
    CLONE,
    FLATTEN_USING_INTS,
    INDEX_TENSOR,
    SLICE_SCATTER,
    TRITON_KERNEL_WRAPPER_FUNCTIONAL,
    UNFLATTEN_INT,
    VLLM_FLASHINFER_ROTARY_EMBEDDING,
    VLLM_MROPE,
    VLLM_ROTARY_EMBEDDING,
    VLLM_TRITON_MROPE,
)
from irfuse.raising.driver import (
    NO_CANDIDATE,
    REWROTE,
    AnchorPattern,
    Outcome,
    Site,
)
from irfuse.raising.match import (
    Call,
    NoMatch,
    call,
    discard,
    last_dim_piece,
    producer,
    raise_chain,
    size_matches,
    tensor_type,
)
from irfuse.raising.user_kernels import KERNEL_ATTR
from irfuse.raising.vllm_functionalized import (
    Functionalized,
    View,
    aten_call,
    constant_arg,
    float_input,
    tensor_arg,
    view_ops,
)

ROTARY_CACHE_DTYPES: dict[str, Attribute | None] = {
    VLLM_ROTARY_EMBEDDING: None,
    VLLM_FLASHINFER_ROTARY_EMBEDDING: f32,
}
"""vLLM's rotary ops (`rotary_embedding(positions, query, key, head_size, cos_sin_cache,
is_neox)`, one meaning: `attn.rope`) -> the cos_sin_cache dtype raised (None: q's). `_C`'s
kernel rotates in the model dtype, its cache cast to it (`_match_cos_sin_cache_dtype`);
FlashInfer's (`vllm.flashinfer_rotary_embedding`, DeepSeek's YaRN rope on CUDA) refuses a cache
other than float32 and rotates in float32 (ROTATES_IN_F32)."""


ROTATES_IN_F32 = (VLLM_FLASHINFER_ROTARY_EMBEDDING,)
"""vLLM's rotary ops whose kernel reads q, k and the cache as float32, computes `x * cos - y *
sin` there and rounds once to q's dtype (`rope_readings.rotates_in_f32` reads the raised rope's
region for them)."""


MROPES = (VLLM_MROPE, VLLM_TRITON_MROPE)
"""vLLM's multimodal RoPEs (MRotaryEmbedding with `[3, T]` positions: Qwen2/2.5/3-VL): ROCm's
`vllm.mrope` op and CUDA's Triton kernel (a user-kernel call). Raised to `attn.rope` with
`mrope_section` on ROCm's positions and cache, or on the CUDA kernel's gathered cos and sin; both
rotate in the model dtype, their cache in it."""


@dataclass
class _Rotated:
    """query or key as the raised rope reads and writes it: `x` / `y` `[..., heads, head_size]`
    before / after the call; `prelude` makes x from the call's inputs (before the raised op),
    `inside` makes y from the call's results (in the region)."""

    name: str
    x: SSAValue
    y: SSAValue
    prelude: list[Operation]
    inside: list[Operation]
    split: bool
    """Whether x and y are the argument's flat `[..., heads * head_size]` split into heads."""
    view: View | None


def _heads(value: SSAValue, head_size: int, tokens: int, name: str
           ) -> tuple[SSAValue, list[Operation]]:
    """`value` as `[*tokens, heads, head_size]` (`tokens`: the rank of positions): itself, or
    its flat `[*tokens, heads * head_size]` unflattened (vLLM's layout, one head included)."""
    t = tensor_type(value)
    assert t is not None
    last = t.dims[-1] if t.dims else None
    if t.rank == tokens + 2 and last == head_size:
        return value, []
    if t.rank != tokens + 1 or not isinstance(last, int) or last % head_size:
        raise NoMatch(f"its {name} is {list(t.dims)}: neither [tokens, heads, head_size "
                      f"{head_size}] nor [tokens, heads * head_size]")
    op = aten_call(UNFLATTEN_INT, [value, t.rank - 1, [last // head_size, head_size]],
               (*t.dims[:-1], last // head_size, head_size), t.dtype)
    return op.results[0], [op]


def _flattens_heads(view: View, base: TensorType, head_size: int) -> bool:
    """The as_strided view is the row-major `[*tokens, heads * head_size]` flattening of a
    whole `[*tokens, heads, head_size]` base (vLLM views q back after its per-head norm)."""
    size, stride = list(view.size), list(view.stride)
    if base.rank < 2 or base.dims[-1] != head_size or len(size) != base.rank - 1 \
            or view.offset not in (0, None) or not isinstance(base.dims[-2], int):
        return False
    row = base.dims[-2] * head_size
    return (size[-1] == row and stride[-1] == 1
            and all(size_matches(s, d) for s, d in zip(size[:-1], base.dims[:-2], strict=True))
            and (len(size) == 1 or (stride[-2] == row and len(size) == 2)))


def _check_view(view: View, head_size: int, name: str) -> None:
    """Views raised: a step-1 static slice of the base's last dim, or an as_strided view that
    splits a static range of each row of the base into heads (`q.view(T, heads, head_size)` of
    such a slice), the heads side by side or spaced (MLA's `q[..., nope:]`, the rope part of
    each head). Anything else is left with a remark."""
    t = tensor_type(view.base)
    if t is None or t.rank < 1:
        raise NoMatch(f"the base of its {name} is not a tensor")
    if view.kind == "slice":
        dim, start, end = view.dim, view.start, view.end
        last = t.dims[-1]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (dim, start, end)):
            raise NoMatch(f"its {name} is a slice with symbolic bounds")
        if dim not in (t.rank - 1, -1) or not isinstance(last, int) or not (
                0 <= start < end <= last):
            raise NoMatch(f"its {name} is a slice of dim {dim} [{start}:{end}] of a "
                          f"{list(t.dims)} base, not a range of its last dim")
        view.dim = t.rank - 1
    elif view.kind == "strided" and _flattens_heads(view, t, head_size):
        view.kind = "alias"  # the whole base, its heads merged: the same elements in order
    elif view.kind == "strided":
        size, stride, offset = view.size, view.stride, view.offset
        if (len(size) != t.rank + 1 or len(stride) != t.rank + 1
                or not all(size_matches(s, d) for s, d in zip(size, t.dims[:-1], strict=False))
                or not all(isinstance(v, int) and not isinstance(v, bool)
                           for v in (*stride, *size[-2:], offset))
                or size[-1] != head_size or stride[-1] != 1 or stride[-2] < head_size):
            raise NoMatch(f"its {name} is an as_strided view {list(size)} / {list(stride)} "
                          f"of a {list(t.dims)} base, not a row range split into heads of "
                          f"{head_size}")
        if t.rank >= 2 and not (offset >= 0 and offset + _extent(view) <= stride[-3]):
            raise NoMatch(f"its {name} is an as_strided view that crosses a row of its base")


def _extent(view: View) -> int:
    """How many storage elements of a row a strided view of heads spans, first to last."""
    return (view.size[-2] - 1) * view.stride[-2] + view.size[-1]


def _footprint(view: View, head_size: int) -> tuple[Any, int, int]:
    """(row stride, first, end) of the elements of each row a view covers (slices: in units of
    the last dim; strided: storage elements), for the overlap check."""
    if view.kind == "slice":
        return ("slice", view.start, view.end)
    if view.kind == "strided":
        row = tuple(view.stride[:-2])
        return (row, view.offset, view.offset + _extent(view))
    return ("all", 0, 0)


def _disjoint(a: View, b: View, head_size: int) -> bool:
    fa, fb = _footprint(a, head_size), _footprint(b, head_size)
    if fa[0] != fb[0] or fa[0] == "all":
        return False
    return fa[2] <= fb[1] or fb[2] <= fa[1]


def _rotated(fn: Functionalized, name: str, head_size: int, tokens: int) -> _Rotated:
    view = fn.views.get(name)
    if view is None:  # v1: the tensor itself, its new value a result
        x, prelude = _heads(fn.args[name], head_size, tokens, name)
        y, inside = _heads(fn.outs[name], head_size, tokens, name)
        return _Rotated(name, x, y, prelude, inside, bool(prelude), None)
    _check_view(view, head_size, name)
    prelude = view_ops(view, view.base)
    inside = view_ops(view, view.new_base)
    x = prelude[-1].results[0] if prelude else view.base
    y = inside[-1].results[0] if inside else view.new_base
    x, more_prelude = _heads(x, head_size, tokens, name)
    y, more_inside = _heads(y, head_size, tokens, name)
    return _Rotated(name, x, y, [*prelude, *more_prelude], [*inside, *more_inside],
                    bool(more_prelude), view)


def _flat(r: _Rotated, raised_value: SSAValue) -> tuple[SSAValue, list[Operation]]:
    """The raised op's head-split result back in the argument's own shape."""
    if not r.split:
        return raised_value, []
    t = tensor_type(raised_value)
    assert t is not None
    op = aten_call(FLATTEN_USING_INTS, [raised_value, t.rank - 2, t.rank - 1],
               (*t.dims[:-2], mul_dim(t.dims[-2], t.dims[-1])), t.dtype)
    return op.results[0], [op]


def _rebuilt_base(rs: list[_Rotated]) -> tuple[SSAValue, list[Operation]]:
    """The new base of the views in `rs` (one base): the old base with each rotated piece
    scattered back where the call wrote it (`slice_scatter`, `as_strided_scatter`), so that
    it holds the call's result bit for bit (the rest of the base is the old one, untouched)."""
    view = rs[0].view
    assert view is not None
    acc: SSAValue = view.base
    t = tensor_type(acc)
    assert t is not None
    ops: list[Operation] = []
    for r in rs:
        v = r.view
        assert v is not None
        piece, flat = _flat(r, r.y)
        ops.extend(flat)
        if v.kind == "slice":
            op = aten_call(SLICE_SCATTER, [acc, piece, v.dim, v.start, v.end],
                       t.dims, t.dtype)
        elif v.kind == "strided":
            op = aten_call(AS_STRIDED_SCATTER,
                       [acc, piece, list(v.size), list(v.stride), v.offset], t.dims, t.dtype)
        else:
            acc = piece
            continue
        ops.append(op)
        acc = op.results[0]
    return acc, ops


def raise_rotary(fn: Functionalized) -> None:
    """Raise a call of one of ROTARY_CACHE_DTYPES to `attn.rope` on `[T, heads, head_size]`
    views of q and k. The region keeps the call and yields the rotated views of its results; the
    values the graph used (v1: the new q and k, maybe flat; v2: the new bases) are rebuilt after
    the raised op from its results, so that every user reads the same bits as before."""
    head_size = constant_arg(fn, "head_size", int)
    mrope = fn.target in MROPES
    is_neox = constant_arg(fn, "is_neox_style" if mrope else "is_neox", bool)
    offset, inverse = fn.args.get("rope_dim_offset", 0), fn.args.get("inverse", False)
    if offset != 0 or inverse is not False:  # vLLM 0.32's `_C.rotary_embedding` arguments
        raise NoMatch(f"it rotates from dim {offset} of each head (rope_dim_offset)"
                      if offset != 0 else "it rotates by -sin (inverse)")
    names = [n for n in ("query", "key") if n in fn.outs]
    if "query" not in names:
        raise NoMatch("its query argument is not a tensor")
    if mrope:  # [3, T] positions, or no positions (the kernel's tables): one token dim
        tokens = 1
    else:
        positions, cache = tensor_arg(fn, "positions"), tensor_arg(fn, "cos_sin_cache")
        tokens = tensor_type(positions).rank  # type: ignore[union-attr]
    rs = [_rotated(fn, n, head_size, tokens) for n in names]
    q, k = rs[0], rs[1] if len(rs) > 1 else None
    float_input(q.x)
    if k is not None and k.view is not None and q.view is not None and (
            k.view.index == q.view.index and not _disjoint(q.view, k.view, head_size)):
        raise NoMatch("its query and key overlap in their base (or cannot be told apart)")
    model = tensor_type(q.x).dtype  # type: ignore[union-attr]
    if mrope:
        tables, rotary_dim = _mrope_tables(fn, model)
    else:
        ct = tensor_type(cache)
        rotary_dim = ct.dims[-1] if ct.rank == 2 else None  # type: ignore[union-attr]
        if not isinstance(rotary_dim, int):
            dims = list(ct.dims)  # type: ignore[union-attr]
            raise NoMatch(f"the cos_sin_cache is {dims}, not [max_positions, rotary_dim]")
        _rotary_cache_dtype(fn.target, ct.dtype, model)  # type: ignore[union-attr]
        tables = {"positions": positions, "cos_sin_cache": cache}
    prelude = [o for r in rs for o in r.prelude]
    inside = [o for r in rs for o in r.inside]
    raised = RopeOp(
        q.x, None if k is None else k.x, **tables,
        is_neox=is_neox, rotary_dim=rotary_dim, head_dim=head_size,
        result_types=[q.y.type, None if k is None else k.y.type],
    )
    try:
        raised.verify()
    except VerifyException as err:
        discard(raised, *reversed(prelude), *reversed(inside))
        raise NoMatch(f"the matched values do not make a valid {raised.name}: {err}") from None
    # The region's extra ops go right after the call; what rebuilds the graph's values from the
    # region's yields goes after those, so `outline` puts the raised op between the two.
    anchor = fn.found.op
    point = InsertPoint.after(anchor)
    for op in inside:
        Rewriter.insert_op(op, point)
        point = InsertPoint.after(op)
    chain = [anchor, *inside]
    after: list[Operation] = []
    redirects: list[tuple[SSAValue, SSAValue]] = []  # (value the graph used, its rebuild)
    if q.view is None:  # v1: the new q and k in their own shapes
        for r in rs:
            old = fn.outs[r.name]
            if r.split and any(u.operation not in chain for u in old.uses):
                flat, ops = _flat(r, r.y)
                after.extend(ops)
                redirects.append((old, flat))
    else:  # v2: the new bases
        for index in dict.fromkeys(r.view.index for r in rs):  # type: ignore[union-attr]
            on_base = [r for r in rs if r.view.index == index]  # type: ignore[union-attr]
            new_base = on_base[0].view.new_base  # type: ignore[union-attr]
            if all(u.operation in chain for u in new_base.uses):
                continue
            rebuilt, ops = _rebuilt_base(on_base)
            after.extend(ops)
            if rebuilt is not new_base:
                redirects.append((new_base, rebuilt))
    for op in after:
        Rewriter.insert_op(op, point)
        point = InsertPoint.after(op)
    ours = set(chain) | set(after)
    for old, new in redirects:
        old.replace_uses_with_if(new, lambda use: use.operation not in ours)
    try:
        raise_chain(raised, chain, [q.y] + ([k.y] if k is not None else []), "vLLM op",
                    prelude=prelude)
    except NoMatch:
        for old, new in redirects:
            new.replace_uses_with_if(old, lambda use: use.operation not in ours)
        discard(*reversed(after), *reversed(inside))
        raise


def _mrope_tables(fn: Functionalized, model: Attribute) -> tuple[dict[str, Any], int]:
    """A multimodal RoPE's tables as `attn.rope` reads them, by section: positions `[3, T]` and
    the cos/sin cache (ROCm's op takes them; CUDA's kernel takes the cache's halves at them,
    read back through that gather), or else the CUDA kernel's cos and sin `[3, T, rotary_dim /
    2]` themselves."""
    rotary_dim = constant_arg(fn, "rotary_dim", int)
    sections = [constant_arg(fn, f"mrope_section_{s}", int) for s in "thw"]
    interleaved = constant_arg(fn, "mrope_interleaved", bool)
    half = rotary_dim // 2
    if not interleaved and sum(sections) != half:
        raise NoMatch(f"its sections {sections} do not add up to rotary_dim / 2 ({half})")
    by_section = {"mrope_section": sections, "mrope_interleaved": interleaved}
    cos = sin = None
    if fn.target == VLLM_MROPE:
        positions, cache = tensor_arg(fn, "positions"), tensor_arg(fn, "cos_sin_cache")
    else:
        cos, sin = tensor_arg(fn, "cos"), tensor_arg(fn, "sin")
        positions, cache = _gathered_from(cos, sin) or (None, None)
    if positions is not None:  # the kernels read the cache at the positions themselves
        pt, ct = tensor_type(positions), tensor_type(cache)
        if pt.rank != 2 or pt.dims[0] != 3:  # type: ignore[union-attr]
            raise NoMatch(f"its positions are {list(pt.dims)}, not [3, T]")  # type: ignore
        if ct.dims[1:] != (rotary_dim,) or ct.rank != 2:  # type: ignore[union-attr]
            dims = list(ct.dims)  # type: ignore[union-attr]
            raise NoMatch(f"the cos_sin_cache is {dims}, not [max_positions, {rotary_dim}]")
        if ct.dtype != model:  # type: ignore[union-attr]
            raise NoMatch(f"its cos_sin_cache is {ct.dtype}, not q's {model}")  # type: ignore
        return {"positions": positions, "cos_sin_cache": cache, **by_section}, rotary_dim
    t = tensor_type(cos)
    if t.rank != 3 or t.dims[0] != 3 or t.dims[2] != half or tensor_type(sin) != t:  # type: ignore
        raise NoMatch(f"its cos and sin are {tensor_type(cos)} and {tensor_type(sin)}, not "
                      f"[3, T, {half}] each")
    if t.dtype != model:  # type: ignore[union-attr]
        raise NoMatch(f"its cos and sin are {t.dtype}, not q's {model}")  # type: ignore
    return {"cos": cos, "sin": sin, **by_section}, rotary_dim


def _gathered_from(cos: SSAValue, sin: SSAValue) -> tuple[SSAValue, SSAValue] | None:
    """(positions, cache) where cos and sin are the first and second half of `cache[positions]`:
    how vLLM's `forward_cuda` makes the CUDA kernel's tables, Dynamo copying each half (a clone)
    for the launch. None otherwise."""
    pieces = []
    for value in (cos, sin):
        while (copy := producer(value, CLONE)) is not None:
            value = copy.arg(0)
        piece = last_dim_piece(value)
        if piece is None:
            return None
        pieces.append(piece)
    first, second = pieces
    width = tensor_type(first.source).dims[-1]  # type: ignore[union-attr]
    if (first.source is not second.source or (first.start, first.stop) != (0, second.start)
            or second.stop != width or 2 * first.stop != width):
        return None
    gather = producer(first.source, INDEX_TENSOR)
    index = None if gather is None else gather.arg(1)
    if not isinstance(index, list) or len(index) != 1 or not isinstance(index[0], SSAValue):
        return None
    return index[0], gather.arg(0)  # type: ignore[union-attr]


def _rotary_cache_dtype(target: str, cache: Attribute, model: Attribute) -> None:
    """NoMatch unless the cache has the dtype the op's kernel takes (ROTARY_CACHE_DTYPES)."""
    want = ROTARY_CACHE_DTYPES[target]
    if want is None and cache != model:
        raise NoMatch(f"the cos_sin_cache is {cache}, not q's {model}")
    if want is not None and cache != want:
        raise NoMatch(f"the cos_sin_cache is {cache}, not the {want} cache its kernel reads")


class VllmKernelPattern(AnchorPattern):
    """A user Triton kernel's call that launches vLLM's CUDA MRoPE kernel."""

    targets = (TRITON_KERNEL_WRAPPER_FUNCTIONAL,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        kernel = op.attributes.get(KERNEL_ATTR)
        if not isinstance(kernel, StringAttr) or kernel.data != VLLM_TRITON_MROPE:
            return NO_CANDIDATE
        found = call(op)
        assert found is not None
        try:
            raise_rotary(_read_kernel_call(found, kernel.data))
        except NoMatch as miss:
            name = kernel.data.rsplit(".", 1)[-1]
            raise NoMatch(f"not a multimodal RoPE ({name}): {miss}") from None
        return REWROTE


TRITON_MROPE_ARGUMENTS = {
    "query": "q_ptr", "key": "k_ptr", "cos": "cos", "sin": "sin", "head_size": "hd",
    "rotary_dim": "rd", "mrope_section_t": "mrope_section_t",
    "mrope_section_h": "mrope_section_h", "mrope_section_w": "mrope_section_w",
    "mrope_interleaved": "is_interleaved", "is_neox_style": "is_neox_style",
}
"""ROCm's `vllm.mrope` argument names (what the raise reads) -> the CUDA kernel's parameters."""


def _read_kernel_call(found: Call, kernel: str) -> Functionalized:
    """vLLM's CUDA MRoPE kernel's call read as the op call it stands for: its tensors and
    symbolic sizes (`kwargs`), constants (torch's side table) under the names ROCm's op gives
    them, and the rotated q and k its functional form returns."""
    tensors = found.kwargs.get("kwargs")
    keys = found.op.result_keys
    if not isinstance(tensors, dict) or keys is None:
        raise NoMatch("its call has no tensor arguments by name")
    try:
        constants = user_kernels.constant_args(found.kwargs["constant_args_idx"])
    except (AssertionError, KeyError):  # a graph from another process (a dump)
        raise NoMatch("its constant arguments are not in this process's side table") from None
    given = {**constants, **tensors}
    try:
        args = {ours: given[theirs] for ours, theirs in TRITON_MROPE_ARGUMENTS.items()}
    except KeyError as missing:
        raise NoMatch(f"its kernel takes no argument {missing}") from None
    results = dict(zip((k.data for k in keys.data), found.op.results, strict=True))
    outs = {name: results[key] for name, key in (("query", "q_ptr"), ("key", "k_ptr"))
            if key in results}
    if any(r.uses for key, r in results.items() if key not in ("q_ptr", "k_ptr")):
        raise NoMatch("a tensor other than q and k is read after the kernel")
    for name, heads in (("query", "n_qh"), ("key", "n_kh")):
        t, n, size = tensor_type(args[name]), given.get(heads), args["head_size"]
        if t is None or not isinstance(n, int) or not isinstance(size, int) or t.rank != 2 \
                or t.dims[1] != n * size:
            raise NoMatch(f"its {name} is {t}, not [T, {heads} * hd] ({n} x {size})")
    return Functionalized(found, kernel, args, outs, [])

