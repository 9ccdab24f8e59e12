"""Claims about the norm kernels' sm90 SASS, which Triton builds on this machine without a GPU
(benchmarks/sass_rows.py).

- `RowConfig.early`: loads written after the reduction stay behind its `BAR.SYNC`, so the
  kernel issues them with the row's: with `early`, every global load (the row, the residual,
  the weight, the scale) comes before the first barrier.
- `RowConfig.vec` / `GroupConfig.vec`: with the contiguity hint, no tensor of the row changes
  register layout, so the only barriers left are the reductions' (the sum of squares;
  per-token also the amax, and one between the two that reuse the buffer; per group, the
  group scales' exchange). Without it the same kernels exchange the residual sum (and
  per-token the row) through shared memory.
- `RowConfig.pdl` / `GroupConfig.pdl` (programmatic dependent launch): the wait for the previous
  kernel (`griddepcontrol.wait`, SASS `ACQBULK`) and the release of the next one (`PREEXIT`)
  come before the first global load or store, and neither is there without PDL.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import sys
from collections.abc import Callable

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _sass(*args: str) -> list[str]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import sass_rows

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        sass_rows.main(list(args))
    return buf.getvalue().splitlines()


def _loads_before_barrier(early: bool) -> tuple[int, int]:
    out = _sass("--hidden", "4096", "--warps", "16", *(["--early"] if early else []))
    barrier = next(i for i, line in enumerate(out) if "BAR.SYNC" in line)
    loads = [i for i, line in enumerate(out) if "LDG" in line]
    return sum(i < barrier for i in loads), len(loads)


def test_early_loads_precede_the_barrier() -> None:
    pytest.importorskip("triton.backends.nvidia")
    before, total = _loads_before_barrier(early=True)
    assert total == 4 and before == 4  # x, residual, weight, static scale
    before, total = _loads_before_barrier(early=False)
    assert total == 4 and before == 2  # only x and the residual: the claim `early` rests on


def _opcodes(*args: str) -> list[str]:
    """The opcodes of a kernel's SASS lines (`/*addr*/ [@pred] OPCODE ...;`), in order."""
    return [next((w.rstrip(";") for w in line.split()[1:] if not w.startswith("@")), "")
            for line in _sass(*args) if line.startswith("/*")]


def _barriers_and_shared_stores(*args: str) -> tuple[int, int]:
    """(BAR.SYNC count, STS count) of a kernel's SASS."""
    opcodes = _opcodes(*args)
    return (sum(op.startswith("BAR.SYNC") for op in opcodes),
            sum(op.startswith("STS") for op in opcodes))


ROW = ("--hidden", "4096", "--warps", "8", "--early", "--no-evict")


@pytest.mark.parametrize("kernel, barriers", [
    (ROW, lambda one: one),
    (("--hidden", "8192", "--warps", "16", "--early", "--no-evict"), lambda one: one),
    ((*ROW, "--per-token"), lambda one: 2 * one + 1),  # and one before the buffer's reuse
    ((*ROW, "--group", "128"), lambda one: one + 2),  # and the group scales' exchange
])
def test_vec_leaves_only_the_reductions_barriers(kernel: tuple[str, ...],
                                                 barriers: Callable[[int], int]) -> None:
    """Counted against the plain norm's SASS (one reduction and nothing else), since Triton
    versions differ in a reduction's own barriers (3.9: one; 3.6: two)."""
    pytest.importorskip("triton.backends.nvidia")
    one, _ = _barriers_and_shared_stores(*ROW, "--no-residual", "--vec", "8")
    bars, stores = _barriers_and_shared_stores(*kernel, "--vec", "8")
    bars0, stores0 = _barriers_and_shared_stores(*kernel)
    assert bars == barriers(one)
    assert bars0 > bars and stores0 > stores


@pytest.mark.parametrize("kernel", [
    ("--hidden", "4096", "--warps", "16", "--early", "--vec", "8"),
    ("--hidden", "4096", "--warps", "8", "--per-token"),
    ("--hidden", "4096", "--warps", "8", "--group", "128", "--early"),
], ids=["static", "per_token", "group"])
def test_pdl_waits_before_the_first_memory_access(kernel: tuple[str, ...]) -> None:
    pytest.importorskip("triton.backends.nvidia")
    ops = _opcodes(*kernel, "--pdl")
    first_access = next(i for i, op in enumerate(ops) if op.startswith(("LDG", "STG")))
    assert ops.index("ACQBULK") < first_access
    assert ops.index("PREEXIT") < first_access
    plain = _opcodes(*kernel)
    assert "ACQBULK" not in plain and "PREEXIT" not in plain
