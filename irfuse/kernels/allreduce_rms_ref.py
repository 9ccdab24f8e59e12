"""Torch reference of the fused all-reduce + (residual add +) RMSNorm (+ quant).

The all-reduce is torch's functional collective (`_c10d_functional.all_reduce` + `wait_tensor`,
sum) on the process group the fused op names, resolved by name as every irfuse kernel resolves
it (`irfuse.groups`): torch.distributed's registry, else vLLM's registry of its group
coordinators (`tp:0`, ...: the coordinator's device group) when vLLM is imported. The group
is always the op's own: a DP or PP group is never replaced by WORLD, and an unknown name is an
error naming it. The rest is the composition of the existing
references: the norm with the model's readings (`norm_pad_ref` at pad 0: `round_sum`,
`weight_offset`, `weight_f32`), then `quant_ref`'s quant. So on the CPU (gloo) the fused op
gives the bits of the unfused graph: the same collective on the same input, then the same norm
and quant arithmetic.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from irfuse import groups
from irfuse.kernels import norm_pad_ref, norm_quant_ref, quant_ref


def resolve_group(name: str) -> dist.ProcessGroup:
    """The process group the fused op names (`irfuse.groups.resolve`: torch's group of that
    name, or vLLM's group coordinator's device group). GroupError (a ValueError) when neither
    knows it."""
    return groups.resolve(name)


vllm_coordinator = groups.vllm_coordinator


def all_reduce(x: torch.Tensor, group: str) -> torch.Tensor:
    """The sum of x over the ranks of `group` (functional collective, waited); a new tensor."""
    pg = resolve_group(group)
    reduced = torch.ops._c10d_functional.all_reduce(x.contiguous(), "sum", pg.group_name)
    reduced = torch.ops._c10d_functional.wait_tensor(reduced)
    return reduced.clone() if reduced.data_ptr() == x.data_ptr() else reduced


def check_args(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor) -> None:
    """The argument errors every implementation raises (norm_quant_ref's, for the input)."""
    norm_quant_ref.check_norm_args(x, weight, residual)


def rms_norm(reduced: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor,
             eps: float, weight_offset: float, round_sum: bool, weight_f32: bool,
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, residual_out) of the all-reduced value: the norm with the model's readings, and the
    new residual (the all-reduced value itself without a residual)."""
    if residual is None:
        y = norm_pad_ref.rms_norm_pad(reduced, weight, eps, low=0, high=0,
                                      weight_offset=weight_offset, weight_f32=weight_f32)
        return y, reduced
    return norm_pad_ref.add_rms_norm_pad(reduced, residual, weight, eps, low=0, high=0,
                                         weight_offset=weight_offset, round_sum=round_sum,
                                         weight_f32=weight_f32)


def all_reduce_rms_norm(x, residual, weight, group, eps, weight_offset, round_sum=False,
                        weight_f32=False):
    """All-reduce + (residual add +) RMSNorm: (y, residual_out)."""
    check_args(x, residual, weight)
    return rms_norm(all_reduce(x, group), residual, weight, eps, weight_offset, round_sum,
                    weight_f32)


def all_reduce_rms_norm_quant_fp8_static(x, residual, weight, scale, group, eps, weight_offset,
                                         out_dtype, divide=False, round_sum=False,
                                         weight_f32=False):
    """... -> static FP8 (`divide`: `y / s`): (q, residual_out)."""
    y, r = all_reduce_rms_norm(x, residual, weight, group, eps, weight_offset, round_sum,
                               weight_f32)
    return quant_ref.quant_fp8_static(y, scale, out_dtype, divide), r


def all_reduce_rms_norm_quant_fp8_per_token(x, residual, weight, scale_ub, group, eps,
                                            weight_offset, out_dtype, round_sum=False,
                                            weight_f32=False):
    """... -> dynamic per-token FP8: (q, scales [..., 1], residual_out)."""
    y, r = all_reduce_rms_norm(x, residual, weight, group, eps, weight_offset, round_sum,
                               weight_f32)
    q, s = quant_ref.quant_fp8_per_token(y, scale_ub, out_dtype)
    return q, s, r


def all_reduce_rms_norm_quant_fp8_group(x, residual, weight, group, eps, weight_offset,
                                        group_size, col_major, ue8m0, out_dtype,
                                        round_sum=False, weight_f32=False):
    """... -> per-group FP8: (q, scales, residual_out)."""
    quant_ref.check_group_size(x.shape[-1], group_size)
    y, r = all_reduce_rms_norm(x, residual, weight, group, eps, weight_offset, round_sum,
                               weight_f32)
    q, s = quant_ref.quant_fp8_group(y, group_size, col_major, ue8m0, out_dtype)
    return q, s, r


def all_reduce_rms_norm_quant_nvfp4(x, residual, weight, global_scale, group, eps,
                                    weight_offset, round_sum=False, weight_f32=False):
    """... -> NVFP4: (packed codes, swizzled block scales, residual_out)."""
    y, r = all_reduce_rms_norm(x, residual, weight, group, eps, weight_offset, round_sum,
                               weight_f32)
    q, s = quant_ref.quant_nvfp4(y, global_scale)
    return q, s, r
