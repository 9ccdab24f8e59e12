"""fuse-attn-quant: attention whose output is quantized to FP8 (static per-tensor scale) -> one
kernel that writes the quantized output.

Anchored at `attn.attention` (SDPA layout `[B, H, T, Dv]`, causal or masked: prefill and the
paged decode over gathered pages alike) and at `attn.mla_attention` (token-major `[T, H, v]` or
batch-major `[B, H, L, v]`, masked or not), whose output reaches one `quant.fp8` static through
the views that put it token-major and flatten it (`[B, H, T, Dv] -> [B * T, H * Dv]`, the
o_proj's input): squeezes and unsqueezes of size-1 dims, transposes, clones and a final reshape.
The views are followed dim by dim, so a layout that is not token-major is a remark, not a wrong
result. Attention gives `fused.attention_quant`, MLA `fused.mla_attention_quant`. Per-group and
NVFP4 quants are remarks for now; an output also read unquantized is left alone.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from irfuse.dialects.attn import AttentionOp, MlaAttentionOp
from irfuse.dialects.fused import AttentionQuantOp, MlaAttentionQuantOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.quant import QuantFp8Op, QuantNvfp4Op
from irfuse.lowering import aten_ops
from irfuse.lowering.driver import AnchorPattern, Site
from irfuse.lowering.match import NoMatch, call, normalize_dim, only_user
from irfuse.rewrites.quant_consumers import divides

KERNEL = "attention_quant_fp8_static"
MLA_KERNEL = "mla_attention_quant_fp8_static"

LAYOUT_VIEWS = (*aten_ops.RESHAPES, aten_ops.TRANSPOSE_INT, aten_ops.PERMUTE, aten_ops.UNSQUEEZE,
                aten_ops.SQUEEZE_DIM, aten_ops.ALIAS, aten_ops.CLONE)
"""Ops between the attention and the quant that move no value: views, and the `clone` a reshape
of a transposed tensor decomposes into."""


class AttnQuantPattern(AnchorPattern):
    """Attention whose output feeds a quant through token-major views."""

    op_types = (AttentionOp, MlaAttentionOp)

    def rewrite(self, op: Operation, site: Site) -> bool:
        assert isinstance(op, AttentionOp | MlaAttentionOp)
        views, end = _views(op.out)
        quant = only_user(end)
        what = "MLA attention" if isinstance(op, MlaAttentionOp) else "attention"
        if isinstance(quant, QuantNvfp4Op):
            raise NoMatch(f"{what} + NVFP4 quant is not fused yet (no kernel writes FP4 from "
                          "the attention epilogue)")
        if not isinstance(quant, QuantFp8Op):
            return False
        if not quant.scheme.is_static:
            raise NoMatch(f"{what} + {quant.scheme.kind.data} FP8 quant has no fused kernel "
                          "(static per-tensor only)")
        out_type = op.out.type
        assert isinstance(out_type, TensorType)
        if isinstance(op, MlaAttentionOp):
            return _fuse_mla(op, views, quant, out_type, site)
        if out_type.rank != 4:
            raise NoMatch(f"the attention output is {out_type.rank}-D, not [B, H, T, Dv]")
        if not _token_major(views, _labels("bhtd", out_type)):
            raise NoMatch("the views between the attention and the quant do not flatten its "
                          "output token-major ([B * T, H * Dv])")
        site.require_kernel(KERNEL)
        fused = AttentionQuantOp(
            op.q, op.k, op.v, op.mask, quant.scale,
            scale=op.scale.value.data, causal=bool(op.causal.value.data),
            scheme=quant.scheme, divide=divides(quant), result_types=[quant.q.type, None],
        )
        _replace(op, views, quant, fused)
        return True


def _fuse_mla(mla: MlaAttentionOp, views: list[Operation], quant: QuantFp8Op,
              out_type: TensorType, site: Site) -> bool:
    """MLA, token-major (`[T, H, v]`) or batch-major (`[B, H, L, v]`), whose output reaches the
    quant flattened token-major."""
    batch_major = bool(mla.batch_major.value.data)
    if batch_major and out_type.rank != 4:
        raise NoMatch(f"the batch-major MLA output is {out_type.rank}-D, not [B, H, L, v]")
    labels = _labels("bhtd", out_type) if batch_major else _labels("thd", out_type)
    if not _token_major(views, labels):
        raise NoMatch("the views between the MLA attention and the quant do not flatten its "
                      "output token-major ([T, H * v])")
    site.require_kernel(MLA_KERNEL)
    fused = MlaAttentionQuantOp(
        mla.q, mla.kv_c, mla.k_pe, mla.kv_b_weight, mla.mask, quant.scale,
        num_heads=mla.num_heads.value.data, qk_nope_head_dim=mla.qk_nope_head_dim.value.data,
        qk_rope_head_dim=mla.qk_rope_head_dim.value.data, v_head_dim=mla.v_head_dim.value.data,
        kv_lora_rank=mla.kv_lora_rank.value.data, scale=mla.scale.value.data,
        causal=bool(mla.causal.value.data), batch_major=batch_major, scheme=quant.scheme,
        divide=divides(quant), result_types=[quant.q.type, None],
    )
    _replace(mla, views, quant, fused)
    return True


def _replace(attn: Operation, views: list[Operation], quant: QuantFp8Op,
             fused: AttentionQuantOp | MlaAttentionQuantOp) -> None:
    fused.location = attn.location
    Rewriter.insert_op(fused, InsertPoint.before(quant))
    fused.out.name_hint = quant.q.name_hint
    quant.q.replace_all_uses_with(fused.out)
    for op in (quant, *reversed(views), attn):
        Rewriter.erase_op(op)


def _labels(names: str, out: TensorType) -> list[tuple[str, object]]:
    """The output's dims, each labelled by one letter of `names`."""
    return list(zip(names, out.dims, strict=True))


def _views(value: SSAValue) -> tuple[list[Operation], SSAValue]:
    """The single-user layout views from `value` down, and the value they end at."""
    views: list[Operation] = []
    while (user := only_user(value)) is not None and call(user, *LAYOUT_VIEWS) is not None:
        views.append(user)
        value = user.results[0]
    return views, value


def _token_major(views: list[Operation], dims: list[tuple[str, object]]) -> bool:
    """Follow the output dims, labelled b, h, t, d (`[B, H, T, Dv]`; MLA's token-major
    `[T, H, v]` has no b), through the views: they must end as `[B * T, H * Dv]` (size-1 dims
    may come and go: a decode step's `[B, H, 1, Dv]` flattens to `[B, H * Dv]`).
    Each dim carries the labels of the dims it holds; a reshape
    may only merge neighbours (Hugging Face reshapes to `[B, T, H * Dv]`, then the linear to
    `[B * T, H * Dv]`)."""
    start = dims
    for view in views:
        found = call(view)
        assert found is not None
        step = _relabel(found, dims)
        if step is None:
            return False
        dims = step
    ones = {lab for lab, n in start if n == 1} | {"1"}
    labels = ["".join(c for c in lab if c not in ones) for lab, _ in dims]
    present = {lab for lab, _ in start}
    tokens = "".join(c for c in "bt" if c in present and c not in ones)
    return [lab for lab in labels if lab] == [tokens, "hd"]


def _relabel(found, dims: list[tuple[str, object]]) -> list[tuple[str, object]] | None:
    rank = len(dims)
    if found.target == aten_ops.TRANSPOSE_INT:
        a, b = normalize_dim(found.arg(1), rank), normalize_dim(found.arg(2), rank)
        dims = dims[:]
        dims[a], dims[b] = dims[b], dims[a]
        return dims
    if found.target == aten_ops.PERMUTE:
        return [dims[normalize_dim(d, rank)] for d in found.arg(1)]
    if found.target == aten_ops.SQUEEZE_DIM:
        d = normalize_dim(found.arg(1), rank)
        return dims if dims[d][1] != 1 else dims[:d] + dims[d + 1:]
    if found.target == aten_ops.UNSQUEEZE:
        d = normalize_dim(found.arg(1), rank + 1)
        return dims[:d] + [("1", 1)] + dims[d:]
    if found.target in (aten_ops.ALIAS, aten_ops.CLONE):
        return dims
    result = found.result.type
    if not isinstance(result, TensorType):
        return None
    return _merge(dims, list(result.dims))


def _merge(dims: list[tuple[str, object]], sizes: list) -> list[tuple[str, object]] | None:
    """The reshape to `sizes` as merges of neighbouring dims (None when it splits or reorders):
    each new dim is a run of old dims (size-1 ones join the run after them) whose sizes are the
    new size (one dim, symbolic or not) or multiply to it (static)."""
    out: list[tuple[str, object]] = []
    i = 0
    for size in sizes:
        if size == 1:
            out.append(dims[i] if i < len(dims) and dims[i][1] == 1 else ("1", 1))
            i += 1 if i < len(dims) and dims[i][1] == 1 else 0
            continue
        labels, product = "", 1
        while i < len(dims) and product != size:
            lab, n = dims[i]
            if n == size and product == 1:
                product = n
            elif isinstance(n, int) and isinstance(product, int):
                product *= n
            else:
                return None
            labels += lab
            i += 1
        if product != size:
            return None
        out.append((labels, size))
    while i < len(dims) and dims[i][1] == 1:
        i += 1
    return out if i == len(dims) else None
