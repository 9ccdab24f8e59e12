"""Small RoPE + paged-cache-write modules shared by the RoPE fusion tests: a neox rope of head 64
from a cos/sin table (positions < 64) and the inputs of a write into `[4, 4, 2, 64]` caches."""

from __future__ import annotations

import torch
from torch import nn


class RopeTable(nn.Module):
    """A neox RoPE of head dim 64, its cos/sin table a bf16 buffer (`_rope`)."""

    def __init__(self):
        super().__init__()
        inv = 10000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float32) / 64)
        freqs = torch.outer(torch.arange(64, dtype=torch.float32), inv)
        self.register_buffer("cache", torch.cat((freqs.cos(), freqs.sin()), -1).bfloat16())

    def _rope(self, x, positions):
        cos, sin = self.cache[positions].chunk(2, -1)
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
        x1, x2 = x.chunk(2, -1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)


def paged_write_inputs(t: int = 6) -> list[torch.Tensor]:
    """positions, q `[t, 4, 64]`, k and v `[t, 2, 64]`, k and v caches (zeros, 16 slots of 2
    heads), and t distinct slots: the arguments of a `forward(positions, q, k, v, k_cache,
    v_cache, slots)`."""
    g = torch.Generator().manual_seed(0)
    return [torch.arange(t), *(torch.randn(t, h, 64, generator=g).bfloat16() for h in (4, 2, 2)),
            torch.zeros(4, 4, 2, 64, dtype=torch.bfloat16),
            torch.zeros(4, 4, 2, 64, dtype=torch.bfloat16), torch.randperm(16, generator=g)[:t]]
