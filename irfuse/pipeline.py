"""The irfuse pipeline on one ATen graph: import -> raise -> fuse -> select kernels -> emit.

Each stage is timed and counted; with a dump writer each stage and pass writes its file; every
pass records what it fused and why the rest did not (`irfuse.remarks`) into the report. The IR
is verified after every pass in debug runs (`debug` option, `IRFUSE_DEBUG=1`, the test suite) and
once before emit otherwise; nothing is printed or parsed on the compile path unless a dump was
asked for. Before kernels are selected, every process group a collective names must be one this
process can resolve (`irfuse.groups`): an unknown group is one error at compile time.

The platform is a module attribute (`irfuse.platform`), so that a pass's behaviour depends on
the IR alone and `irfuse-opt` reproduces any dumped step. The compile range decides which passes
run (the backend's plan), not what a pass does, so it is in the report and the dump folder's
name rather than in the IR.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch.fx
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.utils.exceptions import DiagnosticException

from irfuse import dtypes, groups, passes, remarks
from irfuse.context import make_context
from irfuse.dialects import aten, kernel
from irfuse.dialects.irfuse import TensorType, set_target
from irfuse.dump import DumpWriter
from irfuse.emit import kernel_choice
from irfuse.emit.fx_emit import emit_graph
from irfuse.ir import call_syntax
from irfuse.raising.fx_import import ImportedGraph, import_graph
from irfuse.raising.match import walk_ops
from irfuse.raising.raise_collectives import TP_SIZE_ATTR
from irfuse.raising.raise_quant import quant_op_scheme, support_matrix_scheme
from irfuse.raising.raising import KIND_OF_OP, RAISE_PASSES, RAISED_KINDS
from irfuse.ranges import Range
from irfuse.report import KernelRecord, PassRecord, Report, StageRecord

CANONICALIZE_PASSES: tuple[str, ...] = ("cse-pure",)
"""Exact clean-ups run right before the raising passes (dumped like every pass; their records go
to the report's `passes`, `fused` = ops removed). `cse-pure` merges duplicated pure values (a cast
taken twice is one value, so the norm that casts its input twice raises); a value it makes shared
between two chains is cloned into the region of the one raised first (`match.clone_shared`)."""

DCE_PURE = "dce-pure"
"""Run after the fusions (not reported as one): erases the pure calls nothing reads any more."""

SELECT_KERNELS = "select-kernels"


class PipelineError(RuntimeError):
    """The pipeline failed on a graph: which stage or pass, and why."""

    def __init__(self, stage: str, reason: str):
        super().__init__(f"{stage}: {reason}")
        self.stage = stage
        self.reason = reason


@dataclass
class PipelineOptions:
    """What one run of the pipeline compiles for and with."""

    platform: str
    range: tuple[int, int] | None = None
    fusion_passes: Sequence[str] = ()  # pipeline specs: `name` or `name{option=value}`
    raise_passes: Sequence[str] | None = None  # None: RAISE_PASSES
    debug: bool = False
    dump: DumpWriter | None = None
    graph_name: str = "graph"
    config: dict[str, Any] = field(default_factory=dict)
    # Lifted scalar inputs read as their traced values: placeholder index -> value.
    constants: Mapping[int, float | int] = field(default_factory=dict)
    # The tensor-parallel size, for collectives on a TP group whose size the graph does not say.
    tp_size: int | None = None
    # Symbols of dims the user marked dynamic (`mark_dynamic`): never guarded equal to a number.
    marked_symbols: frozenset[str] = frozenset()


def count_ops(module: ModuleOp) -> int:
    return len(walk_ops(module))


def count_raised(module: ModuleOp) -> dict[str, int]:
    """How many semantic ops of each kind the top level of each function holds."""
    counts = dict.fromkeys(RAISED_KINDS, 0)
    for func in module.ops:
        for op in func.regions[0].blocks[0].ops if func.regions else ():
            kind = KIND_OF_OP.get(op.name)
            if kind is not None:
                counts[kind] += 1
    return counts


def kernel_records(module: ModuleOp, platform: str) -> list[KernelRecord]:
    """Each `irfuse::` op the module calls: the implementation chosen and the declared reason
    (with the state of its run-time variants where irfuse's kernel runs)."""
    calls: dict[tuple[str, str], int] = {}
    for op in module.walk():
        if isinstance(op, kernel.CallOp):
            key = (op.target.data.removeprefix("irfuse::").removesuffix(".default"),
                   op.impl.data)
            calls[key] = calls.get(key, 0) + 1
    return [KernelRecord(name, impl, _reason(name, impl, platform), n)
            for (name, impl), n in calls.items()]


def _reason(name: str, impl: str, platform: str) -> str:
    """The choice's reason, and where irfuse's kernel runs, what its run-time variants do."""
    reason = kernel_choice.choose(name, platform).reason
    if impl in ("reference", "inductor"):
        return reason
    return reason + kernel_choice.kernel(name).variants_note(platform)


def verify_once(module: ModuleOp) -> None:
    """The end-of-pipeline verification (debug runs verify everything after every pass).

    Every op irfuse's passes produce (semantic, fused and kernel ops, and their regions) gets
    xDSL's full verification. Imported `aten.call` ops get their own check only (every operand
    appears in the argument template): their types were built from FX's fake values, and
    xDSL's generic constraint checks on thousands of them would cost more than the rest of the
    pipeline (see docs/benchmarks.md).
    """

    def check(block) -> None:
        for op in block.ops:
            if isinstance(op, aten.CallOp):
                # The template check alone (CallLikeOp's own verifier), without the generic
                # IRDL pass over properties the importer built.
                call_syntax.CallLikeOp.verify_(op)
                continue
            op.verify(verify_nested_ops=False)
            for region in op.regions:
                for inner in region.blocks:
                    check(inner)

    for func in module.ops:
        func.verify(verify_nested_ops=False)
        for region in func.regions:
            for block in region.blocks:
                check(block)


def graph_facts(module: ModuleOp) -> dict[str, Any]:
    """What the config resolution needs to know of a model, read off its raised IR: hidden
    size and dtype itemsize of its first norm, TP size of its first collective (None where the
    graph has no such op), and the quant schemes of all its quants, in order of first use (a
    tuple, None without quants): a pass that fuses a quant is turned off for the graph only
    when none of them is one it fuses, and each site is then judged by its own scheme."""
    facts: dict[str, Any] = {
        "hidden_size": None, "itemsize": None, "tp_size": None, "quant_scheme": None,
    }
    schemes: dict[str, None] = {}
    for op in walk_ops(module):
        if facts["hidden_size"] is None and op.name in ("norm.rms_norm", "norm.add_rms_norm"):
            x = op.operands[0].type
            if isinstance(x, TensorType) and x.rank >= 2 and isinstance(x.dims[-1], int):
                facts["hidden_size"] = x.dims[-1]
                facts["itemsize"] = dtypes.to_torch(x.dtype).itemsize
        elif facts["tp_size"] is None and op.name.startswith("coll."):
            facts["tp_size"] = op.properties["world_size"].value.data
        elif op.name in ("quant.fp8", "quant.nvfp4"):
            schemes[support_matrix_scheme(quant_op_scheme(op))] = None
    if schemes:
        facts["quant_scheme"] = tuple(schemes)
    return facts


def named_groups(module: ModuleOp) -> Iterator[tuple[str, str]]:
    """(group, op name) for each collective and fused op that names a process group: the
    groups the emitted graph's collectives and kernels resolve when it runs (`irfuse.groups`)."""
    for func in module.ops:
        for op in func.regions[0].blocks[0].ops if func.regions else ():
            group = op.properties.get("group")
            if group is not None and op.name.split(".", 1)[0] in ("coll", "fused"):
                yield group.data, op.name  # type: ignore[attr-defined]


@dataclass
class Prepared:
    """A graph imported and raised: the IR every compile range starts from."""

    imported: ImportedGraph
    report: Report
    ctx: Context


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a stage runs: the pipeline allocates tens of
    thousands of short-lived IR objects, which would otherwise trigger full collections of the
    whole (torch-sized) heap in the middle of it, at a cost of up to a second each."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def prepare(gm: torch.fx.GraphModule, options: PipelineOptions) -> Prepared:
    """Import an ATen graph and raise it (stages 2 and 3)."""
    with _gc_paused():
        return _prepare(gm, options)


def _prepare(gm: torch.fx.GraphModule, options: PipelineOptions) -> Prepared:
    report = Report(
        graph=options.graph_name,
        range=Range(*options.range).as_list() if options.range else None,
        platform=options.platform,
        config=options.config,
    )
    start = time.perf_counter()
    try:
        imported = import_graph(gm, constants=options.constants,
                                marked_symbols=options.marked_symbols)
    except Exception as err:
        raise PipelineError("import", f"{type(err).__name__}: {err}") from err
    set_target(imported.module, options.platform)
    if options.tp_size is not None:
        imported.module.attributes[TP_SIZE_ATTR] = IntegerAttr(options.tp_size, i64)
    report.stages.append(StageRecord("import", _ms(start), count_ops(imported.module)))
    if options.debug:
        try:
            imported.module.verify()
        except DiagnosticException as err:
            raise PipelineError("import", f"the imported IR is invalid: {err}") from err
    if options.dump:
        options.dump.mlir("import", imported.module)
    prepared = Prepared(imported, report, make_context())

    start = time.perf_counter()
    for name in CANONICALIZE_PASSES:
        report.passes.append(_run_pass(prepared, name, options))
    raise_names = RAISE_PASSES if options.raise_passes is None else options.raise_passes
    for name in raise_names:
        report.raise_passes.append(_run_pass(prepared, name, options))
    report.raised = count_raised(imported.module)
    report.stages.append(StageRecord("raise", _ms(start), count_ops(imported.module)))
    return prepared


def finish(prepared: Prepared, options: PipelineOptions) -> tuple[torch.fx.GraphModule, Report]:
    """Fuse, select kernels and emit (stages 4 and 5); return the new graph and the report."""
    with _gc_paused():
        return _finish(prepared, options)


def _finish(
    prepared: Prepared, options: PipelineOptions
) -> tuple[torch.fx.GraphModule, Report]:
    module = prepared.imported.module
    report = prepared.report
    report.range = Range(*options.range).as_list() if options.range else None
    report.config = options.config

    start = time.perf_counter()
    for name in options.fusion_passes:
        report.passes.append(_run_pass(prepared, name, options))
    _run_pass(prepared, DCE_PURE, options)  # what the fused kernels no longer read
    report.stages.append(StageRecord("fuse", _ms(start), count_ops(module)))

    start = time.perf_counter()
    try:
        groups.check(named_groups(module))
    except groups.GroupError as err:
        raise PipelineError("groups", str(err)) from err
    _run_pass(prepared, SELECT_KERNELS, options, dump_stem="emit")
    report.kernels = kernel_records(module, options.platform)
    if not options.debug:
        try:
            verify_once(module)
        except DiagnosticException as err:
            raise PipelineError("verify", str(err)) from err
    report.stages.append(StageRecord("select-kernels", _ms(start), count_ops(module)))

    start = time.perf_counter()
    imported = prepared.imported
    try:
        emitted = emit_graph(
            imported.func, imported.source, imported.meta, imported.input_names
        )
    except Exception as err:
        raise PipelineError("emit", f"{type(err).__name__}: {err}") from err
    report.stages.append(StageRecord("emit", _ms(start), len(emitted.graph.nodes)))
    if options.dump:
        options.dump.python("emitted", emitted.code)
    return emitted, report


def run(
    gm: torch.fx.GraphModule, options: PipelineOptions
) -> tuple[torch.fx.GraphModule, Report]:
    """The whole pipeline on an ATen graph: the emitted graph and the report."""
    return finish(prepare(gm, options), options)


def _run_pass(
    prepared: Prepared, spec: str, options: PipelineOptions, dump_stem: str | None = None
) -> PassRecord:
    """Run one pass, given as a pipeline spec (`name` or `name{option=value}`)."""
    module = prepared.imported.module
    name = passes.spec_name(spec)
    start = time.perf_counter()
    with remarks.collecting() as sink:
        try:
            before = _ir_state(module) if options.debug else None
            passes.instantiate(spec).apply(prepared.ctx, module)
            if options.debug and _ir_state(module) != before:
                module.verify()
        except DiagnosticException as err:
            raise PipelineError(name, f"the IR is invalid after the pass: {err}") from err
        except Exception as err:
            raise PipelineError(name, f"{type(err).__name__}: {err}") from err
    record = PassRecord(name, sink.fused, sink.missed, _ms(start))
    if options.dump:
        options.dump.mlir(dump_stem or name, module, pass_spec=spec)
    return record


def _ir_state(module: ModuleOp) -> list[tuple]:
    """What a pass can change, op by op: the op, its operands, result types, properties,
    attributes, successors and block argument types. The verifier runs after a pass only where
    this changed (MLIR's pass manager likewise skips it after a pass that preserved the IR)."""
    return [(op, tuple(op.operands), tuple(r.type for r in op.results),
             tuple(op.properties.items()), tuple(op.attributes.items()), tuple(op.successors),
             tuple(tuple(a.type for a in b.args) for r in op.regions for b in r.blocks))
            for op in module.walk()]


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1e3
