"""What each fusion pass could take, said apart from its patterns: no candidate goes unexplained.

A pass's pattern decides at each anchor whether there is a candidate (`NO_CANDIDATE`: nothing
here) and, for a candidate it leaves alone, why (a remark). A pattern that wrongly says "nothing
here" misses a fusion in silence, and nobody learns of it. So each fusion declares here, in a few
lines that do not share the pattern's matching code, which raised ops it could take: a norm
whose output is quantized, a SiLU·Mul whose output is, an attention whose output is, an
all-reduce that feeds a norm, a rope of normalized q/k, a cache write of a rotated k, ... After
the pass ran, every such op still in the graph (not fused) must carry a remark of the pass;
`account` gives each one that does not a remark saying so, so a silent miss is still reported
(and `tests/corpus/test_no_silent_miss.py` fails on it).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from irfuse import remarks
from irfuse.dialects.act import PadOp, SiluMulOp
from irfuse.dialects.attn import AttentionOp, KvCacheWriteOp, MlaAttentionOp, RopeOp
from irfuse.dialects.coll import AllGatherOp, AllReduceOp, ReduceScatterOp
from irfuse.dialects.gemm import MatmulOp, ScaledMatmulOp
from irfuse.dialects.norm import AddRmsNormOp, RmsNormOp
from irfuse.dialects.quant import QuantFp8Op, QuantNvfp4Op
from irfuse.raising import aten_ops
from irfuse.raising.match import block_ops, call, func_blocks, users

SILENT = "a candidate this pass neither fused nor explained (a silent miss: an irfuse bug)"
"""The remark `account` gives an unexplained candidate."""

_VIEWS = (*aten_ops.RESHAPES, aten_ops.FLATTEN_USING_INTS, aten_ops.TRANSPOSE_INT,
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


def _comes_from(value: SSAValue | None, kinds: tuple[type[Operation], ...],
                depth: int = 6) -> bool:
    """Whether `value` is made by an op of `kinds`, directly or through views (or an FP8
    quant, for a cache write's k)."""
    while value is not None and depth:
        owner = value.owner
        if isinstance(owner, kinds):
            return True
        found = call(owner) if isinstance(owner, Operation) else None
        if isinstance(owner, QuantFp8Op):
            value = owner.x
        elif found is not None and found.target in _VIEWS:
            value = found.arg(0)
        else:
            return False
        depth -= 1
    return False


def _norm_output_quantized(op: Operation) -> bool:
    return isinstance(op, _NORMS) and _reaches(op.y, _QUANTS)  # type: ignore[attr-defined]


def _norm_output_padded(op: Operation) -> bool:
    return isinstance(op, _NORMS) and _reaches(op.y, (PadOp,))  # type: ignore[attr-defined]


def _act_output_quantized(op: Operation) -> bool:
    return isinstance(op, SiluMulOp) and _reaches(op.y, _QUANTS)


def _attention_output_quantized(op: Operation) -> bool:
    return isinstance(op, AttentionOp | MlaAttentionOp) and _reaches(op.out, _QUANTS)


def _all_reduce_into_norm(op: Operation) -> bool:
    return isinstance(op, AllReduceOp) and any(isinstance(u, _NORMS) for u in users(op.y))


def _gemm_comms(op: Operation) -> bool:
    if isinstance(op, ReduceScatterOp):
        return _comes_from(op.x, (MatmulOp, ScaledMatmulOp), depth=1)
    if isinstance(op, AllGatherOp):
        return any(isinstance(u, MatmulOp | ScaledMatmulOp) for u in users(op.y))
    return False


def _rope_of_normed(op: Operation) -> bool:
    return (isinstance(op, RopeOp) and op.k is not None
            and (_comes_from(op.q, (RmsNormOp,)) or _comes_from(op.k, (RmsNormOp,))))


def _write_of_rotated_k(op: Operation) -> bool:
    from irfuse.dialects.fused import QkNormRopeOp

    return isinstance(op, KvCacheWriteOp) and _comes_from(op.k, (RopeOp, QkNormRopeOp))


CANDIDATES: dict[str, Callable[[Operation], bool]] = {
    "fuse-norm-quant": _norm_output_quantized,
    "fuse-act-quant": _act_output_quantized,
    "fuse-act-padding": _norm_output_padded,
    "fuse-attn-quant": _attention_output_quantized,
    "fuse-allreduce-rms": _all_reduce_into_norm,
    "enable-sp": _all_reduce_into_norm,
    "fuse-gemm-comms": _gemm_comms,
    "enable-qk-norm-rope-fusion": _rope_of_normed,
    "fuse-rope-kvcache": _write_of_rotated_k,
}
"""Pass name -> whether a raised op (left in the graph after the pass) is one it could take."""


def account(pass_name: str, module: ModuleOp) -> int:
    """After `pass_name` ran on `module`: give every candidate it left without a remark the
    `SILENT` remark; returns how many there were. Call inside the pass's `remarks` sink."""
    is_candidate = CANDIDATES.get(pass_name)
    if is_candidate is None:
        return 0
    sink = remarks.current()
    silent = 0
    for block in func_blocks(module):
        for op in block_ops(block):
            if is_candidate(op) and not sink.explains(op):
                remarks.missed(op, SILENT)
                silent += 1
    return silent
