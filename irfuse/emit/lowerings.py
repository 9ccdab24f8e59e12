"""Lowerings of fused ops to kernel calls: which `irfuse::` custom op implements each fused op,
with which arguments (registered into `select_kernels.LOWERINGS`).

The argument order follows the custom op schemas in `irfuse.emit.custom_ops.SCHEMAS`; the
implementation recorded on the call is `kernel_choice.choose(op, platform)`'s. Optional trailing
arguments go by keyword, and only when set: `up` (separate gate and up tensors), `divide`
(a static quant spelled `x / s`) and `round_sum` (a residual norm that reads the sum rounded to the
model dtype), so a call without them reads as it did before they existed.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, FloatData, IntAttr, StringAttr
from xdsl.ir import Attribute, Operation, SSAValue

from irfuse.dialects import aten, fused, kernel
from irfuse.emit.select_kernels import LOWERINGS


class _Args:
    """Builds a call's argument template and operand list together."""

    def __init__(self) -> None:
        self.operands: list[SSAValue] = []

    def tensor(self, value: SSAValue) -> Attribute:
        self.operands.append(value)
        return aten.OperandRefAttr(IntAttr(len(self.operands) - 1))

    def optional(self, value: SSAValue | None) -> Attribute:
        return aten.NONE if value is None else self.tensor(value)

    def tensors(self, values: Sequence[SSAValue]) -> Attribute:
        return ArrayAttr([self.tensor(v) for v in values])


def _call(
    name: str,
    args: _Args,
    template: list[Attribute],
    op: Operation,
    platform: str,
    keywords: dict[str, Attribute] | None = None,
) -> kernel.CallOp:
    from irfuse.emit.kernel_choice import choose

    impl = choose(name, platform).impl
    if impl == "inductor":  # the pass should have left the pattern alone; run our kernel anyway
        impl = "triton"
    results = [r.type for r in op.results]
    return kernel.CallOp(
        f"irfuse::{name}.default",
        args.operands,
        template,
        results,
        kw_template=keywords,
        tuple_result=name not in _SINGLE_TENSOR,
        extra={"impl": StringAttr(impl)},
    )


_SINGLE_TENSOR = frozenset({"silu_mul_quant_fp8_static"})
"""Kernels that return one tensor; the others return a tuple or a list."""


def _flag(value: bool) -> Attribute:
    return aten.TRUE if value else aten.FALSE


def _lower_rms_norm_quant(op: fused.RmsNormQuantOp, platform: str) -> kernel.CallOp:
    from irfuse.rewrites.fuse_norm_quant import kernel_name

    scheme = op.scheme
    residual = op.residual
    name = kernel_name(residual is not None, scheme.kind.data)
    a = _Args()
    template = [a.tensor(op.x)]
    if residual is not None:
        template.append(a.tensor(residual))
    assert op.weight is not None, "fuse-norm-quant only fuses norms with a weight"
    template.append(a.tensor(op.weight))
    eps, offset = FloatData(op.eps.value.data), FloatData(op.weight_offset.value.data)
    fp8 = op.qs[0].type.dtype  # type: ignore[union-attr]
    keywords: dict[str, Attribute] = {}
    if scheme.is_static:
        template += [a.tensors(list(op.scales)), eps, offset, fp8]
        keywords.update(_divide(op) or {})
    elif scheme.is_per_token:
        template += [a.optional(op.scale_ub), eps, offset, fp8]
    else:
        template += [
            eps,
            offset,
            IntAttr(scheme.group_size),
            _flag(scheme.is_col_major),
            _flag(scheme.is_ue8m0),
            fp8,
        ]
    if op.round_sum is not None:
        keywords["round_sum"] = aten.TRUE  # the residual kernels' last, optional argument
    return _call(name, a, template, op, platform, keywords or None)


def _up(a: _Args, up: SSAValue | None) -> dict[str, Attribute] | None:
    """The separate up tensor, passed by keyword (the schemas' optional argument)."""
    return None if up is None else {"up": a.tensor(up)}


def _divide(op: fused.RmsNormQuantOp | fused.SiluMulQuantOp) -> dict[str, Attribute] | None:
    """`divide=True` (the static kernels' last, optional argument) when the op divides."""
    return None if op.divide is None else {"divide": aten.TRUE}


def _lower_silu_mul_quant(op: fused.SiluMulQuantOp, platform: str) -> kernel.CallOp:
    scheme = op.scheme
    a = _Args()
    fp8 = op.q.type.dtype  # type: ignore[union-attr]
    if scheme.is_static:
        assert op.scale is not None
        template = [a.tensor(op.x), a.tensor(op.scale), fp8]
        keywords = {**(_up(a, op.up) or {}), **(_divide(op) or {})}
        return _call("silu_mul_quant_fp8_static", a, template, op, platform, keywords or None)
    template = [
        a.tensor(op.x),
        IntAttr(scheme.group_size),
        _flag(scheme.is_col_major),
        _flag(scheme.is_ue8m0),
        fp8,
    ]
    return _call("silu_mul_quant_fp8_group", a, template, op, platform, _up(a, op.up))


def _lower_silu_mul_quant_nvfp4(op: fused.SiluMulQuantNvfp4Op, platform: str) -> kernel.CallOp:
    a = _Args()
    template = [a.tensor(op.x), a.tensor(op.global_scale)]
    return _call("silu_mul_quant_nvfp4", a, template, op, platform, _up(a, op.up))


LOWERINGS.update(
    {
        fused.RmsNormQuantOp.name: _lower_rms_norm_quant,  # type: ignore[dict-item]
        fused.SiluMulQuantOp.name: _lower_silu_mul_quant,  # type: ignore[dict-item]
        fused.SiluMulQuantNvfp4Op.name: _lower_silu_mul_quant_nvfp4,  # type: ignore[dict-item]
    }
)
