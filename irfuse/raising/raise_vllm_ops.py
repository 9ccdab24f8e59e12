"""raise-vllm-ops: vLLM's own custom ops (`torch.ops._C.*`, and FlashInfer's rotary as
`torch.ops.vllm.*`), as functionalized, raised whole.

vLLM's out-variant ops (`_C.rms_norm(result, input, weight, eps)`, ...) reach the graph as
`auto_functionalized[_v2]` calls with the written tensors as extra results. Anchored at each such
call of `rms_norm`, `fused_add_rms_norm`, the three FP8 quants and CUDA's group quant
(`per_token_group_fp8_quant`, its scales row-major, column-major or TMA-aligned), `silu_and_mul`
(and GeGLU's `gelu_and_mul`, `gelu_tanh_and_mul`), `rotary_embedding` and FlashInfer's
`vllm.flashinfer_rotary_embedding` (DeepSeek's rope on CUDA: an f32 cache, rotated in f32), the
pass produces the semantic op that means the same (`norm.*`, `quant.fp8`, `act.silu_mul`,
`attn.rope`), taking along the fresh output buffers only the call uses, so the fusions see vLLM's
ops as they see torch's. vLLM IR's functional norms (`vllm_ir.rms_norm`,
`vllm_ir.fused_add_rms_norm`, in the graph when vLLM's `compilation_config.ir_enable_torch_wrap`
is on) become `norm.rms_norm` / `norm.add_rms_norm` alike. The call stays in the decomposition
region (no result bit changes). The ops in UNRAISED (CUDA's NVFP4 quant, DeepGEMM's packed group
quant, ROCm's multimodal rope) are named in a remark where they appear.
`filecheck/raise/raise-vllm-ops.mlir`, `raise-vllm-group-quant.mlir` and
`raise-vllm-flashinfer-rope.mlir` show each op.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr, f32
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects import aten
from irfuse.dialects.act import SiluMulOp
from irfuse.dialects.attn import RopeOp
from irfuse.dialects.irfuse import SymType, TensorType
from irfuse.dialects.irfuse import tensor_type as make_tensor_type
from irfuse.dialects.norm import AddRmsNormOp, RmsNormOp
from irfuse.dialects.quant import GROUP_SIZES, QuantFp8Op, QuantScheme
from irfuse.ir import call_args
from irfuse.ir.shapes import F8E4M3FN, F8E4M3FNUZ, is_float, is_one_element, mul_dim
from irfuse.raising import user_kernels
from irfuse.raising.aten_ops import (
    AS_STRIDED,
    AS_STRIDED_SCATTER,
    AUTO_FUNCTIONALIZED,
    AUTO_FUNCTIONALIZED_V2,
    EMPTY_LIKE,
    EMPTY_MEMORY_FORMAT,
    EMPTY_STRIDED,
    FLATTEN_USING_INTS,
    FULL,
    INDEX_TENSOR,
    IRFUSE_MROPE_TABLES,
    NEW_EMPTY,
    NEW_EMPTY_STRIDED,
    NEW_ZEROS,
    PERMUTE,
    SLICE_SCATTER,
    SLICE_TENSOR,
    TRITON_KERNEL_WRAPPER_FUNCTIONAL,
    UNFLATTEN_INT,
    VLLM_DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT,
    VLLM_DYNAMIC_SCALED_FP8_QUANT,
    VLLM_FLASHINFER_ROTARY_EMBEDDING,
    VLLM_FUSED_ADD_RMS_NORM,
    VLLM_GELU_AND_MUL,
    VLLM_GELU_TANH_AND_MUL,
    VLLM_IR_FUSED_ADD_RMS_NORM,
    VLLM_IR_RMS_NORM,
    VLLM_MROPE,
    VLLM_PER_TOKEN_GROUP_FP8_QUANT,
    VLLM_PER_TOKEN_GROUP_FP8_QUANT_PACKED,
    VLLM_RMS_NORM,
    VLLM_ROTARY_EMBEDDING,
    VLLM_SCALED_FP4_QUANT_OUT,
    VLLM_SILU_AND_MUL,
    VLLM_STATIC_SCALED_FP8_QUANT,
    VLLM_TRITON_MROPE,
    ZEROS,
    ZEROS_LIKE,
)
from irfuse.raising.driver import (
    NO_CANDIDATE,
    REWROTE,
    AnchorPattern,
    CallPattern,
    Outcome,
    PatternPass,
    Site,
)
from irfuse.raising.match import (
    Call,
    NoMatch,
    as_cast,
    call,
    discard,
    producer,
    raise_chain,
    size_matches,
    strip_views,
    tensor_type,
    users,
    with_private,
)
from irfuse.raising.raise_quant import FP8_BOUND
from irfuse.raising.user_kernels import KERNEL_ATTR

MUTABLE: dict[str, tuple[str, ...]] = {
    VLLM_RMS_NORM: ("result",),
    VLLM_FUSED_ADD_RMS_NORM: ("input", "residual"),
    VLLM_STATIC_SCALED_FP8_QUANT: ("result",),
    VLLM_DYNAMIC_SCALED_FP8_QUANT: ("result", "scale"),
    VLLM_DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT: ("result", "scale"),
    VLLM_PER_TOKEN_GROUP_FP8_QUANT: ("output_q", "output_s"),
    VLLM_SILU_AND_MUL: ("result",),
    VLLM_GELU_AND_MUL: ("out",),
    VLLM_GELU_TANH_AND_MUL: ("out",),
    VLLM_ROTARY_EMBEDDING: ("query", "key"),
    VLLM_FLASHINFER_ROTARY_EMBEDDING: ("query", "key"),
    VLLM_MROPE: ("query", "key"),
}
"""vLLM's ops this pass knows -> their mutable (`Tensor!`) arguments, in schema order."""

WHAT = {
    VLLM_RMS_NORM: "an RMSNorm",
    VLLM_FUSED_ADD_RMS_NORM: "a residual add + RMSNorm",
    VLLM_STATIC_SCALED_FP8_QUANT: "an FP8 quant",
    VLLM_DYNAMIC_SCALED_FP8_QUANT: "an FP8 quant",
    VLLM_DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT: "an FP8 quant",
    VLLM_PER_TOKEN_GROUP_FP8_QUANT: "an FP8 group quant",
    VLLM_SILU_AND_MUL: "a SiLU·Mul",
    VLLM_GELU_AND_MUL: "a GeGLU",
    VLLM_GELU_TANH_AND_MUL: "a GeGLU",
    VLLM_ROTARY_EMBEDDING: "a RoPE",
    VLLM_FLASHINFER_ROTARY_EMBEDDING: "a RoPE",
    VLLM_MROPE: "a multimodal RoPE",
    VLLM_TRITON_MROPE: "a multimodal RoPE",
}

UNRAISED: dict[str, str] = {
    VLLM_SCALED_FP4_QUANT_OUT: (
        "vLLM's CUDA NVFP4 quant is not raised: its block scale and the factor it multiplies by "
        "are taken through approximate reciprocals (`gs * (amax * rcp(6))`, `rcp(sb * "
        "rcp(gs))`), which round other than irfuse's NVFP4 (`docs/numerics.md`), so the norm "
        "or SiLU·Mul before it stays unfused"),
    VLLM_PER_TOKEN_GROUP_FP8_QUANT_PACKED: (
        "vLLM's FP8 group quant for DeepGEMM (Blackwell, groups of 128) is not raised: it writes "
        "UE8M0 scales packed four to an int32, TMA-aligned, a layout irfuse's group kernels do "
        "not write, so the norm or SiLU·Mul before it stays unfused"),
}
"""vLLM ops on the way to a fusion that irfuse knows and does not raise -> why (a remark in the
report where they appear, as functionalized calls or, for a Triton kernel, its wrapper's call)."""

FP8_DTYPES = (F8E4M3FN, F8E4M3FNUZ)
ALLOCS = (
    EMPTY_MEMORY_FORMAT,
    EMPTY_LIKE,
    EMPTY_STRIDED,
    NEW_EMPTY,
    NEW_EMPTY_STRIDED,
    ZEROS,
    ZEROS_LIKE,
    NEW_ZEROS,
    FULL,
)
"""Ops that make a fresh buffer: an output buffer made by one of these and used by the call
alone moves into the region with it."""
ROTARY_CACHE_DTYPES: dict[str, Attribute | None] = {
    VLLM_ROTARY_EMBEDDING: None,
    VLLM_FLASHINFER_ROTARY_EMBEDDING: f32,
}
"""vLLM's rotary ops (`rotary_embedding(positions, query, key, head_size, cos_sin_cache,
is_neox)`, one meaning: `attn.rope`) -> the cos_sin_cache dtype raised (None: q's). `_C`'s
kernel rotates in the model dtype, its cache cast to it (`_match_cos_sin_cache_dtype`);
FlashInfer's (`vllm.flashinfer_rotary_embedding`, DeepSeek's YaRN rope on CUDA) refuses a cache
other than float32 and rotates in float32 (ROTATES_IN_F32)."""
ROTATES_IN_F32 = (VLLM_FLASHINFER_ROTARY_EMBEDDING,)
"""vLLM's rotary ops whose kernel reads q, k and the cache as float32, computes `x * cos - y *
sin` there and rounds once to q's dtype (`rope_readings.rotates_in_f32` reads the raised rope's
region for them)."""
MROPES = (VLLM_MROPE, VLLM_TRITON_MROPE)
"""vLLM's multimodal RoPEs (MRotaryEmbedding with `[3, T]` positions: Qwen2/2.5/3-VL): ROCm's
`vllm.mrope` op and CUDA's Triton kernel (a user-kernel call). Raised to `attn.rope` on the
per-token cos and sin `irfuse::mrope_tables` picks by section; both rotate in the model dtype,
their cache cast to it."""
VIEWED = (*ROTARY_CACHE_DTYPES, VLLM_MROPE, VLLM_PER_TOKEN_GROUP_FP8_QUANT)
"""Ops whose mutable arguments may be views: vLLM's q and k, split from one qkv buffer (raised
with the views rebuilt around the raised op); a group quant's column-major scales, a transposed
buffer (`_group_scales`)."""
GROUP_EPS_MAX = 1.0 / 512.0
"""The largest `eps` (the amax floor of vLLM's CUDA group quant) irfuse's group scheme agrees
with wherever a group's amax is at least 1/512 (`docs/numerics.md`)."""
ZERO_FILLS = (ZEROS, ZEROS_LIKE, NEW_ZEROS)
_VIEW_KEYS = ("size", "stride", "storage_offset", "slice_dim", "slice_start", "slice_end", "alias")


@dataclass
class _View:
    """How auto_functionalized_v2 regenerates a mutable argument from its base (torch's
    `ViewInfo`): the base itself (`base`), `alias(base)`, `base.slice(dim, start, end)` or
    `base.as_strided(size, stride, storage_offset)`."""

    kind: str
    index: int
    base: SSAValue
    new_base: SSAValue
    dim: Any = None
    start: Any = None
    end: Any = None
    size: tuple = ()
    stride: tuple = ()
    offset: Any = None


@dataclass
class _Functionalized:
    """An auto_functionalized call read back as the vLLM op call it stands for."""

    found: Call
    target: str
    args: dict[str, Any]
    """Every argument by schema name; a mutable one is the tensor before the call (or None)."""
    outs: dict[str, SSAValue]
    """Mutable argument name -> its value after the call (a result of the call)."""
    buffers: list[Operation]
    """Ops that made the mutable arguments' tensors (candidates to move into the region)."""
    views: dict[str, _View] = field(default_factory=dict)
    """v2, ops in VIEWED only: mutable argument name -> how it is regenerated from its base."""
    after: list[Operation] = field(default_factory=list)
    """Ops after the call that belong to what it stands for (a view of a result it wrote)."""


def read_functionalized(found: Call, mutable: tuple[str, ...] | None = None,
                        viewed: bool | None = None) -> _Functionalized:
    """Read an `auto_functionalized[_v2]` call of an op in MUTABLE (or of another op, given its
    mutable arguments and whether they may be views); NoMatch when a mutable argument is a view
    of (or shares its base with) another tensor, unless views are read."""
    target = found.arg(0)
    if mutable is None:
        mutable = MUTABLE[target]
    if viewed is None:
        viewed = target in VIEWED
    kwargs = found.kwargs
    results = found.op.results
    args = {k: v for k, v in kwargs.items() if not k.startswith("_")}
    outs: dict[str, SSAValue] = {}
    views: dict[str, _View] = {}
    if found.target == AUTO_FUNCTIONALIZED:
        if len(results) != 1 + len(mutable):
            raise NoMatch(f"the call has {len(results)} results, not {1 + len(mutable)}")
        for i, name in enumerate(mutable):
            if args.get(name) is not None:
                outs[name] = results[1 + i]
    else:
        bases = kwargs.get("_all_bases")
        if not isinstance(bases, list) or len(results) != 1 + len(bases):
            raise NoMatch("the auto_functionalized_v2 bases do not match its results")
        used: set[int] = set()
        for name in mutable:
            index = kwargs.get(f"_{name}_base_index")
            if index is None:
                args[name] = None
                continue
            if not isinstance(index, int) or not 0 <= index < len(bases):
                raise NoMatch(f"its {name} argument has no base")
            outs[name] = results[1 + index]
            if viewed:
                views[name] = _read_view(kwargs, name, index, bases[index], outs[name])
                args[name] = bases[index] if views[name].kind == "base" else None
                continue
            if any(f"_{name}_{key}" in kwargs for key in _VIEW_KEYS):
                raise NoMatch(f"its {name} argument is a view of a larger tensor")
            if index in used:
                raise NoMatch(f"its {name} argument shares its base with another argument")
            used.add(index)
            args[name] = bases[index]
    buffers = [
        v.owner for name in mutable
        if isinstance(v := args.get(name), SSAValue) and call(v.owner, *ALLOCS) is not None
    ]
    return _Functionalized(found, target, args, outs, buffers, views)  # type: ignore[arg-type]


def _read_view(kwargs: dict[str, Any], name: str, index: int, base: SSAValue,
               new_base: SSAValue) -> _View:
    """torch's `read_view_information_from_args`, for one tensor argument."""
    view = _View("base", index, base, new_base)
    if kwargs.get(f"_{name}_alias"):
        view.kind = "alias"
    elif f"_{name}_storage_offset" in kwargs:
        view.kind = "strided"
        view.size = tuple(kwargs[f"_{name}_size"])
        view.stride = tuple(kwargs[f"_{name}_stride"])
        view.offset = kwargs[f"_{name}_storage_offset"]
    elif f"_{name}_slice_dim" in kwargs:
        view.kind = "slice"
        view.dim = kwargs[f"_{name}_slice_dim"]
        view.start = kwargs[f"_{name}_slice_start"]
        view.end = kwargs[f"_{name}_slice_end"]
    return view


# --- checks ------------------------------------------------------------------------------------


def _tensor(fn: _Functionalized, name: str) -> SSAValue:
    value = fn.args.get(name)
    if tensor_type(value) is None:
        raise NoMatch(f"its {name} argument is not a tensor")
    return value  # type: ignore[return-value]


def _float_input(x: SSAValue) -> None:
    dtype = tensor_type(x).dtype  # type: ignore[union-attr]
    if not is_float(dtype):
        raise NoMatch(f"the input is {dtype}, not a float tensor")


def _written_like(fn: _Functionalized, name: str, dims: tuple, dtype: Any, what: str) -> None:
    t = tensor_type(fn.args.get(name))
    if t is None or t.dims != dims or t.dtype != dtype:
        got = "none" if t is None else f"{list(t.dims)} {t.dtype}"
        raise NoMatch(f"its {name} buffer is {got}, not the {list(dims)} {dtype} {what}")


def _constant(fn: _Functionalized, name: str, kind: type) -> Any:
    value = fn.args.get(name)
    if isinstance(value, bool) and kind is not bool:
        value = None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind):
        raise NoMatch(f"its {name} is not a constant {kind.__name__}")
    return value


def _static_scale(value: Any, what: str) -> SSAValue:
    """A one-element f32 graph input or constant (maybe reshaped or cast on the way)."""
    t = tensor_type(value)
    if t is None:
        raise NoMatch(f"{what} is not a tensor")
    source = value
    while True:
        source, _ = strip_views(source)
        cast = as_cast(source)
        if cast is None:
            break
        source = cast[0]
    if not isinstance(source, BlockArgument) and not isinstance(
        getattr(source, "owner", None), aten.GetAttrOp
    ):
        raise NoMatch(f"{what} is not a graph input or constant")
    if not is_one_element(t.dims) or t.dtype != f32:
        raise NoMatch(f"{what} is {list(t.dims)} {t.dtype}, not one f32 element")
    return value


def _norm_weight(fn: _Functionalized, x: SSAValue) -> SSAValue:
    weight = _tensor(fn, "weight")
    xt, wt = tensor_type(x), tensor_type(weight)
    if wt.dims != xt.dims[-1:]:  # type: ignore[union-attr]
        raise NoMatch(f"the weight is {list(wt.dims)}, not [{xt.dims[-1]}]")  # type: ignore
    if wt.dtype != xt.dtype:  # type: ignore[union-attr]
        raise NoMatch(f"the weight is {wt.dtype}, not the input's {xt.dtype}")  # type: ignore
    return weight


# --- one builder per op: (raised op, the values its results stand for) ---------------------------


def _rms_norm(fn: _Functionalized) -> tuple[Operation, list[SSAValue]]:
    x = _tensor(fn, "input")
    _float_input(x)
    xt = tensor_type(x)
    weight = _norm_weight(fn, x)
    eps = _constant(fn, "epsilon", float)
    _written_like(fn, "result", xt.dims, xt.dtype, "norm output")  # type: ignore[union-attr]
    out = fn.outs["result"]
    return RmsNormOp(x, weight, eps=eps, result_type=out.type), [out]


def _fused_add_rms_norm(fn: _Functionalized) -> tuple[Operation, list[SSAValue]]:
    x = _tensor(fn, "input")
    residual = _tensor(fn, "residual")
    _float_input(x)
    xt = tensor_type(x)
    if tensor_type(residual) != xt:
        raise NoMatch(f"the residual is {tensor_type(residual)}, not the input's {xt}")
    weight = _norm_weight(fn, x)
    eps = _constant(fn, "epsilon", float)
    y, residual_out = fn.outs["input"], fn.outs["residual"]
    raised = AddRmsNormOp(
        x, residual, weight, eps=eps, round_sum=xt.dtype != f32,  # type: ignore[union-attr]
        result_types=(y.type, residual_out.type),
    )
    return raised, [y, residual_out]


def _fp8_result(fn: _Functionalized, x: SSAValue, name: str = "result") -> Any:
    """The fp8 dtype of the buffer `name` the quant writes, which has x's shape."""
    xt = tensor_type(x)
    rt = tensor_type(fn.args.get(name))
    if rt is None or rt.dtype not in FP8_DTYPES:
        raise NoMatch(f"its {name} is {rt and rt.dtype}, not f8E4M3FN or f8E4M3FNUZ")
    _written_like(fn, name, xt.dims, rt.dtype, "quantized input")  # type: ignore[union-attr]
    return rt.dtype


def _static_fp8(fn: _Functionalized) -> tuple[Operation, list[SSAValue]]:
    x = _tensor(fn, "input")
    _float_input(x)
    dtype = _fp8_result(fn, x)
    if fn.args.get("group_shape") is not None:
        raise NoMatch(f"group_shape {fn.args['group_shape']}: irfuse raises per-tensor static "
                      "scales only")
    scale = _static_scale(fn.args.get("scale"), "quant scale")
    q = fn.outs["result"]
    raised = QuantFp8Op(x, scale, scheme=QuantScheme.static_tensor(), fp8_dtype=dtype,
                        result_types=[q.type, None])
    return raised, [q]


def _dynamic_fp8(fn: _Functionalized) -> tuple[Operation, list[SSAValue]]:
    x = _tensor(fn, "input")
    _float_input(x)
    dtype = _fp8_result(fn, x)
    scale = _tensor(fn, "scale")
    st = tensor_type(scale)
    if not is_one_element(st.dims) or st.dtype != f32:  # type: ignore[union-attr]
        raise NoMatch(f"its scale buffer is {st}, not one f32 element")
    maker = producer(scale, *ZERO_FILLS, FULL)
    if maker is None or (maker.target == FULL and maker.arg(1) != 0):
        raise NoMatch("its scale buffer is not a new zero tensor (vLLM's kernel takes the max "
                      "with what the buffer holds)")
    q, s = fn.outs["result"], fn.outs["scale"]
    raised = QuantFp8Op(x, scheme=QuantScheme.dynamic_tensor(), fp8_dtype=dtype,
                        result_types=[q.type, s.type])
    return raised, [q, s]


def _per_token_fp8(fn: _Functionalized) -> tuple[Operation, list[SSAValue]]:
    x = _tensor(fn, "input")
    _float_input(x)
    dtype = _fp8_result(fn, x)
    xt = tensor_type(x)
    _written_like(fn, "scale", (*xt.dims[:-1], 1), f32, "per-token scale")  # type: ignore
    ub = fn.args.get("scale_ub")
    if ub is not None:
        ub = _static_scale(ub, "scale_ub")
    q, s = fn.outs["result"], fn.outs["scale"]
    raised = QuantFp8Op(x, None, ub, scheme=QuantScheme.dynamic_token(), fp8_dtype=dtype,
                        result_types=[q.type, s.type])
    return raised, [q, s]


def _group_fp8(fn: _Functionalized) -> tuple[Operation, list[SSAValue]]:
    """`per_token_group_fp8_quant(input, output_q, output_s, group_size, eps, fp8_min, fp8_max,
    scale_ue8m0, dummy_is_scale_transposed, dummy_is_tma_aligned)`, vLLM's CUDA group quant,
    as `fp8_utils.per_token_group_quant_fp8` calls it: a `group` scheme with its flags."""
    x = _tensor(fn, "input")
    _float_input(x)
    xt = tensor_type(x)
    group = _constant(fn, "group_size", int)
    if group not in GROUP_SIZES:
        raise NoMatch(f"group size {group}: irfuse quantizes groups of 128 or 64")
    hidden = xt.dims[-1] if xt.dims else None  # type: ignore[union-attr]
    if not isinstance(hidden, int) or hidden % group:
        raise NoMatch(f"group size {group} does not divide the static hidden size {hidden}")
    eps = _constant(fn, "eps", float)
    if not 0.0 <= eps <= GROUP_EPS_MAX:
        raise NoMatch(f"eps {eps}: irfuse's group scales floor amax below 1/512 only")
    dtype = _fp8_result(fn, x, "output_q")
    bound = FP8_BOUND[dtype]
    if (fn.args.get("fp8_min"), fn.args.get("fp8_max")) != (-bound, bound):
        raise NoMatch(f"its range is [{fn.args.get('fp8_min')}, {fn.args.get('fp8_max')}], not "
                      f"[-{bound}, {bound}] of {dtype}")
    col_major = bool(fn.args.get("dummy_is_scale_transposed", False))
    tma = bool(fn.args.get("dummy_is_tma_aligned", False))
    ue8m0 = _constant(fn, "scale_ue8m0", bool)
    scale = _group_scales(fn, xt, hidden // group, col_major, tma)  # type: ignore[arg-type]
    q = fn.outs["output_q"]
    scheme = QuantScheme.per_group(group, col_major=col_major, ue8m0=ue8m0, tma_aligned=tma)
    raised = QuantFp8Op(x, scheme=scheme, fp8_dtype=dtype, result_types=[q.type, scale.type])
    return raised, [q, scale]


def _group_scales(fn: _Functionalized, xt: TensorType, groups: int, col_major: bool,
                  tma: bool) -> SSAValue:
    """The value the scales written into `output_s` stand for, `[..., G]` (the layout is the
    scheme's flags): the written buffer itself, row-major or TMA-aligned (`empty_strided`
    `[T, G]`), or for column-major scales the `[T, G]` transpose of a `[G, T]` buffer, as the
    graph reads it after the call (auto_functionalized_v2 regenerates the view: that `permute`
    joins the chain) or passes it in (v1: the permute and its buffer join the chain)."""
    logical = (*xt.dims[:-1], groups)
    if col_major and len(xt.dims) != 2:
        raise NoMatch(f"column-major scales of an input of rank {len(xt.dims)}, not 2")
    if tma and not col_major:
        raise NoMatch("TMA-aligned scales that are not column-major")
    view = fn.views.get("output_s")
    if view is None or view.kind == "base":
        st = tensor_type(fn.args.get("output_s"))
        if st is None or st.dims != logical or st.dtype != f32:
            raise NoMatch(f"its output_s is {st}, not the {list(logical)} f32 group scales")
        maker = producer(fn.args.get("output_s"), *ALLOCS, PERMUTE)
        strided = maker is not None and maker.target in (EMPTY_STRIDED, NEW_EMPTY_STRIDED)
        if maker is not None and maker.target == PERMUTE:
            base = producer(maker.arg(0), *ALLOCS)
            if not col_major or tma or base is None:
                raise NoMatch("its output_s is a transposed buffer the call does not say it is")
            fn.buffers.extend((maker.op, base.op))
        elif maker is None or strided != tma or (col_major and not tma):
            raise NoMatch("its output_s is not a new buffer laid out as its flags say "
                          f"(transposed {col_major}, TMA-aligned {tma})")
        return fn.outs["output_s"]
    base, t = tensor_type(view.base), xt.dims[0]
    size, stride = tuple(view.size), tuple(view.stride)
    if not (col_major and not tma and view.kind == "strided" and base is not None
            and base.dims == (groups, t) and len(size) == len(stride) == 2
            and size_matches(size[0], t) and size_matches(size[1], groups)
            and size_matches(stride[0], 1) and size_matches(stride[1], t)
            and size_matches(view.offset, 0)):
        raise NoMatch("its output_s is a view other than the transpose of a new [G, T] buffer")
    readers = users(view.new_base)
    permute = call(readers[0], PERMUTE) if len(readers) == 1 else None
    if permute is None or permute.arg(1) not in ([-1, -2], [1, 0]):
        raise NoMatch("its transposed scales are not read back through one permute")
    if (maker := producer(view.base, *ALLOCS)) is not None:
        fn.buffers.append(maker.op)
    fn.after.append(permute.op)
    return permute.op.results[0]


def symbolic_half(dim: object) -> str | None:
    """The IR's text of `dim // 2` for a symbolic dim (`s27` -> `(s27//2)`), None for anything
    else."""
    if not isinstance(dim, str) or not dim.isidentifier():
        return None
    return f"({dim}//2)"


def _silu_and_mul(fn: _Functionalized, activation: str = "silu",
                  out: str = "result") -> tuple[Operation, list[SSAValue]]:
    """`silu_and_mul(result, input)`, or GeGLU's `gelu[_tanh]_and_mul(out, input)`."""
    x = _tensor(fn, "input")
    _float_input(x)
    xt = tensor_type(x)
    last = xt.dims[-1] if xt.dims else None  # type: ignore[union-attr]
    # A symbolic width is one `size_contracts` guarded even (the op's contract); its half is
    # the output's `(s//2)`.
    half = last // 2 if isinstance(last, int) else symbolic_half(last)
    if half is None or isinstance(last, int) and last % 2:
        raise NoMatch(f"the input's last dim {last} is not an even size")
    _written_like(fn, out, (*xt.dims[:-1], half), xt.dtype, "output")  # type: ignore
    y = fn.outs[out]
    return SiluMulOp(x, result_type=y.type, activation=activation), [y]


# --- rotary_embedding: q and k as views, rebuilt around the raised op ----------------------------


def _encode(value: Any, operands: list[SSAValue]) -> Attribute:
    """A Python argument as an `aten.call` template (every SSA value a fresh operand)."""
    if isinstance(value, SSAValue):
        operands.append(value)
        return call_args.OperandRefAttr(IntAttr(len(operands) - 1))
    if isinstance(value, bool):
        return call_args.TRUE if value else call_args.FALSE
    if isinstance(value, int):
        return IntAttr(value)
    if isinstance(value, list | tuple):
        return ArrayAttr([_encode(v, operands) for v in value])
    raise NoMatch(f"cannot rebuild the argument {value!r}")


def _aten(target: str, args: Sequence[Any], dims: Sequence[Any], dtype: Attribute
          ) -> aten.CallOp:
    """A new `aten.call` (not inserted) of `target` on `args`, typed `[dims] dtype`."""
    operands: list[SSAValue] = []
    template = [_encode(a, operands) for a in args]
    return aten.CallOp(target, operands, template, [make_tensor_type(tuple(dims), dtype)])


def _dim_of(size: Any) -> Any:
    """A size argument (an int or a symbolic size value) as a tensor type writes it."""
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    if isinstance(size, SSAValue) and isinstance(size.type, SymType):
        return size.type.expr.data
    raise NoMatch(f"the view size {size!r} is not an int or a symbolic size")


@dataclass
class _Rotated:
    """query or key as the raised rope reads and writes it: `x` / `y` `[..., heads, head_size]`
    before / after the call; `prelude` makes x from the call's inputs (before the raised op),
    `inside` makes y from the call's results (in the region)."""

    name: str
    x: SSAValue
    y: SSAValue
    prelude: list[Operation]
    inside: list[Operation]
    split: bool
    """Whether x and y are the argument's flat `[..., heads * head_size]` split into heads."""
    view: _View | None


def _view_ops(view: _View, base: SSAValue) -> list[Operation]:
    """The ops that regenerate the argument from `base` (old or new), as torch does."""
    t = tensor_type(base)
    assert t is not None
    if view.kind == "slice":
        dims = list(t.dims)
        dims[view.dim] = view.end - view.start
        return [_aten(SLICE_TENSOR, [base, view.dim, view.start, view.end], dims,
                      t.dtype)]
    if view.kind == "strided":
        return [_aten(AS_STRIDED,
                      [base, list(view.size), list(view.stride), view.offset],
                      [_dim_of(d) for d in view.size], t.dtype)]
    return []  # the base itself (or its alias: the same elements)


def _heads(value: SSAValue, head_size: int, tokens: int, name: str
           ) -> tuple[SSAValue, list[Operation]]:
    """`value` as `[*tokens, heads, head_size]` (`tokens`: the rank of positions): itself, or
    its flat `[*tokens, heads * head_size]` unflattened (vLLM's layout, one head included)."""
    t = tensor_type(value)
    assert t is not None
    last = t.dims[-1] if t.dims else None
    if t.rank == tokens + 2 and last == head_size:
        return value, []
    if t.rank != tokens + 1 or not isinstance(last, int) or last % head_size:
        raise NoMatch(f"its {name} is {list(t.dims)}: neither [tokens, heads, head_size "
                      f"{head_size}] nor [tokens, heads * head_size]")
    op = _aten(UNFLATTEN_INT, [value, t.rank - 1, [last // head_size, head_size]],
               (*t.dims[:-1], last // head_size, head_size), t.dtype)
    return op.results[0], [op]


def _flattens_heads(view: _View, base: TensorType, head_size: int) -> bool:
    """The as_strided view is the row-major `[*tokens, heads * head_size]` flattening of a
    whole `[*tokens, heads, head_size]` base (vLLM views q back after its per-head norm)."""
    size, stride = list(view.size), list(view.stride)
    if base.rank < 2 or base.dims[-1] != head_size or len(size) != base.rank - 1 \
            or view.offset not in (0, None) or not isinstance(base.dims[-2], int):
        return False
    row = base.dims[-2] * head_size
    return (size[-1] == row and stride[-1] == 1
            and all(size_matches(s, d) for s, d in zip(size[:-1], base.dims[:-2], strict=True))
            and (len(size) == 1 or (stride[-2] == row and len(size) == 2)))


def _check_view(view: _View, head_size: int, name: str) -> None:
    """Views raised: a step-1 static slice of the base's last dim, or an as_strided view that
    splits a static range of each row of the base into heads (`q.view(T, heads, head_size)` of
    such a slice), the heads side by side or spaced (MLA's `q[..., nope:]`, the rope part of
    each head). Anything else is left with a remark."""
    t = tensor_type(view.base)
    if t is None or t.rank < 1:
        raise NoMatch(f"the base of its {name} is not a tensor")
    if view.kind == "slice":
        dim, start, end = view.dim, view.start, view.end
        last = t.dims[-1]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (dim, start, end)):
            raise NoMatch(f"its {name} is a slice with symbolic bounds")
        if dim not in (t.rank - 1, -1) or not isinstance(last, int) or not (
                0 <= start < end <= last):
            raise NoMatch(f"its {name} is a slice of dim {dim} [{start}:{end}] of a "
                          f"{list(t.dims)} base, not a range of its last dim")
        view.dim = t.rank - 1
    elif view.kind == "strided" and _flattens_heads(view, t, head_size):
        view.kind = "alias"  # the whole base, its heads merged: the same elements in order
    elif view.kind == "strided":
        size, stride, offset = view.size, view.stride, view.offset
        if (len(size) != t.rank + 1 or len(stride) != t.rank + 1
                or not all(size_matches(s, d) for s, d in zip(size, t.dims[:-1], strict=False))
                or not all(isinstance(v, int) and not isinstance(v, bool)
                           for v in (*stride, *size[-2:], offset))
                or size[-1] != head_size or stride[-1] != 1 or stride[-2] < head_size):
            raise NoMatch(f"its {name} is an as_strided view {list(size)} / {list(stride)} "
                          f"of a {list(t.dims)} base, not a row range split into heads of "
                          f"{head_size}")
        if t.rank >= 2 and not (offset >= 0 and offset + _extent(view) <= stride[-3]):
            raise NoMatch(f"its {name} is an as_strided view that crosses a row of its base")


def _extent(view: _View) -> int:
    """How many storage elements of a row a strided view of heads spans, first to last."""
    return (view.size[-2] - 1) * view.stride[-2] + view.size[-1]


def _footprint(view: _View, head_size: int) -> tuple[Any, int, int]:
    """(row stride, first, end) of the elements of each row a view covers (slices: in units of
    the last dim; strided: storage elements), for the overlap check."""
    if view.kind == "slice":
        return ("slice", view.start, view.end)
    if view.kind == "strided":
        row = tuple(view.stride[:-2])
        return (row, view.offset, view.offset + _extent(view))
    return ("all", 0, 0)


def _disjoint(a: _View, b: _View, head_size: int) -> bool:
    fa, fb = _footprint(a, head_size), _footprint(b, head_size)
    if fa[0] != fb[0] or fa[0] == "all":
        return False
    return fa[2] <= fb[1] or fb[2] <= fa[1]


def _rotated(fn: _Functionalized, name: str, head_size: int, tokens: int) -> _Rotated:
    view = fn.views.get(name)
    if view is None:  # v1: the tensor itself, its new value a result
        x, prelude = _heads(fn.args[name], head_size, tokens, name)
        y, inside = _heads(fn.outs[name], head_size, tokens, name)
        return _Rotated(name, x, y, prelude, inside, bool(prelude), None)
    _check_view(view, head_size, name)
    prelude = _view_ops(view, view.base)
    inside = _view_ops(view, view.new_base)
    x = prelude[-1].results[0] if prelude else view.base
    y = inside[-1].results[0] if inside else view.new_base
    x, more_prelude = _heads(x, head_size, tokens, name)
    y, more_inside = _heads(y, head_size, tokens, name)
    return _Rotated(name, x, y, [*prelude, *more_prelude], [*inside, *more_inside],
                    bool(more_prelude), view)


def _flat(r: _Rotated, raised_value: SSAValue) -> tuple[SSAValue, list[Operation]]:
    """The raised op's head-split result back in the argument's own shape."""
    if not r.split:
        return raised_value, []
    t = tensor_type(raised_value)
    assert t is not None
    op = _aten(FLATTEN_USING_INTS, [raised_value, t.rank - 2, t.rank - 1],
               (*t.dims[:-2], mul_dim(t.dims[-2], t.dims[-1])), t.dtype)
    return op.results[0], [op]


def _rebuilt_base(rs: list[_Rotated]) -> tuple[SSAValue, list[Operation]]:
    """The new base of the views in `rs` (one base): the old base with each rotated piece
    scattered back where the call wrote it (`slice_scatter`, `as_strided_scatter`), so that
    it holds the call's result bit for bit (the rest of the base is the old one, untouched)."""
    view = rs[0].view
    assert view is not None
    acc: SSAValue = view.base
    t = tensor_type(acc)
    assert t is not None
    ops: list[Operation] = []
    for r in rs:
        v = r.view
        assert v is not None
        piece, flat = _flat(r, r.y)
        ops.extend(flat)
        if v.kind == "slice":
            op = _aten(SLICE_SCATTER, [acc, piece, v.dim, v.start, v.end],
                       t.dims, t.dtype)
        elif v.kind == "strided":
            op = _aten(AS_STRIDED_SCATTER,
                       [acc, piece, list(v.size), list(v.stride), v.offset], t.dims, t.dtype)
        else:
            acc = piece
            continue
        ops.append(op)
        acc = op.results[0]
    return acc, ops


def _raise_rotary(fn: _Functionalized) -> None:
    """Raise a call of one of ROTARY_CACHE_DTYPES to `attn.rope` on `[T, heads, head_size]`
    views of q and k. The region keeps the call and yields the rotated views of its results; the
    values the graph used (v1: the new q and k, maybe flat; v2: the new bases) are rebuilt after
    the raised op from its results, so that every user reads the same bits as before."""
    head_size = _constant(fn, "head_size", int)
    mrope = fn.target in MROPES
    is_neox = _constant(fn, "is_neox_style" if mrope else "is_neox", bool)
    offset, inverse = fn.args.get("rope_dim_offset", 0), fn.args.get("inverse", False)
    if offset != 0 or inverse is not False:  # vLLM 0.32's `_C.rotary_embedding` arguments
        raise NoMatch(f"it rotates from dim {offset} of each head (rope_dim_offset)"
                      if offset != 0 else "it rotates by -sin (inverse)")
    names = [n for n in ("query", "key") if n in fn.outs]
    if "query" not in names:
        raise NoMatch("its query argument is not a tensor")
    if mrope:  # [3, T] positions, or no positions (the kernel's tables): one token dim
        tokens = 1
    else:
        positions, cache = _tensor(fn, "positions"), _tensor(fn, "cos_sin_cache")
        tokens = tensor_type(positions).rank  # type: ignore[union-attr]
    rs = [_rotated(fn, n, head_size, tokens) for n in names]
    q, k = rs[0], rs[1] if len(rs) > 1 else None
    _float_input(q.x)
    if k is not None and k.view is not None and q.view is not None and (
            k.view.index == q.view.index and not _disjoint(q.view, k.view, head_size)):
        raise NoMatch("its query and key overlap in their base (or cannot be told apart)")
    model = tensor_type(q.x).dtype  # type: ignore[union-attr]
    if mrope:
        tables, rotary_dim, made = _mrope_tables(fn, model)
    else:
        ct = tensor_type(cache)
        rotary_dim = ct.dims[-1] if ct.rank == 2 else None  # type: ignore[union-attr]
        if not isinstance(rotary_dim, int):
            raise NoMatch(f"the cos_sin_cache is {list(ct.dims)}, not [max_positions, "  # type: ignore
                          "rotary_dim]")
        _rotary_cache_dtype(fn.target, ct.dtype, model)  # type: ignore[union-attr]
        tables, made = {"positions": positions, "cos_sin_cache": cache}, []
    prelude = [*made, *(o for r in rs for o in r.prelude)]
    inside = [o for r in rs for o in r.inside]
    raised = RopeOp(
        q.x, None if k is None else k.x, **tables,
        is_neox=is_neox, rotary_dim=rotary_dim, head_dim=head_size,
        result_types=[q.y.type, None if k is None else k.y.type],
    )
    try:
        raised.verify()
    except VerifyException as err:
        discard(raised, *reversed(prelude), *reversed(inside))
        raise NoMatch(f"the matched values do not make a valid {raised.name}: {err}") from None
    # The region's extra ops go right after the call; what rebuilds the graph's values from the
    # region's yields goes after those, so `outline` puts the raised op between the two.
    anchor = fn.found.op
    point = InsertPoint.after(anchor)
    for op in inside:
        Rewriter.insert_op(op, point)
        point = InsertPoint.after(op)
    chain = [anchor, *inside]
    after: list[Operation] = []
    redirects: list[tuple[SSAValue, SSAValue]] = []  # (value the graph used, its rebuild)
    if q.view is None:  # v1: the new q and k in their own shapes
        for r in rs:
            old = fn.outs[r.name]
            if r.split and any(u.operation not in chain for u in old.uses):
                flat, ops = _flat(r, r.y)
                after.extend(ops)
                redirects.append((old, flat))
    else:  # v2: the new bases
        for index in dict.fromkeys(r.view.index for r in rs):  # type: ignore[union-attr]
            on_base = [r for r in rs if r.view.index == index]  # type: ignore[union-attr]
            new_base = on_base[0].view.new_base  # type: ignore[union-attr]
            if all(u.operation in chain for u in new_base.uses):
                continue
            rebuilt, ops = _rebuilt_base(on_base)
            after.extend(ops)
            if rebuilt is not new_base:
                redirects.append((new_base, rebuilt))
    for op in after:
        Rewriter.insert_op(op, point)
        point = InsertPoint.after(op)
    ours = set(chain) | set(after)
    for old, new in redirects:
        old.replace_uses_with_if(new, lambda use: use.operation not in ours)
    try:
        raise_chain(raised, chain, [q.y] + ([k.y] if k is not None else []), "vLLM op",
                    prelude=prelude)
    except NoMatch:
        for old, new in redirects:
            new.replace_uses_with_if(old, lambda use: use.operation not in ours)
        discard(*reversed(after), *reversed(inside))
        raise


def _mrope_tables(fn: _Functionalized, model: Attribute
                  ) -> tuple[dict[str, SSAValue], int, list[Operation]]:
    """A multimodal RoPE's tables as `attn.rope` reads them: cos and sin `[T, 1, rotary_dim / 2]`
    from `irfuse::mrope_tables` (exact: a selection), on the tables at the three position rows,
    which CUDA's kernel takes (`cos`, `sin`) and ROCm's op gathers from its cache."""
    rotary_dim = _constant(fn, "rotary_dim", int)
    sections = [_constant(fn, f"mrope_section_{s}", int) for s in "thw"]
    interleaved = _constant(fn, "mrope_interleaved", bool)
    half = rotary_dim // 2
    made: list[Operation] = []
    if fn.target == VLLM_MROPE:
        positions, cache = _tensor(fn, "positions"), _tensor(fn, "cos_sin_cache")
        pt, ct = tensor_type(positions), tensor_type(cache)
        if pt.rank != 2 or pt.dims[0] != 3:  # type: ignore[union-attr]
            raise NoMatch(f"its positions are {list(pt.dims)}, not [3, T]")  # type: ignore
        if ct.dims[1:] != (rotary_dim,) or ct.rank != 2:  # type: ignore[union-attr]
            raise NoMatch(f"the cos_sin_cache is {list(ct.dims)}, not [max_positions, "  # type: ignore
                          f"{rotary_dim}]")
        three = (3, pt.dims[1], rotary_dim)  # type: ignore[union-attr]
        made.append(_aten(INDEX_TENSOR, [cache, [positions]], three, ct.dtype))  # type: ignore
        for start, end in ((0, half), (half, rotary_dim)):
            made.append(_aten(SLICE_TENSOR, [made[0].results[0], 2, start, end],
                              (*three[:2], half), ct.dtype))  # type: ignore[union-attr]
        cos, sin = made[1].results[0], made[2].results[0]
    else:
        cos, sin = _tensor(fn, "cos"), _tensor(fn, "sin")
    t = tensor_type(cos)
    if t.rank != 3 or t.dims[0] != 3 or t.dims[2] != half or tensor_type(sin) != t:  # type: ignore
        raise NoMatch(f"its cos and sin are {tensor_type(cos)} and {tensor_type(sin)}, not "
                      f"[3, T, {half}] each")
    if t.dtype != model:  # type: ignore[union-attr]
        raise NoMatch(f"its cos and sin are {t.dtype}, not q's {model}")  # type: ignore
    if not interleaved and sum(sections) != half:
        raise NoMatch(f"its sections {sections} do not add up to rotary_dim / 2 ({half})")
    table = make_tensor_type((t.dims[1], 1, half), t.dtype)  # type: ignore[union-attr]
    operands: list[SSAValue] = []
    template = [_encode(a, operands) for a in (cos, sin, sections, interleaved)]
    made.append(aten.CallOp(IRFUSE_MROPE_TABLES, operands, template, [table, table],
                            tuple_result=True))
    return {"cos": made[-1].results[0], "sin": made[-1].results[1]}, rotary_dim, made


def _rotary_cache_dtype(target: str, cache: Attribute, model: Attribute) -> None:
    """NoMatch unless the cache has the dtype the op's kernel takes (ROTARY_CACHE_DTYPES)."""
    want = ROTARY_CACHE_DTYPES[target]
    if want is None and cache != model:
        raise NoMatch(f"the cos_sin_cache is {cache}, not q's {model}")
    if want is not None and cache != want:
        raise NoMatch(f"the cos_sin_cache is {cache}, not the {want} cache its kernel reads")


BUILDERS = {
    VLLM_RMS_NORM: _rms_norm,
    VLLM_FUSED_ADD_RMS_NORM: _fused_add_rms_norm,
    VLLM_STATIC_SCALED_FP8_QUANT: _static_fp8,
    VLLM_DYNAMIC_SCALED_FP8_QUANT: _dynamic_fp8,
    VLLM_DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT: _per_token_fp8,
    VLLM_PER_TOKEN_GROUP_FP8_QUANT: _group_fp8,
    VLLM_SILU_AND_MUL: _silu_and_mul,
    VLLM_GELU_AND_MUL: lambda fn: _silu_and_mul(fn, "gelu", "out"),
    VLLM_GELU_TANH_AND_MUL: lambda fn: _silu_and_mul(fn, "gelu_tanh", "out"),
}


def vllm_target(op: Operation) -> str | None:
    """The vLLM op an `auto_functionalized[_v2]` call stands for, if it is one of MUTABLE."""
    if not isinstance(op, aten.CallOp) or op.target.data not in (AUTO_FUNCTIONALIZED, AUTO_FUNCTIONALIZED_V2):
        return None
    first = op.template.data[0] if op.template.data else None
    if not isinstance(first, call_args.TargetAttr) or first.text.data not in MUTABLE:
        return None
    return first.text.data


def _raise(candidate: Operation, order: dict[Operation, int]) -> None:
    found = call(candidate)
    assert found is not None
    fn = read_functionalized(found)
    if fn.target in ROTARY_CACHE_DTYPES or fn.target in MROPES:
        _raise_rotary(fn)
        return
    raised, outputs = BUILDERS[fn.target](fn)
    ops = with_private([candidate, *fn.after], fn.buffers)
    ops.sort(key=lambda o: order[o])
    raise_chain(raised, ops, outputs, "vLLM op", verify=True)


class VllmOpPattern(AnchorPattern):
    """A functionalized vLLM op (`auto_functionalized[_v2]` of one of MUTABLE)."""

    targets = (AUTO_FUNCTIONALIZED, AUTO_FUNCTIONALIZED_V2)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        target = vllm_target(op)
        if target is None:
            first = call(op)
            known = first.arg(0) if first is not None else None
            if isinstance(known, str) and known in UNRAISED:
                name = known.removesuffix(".default").replace("::", ".")
                raise NoMatch(f"{name}: {UNRAISED[known]}")
            return NO_CANDIDATE
        try:
            _raise(op, site.order)
        except NoMatch as miss:  # the remark names the vLLM op
            name = target.removesuffix(".default").replace("::", ".")
            raise NoMatch(f"not {WHAT[target]} ({name}): {miss}") from None
        return REWROTE


class VllmKernelPattern(AnchorPattern):
    """A user Triton kernel's call that launches vLLM's CUDA MRoPE kernel."""

    targets = (TRITON_KERNEL_WRAPPER_FUNCTIONAL,)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        kernel = op.attributes.get(KERNEL_ATTR)
        if not isinstance(kernel, StringAttr) or kernel.data != VLLM_TRITON_MROPE:
            return NO_CANDIDATE
        found = call(op)
        assert found is not None
        try:
            _raise_rotary(_read_kernel_call(found, kernel.data))
        except NoMatch as miss:
            name = kernel.data.rsplit(".", 1)[-1]
            raise NoMatch(f"not {WHAT[kernel.data]} ({name}): {miss}") from None
        return REWROTE


def _read_kernel_call(found: Call, kernel: str) -> _Functionalized:
    """vLLM's CUDA MRoPE kernel's call read as the op call it stands for: its tensors and
    symbolic sizes (`kwargs`), constants (torch's side table) under the names ROCm's op gives
    them, and the rotated q and k its functional form returns."""
    tensors = found.kwargs.get("kwargs")
    keys = found.op.result_keys
    if not isinstance(tensors, dict) or keys is None:
        raise NoMatch("its call has no tensor arguments by name")
    try:
        constants = user_kernels.constant_args(found.kwargs["constant_args_idx"])
    except (AssertionError, KeyError):  # a graph from another process (a dump)
        raise NoMatch("its constant arguments are not in this process's side table") from None
    given = {**constants, **tensors}
    try:
        args = {"query": given["q_ptr"], "key": given["k_ptr"], "cos": given["cos"],
                "sin": given["sin"], "head_size": given["hd"], "rotary_dim": given["rd"],
                "mrope_section_t": given["mrope_section_t"],
                "mrope_section_h": given["mrope_section_h"],
                "mrope_section_w": given["mrope_section_w"],
                "mrope_interleaved": given["is_interleaved"],
                "is_neox_style": given["is_neox_style"]}
    except KeyError as missing:
        raise NoMatch(f"its kernel takes no argument {missing}") from None
    results = dict(zip((k.data for k in keys.data), found.op.results, strict=True))
    outs = {name: results[key] for name, key in (("query", "q_ptr"), ("key", "k_ptr"))
            if key in results}
    if any(r.uses for key, r in results.items() if key not in ("q_ptr", "k_ptr")):
        raise NoMatch("a tensor other than q and k is read after the kernel")
    for name, heads in (("query", "n_qh"), ("key", "n_kh")):
        t, n, size = tensor_type(args[name]), given.get(heads), args["head_size"]
        if t is None or not isinstance(n, int) or not isinstance(size, int) or t.rank != 2 \
                or t.dims[1] != n * size:
            raise NoMatch(f"its {name} is {t}, not [T, {heads} * hd] ({n} x {size})")
    return _Functionalized(found, kernel, args, outs, [])


# --- vLLM IR's norms (`torch.ops.vllm_ir.*`, with compilation_config.ir_enable_torch_wrap) ------


def _raise_ir_norm(found: Call) -> None:
    """`vllm_ir.rms_norm(x, weight?, epsilon, variance_size=None)` and
    `vllm_ir.fused_add_rms_norm(x, x_residual, weight?, epsilon, variance_size=None)`: functional
    ops (vLLM functionalizes the `maybe_inplace` overload before aot_autograd), their native
    numerics those of `norm.rms_norm` / `norm.add_rms_norm` (f32 sum, not rounded before the
    norm) when the weight is in x's dtype: `x.to(weight.dtype) * weight`, then x's dtype."""
    fused_add = found.target == VLLM_IR_FUSED_ADD_RMS_NORM
    x = found.arg(0, "x")
    residual = found.arg(1, "x_residual") if fused_add else None
    at = 2 if fused_add else 1
    weight = found.arg(at, "weight")
    eps = found.arg(at + 1, "epsilon")
    if found.arg(at + 2, "variance_size") is not None:
        raise NoMatch("its variance_size is set (a norm over part of the row)")
    xt = tensor_type(x)
    if xt is None or not is_float(xt.dtype):
        raise NoMatch("its x is not a float tensor")
    if isinstance(eps, int) and not isinstance(eps, bool):
        eps = float(eps)
    if not isinstance(eps, float):
        raise NoMatch("its epsilon is not a constant float")
    if weight is not None:
        wt = tensor_type(weight)
        if wt is None or wt.dims != xt.dims[-1:]:
            raise NoMatch(f"its weight is {wt}, not [{xt.dims[-1]}]")
        if wt.dtype != xt.dtype:
            raise NoMatch(f"its weight is {wt.dtype}, not x's {xt.dtype} (vLLM IR multiplies in "
                          "the weight's dtype, which norm.rms_norm reads as x's)")
    results = list(found.op.results)
    if fused_add:
        if tensor_type(residual) != xt:
            raise NoMatch(f"its x_residual is {tensor_type(residual)}, not x's {xt}")
        raised: Operation = AddRmsNormOp(x, residual, weight, eps=eps,
                                         result_types=(results[0].type, results[1].type))
    else:
        raised = RmsNormOp(x, weight, eps=eps, result_type=results[0].type)
    raise_chain(raised, [found.op], results, "vLLM IR op", verify=True)


class VllmIrNormPattern(CallPattern):
    """`vllm_ir.rms_norm` / `vllm_ir.fused_add_rms_norm`."""

    targets = (VLLM_IR_RMS_NORM, VLLM_IR_FUSED_ADD_RMS_NORM)
    remark = "not an RMSNorm (vLLM IR's norm op)"

    def rewrite_call(self, found: Call, rewriter: PatternRewriter, site: Site) -> Outcome:
        _raise_ir_norm(found)
        return REWROTE


class RaiseVllmOps(PatternPass):
    """Raise vLLM's functionalized custom ops (`_C.rms_norm`, `_C.static_scaled_fp8_quant`, ...)
    and vLLM IR's norms (`vllm_ir.rms_norm`, `vllm_ir.fused_add_rms_norm`) to semantic ops. No
    options."""

    name = "raise-vllm-ops"
    patterns = (VllmOpPattern(), VllmKernelPattern(), VllmIrNormPattern())
