"""raise-mla-kv-cache-write: the write of MLA's `[kv_c | k_pe]` rows into the paged latent cache.

    %flat = aten.call "aten::view.default"(%cache, [-1, 576])
    %row = aten.call "aten::cat.default"([%kv_c, %k_pe], -1)
    %w = aten.call "aten::index_copy.default"(%flat, 0, %slots, %row)      (or index_put by slots)
    %c2 = aten.call "aten::view.default"(%w, [1024, 16, 576])
    aten.call "aten::copy_.default"(%cache, %c2)
  ->
    %c2 = attn.mla_kv_cache_write %kv_c, %k_pe, %cache, %slots      (the copy_ stays: the store)

Anchored at `index_put` / `index_copy` into a `[num_blocks * block_size, width]` view of a 3-D
graph input (vLLM's `concat_and_cache_mla` layout), or `index_put` by block and offset into the
cache itself, of rows that concatenate the normed latent and the rope key (`[T, rope]`), the
updated cache copied back into the input. A 4-D cache is a k/v write (raise-kv-cache-write's).
"""

from __future__ import annotations

from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from irfuse.dialects.attn import MlaKvCacheWriteOp
from irfuse.raising.aten_ops import CAT, COPY_INPLACE, INDEX_COPY, RESHAPES
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, CallPattern, Outcome, PatternPass, Site
from irfuse.raising.match import (
    Call,
    NoMatch,
    call,
    normalize_dim,
    producer,
    raise_chain,
    users,
    users_follow,
    with_private,
)
from irfuse.raising.match import tensor_type as type_of
from irfuse.raising.raise_kv_cache_write import (
    INDEX_PUTS,
    _block_index,
    _check_slots,
    _view_back,
    _Write,
)


def _dims(value: object) -> tuple:
    t = type_of(value)
    return () if t is None else t.dims


def _is_latent_cache(value: object) -> bool:
    return isinstance(value, BlockArgument) and len(_dims(value)) == 3


def _flat_latent(dest: SSAValue) -> tuple[SSAValue, Operation] | None:
    """(cache, view) when `dest` is a `[slots, width]` view of a 3-D latent cache."""
    view = producer(dest, *RESHAPES)
    if view is None or not _is_latent_cache(view.arg(0)):
        return None
    nb, bs, width = _dims(view.arg(0))
    fd = _dims(dest)
    if len(fd) != 2 or fd[1] != width or (
            isinstance(nb, int) and isinstance(bs, int) and fd[0] != nb * bs):
        return None
    return view.arg(0), view.op


def _concat(new: SSAValue, write: _Write) -> tuple[SSAValue, SSAValue] | None:
    """(kv_c, k_pe): the two 2-D halves `cat` joins along the last dim into the rows written."""
    cat = producer(new, CAT)
    if cat is None:
        return None
    parts, dim = cat.arg(0), cat.arg(1, "dim", 0)
    if not isinstance(parts, list) or len(parts) != 2 or normalize_dim(dim, 2) != 1:
        return None
    if any(len(_dims(p)) != 2 for p in parts):
        return None
    write.ops.append(cat.op)
    return parts[0], parts[1]


def _match(found: Call) -> tuple[_Write, SSAValue, SSAValue] | None:
    if found.target in INDEX_PUTS:
        dest, indices, new = found.arg(0), found.arg(1, "indices"), found.arg(2, "values")
        if not isinstance(indices, list) or found.arg(3, "accumulate", False):
            return None
    else:
        dest, dim, index, new = found.arg(0), found.arg(1), found.arg(2), found.arg(3, "source")
        if normalize_dim(dim, max(1, len(_dims(dest)))) != 0:
            return None
        indices = [index]
    flat = _flat_latent(dest)
    if flat is not None:
        cache, view = flat
        if len(indices) != 1 or indices[0] is None:
            return None
        write = _Write(cache, new, found.result, found.op, ops=[view, found.op])
        parts = _concat(new, write)
        if parts is None:
            return None
        write.slots = _check_slots(indices[0], new)
        _view_back(write, found.result)
    elif _is_latent_cache(dest) and found.target in INDEX_PUTS:
        if len(indices) != 2 or any(i is None for i in indices):
            return None
        write = _Write(dest, new, found.result, found.op, ops=[found.op])
        parts = _concat(new, write)
        if parts is None:
            return None
        slots = _block_index(indices[0], indices[1], _dims(dest)[1], write.optional)
        write.slots = _check_slots(slots, new)
    else:
        return None
    back = [u for u in users(write.updated)
            if (c := call(u, COPY_INPLACE)) is not None and c.arg(0) is write.cache
            and c.arg(1, "src") is write.updated]
    if not back:
        raise NoMatch("the updated latent cache is not copied back into the cache input")
    return write, parts[0], parts[1]


def _raise(write: _Write, kv_c: SSAValue, k_pe: SSAValue, site: Site) -> Outcome:
    ops = sorted(with_private(write.ops, write.optional), key=lambda o: site.order[o])
    if not users_follow([write.updated], ops, site.order):
        raise NoMatch("the updated latent cache is read before the write is complete")
    assert write.slots is not None
    raised = MlaKvCacheWriteOp(kv_c, k_pe, write.cache, write.slots)
    site.block.insert_op_after(raised, ops[-1])
    raise_chain(raised, ops, [write.updated], "MLA cache write", verify=True)
    return REWROTE


class MlaKvCacheWritePattern(CallPattern):
    """An index write of concatenated [kv_c | k_pe] rows into a 3-D latent cache."""

    targets = (*INDEX_PUTS, INDEX_COPY)
    remark = "not an MLA KV-cache write"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        matched = _match(found)
        if matched is None:
            return NO_CANDIDATE
        return _raise(*matched, site)


class RaiseMlaKvCacheWrite(PatternPass):
    """Raise writes of MLA's `[kv_c | k_pe]` rows into the paged latent cache (index_put /
    index_copy + copy_ back) to `attn.mla_kv_cache_write`. No options."""

    name = "raise-mla-kv-cache-write"
    patterns = (MlaKvCacheWritePattern(),)
