"""The symmetric-memory all-reduce path of fuse_allreduce_rms (`allreduce_symm_mem`) on the CPU,
through a stand-in for torch's symmetric memory: `empty` allocates a plain tensor and
`rendezvous` records the call; `one_shot_all_reduce` / `two_shot_all_reduce_` check that their
input is the group's buffer and sum it with gloo's all-reduce (what the CUDA kernels compute).
This checks the plumbing (one buffer per group, dtype and hidden, reused; the copy-in; one- or
two-shot by size; results equal to the reference across 2 gloo processes; the fallback reasons),
not the CUDA kernels: those run in test_allreduce_rms_gpu.py on several GPUs.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed as dist

from irfuse.fusions.fuse_allreduce_rms import ops as fusion
from irfuse.fusions.kernel_decl import Choice
from irfuse.kernels import allreduce_rms, dispatch
from irfuse.kernels import allreduce_rms_ref as ref
from irfuse.kernels import allreduce_symm_mem as sm
from irfuse.models.dist import fake_process_group, spawn_ranks

EPS = 1e-5


class StandIn:
    """`torch.distributed._symmetric_memory` and `torch.ops.symm_mem` as far as irfuse calls
    them; records allocations, rendezvous and all-reduce calls."""

    def __init__(self, out_form: bool = False, fail: str | None = None,
                 needs_enable: bool = False):
        self.allocs: list[torch.Tensor] = []
        self.rendezvous_calls: list[str] = []
        self.calls: list[tuple[str, str, int]] = []
        self.fail = fail
        self.enabled: list[str] | None = [] if needs_enable else None
        if out_form:
            self.two_shot_all_reduce_out = self._two_shot_out

    def empty(self, n, dtype, device):
        t = torch.empty(n, dtype=dtype, device=device)
        self.allocs.append(t)
        return t

    def enable_symm_mem_for_group(self, group_name):
        if self.enabled is not None:
            self.enabled.append(group_name)

    def rendezvous(self, tensor, group_name):
        if self.fail:
            raise RuntimeError(self.fail)
        if self.enabled is not None and group_name not in self.enabled:
            raise RuntimeError(f"group {group_name} is not registered")  # older torch
        assert any(tensor is t for t in self.allocs)
        self.rendezvous_calls.append(group_name)

    def _check(self, kind: str, t: torch.Tensor, group_name: str) -> None:
        # The input is the first rows of a rendezvoused buffer (the copy-in happened).
        assert any(t.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
                   and t.data_ptr() == a.data_ptr() for a in self.allocs), kind
        self.calls.append((kind, group_name, t.numel()))

    def one_shot_all_reduce(self, t, op, group_name):
        assert op == "sum"
        self._check("one_shot", t, group_name)
        out = t.clone()
        dist.all_reduce(out, group=ref.resolve_group(group_name))
        return out

    def two_shot_all_reduce_(self, t, op, group_name):
        assert op == "sum"
        self._check("two_shot", t, group_name)
        dist.all_reduce(t, group=ref.resolve_group(group_name))
        return t

    def _two_shot_out(self, t, op, group_name, out):
        self.two_shot_all_reduce_(t, op, group_name)
        self.calls[-1] = ("two_shot_out", group_name, t.numel())
        out.copy_(t)
        return out


def install(standin: StandIn, patch) -> None:
    """Route `allreduce_symm_mem` to the stand-in on CPU tensors (patch: setattr-like)."""
    patch(sm, "symm_module", lambda: standin)
    patch(sm, "symm_ops", lambda: standin)
    patch(sm, "device_reason", lambda x: None)
    patch(sm, "BUFFERS", {})
    patch(sm, "FALLBACKS", {})
    patch(sm, "_WARNED", set())
    patch(sm, "_FAILED", {})


def _inputs(rank: int, tokens: int, hidden: int = 64, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(tokens, hidden, generator=g).to(dtype)
    residual = torch.randn(tokens, hidden, generator=g).to(dtype)
    weight = (1 + 0.1 * torch.randn(hidden, generator=g)).to(dtype)
    return x, residual, weight


# --- two gloo processes -------------------------------------------------------------------------


def _gloo_worker(rank: int, world: int, out_form: bool) -> None:
    standin = StandIn(out_form)
    install(standin, setattr)
    sm.ONE_SHOT_MAX_BYTES = 4 * 64 * 2  # 4 bf16 rows of 64: one-shot; more: two-shot
    name = dist.group.WORLD.group_name
    for tokens in (3, 4, 40, 5):  # 5 rows: 640 bytes, two-shot
        x, residual, weight = _inputs(rank, tokens)
        x_before = x.clone()
        y, r = allreduce_rms.nccl_norm(x, residual, weight, name, EPS, 0.0, False, False,
                                       False, symm="k")
        y_ref, r_ref = ref.all_reduce_rms_norm(x, residual, weight, name, EPS, 0.0, False,
                                               False)
        assert torch.equal(y, y_ref) and torch.equal(r, r_ref), tokens
        assert torch.equal(x, x_before)  # the input is copied in, never reduced in place
        q, s, r2 = allreduce_rms.nccl_per_token(x, None, weight, None, name, EPS, 0.0,
                                                torch.float8_e4m3fn, False, False, False,
                                                symm="k")
        q_ref, s_ref, r2_ref = ref.all_reduce_rms_norm_quant_fp8_per_token(
            x, None, weight, None, name, EPS, 0.0, torch.float8_e4m3fn, False, False)
        assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
        assert torch.equal(s, s_ref) and torch.equal(r2, r2_ref)
    # The residual out without a residual is a tensor of its own, not the reused buffer.
    assert r2.data_ptr() != sm.BUFFERS[(name, torch.bfloat16, 64)].tensor.data_ptr()
    two = "two_shot_out" if out_form else "two_shot"
    assert [c[0] for c in standin.calls] == ["one_shot"] * 4 + [two] * 4
    assert len(standin.allocs) == 1 and standin.rendezvous_calls == [name]
    assert standin.allocs[0].numel() == sm.capacity(64, 2) * 64


@pytest.mark.parametrize("out_form", [False, True])
def test_two_gloo_ranks_match_the_reference_one_buffer_reused(out_form, tmp_path):
    spawn_ranks(2, _gloo_worker, out_form, init_file=str(tmp_path / "init"))


# --- one process, fake group --------------------------------------------------------------------


@pytest.fixture
def group():
    with fake_process_group(2) as pg:
        yield pg.group_name


def test_one_or_two_shot_at_the_named_threshold():
    assert sm.one_shot(sm.ONE_SHOT_MAX_BYTES) and not sm.one_shot(sm.ONE_SHOT_MAX_BYTES + 1)


def test_one_buffer_per_group_dtype_and_hidden(monkeypatch, group):
    standin = StandIn()
    install(standin, monkeypatch.setattr)
    for tokens, hidden, dtype in ((2, 64, torch.bfloat16), (7, 64, torch.bfloat16),
                                  (2, 128, torch.bfloat16), (2, 64, torch.float32)):
        x = torch.randn(tokens, hidden).to(dtype)
        assert torch.equal(sm.all_reduce(x, group), x)  # the fake group's sum is the input
    assert set(sm.BUFFERS) == {(group, torch.bfloat16, 64), (group, torch.bfloat16, 128),
                               (group, torch.float32, 64)}
    assert len(standin.allocs) == 3 and len(standin.rendezvous_calls) == 3


@pytest.mark.parametrize("needs_enable", [False, True])
def test_the_group_is_enabled_only_where_rendezvous_needs_it(monkeypatch, group, needs_enable):
    standin = StandIn(needs_enable=needs_enable)
    install(standin, monkeypatch.setattr)
    x = torch.randn(2, 64, dtype=torch.bfloat16)
    for _ in range(2):
        assert torch.equal(sm.all_reduce(x, group), x)
    assert standin.rendezvous_calls == [group] and sm.FALLBACKS == {}
    assert standin.enabled == ([group] if needs_enable else None)


def test_reasons_where_symmetric_memory_cannot_run(monkeypatch, group):
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    assert sm.reason(x, group) == "the input is on cpu, not a CUDA device"
    install(StandIn(), monkeypatch.setattr)
    assert sm.reason(x, group) is None
    assert sm.reason(x.half(), group) \
        == "torch's symmetric-memory all-reduce takes bf16/fp32, not torch.float16"
    assert sm.reason(x[:0], group) == "the input has no tokens"
    monkeypatch.setattr(sm, "SYMM_MEM_MAX_BYTES", 3 * 64 * 2)
    assert sm.reason(x, group) == "4 tokens exceed the symmetric buffer (3 tokens of 64)"
    monkeypatch.setattr(sm, "symm_ops", lambda: None)
    assert sm.reason(x, group).startswith(f"torch {torch.__version__} has no symmetric-memory")


def test_more_ranks_than_the_kernels_take():
    with fake_process_group(16) as pg:
        patch = pytest.MonkeyPatch()
        install(StandIn(), patch.setattr)
        try:
            x = torch.randn(2, 64, dtype=torch.bfloat16)
            assert sm.reason(x, pg.group_name) \
                == "the group has 16 ranks (torch's kernels take up to 8)"
        finally:
            patch.undo()


def test_this_torch_has_the_ops_irfuse_calls():
    # Their schemas, as allreduce_symm_mem calls them (the same from torch 2.6 to 2.13).
    ns = torch.ops.symm_mem
    assert "one_shot_all_reduce(Tensor input, str reduce_op, str group_name) -> Tensor" \
        in str(ns.one_shot_all_reduce.default._schema)
    assert "two_shot_all_reduce_(Tensor(a!) input, str reduce_op, str group_name)" \
        in str(ns.two_shot_all_reduce_.default._schema)
    assert sm.symm_module() is not None and sm.symm_ops() is not None


def test_failed_rendezvous_runs_nccl_and_is_not_retried(monkeypatch, group):
    standin = StandIn(fail="CUDA peer access is not supported between these devices\nmore")
    install(standin, monkeypatch.setattr)
    x, residual, weight = _inputs(0, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            y, r = allreduce_rms.nccl_norm(x, residual, weight, group, EPS, 0.0, False, False,
                                           False, symm="all_reduce_rms_norm")
    why = ("symmetric-memory rendezvous failed (CUDA peer access is not supported between "
           "these devices)")
    assert sm.FALLBACKS == {group: why}
    assert [str(w.message) for w in caught] == [
        f"irfuse: all_reduce_rms_norm does not use torch's symmetric-memory all-reduce: {why}; "
        "NCCL runs"]
    assert len(standin.allocs) == 1 and standin.calls == []  # one try, then NCCL
    y_ref, r_ref = ref.all_reduce_rms_norm(x, residual, weight, group, EPS, 0.0, False, False)
    assert torch.equal(y, y_ref) and torch.equal(r, r_ref)


def test_on_the_cpu_the_reason_is_warned_and_nccl_runs(group):
    x, residual, weight = _inputs(0, 4)
    with pytest.warns(UserWarning, match="the input is on cpu, not a CUDA device; NCCL runs"):
        y, r = allreduce_rms.nccl_norm(x, residual, weight, group, EPS, 0.0, False, False,
                                       False, symm="all_reduce_rms_norm_cpu_case")
    y_ref, r_ref = ref.all_reduce_rms_norm(x, residual, weight, group, EPS, 0.0, False, False)
    assert torch.equal(y, y_ref) and torch.equal(r, r_ref)


# --- the fusion's kernel choice -----------------------------------------------------------------


def _on_sm90(monkeypatch) -> StandIn:
    standin = StandIn()
    install(standin, monkeypatch.setattr)
    monkeypatch.setattr(dispatch, "platform_of", lambda device: "cuda:sm90")
    monkeypatch.setattr(dispatch, "use_triton", lambda *args, **kwargs: False)
    monkeypatch.setattr(allreduce_rms, "flashinfer_comm", lambda: None)  # no FlashInfer
    return standin


def test_sm90_default_is_not_symm_mem(monkeypatch, group):
    standin = _on_sm90(monkeypatch)
    for k in fusion.KERNELS:
        choice = k.choose("cuda:sm90")
        assert choice.impl == "triton" and "symm_mem not measured yet" in choice.reason \
            or k is fusion.NVFP4
    x, residual, weight = _inputs(0, 4)
    with pytest.warns(UserWarning, match="does not import"):
        fusion.PLAIN.run_cuda(x, residual, weight, group, EPS, 0.0)
    assert standin.calls == []


def test_a_symm_mem_choice_takes_the_symmetric_path(monkeypatch, group):
    standin = _on_sm90(monkeypatch)
    chosen = Choice("symm_mem", "declared for the test")
    monkeypatch.setitem(fusion.STATIC.rules, "cuda:sm90", ((1, chosen),))
    x, residual, weight = _inputs(0, 4)
    scale = torch.tensor([0.05])
    q, r = fusion.STATIC.run_cuda(x, residual, weight, scale, group, EPS, 0.0, torch.float8_e4m3fn)
    assert [c[0] for c in standin.calls] == ["one_shot"]
    q_ref, r_ref = fusion.all_reduce_rms_norm_quant_fp8_static(x, residual, weight, scale, group, EPS, 0.0,
                                      torch.float8_e4m3fn)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(r, r_ref)


@pytest.mark.parametrize("kernel", ["_plain_cuda", "_group_cuda"])
def test_the_env_forces_symm_mem(monkeypatch, group, kernel):
    standin = _on_sm90(monkeypatch)
    monkeypatch.setenv(fusion.SYMM_MEM_ENV, "1")
    x, residual, weight = _inputs(0, 4, hidden=128)
    if kernel == "_plain_cuda":
        fusion.PLAIN.run_cuda(x, residual, weight, group, EPS, 0.0)
    else:
        fusion.GROUP.run_cuda(x, residual, weight, group, EPS, 0.0, 128, False, False,
                           torch.float8_e4m3fn)
    assert [c[0] for c in standin.calls] == ["one_shot"]


def test_a_bad_env_value_is_one_clear_error(monkeypatch, group):
    _on_sm90(monkeypatch)
    monkeypatch.setenv(fusion.SYMM_MEM_ENV, "yes")
    x, residual, weight = _inputs(0, 4)
    with pytest.raises(ValueError, match="IRFUSE_ALLREDUCE_SYMM_MEM must be 0 or 1, got 'yes'"):
        fusion.PLAIN.run_cuda(x, residual, weight, group, EPS, 0.0)


PLAIN_CASE = """
builtin.module {
func.func @plain(%x: !irfuse.tensor<[16, 64], bf16>, %res: !irfuse.tensor<[16, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>) {
  %r = coll.all_reduce %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %y, %ro = norm.add_rms_norm %r, %res, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>)
  func.return %y, %ro : !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>
}
}
"""


@pytest.mark.parametrize("declared", [None, Choice("symm_mem", "declared for the test")])
def test_the_kernel_call_records_the_declared_impl(monkeypatch, declared):
    from xdsl.parser import Parser

    from irfuse.context import make_context
    from irfuse.dialects.irfuse import set_target
    from irfuse.passes import instantiate
    from irfuse.pipeline import kernel_records

    if declared is not None:
        monkeypatch.setitem(fusion.PLAIN.rules, "cuda:sm90", ((1, declared),))
    ctx = make_context()
    module = Parser(ctx, PLAIN_CASE).parse_module()
    set_target(module, "cuda:sm90")
    for name in ("fuse-allreduce-rms", "select-kernels"):
        instantiate(name).apply(ctx, module)
    module.verify()
    (record,) = kernel_records(module, "cuda:sm90")  # its reason is the registered kernel's
    want = fusion.SM90_FUSED if declared is None else declared
    assert (record.op, record.impl) == (fusion.PLAIN.name, want.impl)
    if declared is None:
        assert record.reason == fusion.SM90_FUSED.reason
