"""irfuse.groups: a process group's name resolved as every emitted collective and kernel resolves
it (torch's registry, else vLLM's GroupCoordinator), and an unknown group as one error at
compile time. Single process: the fake process group, and a stand-in of vLLM's registry
(`parallel_state._groups`, weak references to coordinators whose device group torch knows by
another name). The same under vLLM's real parallel state on 2 gloo ranks is
tests/in_vllm/test_vllm_tp.py."""

from __future__ import annotations

import sys
import types

import pytest
import torch
import torch.distributed as dist

from irfuse import groups
from irfuse.kernels import gemm_comms_ref
from irfuse.models.dist import fake_process_group


class _Coordinator:
    """What irfuse reads of vLLM's GroupCoordinator."""

    def __init__(self, device_group, world_size: int = 2, rank_in_group: int = 1):
        self.device_group = self.cpu_group = device_group
        self.world_size, self.rank_in_group = world_size, rank_in_group
        self.unique_name = "tp:0"


@pytest.fixture
def vllm_registry(monkeypatch):
    state = types.ModuleType(groups.VLLM_STATE)
    state._groups = {}
    monkeypatch.setitem(sys.modules, groups.VLLM_STATE, state)
    return state._groups


def test_without_a_process_group_nothing_resolves_and_nothing_is_checked():
    with pytest.raises(groups.GroupError, match="torch.distributed is not initialized"):
        groups.resolve("tp:0")
    assert groups.known("tp:0")  # nothing to check against (irfuse-opt, an offline compile)
    groups.check([("tp:0", "fused.all_reduce_rms_norm")])


def test_vllm_names_resolve_to_the_coordinators_device_group(vllm_registry):
    with fake_process_group(2) as world:
        coordinator = _Coordinator(world)
        vllm_registry["tp:0"] = lambda: coordinator
        assert groups.resolve("tp:0") is world
        assert groups.torch_name("tp:0") == world.group_name != "tp:0"
        assert (groups.size("tp:0"), groups.rank("tp:0")) == (2, 1)  # the coordinator's
        assert groups.is_vllm("tp:0") and not groups.is_vllm(world.group_name)
        # torch's own names resolve as before
        assert groups.resolve(world.group_name) is world and groups.rank(world.group_name) == 0
        # a destroyed coordinator (its weak reference dead) is unknown
        vllm_registry["tp:1"] = lambda: None
        for name in ("tp:1", "tp:9"):
            assert not groups.known(name)
            with pytest.raises(groups.GroupError, match=f"no process group named '{name}'"):
                groups.resolve(name)
        with pytest.raises(groups.GroupError, match=r"'tp:9'.*\(named by fused.x\)"):
            groups.check([("tp:0", "coll.all_gather"), ("tp:9", "fused.x")])


def test_async_tp_reference_runs_on_vllms_group(vllm_registry):
    # The reference's functional collectives get torch's name of the coordinator's device
    # group: "tp:0" itself would fail when the graph runs.
    with fake_process_group(2) as world:
        coordinator = _Coordinator(world)
        vllm_registry["tp:0"] = lambda: coordinator
        a = torch.randn(4, 8, dtype=torch.bfloat16)
        b = torch.randn(8, 16, dtype=torch.bfloat16)
        assert gemm_comms_ref.all_gather_gemm(a, b, None, None, None, "tp:0", 2).shape == (8, 16)
        assert gemm_comms_ref.gemm_reduce_scatter(a, b, None, None, None, "sum", "tp:0",
                                                  2).shape == (2, 16)


def test_gathered_gemm_scale_forms():
    a = torch.zeros(4, 8)
    assert gemm_comms_ref.sharded_scale(a, torch.ones(4, 1), 2)  # the shard's rows: gathered
    assert not gemm_comms_ref.sharded_scale(a, torch.ones(8, 1), 2)  # the gathered rows
    assert not gemm_comms_ref.sharded_scale(a, torch.ones(1), 2)  # per-tensor
    assert not gemm_comms_ref.sharded_scale(a, torch.ones(4, 1), 1)  # one rank: the same


def test_an_unknown_group_is_one_error_at_compile_time():
    # A vLLM-spelled all-reduce on "tp:7", which nobody registered: raising takes the TP size
    # (the config's tp_size) and the fusion names the group; the compile stops at the groups
    # check with the group's name, instead of the compiled graph failing at its first run.
    from irfuse.testing import compile_and_run

    lib = torch.library.Library("vllm", "FRAGMENT")  # noqa: F841 (kept alive while it runs)
    if not hasattr(torch.ops.vllm, "all_reduce"):
        lib.define("all_reduce(Tensor t, str group_name) -> Tensor")
        lib.impl("all_reduce", lambda t, group_name: t.clone(), "CPU")
        lib.impl("all_reduce", lambda t, group_name: torch.empty_like(t), "Meta")

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(8))

        def forward(self, x):
            return torch.nn.functional.rms_norm(torch.ops.vllm.all_reduce(x, "tp:7"), (8,),
                                                self.w, 1e-6)

    with fake_process_group(2):
        assert dist.is_initialized()
        with pytest.raises(Exception, match=r"groups: irfuse: no process group named 'tp:7'.*"
                                            r"named by fused.all_reduce_rms_norm"):
            compile_and_run(Model(), [torch.randn(4, 8)], dynamic_dims=(), options={
                "tp_size": 2, "pass_config": {"fuse_allreduce_rms": True,
                                              "eliminate_noops": True}})
