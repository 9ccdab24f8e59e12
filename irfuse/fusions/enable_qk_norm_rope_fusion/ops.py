"""The kernel of per-head q/k RMSNorm -> RoPE, `qk_norm_rope`, and how `fused.qk_norm_rope`
lowers to it: q and k in the rope's layout (`[T, H, D]`, or `[B, H, T, D]`), their norm weights
`[D]`, the rope table as positions + `cos_sin_cache` or as cos and sin (a multimodal rope's by
section: `mrope_section`), and the readings of the norm (`eps`, `weight_offset`, `weight_f32`)
and of the rotation (`rope_f32`). Any rotary dim up to head_dim, NeoX or GPT-J. `rope_rows`
turns the layouts into the kernel's rows.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from irfuse.dialects import fused
from irfuse.fusions.kernel_call import Lowering
from irfuse.fusions.kernel_decl import Call, Kernel
from irfuse.kernels import dispatch, qk_norm_rope_ref, rope_rows
from irfuse.kernels.dispatch import kernels


def rows_call(c: Call) -> tuple[Call, rope_rows.RowLayout, rope_rows.RowLayout]:
    """`c` with q and k (and the cos / sin tables, or the positions) as the kernel's rows, and
    q's and k's layouts (which restore the outputs)."""
    multimodal = c.mrope_section is not None
    lq, lk = rope_rows.layouts(c.q, c.k, c.positions, c.cos, multimodal)
    rows = Call(c, q=lq.to_rows(c.q), k=lk.to_rows(c.k),
                **rope_rows.table_args(lq, c.positions, c.cos, c.sin, multimodal))
    return rows, lq, lk


def _on_rows(fn: Callable, c: Call) -> tuple[Tensor, Tensor]:
    """`fn` (the reference or the kernel) on q's and k's rows; outputs in their layouts."""
    rows, lq, lk = rows_call(c)
    q_out, k_out = fn(**rows)
    return lq.restore(q_out.contiguous()), lk.restore(k_out.contiguous())


def qk_norm_rope(q: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor,
                 positions: Tensor | None, cos_sin_cache: Tensor | None, cos: Tensor | None,
                 sin: Tensor | None, eps: float, is_neox: bool, rotary_dim: int,
                 weight_offset: float = 0.0, weight_f32: bool = False,
                 rope_f32: bool = False, mrope_section: list[int] | None = None,
                 mrope_interleaved: bool = False) -> tuple[Tensor, Tensor]:
    return _on_rows(qk_norm_rope_ref.qk_norm_rope, Call(locals()))


def _cuda(c: Call) -> tuple[Tensor, Tensor]:
    fn = (kernels("qk_norm_rope").qk_norm_rope if dispatch.use_triton(QK_NORM_ROPE, c.q)
          else qk_norm_rope_ref.qk_norm_rope)
    return _on_rows(fn, c)


def _fake(c: Call) -> tuple[Tensor, Tensor]:
    rows, lq, lk = rows_call(c)
    qk_norm_rope_ref.check_args(rows.q, rows.k, rows.q_weight, rows.k_weight, rows.cos,
                                rows.sin, rows.positions, rows.cos_sin_cache, rows.rotary_dim,
                                mrope_section=rows.mrope_section,
                                mrope_interleaved=rows.mrope_interleaved)
    return lq.empty(c.q), lk.empty(c.k)


def _examples(shape: tuple[int, ...]) -> list[tuple]:
    """q `[T, 4, D]` for `shape` `(T, D)`, k with 2 heads; both table forms, partial rotary, and
    a multimodal rope's both forms (sections one after another, and interleaved)."""
    t, d = shape[0], shape[-1]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(t, 4, d, generator=g).to(torch.bfloat16)
    k = torch.randn(t, 2, d, generator=g).to(torch.bfloat16)
    w = (torch.rand(d, generator=g) + 0.5).to(torch.bfloat16)
    positions = torch.randint(0, 64, (t,), generator=g)
    cache = torch.randn(64, d, generator=g).to(torch.bfloat16)
    cos = torch.randn(t, 1, d // 2, generator=g)
    half = d // 2
    sections = [half - 2 * (half // 4), half // 4, half // 4]
    rows = torch.randint(0, 64, (3, t), generator=g)
    cos3 = torch.randn(3, t, half, generator=g).to(torch.bfloat16)
    return [(q, k, w, w, positions, cache, None, None, 1e-6, True, d),
            (q, k, w, w, None, None, cos, cos.flip(0), 1e-5, False, d // 2, 0.0, True, True),
            (q, k, w, w, rows, cache, None, None, 1e-6, True, d, 0.0, False, False, sections),
            (q, k, w, w, None, None, cos3, cos3.flip(1), 1e-6, True, d, 0.0, False, False,
             sections, True)]


QK_NORM_ROPE = Kernel(qk_norm_rope, _fake, _cuda, examples=_examples)

KERNELS = (QK_NORM_ROPE,)
LOWERINGS = {fused.QkNormRopeOp.name: Lowering(QK_NORM_ROPE)}
