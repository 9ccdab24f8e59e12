"""fuse-allreduce-rms: the pass on IR (fused counts and each near miss's remark), on the built-in
TP models under the fake process group (ops before and after, the emitted kernels, bits against
eager), the CPU reference against the unfused chain, and real gloo runs on 2 and 4 processes
(outputs against the unsharded single-process model; a TP group beside a DP group reduces over
its own ranks only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from xdsl.parser import Parser

from irfuse import remarks
from irfuse.context import make_context
from irfuse.fusions.fuse_allreduce_rms import FUSION
from irfuse.kernels import allreduce_rms_ref, norm_quant_ref, quant_ref
from irfuse.models import build
from irfuse.models.dist import fake_process_group, spawn_ranks
from irfuse.testing import assert_bit_exact, compile_and_run

PASS = "fuse-allreduce-rms"
ON = {"pass_config": {"fuse_allreduce_rms": True}, "optimization_level": 1}
FILECHECK = Path(__file__).parents[2] / "filecheck" / "rewrites" / "fuse-allreduce-rms.mlir"


def _run_pass(text: str) -> tuple[str, list[str], int]:
    ctx = make_context()
    module = Parser(ctx, text).parse_module()
    with remarks.collecting() as sink:
        FUSION.pass_class().apply(ctx, module)
    module.verify()
    return str(module), [m.reason for m in sink.missed], sink.fused


def test_filecheck_cases_fuse_and_near_misses_say_why():
    printed, reasons, fused = _run_pass(FILECHECK.read_text())
    assert fused == 10
    assert printed.count("fused.all_reduce_rms_norm") == 10
    assert reasons == [
        "quant not folded into the all-reduce + norm: its output is also used unquantized (by "
        "func.return), so the fused kernel would not replace it",
        "the all-reduce is a max, not a sum",
        "the all-reduced value is also used (by aten.call) besides the residual add; the fused "
        "op returns the sum, not the addend",
        "a norm without a weight has no fused kernel",
        "the all-reduced value is normalized by 2 norms; one fused op writes one",
    ]


T = "!irfuse.tensor<[s0, 64], bf16>"
W = "!irfuse.tensor<[64], bf16>"


def test_early_reader_of_the_new_residual_is_a_remark():
    # The new residual is read before the quant that follows the norm: the fused op (where the
    # quant is) would come after that reader.
    text = f"""
    func.func @f(%x: {T}, %res: {T}, %w: {W}, %s: !irfuse.tensor<[], f32>) -> ({T}, !irfuse.tensor<[s0, 64], f8E4M3FN>) {{
      %a = coll.all_reduce %x {{group = "tp", world_size = 2 : i64}} : ({T}) -> {T}
      %y, %r = norm.add_rms_norm %a, %res, weight %w {{eps = 1.0e-05 : f64}} : ({T}, {T}, {W}) -> ({T}, {T})
      %m = aten.call "aten::mul.Tensor"(%r, 2) : ({T}) -> {T}
      %q = quant.fp8 %y, scale %s {{scheme = #quant.scheme<static_tensor>}} : ({T}, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
      func.return %m, %q : {T}, !irfuse.tensor<[s0, 64], f8E4M3FN>
    }}
    """
    printed, reasons, fused = _run_pass(text)
    assert fused == 0 and "fused." not in printed
    assert reasons == ["the new residual is read (by aten.call) before the quant that follows"]


# --- the built-in TP models under the fake process group ----------------------------------------


def _fused_ir(dump: Path) -> str:
    files = sorted(dump.rglob(f"*-{PASS}.mlir"))
    assert files, "no dump of the pass"
    return files[0].read_text()


@pytest.mark.parametrize("name, schemes", [
    ("llama-tp", {None: 4}),
    ("llama-tp-inplace", {None: 4}),
    # Three of the four norms after an all-reduce feed a static FP8 linear; the last feeds the
    # unquantized lm_head.
    ("llama-fp8-tp", {"static_tensor": 3, None: 1}),
])
def test_tp_models_fuse_every_all_reduce_before_a_norm(name, schemes, tmp_path):
    with fake_process_group(2):
        built = build(name)
        result = compile_and_run(built.model, built.example_inputs,
                                 dynamic_dims=tuple(built.dynamic_dims.items()),
                                 options={**ON, "dump_dir": str(tmp_path)})
    # The fake backend's all-reduce returns its input: the bits are the norm's and quant's.
    assert_bit_exact(result.outputs, result.eager)
    layers = built.config.num_layers
    assert result.raised()["all_reduce"] == 2 * layers
    assert result.fused(PASS) == 2 * layers
    ir = _fused_ir(tmp_path)
    assert "coll.all_reduce" not in ir
    ops = [line for line in ir.splitlines() if "= fused.all_reduce_rms_norm" in line]
    found: dict[str | None, int] = {}
    for line in ops:
        scheme = "static_tensor" if "scheme = #quant.scheme<static_tensor>" in line else None
        found[scheme] = found.get(scheme, 0) + 1
        assert 'world_size = 2 : i64' in line
    assert found == schemes
    if name == "llama-fp8-tp":  # the first layer's norm has no all-reduce before it
        assert result.fused("fuse-norm-quant") == 1
    emitted = sorted(tmp_path.rglob("*-emitted.py"))[0].read_text()
    calls = {k: emitted.count(f"torch.ops.irfuse.{k}.default(") for k in
             ("all_reduce_rms_norm", "all_reduce_rms_norm_quant_fp8_static")}
    assert calls == {"all_reduce_rms_norm": schemes.get(None, 0),
                     "all_reduce_rms_norm_quant_fp8_static": schemes.get("static_tensor", 0)}


def test_off_by_default_on_the_cpu():
    with fake_process_group(2):
        built = build("llama-tp")
        result = compile_and_run(built.model, built.example_inputs,
                                 dynamic_dims=tuple(built.dynamic_dims.items()),
                                 options={"optimization_level": 2})
    assert result.fused(PASS) == 0
    assert result.raised()["all_reduce"] == 4


# --- the reference against the unfused chain ----------------------------------------------------


def _samples(shape=(5, 64)):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(*shape, generator=g).to(torch.bfloat16)
    r = torch.randn(*shape, generator=g).to(torch.bfloat16)
    w = (torch.rand(shape[-1], generator=g) + 0.5).to(torch.bfloat16)
    return x, r, w


def test_reference_is_the_all_reduce_then_the_norm_and_quant_references():
    with fake_process_group(2) as group:
        x, r, w = _samples()
        name = group.group_name
        reduced = allreduce_rms_ref.all_reduce(x, name)
        assert reduced.data_ptr() != x.data_ptr()
        y, r_out = allreduce_rms_ref.all_reduce_rms_norm(x, r, w, name, 1e-5, 0.0, True)
        ey, er = norm_quant_ref.rms_norm(reduced, w, 1e-5, 0.0, r, round_sum=True)
        assert_bit_exact((y, r_out), (ey, er))
        y0, r0 = allreduce_rms_ref.all_reduce_rms_norm(x, None, w, name, 1e-6, 1.0)
        assert_bit_exact((y0, r0), (norm_quant_ref.rms_norm(reduced, w, 1e-6, 1.0)[0], reduced))
        s = torch.tensor(0.05)
        q, _ = allreduce_rms_ref.all_reduce_rms_norm_quant_fp8_static(
            x, r, w, s, name, 1e-5, 0.0, torch.float8_e4m3fn, True)
        plain = norm_quant_ref.rms_norm(reduced, w, 1e-5, 0.0, r)[0]
        eq = quant_ref.quant_fp8_static(plain, s, torch.float8_e4m3fn, True)
        assert_bit_exact(q, eq)
        q, sc, _ = allreduce_rms_ref.all_reduce_rms_norm_quant_fp8_group(
            x, None, w, name, 1e-5, 0.0, 32, False, False, torch.float8_e4m3fn)
        assert sc.shape == (5, 2)


def test_unknown_group_is_an_error_naming_it():
    with fake_process_group(2):
        x, r, w = _samples()
        with pytest.raises(ValueError, match="no process group named 'tp:7'"):
            allreduce_rms_ref.all_reduce_rms_norm(x, r, w, "tp:7", 1e-5, 0.0)
    with pytest.raises(ValueError, match="torch.distributed is not initialized"):
        allreduce_rms_ref.all_reduce_rms_norm(x, r, w, "0", 1e-5, 0.0)


# --- real processes (gloo) ----------------------------------------------------------------------

GLOO_MODELS = ("llama-tp", "llama-fp8-tp", "llama-tp-inplace")
_FP8_OVERRIDES = dict(scale_spelling="inv_scale", clamp_spelling="clamp_minmax")
_SIZE = dict(dtype=torch.float32, num_layers=1, num_kv_heads=4)  # 4 kv heads: TP 4 divides


def _compile_tp(name: str, group, out_dir: str, tag: str) -> None:
    built = build(name, group=group, **_SIZE)
    result = compile_and_run(built.model, built.example_inputs,
                             dynamic_dims=tuple(built.dynamic_dims.items()), options=ON)
    assert_bit_exact(result.outputs, result.eager)  # the same collectives, the same bits
    torch.save({"out": result.outputs[0], "fused": result.fused(PASS)},
               os.path.join(out_dir, f"{tag}-{name}.pt"))


def _tp_worker(rank: int, world: int, out_dir: str) -> None:
    for name in GLOO_MODELS:
        _compile_tp(name, dist.group.WORLD, out_dir, f"w{world}r{rank}")


def _single(name: str) -> torch.Tensor:
    single = name.replace("-tp-inplace", "").replace("-tp", "")
    built = build(single, **_SIZE, **(_FP8_OVERRIDES if "fp8" in name else {}))
    with torch.no_grad():
        return built.model(*built.clone_inputs())


def _check_against_one_process(out_dir: Path, tags: list[str]) -> None:
    for name in GLOO_MODELS:
        ref = _single(name)
        for tag in tags:
            got = torch.load(out_dir / f"{tag}-{name}.pt")
            assert got["fused"] == 2, (tag, name)
            torch.testing.assert_close(got["out"], ref, rtol=1e-4, atol=1e-4,
                                       msg=f"{tag} {name}")


@pytest.mark.dist
@pytest.mark.parametrize("world", [2, 4])
def test_fused_tp_model_across_gloo_processes_matches_one_process(world, tmp_path):
    spawn_ranks(world, _tp_worker, str(tmp_path), init_file=str(tmp_path / "init"))
    _check_against_one_process(tmp_path, [f"w{world}r{r}" for r in range(world)])


def _tp_beside_dp_worker(rank: int, world: int, out_dir: str) -> None:
    # Ranks {0, 1} and {2, 3} are two TP groups (two data-parallel replicas): every rank makes
    # both groups, each rank shards over its own, and the fused op must reduce over that group
    # only (WORLD would sum four partial outputs: twice the right answer).
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    mine = groups[rank // 2]
    _compile_tp("llama-tp", mine, out_dir, f"dp{rank}")


@pytest.mark.dist
def test_tp_group_beside_a_dp_group_reduces_over_its_own_ranks(tmp_path):
    spawn_ranks(4, _tp_beside_dp_worker, str(tmp_path), init_file=str(tmp_path / "init"))
    ref = _single("llama-tp")
    for rank in range(4):
        got = torch.load(tmp_path / f"dp{rank}-llama-tp.pt")
        assert got["fused"] == 2
        torch.testing.assert_close(got["out"], ref, rtol=1e-4, atol=1e-4, msg=f"rank {rank}")


def test_custom_ops_pass_opcheck_under_a_process_group():
    # The ops name a process group, so they run only where one is initialised (the shared
    # custom-op tests have none).
    from irfuse.emit import custom_ops  # noqa: F401 (registers torch.ops.irfuse)

    ops = torch.ops.irfuse
    with fake_process_group(2) as group:
        x, r, w = _samples((3, 128))
        name, s, fp8 = group.group_name, torch.tensor(0.05), torch.float8_e4m3fn
        calls = [
            (ops.all_reduce_rms_norm, (x, r, w, name, 1e-5, 0.0, True, True)),
            (ops.all_reduce_rms_norm, (x, None, w, name, 1e-5, 1.0)),
            (ops.all_reduce_rms_norm_quant_fp8_static, (x, r, w, s, name, 1e-5, 0.0, fp8, True)),
            (ops.all_reduce_rms_norm_quant_fp8_per_token, (x, r, w, s, name, 1e-5, 0.0, fp8)),
            (ops.all_reduce_rms_norm_quant_fp8_group,
             (x, None, w, name, 1e-5, 0.0, 64, True, False, fp8)),
            (ops.all_reduce_rms_norm_quant_nvfp4, (x, r, w, torch.tensor(100.0), name, 1e-5, 0.0)),
        ]
        for op, args in calls:
            torch.library.opcheck(op.default, args)
