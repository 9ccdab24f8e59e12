"""fuse-act-quant: SiLU·Mul or GeGLU followed by FP8 or NVFP4 quantization -> one kernel.

Matches `act.silu_mul` (any `activation`: silu, gelu_tanh, gelu) whose output feeds one quant
(directly or through a flattening view): static per-tensor or per-group FP8, or NVFP4. Produces
`fused.silu_mul_quant` or `fused.silu_mul_quant_nvfp4`, with the activation, where the quant was.
An output also used unquantized, a dynamic quant (no kernel) and a kernel the table leaves to
Inductor on the platform are remarks.
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects.act import SiluMulOp
from irfuse.dialects.fused import SiluMulQuantNvfp4Op, SiluMulQuantOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.quant import QuantFp8Op
from irfuse.fusions.norm_readings import KERNEL_DTYPES
from irfuse.fusions.quant_consumers import (
    divides,
    flatten_leading,
    merge_identical,
    quant_consumers,
    reciprocates,
    scheme_name,
)
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch

NAMES = {"silu": "SiLU·Mul", "gelu_tanh": "GeGLU (tanh GELU)", "gelu": "GeGLU (erf GELU)"}
"""How remarks name each gated activation."""


def kernel_name(quant: Operation, activation: str = "silu") -> str:
    """The custom op that implements the gated activation fused with this quant: `silu_mul_*`,
    or `gelu_mul_*` for either GELU."""
    prefix = "silu_mul" if activation == "silu" else "gelu_mul"
    if not isinstance(quant, QuantFp8Op):
        return f"{prefix}_quant_nvfp4"
    kind = quant.scheme.kind.data
    if kind == "static_tensor":
        return f"{prefix}_quant_fp8_static"
    if kind == "group":
        return f"{prefix}_quant_fp8_group"
    raise NoMatch(f"{NAMES[activation]} + {kind} FP8 quant has no fused kernel (vLLM has none "
                  "either)")


class ActQuantPattern(AnchorPattern):
    """A raised SiLU·Mul or GeGLU whose output feeds one quant."""

    op_types = (SiluMulOp,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, SiluMulOp)
        return _fuse(op, rewriter, site)


def _fuse(act: SiluMulOp, rewriter: PatternRewriter, site: Site) -> Outcome:
    order = site.order
    consumers = quant_consumers(act.y, order)
    if not consumers:
        return NO_CANDIDATE
    consumers = merge_identical(consumers, rewriter)
    if len(consumers) > 1:
        raise NoMatch("the activation feeds several different quants")
    x_type = act.x.type
    assert isinstance(x_type, TensorType)
    if x_type.dtype not in KERNEL_DTYPES:
        raise NoMatch(f"the fused kernels take bf16, f16 or f32 inputs, not {x_type.dtype}")
    consumer = consumers[0]
    quant = consumer.quant
    activation = act.activation.data
    name = kernel_name(quant, activation)
    if isinstance(quant, QuantFp8Op) and quant.scheme.is_group and quant.scheme.is_tma_aligned:
        raise NoMatch("tma-aligned group scales are not produced by the fused kernel")
    site.require_scheme(scheme_name(quant))
    site.require_kernel(name)

    x, up = act.x, act.up
    if consumer.view is not None:
        rows = consumer.view.results[0].type.dims[0]  # type: ignore[union-attr]
        x = flatten_leading(act.x, rows, quant, rewriter)
        up = None if up is None else flatten_leading(up, rows, quant, rewriter)
    if isinstance(quant, QuantFp8Op):
        fused: Operation = SiluMulQuantOp(
            x,
            quant.scale,
            up,
            scheme=quant.scheme,
            divide=divides(quant),
            reciprocal=reciprocates(quant),
            activation=activation,
            result_types=[quant.q.type, None if quant.scale_out is None else quant.scale_out.type],
        )
    else:
        fused = SiluMulQuantNvfp4Op(
            x, quant.global_scale, up, activation=activation,
            result_types=[quant.q.type, quant.block_scale.type],
        )
    fused.location = act.location
    rewriter.insert(fused, InsertPoint.before(quant))
    for old, new in zip(quant.results, fused.results, strict=True):
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    rewriter.erase(quant)
    if consumer.view is not None and not consumer.view.results[0].uses:
        rewriter.erase(consumer.view)
    rewriter.erase(act)
    return REWROTE

