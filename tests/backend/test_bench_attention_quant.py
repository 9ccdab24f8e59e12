"""benchmarks/bench_attention_quant.py's NVFP4 prefill row and its decode row of the compiled model
on the CPU: under TRITON_INTERPRET=1 (a subprocess) at T 32 (decode: batch 2, context 32, ragged),
with the timing replaced by one call of each candidate, the fused kernel, the unfused graph and
irfuse's kernel + quant all pass the row's check against the eager graph (and a corrupted output
does not), and the table prints the rows. The decode row's fused candidate is the paged fused op's
CUDA entry, with kernel choice forced to Triton here: it must reach the paged decode kernel.
The library rows (Llama-70B-TP8 heads, batch 2, context 64, ragged; prefill T 32) run every irfuse
variant through its check, drop FlashInfer and cuDNN with their reasons (neither runs on the CPU)
and print their table."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PATH = ROOT / "benchmarks" / "bench_attention_quant.py"


def _load():
    sys.path.insert(0, str(PATH.parent))
    spec = importlib.util.spec_from_file_location("bench_attention_quant", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _worker() -> None:
    import torch
    import triton

    assert triton.knobs.runtime.interpret, "TRITON_INTERPRET=1 must be set before triton loads"
    bench = _load()
    called: list[str] = []

    def one_call_each(timed, args):
        for name, fn in timed.items():
            fn()
            called.append(name)
        return {name: 1.0 for name in timed}

    bench._time = one_call_each
    compiled = {"token_major": bench.sdpa_token_major,
                "to_token_major": bench.attention_quant_ref.token_major}
    args = types.SimpleNamespace(sweep=False, rep=1, rounds=1)
    torch.manual_seed(0)
    row = bench.nvfp4_row(32, compiled, args, device="cpu")
    codes, sf = bench.attention_quant.attention_nvfp4(
        *(torch.randn(1, h, 32, bench.D).bfloat16() for h in (bench.HQ, bench.HK, bench.HK)),
        torch.tensor([1.0]), softmax_scale=bench.SM_SCALE, causal=True)
    ref = bench.quant_ref.quant_nvfp4(torch.zeros(32, bench.HQ * bench.D).bfloat16() + 1,
                                      torch.tensor([1.0]))
    bad = bench.check_nvfp4((codes, sf), ref, torch.tensor([1.0]))
    keys = ("case", "check", "unfused_check", "kernel_quant_check")
    decode_keys = (*keys, "masked_check")
    first = {k: row[k] for k in (*keys, "T")}
    first_called = list(called)
    called.clear()
    kernel_calls = []
    paged_kernel = bench.attention_quant.paged_decode_fp8

    def counted(*a, **kw):
        kernel_calls.append(kw.get("config") is None)
        return paged_kernel(*a, **kw)

    bench.dispatch.use_triton = lambda *a: True
    bench.attention_quant.paged_decode_fp8 = counted
    compiled = {"gather": bench.gather_masked, "decode_masked": bench.masked_decode_quant,
                "decode_masked_bf16": bench.masked_decode,
                "token_major_quant": lambda o, s: bench.quant(
                    bench.attention_quant_ref.token_major(o), s)}
    dec = bench.decode_model_row(2, 32, compiled, args, device="cpu")
    torch.cuda.get_device_name = lambda *a: "cpu"
    table = bench.markdown([row, dec], "cmd")
    bench.attention_quant.paged_decode_fp8 = paged_kernel
    decode_called = list(called)
    called.clear()
    compiled = {"quant_dyn": bench.quant, "prefill": bench.sdpa_quant}
    lib_dec = bench.lib_decode_row("llama70b-tp8", "2x64rn", compiled, args, 1e12, device="cpu")
    lib_called = list(called)
    lib_pre = bench.lib_prefill_row("llama70b-tp8", 32, compiled, args, device="cpu")
    lib_table = bench.lib_markdown([lib_dec, lib_pre], "cmd", 1e12)
    light = types.SimpleNamespace(sweep=False, rep=1, rounds=1, lib_sweep="light",
                                  lib_configs=["16:4:1:1:prefetch", "16:4:1:2:even"])
    lib_light = bench.lib_decode_row("llama70b-tp8", "2x64r", compiled, light, 1e12,
                                     device="cpu")
    light_table = bench.lib_markdown([lib_light], "cmd", 1e12, tuple(light.lib_configs))
    fp8 = types.SimpleNamespace(sweep=False, rep=1, rounds=1, lib_sweep="light", lib_configs=[],
                                fp8_cache=True)
    called.clear()
    lib_fp8 = bench.lib_decode_row("llama70b-tp8", "2x64r", compiled, fp8, 1e12, device="cpu")
    fp8_table = bench.lib_markdown([lib_fp8], "cmd", 1e12)
    print(json.dumps({"row": first, "called": first_called, "bad": bad, "table": table,
                      "decode": {k: dec[k] for k in decode_keys}, "decode_called": decode_called,
                      "kernel_calls": kernel_calls, "lib_table": lib_table,
                      "lib_called": lib_called, "light_table": light_table,
                      "light_variants": lib_light["variants"],
                      "fp8": {k: lib_fp8[k] for k in ("check", "failed", "kv_cache", "dropped")},
                      "fp8_called": list(called), "fp8_table": fp8_table,
                      "lib_decode": {k: lib_dec[k] for k in ("check", "failed", "dropped",
                                                             "nvfp4_check", "variants")},
                      "lib_prefill": {k: lib_pre[k] for k in ("check", "dropped")}}))


@pytest.fixture(scope="module")
def result() -> dict:
    from interpret_worker import run_worker

    return run_worker(__file__)


def test_nvfp4_row_checks_every_candidate(result):
    row = result["row"]
    assert row["case"] == "prefill-nvfp4" and row["T"] == 32
    assert (row["check"], row["unfused_check"], row["kernel_quant_check"]) == ("ok",) * 3
    assert sorted(result["called"]) == ["fused", "kernel_quant", "sdpa", "unfused"]
    assert result["bad"].startswith("MISMATCH")


def test_nvfp4_row_is_in_the_table(result):
    assert "| prefill-nvfp4 T=32 |" in result["table"]


def test_decode_row_times_the_fused_ops_cuda_entry_on_the_paged_kernel(result):
    row = result["decode"]
    assert row["case"] == "decode-model"
    assert (row["check"], row["unfused_check"], row["kernel_quant_check"],
            row["masked_check"]) == ("ok",) * 4
    assert sorted(result["decode_called"]) == ["fused", "gather+masked", "kernel_quant", "sdpa",
                                               "unfused"]
    # The check's call and the timed call: both through the CUDA entry (default launch shape).
    assert result["kernel_calls"] == [True, True]
    assert "| decode (compiled model) B=2 ctx=32 |" in result["table"]


def test_library_rows_check_every_irfuse_variant_and_drop_what_cannot_run(result):
    dec, pre = result["lib_decode"], result["lib_prefill"]
    assert dec["check"] == "ok" and dec["nvfp4_check"] == "ok" and not dec["failed"], dec
    assert set(dec["dropped"]) == {"fi_cc", "fi_tc"}, dec["dropped"]
    assert "irfuse" in result["lib_called"] and "nvfp4" in result["lib_called"]
    assert {"64,4,2", "32,4,4,pf", "64,4,3,pf", "64,8,3,pf", "16,4,6,pf"} <= set(dec["variants"])
    assert pre["check"] == "ok" and set(pre["dropped"]) == {"cudnn", "fa2", "fa3"}, pre
    assert "| llama70b-tp8 | 2 x <=64 |" in result["lib_table"]
    assert "| llama70b-tp8 | 32 |" in result["lib_table"] and "Dropped: " in result["lib_table"]


def test_the_light_library_row_times_the_launch_shapes_it_is_given(result):
    # --lib-configs: each spec is checked and timed beside the default and has a column.
    assert {"16:4:1:1:prefetch", "16:4:1:2:even"} <= set(result["light_variants"])
    table = result["light_table"]
    assert "| irfuse fused (default shape) | 16:4:1:1:prefetch | 16:4:1:2:even |" in table
    assert "| llama70b-tp8 | 2 x <=64 | 1.0 (" in table and "| 1.0 | 1.0 |" in table


def test_a_bad_launch_shape_spec_is_refused():
    from irfuse.kernels.attention_quant import DecodeConfig

    assert DecodeConfig.parse("64:4:3:2:even:prefetch") == DecodeConfig(
        64, 4, 3, splits=2, even=True, prefetch=True)
    for bad in ("64:4:3", "64:4:x:1", "64:4:3:1:fast"):
        with pytest.raises(ValueError, match="bad decode launch shape"):
            DecodeConfig.parse(bad)


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()


def test_lib_decode_row_reads_fp8_caches(result):
    """`--fp8-cache`: the fused decode reads vLLM's per-tensor FP8 caches (its check against the
    decode over the values they stand for passes for the entry and every shape timed); FlashInfer
    is dropped on the CPU; the table says which caches."""
    fp8 = result["fp8"]
    assert fp8["kv_cache"] == "fp8" and fp8["check"] == "ok" and fp8["failed"] == {}
    assert "irfuse" in result["fp8_called"] and set(fp8["dropped"]) == {"fi_cc", "fi_tc"}
    assert "KV caches: vLLM's per-tensor FP8" in result["fp8_table"]
