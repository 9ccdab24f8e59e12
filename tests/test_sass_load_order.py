"""The `early` row kernel issues the weight and scale loads before the reduction's barrier.

The claim behind `RowConfig.early` (norm_quant): loads written after the reduction stay behind
its `BAR.SYNC`, so the kernel issues them with the row's. Checked on the sm90 SASS that Triton
builds on this machine without a GPU (benchmarks/sass_rows.py): with `early`, every global load
(the row, the residual, the weight, the scale) comes before the first barrier.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _loads_before_barrier(early: bool) -> tuple[int, int]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import sass_rows

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        sass_rows.main(["--hidden", "4096", "--warps", "16"] + (["--early"] if early else []))
    out = buf.getvalue().splitlines()
    barrier = next(i for i, line in enumerate(out) if "BAR.SYNC" in line)
    loads = [i for i, line in enumerate(out) if "LDG" in line]
    return sum(i < barrier for i in loads), len(loads)


def test_early_loads_precede_the_barrier() -> None:
    pytest.importorskip("triton.backends.nvidia")
    before, total = _loads_before_barrier(early=True)
    assert total == 4 and before == 4  # x, residual, weight, static scale
