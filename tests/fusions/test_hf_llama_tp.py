"""A Hugging Face Llama, sharded for tensor parallelism, compiled with irfuse's collective
fusions across gloo processes, against the unsharded model.

The model is `transformers`' LlamaForCausalLM from a small config (random weights, offline),
sharded as Megatron does it: q/k/v and gate/up keep this rank's output rows (column-parallel),
o and down this rank's input columns (row-parallel) followed by the sum over the group, spelled
as Dynamo captures it from user code: `dist.all_reduce(x)` in place, or the functional
`all_reduce`. Hugging Face keeps its hidden states `[B, S, H]` and adds `residual + hidden`,
residual first: the shapes and the spelling the collective passes must match.

One spawn per world size runs every configuration. TP 2: enable-sp with fuse-gemm-comms on
`[1, S, H]` (functional all-reduce), and every collective pass on a batch of two sequences
(in-place all-reduce) called at a compile size TP divides (enable-sp) and at one it does not
(the general range, where fuse-allreduce-rms takes the all-reduces). TP 4: every collective
pass on `[1, S, H]`, and the same passes with two TP groups of 2 beside each other (DP 2 x TP 2,
each replica its own tokens: vLLM's all-reduce fusion breaks there, vllm#34458). Each rank
checks its logits against the unsharded model (f32, 1e-4: the sharded sums only reorder f32
additions) and reports what the passes did: the raised counts, each pass's fused count and
remarks, the kernels the report names, and (the first rank of each TP group, from its dump) the
collective ops before the passes and after the last fusion, and the process groups they name.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from hf_corpus import HF_KW, Logits
from torch import nn

from irfuse import backend
from irfuse.models.dist import spawn_ranks
from irfuse.models.tp import SumAcrossRanks

LAYERS = HF_KW["num_hidden_layers"]
SP = {"enable_sp": True, "sp_min_token_num": 4, "eliminate_noops": True}
SP_GEMM = {**SP, "fuse_gemm_comms": True}
ALL = {**SP_GEMM, "fuse_allreduce_rms": True}


def build_llama(seed: int = 0) -> nn.Module:
    """The unsharded model: f32, SDPA, 4 query and 4 KV heads (TP 4 splits both)."""
    import transformers as tf

    config = tf.LlamaConfig(**{**HF_KW, "num_key_value_heads": 4})
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    return Logits(tf.LlamaForCausalLM(config).eval())


class RowParallel(nn.Module):
    """A row-parallel linear: this rank's input columns, then the sum over the group."""

    def __init__(self, linear: nn.Linear, reduce: SumAcrossRanks):
        super().__init__()
        self.linear, self.reduce = linear, reduce

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.reduce(self.linear(x))


def _keep_rows(linear: nn.Linear, rank: int, world: int) -> None:
    n = linear.out_features // world
    linear.weight = nn.Parameter(linear.weight.detach()[rank * n:(rank + 1) * n].clone())
    linear.out_features = n


def _keep_cols(linear: nn.Linear, rank: int, world: int) -> None:
    n = linear.in_features // world
    linear.weight = nn.Parameter(linear.weight.detach()[:, rank * n:(rank + 1) * n].clone())
    linear.in_features = n


def shard_llama(model: nn.Module, group: dist.ProcessGroup, style: str) -> nn.Module:
    """Make the unsharded Hugging Face Llama this rank's TP shard, in place. Heads stay whole:
    q, k and v keep this rank's block of heads (HF reads the head count off the shapes)."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    for layer in model.lm.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj, mlp.gate_proj, mlp.up_proj):
            _keep_rows(proj, rank, world)
        for proj in (attn.o_proj, mlp.down_proj):
            _keep_cols(proj, rank, world)
        attn.o_proj = RowParallel(attn.o_proj, SumAcrossRanks(group, style))
        mlp.down_proj = RowParallel(mlp.down_proj, SumAcrossRanks(group, style))
    return model


def token_ids(batch: int, seq: int, replica: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(1 + replica)
    return torch.randint(0, HF_KW["vocab_size"], (batch, seq), generator=g)


# (name, collective spelling, pass_config, TP groups, batch, compile size in token rows (B * S),
# the calls' S, S marked dynamic).
# TP groups: "world", or "dp2": ranks {0, 1} and {2, 3} are two TP groups of 2 (two
# data-parallel replicas, each given its own tokens).
Case = tuple[str, str, dict, str, int, int | None, tuple[int, ...], bool]
CASES: dict[int, list[Case]] = {
    2: [
        ("sp-gemm-funcol", "all_reduce", SP_GEMM, "world", 1, 8, (8,), True),
        ("static-sp", "all_reduce", SP, "world", 1, None, (8,), False),
        ("all-batch-inplace", "inplace", ALL, "world", 2, 12, (6, 1), True),
    ],
    4: [
        ("all-funcol", "all_reduce", ALL, "world", 1, 8, (8,), True),
        ("dp2-all-inplace", "inplace", ALL, "dp2", 1, 8, (8, 2), True),
    ],
}


def _replica(rank: int, groups: str) -> int:
    """The data-parallel replica a rank belongs to (its tokens' seed)."""
    return rank // 2 if groups == "dp2" else 0


def _collectives(dump: Path) -> tuple[dict[str, int], dict[str, int], set[str]]:
    """The `coll.*` and `fused.*` ops before the collective passes (after eliminate-noops) and
    after the last fusion (the stage before emit), summed over the compiled ranges, and the
    process groups the ops after name."""
    before: dict[str, int] = {}
    after: dict[str, int] = {}
    groups: set[str] = set()
    for emit in dump.rglob("*-emit.mlir"):
        stages = sorted(emit.parent.glob("*.mlir"))
        last = stages[stages.index(emit) - 1]
        (first,) = emit.parent.glob("*-eliminate-noops.mlir")
        for path, counts in ((first, before), (last, after)):
            for op in re.findall(r"= ((?:coll|fused)\.\w+) ", path.read_text()):
                counts[op] = counts.get(op, 0) + 1
        groups |= set(re.findall(r'\{group = "([^"]+)"', last.read_text()))
    return before, after, groups


def _worker(rank: int, world: int, out_dir: str) -> None:
    results: dict[str, Any] = {}
    # Every rank creates every group, in the same order (torch.distributed's rule).
    pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])] if world == 4 else []
    for name, style, config, groups, batch, size, seqs, dynamic in CASES[world]:
        torch._dynamo.reset()
        backend.clear_reports()
        group = pairs[rank // 2] if groups == "dp2" else dist.group.WORLD
        model = shard_llama(build_llama(), group, style)
        dump = Path(out_dir) / f"dump-{name}-{rank}"
        # The ranks of a TP group compile the same IR: the first rank of each group dumps it.
        dumps = rank == 0 or (groups == "dp2" and rank == 2)
        options: dict[str, Any] = {"inductor": False, "strict": True, "debug": True,
                                   "optimization_level": 0, "pass_config": config}
        if dumps:
            options["dump_dir"] = str(dump)
        if size is not None:
            options["compile_sizes"] = [size]
        compiled = torch.compile(model, backend="irfuse", options=options)
        outs = []
        for seq in seqs:
            ids = token_ids(batch, seq, _replica(rank, groups))
            if dynamic:
                torch._dynamo.mark_dynamic(ids, 1)
            with torch.no_grad():
                outs.append(compiled(ids))
        reports = backend.reports()
        results[name] = {
            "outs": outs,
            "ranges": [r.range for r in reports],
            "raised": [r.raised for r in reports],
            "fused": [{p.name: p.count for p in r.passes if p.count} for r in reports],
            "kernels": [{k.op: (k.impl, k.calls) for k in r.kernels} for r in reports],
            "missed": sorted({m.reason for r in reports for p in r.passes for m in p.missed
                              if not m.reason.startswith("off:")}),
        }
        results[name]["group"] = group.group_name
        if dumps:
            before, after, names = _collectives(dump)
            results[name].update(before=before, after=after, groups=names)
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))


def _run(tmp_path: Path, world: int) -> list[dict[str, Any]]:
    spawn_ranks(world, _worker, str(tmp_path), init_file=str(tmp_path / "init"))
    got = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    reference = build_llama()
    for name, _, _, groups, batch, _, seqs, _ in CASES[world]:
        for i, seq in enumerate(seqs):
            for rank in range(world):
                with torch.no_grad():
                    ref = reference(token_ids(batch, seq, _replica(rank, groups)))
                torch.testing.assert_close(got[rank][name]["outs"][i], ref, rtol=1e-4,
                                           atol=1e-4, msg=f"{name} S={seq} rank {rank}")
    return got


N_AR = 2 * LAYERS  # o and down in each layer
RAISED = {"all_reduce": N_AR, "add_rms_norm": N_AR, "rms_norm": 1}


def _assert_raised(result: dict[str, Any]) -> None:
    for raised in result["raised"]:
        assert {k: raised.get(k) for k in RAISED} == RAISED


@pytest.mark.dist
def test_two_gloo_ranks_match_the_unsharded_model(tmp_path):
    got = _run(tmp_path, 2)
    for rank in range(2):
        sp, mixed = got[rank]["sp-gemm-funcol"], got[rank]["all-batch-inplace"]
        _assert_raised(sp)
        _assert_raised(mixed)
        # A static graph of [1, 8] token ids counts 8 tokens (not the batch of 1), so
        # sp_min_token_num 4 lets enable-sp take every all-reduce.
        static = got[rank]["static-sp"]
        _assert_raised(static)
        assert static["ranges"] == [[8, 8]]
        assert static["fused"][0]["enable-sp"] == N_AR
        # enable-sp on [1, S, H] at S = 8: every all-reduce is a reduce-scatter + all-gather;
        # fuse-gemm-comms fuses o and down into their reduce-scatters and lm_head with the last
        # gather. The gathers into q/k/v and gate/up feed 3 and 2 GEMMs (HF keeps them apart).
        assert sp["ranges"] == [[8, 8]]
        assert (sp["fused"][0]["enable-sp"], sp["fused"][0]["fuse-gemm-comms"]) \
            == (N_AR, N_AR + 1)
        assert sp["missed"] == [
            "all-gather + GEMM not fused: the gathered tensor has users besides one GEMM"]
        # dist.all_reduce in place, two sequences: at S = 6 (compile size 12 rows, 6 a rank)
        # enable-sp; at S = 1 (2 rows: the range [1, 3] below sp_min_token_num, where SP does
        # not run; its compile starts at 2, where the all-reduce kernel's size class does) each
        # all-reduce and the residual-first add + norm after it are one op.
        assert [r[0] for r in mixed["ranges"]] == [12, 2]
        at_6, at_1 = mixed["fused"]
        assert (at_6["enable-sp"], at_6.get("fuse-allreduce-rms")) == (N_AR, None)
        assert (at_1.get("enable-sp"), at_1["fuse-allreduce-rms"]) == (None, N_AR)
        # The report names the kernel each range calls: on the CPU, the references.
        assert mixed["kernels"] == [
            {"gemm_reduce_scatter": ("reference", N_AR), "all_gather_gemm": ("reference", 1)},
            {"all_reduce_rms_norm": ("reference", N_AR)}]
    assert got[0]["sp-gemm-funcol"]["before"] == {"coll.all_reduce": N_AR}
    assert got[0]["sp-gemm-funcol"]["after"] == {
        "fused.gemm_reduce_scatter": N_AR, "coll.all_gather": N_AR - 1, "fused.all_gather_gemm": 1}
    assert got[0]["all-batch-inplace"]["before"] == {"coll.all_reduce": 2 * N_AR}
    assert got[0]["all-batch-inplace"]["after"] == {
        "fused.gemm_reduce_scatter": N_AR, "coll.all_gather": N_AR - 1,
        "fused.all_gather_gemm": 1, "fused.all_reduce_rms_norm": N_AR}


@pytest.mark.dist
def test_four_gloo_ranks_match_the_unsharded_model(tmp_path):
    got = _run(tmp_path, 4)
    for rank in range(4):
        result = got[rank]["all-funcol"]
        _assert_raised(result)
        assert result["ranges"] == [[8, 8]]
        (fused,) = result["fused"]
        assert (fused["enable-sp"], fused["fuse-gemm-comms"]) == (N_AR, N_AR + 1)
        # Two TP groups of 2 beside each other, each replica with its own tokens: every
        # collective names its TP group (WORLD would sum the other replica's partials in), and
        # enable-sp slices the replicated embedding by the rank in that group (rank 2 and 3
        # take rows 0 and 1 of 2, not 2 and 3 of 4). The logits above match each replica's.
        dp = got[rank]["dp2-all-inplace"]
        _assert_raised(dp)
        assert [r[0] for r in dp["ranges"]] == [8, 1]  # S = 8, then S = 2 (below sp_min)
        at_8, at_2 = dp["fused"]
        assert (at_8["enable-sp"], at_8["fuse-gemm-comms"], at_2["fuse-allreduce-rms"]) \
            == (N_AR, N_AR + 1, N_AR)
    first, third = got[0]["dp2-all-inplace"], got[2]["dp2-all-inplace"]
    assert first["group"] != third["group"]
    assert (first["groups"], third["groups"]) == ({first["group"]}, {third["group"]})
    assert first["after"] == third["after"] == {
        "fused.gemm_reduce_scatter": N_AR, "coll.all_gather": N_AR - 1,
        "fused.all_gather_gemm": 1, "fused.all_reduce_rms_norm": N_AR}
    assert got[0]["all-funcol"]["before"] == {"coll.all_reduce": N_AR}
    assert got[0]["all-funcol"]["after"] == {
        "fused.gemm_reduce_scatter": N_AR, "coll.all_gather": N_AR - 1, "fused.all_gather_gemm": 1}
