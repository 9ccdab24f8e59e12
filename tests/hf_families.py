"""More Hugging Face decoder families, built from tiny configs (random weights, offline), and the
true count of each raised kind, derived by running the eager model -- not typed by hand.

`build_family(name)` gives the causal LM as ids -> logits (`hf_corpus.Logits`), bf16, SDPA
attention, 2 layers. `truth_counts(model, ids)` runs it once in eager and counts what really
runs, following the conventions of `tests/corpus/test_models.py`:
- rms_norm / add_rms_norm: one per call of a module whose class is an RMSNorm (name ends in
  `RMSNorm`, with an eps: Gemma's `x * (1 + w)` ones included); add_rms_norm when its input is
  the sum of two same-shaped tensors (the residual add just before it), rms_norm otherwise
  (per-head q/k norms count one each for q and k; LayerNorms count nothing);
- quant_fp8: one per `StaticFp8Linear` call (`hf_corpus.quantize_linears`);
- silu_mul: one per product of a `silu` or `gelu` result with another tensor of its shape (gated
  MLPs, GeGLU included, MoE experts as the grouped experts code runs them: one per experts
  module);
- rope: one per call of the family's `apply_rotary*` (q and k together, one per layer);
- attention / scaled_gemm: one per `scaled_dot_product_attention` / `torch._scaled_mm` call;
  gemm: one per `nn.Linear` call (subclasses included) and per `F.linear` outside one.

`EXCLUDED` lists the families looked at and left out, with the reason.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from hf_corpus import HF_KW, Logits, StaticFp8Linear
from torch import nn
from torch.overrides import TorchFunctionMode

# Token ids inside the tiny vocabulary (several configs default to ids of their real tokenizer).
TOKENS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
MOE = dict(num_experts_per_tok=2, moe_intermediate_size=32)


@dataclass(frozen=True)
class Family:
    """A `transformers` model type and what its tiny config changes from `HF_KW`."""

    model_type: str
    config: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    attn: str = "sdpa"  # "eager" where transformers refuses SDPA for the family
    name: str = ""  # the family's key when a model type is tested in two configurations

    @property
    def key(self) -> str:
        return self.name or self.model_type


FAMILIES: dict[str, Family] = {
    f.key: f
    for f in (
        Family("qwen2", note="q/k/v biases"),
        Family("qwen2_moe", dict(MOE, num_experts=4, shared_expert_intermediate_size=64),
               note="grouped experts + shared expert: two SiLU·Mul per layer"),
        Family("qwen3_moe", dict(MOE, num_experts=4, head_dim=16), note="per-head q/k norms"),
        Family("mixtral", dict(num_local_experts=4, num_experts_per_tok=2)),
        Family("phimoe", dict(num_local_experts=4, num_experts_per_tok=2),
               note="LayerNorm, sparsemixer routing"),
        Family("olmoe", dict(num_experts=4, num_experts_per_tok=2),
               note="q/k norms over the whole projection"),
        Family("granitemoe", dict(num_local_experts=4, num_experts_per_tok=2)),
        Family("glm4_moe", dict(MOE, n_routed_experts=4, first_k_dense_replace=1, head_dim=16),
               note="dense first layer, routed + shared experts"),
        Family("hunyuan_v1_moe", dict(num_experts=4, moe_topk=2, head_dim=16),
               note="q/k norms after RoPE"),
        Family("ernie4_5_moe", dict(MOE, moe_num_experts=4, moe_k=2)),
        Family("exaone_moe", dict(MOE, num_experts=4)),
        Family("solar_open", dict(MOE, n_routed_experts=4)),
        Family("afmoe", dict(MOE, num_experts=4)),
        Family("llama4_text", dict(MOE, num_local_experts=4, head_dim=16),
               note="complex RoPE, weightless L2 q/k norms, MoE"),
        Family("phi3", note="fused gate_up projection, chunked"),
        Family("gemma3_text", dict(head_dim=16, sliding_window=4),
               note="x * (1 + w) norms, sandwich norms, sliding-window masks, GELU·Mul"),
        Family("gemma2", dict(head_dim=16, sliding_window=4), attn="eager",
               note="soft-capped logits: transformers refuses SDPA; eager attention is not raised"),
        Family("olmo2", note="post-norm, q/k norms over the projection, RoPE promoted to f32"),
        Family("olmo3", dict(sliding_window=4), note="as OLMo2, sliding-window layers"),
        Family("olmo", note="parameter-free LayerNorm, RoPE promoted to f32"),
        Family("granite", note="embedding, residual and logits multipliers"),
        Family("cohere", note="LayerNorm, parallel attention + MLP, GPT-J RoPE in f32"),
        Family("cohere2", dict(sliding_window=4), note="LayerNorm, sliding-window layers"),
        Family("stablelm", note="LayerNorm, partial rotary"),
        Family("starcoder2", note="LayerNorm, GELU MLP, biases"),
        Family("phi", note="LayerNorm, parallel attention + MLP, partial rotary, GELU"),
        Family("persimmon", note="LayerNorm q/k norms, partial rotary, ReLU²"),
        Family("gpt_neox", note="LayerNorm, fused qkv, partial rotary"),
        Family("falcon", dict(new_decoder_architecture=True, num_kv_heads=2),
               note="LayerNorm, Linear computed as x @ w.T, GELU"),
        Family("falcon", dict(new_decoder_architecture=False, multi_query=True),
               name="falcon_mqa",
               note="old architecture: multi-query attention, the one k/v head expanded to all "
                    "heads by SDPA's math fallback (raised as GQA with one k/v head); Linear "
                    "computed as x @ w.T (in QUICK for both)"),
        Family("nemotron", note="LayerNorm1P, ReLU² MLP, partial rotary"),
        Family("gpt_bigcode", note="LayerNorm, multi-query, no RoPE"),
        Family("opt", note="LayerNorm, learned positions, ReLU"),
        Family("glm", dict(head_dim=16), note="GPT-J RoPE on half the head, fused gate_up"),
        Family("glm4", dict(head_dim=16), note="GLM + sandwich norms"),
        Family("smollm3"),
        Family("ernie4_5", note="GPT-J RoPE on f32 casts, repeat_interleave'd cos/sin"),
        Family("exaone4", dict(sliding_window=4), note="post-norm, q/k norms"),
        Family("helium", dict(head_dim=16)),
        Family("arcee", note="ReLU² MLP"),
        Family("apertus", note="xIELU MLP, q/k norms"),
        Family("seed_oss", note="attention biases"),
        Family("internlm3"),
        Family("hunyuan_v1_dense", dict(head_dim=16), note="q/k norms after RoPE"),
        Family("ministral", dict(head_dim=16)),
        Family("doge", note="dynamic mask attention, q/k norms"),
        Family("cwm", dict(head_dim=16), note="sliding-window layers"),
        Family("bitnet", note="sub-norms before o_proj / down_proj, ReLU²"),
        Family("diffllama", note="differential attention: two SDPA per layer"),
        Family("lfm2", note="short-conv + attention hybrid, SwiGLU"),
        Family("gpt_oss", dict(num_local_experts=4, num_experts_per_tok=2, head_dim=16,
                               sliding_window=4), attn="eager",
               note="attention sinks: transformers refuses SDPA; clamped SwiGLU experts"),
    )
}

QUICK: tuple[str, ...] = (
    "qwen2_moe", "qwen3_moe", "mixtral", "llama4_text", "phi3", "gemma3_text", "gemma2",
    "olmo2", "olmo", "cohere", "starcoder2", "falcon_mqa", "glm4",
    "ernie4_5", "hunyuan_v1_dense", "gpt_oss",
)
"""The families tested by default: one of each spelling found (the rest: IRFUSE_ALL_FAMILIES=1)."""

FP8: tuple[str, ...] = ("qwen2", "olmo2", "gemma3_text", "cohere")
"""Families also tested with every decoder linear a StaticFp8Linear."""

EXCLUDED: dict[str, str] = {
    "nanochat": "rotate_half is (x2, -x1): a rotation by -θ; raise-rope refuses it (wrong sign)",
    "qwen3_next, granitemoehybrid":
        "hybrid linear-attention / SSM / conv layers: out of scope (their gated RMSNorm "
        "`norm(x) * silu(gate)` is raised as an rms_norm; the gate product is not a SiLU·Mul)",
    "jetmoe": "mixture of attention heads: 17 graphs (graph breaks in the expert loop)",
    "vaultgemma, mpt, bloom":
        "transformers refuses SDPA (soft-capping / ALiBi); ALiBi is out of scope",
    "gptj, codegen, dbrx, dots1, youtu, longcat_flash, minimax_m2":
        "no tiny config built in a few tries (rotary_dim / MoE / MLA fields); not investigated",
    "deepseek_v2, deepseek_v3": "MLA: covered by tests/raising/test_raise_attention.py",
}
"""Families looked at and left out, with the reason."""


def build_family(name: str, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> Logits:
    """The tiny causal LM of family `name` (2 layers, random weights), ids -> logits."""
    import transformers as tf

    family = FAMILIES[name]
    config = tf.AutoConfig.for_model(family.model_type, **{**HF_KW, **TOKENS, **family.config})
    config._attn_implementation = family.attn
    torch.manual_seed(seed)
    return Logits(tf.AutoModelForCausalLM.from_config(config).eval().to(dtype))


def is_rms_norm(module: nn.Module) -> bool:
    """An RMSNorm module: `...RMSNorm` (any weighting), or Llama 4's weightless `...L2Norm`
    (`x * rsqrt(mean(x²) + eps)`: an RMSNorm without a weight), with an eps."""
    name = type(module).__name__
    has_eps = hasattr(module, "variance_epsilon") or hasattr(module, "eps")
    return name.endswith(("RMSNorm", "L2Norm")) and has_eps


def is_pairwise(a: Any, b: Any) -> bool:
    """Both are tensors of one shape (no broadcast, no scalar)."""
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape


ADDS = {torch.add, torch.Tensor.add, torch.Tensor.__add__, torch.Tensor.__radd__}
MULS = {torch.mul, torch.Tensor.mul, torch.Tensor.__mul__, torch.Tensor.__rmul__}


class _Counter(TorchFunctionMode):
    """Counts the torch-level calls of the raised kinds and remembers residual sums and SiLU
    results (by identity, so that the module hooks and products can ask where a tensor came
    from)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.sums: list[torch.Tensor] = []
        self.silus: list[torch.Tensor] = []
        self.rope_depth = [0]  # > 0 inside a rotary call: its sums are no residual adds
        self.in_linear = [0]  # > 0 inside an nn.Linear (Falcon's computes `x @ w.T`)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        kind = {F.scaled_dot_product_attention: "attention", torch._scaled_mm: "scaled_gemm"}.get(func)
        if func is F.linear and not self.in_linear[0]:
            self.counts["gemm"] += 1  # a linear called outside an nn.Linear module
        elif kind is not None:
            self.counts[kind] += 1
        elif func in (F.silu, F.gelu):  # SiLU·Mul and GeGLU: one gated-activation family
            self.silus.append(out)
        elif func in ADDS and len(args) >= 2 and is_pairwise(args[0], args[1]):
            if not self.rope_depth[0]:
                self.sums.append(out)
        elif func in MULS and len(args) >= 2 and is_pairwise(args[0], args[1]):
            if any(a is s for a in args[:2] for s in self.silus):
                self.counts["silu_mul"] += 1
        return out


def truth_counts(model: nn.Module, ids: torch.Tensor) -> dict[str, int]:
    """Run `model(ids)` once in eager and count what it really computes (see the docstring)."""
    counter = _Counter()
    handles = []

    def norm_hook(module, args):
        after_add = any(args[0] is s for s in counter.sums)
        counter.counts["add_rms_norm" if after_add else "rms_norm"] += 1

    def quant_hook(module, args):
        counter.counts["quant_fp8"] += 1

    def linear_enter(module, args):
        counter.counts["gemm"] += 1
        counter.in_linear[0] += 1

    def linear_exit(module, args, out):
        counter.in_linear[0] -= 1

    for module in model.modules():
        if is_rms_norm(module):
            handles.append(module.register_forward_pre_hook(norm_hook))
        elif isinstance(module, StaticFp8Linear):
            handles.append(module.register_forward_pre_hook(quant_hook))
        elif isinstance(module, nn.Linear):
            handles.append(module.register_forward_pre_hook(linear_enter))
            handles.append(module.register_forward_hook(linear_exit))
    patched = _count_rotary_calls(model, counter.counts, counter.rope_depth)
    try:
        with counter, torch.no_grad():
            model(ids)
    finally:
        for h in handles:
            h.remove()
        for mod, name, fn in patched:
            setattr(mod, name, fn)
    return dict(counter.counts)


def _count_rotary_calls(model: nn.Module, counts: Counter[str], depth: list[int]
                        ) -> list[tuple[Any, str, Any]]:
    """Wrap every `apply_rotary*` of the modeling modules the model's classes come from
    so that each outermost call counts one rope (`depth` says when one runs); return what to
    restore."""
    modules = {sys.modules[type(m).__module__] for m in model.modules()}
    patched = []
    for mod in modules:
        for name in dir(mod):
            fn = getattr(mod, name)
            if name.startswith("apply_rotary") and callable(fn):
                patched.append((mod, name, fn))
                setattr(mod, name, _counting(fn, counts, depth))
    return patched


def _counting(fn, counts: Counter[str], depth: list[int]):
    def wrapper(*args, **kwargs):
        if depth[0] == 0:
            counts["rope"] += 1
        depth[0] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            depth[0] -= 1
    return wrapper
