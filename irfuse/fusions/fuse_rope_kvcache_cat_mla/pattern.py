"""MLA's RoPE of q_pe and k_pe -> the latent-cache write of
`[kv_c | rotated k_pe]` -> one `fused.rope_mla_kv_cache_write`.

    %qr, %kr = attn.rope %q_pe, k %k_pe, positions %pos, cos_sin_cache %cs {...}
    %kr2 = aten.call "aten::view.default"(%kr, [-1, 64])          (a view to [T, rope_dim])
    %c2 = attn.mla_kv_cache_write %kv_c, %kr2, %cache, %slots
  ->
    %qr, %kr, %c2 = fused.rope_mla_kv_cache_write %q_pe, %k_pe, %kv_c, positions %pos,
        cos_sin_cache %cs, %cache, %slots {...}

Anchored at `attn.mla_kv_cache_write` whose k_pe is a rope's rotated k, seen through views that
keep its elements in order (reshape, view, squeeze, alias). The rotated q_pe and k_pe stay results
(MLA's attention reads both), so they may have other readers; the fused op goes where the write
was, or where the rope was when something reads a rotated value before the write (then the
write's kv_c, cache and slots must already be defined there). A write of an unrotated k_pe is no
candidate.
"""

from __future__ import annotations

from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects.attn import MlaKvCacheWriteOp, RopeOp
from irfuse.dialects.fused import RopeMlaKvCacheWriteOp
from irfuse.dialects.irfuse import TensorType
from irfuse.fusions.rope_readings import rotates_in_f32
from irfuse.raising import aten_ops
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, call, only_user

KERNEL = "rope_mla_kv_cache_write"

K_VIEWS = (*aten_ops.RESHAPES, aten_ops.SQUEEZE, aten_ops.SQUEEZE_DIM, aten_ops.SQUEEZE_DIMS,
           aten_ops.ALIAS)
"""Views of the rotated k_pe `[T, 1, R]` the write may read it through (to `[T, R]`)."""


class RopeMlaKvCachePattern(AnchorPattern):
    """An MLA latent-cache write of a freshly rotated k_pe."""

    op_types = (MlaKvCacheWriteOp,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, MlaKvCacheWriteOp)
        return _fuse(op, rewriter, site)


def _rotated(value: SSAValue) -> tuple[RopeOp, list[Operation]] | None:
    """The rope whose rotated k `value` views, and the views (nearest the rope first)."""
    views: list[Operation] = []
    while True:
        owner = value.owner
        if isinstance(owner, RopeOp):
            if owner.k_out is not value:
                return None
            return owner, list(reversed(views))
        found = call(owner, *K_VIEWS) if isinstance(owner, Operation) else None
        if found is None:
            return None
        views.append(found.op)
        value = found.arg(0)


def _defined_before(value: SSAValue, op: Operation) -> bool:
    if isinstance(value, BlockArgument):
        return isinstance(value.owner, Block) and value.owner is op.parent_block()
    owner = value.owner
    return isinstance(owner, Operation) and owner.parent is op.parent and \
        owner.is_before_in_block(op)


def _fuse(write: MlaKvCacheWriteOp, rewriter: PatternRewriter, site: Site) -> Outcome:
    found = _rotated(write.k_pe)
    if found is None:
        return NO_CANDIDATE
    rope, views = found
    assert rope.k is not None and rope.k_out is not None
    chain = [*views, write]
    if any(only_user(v.results[0]) is not chain[i + 1] for i, v in enumerate(views)):
        raise NoMatch("a view of the rotated k_pe on the way to the cache write is also read "
                      "elsewhere")
    q_type, k_type = rope.q.type, rope.k.type
    assert isinstance(q_type, TensorType) and isinstance(k_type, TensorType)
    if q_type.rank != 3:
        raise NoMatch(f"q_pe is {q_type.rank}-D; the fused kernel takes [tokens, heads, rope_dim]")
    if k_type.rank not in (2, 3) or (k_type.rank == 3 and k_type.dims[1] != 1):
        raise NoMatch(f"k_pe is {k_type}; MLA's rope key is one head, [T, 1, rope_dim]")
    rope_f32 = rotates_in_f32(rope)
    early = [u.operation for r in (rope.q_out, rope.k_out) for u in r.uses
             if u.operation not in chain and u.operation.is_before_in_block(write)]
    if not early:
        point = InsertPoint.before(write)
    elif all(_defined_before(v, rope) for v in (write.kv_c, write.kv_cache,
                                                write.slot_mapping)):
        point = InsertPoint.before(rope)
    else:
        raise NoMatch("the rotated q_pe or k_pe is read before the cache write, and the write's "
                      "latent, cache or slots are made after the rope: no place for the fused op")
    site.require_kernel(KERNEL)

    fused = RopeMlaKvCacheWriteOp(
        rope.q, rope.k, write.kv_c, write.kv_cache, write.slot_mapping,
        positions=rope.positions, cos_sin_cache=rope.cos_sin_cache, cos=rope.cos, sin=rope.sin,
        is_neox=bool(rope.is_neox.value.data), rotary_dim=rope.rotary_dim.value.data,
        head_dim=rope.head_dim.value.data, rope_f32=rope_f32,
        result_types=[rope.q_out.type, rope.k_out.type, write.kv_cache_out.type],
    )
    fused.location = write.location
    rewriter.insert(fused, point)
    for old, new in ((rope.q_out, fused.q_out), (rope.k_out, fused.k_out),
                     (write.kv_cache_out, fused.kv_cache_out)):
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    rewriter.erase(write)
    for view in reversed(views):
        rewriter.erase(view)
    rewriter.erase(rope)
    return REWROTE
