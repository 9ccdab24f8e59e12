"""On a GPU: a model compiled with irfuse's fused kernels is captured in a CUDA graph and
replayed, and a graph compiled for several num_tokens ranges recompiles per range as its inputs
move between them, each range with its fused kernels (issue: CUDA graphs and ranges on the H200).
"""

from __future__ import annotations

import pytest
import torch

from irfuse import backend, models
from irfuse.emit import kernel_choice
from irfuse.fusions import kernel_decl

pytestmark = pytest.mark.gpu


def _compiled(name: str, **options):
    torch._dynamo.reset()
    backend.clear_reports()
    built = models.build(name, size="tiny", device="cuda")
    opts = {"optimization_level": 2, "strict": True, **options}
    return built, torch.compile(built.model, backend="irfuse", options=opts)


@pytest.mark.parametrize("inductor", [False, True], ids=["no_inductor", "inductor"])
def test_cuda_graph_capture_replays_the_fused_model(inductor):
    built, compiled = _compiled("llama-fp8", inductor=inductor)
    static = built.mark_dynamic(built.make_inputs(64))
    with torch.no_grad():
        expected = compiled(*static)  # compiles, and warms the kernels up
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            compiled(*static)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = compiled(*static)
        fresh = built.make_inputs(64, seed=1)
        for buf, new in zip(static, fresh, strict=True):
            buf.copy_(new)
        graph.replay()
        torch.cuda.synchronize()
        direct = compiled(*fresh)
    assert backend.reports()[0].fused("fuse-norm-quant") > 0
    assert not torch.equal(out, expected)  # the replay read the new inputs
    torch.testing.assert_close(out, direct, atol=0, rtol=0)  # same kernels, same bits


def test_ranges_recompile_as_inputs_move_between_them(monkeypatch):
    """add + RMSNorm + FP8 static left to Inductor from 256 tokens (as a measurement would
    record it) and a compile size of 8: three compiles, each range with its own kernels."""
    op = "add_rms_norm_quant_fp8_static"
    entries = kernel_decl.measured("cuda:sm90")
    monkeypatch.setitem(entries, op, (
        entries[op][0], (256, kernel_choice.Choice("inductor", "a test's step"))))
    built, compiled = _compiled("llama-fp8", platform="cuda:sm90", inductor=False,
                                max_num_batched_tokens=1024, compile_sizes=[8])
    with torch.no_grad():
        for i, tokens in enumerate((8, 300, 64, 300, 8)):
            inputs = built.make_inputs(tokens)
            if i == 0:
                built.mark_dynamic(inputs)
            out = compiled(*inputs)
            ref = built.model(*inputs)
            err = (out.float() - ref.float()).abs().max() / ref.float().abs().max()
            assert out.shape[0] == tokens and err.item() < 5e-2, (tokens, err.item())
    by_range = {tuple(r.range): r.fused("fuse-norm-quant") for r in backend.reports()}
    assert len(by_range) == 3, by_range

    def fused_at(tokens: int) -> int:
        """The fused count of the one compiled range holding `tokens` (other choices and passes
        split the ranges too: fuse-rope-kvcache's token cap, the attention's measured step)."""
        held = [n for (lo, hi), n in by_range.items() if lo <= tokens <= (hi or tokens)]
        assert len(held) == 1, (tokens, by_range)
        return held[0]

    assert by_range[(8, 8)] == 4 and fused_at(64) == 4 and fused_at(300) == 1, by_range
