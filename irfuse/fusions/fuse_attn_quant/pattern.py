"""fuse-attn-quant: attention whose output is quantized to FP8 (static per-tensor scale) or
NVFP4 -> one kernel that writes the quantized output.

Anchored at `attn.attention` (SDPA layout `[B, H, T, Dv]`, causal or masked: prefill and the
paged decode over gathered pages alike) and at `attn.mla_attention` (token-major `[T, H, v]` or
batch-major `[B, H, L, v]`, masked or not), whose output reaches one `quant.fp8` static or
`quant.nvfp4` through the views that put it token-major and flatten it (`AttnQuantPattern`).
Attention gives `fused.attention_quant`, MLA `fused.mla_attention_quant`, and a decode step over
a paged KV cache (`paged_decode.py`) `fused.paged_decode_quant`, which reads the pages in place;
under NVFP4 they take the global scale as `output_scale` and yield the packed codes and the
swizzled block scales. Per-group quants are remarks; an output also read unquantized is left
alone. vLLM's own attention call has its pattern in `in_vllm.py` (`VllmAttnQuantPattern`, one of
the patterns the declaration names here).
"""

from __future__ import annotations

from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from irfuse.dialects.attn import AttentionOp, MlaAttentionOp
from irfuse.dialects.fused import AttentionQuantOp, MlaAttentionQuantOp, PagedDecodeQuantOp
from irfuse.dialects.irfuse import TensorType
from irfuse.dialects.quant import QuantFp8Op, QuantNvfp4Op, QuantScheme
from irfuse.fusions.fuse_attn_quant.in_vllm import (
    VllmAttnQuantPattern as VllmAttnQuantPattern,  # declared with this fusion's patterns
)
from irfuse.fusions.fuse_attn_quant.paged_decode import PagedDecode, paged_decode
from irfuse.fusions.quant_consumers import divides, scheme_name
from irfuse.raising import aten_ops
from irfuse.raising.aten_ops import DIM_VIEWS_AND_CLONE as LAYOUT_VIEWS
from irfuse.raising.driver import NO_CANDIDATE, REWROTE, AnchorPattern, Outcome, Site
from irfuse.raising.match import NoMatch, call, erase_unused, normalize_dim, only_user, users

KERNEL = "attention_quant_fp8_static"
MLA_KERNEL = "mla_attention_quant_fp8_static"
NVFP4_KERNEL = "attention_quant_nvfp4"
MLA_NVFP4_KERNEL = "mla_attention_quant_nvfp4"
PAGED_KERNEL = "paged_decode_quant_fp8_static"
PAGED_NVFP4_KERNEL = "paged_decode_quant_nvfp4"


class AttnQuantPattern(AnchorPattern):
    """Attention whose output feeds a quant through token-major views: squeezes and unsqueezes
    of size-1 dims, transposes, clones and a final reshape (`[B, H, T, Dv] -> [B * T, H * Dv]`,
    the o_proj's input), followed dim by dim (`_token_major`), so a layout that is not
    token-major is a remark, not a wrong result."""

    op_types = (AttentionOp, MlaAttentionOp)

    def rewrite(self, op: Operation, rewriter: PatternRewriter, site: Site) -> Outcome:
        assert isinstance(op, AttentionOp | MlaAttentionOp)
        views, end = _views(op.out)
        quant = only_user(end)
        what = "MLA attention" if isinstance(op, MlaAttentionOp) else "attention"
        if not isinstance(quant, QuantFp8Op | QuantNvfp4Op):
            if _quantized_among_others(end):
                raise NoMatch(f"the {what} output is also read unquantized; the fused op "
                              "writes only the quantized output")
            return NO_CANDIDATE
        if isinstance(quant, QuantFp8Op) and not quant.scheme.is_static:
            raise NoMatch(f"{what} + {quant.scheme.kind.data} FP8 quant has no fused kernel "
                          "(static per-tensor only)")
        site.require_scheme(scheme_name(quant))
        out_type = op.out.type
        assert isinstance(out_type, TensorType)
        if isinstance(op, MlaAttentionOp):
            return _fuse_mla(op, views, quant, out_type, rewriter, site)
        if out_type.rank not in (3, 4):
            raise NoMatch(f"the attention output is {out_type.rank}-D, not [B, H, T, Dv] or "
                          "[H, T, Dv]")
        # [H, T, Dv] without a batch dim: vLLM's former TORCH_SDPA backend (q/k/v [T, H, D]
        # moved to [H, T, D], GQA by repeat_interleave, the output moved back).
        labels = _labels("bhtd" if out_type.rank == 4 else "htd", out_type)
        if not _token_major(views, labels):
            raise NoMatch("the views between the attention and the quant do not flatten its "
                          "output token-major ([B * T, H * Dv])")
        scale, scheme, results = _quant_operands(quant)
        paged = paged_decode(op)
        if isinstance(paged, str):
            self.missed(op, f"a decode over gathered pages, not fused with the paged kernel "
                        f"(it attends over the gathered copy): {paged}")
        elif paged is not None:
            why = _chosen(site, PAGED_NVFP4_KERNEL if scheme.is_nvfp4 else PAGED_KERNEL)
            if why is None:
                return _fuse_paged(op, paged, views, quant, scale, scheme, results, rewriter)
            self.missed(op, f"the paged decode kernel is not chosen here, the decode attends "
                        f"over the gathered pages: {why}")
        site.require_kernel(NVFP4_KERNEL if scheme.is_nvfp4 else KERNEL)
        fused = AttentionQuantOp(
            op.q, op.k, op.v, op.mask, scale,
            scale=op.scale.value.data, causal=bool(op.causal.value.data),
            scheme=scheme, divide=divides(quant), result_types=results,
        )
        _replace(op, views, quant, fused, rewriter)
        return REWROTE


def _chosen(site: Site, kernel_name: str) -> str | None:
    """None where kernel choice takes `kernel_name` here, else why not."""
    try:
        site.require_kernel(kernel_name)
    except NoMatch as why:
        return str(why)
    return None


def _fuse_paged(attn: AttentionOp, paged: PagedDecode, views: list[Operation],
                quant: QuantFp8Op | QuantNvfp4Op, scale: SSAValue, scheme: QuantScheme,
                results: list[Attribute | None], rewriter: PatternRewriter) -> Outcome:
    """The decode over gathered pages -> one op reading the pages in place
    (`fused.paged_decode_quant`, where kernel choice takes its kernel; elsewhere the site stays
    `fused.attention_quant` over the gathered copy); the gather and the mask go with it."""
    fused = PagedDecodeQuantOp(
        attn.q, paged.k_cache, paged.v_cache, paged.block_table, paged.seq_lens, scale,
        scale=attn.scale.value.data, scheme=scheme, divide=divides(quant), result_types=results,
    )
    _replace(attn, views, quant, fused, rewriter)
    erase_unused(paged.ops, rewriter)
    return REWROTE


def _quant_operands(quant: QuantFp8Op | QuantNvfp4Op,
                    ) -> tuple[SSAValue, QuantScheme, list[Attribute | None]]:
    """The fused op's scale operand (the static FP8 scale or the NVFP4 global scale), scheme
    and result types (the quant's: its values, and NVFP4's block scales)."""
    if isinstance(quant, QuantNvfp4Op):
        return quant.global_scale, QuantScheme.nvfp4(), [quant.q.type, quant.block_scale.type]
    assert quant.scale is not None, "static FP8 has a scale"
    return quant.scale, quant.scheme, [quant.q.type, None]


def _fuse_mla(mla: MlaAttentionOp, views: list[Operation], quant: QuantFp8Op | QuantNvfp4Op,
              out_type: TensorType, rewriter: PatternRewriter, site: Site) -> Outcome:
    """MLA, token-major (`[T, H, v]`) or batch-major (`[B, H, L, v]`), whose output reaches the
    quant flattened token-major."""
    batch_major = bool(mla.batch_major.value.data)
    if batch_major and out_type.rank != 4:
        raise NoMatch(f"the batch-major MLA output is {out_type.rank}-D, not [B, H, L, v]")
    labels = _labels("bhtd", out_type) if batch_major else _labels("thd", out_type)
    if not _token_major(views, labels):
        raise NoMatch("the views between the MLA attention and the quant do not flatten its "
                      "output token-major ([T, H * v])")
    scale, scheme, results = _quant_operands(quant)
    site.require_kernel(MLA_NVFP4_KERNEL if scheme.is_nvfp4 else MLA_KERNEL)
    fused = MlaAttentionQuantOp(
        mla.q, mla.kv_c, mla.k_pe, mla.kv_b_weight, mla.mask, scale,
        num_heads=mla.num_heads.value.data, qk_nope_head_dim=mla.qk_nope_head_dim.value.data,
        qk_rope_head_dim=mla.qk_rope_head_dim.value.data, v_head_dim=mla.v_head_dim.value.data,
        kv_lora_rank=mla.kv_lora_rank.value.data, scale=mla.scale.value.data,
        causal=bool(mla.causal.value.data), batch_major=batch_major, scheme=scheme,
        divide=divides(quant), result_types=results,
    )
    _replace(mla, views, quant, fused, rewriter)
    return REWROTE


def _replace(attn: Operation, views: list[Operation], quant: QuantFp8Op | QuantNvfp4Op,
             fused: AttentionQuantOp | MlaAttentionQuantOp | PagedDecodeQuantOp,
             rewriter: PatternRewriter) -> None:
    fused.location = attn.location
    rewriter.insert(fused, InsertPoint.before(quant))
    for old, new in zip(quant.results, fused.results, strict=True):
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    for op in (quant, *reversed(views), attn):
        rewriter.erase(op)


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


def _quantized_among_others(value: SSAValue, depth: int = 6) -> bool:
    """Whether a quant reads `value`, directly or through layout views, beside other readers
    (the output is then also read unquantized)."""
    for user in users(value):
        if isinstance(user, QuantFp8Op | QuantNvfp4Op):
            return True
        if depth and call(user, *LAYOUT_VIEWS) is not None and _quantized_among_others(
                user.results[0], depth - 1):
            return True
    return False


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
