"""enable-qk-norm-rope-fusion: per-head RMSNorm of q and of k feeding RoPE -> one kernel.

Anchored at `attn.rope` whose q and k are each the output of a `norm.rms_norm` over head_dim
(Qwen3, Qwen3-MoE, vLLM's native spelling and its `_C` ops alike: raising has made them one op
each). Between the norm and the rope, views that keep every head's row intact may stand (vLLM
views back to `[T, H * D]` and the rotary views to heads again; Hugging Face transposes to
`[B, H, T, D]`): a row norm commutes with them, so the fused op normalizes the same views of the
norm's input. Any eps, weight offset, rotary dim, style and table form (positions into a
cos/sin cache, or cos and sin computed in the graph) is an attribute or operand.

The kernel rounds as the model did: the weight product as the norm's decomposition computes it
(`norm_readings`), the rotation in the model dtype with each product rounded, or in float32
rounded once where the rope's decomposition multiplies in float32. q and k normalized with
different eps or offsets, or otherwise than per head, are remarks.
"""

from __future__ import annotations

from xdsl.dialects.builtin import f32
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects.attn import RopeOp
from irfuse.dialects.fused import QkNormRopeOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.norm import RmsNormOp
from irfuse.fusions.norm_readings import KERNEL_DTYPES, weight_product_in_f32
from irfuse.ir.decomposition import decomposition_block
from irfuse.raising import aten_ops
from irfuse.raising.aten_ops import DIM_VIEWS as ROW_VIEWS
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, call, normalize_dim, only_user

KERNEL = "qk_norm_rope"



class QkNormRopePattern(AnchorPattern):
    """RoPE of q and k that are both per-head norm outputs."""

    op_types = (RopeOp,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, RopeOp)
        return _fuse(op, rewriter, site)


def _fuse(rope: RopeOp, rewriter: PatternRewriter, site: Site) -> Outcome:
    if rope.k is None:
        return NO_CANDIDATE
    q_norm, q_views = _normed(rope.q, rope)
    k_norm, k_views = _normed(rope.k, rope)
    if q_norm is None and k_norm is None:
        return NO_CANDIDATE
    if q_norm is None or k_norm is None:
        raise NoMatch(f"only {'k' if q_norm is None else 'q'} is normalized per head before the "
                      "rope; the kernel normalizes both")
    head_dim = rope.head_dim.value.data
    readings = {_reading(n, head_dim) for n in (q_norm, k_norm)}
    if len(readings) != 1:
        raise NoMatch("q and k are normalized with different eps, weight offsets or weight "
                      "rounding; the kernel reads one")
    eps, offset, weight_f32 = readings.pop()
    rope_f32 = rotates_in_f32(rope)
    site.require_kernel(KERNEL)

    q_in = _rebase(q_norm, q_views)
    k_in = _rebase(k_norm, k_views)
    fused = QkNormRopeOp(
        q_in, k_in, q_norm.weight, k_norm.weight,  # type: ignore[arg-type]
        positions=rope.positions, cos_sin_cache=rope.cos_sin_cache, cos=rope.cos, sin=rope.sin,
        eps=eps, is_neox=bool(rope.is_neox.value.data), rotary_dim=rope.rotary_dim.value.data,
        head_dim=head_dim, weight_offset=offset, weight_f32=weight_f32, rope_f32=rope_f32,
        result_types=[rope.q_out.type, rope.k_out.type],  # type: ignore[union-attr]
    )
    fused.location = rope.location
    rewriter.insert(fused, InsertPoint.before(rope))
    for old, new in ((rope.q_out, fused.q_out), (rope.k_out, fused.k_out)):
        assert old is not None
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    rewriter.erase(rope)
    rewriter.erase(q_norm)
    rewriter.erase(k_norm)
    return REWROTE


def _normed(value: SSAValue, rope: RopeOp) -> tuple[RmsNormOp | None, list[Operation]]:
    """The per-head norm whose output reaches `value` (an operand of `rope`) through row views
    used only on the way, and those views, nearest the norm first; (None, []) when `value` is
    not one."""
    views: list[Operation] = []
    while not isinstance(value.owner, RmsNormOp):
        found = call(value.owner) if isinstance(value.owner, Operation) else None
        if found is None or found.target not in ROW_VIEWS:
            return None, []
        if not _keeps_rows(found):
            if isinstance(found.arg(0).owner, RmsNormOp):
                raise NoMatch(f"the norm before the rope is viewed as heads of {_last_dim(found)} "
                              "after it: it spans all heads (OLMo2), and the kernel normalizes "
                              "per head")
            return None, []
        views.append(found.op)
        value = found.arg(0)
    norm = value.owner
    chain = [norm, *reversed(views), rope]
    if any(only_user(o.results[0]) is not chain[i + 1] for i, o in enumerate(chain[:-1])):
        raise NoMatch("a q/k norm's output is also read elsewhere: the norm must stay")
    return norm, list(reversed(views))


def _last_dim(found) -> str:
    out = found.result.type
    return str(out.dims[-1]) if isinstance(out, TensorType) else "?"


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


def _reading(norm: RmsNormOp, head_dim: int) -> tuple[float, float, bool]:
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
    than in q's dtype, from the products in the rope's decomposition (vLLM's `_C` rotary, with
    no products there, rotates in the model dtype)."""
    q_type = rope.q.type
    assert isinstance(q_type, TensorType)
    block = decomposition_block(rope)
    dtypes = set()
    for op in [] if block is None else block.ops:
        found = call(op, aten_ops.MUL_TENSOR)
        if found is not None and isinstance(found.result.type, TensorType):
            dtypes.add(found.result.type.dtype)
    if q_type.dtype == f32 or not dtypes or dtypes == {q_type.dtype}:
        return False
    if dtypes == {f32}:
        return True
    raise NoMatch(f"the rope multiplies in {sorted(map(str, dtypes))}; the kernel rotates in "
                  f"{q_type.dtype} or in float32")


def _rebase(norm: RmsNormOp, views: list[Operation]) -> SSAValue:
    """The norm's input seen through `views` (retargeted from the norm's output onto its input,
    which has the same type): what the fused op normalizes."""
    if not views:
        return norm.x
    views[0].operands = [norm.x, *views[0].operands[1:]]
    return views[-1].results[0]
