"""How a raised norm rounds its weight product, read off its decomposition: the fused kernels
that replace a norm (the norm + pad and the QK-norm + RoPE fusions) round as the model did."""

from __future__ import annotations

from xdsl.dialects.builtin import bf16, f16, f32
from xdsl.ir import Operation, SSAValue

from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.norm import AddRmsNormOp, RmsNormOp
from irfuse.ir.decomposition import decomposition_block
from irfuse.raising import aten_ops
from irfuse.raising.match import NoMatch, call

F32_NORMS = (aten_ops.RMS_NORM, aten_ops.FUSED_RMS_NORM)
"""ATen's own RMSNorm, which multiplies by the weight in float32 and rounds once."""


KERNEL_DTYPES = (bf16, f16, f32)
"""The activation dtypes irfuse's fused norm kernels take."""


def kernel_input_type(norm: RmsNormOp | AddRmsNormOp, x: SSAValue, *,
                      same_out: bool = True) -> TensorType:
    """The type of `x`, the fused norm kernel's input; NoMatch where no fused kernel takes
    `norm`: it has no weight, `x` is not in KERNEL_DTYPES, or (`same_out`) the norm writes
    another dtype than `x`'s, which the kernels cannot (they write the input's dtype)."""
    if norm.weight is None:
        raise NoMatch("a norm without a weight has no fused kernel")
    x_type, y_type = x.type, norm.y.type
    assert isinstance(x_type, TensorType) and isinstance(y_type, TensorType)
    if x_type.dtype not in KERNEL_DTYPES:
        raise NoMatch(f"the fused kernels take bf16, f16 or f32 inputs, not {x_type.dtype}")
    if same_out and y_type.dtype != x_type.dtype:
        raise NoMatch(f"the norm's output is {y_type.dtype} but its input {x_type.dtype}; the "
                      "kernel writes the input's dtype")
    return x_type


def check_residual_out(norm: RmsNormOp | AddRmsNormOp, x_type: TensorType) -> None:
    """NoMatch where the norm's new residual is read in another dtype than x's (the float32 sum
    vLLM's form leaves unrounded, read by another norm of the same sum): the fused kernels
    write the new residual in x's dtype."""
    if not isinstance(norm, AddRmsNormOp) or not norm.residual_out.uses:
        return
    r_type = norm.residual_out.type
    assert isinstance(r_type, TensorType)
    if r_type.dtype != x_type.dtype:
        raise NoMatch(f"the new residual is read as the {r_type.dtype} sum; the fused kernels "
                      f"write it in the input's {x_type.dtype}")


def weight_product_in_f32(norm: RmsNormOp | AddRmsNormOp, x_type: TensorType) -> bool:
    """Whether the model multiplies the weight in float32 and rounds once (True) or multiplies
    the norm rounded to the model dtype by the weight in that dtype (False), from the norm's
    decomposition. vLLM's custom ops (no ATen product there) multiply in the model dtype."""
    if norm.weight_offset.value.data != 0.0 or x_type.dtype == f32:
        return True  # Gemma's `1 + w` is an f32 product in every reading; f32 models agree
    block = decomposition_block(norm)
    if block is None:
        return False
    weight = block.args[_operand_index(norm, norm.weight)]  # type: ignore[arg-type]
    for op in block.ops:
        found = call(op)
        if found is None:
            continue
        if found.target in F32_NORMS:
            return True
        if found.target == aten_ops.MUL_TENSOR and _reads(found.op, weight):
            product = found.result.type
            assert isinstance(product, TensorType)
            if product.dtype == x_type.dtype:
                return False
            normed = next(v for v in found.op.operands if not _reads_value(v, weight))
            if product.dtype == f32 and getattr(normed.type, "dtype", None) == f32:
                return True
            raise NoMatch(f"the norm multiplies a {getattr(normed.type, 'dtype', '?')} norm by "
                          f"the weight in {product.dtype}; the kernel rounds the {x_type.dtype} "
                          "norm times the weight, or the float32 product once")
    return False


def _operand_index(op: Operation, value: SSAValue) -> int:
    return next(i for i, v in enumerate(op.operands) if v is value)


def _reads(op: Operation, weight: SSAValue) -> bool:
    return any(_reads_value(v, weight) for v in op.operands)


def _reads_value(value: SSAValue, weight: SSAValue) -> bool:
    """`value` is the weight, maybe cast (`w.to(dtype)`) first."""
    found = call(value.owner) if isinstance(value.owner, Operation) else None
    if found is not None and found.target in aten_ops.CASTS:
        value = found.arg(0)
    return value is weight
