"""MLA's RoPE of q_pe and k_pe -> the latent-cache write of `[kv_c | rotated k_pe]` -> one fused
op: `attn.rope` and `attn.mla_kv_cache_write` become `fused.rope_mla_kv_cache_write`; `attn.rope`
and vLLM's own write (`attn.vllm_mla_kv_cache_update`, the layer's cache found through vLLM's
forward context at run time) become `fused.rope_vllm_mla_kv_cache_update`
(`filecheck/rewrites/fuse-rope-kvcache-cat-mla.mlir` shows both).

Anchored at the write whose k_pe is a rope's rotated k, seen through views that keep its elements
in order (reshape, view, squeeze, alias) or, where vLLM's rotary ran in place on views of one
buffer (MLA's `q[..., nope:]` and k_pe), through the read of the rebuilt buffer
(`irfuse.fusions.scattered`). The rotated q_pe and k_pe stay results (MLA's attention reads
both); the fused op goes where the write was, or where the rope was when something reads a
rotated value before the write (the write's other operands then defined there). A write of an
unrotated k_pe is no candidate; one of a value computed from the rotated k_pe is a remark.
"""

from __future__ import annotations

from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects.attn import MlaKvCacheWriteOp, RopeOp, VllmMlaKvCacheUpdateOp
from irfuse.dialects.fused import RopeMlaKvCacheWriteOp, RopeVllmMlaKvCacheUpdateOp
from irfuse.dialects.irfuse import TensorType
from irfuse.fusions.rope_readings import refuse_derived_k, rotates_in_f32
from irfuse.fusions.scattered import scattered_source
from irfuse.raising import aten_ops
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, call, erase_unused, only_user

KERNELS = {MlaKvCacheWriteOp: "rope_mla_kv_cache_write",
           VllmMlaKvCacheUpdateOp: "rope_vllm_mla_kv_cache_update"}

K_VIEWS = (*aten_ops.RESHAPES, aten_ops.SQUEEZE, aten_ops.SQUEEZE_DIM, aten_ops.SQUEEZE_DIMS,
           aten_ops.ALIAS)
"""Views of the rotated k_pe `[T, 1, R]` the write may read it through (to `[T, R]`)."""

Write = MlaKvCacheWriteOp | VllmMlaKvCacheUpdateOp


class RopeMlaKvCachePattern(AnchorPattern):
    """An MLA latent-cache write, irfuse's or vLLM's, of a freshly rotated k_pe."""

    op_types = (MlaKvCacheWriteOp, VllmMlaKvCacheUpdateOp)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, Write)
        return _fuse(op, rewriter, site)


def _rotated(value: SSAValue) -> tuple[RopeOp, list[Operation], list[Operation]] | None:
    """The rope whose rotated k `value` views, the views that lead only there (nearest the rope
    first, erased with the write), and the reads of a rebuilt buffer passed on the way (vLLM's
    in-place rotary: `scattered_source`; left to whoever else reads them)."""
    views: list[Operation] = []
    through: list[Operation] = []
    read_back = False  # past a read of a rebuilt buffer: the views there are not the write's
    while True:
        owner = value.owner
        if isinstance(owner, RopeOp):
            if owner.k_out is not value:
                return None
            return owner, list(reversed(views)), through
        found = call(owner, *K_VIEWS) if isinstance(owner, Operation) else None
        if found is not None:
            (through if read_back else views).append(found.op)
            value = found.arg(0)
            continue
        piece = scattered_source(value, through)
        if piece is None:
            return None
        through[:0] = views  # views of a read-back buffer: others may read them too
        views, read_back, value = [], True, piece


def _defined_before(value: SSAValue | None, op: Operation) -> bool:
    if value is None:
        return True
    if isinstance(value, BlockArgument):
        return isinstance(value.owner, Block) and value.owner is op.parent_block()
    owner = value.owner
    return isinstance(owner, Operation) and owner.parent is op.parent and \
        owner.is_before_in_block(op)


def _fused_op(write: Write, rope: RopeOp, rope_f32: bool
              ) -> RopeMlaKvCacheWriteOp | RopeVllmMlaKvCacheUpdateOp:
    """The fused op of `rope` and `write`, its results typed as theirs."""
    assert rope.k_out is not None
    tables = {"positions": rope.positions, "cos_sin_cache": rope.cos_sin_cache, "cos": rope.cos,
              "sin": rope.sin, "is_neox": bool(rope.is_neox.value.data),
              "rotary_dim": rope.rotary_dim.value.data, "head_dim": rope.head_dim.value.data,
              "rope_f32": rope_f32}
    if isinstance(write, MlaKvCacheWriteOp):
        return RopeMlaKvCacheWriteOp(
            rope.q, rope.k, write.kv_c, write.kv_cache, write.slot_mapping, **tables,
            result_types=[rope.q_out.type, rope.k_out.type, write.kv_cache_out.type])
    return RopeVllmMlaKvCacheUpdateOp(
        rope.q, rope.k, write.kv_c, write.k_scale, layer=write.layer,
        layer_name=write.layer_name.data, kv_cache_dtype=write.kv_cache_dtype.data, **tables,
        result_types=[rope.q_out.type, rope.k_out.type, write.kv_cache_dep.type])


def _fuse(write: Write, rewriter: PatternRewriter, site: Site) -> Outcome:
    found = _rotated(write.k_pe)
    if found is None:
        refuse_derived_k(write.k_pe, "a view that keeps its elements in order nor a read of "
                         "the buffer an in-place rotary rebuilt")
        return NO_CANDIDATE
    rope, views, through = found
    assert rope.k is not None and rope.k_out is not None
    chain = [*views, write]
    if any(only_user(v.results[0]) is not chain[i + 1] for i, v in enumerate(views)):
        raise NoMatch("a view of the rotated k_pe on the way to the cache write is also read "
                      "elsewhere")
    if rope.sections() is not None:
        raise NoMatch("the rope is multimodal (mrope_section): the MLA kernel reads one position "
                      "per token")
    q_type, k_type = rope.q.type, rope.k.type
    assert isinstance(q_type, TensorType) and isinstance(k_type, TensorType)
    if q_type.rank != 3:
        raise NoMatch(f"q_pe is {q_type.rank}-D; the fused kernel takes [tokens, heads, rope_dim]")
    if k_type.rank not in (2, 3) or (k_type.rank == 3 and k_type.dims[1] != 1):
        raise NoMatch(f"k_pe is {k_type}; MLA's rope key is one head, [T, 1, rope_dim]")
    rope_f32 = rotates_in_f32(rope)
    early = [u.operation for r in (rope.q_out, rope.k_out) for u in r.uses
             if u.operation not in chain and u.operation.is_before_in_block(write)]
    others = [v for v in write.operands if v is not write.k_pe]
    if not early:
        point = InsertPoint.before(write)
    elif all(_defined_before(v, rope) for v in others):
        point = InsertPoint.before(rope)
    else:
        raise NoMatch("the rotated q_pe or k_pe is read before the cache write, and the write's "
                      "other operands are made after the rope: no place for the fused op")
    site.require_kernel(KERNELS[type(write)])
    fused = _fused_op(write, rope, rope_f32)
    fused.location = write.location
    rewriter.insert(fused, point)
    for old, new in zip((*rope.results, write.results[0]), fused.results, strict=True):
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    rewriter.erase(write)
    for view in reversed(views):
        rewriter.erase(view)
    erase_unused(through, rewriter)
    rewriter.erase(rope)
    return REWROTE
