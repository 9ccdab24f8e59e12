"""The `irfuse` torch.compile backend: aot_autograd -> irfuse pipeline -> Inductor (or not).

`torch.compile(model, backend="irfuse", options={...})` (found through the package's
`torch_dynamo_backends` entry point) calls `irfuse_backend` with Dynamo's FX graph. aot_autograd
turns it into a functional ATen graph for inference, with no decomposition table, so the ops the
passes look for stay whole where torch keeps them (silu, SDPA, `_scaled_mm`; `F.rms_norm` is
decomposed by torch itself). Input mutations (KV-cache writes) stay in the graph as `copy_`.
Each graph compiles per group of compile ranges, dispatched by num_tokens (`_GraphCompiler`;
docs/configuration.md, Compile ranges).

Failures: a pipeline failure warns with the reason and where, and the graph runs without irfuse's
rewrites (through Inductor, or as it is); `strict: True` raises instead. A wrong result is never
an option: every rewrite is verified and the fused kernels are tested against references. A
Python float Dynamo lifts to a 0-d tensor input is read as its traced value and checked at each
call (`_lifted_scalars`).
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.backends.registry import _BACKENDS, _COMPILER_FNS, register_backend
from torch._guards import TracingContext, detect_fake_mode, tracing
from torch._inductor.compile_fx import compile_fx

from irfuse import config as config_mod
from irfuse import pipeline, ranges, support_matrix, user_warnings
from irfuse.config import CompilationConfig
from irfuse.dump import DumpWriter
from irfuse.emit import kernel_choice
from irfuse.platform import Platform, detect
from irfuse.remarks import Remark
from irfuse.report import PassRecord, Report

log = logging.getLogger("irfuse")

_GRAPH_IDS = itertools.count()
_REPORTS: list[Report] = []

BoxedFn = Callable[[list[Any]], Any]


def add_report(report: Report) -> None:
    """Keep a report for `reports()` (the backend's, and the vLLM pass's)."""
    _REPORTS.append(report)


def reports() -> list[Report]:
    """The reports of every graph (and range) compiled in this process, oldest first."""
    return list(_REPORTS)


def clear_reports() -> None:
    _REPORTS.clear()


def irfuse_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: dict[str, Any] | CompilationConfig | None = None,
    **kwargs: Any,
) -> Callable[..., Any]:
    """The torch.compile backend. `options` are CompilationConfig fields (see irfuse.config).

    irfuse targets inference: under autograd the forward graph still goes through the pipeline
    and the backward graph goes to Inductor (or runs as it is) untouched."""
    if kwargs:
        raise config_mod.ConfigError(
            f"unknown argument(s) {sorted(kwargs)} to the irfuse backend; pass settings as "
            "torch.compile(..., options={...})"
        )
    config = CompilationConfig.from_options(options)
    graph_name = f"graph_{next(_GRAPH_IDS):03d}"
    dynamo_code = gm.code
    user_inputs = _user_input_indices(gm)
    constants = _lifted_scalars(gm, example_inputs)
    marked = _marked_symbols(gm)

    def fw_compiler(aten_gm: torch.fx.GraphModule, aten_inputs: Sequence[Any]) -> BoxedFn:
        return _GraphCompiler(
            aten_gm, aten_inputs, config, graph_name, dynamo_code, user_inputs, constants, marked
        ).entry()

    def bw_compiler(aten_gm: torch.fx.GraphModule, aten_inputs: Sequence[Any]) -> BoxedFn:
        return _to_inductor(aten_gm, aten_inputs) if config.inductor else _boxed(aten_gm)

    return aot_autograd(
        fw_compiler=fw_compiler,
        bw_compiler=bw_compiler,
        keep_inference_input_mutations=True,
    )(gm, example_inputs)


def _user_input_indices(gm: torch.fx.GraphModule) -> list[int]:
    """Which of Dynamo's graph inputs the caller passed (not parameters or buffers, which
    Dynamo also lifts to inputs); aot_autograd keeps their order."""
    found = []
    for i, node in enumerate(gm.graph.find_nodes(op="placeholder")):
        grapharg = node.meta.get("grapharg")
        if grapharg is not None and _is_user_input(grapharg.source):
            found.append(i)
    return found


def _is_user_input(source: Any) -> bool:
    """A caller's argument, or an item of one (`L['args'][0]` when a torch module is compiled
    directly): an input local reached by indexing only. Anything else on the way (a module, its
    `_parameters`, `_buffers` or tensor attributes) makes it the model's own state."""
    while getattr(source, "base", None) is not None:
        if "GetItem" not in type(source).__name__:
            return False
        source = source.base
    return bool(getattr(source, "is_input", False))


def _lifted_scalars(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> dict[int, float]:
    """Graph inputs that are Python floats Dynamo passes as 0-d tensors, with their traced
    values (aot_autograd keeps the input order). NaN is left alone (no value check holds it).

    Under `dynamic=True` Dynamo passes a Python float the model reads (an RMSNorm's eps, an FP8
    bound) as a 0-d tensor input instead of a constant. The pipeline reads such an input as the
    value it was traced with (`fx_import`), as a static graph would have it, so it raises and
    fuses the same; each call then checks the value (`_GraphCompiler._checked`)."""
    found: dict[int, float] = {}
    for i, node in enumerate(gm.graph.find_nodes(op="placeholder")):
        grapharg = node.meta.get("grapharg")
        if grapharg is None or not getattr(grapharg, "pass_arg_as_tensor", False):
            continue
        example = example_inputs[i] if i < len(example_inputs) else None
        if (
            not isinstance(example, torch.Tensor)
            or isinstance(example, torch._subclasses.FakeTensor)
            or example.dim() != 0
            or not example.is_floating_point()
        ):
            continue
        value = example.item()
        if value == value:
            found[i] = value
    return found


def _marked_symbols(gm: torch.fx.GraphModule) -> frozenset[str]:
    """The symbols of the dims the caller marked dynamic (`torch._dynamo.mark_dynamic`): Dynamo
    refuses a compile that specializes one, so nothing irfuse guards may equate it with a
    number."""
    found: set[str] = set()
    for node in gm.graph.find_nodes(op="placeholder"):
        grapharg = node.meta.get("grapharg")
        val = node.meta.get("example_value")
        if grapharg is None or not isinstance(val, torch.Tensor):
            continue
        try:
            example = grapharg.example
        except Exception:  # noqa: BLE001 (no example kept for this input)
            continue
        for d in getattr(example, "_dynamo_dynamic_indices", ()) or ():
            if d < val.dim() and isinstance(val.shape[d], torch.SymInt):
                found.update(str(s) for s in val.shape[d].node.expr.free_symbols)
    return frozenset(found)


def _boxed(gm: torch.fx.GraphModule) -> BoxedFn:
    forward = gm.forward

    def run(args: list[Any]) -> Any:
        return forward(*args)

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def _to_inductor(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> BoxedFn:
    compiled = compile_fx(gm, list(example_inputs))

    def run(args: list[Any]) -> Any:
        return compiled(*args)

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


@dataclass(frozen=True)
class _TokenLocator:
    """Where num_tokens is in the compiled function's arguments."""

    index: int
    dims: tuple[int, ...] | None  # None: the argument is the SymInt itself
    symbol: str | None  # None: a static graph

    def read(self, args: Sequence[Any]) -> int:
        value = args[self.index]
        if self.dims is None:
            return int(value)
        return math.prod(int(value.shape[d]) for d in self.dims)


def _token_dims(val: torch.Tensor) -> tuple[int, ...]:
    """The dims whose product is a tensor's token rows: all of them for token ids (an integer
    tensor), all but the last (the hidden dim) for an activation."""
    if not val.dtype.is_floating_point or val.dim() == 1:
        return tuple(range(val.dim()))
    return tuple(range(val.dim() - 1))


def _hint(val: torch.Tensor, dims: tuple[int, ...]) -> int:
    return math.prod(
        int(s.node.hint) if isinstance(s, torch.SymInt) else int(s)
        for s in (val.shape[d] for d in dims))


def _locate_num_tokens(
    gm: torch.fx.GraphModule, user_inputs: Sequence[int]
) -> tuple[_TokenLocator, int] | None:
    """The num_tokens locator and its traced value (the size hint). The caller's inputs are
    searched first, then the lifted parameters and buffers. num_tokens is the number of token
    rows (`_token_dims`) of the first input with a symbolic dimension (what `mark_dynamic`
    marked; in a static graph, the first tensor input), so B * S rows count as the passes count
    them; a symbolic dim outside those counts alone."""
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    vals = [p.meta.get("val") for p in placeholders]
    first_tensor: tuple[int, Any] | None = None
    order = [i for i in user_inputs if i < len(vals)]
    order += [i for i in range(len(vals)) if i not in order]
    for i in order:
        val = vals[i]
        if not isinstance(val, torch.Tensor):
            continue
        if first_tensor is None and val.dim() > 0:
            first_tensor = (i, val)
        for d, size in enumerate(val.shape):
            if isinstance(size, torch.SymInt) and size.node.expr.is_symbol:
                symbol = str(size.node.expr)
                dims = _token_dims(val)
                dims = dims if d in dims else (d,)
                if dims == (d,):  # the symbol alone: read the SymInt itself
                    for j, other in enumerate(vals):
                        if isinstance(other, torch.SymInt) and str(other.node.expr) == symbol:
                            return _TokenLocator(j, None, symbol), int(size.node.hint)
                return _TokenLocator(i, dims, symbol), _hint(val, dims)
    if first_tensor is None:
        return None
    i, val = first_tensor
    dims = _token_dims(val)
    return _TokenLocator(i, dims, None), _hint(val, dims)


class _GraphCompiler:
    """Compiles one ATen graph: its compile ranges, lazily, and the dispatch between them.

    The config splits num_tokens into ranges (`irfuse.ranges`); ranges in which the same passes
    run share one compile. Each group compiles at its first call (the group holding the traced
    size compiles at once) and a call is dispatched by its num_tokens (`_locate_num_tokens`);
    with a single group there is no dispatch at all."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        inputs: Sequence[Any],
        config: CompilationConfig,
        graph_name: str,
        dynamo_code: str,
        user_inputs: Sequence[int] = (),
        constants: dict[int, float] | None = None,
        marked: frozenset[str] = frozenset(),
    ):
        self.gm = gm
        self.marked = marked
        self.constants = dict(constants or {})
        self._unrewritten: BoxedFn | None = None
        self.inputs = list(inputs)
        self.graph_name = graph_name
        self.config = config
        self.platform = (
            Platform.parse(config.platform) if config.platform else _detect_platform(inputs)
        )
        self.debug = config.debug or os.environ.get("IRFUSE_DEBUG", "") not in ("", "0")
        dump_root = config.dump_dir or os.environ.get("IRFUSE_DUMP_DIR")
        self.dump = DumpWriter(dump_root, graph_name) if dump_root else None
        if self.dump:
            self.dump.python("dynamo", dynamo_code)
            self.dump.python("aten", gm.code)
        self.locator, self.hint = _locate_num_tokens(gm, user_inputs) or (None, None)
        self.fake_mode = detect_fake_mode(self.inputs)
        self.device = _first_device(inputs)
        self._lock = threading.Lock()
        self._compiled_groups: dict[int, BoxedFn] = {}
        self._prepared: pipeline.Prepared | None = None
        self.off: list[tuple[str, str]] = []
        self._plan()

    # -- planning ---------------------------------------------------------------------------

    def _plan(self) -> None:
        """Resolve the config for this graph and group its ranges by the passes that run."""
        self.resolved = self.config
        self.groups: list[tuple[list[ranges.Range], list[str]]] = []
        self.skipped: list[list[tuple[str, str]]] = []
        try:
            self._prepared = self._prepare(dump=self.dump)
            facts = pipeline.graph_facts(self._prepared.imported.module)
            resolution = config_mod.resolve_explained(
                self.config, platform=self.platform, **facts
            )
            for warning in resolution.warnings:
                warn_once(f"irfuse: {warning}")
            self.resolved = resolution.config
            self.facts = facts
            # The passes the resolved config leaves off, with why: the report says so.
            self.off = [
                (row.name, resolution.notes.get(row.flag, "off"))
                for row in support_matrix.passes()
                if not getattr(self.resolved.pass_config, row.flag)
            ]
        except Exception as err:  # noqa: BLE001
            self._fail("prepare", err)
            self._prepared = None
            self.facts = {}
            return
        platform = str(self.platform)
        groups = ranges.plan_graph(
            self.resolved, self.platform, kernel_choice.split_points(platform),
            lambda n: kernel_choice.size_class(platform, n), facts["hidden_size"],
            facts["tp_size"], facts["itemsize"],
            symbolic=self.locator is not None and self.locator.symbol is not None,
            hint=self.hint,
        )
        self.groups = [(g.ranges, g.passes) for g in groups]
        # Enabled passes that do not run in a group's ranges, and why (for its report).
        self.skipped = [g.skipped for g in groups]

    def _prepare(self, dump: DumpWriter | None) -> pipeline.Prepared:
        return pipeline.prepare(self.gm, self._options(None, (), dump))

    def _options(
        self, rng: tuple[int, int] | None, passes: Sequence[str], dump: DumpWriter | None
    ) -> pipeline.PipelineOptions:
        return pipeline.PipelineOptions(
            platform=str(self.platform),
            range=rng,
            fusion_passes=passes,
            debug=self.debug,
            dump=dump,
            graph_name=self.graph_name,
            config=self.resolved.pass_config.to_dict() if self.resolved else {},
            constants=self.constants,
            tp_size=self.config.tp_size,
            marked_symbols=self.marked,
        )

    # -- compiling --------------------------------------------------------------------------

    def entry(self) -> BoxedFn:
        """The function aot_autograd calls."""
        if not self.groups:
            return self._fallback()
        if len(self.groups) == 1:
            return self._compile_group(0)
        locator = self.locator
        assert locator is not None and self.hint is not None
        # The group of the traced size compiles now; the rest at their first call.
        self._compile_group(self._group_of(self.hint))

        def dispatch(args: list[Any]) -> Any:
            index = self._group_of(locator.read(args))
            fn = self._compiled_groups.get(index)
            if fn is None:
                with self._lock:
                    fn = self._compiled_groups.get(index) or self._compile_group(index, lazy=True)
            return fn(args)

        dispatch._boxed_call = True  # type: ignore[attr-defined]
        return dispatch

    def _group_of(self, num_tokens: int) -> int:
        all_ranges = [r for rngs, _ in self.groups for r in rngs]
        rng = ranges.range_for(num_tokens, all_ranges)
        for i, (rngs, _) in enumerate(self.groups):
            if rng in rngs:
                return i
        return len(self.groups) - 1

    def _compile_group(self, index: int, lazy: bool = False) -> BoxedFn:
        rngs, passes = self.groups[index]
        span = (min(r.lo for r in rngs), max(r.hi for r in rngs))
        dump = None
        if self.dump is not None:
            dump = self.dump if len(self.groups) == 1 else self.dump.fork(_range_folder(span))
        prepared, self._prepared = self._prepared, None
        try:
            if prepared is None:
                prepared = pipeline.prepare(self.gm, self._options(span, passes, None))
            emitted, report = pipeline.finish(prepared, self._options(span, passes, dump))
            for name, reason in self.skipped[index]:
                report.passes.append(PassRecord(name, 0, [Remark(reason, "compile range")], 0.0))
            for name, note in self.off:
                report.passes.append(PassRecord(name, 0, [Remark(f"off: {note}", "config")], 0.0))
        except Exception as err:  # noqa: BLE001
            partial = prepared.report if prepared is not None else None
            report = self._fail("compile", err, span, partial)
            fn = self._backend_compile(self.gm, lazy)
        else:
            fn = self._checked(self._backend_compile(emitted, lazy))
        add_report(report)
        if dump is not None:
            dump.text("report.json", report.to_json())
        self._compiled_groups[index] = fn
        return fn

    def _backend_compile(self, gm: torch.fx.GraphModule, lazy: bool) -> BoxedFn:
        if not self.config.inductor:
            return _boxed(gm)
        if not lazy:
            return _to_inductor(gm, self.inputs)
        # At run time the compiled function runs under aot_autograd's dispatch modes; a fresh
        # thread compiles from a clean state, with the fake inputs of the original trace.
        result: dict[str, Any] = {}

        def work() -> None:
            try:
                if self.device is not None and self.device.type == "cuda":
                    torch.cuda.set_device(self.device)
                with tracing(TracingContext(self.fake_mode)):
                    result["fn"] = _to_inductor(gm, self.inputs)
            except BaseException as err:  # noqa: BLE001 (re-raised in the caller's thread)
                result["error"] = err

        thread = threading.Thread(target=work, name="irfuse-compile")
        thread.start()
        thread.join()
        if "error" in result:
            raise result["error"]
        return result["fn"]

    def _checked(self, fn: BoxedFn) -> BoxedFn:
        """`fn` behind the check that every lifted scalar still has its traced value (the
        rewritten graph read it as that constant; a host read of a CPU scalar each); the
        unrewritten graph runs otherwise, with a warning once."""
        if not self.constants:
            return fn
        checks = tuple(self.constants.items())

        def run(args: list[Any]) -> Any:
            for index, value in checks:
                if args[index].item() != value:
                    return self._run_unrewritten(index, value, args)
            return fn(args)

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    def _run_unrewritten(self, index: int, traced: float, args: list[Any]) -> Any:
        if self._unrewritten is None:
            with self._lock:
                if self._unrewritten is None:
                    warn_once(
                        f"irfuse: {self.graph_name}: the scalar input {index} is "
                        f"{args[index].item()!r}, traced as {traced!r}; running the graph "
                        "without irfuse's rewrites while it differs"
                    )
                    self._unrewritten = self._backend_compile(self.gm, lazy=True)
        return self._unrewritten(args)

    def _fallback(self) -> BoxedFn:
        fn = self._backend_compile(self.gm, lazy=False)
        self._compiled_groups[0] = fn
        return fn

    def _fail(
        self,
        stage: str,
        err: Exception,
        span: tuple[int, int] | None = None,
        partial: Report | None = None,
    ) -> Report:
        """Warn (or raise, when strict) that irfuse leaves this graph alone; the report keeps
        what the stages that ran found, and the error."""
        where = f"{self.graph_name}" + (f" range {_span_list(span)}" if span else "")
        named = isinstance(err, (pipeline.PipelineError, config_mod.ConfigError))
        reason = str(err) if named else f"{stage}: {err!r}"
        if self.config.strict:
            raise RuntimeError(f"irfuse failed on {where}: {reason}") from err
        user_warnings.warn(
            f"irfuse: {where}: {reason}; running this graph without irfuse's rewrites")
        log.debug("irfuse pipeline failure", exc_info=err)
        report = partial or Report(
            graph=self.graph_name,
            range=_span_list(span),
            platform=str(self.platform),
            config=self.config.pass_config.to_dict(),
        )
        report.error = reason
        if span is None:
            add_report(report)
        return report


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """A config warning once per process, not once per graph and range, attributed to the
    user's code (`user_warnings`)."""
    if message not in _WARNED:
        _WARNED.add(message)
        user_warnings.warn(message)


def _span_list(span: tuple[int, int] | None) -> list[int | None] | None:
    if span is None:
        return None
    return ranges.Range(*span).as_list()


def _range_folder(span: tuple[int, int]) -> str:
    hi = "inf" if span[1] == ranges.UNBOUNDED else str(span[1])
    return f"range-{span[0]}-{hi}"


def _first_device(inputs: Sequence[Any]) -> torch.device | None:
    for value in inputs:
        if isinstance(value, torch.Tensor):
            return value.device
    return None


def _detect_platform(inputs: Sequence[Any]) -> Platform:
    device = _first_device(inputs)
    return detect(device) if device is not None else Platform("cpu")


def _register() -> None:
    """Make `import irfuse.backend` enough where the package is not installed (the entry point
    `torch_dynamo_backends: irfuse` covers installed copies)."""
    # An installed copy is found through its entry point (torch registers it after loading
    # this module); registering here too would be a duplicate.
    if "irfuse" not in _COMPILER_FNS and _BACKENDS.get("irfuse") is None:
        register_backend(compiler_fn=irfuse_backend, name="irfuse")


_register()
