"""The 128x4 swizzle of NVFP4's block scales, as torch code writes it.

The block scales [M, N/16] padded with zeros to [round_up(M, 128), round_up(N/16, 4)] (`cat` with
zeros, `constant_pad_nd`), tiled [Mp/128, 4, 32, Kp/4, 4], permuted (0, 3, 2, 1, 4) and made
contiguous (`docs/numerics.md`). Symbolic sizes (a dynamic M) are compared at sample values.
"""

from __future__ import annotations

import functools
import math
import re

from xdsl.dialects.builtin import bf16, f16, f32
from xdsl.ir import Operation, SSAValue

from irfuse.dialects.irfuse import TensorType
from irfuse.ir.shapes import F8E4M3FN
from irfuse.raising.aten_ops import (
    CAT,
    CLONE,
    CONSTANT_PAD_ND,
    FULL,
    NEW_FULL,
    NEW_ZEROS,
    PERMUTE,
    VIEWS,
    VIEWS_AND_CLONE,
    ZEROS,
    ZEROS_LIKE,
)
from irfuse.raising.match import (
    Call,
    NoMatch,
    as_cast,
    call,
    normalize_dim,
    producer,
    users,
)
from irfuse.raising.quant_common import (
    Blocks,
    dtype_of,
    fmt_dims,
    shape_of,
)

ZERO_MAKERS = (NEW_ZEROS, ZEROS, ZEROS_LIKE,
               FULL, NEW_FULL)


_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_SYM_FUNCTIONS: dict[str, object] = {
    "floor": math.floor, "ceiling": math.ceil, "Max": max, "Min": min,
    "FloorDiv": lambda a, b: a // b, "CeilDiv": lambda a, b: -(-a // b),
    "Mod": lambda a, b: a % b, "PythonMod": lambda a, b: a % b,
}
_SAMPLES = (*range(1, 260), 383, 1000, 4095, 4096, 4097, 65537)


@functools.cache
def _sym_code(dim: str) -> tuple[object, frozenset[str]] | None:
    """A symbolic dim (sums, products, floor divisions of symbols, as torch prints them)
    compiled for evaluation, and its symbols; None for anything else."""
    if not re.fullmatch(r"[\w\s+\-*/(),%]+", dim) or "**" in dim:
        return None
    names = frozenset(n for n in _SYMBOL.findall(dim) if n not in _SYM_FUNCTIONS)
    try:
        return compile(dim, "<dim>", "eval"), names
    except SyntaxError:
        return None


def _sym_value(dim: object, values: dict[str, int]) -> int | None:
    """A dim at sample values of its symbols (None when it cannot be evaluated)."""
    if isinstance(dim, int):
        return dim
    compiled = _sym_code(dim) if isinstance(dim, str) else None
    if compiled is None or not compiled[1] <= values.keys():
        return None
    try:
        return int(eval(compiled[0], {"__builtins__": {}, **_SYM_FUNCTIONS}, values))  # type: ignore[arg-type]  # noqa: S307
    except Exception:  # noqa: BLE001
        return None


@functools.cache
def _dims_equal(a: object, b: object, scale_a: int = 1, round_b: int = 1) -> bool:
    """Whether `a * scale_a == round_up(b, round_b)` for every value of their one symbol
    (checked at sample values: both sides are sums, products and floor divisions of it)."""
    names = set()
    for dim in (a, b):
        if isinstance(dim, str):
            names |= {n for n in _SYMBOL.findall(dim) if n not in _SYM_FUNCTIONS}
    if len(names) > 1:
        return False
    for sample in _SAMPLES if names else (0,):
        env = dict.fromkeys(names, sample)
        va, vb = _sym_value(a, env), _sym_value(b, env)
        if va is None or vb is None or va * scale_a != -(-vb // round_b) * round_b:
            return False
    return True


def _same_dims(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x == y or _dims_equal(x, y) for x, y in zip(a, b, strict=True))


def swizzle_scales(sb: SSAValue, taken: set[Operation], blocks: Blocks
             ) -> tuple[SSAValue, list[Operation]]:
    """The block scales [M, G] (fp8, maybe cast exactly to a wider float and back), padded with
    zeros to [Mp, Kp] = [round_up(M, 128), round_up(G, 4)], viewed [(1, ...,) Mp/128, 4, 32,
    Kp/4, 4], permuted (0, 3, 2, 1, 4), made contiguous and viewed [Mp, Kp], in f8E4M3FN: the
    swizzled layout. Returns it and the ops."""
    m, g = blocks.lead[0], blocks.g
    ops: list[Operation] = []
    # Start where the swizzle leaves the chain: at sb, or at a cast of it the chain shares.
    starts = [sb, *(u.results[0] for u in users(sb) if u in taken and as_cast(u.results[0]))]
    live = [v for v in starts if any(u not in taken for u in users(v))]
    if len(live) != 1:
        raise NoMatch("the block scales are not swizzled" if not live
                      else "the block scales are used outside the quant")
    value = live[0]

    def step(what: str) -> Call:
        rest = [u for u in users(value) if u not in taken and u not in ops]
        makers = [u for u in rest if call(u, *ZERO_MAKERS) is not None]
        rest = [u for u in rest if u not in makers]
        if len(rest) > 1:
            raise NoMatch("the block scales are used outside the quant")
        found = call(rest[0]) if rest else None
        if found is None:
            raise NoMatch(f"the block scales are not {what}")
        return found

    def take(found: Call) -> None:
        nonlocal value
        ops.append(found.op)
        value = found.result

    def exact_casts() -> None:
        while True:
            rest = [u for u in users(value) if u not in taken and u not in ops
                    and call(u, *ZERO_MAKERS) is None]
            cast = as_cast(rest[0].results[0]) if len(rest) == 1 and rest[0].results else None
            if cast is None or cast[1] not in (f32, bf16, f16, F8E4M3FN):
                return
            take(call(rest[0]))  # type: ignore[arg-type]

    exact_casts()
    while shape_of(value) != (m, g):
        found = step("swizzled")
        if found.target not in VIEWS:
            raise NoMatch(f"the block scales are reshaped by {found.target} before the swizzle")
        take(found)
        exact_casts()
    mp, kp = (m if isinstance(m, int) and m % 128 == 0 else None), (g if g % 4 == 0 else None)
    found = step("swizzled")
    padded = False
    while found.target in (CAT, CONSTANT_PAD_ND):
        _check_padding(found, value, ops)
        take(found)
        exact_casts()
        found = step("swizzled")
        padded = True
    mp, kp = shape_of(value) if len(shape_of(value)) == 2 else (mp, kp)
    if mp is None or kp is None or not _dims_equal(mp, m, 1, 128) or kp != -(-g // 4) * 4:
        if not padded:
            raise NoMatch(f"the [M, N/16] block scales go to {found.target}, not to a zero "
                          "padding (cat, constant_pad_nd) to [round_up(M, 128), "
                          "round_up(N/16, 4)]")
        raise NoMatch(f"the block scales are padded to {fmt_dims(shape_of(value))}, not to "
                      "[round_up(M, 128), round_up(N/16, 4)]")
    while found.target in VIEWS:
        take(found)
        found = step("swizzled")
    tiled = shape_of(value)
    lead = len(tiled) - 5
    if (
        found.target != PERMUTE
        or lead < 0
        or any(d != 1 for d in tiled[:lead])
        or tiled[lead + 1:lead + 3] != (4, 32)
        or tiled[lead + 4] != 4
        or tiled[lead + 3] * 4 != kp
        or not _dims_equal(tiled[lead], mp, 128, 1)
    ):
        raise NoMatch(f"the padded block scales are tiled as {fmt_dims(tiled)} by "
                      f"{found.target}, not [Mp/128, 4, 32, Kp/4, 4] permuted")
    perm = found.arg(1, "dims")
    expected = [*range(lead), *(lead + p for p in (0, 3, 2, 1, 4))]
    if not isinstance(perm, list) or [normalize_dim(p, len(tiled)) for p in perm] != expected:
        raise NoMatch(f"the block-scale tiles are permuted {perm}, not {expected}")
    take(found)
    while not (_same_dims(shape_of(value), (mp, kp)) and dtype_of(value) == F8E4M3FN):
        found = step("cast back to f8E4M3FN")
        if found.target not in VIEWS_AND_CLONE and as_cast(found.result) is None:
            raise NoMatch(f"the swizzled block scales are made by {found.target}")
        if found.target == CLONE and found.kwargs.get("memory_format") is not None:
            fmt = getattr(getattr(found.kwargs["memory_format"], "text", None), "data", None)
            if fmt != "torch.contiguous_format":
                raise NoMatch("the swizzled block scales are copied in another memory format")
        take(found)
    return value, ops


def _check_padding(found: Call, value: SSAValue, ops: list[Operation]) -> None:
    """A zero padding after the data: `cat([t, zeros], d)` or `constant_pad_nd(t, [0, a, 0, b])`."""
    if found.target == CONSTANT_PAD_ND:
        pad = found.arg(1, "pad")
        fill = found.arg(2, "value", 0)
        if not isinstance(pad, list) or len(pad) not in (2, 4) or pad[0::2] != [0] * (
            len(pad) // 2
        ) or fill != 0:
            raise NoMatch(f"the block scales are padded by {pad} with {fill}, not with zeros "
                          "after them")
        return
    tensors = found.arg(0, "tensors")
    if not isinstance(tensors, list) or len(tensors) != 2 or tensors[0] is not value:
        raise NoMatch("the block scales are concatenated with more than zeros after them")
    zeros = producer(tensors[1], *ZERO_MAKERS)
    fill = 0
    if zeros is not None and zeros.target in (FULL, NEW_FULL):
        fill = zeros.arg(1 if zeros.target == FULL else 2, "fill_value")
    if zeros is None or fill != 0:
        raise NoMatch("the block scales are padded with something other than zeros")
    if any(isinstance(o.type, TensorType) for o in zeros.op.operands):
        ops.append(zeros.op)  # made from a chain value (`new_zeros`); other makers join if private


