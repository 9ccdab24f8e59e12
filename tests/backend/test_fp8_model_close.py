"""`irfuse.testing.assert_fp8_model_close`, the bound the FP8 model tests on CUDA compare with,
on the CPU: it accepts what an ulp of difference in a fused kernel does to a tiny FP8 Llama
(RMSNorm weights moved by one bf16 ulp, so some FP8 codes move a step), and rejects what a bug
does (a zeroed row, two heads swapped, the causal mask dropped)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import irfuse.models as M
from irfuse.testing import assert_fp8_model_close, fp8_model_error


@pytest.fixture(scope="module")
def llama():
    built = M.build("llama-fp8", size="tiny", num_layers=2)
    with torch.no_grad():
        want = built.model(*built.clone_inputs())
    return built, want


def _run(built) -> torch.Tensor:
    with torch.no_grad():
        return built.model(*built.clone_inputs())


def test_accepts_norm_weights_an_ulp_off(llama) -> None:
    built, want = llama
    gen = torch.Generator().manual_seed(0)
    moved = 0
    for frac in (0.01, 0.1):
        saved = {}
        with torch.no_grad():
            for name, p in built.model.named_parameters():
                if "norm" in name:
                    saved[name] = p.detach().clone()
                    p.view(torch.int16)[torch.rand(p.shape, generator=gen) < frac] += 1
            got = _run(built)
            for name, p in built.model.named_parameters():
                if name in saved:
                    p.copy_(saved[name])
        max_rel, _ = fp8_model_error(got, want)
        moved += max_rel > 0.01  # FP8 codes moved, not just bf16 rounding
        assert_fp8_model_close(got, want)
    assert moved  # the check saw the effect it is meant to tolerate
    assert torch.equal(_run(built), want)  # weights restored


def test_rejects_a_zeroed_row(llama) -> None:
    _, want = llama
    got = want.clone()
    got[5] = 0
    with pytest.raises(AssertionError, match="largest error"):
        assert_fp8_model_close(got, want)


def _with_sdpa(monkeypatch, built, change) -> torch.Tensor:
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: change(sdpa, a, k))
    try:
        return _run(built)
    finally:
        monkeypatch.undo()


def test_rejects_swapped_heads(llama, monkeypatch) -> None:
    built, want = llama

    def swap(sdpa, args, kw):
        out = sdpa(*args, **kw)  # [1, H, T, D]
        return out[:, [1, 0, *range(2, out.shape[1])]]

    got = _with_sdpa(monkeypatch, built, swap)
    assert fp8_model_error(got, want)[0] > 2 * 2.0 ** -3
    with pytest.raises(AssertionError):
        assert_fp8_model_close(got, want)


def test_rejects_a_dropped_causal_mask(llama, monkeypatch) -> None:
    built, want = llama

    def no_mask(sdpa, args, kw):
        return sdpa(*args, **{**kw, "is_causal": False})

    got = _with_sdpa(monkeypatch, built, no_mask)
    with pytest.raises(AssertionError):
        assert_fp8_model_close(got, want)
