"""Every irfuse dialect as a list, for code that wants them all loaded at once (tests, scripts).

`irfuse.context.make_context()` registers the same dialects lazily (what `irfuse-opt` uses);
`load_all(ctx)` loads them eagerly into an existing context.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.ir import Dialect

from irfuse.dialects.act import Act
from irfuse.dialects.attn import Attn
from irfuse.dialects.coll import Coll
from irfuse.dialects.fused import Fused
from irfuse.dialects.gemm import Gemm
from irfuse.dialects.irfuse import IRFuse
from irfuse.dialects.norm import Norm
from irfuse.dialects.quant import Quant

ALL_DIALECTS: tuple[Dialect, ...] = (IRFuse, Norm, Quant, Gemm, Attn, Act, Coll, Fused)
"""The irfuse dialects, the shared types first."""


def load_all(ctx: Context) -> Context:
    """Load every irfuse dialect (and builtin, func) into `ctx`, skipping those already there."""
    known = set(ctx.registered_dialect_names)
    for dialect in (Builtin, Func, *ALL_DIALECTS):
        if dialect.name not in known:
            ctx.load_dialect(dialect)
    return ctx
