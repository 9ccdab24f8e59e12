"""`irfuse::mrope_tables`' Triton kernel against its torch reference: a copy, so bit for bit,
under Triton's interpreter and on a CUDA GPU; sections one after another and interleaved,
bf16 and f32, tables given as vLLM gives them (halves of one gathered cache: strided)."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from interpret_worker import run_worker

from irfuse.fusions.library_ops import mrope_tables

CASES = [(1, 64, (16, 8, 8), False), (37, 64, (24, 20, 20), True), (5, 32, (6, 5, 5), True),
         (300, 40, (20, 0, 0), False), (9, 48, (8, 10, 6), True)]
"""(tokens, rotary_dim, sections, interleaved)."""


def _ids(case) -> str:
    t, rd, s, i = case
    return f"T{t}-rd{rd}-{'-'.join(map(str, s))}{'-interleaved' if i else ''}"


def _compare(device: str) -> dict:
    from irfuse.kernels.mrope_tables import mrope_tables as kernel

    out = {}
    for case in CASES:
        tokens, rotary_dim, sections, interleaved = case
        for dtype in (torch.bfloat16, torch.float32):
            g = torch.Generator().manual_seed(tokens)
            cache = torch.randn(128, rotary_dim, generator=g).to(dtype).to(device)
            positions = torch.randint(0, 128, (3, tokens), generator=g).to(device)
            cos, sin = cache[positions].chunk(2, dim=-1)  # strided halves, as vLLM's
            got = kernel(cos, sin, list(sections), interleaved)
            want = mrope_tables(cos, sin, list(sections), interleaved)
            out[f"{_ids(case)}-{dtype}"] = all(
                torch.equal(a, b) and a.shape == b.shape and a.is_contiguous()
                for a, b in zip(got, want, strict=True))
    return out


@pytest.fixture(scope="module")
def interpreted() -> dict:
    return run_worker(__file__)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_triton_kernel_matches_the_reference(interpreted, case):
    assert {k: v for k, v in interpreted.items() if k.startswith(_ids(case) + "-")} == {
        f"{_ids(case)}-{d}": True for d in (torch.bfloat16, torch.float32)}


@pytest.mark.gpu
def test_triton_kernel_on_the_gpu():
    results = _compare("cuda")
    assert all(results.values()), results


if __name__ == "__main__" and "--worker" in sys.argv:
    print(json.dumps(_compare("cpu")))
