"""Starts real vLLM engines (CPU build) at TP 2 one after another and writes what each did as JSON.

    python tests/in_vllm/tp_engine.py OUT.json RUN [RUN ...]

The model is engines.py's tiny Llama (2 layers, hidden 128, seeded weights). vLLM's CPU engine at
TP 2 starts on this 2-core machine once each worker is bound to one core
(`VLLM_CPU_OMP_THREADS_BIND=0|1`; without it vLLM asserts "Not enough allowed NUMA nodes to bind
threads of 2 local CPUWorkers"). Its TP all-reduce is its CPU communicator's shared-memory
`_C.shm_allreduce` (on group `tp:0`), its GEMMs oneDNN's `_C.onednn_mm` (opaque to irfuse: no
async TP there); vLLM's AVX2 build has neither, and spells them torch's functional all-reduce on
the group's device group and `aten.mm`. A RUN is vLLM's own compile or irfuse's post-grad pass
with one collective fusion (`RUNS`); each dumps into `OUT/../dumps/RUN` and records the greedy
tokens of two prompts with the top 5 logprobs of each step.
"""

from __future__ import annotations

import gc
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from engines import MAX_TOKENS, PROMPTS, install_model_plugin, write_model  # noqa: E402

RUNS: dict[str, dict | None] = {
    "vllm": None,
    "irfuse-ar": {"pass_config": {"fuse_allreduce_rms": True}},
    "irfuse-sp": {"pass_config": {"enable_sp": True, "sp_min_token_num": 1}},
}
IRFUSE_PASS = {"post_grad_custom_post_pass": "irfuse.vllm_pass"}
TOP_LOGPROBS = 5


def run(model_dir: pathlib.Path, options: dict | None, dump: pathlib.Path) -> dict:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    os.environ["IRFUSE_DUMP_DIR"] = str(dump)
    os.environ["IRFUSE_VLLM_OPTIONS"] = json.dumps({**(options or {}), "strict": True})
    compilation = {} if options is None else {"inductor_passes": IRFUSE_PASS}
    start = time.perf_counter()
    llm = LLM(model=str(model_dir), skip_tokenizer_init=True, dtype="bfloat16",
              max_model_len=128, max_num_batched_tokens=128, max_num_seqs=4, seed=0,
              tensor_parallel_size=2, distributed_executor_backend="mp",
              compilation_config=compilation, gpu_memory_utilization=0.1,
              kv_cache_memory_bytes=32 << 20)
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, detokenize=False,
                            logprobs=TOP_LOGPROBS)
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in PROMPTS], params)
    tokens = [list(o.outputs[0].token_ids) for o in outs]
    # Per prompt and step, the top tokens' logprobs (token id as a JSON key).
    logprobs = [[{str(t): lp.logprob for t, lp in step.items()} for step in o.outputs[0].logprobs]
                for o in outs]
    seconds = time.perf_counter() - start
    del llm
    gc.collect()
    return {"tokens": tokens, "logprobs": logprobs, "seconds": round(seconds, 1),
            "dump": str(dump)}


def main(argv: list[str]) -> None:
    out = pathlib.Path(argv[0])
    install_model_plugin(out.parent)  # the engine's and workers' processes know the test model
    results: dict[str, dict] = {}
    model_dir = write_model(out.parent / "models", "llama")
    for name in argv[1:]:
        try:
            results[name] = run(model_dir, RUNS[name], out.parent / "dumps" / name)
        except Exception as err:  # noqa: BLE001 (recorded: the test shows why it did not start)
            results[name] = {"error": f"{type(err).__name__}: {err}"}
        out.write_text(json.dumps(results, indent=2))
        print(f"tp_engine.py: {name}: {results[name]}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0|1")
    import irfuse.vllm_plugin  # noqa: F401

    main(sys.argv[1:])
