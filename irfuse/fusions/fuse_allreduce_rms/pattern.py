"""fuse-allreduce-rms: a sum all-reduce, the (residual add +) RMSNorm of its result and, where
the norm feeds one, its FP8 (static, per-token, per-group) or NVFP4 quant -> one
`fused.all_reduce_rms_norm`.

Anchored at `coll.all_reduce`. Its result feeds `norm.rms_norm` (any other reader of the
all-reduced value, a later norm's residual add included, then reads the op's `residual_out`:
vLLM's first layer) or `norm.add_rms_norm` as either addend (then the all-reduced value must
have no other reader: the op returns the sum). The quants are found as the norm + quant fusion
finds them (`quant_consumers`); quants the op cannot write stay apart, with a remark, and the
all-reduce + norm still fuse.

The op names the collective's own process group and world size (a DP or PP group beside TP is
reduced over itself) and carries the norm's readings, so the CPU reference computes the model's
bits. It goes where the norm's output was first consumed; readers of the all-reduced value or of
the new residual before that point are a remark.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse import remarks
from irfuse.dialects.coll import AllReduceOp
from irfuse.dialects.fused import AllReduceRmsNormOp
from irfuse.dialects.irfuse import TensorType, tensor_type
from irfuse.dialects.norm import AddRmsNormOp, RmsNormOp
from irfuse.dialects.quant import QuantFp8Op, QuantNvfp4Op, QuantScheme
from irfuse.fusions.norm_readings import (
    check_residual_out,
    kernel_input_type,
    weight_product_in_f32,
)
from irfuse.fusions.quant_consumers import (
    Consumer,
    divides,
    flatten_leading,
    merge_identical,
    quant_consumers,
    reciprocates,
    reshape_as,
    scheme_name,
)
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, users

_SUFFIX = {"static_tensor": "quant_fp8_static", "dynamic_token": "quant_fp8_per_token",
           "group": "quant_fp8_group", "nvfp4": "quant_nvfp4"}


def kernel_name(scheme_kind: str | None) -> str:
    """The custom op that implements a fused all-reduce + norm (+ quant of this scheme kind)."""
    if scheme_kind is None:
        return "all_reduce_rms_norm"
    return f"all_reduce_rms_norm_{_SUFFIX[scheme_kind]}"


class AllReduceRmsPattern(AnchorPattern):
    """A sum all-reduce whose result is normalized (after a residual add or not)."""

    op_types = (AllReduceOp,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, AllReduceOp)
        return _fuse(op, rewriter, site)


def _norm_of(ar: AllReduceOp) -> RmsNormOp | AddRmsNormOp | None:
    """The norm the fused op takes in: the one norm reading the all-reduced value (as its input
    or either addend), or, where several do, the one plain norm that normalizes it while the
    others add it as their residual (the first layer after vLLM's vocab-parallel embedding: the
    all-reduced embedding is the input norm's x and the next norm's residual). The fused op
    returns the all-reduced value beside the norm's output, and those norms read it there."""
    norms = [u for u in users(ar.y) if isinstance(u, RmsNormOp | AddRmsNormOp)
             and (u.x is ar.y or (isinstance(u, AddRmsNormOp) and u.residual is ar.y))]
    if not norms:
        return None
    if len(norms) == 1:
        return norms[0]
    plain = [n for n in norms if isinstance(n, RmsNormOp)]
    if len(plain) == 1:
        return plain[0]
    if plain:
        raise NoMatch(f"the all-reduced value is normalized by {len(plain)} norms; one fused op "
                      "writes one")
    raise NoMatch(f"the all-reduced value is an addend of {len(norms)} residual adds; the fused "
                  "op returns one sum, not the addend")


def _quant(norm: RmsNormOp | AddRmsNormOp, site: Site,
           rewriter: PatternRewriter) -> Consumer | None:
    """The quant the fused op folds in, or None (with a remark where a quant is left out)."""
    try:
        consumers = quant_consumers(norm.y, site.order)  # type: ignore[arg-type]
    except NoMatch as why:
        if any(isinstance(u, QuantFp8Op) for u in users(norm.y)):
            remarks.missed(norm, f"quant not folded into the all-reduce + norm: {why}")
        return None
    if not consumers:
        return None
    consumers = merge_identical(consumers, rewriter)
    reason = _unfusable(consumers)
    if reason is None:
        try:
            site.require_scheme(scheme_name(consumers[0].quant))
        except NoMatch as why:
            reason = str(why)
    if reason is not None:
        remarks.missed(norm, f"quant not folded into the all-reduce + norm: {reason}")
        return None
    return consumers[0]


def _unfusable(consumers: list[Consumer]) -> str | None:
    if len(consumers) > 1:
        return f"the norm feeds {len(consumers)} different quants; one fused op writes one"
    quant = consumers[0].quant
    if isinstance(quant, QuantFp8Op):
        scheme = quant.scheme
        if scheme.kind.data == "dynamic_tensor":
            return "dynamic per-tensor quant spans the whole tensor"
        if scheme.is_group and scheme.is_tma_aligned:
            return "tma-aligned group scales are not produced by the fused kernel"
        return None
    x = quant.x.type
    assert isinstance(x, TensorType)
    if consumers[0].view is None and x.rank != 2:
        return "NVFP4 quantizes [M, N]; the norm output has rank " + str(x.rank)
    return None


def _fuse(ar: AllReduceOp, rewriter: PatternRewriter, site: Site) -> Outcome:
    norm = _norm_of(ar)
    if norm is None:
        return NO_CANDIDATE
    if ar.reduce_op.data != "sum":
        raise NoMatch(f"the all-reduce is a {ar.reduce_op.data}, not a sum")
    x_type = kernel_input_type(norm, ar.x)
    check_residual_out(norm, x_type)
    # Gemma's (1 + w) is a float32 product in every reading: weight_f32 marks offset 0 only.
    weight_f32 = weight_product_in_f32(norm, x_type) and norm.weight_offset.value.data == 0.0
    residual: SSAValue | None = None
    if isinstance(norm, AddRmsNormOp):
        residual = norm.residual if norm.x is ar.y else norm.x
        if residual is ar.y:
            raise NoMatch("the norm adds the all-reduced value to itself")
        others = [u for u in users(ar.y) if u is not norm]
        if others:
            raise NoMatch(f"the all-reduced value is also used (by {others[0].name}) besides the "
                          "residual add; the fused op returns the sum, not the addend")
    order = site.order
    consumer = _quant(norm, site, rewriter)
    kind = None
    if consumer is not None:
        quant = consumer.quant
        kind = "nvfp4" if not isinstance(quant, QuantFp8Op) else quant.scheme.kind.data
        if reciprocates(quant):
            raise NoMatch("the quant multiplies by its scale's reciprocal (x * (1 / s)); the "
                          "fused all-reduce kernels divide, which can round differently")
    site.require_kernel(kernel_name(kind))

    # The fused op goes where the norm's output is first consumed: the quant, or the norm itself.
    quant_op = None if consumer is None else consumer.quant
    point: Operation = norm if quant_op is None else quant_op
    readers = [u for u in users(ar.y) if u is not norm]
    if isinstance(norm, AddRmsNormOp):
        readers = users(norm.residual_out)
    early = [u for u in readers if order.get(u, 1 << 62) < order[point]]
    if early:
        raise NoMatch(f"the {'new residual' if residual is not None else 'all-reduced value'} "
                      f"is read (by {early[0].name}) before the "
                      f"{'quant that follows' if quant_op is not None else 'norm'}")
    scale, scale_ub, scheme = _quant_operands(quant_op)

    x, res = ar.x, residual
    view = None if consumer is None else consumer.view
    if view is not None:
        rows = view.results[0].type.dims[0]  # type: ignore[union-attr]
        x = flatten_leading(ar.x, rows, point, rewriter)
        res = None if residual is None else flatten_leading(residual, rows, point, rewriter)
    x_flat = x.type
    assert isinstance(x_flat, TensorType)
    fused = AllReduceRmsNormOp(
        x,
        res,
        norm.weight,
        scale,
        scale_ub,
        group=ar.group.data,
        world_size=ar.world_size.value.data,
        eps=norm.eps.value.data,
        weight_offset=norm.weight_offset.value.data,
        scheme=scheme,
        divide=quant_op is not None and divides(quant_op),
        round_sum=isinstance(norm, AddRmsNormOp) and norm.round_sum is not None,
        weight_f32=weight_f32,
        result_types=[
            norm.y.type if quant_op is None else quant_op.results[0].type,
            None if quant_op is None or len(quant_op.results) < 2 else quant_op.results[1].type,
            tensor_type(x_flat.dims, x_flat.dtype),
        ],
    )
    fused.location = norm.location
    rewriter.insert(fused, InsertPoint.before(point))
    if quant_op is None:
        fused.out.name_hint = norm.y.name_hint
        rewriter.replace_all_uses_with(norm.y, fused.out)
    else:
        fused.out.name_hint = quant_op.results[0].name_hint
        rewriter.replace_all_uses_with(quant_op.results[0], fused.out)
        if len(quant_op.results) > 1:
            rewriter.replace_all_uses_with(quant_op.results[1], fused.scale_out)  # type: ignore[arg-type]
    new_residual: SSAValue = fused.residual_out
    if view is not None:
        new_residual = reshape_as(new_residual, ar.x, fused.next_op, rewriter)  # type: ignore[arg-type]
    if isinstance(norm, AddRmsNormOp):
        new_residual.name_hint = norm.residual_out.name_hint
        rewriter.replace_all_uses_with(norm.residual_out, new_residual)
    if quant_op is not None:
        rewriter.erase(quant_op)
        if view is not None and not view.results[0].uses:
            rewriter.erase(view)
    rewriter.erase(norm)
    new_residual.name_hint = new_residual.name_hint or ar.y.name_hint
    # the readers of the all-reduced value (no residual)
    rewriter.replace_all_uses_with(ar.y, new_residual)
    rewriter.erase(ar)
    return REWROTE


def _quant_operands(
    quant: QuantFp8Op | QuantNvfp4Op | None,
) -> tuple[SSAValue | None, SSAValue | None, QuantScheme | None]:
    """The fused op's (scale, scale_ub, scheme) for the quant it folds in."""
    if quant is None:
        return None, None, None
    if isinstance(quant, QuantNvfp4Op):
        return quant.global_scale, None, QuantScheme.nvfp4()
    scale = quant.scale if quant.scheme.is_static else None
    return scale, quant.scale_ub, quant.scheme
