"""fuse-mla-dual-rms-norm: the two RMSNorms of MLA's latents, slices of one projection -> one
`fused.mla_dual_rms_norm` (`MlaDualRmsNormPattern` shows the IR).

Anchored at a `norm.rms_norm` whose input is a slice of the last dim (a result of `split` /
`split_with_sizes`, or `slice.Tensor` with step 1, nested) of some tensor. Per block, the norms
with such inputs are grouped by the sliced tensor; a group of exactly two, on disjoint slices,
is MLA's pair (DeepSeek-V2/V3 with `q_lora_rank`: `q_a_layernorm(q_c)` and
`kv_a_layernorm(kv_c)` of `fused_qkv_a_proj`), fused at the first of the two. A norm alone on its
projection (V2-Lite's kv norm, or a q norm already fused with its quant) is no candidate.
Both norms need weights, bf16/fp16/f32 inputs and outputs in the same dtype, and one weight
rounding (`norm_readings`); the eps may differ. The fused op goes where the first norm was; the
slices of the second norm's input that come after it move up with it (views: nothing is
computed earlier than before).
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects.fused import MlaDualRmsNormOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.norm import RmsNormOp
from irfuse.fusions.norm_readings import kernel_input_type, weight_product_in_f32
from irfuse.raising import aten_ops
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, call, normalize_dim

KERNEL = "mla_dual_rms_norm"


class MlaDualRmsNormPattern(AnchorPattern):
    """The first of two norms on disjoint last-dim slices of one tensor:

        %qc, %kvl = aten.call tuple "aten::split_with_sizes.default"(%proj, [Q, KV + R], -1)
        %qn = norm.rms_norm %qc, weight %qw {eps}      %kvc, %kpe = aten.call tuple
        ...                                                "aten::split_with_sizes.default"(%kvl,
        %kvn = norm.rms_norm %kvc, weight %kvw {eps}        [KV, R], -1)
      ->
        %qn, %kvn = fused.mla_dual_rms_norm %qc, %qw, %kvc, %kvw {q_eps, kv_eps}
    """

    op_types = (RmsNormOp,)

    def start(self, site: Site) -> None:
        groups: dict[SSAValue, list[RmsNormOp]] = {}
        for op in site.ops:
            if isinstance(op, RmsNormOp):
                found = last_dim_slice(op.x)
                if found is not None:
                    groups.setdefault(found[0], []).append(op)
        site.scratch[self] = {norm: group for group in groups.values() for norm in group}

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, RmsNormOp)
        group = site.scratch.get(self, {}).get(op)
        if group is None or len(group) < 2 or group[0] is not op:
            return NO_CANDIDATE
        if len(group) > 2:
            raise NoMatch(f"{len(group)} norms read slices of one tensor; MLA's pair is two (the "
                          "q and the kv latent)")
        return _fuse(op, group[1], rewriter, site)


def last_dim_slice(value: SSAValue) -> tuple[SSAValue, int, int] | None:
    """(root, start, width): `value` is columns [start, start + width) of the last dim of root,
    through splits and unit-step slices of the last dim; None when it is not such a slice."""
    t = value.type
    if not isinstance(t, TensorType) or t.rank < 1 or not isinstance(t.dims[-1], int):
        return None
    width, start, base, sliced = t.dims[-1], 0, value, False
    while True:
        step = _slice_step(base)
        if step is None:
            break
        base, offset = step
        start += offset
        sliced = True
    return (base, start, width) if sliced else None


def _slice_step(value: SSAValue) -> tuple[SSAValue, int] | None:
    """(source, offset) when `value` is a last-dim split result or slice of `source`."""
    found = call(value.owner) if isinstance(value.owner, Operation) else None
    if found is None:
        return None
    src = found.arg(0)
    src_type = getattr(src, "type", None)
    if not isinstance(src_type, TensorType) or src_type.rank < 1:
        return None
    last = src_type.rank - 1
    if found.target in aten_ops.SPLITS:
        if normalize_dim(found.arg(2, "dim", 0), src_type.rank) != last:
            return None
        index = value.index  # type: ignore[attr-defined]
        sizes = found.arg(1)
        if isinstance(sizes, list):
            if not all(isinstance(s, int) for s in sizes[:index]):
                return None
            return src, sum(sizes[:index])
        return (src, sizes * index) if isinstance(sizes, int) else None
    if found.target == aten_ops.SLICE_TENSOR:
        dim, begin, step = found.arg(1, "dim", 0), found.arg(2, "start", 0), found.arg(4, "step", 1)
        if normalize_dim(dim, src_type.rank) != last or step != 1:
            return None
        begin = 0 if begin is None else begin
        return (src, begin) if isinstance(begin, int) and begin >= 0 else None
    return None


def _reading(norm: RmsNormOp) -> tuple[float, bool]:
    x_type = kernel_input_type(norm, norm.x)
    return norm.weight_offset.value.data, weight_product_in_f32(norm, x_type)


def _fuse(q_norm: RmsNormOp, kv_norm: RmsNormOp, rewriter: PatternRewriter,
          site: Site) -> Outcome:
    (_, q_start, q_width), (_, kv_start, kv_width) = (
        last_dim_slice(q_norm.x), last_dim_slice(kv_norm.x))  # type: ignore[misc]
    if q_start < kv_start + kv_width and kv_start < q_start + q_width:
        raise NoMatch("the two norms read overlapping slices of the projection")
    readings = {_reading(q_norm), _reading(kv_norm)}
    if len(readings) != 1:
        raise NoMatch("the q and kv norms round their weight products differently (weight "
                      "offset or float32 product); the kernel reads one")
    offset, weight_f32 = readings.pop()
    q_type, kv_type = q_norm.x.type, kv_norm.x.type
    assert isinstance(q_type, TensorType) and isinstance(kv_type, TensorType)
    if q_type.dtype != kv_type.dtype or q_type.dims[:-1] != kv_type.dims[:-1]:
        raise NoMatch(f"the q latent {q_type} and the kv latent {kv_type} differ in dtype or "
                      "leading dims")
    moved = _ops_to_move(kv_norm, q_norm)
    site.require_kernel(KERNEL)

    for op in moved:
        op.detach()
        rewriter.insert(op, InsertPoint.before(q_norm))
    fused = MlaDualRmsNormOp(
        q_norm.x, q_norm.weight, kv_norm.x, kv_norm.weight,  # type: ignore[arg-type]
        q_eps=q_norm.eps.value.data, kv_eps=kv_norm.eps.value.data, weight_offset=offset,
        weight_f32=weight_f32, result_types=[q_norm.y.type, kv_norm.y.type],
    )
    fused.location = q_norm.location
    rewriter.insert(fused, InsertPoint.before(q_norm))
    for old, new in ((q_norm.y, fused.q_out), (kv_norm.y, fused.kv_out)):
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    rewriter.erase(kv_norm)
    rewriter.erase(q_norm)
    return REWROTE


def _ops_to_move(kv_norm: RmsNormOp, q_norm: RmsNormOp) -> list[Operation]:
    """The slice ops between the projection and the kv norm's input that stand after the q norm,
    in order: they move above it with the fused op. NoMatch when the kv weight is computed after
    the q norm (the fused op could not read it there)."""
    weight = kv_norm.weight
    assert weight is not None
    owner = weight.owner
    if isinstance(owner, Operation) and owner.parent is q_norm.parent and \
            q_norm.is_before_in_block(owner):
        raise NoMatch("the kv norm's weight is computed after the q norm")
    chain: list[Operation] = []
    value = kv_norm.x
    while (step := _slice_step(value)) is not None:
        op = value.owner
        assert isinstance(op, Operation)
        if op.parent is q_norm.parent and q_norm.is_before_in_block(op):
            chain.append(op)
        value = step[0]
    return list(reversed(chain))
