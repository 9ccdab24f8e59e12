"""raise-attention: scaled dot-product attention, and DeepSeek's MLA around it.

Anchored at each SDPA call (every ATen form aot_autograd leaves) or at the `_safe_softmax` of the
decomposed math fallback. Produces `attn.attention` in SDPA's `[..., H, L, D]` layout, with GQA
(native, or Hugging Face's `repeat_kv` taken into the region), the mask (a bool mask means what
SDPA's does: True attends), `causal` (torch's upper-left alignment) and the scale; the layout
changes around the call stay outside, since they only move data. When the key is `[k_nope |
k_pe]` decompressed from a latent by `kv_b_proj`, the attention and what builds its operands
raise to `attn.mla_attention` instead (an MLA near miss is a remark, and plain attention is
raised). The matched ops stay in the decomposition region (no result bit changes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects.builtin import IntAttr
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from irfuse.dialects import aten
from irfuse.dialects.act import PadOp
from irfuse.dialects.attn import AttentionOp, MlaAttentionOp
from irfuse.dialects.gemm import MatmulOp, ScaledMatmulOp
from irfuse.dialects.irfuse import tensor_type as make_tensor_type
from irfuse.ir import call_args
from irfuse.raising.aten_ops import (
    ADD_TENSOR,
    ADDMM,
    BMM,
    CAT,
    CLONE,
    CONSTANT_PAD_ND,
    COPY,
    EMPTY_MEMORY_FORMAT,
    EXPAND,
    LINEAR,
    MATRIX_T,
    MM,
    MUL,
    NEW_EMPTY,
    NEW_ZEROS,
    ONES,
    PERMUTE,
    PRIMS_CONVERT_ELEMENT_TYPE,
    RESHAPES,
    SAFE_SOFTMAX,
    SCALED_DOT_PRODUCT_ATTENTION,
    SCALED_DOT_PRODUCT_ATTENTION_MATH,
    SCALED_DOT_PRODUCT_CUDNN_ATTENTION,
    SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION,
    SCALED_DOT_PRODUCT_FLASH_ATTENTION,
    SCALED_DOT_PRODUCT_FLASH_ATTENTION_FOR_CPU,
    SCALED_MM,
    SLICE_SCATTER,
    SLICE_TENSOR,
    TO_COPY,
    TO_DTYPE,
    TRANSPOSE_INT,
    TRIL,
    UNSQUEEZE,
    VIEWS,
    WHERE_SELF,
    ZEROS,
)
from irfuse.raising.aten_ops import SQUEEZES_BY_DIM as SQUEEZE_BY_DIM
from irfuse.raising.driver import REWROTE, CallPattern, Outcome, PatternPass, Site
from irfuse.raising.match import (
    INT64_MAX,
    Call,
    NoMatch,
    as_cast,
    call,
    discard,
    last_dim_piece,
    only_user,
    private_to,
    producer,
    raise_chain,
    scalar_of,
    size_matches,
    strip_views,
    tensor_type,
    users_follow,
    with_private,
)

FUSED = (SCALED_DOT_PRODUCT_FLASH_ATTENTION_FOR_CPU, SCALED_DOT_PRODUCT_FLASH_ATTENTION, SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION, SCALED_DOT_PRODUCT_CUDNN_ATTENTION, SCALED_DOT_PRODUCT_ATTENTION_MATH, SCALED_DOT_PRODUCT_ATTENTION)

NEW_TENSOR = (NEW_EMPTY, EMPTY_MEMORY_FORMAT, NEW_ZEROS,
              ZEROS)


@dataclass
class _Attention:
    """A matched attention: the raised op's operands and result, and the ops it takes.

    `ops` must all join the region; `optional` ops (mask construction, weight transposes) join
    it when nothing outside uses them, else stay where they are and the region reads them."""

    q: SSAValue
    k: SSAValue
    v: SSAValue
    out: SSAValue
    scale: float
    causal: bool = False
    mask: SSAValue | None = None
    ops: list[Operation] = field(default_factory=list)
    optional: list[Operation] = field(default_factory=list)


@dataclass
class _Mla:
    q: SSAValue
    kv_c: SSAValue
    k_pe: SSAValue
    weight: SSAValue
    out: SSAValue
    heads: int
    nope: int
    rope: int
    v_dim: int
    rank: int
    batch_major: bool = False
    mask: SSAValue | None = None
    unsqueeze_latent: bool = False  # kv_c is [..., L, rank]: the op reads unsqueeze(kv_c, -3)


def _dims(value: object) -> tuple:
    t = tensor_type(value)
    return () if t is None else t.dims


def _norm_dim(dim: object, rank: int) -> int | None:
    if not isinstance(dim, int) or not -rank <= dim < rank:
        return None
    return dim % rank


def _default_scale(q: SSAValue) -> float:
    d = _dims(q)[-1]
    if not isinstance(d, int):
        raise NoMatch("default scale with a symbolic head dim")
    return 1.0 / math.sqrt(d)


# --- the attention call -------------------------------------------------------------------------


def _read_fused(found: Call) -> _Attention:
    """An SDPA kernel call: its operands, flags and output (result 0)."""
    t = found.target
    q, k, v = found.arg(0), found.arg(1, "key"), found.arg(2, "value")
    dropout_mask = None
    if t == SCALED_DOT_PRODUCT_FLASH_ATTENTION_FOR_CPU:
        dropout, causal = found.arg(3, "dropout_p", 0.0), found.arg(4, "is_causal", False)
        mask = found.kwargs.get("attn_mask")
    elif t == SCALED_DOT_PRODUCT_FLASH_ATTENTION:
        dropout, causal = found.arg(3, "dropout_p", 0.0), found.arg(4, "is_causal", False)
        mask = None
    elif t in (SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION, SCALED_DOT_PRODUCT_CUDNN_ATTENTION):
        mask = found.arg(3, "attn_bias")
        dropout, causal = found.arg(5, "dropout_p", 0.0), found.arg(6, "is_causal", False)
    else:  # MATH, SDPA
        mask = found.arg(3, "attn_mask")
        dropout, causal = found.arg(4, "dropout_p", 0.0), found.arg(5, "is_causal", False)
        if t == SCALED_DOT_PRODUCT_ATTENTION_MATH:
            dropout_mask = found.arg(6, "dropout_mask")
    if dropout != 0.0 or dropout_mask is not None:
        raise NoMatch(f"attention with dropout (p = {dropout})")
    if not isinstance(causal, bool):
        raise NoMatch(f"is_causal is {causal!r}, not a constant")
    if mask is not None and causal:
        raise NoMatch("attention with both a mask and is_causal")
    for r in found.op.results[1:]:
        if r.uses:
            raise NoMatch(f"result #{r.index} of {t.split('::')[1]} (logsumexp, ...) is used")
    scale = found.kwargs.get("scale")
    if scale is None:
        scale = _default_scale(q)
    if not isinstance(scale, int | float):
        raise NoMatch(f"the scale {scale!r} is not a constant")
    return _Attention(q, k, v, found.op.results[0], float(scale), causal, mask, [found.op])


def _is_noop_expand(found: Call | None) -> bool:
    if found is None or found.target != EXPAND:
        return False
    return _expanded_dims(found.arg(1), _dims(found.arg(0))) == _dims(found.arg(0))


def _expanded_dims(sizes: object, dims: tuple) -> tuple | None:
    """The dims `expand(x, sizes)` gives for x of `dims` (-1 keeps a dim), or None."""
    if not isinstance(sizes, list) or len(sizes) < len(dims):
        return None
    lead = len(sizes) - len(dims)
    out: list[object] = []
    for i, s in enumerate(sizes):
        old = dims[i - lead] if i >= lead else None
        if s == -1 and old is not None:
            out.append(old)
        elif isinstance(s, int) and not isinstance(s, bool):
            out.append(s)
        elif old is not None and size_matches(s, old):
            out.append(old)
        elif isinstance(s, SSAValue) and hasattr(s.type, "expr"):
            out.append(s.type.expr.data)  # type: ignore[attr-defined]
        else:
            return None
    return tuple(out)


def _batched_operand(value: SSAValue, ops: list[Operation], kv: bool = False) -> SSAValue:
    """The rank-4 (or more) tensor a bmm operand flattens (`view(expand(x))` with a no-op
    expand, and a `clone` between them when x is not contiguous, e.g. a transposed v), or the
    operand itself when it is already 3-D input to the bmm. For k and v (`kv`), the expand may
    also copy one head to all (`_is_head_broadcast`)."""
    view = producer(value, *RESHAPES)
    if view is None:
        return value
    clone = producer(view.arg(0), CLONE)
    expand = producer(clone.arg(0) if clone is not None else view.arg(0), EXPAND)
    if not _is_noop_expand(expand) and not (kv and _is_head_broadcast(expand)):
        raise NoMatch("a bmm operand of the attention is broadcast")
    assert expand is not None
    source = expand.arg(0)
    if _dims(source)[-2:] != _dims(value)[-2:]:
        raise NoMatch("a bmm operand of the attention is not a flattened batch")
    ops.extend([expand.op, *([clone.op] if clone is not None else []), view.op])
    return source


def _is_head_broadcast(expand: Call | None) -> bool:
    """Whether `expand` copies the one head of a `[..., 1, L, D]` (or k^T's `[..., 1, D, L]`)
    tensor to H heads and changes nothing else: multi-query attention as SDPA's math fallback
    runs it (old-architecture Falcon), every head reading the same k/v data. The op takes the
    one-head tensor as GQA with one k/v head."""
    if expand is None or expand.target != EXPAND:
        return False
    dims = _dims(expand.arg(0))
    out = _expanded_dims(expand.arg(1), dims)
    if out is None or len(dims) < 3 or len(out) != len(dims) or dims[-3] != 1:
        return False
    heads = out[-3]
    return (isinstance(heads, int) and heads > 1 and out[:-3] == dims[:-3]
            and out[-2:] == dims[-2:])


def _matmul_back(value: SSAValue, ops: list[Operation]) -> tuple[SSAValue, SSAValue]:
    """value = a @ b as `torch.matmul` decomposes it for batches: view(bmm(view(expand(a)),
    view(expand(b)))). Returns (a, b); adds the ops."""
    view = producer(value, *RESHAPES)
    bmm = producer(view.arg(0) if view is not None else value, BMM)
    if bmm is None:
        raise NoMatch("the scores are not a batched matmul")
    if view is not None:
        ops.append(view.op)
    ops.append(bmm.op)
    a = _batched_operand(bmm.arg(0), ops)
    b = _batched_operand(bmm.arg(1, "mat2"), ops, kv=True)
    return a, b


def _matmul_forward(lhs: SSAValue, ops: list[Operation]) -> tuple[SSAValue, SSAValue]:
    """The matmul that takes `lhs` as its left operand: (right operand, product)."""
    value = lhs
    user = only_user(value)
    expand = call(user, EXPAND)
    if expand is not None:
        if not _is_noop_expand(expand):
            raise NoMatch("the attention weights are broadcast")
        ops.append(expand.op)
        value = expand.result
        view = call(only_user(value), *RESHAPES)
        if view is None:
            raise NoMatch("the attention weights are not flattened for bmm")
        ops.append(view.op)
        value = view.result
    bmm = call(only_user(value), BMM)
    if bmm is None or bmm.arg(0) is not value:
        raise NoMatch("the attention weights do not multiply v")
    ops.append(bmm.op)
    rhs = _batched_operand(bmm.arg(1, "mat2"), ops, kv=True)
    out = bmm.result
    back = call(only_user(out), *RESHAPES)
    if expand is not None:
        if back is None:
            raise NoMatch("the attention output is not unflattened")
        ops.append(back.op)
        out = back.result
    return rhs, out


def _scaled_by(value: SSAValue) -> tuple[SSAValue, float, Operation] | None:
    found = producer(value, *MUL)
    if found is None:
        return None
    factor = scalar_of(found.arg(1, "other"))
    if factor is None or not isinstance(found.arg(0), SSAValue):
        return None
    return found.arg(0), float(factor), found.op


def _uncast(value: SSAValue, ops: list[Operation]) -> tuple[SSAValue, object | None]:
    """Strip the f32 cast the math path adds: (source, source dtype or None)."""
    cast = as_cast(value)
    if cast is None:
        return value, None
    source = cast[0]
    ops.append(value.owner)  # type: ignore[arg-type]
    return source, tensor_type(source).dtype  # type: ignore[union-attr]


def _causal_bias(bias: SSAValue, optional: list[Operation]) -> bool:
    """bias = where(tril(ones([L, S], bool)), 0, -inf): the math path's causal mask."""
    where = producer(bias, WHERE_SELF)
    if where is None:
        return False
    tril = producer(where.arg(0), TRIL)
    if tril is None or tril.arg(1, "diagonal", 0) != 0:
        return False
    ones = producer(tril.arg(0), ONES)
    t = tensor_type(ones.result) if ones is not None else None
    if ones is None or t is None or t.rank != 2 or str(t.dtype) != "i1":
        return False
    if scalar_of(where.arg(1)) != 0.0 or scalar_of(where.arg(2)) != -math.inf:
        return False
    optional.extend([where.op, tril.op, ones.op, *_scalar_ops(where)])
    return True


def _scalar_ops(where: Call) -> list[Operation]:
    return [a.owner for a in (where.arg(1), where.arg(2))  # type: ignore[misc]
            if isinstance(a, SSAValue) and producer(a) is not None]


def _read_math(softmax: Call) -> _Attention:
    """The decomposed math fallback, anchored at its `_safe_softmax`."""
    scores = softmax.arg(0)
    rank = len(_dims(scores))
    if rank < 3 or _norm_dim(softmax.arg(1, "dim"), rank) != rank - 1:
        raise NoMatch("a softmax over another dim than the last")
    if softmax.arg(2, "dtype") is not None:
        raise NoMatch("a softmax with a dtype")
    ops: list[Operation] = [softmax.op]
    optional: list[Operation] = []
    causal, mask = False, None
    add = producer(scores, ADD_TENSOR)
    raw = scores
    if add is not None:
        if add.arg(2, "alpha", 1) != 1:
            raise NoMatch("the mask is added with an alpha")
        raw, bias = add.arg(0), add.arg(1, "other")
        if producer(raw, *RESHAPES, BMM) is None:
            raw, bias = bias, raw
        ops.append(add.op)
        causal = _causal_bias(bias, optional)
        mask = None if causal else bias
    qs, kts = _matmul_back(raw, ops)
    q_scaled, k_scaled = _scaled_by(qs), _scaled_by(kts)
    if q_scaled is None or k_scaled is None:
        raise NoMatch("q and k are not both scaled before q @ k^T")
    q_acc, s_q, q_mul = q_scaled
    kt, s_k, k_mul = k_scaled
    if s_q != s_k or s_q <= 0:
        raise NoMatch(f"q and k are scaled by {s_q} and {s_k}, not by one positive factor")
    ops.extend([q_mul, k_mul])
    transpose = producer(kt, TRANSPOSE_INT)
    k_rank = len(_dims(kt))
    if transpose is None or {_norm_dim(transpose.arg(1), k_rank),
                             _norm_dim(transpose.arg(2), k_rank)} != {k_rank - 2, k_rank - 1}:
        raise NoMatch("k is not transposed in its last two dims")
    ops.append(transpose.op)
    v_rep, out = _matmul_forward(softmax.result, ops)
    k_acc, k_gqa = _peel_repeat(transpose.arg(0))
    v_acc, v_gqa = _peel_repeat(v_rep)
    ops.extend([*k_gqa, *v_gqa])
    q, q_from = _uncast(q_acc, ops)
    k, k_from = _uncast(k_acc, ops)
    v, v_from = _uncast(v_acc, ops)
    if not q_from == k_from == v_from:
        raise NoMatch("q, k and v are not cast alike before the math attention")
    if q_from is not None:
        back = call(only_user(out), TO_COPY, TO_DTYPE,
                    PRIMS_CONVERT_ELEMENT_TYPE)
        if back is None or as_cast(back.result) is None or tensor_type(back.result).dtype != q_from:  # type: ignore[union-attr]
            raise NoMatch("the math attention's output is not cast back to q's dtype")
        ops.append(back.op)
        out = back.result
    scale = s_q * s_q
    head_dim = _dims(q)[-1]
    if isinstance(head_dim, int) and math.isclose(scale, 1.0 / math.sqrt(head_dim),
                                                  rel_tol=1e-12):
        scale = 1.0 / math.sqrt(head_dim)
    return _Attention(q, k, v, out, scale, causal, mask, ops, optional)


# --- around the call ----------------------------------------------------------------------------


def _noop_slice(found: Call | None) -> bool:
    if found is None or found.target != SLICE_TENSOR:
        return False
    return (found.arg(2, "start", 0) in (0, None) and found.arg(4, "step", 1) == 1
            and found.arg(3, "end") in (None, INT64_MAX)
            and _dims(found.result) == _dims(found.arg(0)))


def _peel_repeat(value: SSAValue) -> tuple[SSAValue, list[Operation]]:
    """x for `repeat_kv(x, n)` / `x.repeat_interleave(n, dim=1)` as aot_autograd writes them
    ([B, Hk, L, D] -> unsqueeze(2) -> expand to n copies -> copy -> view [B, Hk * n, L, D]), with
    the ops; (value, []) when value is not such a repeat or a step of it is used elsewhere."""
    ops: list[Operation] = []
    view = producer(value, *RESHAPES)
    if view is None:
        return value, []
    current = view.arg(0)
    ops.append(view.op)
    clone = producer(current, CLONE)
    if clone is not None:
        ops.append(clone.op)
        current = clone.arg(0)
    expand = producer(current, EXPAND)
    if expand is None:
        return value, []
    ops.append(expand.op)
    current = expand.arg(0)
    while _noop_slice(slice_ := producer(current, SLICE_TENSOR)):
        assert slice_ is not None
        ops.append(slice_.op)
        current = slice_.arg(0)
    unsqueeze = producer(current, UNSQUEEZE)
    if unsqueeze is None:
        return value, []
    ops.append(unsqueeze.op)
    x = unsqueeze.arg(0)
    xd = _dims(x)
    if len(xd) < 3 or _norm_dim(unsqueeze.arg(1), len(xd) + 1) != len(xd) - 2:
        return value, []
    expanded = _expanded_dims(expand.arg(1), _dims(expand.arg(0)))
    if expanded is None:
        return value, []
    n = expanded[len(xd) - 2]
    heads = xd[-3]
    if not isinstance(n, int) or not isinstance(heads, int):
        return value, []
    if expanded != (*xd[:-2], n, *xd[-2:]) or _dims(value) != (*xd[:-3], heads * n, *xd[-2:]):
        return value, []
    chain = set(ops)
    if any(not private_to(o, chain) for o in ops[1:]):
        return value, []
    return x, ops


def _fold_bool_mask(attn: _Attention) -> None:
    """where(m, 0, -inf) of a bool m (SDPA's conversion) -> take m itself."""
    where = producer(attn.mask, WHERE_SELF)
    if where is None:
        return
    cond = where.arg(0)
    t = tensor_type(cond)
    if t is None or str(t.dtype) != "i1":
        return
    if scalar_of(where.arg(1)) != 0.0 or scalar_of(where.arg(2)) != -math.inf:
        return
    attn.optional.extend([where.op, *_scalar_ops(where)])
    attn.mask = cond


def _pad_of(value: SSAValue) -> tuple[SSAValue, int, Operation] | None:
    """(x, amount, op) for `value` = x zero-padded at the end of its last dim (`act.pad` or
    `constant_pad_nd(x, [0, amount])`)."""
    owner = value.owner
    if isinstance(owner, PadOp):
        if owner.low.value.data == 0 and owner.value.value.data == 0.0:
            return owner.x, owner.high.value.data, owner
        return None
    found = producer(value, CONSTANT_PAD_ND)
    if found is None:
        return None
    pad = found.arg(1)
    if (not isinstance(pad, list) or len(pad) != 2 or pad[0] != 0 or not isinstance(pad[1], int)
            or found.arg(2, "value", 0) != 0):
        return None
    return found.arg(0), pad[1], found.op


def _last_dim_slice(value: SSAValue, size: object) -> Call | None:
    """The only user of `value` if it is `value[..., :size]`."""
    found = call(only_user(value), SLICE_TENSOR)
    rank = len(_dims(value))
    if found is None or found.arg(0) is not value or _norm_dim(found.arg(1, "dim", 0),
                                                                rank) != rank - 1:
        return None
    if found.arg(2, "start", 0) not in (0, None) or found.arg(4, "step", 1) != 1:
        return None
    if not size_matches(found.arg(3, "end"), size):
        return None
    return found


def _peel_head_pad(attn: _Attention) -> None:
    """CUDA flash pads q, k and v's head dims to a multiple of 8 and slices the output back."""
    pads = [_pad_of(x) for x in (attn.q, attn.k, attn.v)]
    if any(p is None for p in pads):
        return
    (q, _, qp), (k, _, kp), (v, _, vp) = pads  # type: ignore[misc]
    if _dims(q)[-1] != _dims(k)[-1]:
        return
    back = _last_dim_slice(attn.out, _dims(v)[-1])
    if back is None:
        return
    attn.q, attn.k, attn.v = q, k, v
    attn.ops.extend([qp, kp, vp, back.op])
    attn.out = back.result


def _match_attention(found: Call) -> _Attention:
    if found.target == SAFE_SOFTMAX:
        attn = _read_math(found)
    else:
        attn = _read_fused(found)
        _peel_head_pad(attn)
        k, k_ops = _peel_repeat(attn.k)
        v, v_ops = _peel_repeat(attn.v)
        if k_ops and v_ops and _dims(k)[:-2] == _dims(v)[:-2]:
            attn.k, attn.v = k, v
            attn.ops.extend([*k_ops, *v_ops])
    if attn.mask is not None:
        _fold_bool_mask(attn)
    types = [tensor_type(x) for x in (attn.q, attn.k, attn.v)]
    if any(t is None for t in types) or len({t.dtype for t in types}) != 1:  # type: ignore[union-attr]
        raise NoMatch("q, k and v have different dtypes")
    if attn.scale <= 0:
        raise NoMatch(f"scale {attn.scale} is not positive")
    return attn


# --- MLA ----------------------------------------------------------------------------------------


def _token_major_in(value: SSAValue, ops: list[Operation]) -> SSAValue | None:
    """x [T, H, D] for value [1, H, T, D] = x.transpose(0, 1).unsqueeze(0) (or
    x.unsqueeze(0).transpose(1, 2))."""
    found = producer(value, UNSQUEEZE, TRANSPOSE_INT)
    if found is None or len(_dims(value)) != 4 or _dims(value)[0] != 1:
        return None
    if found.target == UNSQUEEZE:
        inner = producer(found.arg(0), TRANSPOSE_INT)
        if _norm_dim(found.arg(1), 4) != 0 or inner is None:
            return None
        if {_norm_dim(inner.arg(1), 3), _norm_dim(inner.arg(2), 3)} != {0, 1}:
            return None
    else:
        inner = producer(found.arg(0), UNSQUEEZE)
        if {_norm_dim(found.arg(1), 4), _norm_dim(found.arg(2), 4)} != {1, 2} or inner is None:
            return None
        if _norm_dim(inner.arg(1), 4) != 0:
            return None
    ops.extend([inner.op, found.op])
    return inner.arg(0)


def _token_major_out(value: SSAValue, ops: list[Operation]) -> SSAValue | None:
    """y [T, H, D] for SDPA's output value [1, H, T, D]: squeeze(0).transpose(0, 1) (or
    transpose(1, 2).squeeze(0))."""
    first = call(only_user(value))
    if first is None or len(_dims(value)) != 4 or _dims(value)[0] != 1:
        return None
    second = call(only_user(first.result))
    if second is None:
        return None
    if first.target in SQUEEZE_BY_DIM and second.target == TRANSPOSE_INT:
        if _squeezed(first) != 0 or {_norm_dim(second.arg(1), 3),
                                     _norm_dim(second.arg(2), 3)} != {0, 1}:
            return None
    elif first.target == TRANSPOSE_INT and second.target in SQUEEZE_BY_DIM:
        if {_norm_dim(first.arg(1), 4), _norm_dim(first.arg(2), 4)} != {1, 2}:
            return None
        if _squeezed(second) != 0:
            return None
    else:
        return None
    ops.extend([first.op, second.op])
    return second.result


def _squeezed(found: Call) -> int | None:
    dims = found.arg(1, "dim")
    if isinstance(dims, list):
        dims = dims[0] if len(dims) == 1 else None
    return _norm_dim(dims, len(_dims(found.arg(0))))


def _unpad_out(value: SSAValue, v_dim: int, ops: list[Operation]) -> SSAValue | None:
    """out[..., :v_dim] of a padded [T, H, D] output, directly or after the round trip through
    the flat [T, H * D] view that model code writes (`.reshape(T, -1).view(-1, H, D)`)."""
    direct = _last_dim_slice(value, v_dim)
    if direct is not None:
        ops.append(direct.op)
        return direct.result
    dims = _dims(value)
    flat = call(only_user(value), *RESHAPES)
    if flat is None or len(_dims(flat.result)) != 2:
        return None
    back = call(only_user(flat.result), *RESHAPES)
    if back is None or _dims(back.result) != dims:
        return None
    sliced = _last_dim_slice(back.result, v_dim)
    if sliced is None:
        return None
    ops.extend([flat.op, back.op, sliced.op])
    return sliced.result


def _transposed_weight(b: SSAValue, optional: list[Operation]) -> SSAValue:
    found = producer(b, MATRIX_T, TRANSPOSE_INT, PERMUTE)
    if found is None or len(_dims(found.arg(0))) != 2:
        raise NoMatch("the kv_b projection's weight is not a transposed [N, K] weight")
    if found.target == PERMUTE and found.arg(1) != [1, 0]:
        raise NoMatch("the kv_b projection's weight is permuted, not transposed")
    optional.append(found.op)
    return found.arg(0)


def _linear(value: SSAValue, ops: list[Operation], optional: list[Operation]
            ) -> tuple[SSAValue, SSAValue]:
    """(x, W [N, K]) for value = x @ W^T, a plain float linear without bias."""
    owner = value.owner
    if isinstance(owner, MatmulOp):
        if owner.bias is not None:
            raise NoMatch("the kv_b projection has a bias")
        ops.append(owner)
        return owner.a, _transposed_weight(owner.b, optional)
    if isinstance(owner, ScaledMatmulOp) or producer(value, SCALED_MM) is not None:
        raise NoMatch("the kv_b projection is an FP8 scaled GEMM; attn.mla_attention takes a "
                      "float kv_b weight")
    found = producer(value, MM, LINEAR, ADDMM)
    if found is None:
        raise NoMatch("k_nope and v do not come from a projection of the latent")
    if found.target == ADDMM or found.arg(2, "bias") is not None:
        raise NoMatch("the kv_b projection has a bias")
    ops.append(found.op)
    if found.target == LINEAR:
        return found.arg(0), found.arg(1, "weight")
    return found.arg(0), _transposed_weight(found.arg(1, "mat2"), optional)


def _last_dim_range(found: Call, first: int, rank: int, size: object) -> tuple[int, int] | None:
    """(start, stop) of a step-1 `slice` / `slice_scatter` along the last dim (its dim, start,
    end and step arguments from position `first`), clamped as torch clamps them."""
    dim, start = found.arg(first, "dim", 0), found.arg(first + 1, "start")
    end, step = found.arg(first + 2, "end"), found.arg(first + 3, "step", 1)
    if _norm_dim(dim, rank) != rank - 1 or step != 1 or not isinstance(size, int):
        return None
    start = 0 if start is None else start
    end = size if end is None else end
    if not isinstance(start, int) or not isinstance(end, int):
        return None
    start = max(0, min(start + size if start < 0 else start, size))
    return start, max(start, min(end + size if end < 0 else end, size))


def _cat_pieces(k: SSAValue) -> tuple[SSAValue, SSAValue, list[Operation]] | None:
    """(first, second, ops) for k = cat([first, second], -1)."""
    cat = producer(k, CAT)
    rank = len(_dims(k))
    if cat is None or rank < 3 or _norm_dim(cat.arg(1, "dim", 0), rank) != rank - 1:
        return None
    pieces = cat.arg(0)
    if not isinstance(pieces, list) or len(pieces) != 2:
        return None
    return pieces[0], pieces[1], [cat.op]


def _scattered_pieces(k: SSAValue) -> tuple[SSAValue, SSAValue, list[Operation]] | None:
    """(first, second, ops) for k written as two pieces of its last dim into a new tensor, as
    aot_autograd functionalizes `k = x.new_empty(...); k[..., :n].copy_(a); k[..., n:].copy_(b)`:
    `slice_scatter(slice_scatter(new_empty, copy(slice(new_empty), a)), copy(slice(..), b))`, the
    two pieces in either order, together covering the whole last dim (so nothing of the
    uninitialised tensor survives). `copy` broadcasts its source; it must not cast it."""
    outer = producer(k, SLICE_SCATTER)
    inner = producer(outer.arg(0), SLICE_SCATTER) if outer is not None else None
    base = producer(inner.arg(0), *NEW_TENSOR) if inner is not None else None
    if base is None:
        return None
    assert outer is not None and inner is not None
    dims = _dims(k)
    rank, size = len(dims), dims[-1] if dims else None
    ops: list[Operation] = [base.op]
    written: list[tuple[tuple[int, int], SSAValue]] = []
    for scatter, into in ((inner, base.result), (outer, inner.result)):
        span = _last_dim_range(scatter, 2, rank, size)
        copy = producer(scatter.arg(1, "src"), COPY)
        if span is None or copy is None:
            return None
        target = producer(copy.arg(0), SLICE_TENSOR)
        if target is None or target.arg(0) is not into or _last_dim_range(
                target, 1, rank, size) != span:
            return None
        source = copy.arg(1, "src")
        t = tensor_type(source)
        if t is None or t.dtype != tensor_type(k).dtype or t.rank != rank:  # type: ignore[union-attr]
            return None
        written.append((span, source))
        ops.extend([target.op, copy.op, scatter.op])
    (a, a_src), (b, b_src) = sorted(written, key=lambda w: w[0])
    if a[0] != 0 or a[1] != b[0] or b[1] != size or a[1] == 0 or b[0] == size:
        return None
    return a_src, b_src, ops


def _mla_key(k: SSAValue, head_axis: int, ops: list[Operation]
             ) -> tuple[SSAValue, SSAValue] | None:
    """(k_nope, k_pe) for MLA's key k = [k_nope | k_pe broadcast to every head] along the last
    dim, joined by `cat` (of `k_pe.expand(...)`) or written into a new tensor (of k_pe expanded,
    or broadcast by `copy`). The heads are dim `head_axis` (-2 of `[T, H, D]`, -3 of
    `[..., H, L, D]`), and k_pe has one. None when k is not built so (not MLA)."""
    found = _cat_pieces(k) or _scattered_pieces(k)
    if found is None:
        return None
    k_nope, rope, key_ops = found
    key_ops = list(key_ops)
    k_pe = rope
    expand = producer(rope, EXPAND)
    if expand is not None:
        k_pe = expand.arg(0)
        if _expanded_dims(expand.arg(1), _dims(k_pe)) != _dims(rope):
            return None
        key_ops.append(expand.op)
    kd, nd = _dims(k_pe), _dims(k_nope)
    if len(kd) != len(_dims(k)) or len(nd) != len(kd) or kd[head_axis] != 1:
        return None
    same = [i for i in range(-len(kd), -1) if i != head_axis]
    if any(kd[i] != nd[i] for i in same) or nd[:-1] != _dims(k)[:-1]:
        return None
    ops.extend(key_ops)
    return k_nope, k_pe


def _split_kv(k_nope: SSAValue, v: SSAValue, ops: list[Operation]
              ) -> tuple[SSAValue, int, int]:
    """(kv, nope, v_dim) for k_nope = kv[..., :nope] and v = kv[..., nope:] (split or slices)."""
    kv_k, kv_v = last_dim_piece(k_nope), last_dim_piece(v)
    if kv_k is None or kv_v is None or kv_k.source is not kv_v.source:
        raise NoMatch("k_nope and v are not the two parts of one kv projection")
    nope, v_dim = kv_k.stop - kv_k.start, kv_v.stop - kv_v.start
    if kv_k.start != 0 or kv_v.start != nope or kv_v.stop != _dims(kv_k.source)[-1]:
        raise NoMatch("kv is not split into [k_nope | v]")
    ops.extend(dict.fromkeys([*kv_k.ops, *kv_v.ops]))
    return kv_k.source, nope, v_dim


def _unpad_v(v: SSAValue, ops: list[Operation]) -> SSAValue:
    """v before the zero padding to q's head dim that some MLA code adds for the kernel."""
    padded = _pad_of(v)
    if padded is None:
        return v
    ops.append(padded[2])
    return padded[0]


def _static(what: str, *values: object) -> None:
    if not all(isinstance(x, int) for x in values):
        raise NoMatch(f"MLA with a symbolic {what}")


def _token_major_mla(attn: _Attention, k_nope: SSAValue, k_pe: SSAValue,
                     ops: list[Operation]) -> _Mla:
    """vLLM's MLA: [T, H, D] tensors moved to SDPA's [1, H, T, D] and back around the call."""
    if attn.mask is not None:
        raise NoMatch("MLA attention with a mask")
    q3 = _token_major_in(attn.q, ops)
    v3 = _token_major_in(attn.v, ops)
    if q3 is None or v3 is None:
        raise NoMatch("q or v is not in the [T, H, D] layout k is in")
    kv, nope, v_dim = _split_kv(k_nope, _unpad_v(v3, ops), ops)
    kv2, views = strip_views(kv)
    ops.extend(v.op for v in views)
    optional: list[Operation] = []
    kv_c, weight = _linear(kv2, ops, optional)
    out = _token_major_out(attn.out, ops)
    if out is None:
        raise NoMatch("the attention output is not brought back to [T, H, D]")
    if _dims(out)[-1] != v_dim:
        out = _unpad_out(out, v_dim, ops)
        if out is None:
            raise NoMatch("the padded attention output is not sliced back to v_head_dim")
    heads, rope = _dims(q3)[1], _dims(k_pe)[-1]
    rank_ = _dims(kv_c)[-1] if _dims(kv_c) else None
    _static("head count or rank", heads, rope, rank_)
    attn.ops.extend(ops)
    attn.optional.extend(optional)
    return _Mla(q3, kv_c, k_pe, weight, out, heads, nope, rope, v_dim, rank_)  # type: ignore[arg-type]


def _single_head_latent(a: SSAValue, k_pe: SSAValue, ops: list[Operation]
                        ) -> tuple[SSAValue, bool]:
    """The latent that the kv_b projection's input `a` reshapes (a itself, or through views,
    which join the region): `[..., 1, Lk, kv_lora_rank]`, one head as k_pe has (Hugging Face's
    DeepSeek from transformers 5), or else `[..., Lk, kv_lora_rank]` (transformers 4), which
    the op gets through an `unsqueeze` before it: (latent, whether it needs that unsqueeze)."""
    want = (*_dims(k_pe)[:-1], _dims(a)[-1] if _dims(a) else None)
    flat = (*want[:-3], *want[-2:])
    value, passed = a, []
    found: tuple[SSAValue, int] | None = None
    while _dims(value) != want:
        if found is None and _dims(value) == flat:
            found = (value, len(passed))
        view = producer(value, *VIEWS)
        if view is None:
            if found is None:
                raise NoMatch("the kv_b projection's input is not a view of a "
                              f"[..., 1, L, kv_lora_rank] latent (want {list(want)})")
            ops.extend(passed[:found[1]])
            return found[0], True
        passed.append(view.op)
        value = view.arg(0)
    ops.extend(passed)
    return value, False


def _unsqueezed_head(latent: SSAValue) -> Operation:
    """A new `unsqueeze(latent, -3)`: the single-head `[..., 1, L, rank]` kv_c operand."""
    t = tensor_type(latent)
    assert t is not None
    op = aten.CallOp(UNSQUEEZE, [latent],
                     [call_args.OperandRefAttr(IntAttr(0)), IntAttr(-3)],
                     [make_tensor_type((*t.dims[:-2], 1, *t.dims[-2:]), t.dtype)])
    op.results[0].name_hint = f"{latent.name_hint or 'latent'}_head"
    return op


def _batch_major_mla(attn: _Attention, k_nope: SSAValue, k_pe: SSAValue,
                     ops: list[Operation]) -> _Mla:
    """Hugging Face's MLA, all in SDPA's [..., H, L, D] layout: kv = kv_b(latent) viewed as
    [..., Lk, H, nope + v] and transposed to [..., H, Lk, nope + v]; the call's own output."""
    kv, nope, v_dim = _split_kv(k_nope, _unpad_v(attn.v, ops), ops)
    rank = len(_dims(kv))
    moved = producer(kv, TRANSPOSE_INT)
    if moved is None or {_norm_dim(moved.arg(1), rank), _norm_dim(moved.arg(2), rank)} != {
            rank - 3, rank - 2}:
        raise NoMatch("k_nope and v are not a [..., L, H, D] projection transposed to SDPA's "
                      "layout")
    ops.append(moved.op)
    heads = _dims(kv)[-3]
    if _dims(moved.arg(0)) != (*_dims(k_pe)[:-3], _dims(k_pe)[-2], heads, nope + v_dim):
        raise NoMatch("the kv projection's heads are not k_pe's batch and length")
    flat, views = strip_views(moved.arg(0))
    ops.extend(v.op for v in views)
    optional: list[Operation] = []
    a, weight = _linear(flat, ops, optional)
    kv_c, unsqueeze = _single_head_latent(a, k_pe, ops)
    out = attn.out
    if _dims(out)[-1] != v_dim:
        sliced = _last_dim_slice(out, v_dim)
        if sliced is None:
            raise NoMatch("the padded attention output is not sliced back to v_head_dim")
        ops.append(sliced.op)
        out = sliced.result
    rope, rank_ = _dims(k_pe)[-1], _dims(kv_c)[-1]
    _static("head count or rank", heads, rope, rank_)
    attn.ops.extend(ops)
    attn.optional.extend(optional)
    return _Mla(attn.q, kv_c, k_pe, weight, out, heads, nope, rope, v_dim, rank_,  # type: ignore[arg-type]
                batch_major=True, mask=attn.mask, unsqueeze_latent=unsqueeze)


def _match_mla(attn: _Attention) -> _Mla | None:
    """MLA around a matched attention: token-major (q, k and v are [T, H, D] tensors moved to
    SDPA's layout) or batch-major (k built in SDPA's layout); None when its key is not MLA's."""
    ops: list[Operation] = []
    k3 = _token_major_in(attn.k, ops)
    if k3 is not None:
        shared = _mla_key(k3, -2, ops)
        return None if shared is None else _token_major_mla(attn, *shared, ops)
    shared = _mla_key(attn.k, -3, ops)
    return None if shared is None else _batch_major_mla(attn, *shared, ops)


# --- raising ------------------------------------------------------------------------------------


def _raise(attn: _Attention, mla: _Mla | None, order: dict[Operation, int]) -> Operation:
    ops = sorted(with_private(attn.ops, attn.optional), key=lambda o: order[o])
    before: list[Operation] = []
    if mla is not None:
        out = mla.out
        # The region reads a 3-D latent from above; the op takes it with its head dim.
        before = [_unsqueezed_head(mla.kv_c)] if mla.unsqueeze_latent else []
        for o in before:
            o.location = ops[-1].location
        kv_c = before[0].results[0] if before else mla.kv_c
        raised: Operation = MlaAttentionOp(
            mla.q, kv_c, mla.k_pe, mla.weight, mla.mask, num_heads=mla.heads,
            qk_nope_head_dim=mla.nope, qk_rope_head_dim=mla.rope, v_head_dim=mla.v_dim,
            kv_lora_rank=mla.rank, scale=attn.scale, causal=attn.causal,
            batch_major=mla.batch_major, result_type=out.type,
        )
    else:
        out = attn.out
        raised = AttentionOp(attn.q, attn.k, attn.v, attn.mask, scale=attn.scale,
                             causal=attn.causal, result_type=out.type)
    if not users_follow([out], ops, order):
        discard(raised, *before)
        raise NoMatch("the attention output is used before the attention's last op")
    raise_chain(raised, ops, [out], "attention", prelude=before, verify=True)
    return raised


class AttentionPattern(CallPattern):
    """SDPA (or the softmax of a decomposed one), and MLA around it."""

    targets = (*FUSED, SAFE_SOFTMAX)
    remark = "not attention"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        attn = _match_attention(found)
        snapshot = (list(attn.ops), list(attn.optional))
        try:
            mla = _match_mla(attn)
            if mla is not None:
                _raise(attn, mla, site.order)
                return REWROTE
        except NoMatch as miss:
            self.missed(found.op, str(miss), remark="not MLA attention (raised as attention)")
            attn.ops, attn.optional = snapshot
        _raise(attn, None, site.order)
        return REWROTE


class RaiseAttention(PatternPass):
    """Raise SDPA (every ATen form, GQA, masks) to `attn.attention`, and DeepSeek's MLA around it
    to `attn.mla_attention`. No options."""

    name = "raise-attention"
    patterns = (AttentionPattern(),)
