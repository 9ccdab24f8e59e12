"""The kernel of MLA's paired RMSNorms, `mla_dual_rms_norm`, and how `fused.mla_dual_rms_norm`
lowers to it: q and kv (strided slices of one projection allowed), their weights, one eps each,
and the shared readings of the weight product (`weight_offset`, `weight_f32`); returns the two
normed tensors, contiguous. The Triton kernel (`irfuse/kernels/mla_dual_norm.py`) normalizes
both in one launch; its torch reference (`mla_dual_norm_ref.py`) is the CPU path.
"""

from __future__ import annotations

import torch
from torch import Tensor

from irfuse.dialects import fused
from irfuse.fusions.kernel_call import Lowering
from irfuse.fusions.kernel_decl import Call, Kernel
from irfuse.kernels import dispatch, mla_dual_norm_ref
from irfuse.kernels.dispatch import kernels


def mla_dual_rms_norm(q: Tensor, q_weight: Tensor, kv: Tensor, kv_weight: Tensor, q_eps: float,
                      kv_eps: float, weight_offset: float = 0.0,
                      weight_f32: bool = False) -> tuple[Tensor, Tensor]:
    return mla_dual_norm_ref.mla_dual_rms_norm(**Call(locals()))


def _cuda(c: Call) -> tuple[Tensor, Tensor]:
    if dispatch.use_triton(DUAL_NORM, c.q):
        return kernels("mla_dual_norm").mla_dual_rms_norm(**c)
    return mla_dual_norm_ref.mla_dual_rms_norm(**c)


def _fake(c: Call) -> tuple[Tensor, Tensor]:
    mla_dual_norm_ref.check_args(c.q, c.q_weight, c.kv, c.kv_weight)
    return c.q.new_empty(c.q.shape), c.kv.new_empty(c.kv.shape)


def _examples(shape: tuple[int, ...]) -> list[tuple]:
    """q and kv as slices of one `[T, 3 * D]` projection for `shape` `(T, D)`: q the first
    2 * D columns, kv the next D / 2 (the rest is k_pe)."""
    t, d = shape[0], shape[-1]
    g = torch.Generator().manual_seed(0)
    proj = torch.randn(t, 3 * d, generator=g).to(torch.bfloat16)
    q, kv = proj[:, : 2 * d], proj[:, 2 * d: 2 * d + d // 2]
    qw = (torch.rand(2 * d, generator=g) + 0.5).to(torch.bfloat16)
    kvw = (torch.rand(d // 2, generator=g) + 0.5).to(torch.bfloat16)
    return [(q, qw, kv, kvw, 1e-6, 1e-6), (q, qw, kv, kvw, 1e-5, 1e-6, 1.0, True)]


DUAL_NORM = Kernel(mla_dual_rms_norm, _fake, _cuda, examples=_examples)

KERNELS = (DUAL_NORM,)
LOWERINGS = {fused.MlaDualRmsNormOp.name: Lowering(DUAL_NORM)}
