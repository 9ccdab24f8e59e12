"""Hugging Face decoder families written outside this project, every pass on (issue 3's raising
check and the no-silent-miss check, on one compile per case).

For each family of `hf_families` (tiny config, 2 layers, bf16, random weights): compile with
every pass turned on (O2 and every fusion flag; Inductor off) and dynamic num_tokens; the report's
raised counts of every kind equal what the eager model really computes
(`hf_families.truth_counts`, derived by running it), every candidate a pass left unfused has a
reason and a location (`tests/corpus/test_no_silent_miss.py` tells the accounting), and the outputs
are bit-exact. A few families run again with FP8 linears (static per-tensor quant + `_scaled_mm`).
One compile per case; every assert reads it.

By default a selection covering each spelling found runs (`QUICK`); IRFUSE_ALL_FAMILIES=1 runs
every family that builds (about 2 s each).
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from hf_corpus import input_ids, quantize_linears
from hf_families import FAMILIES, FP8, QUICK, build_family, truth_counts

from irfuse.testing import EVERY_PASS, assert_bit_exact, assert_nothing_silent, compile_and_run

pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

KINDS = ("rms_norm", "add_rms_norm", "quant_fp8", "silu_mul", "rope", "attention", "gemm",
         "scaled_gemm")
SELECTED = sorted(FAMILIES) if os.environ.get("IRFUSE_ALL_FAMILIES") else list(QUICK)


def _check(name: str, fp8: bool) -> dict[str, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_family(name)
    if fp8:
        assert quantize_linears(model) > 0
    ids = input_ids()
    truth = truth_counts(model, ids)
    compiled = compile_and_run(model, [ids], dynamic_dims=[(0, 1)], options=EVERY_PASS)
    assert_nothing_silent(compiled)
    assert len({r.graph for r in compiled.reports}) == 1, "the model compiles as one graph"
    (out, _), (eager, _) = compiled.outputs, compiled.eager
    assert_bit_exact(out, eager)
    raised = compiled.raised()
    got = {k: raised.get(k, 0) for k in KINDS}
    want = {k: truth.get(k, 0) for k in KINDS}
    assert got == want, name
    return want


@pytest.mark.parametrize("name", SELECTED)
def test_family_raised_counts_nothing_silent_and_exact(name: str) -> None:
    want = _check(name, fp8=False)
    layers = 2
    # Every family here has an attention per layer, written as SDPA unless transformers
    # refuses SDPA for it (then the eager softmax attention is not raised, and must not be).
    sdpa = FAMILIES[name].attn == "sdpa"
    assert want["attention"] >= (layers if sdpa else 0)
    assert sdpa or want["attention"] == 0


@pytest.mark.parametrize("name", FP8)
def test_family_with_fp8_linears(name: str) -> None:
    want = _check(name, fp8=True)
    assert want["quant_fp8"] == want["scaled_gemm"] > 0


def test_truth_counts_follow_the_conventions() -> None:
    """The derived truth on a family whose counts are known by construction (Qwen3-MoE: two
    layers, per-head q/k norms counted one each, one RoPE per layer for q and k, one SiLU·Mul
    per experts module, residual adds before every norm but layer 0's input norm)."""
    model = build_family("qwen3_moe")
    truth = truth_counts(model, input_ids())
    assert truth == {"rms_norm": 1 + 2 * 2, "add_rms_norm": 4, "silu_mul": 2, "rope": 2,
                     "attention": 2, "gemm": 2 * (4 + 1) + 1}
    # A LayerNorm family counts no norm, and a GELU MLP no SiLU·Mul.
    truth = truth_counts(build_family("starcoder2"), input_ids())
    assert "rms_norm" not in truth and "add_rms_norm" not in truth and "silu_mul" not in truth
    assert torch.is_grad_enabled()
