"""Compile ranges in the backend: each range compiles at its first use with the passes (and
kernel choices) that apply to it, calls dispatch by num_tokens, and each report says its range."""

from __future__ import annotations

import pytest
import torch

from irfuse import backend, models
from irfuse.emit import kernel_choice
from irfuse.fusions import kernel_decl
from irfuse.testing import assert_bit_exact


def _run(options: dict, token_counts: list[int]):
    built = models.build("llama-fp8", size="tiny", max_positions=16400)
    torch._dynamo.reset()
    backend.clear_reports()
    compiled = torch.compile(
        built.model, backend="irfuse", options={"inductor": False, "strict": True, **options}
    )
    seen = []
    with torch.no_grad():
        for i, t in enumerate(token_counts):
            inputs = built.make_inputs(t)
            if i == 0:
                built.mark_dynamic(inputs)
            out = compiled(*inputs)
            assert out.shape[0] == t
            seen.append(len(backend.reports()))
    return backend.reports(), seen


@pytest.fixture
def inductor_from_16384(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sm90 table with add + RMSNorm + FP8 static left to Inductor from 16384 tokens, as a
    measurement that found Inductor's code faster there records it (the measured table has
    no such step now)."""
    op = "add_rms_norm_quant_fp8_static"
    entries = kernel_decl.measured("cuda:sm90")
    steps = (entries[op][0],
             (16384, kernel_choice.Choice("inductor", "Inductor's code measured faster")))
    monkeypatch.setitem(entries, op, steps)


def test_measured_sm90_table_splits_where_attention_quant_leaves_prefill() -> None:
    # fuse-attn-quant's kernel measured slower than SDPA + Inductor's quant from 4096 tokens;
    # on vLLM's attention op irfuse's fused decode is faster at every measured batch: no split
    assert kernel_choice.split_points("cuda:sm90") == [4095]


def test_ranges_split_where_the_kernel_choice_changes(inductor_from_16384: None) -> None:
    # With add + RMSNorm + FP8 static left to Inductor from 16384 tokens, beyond
    # max_num_batched_tokens (2048 here): the ranges below 16384 fuse it ([1, 256], where
    # fuse-rope-kvcache runs too; [257, 2048] and the fallback above it up to 4095 share one
    # compile, running the same passes); [16384, inf) does not fuse it (and says why), compiled
    # at the first call that large.
    split = kernel_choice.split_points("cuda:sm90")
    assert split == [4095, 16383]
    reports, seen = _run({"platform": "cuda:sm90", "max_num_batched_tokens": 2048},
                         [16, 7, 2100, 16400, 3000])
    assert seen == [1, 1, 2, 3, 3]
    small, low, high = reports
    assert small.range == [1, 256] and low.range == [257, 4095]
    assert high.range == [16384, None]
    assert small.fused("fuse-norm-quant") == low.fused("fuse-norm-quant") == 4
    assert high.fused("fuse-norm-quant") == 1  # only layer 0's plain norm (no residual add)
    reasons = [m.reason for p in high.passes if p.name == "fuse-norm-quant" for m in p.missed]
    assert len(reasons) == 3 and all("left to Inductor on cuda:sm90 at 16384+" in r
                                     for r in reasons)
    assert low.fused("fuse-act-quant") == high.fused("fuse-act-quant") == 2


def test_compile_sizes_get_their_own_compile_and_win_dispatch() -> None:
    # User split points 8 and 32 give [1, 8], [9, 32], [33, max]; compile_sizes 16 adds [16, 16].
    # Ranges running the same passes share one compile; the single size is its own.
    reports, seen = _run(
        {"platform": "cpu", "compile_ranges_split_points": [8, 32], "compile_sizes": [16],
         "optimization_level": 2},
        [20, 16, 3, 40],
    )
    ranges = [r.range for r in reports]
    assert ranges[0] == [1, None]  # every general range runs the same passes on the CPU
    assert [16, 16] in ranges
    assert seen[0] == 1 and seen[1] == 2 and seen[-1] == 2


def test_a_static_graph_is_one_single_size_range() -> None:
    built = models.build("llama", size="tiny")
    torch._dynamo.reset()
    backend.clear_reports()
    compiled = torch.compile(built.model, backend="irfuse", options={"inductor": False})
    with torch.no_grad():
        out = compiled(*built.clone_inputs())
        assert_bit_exact(out, built.model(*built.clone_inputs()))
    (report,) = backend.reports()
    t = built.config.num_tokens
    assert report.range == [t, t]


class _Rows(torch.nn.Module):
    """Token ids -> embedding -> a linear: what a Hugging Face model's first layers read."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(32, 16)
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.proj(self.embed(ids))


@pytest.mark.parametrize(("shape", "marked", "rows"), [
    ((2, 5), None, 10),      # static [B, S] token ids: B * S rows
    ((1, 7), 1, 7),          # S marked dynamic, B = 1
    ((3, 4), 1, 12),         # S marked dynamic, B = 3: the range holds B * S
    ((6,), 0, 6),            # vLLM's flat [T] token ids
])
def test_num_tokens_counts_every_token_row(shape: tuple[int, ...], marked: int | None,
                                           rows: int) -> None:
    torch._dynamo.reset()
    backend.clear_reports()
    model = _Rows()
    compiled = torch.compile(model, backend="irfuse",
                             options={"inductor": False, "strict": True,
                                      "compile_sizes": [rows]})
    ids = torch.randint(0, 32, shape)
    if marked is not None:
        torch._dynamo.mark_dynamic(ids, marked)
    with torch.no_grad():
        assert_bit_exact(compiled(ids), model(ids))
    ranges = [r.range for r in backend.reports()]
    assert [rows, rows] in ranges, ranges


def test_an_activation_counts_all_dims_but_the_hidden_one() -> None:
    torch._dynamo.reset()
    backend.clear_reports()
    model = torch.nn.Linear(16, 16)
    compiled = torch.compile(model, backend="irfuse", options={"inductor": False})
    x = torch.randn(2, 3, 16)
    with torch.no_grad():
        assert_bit_exact(compiled(x), model(x))
    (report,) = backend.reports()
    assert report.range == [6, 6]
