"""Small Hugging Face decoders built from configs (random weights, offline), and an FP8 linear
written here, outside irfuse, as a user of irfuse would write one: static per-tensor activation
scale, e4m3fn weights, `torch._scaled_mm`."""

from __future__ import annotations

import torch
from torch import nn

HF_KW = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)

FAMILIES = ("llama", "qwen3", "mistral", "gemma")


class Logits(nn.Module):
    """The causal LM as a function of token ids to logits (no KV cache object)."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=ids, use_cache=False).logits


def build_hf(family: str, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> nn.Module:
    import transformers as tf

    classes = {
        "llama": (tf.LlamaConfig, tf.LlamaForCausalLM, {}),
        "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM, {"head_dim": 16}),
        "mistral": (tf.MistralConfig, tf.MistralForCausalLM, {}),
        "gemma": (tf.GemmaConfig, tf.GemmaForCausalLM, {"head_dim": 16}),
        # Beyond FAMILIES (the decoders every raising test runs): the attention family's corpus.
        "qwen3_moe": (tf.Qwen3MoeConfig, tf.Qwen3MoeForCausalLM, {
            "head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2,
            "moe_intermediate_size": 32, "decoder_sparse_step": 1}),
        "olmo2": (tf.Olmo2Config, tf.Olmo2ForCausalLM, {}),
        "deepseek_v2": (tf.DeepseekV2Config, tf.DeepseekV2ForCausalLM, {
            "kv_lora_rank": 32, "q_lora_rank": None, "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8, "v_head_dim": 16, "n_routed_experts": 4,
            "first_k_dense_replace": 2, "num_key_value_heads": 4}),
    }
    config_cls, model_cls, extra = classes[family]
    config = config_cls(**{**HF_KW, **extra})
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    return Logits(model_cls(config).eval().to(dtype))


class StaticFp8Linear(nn.Module):
    """y = _scaled_mm(fp8(x / s_x), w_fp8^T) * s_x * s_w, computed in the input dtype."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        weight = linear.weight.detach().float()
        w_scale = weight.abs().max().clamp(min=1e-12) / 448.0
        self.register_buffer("weight", (weight / w_scale).to(torch.float8_e4m3fn))
        self.register_buffer("weight_scale", w_scale.reshape(()))
        self.register_buffer("input_scale", torch.tensor(0.05))
        self.out_dtype = linear.weight.dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        q = (x2.float() / self.input_scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        y = torch._scaled_mm(
            q, self.weight.t(), scale_a=self.input_scale, scale_b=self.weight_scale,
            out_dtype=self.out_dtype,
        )
        return y.reshape(*shape[:-1], y.shape[-1])


def quantize_linears(model: nn.Module) -> int:
    """Replace every nn.Linear in the decoder layers by a StaticFp8Linear; return how many."""
    count = 0
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and "layers" in name:
                setattr(module, child_name, StaticFp8Linear(child))
                count += 1
    return count


def input_ids(num_tokens: int = 12, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, HF_KW["vocab_size"], (1, num_tokens), generator=g)
