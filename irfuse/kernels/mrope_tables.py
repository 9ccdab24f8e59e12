"""Triton kernel of `irfuse::mrope_tables`: a multimodal RoPE's per-token cos and sin, channel j
of each read from the position row (temporal, height, width) its section names, both tables in
one launch. A copy: every value is one of the input's, bit for bit the reference's
(`irfuse.fusions.library_ops.mrope_tables`).

Grid: one program per `TOKENS` tokens, each reading every channel of both tables.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from irfuse.kernels.triton_support import check_device, next_pow2


@triton.jit(do_not_specialize=["T"])
def _mrope_tables_kernel(cos_ptr, sin_ptr, cos_out, sin_out, T, s_row, s_tok,
                         C: tl.constexpr, S_T: tl.constexpr, S_H: tl.constexpr,
                         S_W: tl.constexpr, INTERLEAVED: tl.constexpr, TOKENS: tl.constexpr,
                         BLOCK_C: tl.constexpr):
    toks = (tl.program_id(0) * TOKENS + tl.arange(0, TOKENS))[:, None].to(tl.int64)
    j = tl.arange(0, BLOCK_C)[None, :]
    mask = (toks < T) & (j < C)
    if INTERLEAVED:
        row = tl.where((j % 3 == 1) & (j < 3 * S_H), 1, 0)
        row = tl.where((j % 3 == 2) & (j < 3 * S_W), 2, row)
    else:
        row = (j >= S_T).to(tl.int32) + (j >= S_T + S_H).to(tl.int32)
    src = row.to(tl.int64) * s_row + toks * s_tok + j
    dst = toks * C + j
    tl.store(cos_out + dst, tl.load(cos_ptr + src, mask=mask), mask=mask)
    tl.store(sin_out + dst, tl.load(sin_ptr + src, mask=mask), mask=mask)


def mrope_tables(cos: torch.Tensor, sin: torch.Tensor, mrope_section: list[int],
                 interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin `[3, T, C]` -> `[T, 1, C]` each (the reference's contract, checked by it)."""
    check_device(cos, sin)
    if cos.stride(-1) != 1 or sin.stride() != cos.stride():
        cos, sin = cos.contiguous(), sin.contiguous()
    _, tokens, channels = cos.shape
    cos_out = torch.empty((tokens, 1, channels), dtype=cos.dtype, device=cos.device)
    sin_out = torch.empty_like(cos_out)
    if tokens == 0:
        return cos_out, sin_out
    block_c = next_pow2(channels)
    per_program = max(1, min(16, 2048 // block_c))
    grid = (triton.cdiv(tokens, per_program),)
    _mrope_tables_kernel[grid](
        cos, sin, cos_out, sin_out, tokens, cos.stride(0), cos.stride(1), C=channels,
        S_T=mrope_section[0], S_H=mrope_section[1], S_W=mrope_section[2],
        INTERLEAVED=interleaved, TOKENS=per_program, BLOCK_C=block_c)
    return cos_out, sin_out
