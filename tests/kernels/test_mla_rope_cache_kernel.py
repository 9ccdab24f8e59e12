"""MLA's RoPE + latent-cache write: the torch reference equals vLLM's native rotary followed by
`concat_and_cache_mla`'s write, bit for bit; the Triton kernel (on the CPU under
TRITON_INTERPRET=1, in a child process) equals the reference bit for bit, cache included, with a
strided q_pe (a slice of q), both table forms, partial rotary, padded (-1) slots and vLLM's FP8
latent cache."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest
import torch

from irfuse.kernels import mla_rope_cache_ref
from irfuse.models.layers import RotaryEmbedding

LATENT, BLOCKS, BLOCK_SIZE = 48, 4, 4


def _inputs(t: int, heads: int, rope: int, dtype: torch.dtype, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = (torch.randn(t, heads, 8 + rope, generator=g) * 2).to(dtype)
    q_pe = q[..., 8:]  # strided, as vLLM slices it out of q
    k_pe = torch.randn(t, 1, rope, generator=g).to(dtype)
    kv_c = torch.randn(t, LATENT, generator=g).to(dtype)
    positions = torch.randint(0, 64, (t,), generator=g)
    cache = torch.randn(BLOCKS, BLOCK_SIZE, LATENT + rope, generator=g).to(dtype)
    slots = torch.randperm(BLOCKS * BLOCK_SIZE, generator=g)[:t]
    if t > 2:
        slots[1] = -1  # a padded token: not written
    return q_pe, k_pe, kv_c, positions, cache, slots


@pytest.mark.parametrize("is_neox", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_reference_is_native_rope_and_cat_write(is_neox, dtype):
    q_pe, k_pe, kv_c, positions, cache, slots = _inputs(5, 4, 16, dtype)
    rotary = RotaryEmbedding(16, 16, 64, 10000.0, is_neox, dtype=dtype,
                             device=torch.device("cpu"))
    want_q, want_k = rotary(positions, q_pe, k_pe)
    want_cache = cache.clone()
    keep = slots >= 0
    want_cache.view(-1, LATENT + 16)[slots[keep]] = torch.cat([kv_c, want_k[:, 0]], -1)[keep]
    got_cache = cache.clone()
    got_q, got_k = mla_rope_cache_ref.rope_mla_kv_cache_write(
        q_pe, k_pe, kv_c, None, None, positions, rotary.cos_sin_cache, got_cache, slots,
        is_neox=is_neox, rotary_dim=16)
    assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)
    assert torch.equal(got_cache, want_cache)


def test_reference_refuses_what_it_cannot_write():
    q_pe, k_pe, kv_c, positions, cache, slots = _inputs(3, 4, 16, torch.bfloat16)
    table = torch.randn(64, 16).bfloat16()
    with pytest.raises(ValueError, match="kv_cache must be a"):
        mla_rope_cache_ref.rope_mla_kv_cache_write(q_pe, k_pe, kv_c, None, None, positions,
                                                   table, cache[..., :-1], slots, is_neox=True,
                                                   rotary_dim=16)
    with pytest.raises(ValueError, match="an FP8 cache needs k_scale"):
        mla_rope_cache_ref.rope_mla_kv_cache_write(
            q_pe, k_pe, kv_c, None, None, positions, table, cache.to(torch.float8_e4m3fn),
            slots, is_neox=True, rotary_dim=16)
    with pytest.raises(ValueError, match="neither the model dtype"):
        mla_rope_cache_ref.rope_mla_kv_cache_write(
            q_pe, k_pe, kv_c, None, None, positions, table, cache.half(), slots, is_neox=True,
            rotary_dim=16)
    with pytest.raises(ValueError, match="one head"):
        mla_rope_cache_ref.rope_mla_kv_cache_write(q_pe, q_pe, kv_c, None, None, positions,
                                                   table, cache, slots, is_neox=True,
                                                   rotary_dim=16)


CASES = [(t, heads, rope, rotary, dtype, neox, table, False)
         for t, heads, rope, rotary in ((1, 4, 16, 16), (5, 3, 16, 8), (7, 16, 32, 32))
         for dtype in ("bfloat16", "float16", "float32")
         for neox in (False, True) for table in ("cache", "cos_sin")]
# vLLM's FP8 latent cache ("fp8": e4m3, scaled by k_scale).
CASES += [(t, heads, rope, rotary, "bfloat16", neox, "cache", True)
          for t, heads, rope, rotary in ((5, 3, 16, 8), (7, 16, 32, 32)) for neox in (False, True)]


def _ids(case) -> str:
    t, heads, rope, rotary, dtype, neox, table, fp8 = case
    return (f"T{t}-H{heads}-R{rope}-rot{rotary}-{dtype}-{'neox' if neox else 'gptj'}-{table}"
            + ("-fp8" if fp8 else ""))


def _compare(device: str) -> dict:
    """Each case: whether the Triton kernel's rotated q, k and cache equal the reference's, and
    the worst distance in ulps."""
    from irfuse.kernels import mla_rope_cache

    out = {}
    for case in CASES:
        t, heads, rope, rotary, dtype, neox, table, fp8 = case
        q_pe, k_pe, kv_c, positions, cache, slots = (
            x.to(device) for x in _inputs(t, heads, rope, getattr(torch, dtype), seed=t + heads))
        scale = {}
        if fp8:
            cache = cache.to(torch.float8_e4m3fn)
            scale = {"k_scale": torch.tensor([0.3], device=device)}
        strided = torch.zeros(t, heads, 8 + rope, dtype=q_pe.dtype, device=device)
        strided[..., 8:] = q_pe
        q_pe = strided[..., 8:]  # strided again, as vLLM slices it out of q
        g = torch.Generator().manual_seed(1)
        if table == "cache":
            tables = (None, None, positions,
                      torch.randn(64, rotary, generator=g).to(q_pe.dtype).to(device))
        else:
            cos = torch.randn(t, rotary // 2, generator=g)
            tables = (cos.to(device), (cos.flip(0) * 0.5).to(device), None, None)
        results = []
        for fn in (mla_rope_cache.rope_mla_kv_cache_write,
                   mla_rope_cache_ref.rope_mla_kv_cache_write):
            c = cache.clone()
            q, k = fn(q_pe, k_pe, kv_c, *tables, c, slots, is_neox=neox, rotary_dim=rotary,
                      **scale)
            results.append((q, k, c))
        worst = 0.0
        for a, b in zip(*results, strict=True):
            ulp = torch.finfo(b.dtype).eps * b.float().abs().clamp_min(torch.finfo(b.dtype).tiny)
            worst = max(worst, ((a.float() - b.float()).abs() / ulp).max().item())
        same = all(torch.equal(a.view(torch.uint8), b.view(torch.uint8)) if fp8 and i == 2
                   else torch.equal(a, b) for i, (a, b) in enumerate(zip(*results, strict=True)))
        out[_ids(case)] = {"ok": same, "ulps": worst}
    return out


def _worker() -> None:
    print(json.dumps(_compare("cpu")))


@pytest.fixture(scope="module")
def interpreted() -> dict:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from interpret_worker import run_worker

    return run_worker(__file__)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_triton_kernel_is_the_reference_bit_for_bit(interpreted, case):
    assert interpreted[_ids(case)]["ok"]


@pytest.mark.gpu
def test_triton_kernel_on_the_gpu():
    """The compiled kernel on a CUDA GPU: within one ulp of the reference there (FMA contraction
    may round the rotation differently), the cache's other slots untouched, every case."""
    results = _compare("cuda")
    bad = {k: r for k, r in results.items() if r["ulps"] > 1.0}
    assert not bad, bad


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()
