"""Starts real vLLM engines (CPU build) one after another and writes what each did as JSON.

    python tests/in_vllm/engines.py OUT.json RUN [RUN ...]

A RUN is one of `RUNS`: a tiny model written here (Llama or Qwen3: 2 layers, hidden 128, random
weights from a fixed seed, large enough that the greedy tokens depend on every layer) and either vLLM's own compile (`None`) or irfuse's
post-grad pass with those irfuse options (`$IRFUSE_VLLM_OPTIONS`). Each run dumps into
`OUT/../dumps/RUN` and records the greedy tokens of two prompts and its wall time. One process
starts every engine in turn (vLLM spawns each engine's core), so Python's and vLLM's imports
are paid once (vLLM forks its engine processes from this one: `VLLM_WORKER_MULTIPROC_METHOD`
is `fork` unless set), and the Inductor cache (`$TORCHINDUCTOR_CACHE_DIR`) is shared, so a run repeated
with the same config is a warm restart.
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
    "llama": {**COMMON, "architectures": ["LlamaForCausalLM"], "model_type": "llama"},
    "qwen3": {**COMMON, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"},
}
QK_NORM_ROPE = {"pass_config": {"enable_qk_norm_rope_fusion": True}}
# Llama runs with vLLM's custom ops on (its `_C` kernels in the graph where the CPU build has
# them: RoPE), Qwen3 with them off (vLLM's native torch code, its CPU default).
CUSTOM_OPS = {"custom_ops": ["all"]}
RUNS: dict[str, tuple[str, dict | None, dict]] = {
    "llama-vllm": ("llama", None, CUSTOM_OPS),
    "llama-irfuse": ("llama", {}, CUSTOM_OPS),
    "qwen3-vllm": ("qwen3", None, {}),
    "qwen3-irfuse": ("qwen3", QK_NORM_ROPE, {}),
    "qwen3-irfuse-warm": ("qwen3", QK_NORM_ROPE, {}),
    "qwen3-irfuse-debug": ("qwen3", {**QK_NORM_ROPE, "debug": True}, {}),
}
IRFUSE_PASS = {"post_grad_custom_post_pass": "irfuse.vllm_pass"}


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
    return path


def run(model_dir: pathlib.Path, options: dict | None, dump: pathlib.Path,
        vllm_compilation: dict) -> dict:
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
              gpu_memory_utilization=0.1, kv_cache_memory_bytes=32 << 20)
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, detokenize=False)
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in PROMPTS], params)
    tokens = [list(o.outputs[0].token_ids) for o in outs]
    seconds = time.perf_counter() - start
    del llm
    gc.collect()
    return {"tokens": tokens, "seconds": round(seconds, 1), "dump": str(dump)}


def main(argv: list[str]) -> None:
    out = pathlib.Path(argv[0])
    results: dict[str, dict] = {}
    for name in argv[1:]:
        model, options, vllm_compilation = RUNS[name]
        model_dir = write_model(out.parent / "models", model)
        results[name] = run(model_dir, options, out.parent / "dumps" / name, vllm_compilation)
        out.write_text(json.dumps(results, indent=2))
        print(f"engines.py: {name}: {results[name]}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    # vLLM 0.32's CPU loader of AOT-compiled artifacts is broken; Inductor's cache still serves
    # a warm restart.
    os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "fork")
    # Imported here once, so that every forked engine process has them.
    import torch._inductor.compile_fx  # noqa: F401
    import vllm.model_executor.models.llama  # noqa: F401
    import vllm.model_executor.models.qwen3  # noqa: F401

    import irfuse.vllm_plugin  # noqa: F401

    main(sys.argv[1:])
