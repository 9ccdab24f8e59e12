"""Which implementation runs each `irfuse::` op on each platform: every kernel's choices (its
rules, and the measured choices of `irfuse/fusions/choices/<platform>.toml`; see
`irfuse.fusions.kernel_decl`), and the token counts where some choice changes, so that compile
ranges end there.

Platforms are strings: `cpu`, `cuda:sm90` (compute capability), `rocm`. A lookup tries the exact
platform, then its family (`cuda`, `rocm`); other platforms get the reference.
"""

from __future__ import annotations

import functools
from importlib import resources

from irfuse.fusions import FUSIONS
from irfuse.fusions.kernel_decl import CHOICES_DIR, Choice, Kernel, Steps
from irfuse.fusions.library_ops import LIBRARY_OPS

FAMILIES = ("cpu", "cuda", "rocm")


@functools.cache
def kernels() -> dict[str, Kernel]:
    """Every `irfuse::` op by name: the fusions' kernels, then the library ops."""
    return {k.name: k for k in (*(k for f in FUSIONS for k in f.kernels), *LIBRARY_OPS)}


def kernel(op_name: str) -> Kernel:
    """The declaration of `op_name` (with or without `irfuse::` and `.default`)."""
    name = op_name.removeprefix("irfuse::").removesuffix(".default")
    found = kernels().get(name)
    if found is None:
        raise KeyError(f"irfuse: no kernel choice recorded for op {op_name!r}")
    return found


def choose(op_name: str, platform: str, num_tokens: int | None = None) -> Choice:
    """The implementation of `op_name` on `platform` (`Kernel.choose`)."""
    return kernel(op_name).choose(platform, num_tokens)


def split_points(platform: str) -> list[int]:
    """The token counts at which some op's choice changes on a platform: compile ranges end
    just below each, so that every range runs one choice per op."""
    starts = {t for k in kernels().values() for t, _ in (k.steps(platform) or ()) if t > 1}
    return sorted(t - 1 for t in starts)


def size_class(platform: str, num_tokens: int) -> int:
    """The smallest token count that gets the same choices as `num_tokens` for every op (the
    start of its step): ranges of one class compile once."""
    starts = [p + 1 for p in split_points(platform) if p + 1 <= num_tokens]
    return max(starts, default=1)


def platforms() -> tuple[str, ...]:
    """The platform families, then every platform a choices file or a kernel's rule names."""
    files = resources.files("irfuse.fusions").joinpath(CHOICES_DIR).iterdir()
    named = {f.name.removesuffix(".toml").replace("_", ":", 1) for f in files
             if f.name.endswith(".toml")}
    named |= {p for k in kernels().values() for p in k.rules}
    return (*FAMILIES, *sorted(named - set(FAMILIES)))


def table() -> dict[str, dict[str, Steps]]:
    """The whole table, e.g. for the CLI: op -> platform (or family) -> steps."""
    keys = platforms()
    return {name: {p: steps for p in keys if (steps := k.steps(p)) is not None}
            for name, k in kernels().items()}
