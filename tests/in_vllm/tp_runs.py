"""irfuse's collective fusions under vLLM's own parallel state, on 2 gloo ranks, on the CPU.

    python tests/in_vllm/tp_runs.py OUT_DIR

Each rank calls vLLM's `init_distributed_environment` (gloo) and `initialize_model_parallel(2)`,
so the TP group is vLLM's `GroupCoordinator` `tp:0` in `parallel_state._groups`, whose device
group torch knows under another name; the coordinator calls vLLM's `torch.ops.vllm.*` collective
ops (`use_custom_op_call`, as on CUDA; vLLM's CPU platform calls its communicator directly) and
vLLM's norms are torch code or its `_C` kernels (`ir_enable_torch_wrap` off, as vLLM's CPU
worker sets it).

Models (written here, each in the shape of a vLLM compile test; `MODELS`):
- `ar_norm`: vLLM's all-reduce + RMSNorm test model (tests/compile/distributed/
  test_fusion_all_reduce.py and test_sequence_parallelism.py): relu, all-reduce, RMSNorm, then
  three times a GEMM, an all-reduce and RMSNorm with the residual; vLLM asserts 4 matches for
  the AR + RMSNorm pass and for sequence parallelism. `ar_norm_custom`: the same with vLLM's
  `_C.rms_norm` / `_C.fused_add_rms_norm` (`+rms_norm`). `ar_norm_fp8`: each norm but the last
  feeds a static FP8 quant and a scaled GEMM (vLLM's StaticQuantFP8 variant, 4 matches).
- `mm_rs`, `ag_mm`, `scaled_mm_rs`, `ag_scaled_mm`: vLLM's async-TP test models
  (test_async_tp.py: a GEMM into vLLM's reduce-scatter, vLLM's all-gather into a GEMM, and their
  FP8 forms with row-wise scale_a `ones(M, 1)` and scale_b `ones(1, N)`; 1 match each).
- `cutlass_mm_rs`, `ag_cutlass_mm`: the same with vLLM's CUDA FP8 GEMM, `_C.cutlass_scaled_mm`
  (test_async_tp.py's CUTLASS models; `vllm_ops.py`'s stand-in, which vLLM's CPU build lacks),
  with the scale layouts of vLLM's FP8 linears: a per-tensor activation scale beside a
  channel-wise weight scale `[N, 1]`, a per-token one beside a per-tensor one.
- `decoder`: vLLM's decoder layer pieces: VocabParallelEmbedding (its all-reduce), RMSNorm,
  ColumnParallelLinear (an elementwise stand-in for attention), RowParallelLinear (all-reduce),
  MergedColumnParallelLinear + SiluAndMul + RowParallelLinear, 2 layers and a final norm: 5
  all-reduces, each before a norm (2n + 1, vLLM's end-to-end count for AR + RMSNorm and SP), 8
  GEMMs beside a collective after SP (4n, its async-TP count).

Each (model, config, shape mode) of `CASES` compiles with irfuse's backend (Inductor off, except
`INDUCTOR_CASES`), runs, and records per compile the pass counts of its report, the ops of its
input and emitted graphs (`OPS`; static and dynamic modes, from their dumps), and how far its
outputs are from the unfused graph's (the same model compiled with irfuse and no fusion pass,
dynamic). Shape modes: `static` (128 tokens),
`dynamic` (num_tokens symbolic: 128 and 37 tokens, one compile over [1, 8192]), `ranges`
(symbolic, and the pass's threshold at 64 tokens, `RANGED`: 37 tokens compile the range below,
128 the range above, as vLLM's compile ranges split its graphs); 38 for 37 where the model's own
reduce-scatter needs a count TP divides. A case that raises records the error.
Rank r writes `OUT_DIR/rank{r}.json`.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time
import traceback

import torch

WORLD = 2
HIDDEN = 16
TOKENS = {"static": [128], "dynamic": [128, 37], "ranges": [37, 128]}
SCATTERING = ("mm_rs", "scaled_mm_rs", "cutlass_mm_rs")
"""Models whose own reduce-scatter needs a token count TP divides: 38 tokens, not 37."""


def _tokens(model: str, mode: str) -> list[int]:
    return [38 if t == 37 and model in SCATTERING else t for t in TOKENS[mode]]


FP8 = torch.float8_e4m3fn
BF16 = torch.bfloat16

BASE = {"eliminate_noops": True}
CONFIGS = {
    "unfused": {},
    "ar": {"fuse_allreduce_rms": True},
    "sp": {"enable_sp": True, "sp_min_token_num": 1},
    "sp_quant": {"enable_sp": True, "sp_min_token_num": 1, "fuse_norm_quant": True},
    "async_tp": {"fuse_gemm_comms": True, "sp_min_token_num": 1},
}
MODES = ("static", "dynamic", "ranges")
SPLIT = 64
RANGED = {
    # vLLM's range rules, as its end-to-end tests see them: AR + RMSNorm below the FlashInfer
    # size cap (here 64 tokens of 16 bf16), SP and async TP from sp_min_token_num (here 64).
    "ar": {"fi_allreduce_fusion_max_size_mb": SPLIT * HIDDEN * 2 / 2**20},
    "sp": {"sp_min_token_num": SPLIT},
    "sp_quant": {"sp_min_token_num": SPLIT},
    "async_tp": {"sp_min_token_num": SPLIT},
}
"""Pass config for the `ranges` mode: the threshold that splits the dynamic graph in two
compiles ([1, 64] and [65, 8192] for AR; [1, 63] and [64, 8192] for SP and async TP)."""
CASES = [
    *((m, c, mode) for m in ("ar_norm", "ar_norm_fp8") for c in ("ar", "sp") for mode in MODES),
    ("ar_norm_fp8", "sp_quant", "dynamic"),
    *(("ar_norm_custom", c, "dynamic") for c in ("ar", "sp")),
    *((m, "async_tp", mode) for m in ("mm_rs", "ag_mm", "scaled_mm_rs", "ag_scaled_mm",
                                      "cutlass_mm_rs", "ag_cutlass_mm")
      for mode in ("static", "dynamic")),
    *((m, "async_tp", "ranges") for m in ("mm_rs", "ag_scaled_mm")),
    *(("decoder", c, mode) for c in ("ar", "sp", "async_tp") for mode in MODES),
]
INDUCTOR_CASES = [("decoder", "async_tp", "inductor")]
"""Compiled with Inductor (dynamic), as a real run would: the emitted graph (pads and slices on
a symbolic count, vLLM's collectives, irfuse's async-TP ops) compiles there."""
DUMPED = {"static", "dynamic"}
"""Modes whose compiles dump their graphs (the op counts before and after); dumping prints the
IR after every pass, so the others do not."""
OPS = {
    "vllm.all_reduce": "torch.ops.vllm.all_reduce.default",
    "vllm.reduce_scatter": "torch.ops.vllm.reduce_scatter.default",
    "vllm.all_gather": "torch.ops.vllm.all_gather.default",
    "c10d": "torch.ops._c10d_functional.",
    "irfuse.all_reduce_rms_norm": "torch.ops.irfuse.all_reduce_rms_norm",
    "irfuse.gemm_reduce_scatter": "torch.ops.irfuse.gemm_reduce_scatter.default",
    "irfuse.all_gather_gemm": "torch.ops.irfuse.all_gather_gemm.default",
    "constant_pad_nd": "torch.ops.aten.constant_pad_nd.default",
}


# --- models ---------------------------------------------------------------------------------------


def _models() -> dict:
    """The models, built under the current VllmConfig (vLLM's layers read it)."""
    from torch import nn
    from vllm.distributed import (
        tensor_model_parallel_all_gather,
        tensor_model_parallel_all_reduce,
        tensor_model_parallel_reduce_scatter,
    )
    from vllm.model_executor.layers.activation import SiluAndMul
    from vllm.model_executor.layers.layernorm import RMSNorm
    from vllm.model_executor.layers.linear import (
        ColumnParallelLinear,
        MergedColumnParallelLinear,
        RowParallelLinear,
    )
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

    # The same values on every rank: replicated weights (the norms) must be, and a shard of a
    # model whose shards are equal is still a TP model.
    g = torch.Generator().manual_seed(1234)

    def rand(*shape, dtype=BF16):
        return (torch.rand(*shape, generator=g) - 0.5).to(dtype)

    def quant(y: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """Static per-tensor FP8, vLLM's native spelling (divide, saturate)."""
        return (y.float() / scale).clamp(-448.0, 448.0).to(FP8)

    class ARNorm(nn.Module):
        def __init__(self, fp8: bool = False):
            super().__init__()
            self.fp8 = fp8
            self.norm = nn.ModuleList([RMSNorm(HIDDEN, 1e-6) for _ in range(4)])
            if fp8:
                self.w = [rand(HIDDEN, HIDDEN).to(FP8).t() for _ in range(3)]
                self.scale = [torch.tensor([0.01 * (i + 1)]) for i in range(3)]
                self.wscale = [torch.tensor([0.5]) for _ in range(3)]
            else:
                self.w = [rand(HIDDEN, HIDDEN) for _ in range(3)]

        def linear(self, y: torch.Tensor, i: int) -> torch.Tensor:
            if not self.fp8:
                return torch.mm(y, self.w[i])
            return torch._scaled_mm(quant(y, self.scale[i]), self.w[i], scale_a=self.scale[i],
                                    scale_b=self.wscale[i], out_dtype=BF16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = resid = tensor_model_parallel_all_reduce(torch.relu(x))
            y = self.norm[0](x)
            for i in range(3):
                x = tensor_model_parallel_all_reduce(self.linear(y, i))
                y, resid = self.norm[i + 1](x, resid)
            return y

    class MMRS(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = rand(HIDDEN * 2, HIDDEN)

        def forward(self, x):
            return tensor_model_parallel_reduce_scatter(torch.mm(x, self.w.permute(1, 0)), dim=0)

    class AGMM(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = rand(HIDDEN, HIDDEN)

        def forward(self, x):
            return torch.mm(tensor_model_parallel_all_gather(x, dim=0), self.w.permute(1, 0))

    class ScaledMMRS(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = rand(HIDDEN, HIDDEN).to(FP8).t()
            self.scale_b = torch.ones(1, HIDDEN)

        def forward(self, x):
            scale_a = torch.ones(x.shape[0], 1)
            c = torch._scaled_mm(x.to(FP8), self.w, scale_a=scale_a, scale_b=self.scale_b,
                                 out_dtype=BF16)
            return tensor_model_parallel_reduce_scatter(c, dim=0)

    class AGScaledMM(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = rand(HIDDEN, HIDDEN).to(FP8).t()
            self.scale_b = torch.ones(1, HIDDEN)

        def forward(self, x):
            # FP8 moves as bytes: gloo has no float8 (vLLM's CPU communicator gathers with it).
            gathered = tensor_model_parallel_all_gather(x.to(FP8).view(torch.uint8), dim=0)
            a = gathered.view(FP8)
            scale_a = torch.ones(a.shape[0], 1)
            return torch._scaled_mm(a, self.w, scale_a=scale_a, scale_b=self.scale_b,
                                    out_dtype=BF16)

    class CutlassMMRS(nn.Module):
        """test_async_tp.py's CUTLASS form, with vLLM's FP8 linear scales: per tensor for the
        activation, per output channel `[N, 1]` for the weight."""

        def __init__(self):
            super().__init__()
            self.w = rand(HIDDEN, HIDDEN).to(FP8).t()
            self.scale_b = torch.linspace(0.5, 1.0, HIDDEN).reshape(HIDDEN, 1)

        def forward(self, x):
            out = torch.empty(x.shape[0], HIDDEN, dtype=BF16)
            torch.ops._C.cutlass_scaled_mm(out, x.to(FP8), self.w, torch.ones(1), self.scale_b,
                                           None)
            return tensor_model_parallel_reduce_scatter(out, dim=0)

    class AGCutlassMM(nn.Module):
        """All-gather into the CUTLASS GEMM: the gathered rows' per-token scales beside a
        per-tensor weight scale."""

        def __init__(self):
            super().__init__()
            self.w = rand(HIDDEN, HIDDEN).to(FP8).t()
            self.scale_b = torch.tensor([0.5])

        def forward(self, x):
            # FP8 moves as bytes, as in AGScaledMM.
            gathered = tensor_model_parallel_all_gather(x.to(FP8).view(torch.uint8), dim=0)
            a = gathered.view(FP8)
            out = torch.empty(a.shape[0], HIDDEN, dtype=BF16)
            torch.ops._C.cutlass_scaled_mm(out, a, self.w, torch.full((a.shape[0], 1), 0.75),
                                           self.scale_b, None)
            return out

    class Layer(nn.Module):
        def __init__(self, i: int):
            super().__init__()
            self.input_layernorm = RMSNorm(HIDDEN, 1e-6)
            self.qkv = ColumnParallelLinear(HIDDEN, 2 * HIDDEN, bias=False,
                                            prefix=f"layers.{i}.qkv")
            self.o_proj = RowParallelLinear(2 * HIDDEN, HIDDEN, bias=False,
                                            prefix=f"layers.{i}.o_proj")
            self.post_attention_layernorm = RMSNorm(HIDDEN, 1e-6)
            self.gate_up = MergedColumnParallelLinear(HIDDEN, [2 * HIDDEN] * 2, bias=False,
                                                      prefix=f"layers.{i}.gate_up")
            self.act = SiluAndMul()
            self.down = RowParallelLinear(2 * HIDDEN, HIDDEN, bias=False,
                                          prefix=f"layers.{i}.down")

        def forward(self, h, residual):
            if residual is None:
                residual = h
                h = self.input_layernorm(h)
            else:
                h, residual = self.input_layernorm(h, residual)
            a, _ = self.qkv(h)
            h, _ = self.o_proj(torch.tanh(a))  # stand-in for attention: per token
            h, residual = self.post_attention_layernorm(h, residual)
            g, _ = self.gate_up(h)
            h, _ = self.down(self.act(g))
            return h, residual

    class Decoder(nn.Module):
        def __init__(self, layers: int = 2, vocab: int = 128):
            super().__init__()
            self.embed = VocabParallelEmbedding(vocab, HIDDEN, prefix="embed")
            self.layers = nn.ModuleList([Layer(i) for i in range(layers)])
            self.norm = RMSNorm(HIDDEN, 1e-6)

        def forward(self, ids):
            h, residual = self.embed(ids), None
            for layer in self.layers:
                h, residual = layer(h, residual)
            h, _ = self.norm(h, residual)
            return h

    def init(model: nn.Module) -> nn.Module:
        model = model.to(BF16)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(rand(*p.shape, dtype=p.dtype))
        for module in model.modules():
            method = getattr(module, "quant_method", None)
            if method is not None:
                # vLLM's CPU build would pack the weight for its oneDNN GEMM (an opaque op);
                # F.linear, as on CUDA.
                module._cpu_skip_gemm_dispatch = True
                method.process_weights_after_loading(module)
        return model

    return {"ar_norm": init(ARNorm()), "ar_norm_fp8": init(ARNorm(fp8=True)),
            "mm_rs": MMRS(), "ag_mm": AGMM(), "scaled_mm_rs": ScaledMMRS(),
            "ag_scaled_mm": AGScaledMM(), "decoder": init(Decoder()),
            "cutlass_mm_rs": CutlassMMRS(), "ag_cutlass_mm": AGCutlassMM()}
    # (in this order: the models draw their weights from one generator, and the CUTLASS ones,
    # last, leave the others' weights independent of them)


def _inputs(model: str, tokens: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(tokens)
    if model == "decoder":
        return torch.randint(0, 128, (tokens,), generator=g)
    return (torch.randn(tokens, HIDDEN, generator=g) / 2).to(BF16)


# --- running --------------------------------------------------------------------------------------


def _count_ops(text: str) -> dict[str, int]:
    return {k: text.count(v) for k, v in OPS.items() if text.count(v)}


def _compile_run(model, name: str, config: str, mode: str, dump: pathlib.Path,
                 inductor: bool = False) -> dict:
    from irfuse import backend

    torch._dynamo.reset()
    backend.clear_reports()
    pass_config = {**BASE, **CONFIGS[config], **(RANGED[config] if mode == "ranges" else {})}
    options = {"inductor": inductor, "strict": True, "optimization_level": 0,
               "pass_config": pass_config}
    if mode in DUMPED and not inductor and config != "unfused":
        options["dump_dir"] = str(dump)
    compiled = torch.compile(model, backend="irfuse", options=options)
    outputs = []
    with torch.no_grad():
        for tokens in _tokens(name, mode):
            x = _inputs(name, tokens)
            if mode != "static":
                torch._dynamo.mark_dynamic(x, 0)
            outputs.append(compiled(x))
    compiles = []
    for report in backend.reports():
        compiles.append({
            "range": report.range,
            "error": report.error,
            "fused": {p.name: p.count for p in report.passes if p.count},
            "missed": sorted({m.reason for p in report.passes for m in p.missed
                              if "O0" not in m.reason and p.name != "cse-pure"}),
        })
    run: dict = {"compiles": compiles, "outputs": outputs}
    if "dump_dir" in options:
        before = "".join(p.read_text() for p in sorted(dump.rglob("*-aten.py")))
        after = "".join(p.read_text() for p in sorted(dump.rglob("*-emitted.py")))
        run.update(ops_before=_count_ops(before), ops_after=_count_ops(after))
    return run


def worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    from vllm.config import CompilationConfig, VllmConfig, set_current_vllm_config
    from vllm.distributed.parallel_state import (
        get_tp_group,
        init_distributed_environment,
        initialize_model_parallel,
    )

    import irfuse.backend  # noqa: F401  (the "irfuse" torch.compile backend)

    results: dict = {"cases": {}}
    start = time.perf_counter()
    configs = {
        "native": VllmConfig(compilation_config=CompilationConfig(custom_ops=["none"])),
        "custom": VllmConfig(compilation_config=CompilationConfig(
            custom_ops=["none", "+rms_norm"])),
    }
    with set_current_vllm_config(configs["native"]):
        init_distributed_environment(world_size=world, rank=rank,
                                     distributed_init_method=f"file://{init_file}",
                                     local_rank=rank, backend="gloo")
        initialize_model_parallel(tensor_model_parallel_size=world)
        tp = get_tp_group()
        # Stand-ins of vLLM's CUDA-only ops (cutlass_scaled_mm). Imported after the group is
        # made: the import loads vLLM's `_C`, whose presence would give the communicator vLLM's
        # shared-memory collectives, which gather no uint8 (the FP8 rows gathered as bytes).
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
        import vllm_ops  # noqa: F401
        # vLLM's layers call torch.ops.vllm.* as on CUDA; norms are torch code or _C kernels,
        # as in vLLM's CPU worker (which turns vLLM IR's torch wrapping off).
        tp.use_custom_op_call = True
        # vLLM's collective ops promise a new tensor ("always ... out-of-place", its
        # GroupCoordinator.all_reduce), which CUDA's communicator keeps; the CPU one reduces in
        # place and returns its input, which AOTAutograd's custom-op aliasing check refuses
        # (an error where CI is set). Out of place here, as on CUDA.
        in_place = tp.device_communicator.all_reduce
        tp.device_communicator.all_reduce = lambda x: in_place(x.clone())
        import vllm.ir

        vllm.ir.set_default_torch_wrap(False)
        results["group"] = {"unique_name": tp.unique_name,
                            "device_group": tp.device_group.group_name}
        models = _models()
    with set_current_vllm_config(configs["custom"]):
        from vllm.model_executor.layers.layernorm import RMSNorm

        custom = _models()["ar_norm"]
        assert all(n.enabled() for n in custom.modules() if isinstance(n, RMSNorm))
        models["ar_norm_custom"] = custom
    results["setup_s"] = round(time.perf_counter() - start, 1)

    root = pathlib.Path(out_dir) / f"dumps-rank{rank}"
    unfused: dict[str, list] = {}
    with set_current_vllm_config(configs["native"]):
        for name, model in models.items():
            run = _compile_run(model, name, "unfused", "dynamic", root / f"{name}-unfused")
            unfused[name] = run["outputs"]
        for name, config, case_mode in CASES + INDUCTOR_CASES:
            inductor = case_mode == "inductor"
            mode = "dynamic" if inductor else case_mode
            key = f"{name}/{config}/{case_mode}"
            t0 = time.perf_counter()
            try:
                run = _compile_run(models[name], name, config, mode,
                                   root / key.replace("/", "-"), inductor)
                want = dict(zip(_tokens(name, "dynamic"), unfused[name], strict=True))
                outputs = run.pop("outputs")
                run["max_diff"] = max(
                    (o.float() - want[t].float()).abs().max().item()
                    for t, o in zip(_tokens(name, mode), outputs, strict=True))
                # vLLM's bf16 tolerance for fused against unfused (atol = rtol = 1e-2)
                run["within_vllm_tol"] = all(
                    bool(((o.float() - want[t].float()).abs()
                          <= 1e-2 + 1e-2 * want[t].float().abs()).all())
                    for t, o in zip(_tokens(name, mode), outputs, strict=True))
            except Exception as err:  # noqa: BLE001 (recorded; the test says which case)
                run = {"error": f"{type(err).__name__}: {err}",
                       "traceback": traceback.format_exc()[-3000:]}
            run["seconds"] = round(time.perf_counter() - t0, 1)
            results["cases"][key] = run
            print(f"tp_runs rank {rank}: {key}: {run.get('error') or run['compiles']}",
                  file=sys.stderr, flush=True)
    results["total_s"] = round(time.perf_counter() - start, 1)
    (pathlib.Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(results, indent=1))


def main(out_dir: str) -> None:
    import torch.multiprocessing as mp

    os.makedirs(out_dir, exist_ok=True)
    # vLLM's CPU communicator names its shared-memory group from this (vLLM's CPU worker sets
    # it): the same on both ranks.
    os.environ.setdefault("VLLM_DIST_IDENT", f"irfuse-tp-{os.getpid()}")
    init_file = os.path.join(out_dir, "init")
    if os.path.exists(init_file):
        os.remove(init_file)
    mp.spawn(worker, args=(WORLD, init_file, out_dir), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main(sys.argv[1])
