"""What a raised RoPE site reads, for the fusions that replace `attn.rope` (QK norm + RoPE, RoPE +
the KV-cache writes, MLA's RoPE + latent write): the per-head norms of q and k before it and the
one reading a fused kernel takes of them, and whether the model rotates in float32.

A per-head norm may reach the rope through views that keep every head's row intact (vLLM views
back to `[T, H * D]` and the rotary views to heads again; Hugging Face transposes to
`[B, H, T, D]`): a row norm commutes with them, so a fused op normalizes the same views of the
norm's input (`rebase`). Nothing here changes the IR before a pattern has checked everything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects.builtin import f32
from xdsl.ir import Operation, SSAValue

from irfuse.dialects.attn import RopeOp
from irfuse.dialects.fused import QkNormRopeOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.norm import RmsNormOp
from irfuse.dialects.quant import QuantFp8Op
from irfuse.fusions.norm_readings import KERNEL_DTYPES, weight_product_in_f32
from irfuse.fusions.scattered import scattered_source
from irfuse.ir.decomposition import decomposition_block
from irfuse.raising import aten_ops
from irfuse.raising.aten_ops import RESHAPES_AND_FLATTENS, ROW_VIEWS
from irfuse.raising.match import NoMatch, call, normalize_dim, producer, users
from irfuse.raising.raise_vllm_ops import vllm_target
from irfuse.raising.raise_vllm_rotary import ROTATES_IN_F32


@dataclass(frozen=True)
class QkNorms:
    """The per-head norms of q and k before a plain `attn.rope`: the two norms, the row views
    from each to the rope (nearest the norm first), and the one reading the kernel takes (eps,
    weight offset, weight product in f32)."""

    q: RmsNormOp
    q_views: list[Operation]
    k: RmsNormOp
    k_views: list[Operation]
    eps: float
    weight_offset: float
    weight_f32: bool

    def inputs(self) -> tuple[SSAValue, SSAValue]:
        """q and k as the fused op normalizes them: the norms' inputs seen through the views
        (which this retargets: call it once everything is checked)."""
        return rebase(self.q, self.q_views), rebase(self.k, self.k_views)


def qk_norms(rope: RopeOp) -> QkNorms | None:
    """The per-head norms of the rope's q and k and their one reading; None where neither is
    normalized per head; NoMatch where a fused kernel cannot take them."""
    if rope.k is None:
        return None
    q_norm, q_views = normed(rope.q, rope)
    k_norm, k_views = normed(rope.k, rope)
    if q_norm is None and k_norm is None:
        return None
    if q_norm is None or k_norm is None:
        raise NoMatch(f"only {'k' if q_norm is None else 'q'} is normalized per head before the "
                      "rope; the kernel normalizes both")
    readings = {norm_reading(n, rope.head_dim.value.data) for n in (q_norm, k_norm)}
    if len(readings) != 1:
        raise NoMatch("q and k are normalized with different eps, weight offsets or weight "
                      "rounding; the kernel reads one")
    return QkNorms(q_norm, q_views, k_norm, k_views, *readings.pop())


def normed(value: SSAValue, rope: RopeOp) -> tuple[RmsNormOp | None, list[Operation]]:
    """The per-head norm whose output reaches `value` (an operand of `rope`) through row views
    used only on the way, and those views, nearest the norm first; (None, []) when no norm's
    output reaches it through ROW_VIEWS; NoMatch where one does but not as the kernel takes it
    (a head's row split on the way, or a value on the way read elsewhere)."""
    views: list[Operation] = []
    while not isinstance(value.owner, RmsNormOp):
        found = call(value.owner) if isinstance(value.owner, Operation) else None
        if found is None or found.target not in ROW_VIEWS:
            return None, []
        views.append(found.op)
        value = found.arg(0)
    norm = value.owner
    views.reverse()
    _check_rows(norm, views, rope.head_dim.value.data)
    chain = [norm, *views, rope]
    if not all(_used_on_the_way(o.results[0], chain[i + 1], rope)
               for i, o in enumerate(chain[:-1])):
        raise NoMatch("a q/k norm's output is also read elsewhere: the norm must stay")
    return norm, views


def _check_rows(norm: RmsNormOp, views: list[Operation], head_dim: int) -> None:
    """NoMatch unless each row the norm normalizes is one row (a head) of what `views` make of
    its output: every view keeps the last dim whole (`_keeps_rows`), or keeps the elements'
    order with a last dim of whole heads (vLLM's view back to `[T, H * D]`, and the unflatten to
    heads again that the raise of its `_C` rotary puts before the rope), and the last view ends
    in one head. A norm over more than one head viewed as heads after it is OLMo2's; without
    views, norm_reading says what the norm spans."""
    out = norm.y.type
    if not isinstance(out, TensorType) or not views:
        return
    width = out.dims[-1]
    if width != head_dim:
        if isinstance(width, int) and width > head_dim and width % head_dim == 0:
            raise NoMatch(f"the norm before the rope is viewed as heads of {head_dim} after it: "
                          "it spans all heads (OLMo2), and the kernel normalizes per head")
        return  # norm_reading: the norm spans `width` elements, not one head
    for view in views:
        found = call(view)
        assert found is not None
        t = found.result.type
        last = t.dims[-1] if isinstance(t, TensorType) else None
        if not _keeps_rows(found) and not (found.target in RESHAPES_AND_FLATTENS
                                           and isinstance(last, int) and last % head_dim == 0):
            raise NoMatch(f"{found.target} between a q/k norm and the rope does not keep each "
                          f"head's row of {head_dim} whole: the kernel normalizes the rope's rows")
    if last != head_dim:
        raise NoMatch(f"the views after a q/k norm give the rope rows of {last}, not heads of "
                      f"{head_dim}")


def _used_on_the_way(value: SSAValue, following: Operation, rope: RopeOp) -> bool:
    """Whether `following` reads `value`, and nothing else does but ops inside the rope's own
    decomposition (vLLM's `_C` rotary raised from auto_functionalized v1 reads the flat q and k
    that its prelude unflattens for the rope): the fused op replaces the rope with its region."""
    readers = users(value)
    return following in readers and all(
        u is following or rope.is_ancestor(u) for u in readers)


def _keeps_rows(found) -> bool:
    """The view keeps the last dim where it is and whole (rows map to rows)."""
    src, out = found.arg(0).type, found.result.type
    if not isinstance(src, TensorType) or not isinstance(out, TensorType) or src.rank < 1:
        return False
    if src.dims[-1] != out.dims[-1]:
        return False
    last = src.rank - 1
    if found.target == aten_ops.TRANSPOSE_INT:
        return last not in {normalize_dim(found.arg(1), src.rank),
                            normalize_dim(found.arg(2), src.rank)}
    if found.target == aten_ops.PERMUTE:
        return normalize_dim(list(found.arg(1))[-1], src.rank) == last
    if found.target == aten_ops.UNSQUEEZE:
        return normalize_dim(found.arg(1), out.rank) != out.rank - 1
    if found.target == aten_ops.SQUEEZE_DIM:
        return normalize_dim(found.arg(1), src.rank) != last
    return True  # reshapes with the last dim unchanged, alias


def norm_reading(norm: RmsNormOp, head_dim: int) -> tuple[float, float, bool]:
    """(eps, weight offset, weight product in f32) of a per-head norm the kernel can take."""
    x, y = norm.x.type, norm.y.type
    assert isinstance(x, TensorType) and isinstance(y, TensorType)
    if norm.weight is None:
        raise NoMatch("a q/k norm without a weight has no fused kernel")
    if x.dims[-1] != head_dim:
        raise NoMatch(f"the q/k norm spans {x.dims[-1]} elements, not one head of {head_dim} "
                      "(OLMo2 normalizes all heads together)")
    if x.dtype not in KERNEL_DTYPES or y.dtype != x.dtype:
        raise NoMatch(f"the fused kernel takes bf16, f16 or f32 q/k and returns their dtype, "
                      f"not {x.dtype} -> {y.dtype}")
    return norm.eps.value.data, norm.weight_offset.value.data, weight_product_in_f32(norm, x)


def rotates_in_f32(rope: RopeOp) -> bool:
    """Whether the model rotates in float32 (products in f32, rounded once at the end) rather
    than in q's dtype, from the products in the rope's decomposition, or from the vLLM op it
    holds: FlashInfer's rotary (`vllm.flashinfer_rotary_embedding`, raise_vllm_ops'
    ROTATES_IN_F32) rotates in float32, vLLM's `_C` rotary (no products either) in the model
    dtype."""
    q_type = rope.q.type
    assert isinstance(q_type, TensorType)
    block = decomposition_block(rope)
    ops = [] if block is None else list(block.ops)
    if q_type.dtype != f32 and any(vllm_target(op) in ROTATES_IN_F32 for op in ops):
        return True
    dtypes = set()
    for op in ops:
        found = call(op, aten_ops.MUL_TENSOR)
        if found is not None and isinstance(found.result.type, TensorType):
            dtypes.add(found.result.type.dtype)
    if q_type.dtype == f32 or not dtypes or dtypes == {q_type.dtype}:
        return False
    if dtypes == {f32}:
        return True
    raise NoMatch(f"the rope multiplies in {sorted(map(str, dtypes))}; the kernel rotates in "
                  f"{q_type.dtype} or in float32")


def rebase(norm: RmsNormOp, views: list[Operation]) -> SSAValue:
    """The norm's input seen through `views` (retargeted from the norm's output onto its input,
    which has the same type): what the fused op normalizes."""
    if not views:
        return norm.x
    views[0].operands = [norm.x, *views[0].operands[1:]]
    return views[-1].results[0]


def has_qk_norms(rope: Operation) -> bool:
    """A plain rope whose q and k are normalized per head (NoMatch where they are, but not as a
    fused kernel takes them)."""
    return isinstance(rope, RopeOp) and qk_norms(rope) is not None


def refuse_derived_k(k: SSAValue, follows: str,
                     takes: Callable[[Operation], bool] | None = None, depth: int = 8) -> None:
    """NoMatch where a cache write's `k` is a rope's rotated k that the fused rewrite does not
    take as written: a value made from it by the first operands of calls (an FP8 quant
    included), or the rope's q. `follows` says what the rewrite does look through; `takes(rope)`
    whether the caller's pass would take that rope (all by default). A k read in part out of a
    rotated piece of the buffer an in-place rotary rebuilt is refused too. Returns where `k`
    comes from no rope."""
    straddled: list[SSAValue] = []
    scattered_source(k, straddled=straddled)
    for piece in straddled:
        while (found := producer(piece, *aten_ops.VIEWS, aten_ops.FLATTEN_USING_INTS)) is not None:
            piece = found.arg(0)
        rope = piece.owner
        if isinstance(rope, RopeOp | QkNormRopeOp) and (takes is None or takes(rope)):
            raise NoMatch("the cache write reads part of a rotated piece of the buffer an "
                          "in-place rotary rebuilt, not the rotated k as the rope made it")
    value, steps = k, []
    while depth:
        owner = value.owner
        if isinstance(owner, RopeOp | QkNormRopeOp):
            if takes is not None and not takes(owner):
                return
            if steps:
                raise NoMatch(f"the rotated k reaches the cache write through {steps[-1]}, not "
                              f"{follows}: the fused kernel writes the rope's own k")
            raise NoMatch("the cache write stores the rope's rotated q or a k of another shape, "
                          "not the rotated k as the rope made it")
        if isinstance(owner, QuantFp8Op):
            steps.append(owner.name)
            value = owner.x
        else:
            found = call(owner) if isinstance(owner, Operation) else None
            if found is None or not found.args or not isinstance(found.arg(0), SSAValue):
                return
            steps.append(found.target)
            value = found.arg(0)
        depth -= 1
