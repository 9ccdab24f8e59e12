"""irfuse.fusions.scattered: the storage rules it reads views by are torch's.

`_view_strides` is checked against `Tensor.view` on random strided tensors (slices, steps,
transposes; shapes split, merged and given unit dims), and a region read through a split, a
slice and an unsqueeze against the storage offsets torch gives the same views.
"""

from __future__ import annotations

import random

import torch

from irfuse.fusions.scattered import Region, _reshaped, _view_strides


def test_view_strides_are_torchs() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        shape = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(1, 4))]
        x = torch.empty([n * 2 for n in shape])
        v = x[tuple(slice(0, None, rng.choice([1, 2])) for _ in shape)]
        v = v[tuple(slice(0, n) for n in shape)]
        if v.dim() > 1 and rng.random() < 0.5:
            v = v.transpose(0, -1)
        n = v.numel()
        a = rng.choice([d for d in range(1, n + 1) if n % d == 0])
        new = [a, n // a] if rng.random() < 0.5 else [n]
        if rng.random() < 0.3:
            new.append(1)
        got = _view_strides(list(v.shape), list(v.stride()), new)
        try:
            want = list(v.view(new).stride())
        except RuntimeError:  # torch needs a copy: so must the rule
            assert got is None, (v.shape, v.stride(), new)
            continue
        assert got is not None, (v.shape, v.stride(), new)
        # A unit dim's stride is arbitrary.
        assert [s for s, d in zip(got, new, strict=True) if d != 1] == \
            [s for s, d in zip(want, new, strict=True) if d != 1]


def test_a_read_back_view_has_torchs_storage_region() -> None:
    """MLA's k_pe read out of the kv projection `[T, 576]` (split, then unsqueeze): the region
    torch's view covers, with a symbolic token dim kept as it is."""
    x = torch.empty(5, 576)
    view = x.split([512, 64], dim=-1)[1].unsqueeze(1)
    whole = Region(("s0", 576), (576, 1), 0)
    piece = Region(("s0", 64), (576, 1), 512)
    got = _reshaped(piece, ("s0", 1, 64))
    assert got is not None and got.offset == view.storage_offset()
    assert [s for s, n in zip(got.strides, view.shape, strict=True) if n != 1] == \
        [s for s, n in zip(view.stride(), view.shape, strict=True) if n != 1]
    assert got.key() == piece.key() and got.key() != whole.key()
    assert got.row_span() == (576, 512, 576)
