"""enable-qk-norm-rope-fusion: per-head RMSNorm of q and of k feeding RoPE -> one kernel.

Anchored at `attn.rope` whose q and k are each the output of a `norm.rms_norm` over head_dim
(Qwen3, Qwen3-MoE, vLLM's native spelling and its `_C` ops alike: raising has made them one op
each), through views that keep every head's row intact (`rope_readings`). Any eps, weight
offset, rotary dim, style and table form (positions into a cos/sin cache, or cos and sin
computed in the graph; a multimodal rope's by section) is an attribute or operand.

The kernel rounds as the model did: the weight product as the norm's decomposition computes it
(`norm_readings`), the rotation in the model dtype with each product rounded, or in float32
rounded once where the rope's decomposition multiplies in float32. q and k normalized with
different eps or offsets, or otherwise than per head, are remarks.
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects.attn import RopeOp
from irfuse.dialects.fused import QkNormRopeOp
from irfuse.fusions.rope_readings import qk_norms, rotates_in_f32
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site

KERNEL = "qk_norm_rope"


class QkNormRopePattern(AnchorPattern):
    """RoPE of q and k that are both per-head norm outputs."""

    op_types = (RopeOp,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, RopeOp)
        return _fuse(op, rewriter, site)


def _fuse(rope: RopeOp, rewriter: PatternRewriter, site: Site) -> Outcome:
    norms = qk_norms(rope)
    if norms is None:
        return NO_CANDIDATE
    rope_f32 = rotates_in_f32(rope)
    site.require_kernel(KERNEL)

    q_in, k_in = norms.inputs()
    fused = QkNormRopeOp(
        q_in, k_in, norms.q.weight, norms.k.weight,  # type: ignore[arg-type]
        **rope.table_args(), eps=norms.eps, weight_offset=norms.weight_offset, weight_f32=norms.weight_f32, rope_f32=rope_f32,
        result_types=[rope.q_out.type, rope.k_out.type],  # type: ignore[union-attr]
    )
    fused.location = rope.location
    rewriter.insert(fused, InsertPoint.before(rope))
    for old, new in ((rope.q_out, fused.q_out), (rope.k_out, fused.k_out)):
        assert old is not None
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    rewriter.erase(rope)
    rewriter.erase(norms.q)
    rewriter.erase(norms.k)
    return REWROTE
