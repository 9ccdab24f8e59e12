"""fuse-act-padding: (residual add +) RMSNorm followed by a constant pad of its last dim -> one
kernel that writes the padded rows directly.

Matches `norm.rms_norm` / `norm.add_rms_norm` whose `y` is padded by `act.pad` (GPT-OSS pads
hidden 2880 to a multiple of 128 or 256 for its experts). Any hidden size, pad amounts and pad
value are attributes. Other users of `y` (the router GEMM in vLLM's GPT-OSS) read the norm from
the padded rows through a slice, as vLLM's AITER pass does. Produces `fused.rms_norm_pad` where
the norm was.

The kernel rounds like the model: the weight product in the model dtype (vLLM, Llama-style
`w * normed.to(dtype)`) or in float32 rounded once (`(w * normed).to(dtype)`, GPT-OSS,
`F.rms_norm`), read off the norm's decomposition. Norms whose rounding the kernel has no reading
for, outputs returned unpadded and views the slice cannot take are remarks.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntAttr
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects import aten
from irfuse.dialects.act import PadOp
from irfuse.dialects.fused import RmsNormPadOp
from irfuse.dialects.irfuse import TensorType, tensor_type
from irfuse.dialects.norm import AddRmsNormOp, RmsNormOp
from irfuse.fusions.norm_readings import (
    check_residual_out,
    kernel_input_type,
    weight_product_in_f32,
)
from irfuse.ir import call_args
from irfuse.raising import aten_ops
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, call


def kernel_name(residual: bool) -> str:
    """The custom op that implements a padded norm of this form."""
    return "add_rms_norm_pad" if residual else "rms_norm_pad"


class NormPadPattern(AnchorPattern):
    """A raised norm whose output is padded."""

    op_types = (RmsNormOp, AddRmsNormOp)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, RmsNormOp | AddRmsNormOp)
        return _fuse(op, rewriter, site)


def _fuse(norm: RmsNormOp | AddRmsNormOp, rewriter: PatternRewriter, site: Site) -> Outcome:
    pads = [u.operation for u in norm.y.uses if isinstance(u.operation, PadOp)]
    if not pads:
        return NO_CANDIDATE
    amounts = {_amounts(p) for p in pads}
    if len(amounts) != 1:
        raise NoMatch(f"the norm output is padded {len(amounts)} different ways; one kernel "
                      "writes one padding")
    low, high, value = amounts.pop()
    x_type = kernel_input_type(norm, norm.x)
    check_residual_out(norm, x_type)
    weight_f32 = weight_product_in_f32(norm, x_type)
    others = [u.operation for u in norm.y.uses if not isinstance(u.operation, PadOp)]
    hidden = x_type.dims[-1]
    _check_slice_users(others, hidden)
    residual = norm.residual if isinstance(norm, AddRmsNormOp) else None
    site.require_kernel(kernel_name(residual is not None))

    fused = RmsNormPadOp(
        norm.x,
        residual,
        norm.weight,
        eps=norm.eps.value.data,
        low=low,
        high=high,
        value=value,
        weight_offset=norm.weight_offset.value.data,
        round_sum=isinstance(norm, AddRmsNormOp) and norm.round_sum is not None,
        weight_f32=weight_f32,
        result_types=[pads[0].y.type, None if residual is None else norm.residual_out.type],
    )
    fused.location = norm.location
    rewriter.insert(fused, InsertPoint.before(norm))
    fused.out.name_hint = pads[0].y.name_hint
    for pad in pads:
        rewriter.replace_all_uses_with(pad.y, fused.out)
        rewriter.erase(pad)
    if others:
        unpadded = _unpadded(fused.out, low, hidden, norm.y.type, norm, rewriter)  # type: ignore[arg-type]
        rewriter.replace_all_uses_with(norm.y, unpadded)
    if residual is not None:
        assert fused.residual_out is not None
        fused.residual_out.name_hint = norm.residual_out.name_hint
        rewriter.replace_all_uses_with(norm.residual_out, fused.residual_out)
    rewriter.erase(norm)
    return REWROTE


def _amounts(pad: PadOp) -> tuple[int, int, float]:
    return pad.low.value.data, pad.high.value.data, pad.value.value.data


def _check_slice_users(users: list[Operation], hidden: object) -> None:
    """The unpadded norm's other users read it as a slice of the padded rows: not a graph
    output (its strides would change), nor a view that merges the hidden dim."""
    for user in users:
        if isinstance(user, ReturnOp):
            raise NoMatch("the norm output is also returned unpadded")
        if not isinstance(hidden, int):
            raise NoMatch("the norm output has other users and a symbolic hidden size")
        found = call(user)
        if found is not None and found.target in aten_ops.RESHAPES:
            out = found.result.type
            if not isinstance(out, TensorType) or out.dims[-1] != hidden:
                raise NoMatch(f"the norm output is also reshaped ({found.target}) across the "
                              "hidden dim, which a slice of the padded rows cannot take")


def _unpadded(out: SSAValue, low: int, hidden: int, y_type: TensorType,
              norm: Operation, rewriter: PatternRewriter) -> SSAValue:
    """`out[..., low:low + hidden]`, inserted before `norm` (right after the fused op)."""
    sliced = aten.CallOp(
        aten_ops.SLICE_TENSOR,
        [out],
        [call_args.OperandRefAttr(IntAttr(0)), IntAttr(y_type.rank - 1), IntAttr(low),
         IntAttr(low + hidden)],
        [tensor_type(y_type.dims, y_type.dtype)],
    )
    sliced.location = norm.location
    rewriter.insert(sliced, InsertPoint.before(norm))
    return sliced.results[0]
