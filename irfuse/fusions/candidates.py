"""What a fusion pass could take, said apart from its patterns: no candidate goes unexplained.

A pass's pattern decides at each anchor whether there is a candidate (`NO_CANDIDATE`: nothing
here) and, for a candidate it leaves alone, why (a remark). A pattern that wrongly says "nothing
here" misses a fusion in silence, and nobody learns of it. So each fusion's declaration names
(`Fusion.candidate`) one predicate here, a few lines that do not share the pattern's matching
code, saying which raised ops it could take: a norm whose output is quantized or padded, an
activation or an attention (irfuse's or vLLM's) whose output is quantized, an all-reduce that
feeds a norm, a GEMM beside a collective, a rope of normalized q/k, a cache write (irfuse's,
vLLM's or MLA's latent one) of a rotated k, two norms on slices of one projection, ... After
the pass ran, every such op still in the graph (not fused) must carry a remark of the pass;
`account` gives each one that does not a remark saying so, so a silent miss is still reported
(and `tests/corpus/test_no_silent_miss.py` fails on it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from irfuse import remarks
from irfuse.dialects.act import PadOp, SiluMulOp
from irfuse.dialects.attn import (
    AttentionOp,
    KvCacheWriteOp,
    MlaAttentionOp,
    MlaKvCacheWriteOp,
    RopeOp,
    VllmAttentionOp,
    VllmKvCacheUpdateOp,
    VllmMlaAttentionOp,
    VllmMlaKvCacheUpdateOp,
)
from irfuse.dialects.coll import AllGatherOp, AllReduceOp, ReduceScatterOp
from irfuse.dialects.fused import QkNormRopeOp
from irfuse.dialects.gemm import MatmulOp, ScaledMatmulOp
from irfuse.dialects.norm import AddRmsNormOp, RmsNormOp
from irfuse.dialects.quant import QuantFp8Op, QuantNvfp4Op
from irfuse.raising import aten_ops
from irfuse.raising.match import Call, block_ops, call, func_blocks, users

if TYPE_CHECKING:
    from irfuse.fusions.declare import Fusion

SILENT = "a candidate this pass neither fused nor explained (a silent miss: an irfuse bug)"
"""The remark `account` gives an unexplained candidate."""

_VIEWS = (*aten_ops.RESHAPES, aten_ops.FLATTEN_USING_INTS, aten_ops.UNFLATTEN_INT,
          aten_ops.TRANSPOSE_INT,
          aten_ops.PERMUTE, aten_ops.UNSQUEEZE, aten_ops.SQUEEZE_DIM, aten_ops.ALIAS,
          aten_ops.CLONE)
"""Ops that move no value: a candidate's output may reach its consumer through them."""

_NORMS = (RmsNormOp, AddRmsNormOp)
_QUANTS = (QuantFp8Op, QuantNvfp4Op)


def _reaches(value: SSAValue, kinds: tuple[type[Operation], ...], depth: int = 6) -> bool:
    """Whether `value` is read by an op of `kinds`, directly or through value-preserving
    views."""
    for user in users(value):
        if isinstance(user, kinds) and user.operands and user.operands[0] is value:
            return True
        found = call(user, *_VIEWS)
        if found is not None and depth and _reaches(found.result, kinds, depth - 1):
            return True
    return False


def _source(value: SSAValue | None, kinds: tuple[type[Operation], ...],
            depth: int = 6) -> Operation | None:
    """The op of `kinds` that made `value`, directly or through views (or an FP8 quant, for a
    cache write's k); None if none did."""
    while value is not None and depth:
        owner = value.owner
        if isinstance(owner, kinds):
            return owner
        found = call(owner) if isinstance(owner, Operation) else None
        if isinstance(owner, QuantFp8Op):
            value = owner.x
        elif found is not None and found.target in _VIEWS:
            value = found.arg(0)
        else:
            return None
        depth -= 1
    return None


def _comes_from(value: SSAValue | None, kinds: tuple[type[Operation], ...],
                depth: int = 6) -> bool:
    """Whether `value` is made by an op of `kinds`, directly or through views (`_source`)."""
    return _source(value, kinds, depth) is not None


def norm_output_quantized(op: Operation) -> bool:
    """A (residual add +) RMSNorm whose output a quant reads."""
    return isinstance(op, _NORMS) and _reaches(op.y, _QUANTS)  # type: ignore[attr-defined]


def norm_output_padded(op: Operation) -> bool:
    """A (residual add +) RMSNorm whose output a constant pad reads."""
    return isinstance(op, _NORMS) and _reaches(op.y, (PadOp,))  # type: ignore[attr-defined]


def act_output_quantized(op: Operation) -> bool:
    """A SiLU·Mul whose output a quant reads."""
    return isinstance(op, SiluMulOp) and _reaches(op.y, _QUANTS)


def attention_output_quantized(op: Operation) -> bool:
    """An attention or MLA, irfuse's or vLLM's own call, whose output a quant reads."""
    return (isinstance(op, AttentionOp | MlaAttentionOp | VllmAttentionOp | VllmMlaAttentionOp)
            and _reaches(op.out, _QUANTS))


def all_reduce_into_norm(op: Operation) -> bool:
    """An all-reduce a (residual add +) RMSNorm reads."""
    return isinstance(op, AllReduceOp) and any(isinstance(u, _NORMS) for u in users(op.y))


def gemm_beside_collective(op: Operation) -> bool:
    """A reduce-scatter of a GEMM's output, or an all-gather a GEMM reads."""
    if isinstance(op, ReduceScatterOp):
        return _comes_from(op.x, (MatmulOp, ScaledMatmulOp), depth=1)
    if isinstance(op, AllGatherOp):
        return any(isinstance(u, MatmulOp | ScaledMatmulOp) for u in users(op.y))
    return False


def rope_of_normed(op: Operation) -> bool:
    """A rope of q and k, either made by an RMSNorm."""
    return (isinstance(op, RopeOp) and op.k is not None
            and (_comes_from(op.q, (RmsNormOp,)) or _comes_from(op.k, (RmsNormOp,))))


def cache_write_of_rotated_k(op: Operation) -> bool:
    """A paged KV-cache write, irfuse's or vLLM's, of a k a rope (or a fused norm + rope)
    rotated."""
    return (isinstance(op, KvCacheWriteOp | VllmKvCacheUpdateOp)
            and _comes_from(op.k, (RopeOp, QkNormRopeOp)))


def cache_write_of_rotated_normed_k(op: Operation) -> bool:
    """A paged KV-cache write, irfuse's or vLLM's, of the k of a rope whose q or k an RMSNorm
    made."""
    if not isinstance(op, KvCacheWriteOp | VllmKvCacheUpdateOp):
        return False
    rope = _source(op.k, (RopeOp,))
    return isinstance(rope, RopeOp) and rope_of_normed(rope)


def latent_cache_write_of_rotated_k_pe(op: Operation) -> bool:
    """An MLA latent-cache write, irfuse's or vLLM's, of a k_pe a rope rotated."""
    return (isinstance(op, MlaKvCacheWriteOp | VllmMlaKvCacheUpdateOp)
            and _comes_from(op.k_pe, (RopeOp,)))


def first_of_norms_on_one_projection(op: Operation) -> bool:
    """The first (in block order) of two or more RMSNorms on last-dim slices of one tensor: the
    candidate stands for the group."""
    root = _last_dim_slice_root(op.x) if isinstance(op, RmsNormOp) else None
    if root is None:
        return False
    norms = [u for u in _slice_readers(root) if isinstance(u, RmsNormOp)]
    return len(norms) >= 2 and all(n is op or op.is_before_in_block(n) for n in norms)


def _last_dim_slice_root(value: SSAValue) -> SSAValue | None:
    """The tensor `value` is a last-dim split piece or slice of (through several); None if
    it is none."""
    root = None
    while (found := _last_dim_slice(value)) is not None:
        value = root = found.arg(0)
    return root


def _last_dim_slice(value: SSAValue) -> Call | None:
    """The call whose result `value` is, where it splits or slices its input's last dim."""
    found = call(value.owner, *aten_ops.SPLITS, aten_ops.SLICE_TENSOR) \
        if isinstance(value.owner, Operation) else None
    rank = getattr(getattr(found.arg(0), "type", None), "rank", 0) if found else 0
    dim = (found.arg(2, "dim", 0) if found.target in aten_ops.SPLITS
           else found.arg(1, "dim", 0)) if found else None
    return found if isinstance(dim, int) and rank and dim % rank == rank - 1 else None


def _slice_readers(root: SSAValue, depth: int = 4) -> list[Operation]:
    """The ops reading last-dim slices of `root`, through splits and slices of slices."""
    found: list[Operation] = []
    for user in users(root):
        for piece in (r for r in user.results if _last_dim_slice(r) is not None):
            for reader in users(piece):
                nested = bool(reader.results) and _last_dim_slice(reader.results[0]) is not None
                found += _slice_readers(piece, depth - 1) if nested and depth else [reader]
    return list(dict.fromkeys(found))


def account(fusion: Fusion, module: ModuleOp) -> int:
    """After `fusion`'s pass ran on `module`: give every candidate (its declaration's
    `candidate` predicate, looked up here) it left without a remark the `SILENT` remark;
    returns how many there were. Call inside the pass's `remarks` sink."""
    if fusion.candidate is None:
        return 0
    is_candidate: Callable[[Operation], bool] = getattr(sys.modules[__name__], fusion.candidate)
    sink = remarks.current()
    silent = 0
    for block in func_blocks(module):
        for op in block_ops(block):
            if is_candidate(op) and not sink.explains(op):
                remarks.missed(op, SILENT)
                silent += 1
    return silent
