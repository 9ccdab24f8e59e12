"""The raising passes, declared once each, in the one order the pipeline runs them, with the
semantic ops each produces and the kind the report counts them as.

Order matters where one pass's output is another's input: vLLM's custom ops first (they become
the same semantic ops the decomposed spellings do), collectives before the norms that follow
them, norms and GEMMs before the quants between them, RoPE before attention and the KV-cache
write that read its outputs.

This module is light (no xDSL): the built-in models count what they expect to be raised by
these kinds (`irfuse.models.config.RAISED_KINDS`) without importing the compiler. A pass's class
lives in the module named after it (`raise-rms-norm` in `raise_rms_norm.py`), imported when the
pass registry first asks for it (`Raising.pass_class`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Raising:
    """A raising pass, by name, and the semantic ops it owns: op name -> the report's `raised`
    kind."""

    name: str
    kinds: Mapping[str, str] = field(default_factory=dict, hash=False)

    @functools.cached_property
    def pass_class(self) -> type:
        """Its xDSL ModulePass: the class of that name in its module, imported here on first
        use (the pass registry's), so that reading RAISINGS imports no pass."""
        module = importlib.import_module(f"{__package__}.{self.name.replace('-', '_')}")
        found = [v for v in vars(module).values()
                 if isinstance(v, type) and v.__module__ == module.__name__
                 and getattr(v, "name", None) == self.name]
        if len(found) != 1:
            raise LookupError(f"{module.__name__} defines {len(found)} passes named {self.name}")
        return found[0]


RAISINGS: tuple[Raising, ...] = (
    Raising("raise-vllm-ops"),  # produces the ops the passes below own
    Raising("raise-vllm-attention", {"attn.vllm_attention": "vllm_attention",
                                     "attn.vllm_mla_attention": "vllm_mla_attention",
                                     "attn.vllm_kv_cache_update": "vllm_kv_cache_update",
                                     "attn.vllm_mla_kv_cache_update":
                                         "vllm_mla_kv_cache_update"}),
    Raising("raise-collectives", {"coll.all_reduce": "all_reduce",
                                  "coll.reduce_scatter": "reduce_scatter",
                                  "coll.all_gather": "all_gather"}),
    Raising("raise-rms-norm", {"norm.rms_norm": "rms_norm", "norm.add_rms_norm": "add_rms_norm"}),
    Raising("raise-gemm", {"gemm.matmul": "gemm", "gemm.scaled_matmul": "scaled_gemm"}),
    Raising("raise-quant", {"quant.fp8": "quant_fp8", "quant.nvfp4": "quant_nvfp4"}),
    Raising("raise-silu-mul", {"act.silu_mul": "silu_mul"}),
    Raising("raise-rope", {"attn.rope": "rope"}),
    Raising("raise-pad", {"act.pad": "pad"}),
    Raising("raise-attention", {"attn.attention": "attention",
                                "attn.mla_attention": "mla_attention"}),
    Raising("raise-kv-cache-write", {"attn.kv_cache_write": "kv_cache_write"}),
    Raising("raise-mla-kv-cache-write", {"attn.mla_kv_cache_write": "mla_kv_cache_write"}),
)

RAISE_PASSES: tuple[str, ...] = tuple(r.name for r in RAISINGS)
"""The raising passes' names, in order."""

KIND_OF_OP: dict[str, str] = {op: kind for r in RAISINGS for op, kind in r.kinds.items()}
"""Semantic op name -> the `raised` kind it counts as."""

RAISED_KINDS: tuple[str, ...] = tuple(dict.fromkeys(KIND_OF_OP.values()))
"""Every `raised` kind, in pipeline order."""
