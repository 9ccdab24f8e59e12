"""The rope kernels' view of q and k: rows of head_dim grouped by the table row they share.

The kernels take q `[T, H, D]` with a cos/sin row (or a position) per T, shared by the H heads.
Models hand the rope other layouts: vLLM `[T, H, D]` with positions `[T]`, Hugging Face
`[B, H, T, D]` with cos `[B, 1, T, W]`, a multimodal rope (vLLM) positions `[3, T]` or cos
`[3, T, W]`. `RowLayout` finds the dims a table row is shared across (where the broadcast table
has size 1: the heads, and a batch the table does not vary over), moves them next to the last
dim, flattens each group and returns the kernel's operands; `restore` puts a kernel output
`[T, H, D]` back into the caller's layout. The fake implementations call the same code, so the
outputs' strides agree between tracing and running.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RowLayout:
    """Which dims of x index the table (`token_dims`) and which share a row (`head_dims`)."""

    shape: tuple[int, ...]
    token_dims: tuple[int, ...]
    head_dims: tuple[int, ...]

    @property
    def perm(self) -> tuple[int, ...]:
        return (*self.token_dims, *self.head_dims, len(self.shape) - 1)

    @property
    def rows(self) -> tuple[int, int, int]:
        t = math.prod(self.shape[d] for d in self.token_dims)
        h = math.prod(self.shape[d] for d in self.head_dims)
        return t, h, self.shape[-1]

    def to_rows(self, x: torch.Tensor) -> torch.Tensor:
        """x `[.., D]` as `[T, H, D]` (a view where the strides allow, else a copy)."""
        return x.permute(self.perm).reshape(self.rows)

    def restore(self, out: torch.Tensor) -> torch.Tensor:
        """A contiguous kernel output `[T, H, D]` viewed in the caller's layout."""
        permuted = out.view(tuple(self.shape[d] for d in self.perm))
        inverse = sorted(range(len(self.perm)), key=self.perm.__getitem__)
        return permuted.permute(inverse)

    def empty(self, like: torch.Tensor) -> torch.Tensor:
        """A fresh output laid out as `restore` lays the kernel's out."""
        return self.restore(like.new_empty(self.rows))


def layout_for_table(x: torch.Tensor, table: torch.Tensor) -> RowLayout:
    """The layout of x `[.., D]` against cos or sin broadcast to it (last dim W)."""
    lead = x.shape[:-1]
    t_lead = tuple(table.shape[:-1])
    if len(t_lead) > len(lead):
        raise ValueError(f"irfuse: a rope table of shape {tuple(table.shape)} does not broadcast "
                         f"against x of shape {tuple(x.shape)}")
    t_lead = (1,) * (len(lead) - len(t_lead)) + t_lead
    for n, m in zip(lead, t_lead, strict=True):
        if m not in (1, n):
            raise ValueError(f"irfuse: a rope table of shape {tuple(table.shape)} does not "
                             f"broadcast against x of shape {tuple(x.shape)}")
    shared = tuple(d for d, (n, m) in enumerate(zip(lead, t_lead, strict=True))
                   if m == 1 and n != 1)
    tokens = tuple(d for d in range(len(lead)) if d not in shared)
    return RowLayout(tuple(x.shape), tokens, shared)


def layout_for_positions(x: torch.Tensor, positions: torch.Tensor) -> RowLayout:
    """The layout of x `[*positions.shape, heads.., D]` (vLLM: positions `[T]`, x `[T, H, D]`)."""
    p = positions.dim()
    if tuple(x.shape[:p]) != tuple(positions.shape) or x.dim() < p + 1:
        raise ValueError(f"irfuse: positions of shape {tuple(positions.shape)} do not index the "
                         f"leading dims of x of shape {tuple(x.shape)}")
    return RowLayout(tuple(x.shape), tuple(range(p)), tuple(range(p, x.dim() - 1)))


def table_rows(table: torch.Tensor, layout: RowLayout) -> torch.Tensor:
    """cos or sin as `[T, W]`: one row per token of `layout`."""
    full = table.expand(*layout.shape[:-1], table.shape[-1])
    index: list[slice | int] = [slice(None)] * full.dim()
    for d in layout.head_dims:
        index[d] = 0
    return full[tuple(index)].reshape(layout.rows[0], table.shape[-1])


def table_args(layout: RowLayout, positions: torch.Tensor | None, cos: torch.Tensor | None,
               sin: torch.Tensor | None, multimodal: bool = False) -> dict[str, torch.Tensor]:
    """The kernels' table arguments for rows of `layout`: cos and sin as rows, or the positions
    flattened (a cos/sin cache indexed by position). A multimodal rope's positions `[3, ...]`
    and tables `[3, ..., W]` index x's leading dims as positions do: each row flattened."""
    if multimodal:
        if cos is not None:
            return {"cos": cos.flatten(1, -2), "sin": sin.flatten(1, -2)}
        return {"positions": positions.flatten(1)}
    if cos is not None:
        return {"cos": table_rows(cos, layout), "sin": table_rows(sin, layout)}
    return {"positions": positions.reshape(-1)}


def layouts(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None,
            cos: torch.Tensor | None, multimodal: bool = False) -> tuple[RowLayout, RowLayout]:
    """q's and k's layouts; they must index the same table rows."""
    if multimodal:  # the first of the three rows, laid out as positions
        index = positions[0] if positions is not None else cos[0, ..., 0]
        lq, lk = layout_for_positions(q, index), layout_for_positions(k, index)
    elif positions is not None:
        lq, lk = layout_for_positions(q, positions), layout_for_positions(k, positions)
    elif cos is not None:
        lq, lk = layout_for_table(q, cos), layout_for_table(k, cos)
    else:
        raise ValueError("irfuse: rope needs positions and cos_sin_cache, or cos and sin")
    if lq.rows[0] != lk.rows[0]:
        raise ValueError(f"irfuse: q {tuple(q.shape)} and k {tuple(k.shape)} do not share their "
                         "rope table rows")
    return lq, lk
