"""Tensor parallelism for the Llama-style models (Megatron layout, as vLLM shards them).

`shard(model, group, collective)` turns a built model into rank r's shard in place: qkv and
gate_up become column-parallel, o and down row-parallel, and each row-parallel output is summed
across ranks as `collective` says (`SumAcrossRanks`): "all_reduce" (functional), "inplace"
(`torch.distributed.all_reduce`, which Dynamo turns functional), "rs_ag" (reduce-scatter along
tokens then all-gather) or "vllm" (`torch.ops.vllm.all_reduce` on the group coordinator that
holds `group`, as vLLM's RowParallelLinear calls it on CUDA).

The embedding, norms and lm_head stay replicated. Sharding a model built on one process with the
same seed gives exactly the slices of the unsharded weights and the same static scales (they are
calibrated before sharding), so the sum over ranks equals the single-process model.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch import nn

from irfuse.models.dist import vllm_name_of
from irfuse.models.llama import LlamaAttention, LlamaMLP

# reduce_scatter_tensor / all_gather_tensor are deprecated in torch 2.13 for the *_single names.
_reduce_scatter = getattr(funcol, "reduce_scatter_single", None) or funcol.reduce_scatter_tensor
_all_gather = getattr(funcol, "all_gather_single", None) or funcol.all_gather_tensor


class SumAcrossRanks(nn.Module):
    """Sum a row-parallel partial output over the group, spelled as `style` says."""

    def __init__(self, group: dist.ProcessGroup, style: str) -> None:
        super().__init__()
        self.group, self.style = group, style
        if style == "vllm":
            self.vllm_name = vllm_name_of(group)

    def extra_repr(self) -> str:
        return f"style={self.style}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.style == "all_reduce":
            return funcol.all_reduce(x, "sum", self.group)
        if self.style == "inplace":
            dist.all_reduce(x, group=self.group)
            return x
        if self.style == "vllm":
            return torch.ops.vllm.all_reduce(x, self.vllm_name)
        scattered = _reduce_scatter(x, "sum", 0, self.group)
        return _all_gather(scattered, 0, self.group)


def _block(start: int, length: int) -> torch.Tensor:
    return torch.arange(start, start + length)


def shard(model: nn.Module, group: dist.ProcessGroup, collective: str) -> nn.Module:
    """Make `model` (built unsharded) this rank's tensor-parallel shard, in place."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    for module in model.modules():
        if isinstance(module, LlamaAttention):
            _shard_attention(module, rank, world, group, collective)
        elif isinstance(module, LlamaMLP):
            _shard_mlp(module, rank, world, group, collective)
    return model


def _check(total: int, world: int, what: str) -> int:
    if total % world:
        raise ValueError(f"{what} ({total}) is not divisible by the TP size {world}")
    return total // world


def _shard_attention(attn: LlamaAttention, rank: int, world: int, group, style: str) -> None:
    d = attn.head_dim
    hq = _check(attn.num_heads, world, "num_heads")
    hk = _check(attn.num_kv_heads, world, "num_kv_heads")
    q_size, kv_size = attn.q_size, attn.kv_size
    rows = torch.cat([
        _block(rank * hq * d, hq * d),
        _block(q_size + rank * hk * d, hk * d),
        _block(q_size + kv_size + rank * hk * d, hk * d),
    ])
    attn.qkv_proj.narrow_out(rows)
    attn.o_proj.narrow_in(rank * hq * d, hq * d)
    attn.num_heads, attn.num_kv_heads = hq, hk
    attn.reduce = SumAcrossRanks(group, style)


def _shard_mlp(mlp: LlamaMLP, rank: int, world: int, group, style: str) -> None:
    inter = mlp.down_proj.in_features
    local = _check(inter, world, "intermediate")
    mine = _block(rank * local, local)
    if mlp.silu_style == "separate":
        mlp.gate_proj.narrow_out(mine)
        mlp.up_proj.narrow_out(mine)
    else:
        mlp.gate_up_proj.narrow_out(torch.cat([mine, mine + inter]))
    mlp.down_proj.narrow_in(rank * local, local)
    mlp.reduce = SumAcrossRanks(group, style)
