"""fuse-norm-quant: (residual add +) RMSNorm followed by FP8 quantization -> one kernel.

Matches `norm.rms_norm` / `norm.add_rms_norm` whose output feeds only `quant.fp8` ops (directly
or through the `view(-1, H)` of a linear), for static per-tensor (several scales: one output
each), dynamic per-token and per-group quants. Produces `fused.rms_norm_quant` where the first
quant was; eps, hidden size, group size, `divide`, `reciprocal` and `round_sum` are attributes, so one rewrite
serves every model. A norm output also used unquantized, mixed schemes, dynamic per-tensor and a
kernel the table leaves to Inductor on the platform are remarks.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects import aten
from irfuse.dialects.fused import RmsNormQuantOp
from irfuse.dialects.irfuse import tensor_type
from irfuse.dialects.norm import AddRmsNormOp, RmsNormOp
from irfuse.dialects.quant import QuantFp8Op
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
from irfuse.raising.match import NoMatch


def kernel_name(residual: bool, scheme_kind: str) -> str:
    """The custom op that implements a fused norm + quant of this form."""
    suffix = {"static_tensor": "static", "dynamic_token": "per_token", "group": "group"}
    return f"{'add_' if residual else ''}rms_norm_quant_fp8_{suffix[scheme_kind]}"


def _check_schemes(consumers: list[Consumer]) -> str:
    if not all(isinstance(c.quant, QuantFp8Op) for c in consumers):
        raise NoMatch("NVFP4 quant after a norm has no fused kernel (vLLM has none either)")
    kinds = {c.quant.scheme.kind.data for c in consumers}
    if len(kinds) != 1:
        raise NoMatch("the norm feeds quants of different schemes; one kernel writes one scheme")
    kind = kinds.pop()
    if kind == "dynamic_tensor":
        raise NoMatch(
            "dynamic per-tensor quant is not fused with the norm: its amax spans the whole tensor"
        )
    if kind != "static_tensor" and len(consumers) > 1:
        raise NoMatch("the norm feeds several dynamic quants with different settings")
    if len({divides(c.quant) for c in consumers}) != 1:
        raise NoMatch(
            "the norm's static quants are spelled differently (x / s and x * (1 / s)); one "
            "kernel rounds one way"
        )
    scheme = consumers[0].quant.scheme
    if scheme.is_group and scheme.is_tma_aligned:
        raise NoMatch("tma-aligned group scales are not produced by the fused kernel")
    dtypes = {c.quant.q.type.dtype for c in consumers}
    if len(dtypes) != 1:
        raise NoMatch("the quants produce different fp8 dtypes")
    if len({c.view is None for c in consumers}) != 1:
        raise NoMatch("some quants see the norm output flattened and some do not")
    return kind


class NormQuantPattern(AnchorPattern):
    """A raised norm whose output feeds only FP8 quants."""

    op_types = (RmsNormOp, AddRmsNormOp)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, RmsNormOp | AddRmsNormOp)
        return _fuse(op, rewriter, site)


def _fuse(norm: RmsNormOp | AddRmsNormOp, rewriter: PatternRewriter, site: Site) -> Outcome:
    order = site.order
    consumers = quant_consumers(norm.y, order)
    if not consumers:
        return NO_CANDIDATE
    consumers = merge_identical(consumers, rewriter)
    kind = _check_schemes(consumers)
    site.require_scheme(scheme_name(consumers[0].quant))
    x_type = kernel_input_type(norm, norm.x)
    check_residual_out(norm, x_type)
    weight_f32 = weight_product_in_f32(norm, x_type) and norm.weight_offset.value.data == 0.0
    residual = norm.residual if isinstance(norm, AddRmsNormOp) else None
    round_sum = isinstance(norm, AddRmsNormOp) and norm.round_sum is not None
    site.require_kernel(kernel_name(residual is not None, kind))

    # The fused op goes where the first quant was (its results may be used before the later
    # quants), or, where the new residual is read before that quant (the next norm of the same
    # sum), where the norm was; scales defined after that point are constants, moved up to it.
    first = min((c.quant for c in consumers), key=lambda q: order.get(q, 1 << 62))
    if residual is not None and any(order.get(u.operation, 1 << 62) < order[first]
                                    for u in norm.residual_out.uses):
        first = norm
    scales = [c.quant.scale for c in consumers if c.quant.scale is not None]
    scale_ub = consumers[0].quant.scale_ub if kind == "dynamic_token" else None
    if scale_ub is not None:
        scales.append(scale_ub)
    try:
        late_scales = _late_definitions(scales, first, order)
    except NoMatch:
        if first is norm:
            raise NoMatch("the new residual is used before the quants that follow the norm, "
                          "and a quant scale is computed after the norm") from None
        raise
    for definition in late_scales:
        definition.detach()
        rewriter.insert(definition, InsertPoint.before(first))
    view = consumers[0].view
    x, res = norm.x, residual
    if view is not None:
        rows = view.results[0].type.dims[0]  # type: ignore[union-attr]
        x = flatten_leading(norm.x, rows, first, rewriter)
        res = None if residual is None else flatten_leading(residual, rows, first, rewriter)
    quant = consumers[0].quant
    scales = [c.quant.scale for c in consumers] if kind == "static_tensor" else []
    fused = RmsNormQuantOp(
        x,
        res,
        norm.weight,
        scales,  # type: ignore[arg-type]
        quant.scale_ub if kind == "dynamic_token" else None,
        eps=norm.eps.value.data,
        weight_offset=norm.weight_offset.value.data,
        scheme=quant.scheme,
        divide=divides(quant),
        reciprocal=reciprocates(quant),
        round_sum=round_sum,
        weight_f32=weight_f32,
        result_types=[
            [c.quant.q.type for c in consumers],
            None if quant.scale_out is None else quant.scale_out.type,
            None if res is None else tensor_type(res.type.dims, norm.residual_out.type.dtype),  # type: ignore[union-attr]
        ],
    )
    fused.location = norm.location
    rewriter.insert(fused, InsertPoint.before(first))
    for consumer, q in zip(consumers, fused.qs, strict=True):
        q.name_hint = consumer.quant.q.name_hint
        rewriter.replace_all_uses_with(consumer.quant.q, q)
    if quant.scale_out is not None:
        rewriter.replace_all_uses_with(quant.scale_out, fused.scale_out)  # type: ignore[arg-type]
    if residual is not None:
        new_residual: SSAValue = fused.residual_out  # type: ignore[assignment]
        if view is not None:
            new_residual = reshape_as(new_residual, norm.x, _after(fused), rewriter)
        new_residual.name_hint = norm.residual_out.name_hint
        rewriter.replace_all_uses_with(norm.residual_out, new_residual)
    for consumer in consumers:
        rewriter.erase(consumer.quant)
        if consumer.view is not None and not consumer.view.results[0].uses:
            rewriter.erase(consumer.view)
    rewriter.erase(norm)
    return REWROTE


def _late_definitions(
    values: list[SSAValue], point: Operation, order: dict[Operation, int]
) -> list[Operation]:
    """The ops defining `values` after `point`, in order; NoMatch unless each is a constant
    (`aten.get_attr`), which can move up."""
    late: dict[Operation, None] = {}
    for value in values:
        owner = value.owner
        if isinstance(owner, Operation) and order.get(owner, -1) > order[point]:
            if not isinstance(owner, aten.GetAttrOp):
                raise NoMatch("a quant scale is computed after the first quant of the norm")
            late[owner] = None
    return sorted(late, key=lambda o: order[o])


def _after(op: Operation) -> Operation:
    nxt = op.next_op
    assert nxt is not None, "a fused op is never the block terminator"
    return nxt

