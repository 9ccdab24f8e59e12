"""RoPE of q and k (with the per-head norms before it, when a fusion takes them too) and vLLM's
own cache write of the rotated k (`attn.vllm_kv_cache_update`, the cache found through the
forward context at run time) -> one `fused.rope_vllm_kv_cache_update` that writes the layer's
cache and returns the rotated q and k: the rewrite shared by the RoPE + KV-cache fusion and the
QK-norm + RoPE + KV-cache one inside vLLM (`fuse_vllm_write_of_rope`).

The write's k must be the rope's rotated k through order-keeping reshapes, or through vLLM's
rebuild of the qkv buffer the in-place `_C.rotary_embedding` wrote (`rotated_source`). The fused
op goes where the rope was. Its kernel's lowering, and its run-time read of vLLM's forward
context: `irfuse/fusions/fuse_rope_kvcache/ops.py`.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import IntAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint, Rewriter

from irfuse.dialects import aten, fused
from irfuse.dialects.attn import RopeOp, VllmKvCacheUpdateOp
from irfuse.dialects.fused import QkNormRopeOp
from irfuse.fusions.rope_readings import (
    QkNorms,
    has_qk_norms,
    qk_norms,
    refuse_derived_k,
    rotates_in_f32,
)
from irfuse.fusions.scattered import scattered_source
from irfuse.ir import call_args
from irfuse.raising import aten_ops
from irfuse.raising.aten_ops import RESHAPES_FLATTENS_AND_ALIAS as KEEP_ORDER
from irfuse.raising.aten_ops import VIEWS_FLATTENS_AND_SLICE as HOISTABLE
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, Outcome, Site
from irfuse.raising.match import NoMatch, call, erase_unused, producer, tensor_type

KERNEL = "rope_vllm_kv_cache_update"
FOLLOWED = "an order-keeping reshape to its shape nor vLLM's rebuild of the qkv buffer"
"""What `rotated_source` looks through to find the rope."""


def rotated_source(value: SSAValue, path: list[Operation] | None = None
                   ) -> RopeOp | QkNormRopeOp | None:
    """The rope whose rotated k `value` is, through order-keeping reshapes to the same shape and
    vLLM's rebuild of the buffer `_C.rotary_embedding` wrote in place (the piece read back out
    of the scatters: `irfuse.fusions.scattered`). `path` collects the reshapes and views passed,
    users first."""
    want = tensor_type(value)
    path = [] if path is None else path
    while True:
        owner = value.owner
        if isinstance(owner, RopeOp | QkNormRopeOp) and value is owner.k_out:
            got = tensor_type(value)
            return owner if got is not None and want is not None and got.dims == want.dims \
                else None
        found = producer(value, *KEEP_ORDER)
        if found is not None:
            path.append(found.op)
            value = found.arg(0)
            continue
        piece = scattered_source(value, path)
        if piece is None:
            return None
        value = piece


def _as_slice(value: SSAValue) -> tuple[SSAValue, tuple] | None:
    """(base, (dim, start, end)) where `value` is a step-1 slice of base, or a piece of a split
    of it into static sizes."""
    found = producer(value, aten_ops.SLICE_TENSOR)
    if found is not None:
        rng = _slice_range(found)
        return None if rng is None else (found.arg(0), rng)
    split = call(getattr(value, "owner", None), aten_ops.SPLIT_WITH_SIZES)
    if split is None:
        return None
    sizes, dim = split.arg(1), split.arg(2, "dim", 0)
    if not isinstance(sizes, list) or not all(isinstance(n, int) for n in sizes):
        return None
    index = value.index  # type: ignore[attr-defined]
    start = sum(sizes[:index])
    base_t = tensor_type(split.arg(0))
    if base_t is None or not isinstance(dim, int):
        return None
    return split.arg(0), (dim % base_t.rank, start, start + sizes[index])


def _slice_range(found: Any, at: int = 1) -> tuple[Any, Any, Any] | None:
    """(dim, start, end) of a step-1 slice (`at` 1) or slice_scatter (`at` 2), dim >= 0."""
    args = [found.arg(at + i) for i in range(3)]
    step = found.arg(at + 3, "step", 1)
    rank = getattr(tensor_type(found.arg(0)), "rank", None)
    if step != 1 or not all(isinstance(a, int) for a in args) or rank is None:
        return None
    return (args[0] % rank, args[1], args[2])


def _disjoint(a: tuple | None, b: tuple | None) -> bool:
    """Two step-1 ranges of one dim that share no element."""
    if a is None or b is None or a[0] != b[0]:
        return False
    return a[2] <= b[1] or b[2] <= a[1]


def _hoist(value: SSAValue, before: Operation, moved: list[Operation],
           rewires: list[tuple[Operation, int, SSAValue]]) -> SSAValue:
    """`value`, or a value equal to it, defined before `before`: it is, or it is a view of values
    that are, and the view ops move up (appended to `moved`, in order); NoMatch otherwise. A
    piece of vLLM's rebuilt qkv buffer that the scattered pieces do not overlap (v, next to the
    rotated q and k) is read from the buffer before the scatters: a new slice. Nothing changes
    here: `rewires` lists the operands to set once the whole chain is known to move."""
    if isinstance(value, BlockArgument):
        return value
    owner = value.owner
    assert isinstance(owner, Operation)
    if owner.parent_block() is not before.parent_block() or owner.is_before_in_block(before):
        return value
    piece = _as_slice(value)
    if piece is not None:
        base, rng = piece
        skipped = False
        while (scatter := producer(base, aten_ops.SLICE_SCATTER)) is not None \
                and _disjoint(rng, _slice_range(scatter, 2)):
            base, skipped = scatter.arg(0), True
        if skipped or call(owner, aten_ops.SLICE_TENSOR) is None:
            base = _hoist(base, before, moved, rewires)
            new = aten.CallOp(aten_ops.SLICE_TENSOR, [base],
                              [call_args.OperandRefAttr(IntAttr(0)), *map(IntAttr, rng)],
                              [value.type])
            new.location = owner.location
            moved.append(new)
            return new.results[0]
    if call(owner, *HOISTABLE) is None:
        raise NoMatch(f"v is computed after the rope ({found_name(owner)}); the fused op takes "
                      "the rope's place")
    for i, operand in enumerate(list(owner.operands)):
        new_operand = _hoist(operand, before, moved, rewires)
        if new_operand is not operand:
            rewires.append((owner, i, new_operand))  # the same elements
    moved.append(owner)
    return value


def found_name(op: Operation) -> str:
    found = call(op)
    return found.target if found is not None else op.name


def fuse_vllm_write_of_rope(op: VllmKvCacheUpdateOp, rewriter: PatternRewriter, site: Site, *,
                            with_norms: bool = False) -> Outcome:
    """vLLM's write `op` and the rope whose rotated k it stores -> one fused op at the rope's
    place. `with_norms`: only a plain rope whose q and k are normalized per head is a candidate,
    and its norms go into the op too."""
    path: list[Operation] = []
    rope = rotated_source(op.k, path)
    if rope is None:
        refuse_derived_k(op.k, FOLLOWED, has_qk_norms if with_norms else None)
        return NO_CANDIDATE
    if not with_norms:
        return fuse_vllm_write(op, rope, path, rewriter, site)
    if not isinstance(rope, RopeOp):
        return NO_CANDIDATE  # norms + rope fused already: the RoPE + KV-cache fusion's
    norms = qk_norms(rope)
    if norms is None:
        return NO_CANDIDATE
    return fuse_vllm_write(op, rope, path, rewriter, site, norms)


def fuse_vllm_write(op: VllmKvCacheUpdateOp, rope: RopeOp | QkNormRopeOp, path: list[Operation],
               rewriter: PatternRewriter, site: Site, norms: QkNorms | None = None) -> Outcome:
    """`rope` (with `norms`, those of a plain rope, too) and vLLM's write `op` of its rotated k
    (reached through `path`) -> one `fused.rope_vllm_kv_cache_update` at the rope's place; NoMatch
    where it cannot, before anything changes.

    ```mlir
    %qr, %kr = attn.rope %q, k %k, positions %pos, cos_sin_cache %c {...}
    %kv = aten.call "aten::view.default"(%kf, [-1, 8, 128])   // views of %kr, any number
    %dep = attn.vllm_kv_cache_update %kv, %v, layer %ln {layer_name = "L"}
    // becomes, at the rope's place
    %qr, %kr, %dep = fused.rope_vllm_kv_cache_update %q, %k, %v, positions %pos,
        cos_sin_cache %c, layer %ln {layer_name = "L", ...}
    ```

    The rope's q and k are `[T, heads, head_dim]`; v (and the views that make it, which move up
    with it) must not be computed after the rope. Every reader of the rotated q and k (the
    attention) reads the fused op's results; the write's dummy is its third."""
    q_type = tensor_type(rope.q)
    if q_type is None or q_type.rank != 3 or tensor_type(rope.k).rank != 3:  # type: ignore[union-attr]
        raise NoMatch("the rope's q and k are not [tokens, heads, head_dim]")
    rope_f32 = (rope.rope_f32 is not None if isinstance(rope, QkNormRopeOp)
                else rotates_in_f32(rope))
    site.require_kernel(KERNEL)
    moved: list[Operation] = []
    rewires: list[tuple[Operation, int, SSAValue]] = []
    try:
        v = _hoist(op.v, rope, moved, rewires)
    except NoMatch:
        for built in moved:
            if built.parent is None:
                built.erase()
        raise
    for owner, index, value in rewires:
        owner.operands[index] = value
    for view in moved:
        if view.parent is not None:
            view.detach()
        Rewriter.insert_op(view, InsertPoint.before(rope))
    q, k = rope.q, rope.k
    if isinstance(rope, QkNormRopeOp):
        weights = (rope.q_weight, rope.k_weight)
        eps = rope.eps.value.data
        offset = rope.weight_offset.value.data
        weight_f32 = rope.weight_f32 is not None
    elif norms is not None:
        q, k = norms.inputs()
        weights = (norms.q.weight, norms.k.weight)
        eps, offset, weight_f32 = norms.eps, norms.weight_offset, norms.weight_f32
    else:
        weights, eps, offset, weight_f32 = (None, None), None, 0.0, False
    fused_op = fused.RopeVllmKvCacheUpdateOp(
        q, k, v,  # type: ignore[arg-type]
        q_weight=weights[0], k_weight=weights[1],
        **rope.table_args(), layer=op.layer, layer_name=op.layer_name.data,
        eps=eps, weight_offset=offset,
        weight_f32=weight_f32, rope_f32=rope_f32,
        result_types=[rope.q_out.type, rope.k_out.type, op.kv_cache_dep.type],  # type: ignore[union-attr]
    )
    fused_op.location = op.location
    rewriter.insert(fused_op, InsertPoint.before(rope))
    assert rope.k_out is not None
    for old, new in ((rope.q_out, fused_op.q_out), (rope.k_out, fused_op.k_out),
                     (op.kv_cache_dep, fused_op.kv_cache_dep)):
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    rewriter.erase(op)
    rewriter.erase(rope)
    erase_unused(path, rewriter)  # the views that only led k to the write
    if norms is not None:
        rewriter.erase(norms.q)
        rewriter.erase(norms.k)
    return REWROTE
