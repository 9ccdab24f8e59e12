"""fuse-attn-quant: attention whose output is quantized to FP8 (static per-tensor scale) -> one
kernel that writes the quantized output.

Anchored at `attn.attention` (SDPA layout `[B, H, T, Dv]`, causal or masked: prefill and the
paged decode over gathered pages alike) whose output reaches one `quant.fp8` static through the
views that put it token-major and flatten it (`[B, H, T, Dv] -> [B * T, H * Dv]`, the o_proj's
input): squeezes and unsqueezes of size-1 dims, transposes, and a final reshape. The views are
followed dim by dim, so a layout that is not token-major is a remark, not a wrong result.
Per-group and NVFP4 quants, an output also read unquantized and MLA are remarks for now.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from irfuse.dialects.attn import AttentionOp, MlaAttentionOp
from irfuse.dialects.fused import AttentionQuantOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.quant import QuantFp8Op
from irfuse.lowering import aten_ops
from irfuse.lowering.driver import AnchorPattern, Site
from irfuse.lowering.match import NoMatch, call, normalize_dim, only_user
from irfuse.rewrites.quant_consumers import divides

KERNEL = "attention_quant_fp8_static"

LAYOUT_VIEWS = (*aten_ops.RESHAPES, aten_ops.TRANSPOSE_INT, aten_ops.PERMUTE, aten_ops.UNSQUEEZE,
                aten_ops.SQUEEZE_DIM, aten_ops.ALIAS, aten_ops.CLONE)
"""Ops between the attention and the quant that move no value: views, and the `clone` a reshape
of a transposed tensor decomposes into."""


class AttnQuantPattern(AnchorPattern):
    """Attention whose output feeds a quant through token-major views."""

    op_types = (AttentionOp, MlaAttentionOp)

    def rewrite(self, op: Operation, site: Site) -> bool:
        if isinstance(op, MlaAttentionOp):
            _, end = _views(op.out)
            if isinstance(only_user(end), QuantFp8Op):
                raise NoMatch("MLA attention + FP8 quant is not fused yet (no kernel)")
            return False
        assert isinstance(op, AttentionOp)
        return _fuse(op, site)


def _fuse(attn: AttentionOp, site: Site) -> bool:
    views, end = _views(attn.out)
    quant = only_user(end)
    if not isinstance(quant, QuantFp8Op):
        return False
    if not quant.scheme.is_static:
        raise NoMatch(f"attention + {quant.scheme.kind.data} FP8 quant has no fused kernel "
                      "(static per-tensor only)")
    out_type = attn.out.type
    assert isinstance(out_type, TensorType)
    if out_type.rank != 4:
        raise NoMatch(f"the attention output is {out_type.rank}-D, not [B, H, T, Dv]")
    if not _token_major(views, out_type):
        raise NoMatch("the views between the attention and the quant do not flatten its output "
                      "token-major ([B * T, H * Dv])")
    site.require_kernel(KERNEL)

    fused = AttentionQuantOp(
        attn.q, attn.k, attn.v, attn.mask, quant.scale,
        scale=attn.scale.value.data, causal=bool(attn.causal.value.data),
        scheme=quant.scheme, divide=divides(quant), result_types=[quant.q.type, None],
    )
    fused.location = attn.location
    Rewriter.insert_op(fused, InsertPoint.before(quant))
    fused.out.name_hint = quant.q.name_hint
    quant.q.replace_all_uses_with(fused.out)
    for op in (quant, *reversed(views), attn):
        Rewriter.erase_op(op)
    return True


def _views(value: SSAValue) -> tuple[list[Operation], SSAValue]:
    """The single-user layout views from `value` down, and the value they end at."""
    views: list[Operation] = []
    while (user := only_user(value)) is not None and call(user, *LAYOUT_VIEWS) is not None:
        views.append(user)
        value = user.results[0]
    return views, value


def _token_major(views: list[Operation], out: TensorType) -> bool:
    """Follow the dims of `[B, H, T, Dv]` through the views: they must end as `[B * T, H * Dv]`
    (size-1 dims may come and go: a decode step's `[B, H, 1, Dv]` flattens to `[B, H * Dv]`).
    Each dim carries the labels of the dims it holds; a reshape
    may only merge neighbours (Hugging Face reshapes to `[B, T, H * Dv]`, then the linear to
    `[B * T, H * Dv]`)."""
    dims: list[tuple[str, object]] = [("b", out.dims[0]), ("h", out.dims[1]),
                                      ("t", out.dims[2]), ("d", out.dims[3])]
    for view in views:
        found = call(view)
        assert found is not None
        step = _relabel(found, dims)
        if step is None:
            return False
        dims = step
    ones = {lab for lab, n in zip("bhtd", out.dims, strict=True) if n == 1} | {"1"}
    labels = ["".join(c for c in lab if c not in ones) for lab, _ in dims]
    tokens = "".join(c for c in "bt" if c not in ones)
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
