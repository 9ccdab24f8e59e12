"""The raising passes, declared once each, in the one order the pipeline runs them, with the
semantic ops each produces and the kind the report counts them as.

Order matters where one pass's output is another's input: vLLM's custom ops first (they become
the same semantic ops the decomposed spellings do), collectives before the norms that follow
them, norms and GEMMs before the quants between them, RoPE before attention and the KV-cache
write that read its outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from xdsl.passes import ModulePass

from irfuse.raising.raise_attention import RaiseAttention
from irfuse.raising.raise_collectives import RaiseCollectives
from irfuse.raising.raise_gemm import RaiseGemm
from irfuse.raising.raise_kv_cache_write import RaiseKvCacheWrite
from irfuse.raising.raise_mla_kv_cache_write import RaiseMlaKvCacheWrite
from irfuse.raising.raise_pad import RaisePad
from irfuse.raising.raise_quant import RaiseQuant
from irfuse.raising.raise_rms_norm import RaiseRmsNorm
from irfuse.raising.raise_rope import RaiseRope
from irfuse.raising.raise_silu_mul import RaiseSiluMul
from irfuse.raising.raise_vllm_ops import RaiseVllmOps


@dataclass(frozen=True)
class Raising:
    """A raising pass and the semantic ops it owns: op name -> the report's `raised` kind."""

    pass_class: type[ModulePass]
    kinds: Mapping[str, str] = field(default_factory=dict, hash=False)


RAISINGS: tuple[Raising, ...] = (
    Raising(RaiseVllmOps),  # produces the ops the passes below own
    Raising(RaiseCollectives, {"coll.all_reduce": "all_reduce",
                               "coll.reduce_scatter": "reduce_scatter",
                               "coll.all_gather": "all_gather"}),
    Raising(RaiseRmsNorm, {"norm.rms_norm": "rms_norm", "norm.add_rms_norm": "add_rms_norm"}),
    Raising(RaiseGemm, {"gemm.matmul": "gemm", "gemm.scaled_matmul": "scaled_gemm"}),
    Raising(RaiseQuant, {"quant.fp8": "quant_fp8", "quant.nvfp4": "quant_nvfp4"}),
    Raising(RaiseSiluMul, {"act.silu_mul": "silu_mul"}),
    Raising(RaiseRope, {"attn.rope": "rope"}),
    Raising(RaisePad, {"act.pad": "pad"}),
    Raising(RaiseAttention, {"attn.attention": "attention",
                             "attn.mla_attention": "mla_attention"}),
    Raising(RaiseKvCacheWrite, {"attn.kv_cache_write": "kv_cache_write"}),
    Raising(RaiseMlaKvCacheWrite, {"attn.mla_kv_cache_write": "mla_kv_cache_write"}),
)

RAISE_PASSES: tuple[str, ...] = tuple(r.pass_class.name for r in RAISINGS)
"""The raising passes' names, in order."""

KIND_OF_OP: dict[str, str] = {op: kind for r in RAISINGS for op, kind in r.kinds.items()}
"""Semantic op name -> the `raised` kind it counts as."""

RAISED_KINDS: tuple[str, ...] = tuple(dict.fromkeys(KIND_OF_OP.values()))
