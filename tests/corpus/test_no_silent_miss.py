"""No silent miss: in every graph of the test corpus, every raised op that a turned-on pass could
take is either fused or named in the report's `not_fused` with a reason and a location.

What a pass "could take" is said apart from its patterns (`irfuse/fusions/candidates.py`: a norm
whose output is quantized or padded, a SiLU·Mul or an attention whose output is quantized, an
all-reduce feeding a norm, a rope of normalized q/k, a cache write of a rotated k, a GEMM beside a
collective); after each pass the pipeline gives every candidate left without a remark the
`SILENT` remark. Here every pass is turned on (O2 and every fusion flag) on the corpus: the
built-in models (all of them) and vLLM's op stand-ins (its fusion test model with `_C` ops and
native, static and per-token). Other compiles of the corpus get the same check where they already
run with every pass: the Hugging Face families in `test_hf_families.py` (on the compile that counts
what they raise), the Hugging Face Llama / Qwen3 / Mistral / Gemma with FP8 linears in
`tests/fusions/test_fusion_e2e.py` (on the compile that counts their fused sites).
Each compile must have no silent remark, every remark a reason and a location, and the outputs
bit for bit eager's (the CPU references compute what the graph did).

The cases once silent: two norms on one input, a RoPE whose rotated k is read besides the cache
write, the paged decode after an automatic-dynamic recompile (their own tests are in
`tests/fusions/`); `test_a_silent_pattern_is_caught` checks that the accounting catches one.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import vllm_ops as V

from irfuse.fusions.candidates import SILENT
from irfuse.models import MODELS, build
from irfuse.models.dist import fake_process_group
from irfuse.testing import EVERY_PASS, assert_bit_exact, assert_nothing_silent, compile_and_run

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_builtin_models(name: str) -> None:
    context = fake_process_group(2) if MODELS[name].distributed else contextlib.nullcontext()
    with context:
        built = build(name)
        compiled = compile_and_run(built.model, list(built.example_inputs),
                                   dynamic_dims=list(built.dynamic_dims.items()),
                                   options=EVERY_PASS)
    assert_nothing_silent(compiled)
    if MODELS[name].distributed:
        # torch's fake backend moves no data: a reduce-scatter's output (sequence parallelism,
        # which pads the dynamic token count and fires here) is never written, so the values
        # mean nothing. Their numerics: tests/fusions/test_enable_sp.py and test_hf_llama_tp.py,
        # over gloo.
        def meta(x):
            return [(t.shape, t.dtype) for t in torch.utils._pytree.tree_leaves(x)]
        assert meta(compiled.outputs) == meta(compiled.eager)
        return
    assert_bit_exact(compiled.outputs, compiled.eager)


@pytest.mark.parametrize("dynamic", [False, True], ids=["mark_dynamic", "dynamic_true"])
@pytest.mark.parametrize("per_token", [False, True], ids=["static", "per_token"])
@pytest.mark.parametrize("custom_ops", [True, False], ids=["custom_ops", "native"])
def test_vllm_op_stand_ins(custom_ops: bool, per_token: bool, dynamic: bool) -> None:
    model = V.FusionTestModel(layers=4, custom_ops=custom_ops, per_token=per_token)
    x = torch.randn(9, 64, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    compiled = compile_and_run(model, [x], options=EVERY_PASS,
                               **({"dynamic": True} if dynamic else {"dynamic_dims": ((0, 0),)}))
    assert_nothing_silent(compiled)
    assert compiled.fused("fuse-norm-quant") == 3
    assert_bit_exact(compiled.outputs, compiled.eager)


def test_a_silent_pattern_is_caught(monkeypatch) -> None:
    # A fuse-norm-quant pattern that wrongly says "nothing here" at every norm: each norm that
    # feeds a quant gets the silent remark, at its location, instead of passing unnoticed.
    from irfuse.fusions.fuse_norm_quant import pattern
    from irfuse.raising.driver import NO_CANDIDATE

    monkeypatch.setattr(pattern, "_fuse", lambda *args: NO_CANDIDATE)
    model = V.FusionTestModel(layers=4)
    x = torch.randn(9, 64, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    compiled = compile_and_run(model, [x], options=EVERY_PASS)
    (report,) = compiled.reports
    silent = [m for p in report.passes if p.name == "fuse-norm-quant" for m in p.missed]
    assert len(silent) == 3 and all(m.reason == SILENT and ".py:" in m.location for m in silent)
    assert report.fused("fuse-norm-quant") == 0


def test_every_fusion_names_a_candidate_predicate() -> None:
    # Each fusion's declaration names its predicate in `irfuse.fusions.candidates` (the one
    # list of fusions is the declarations); the utility rewrite names none.
    from irfuse.fusions import FUSIONS, candidates

    for fusion in FUSIONS:
        if fusion.kind == "utility":
            assert fusion.candidate is None, fusion.name
        else:
            assert callable(getattr(candidates, fusion.candidate or "", None)), fusion.name
