"""IR -> FX: a new torch graph built from the IR alone.

`aten.call` and `kernel.call` become `call_function` nodes with their arguments rebuilt from the
templates; a raised op that was not fused is replaced by its decomposition region, inlined, so
the ATen code it came from runs unchanged; `func.return` becomes the output node. A pure call
that nothing reads once the decompositions are inlined (a view of an operand that only the raised
op read: the `[1, N]` weight scale of an unfused CUTLASS GEMM) is left out, by cse-pure's purity
rule. Nodes of
imported ops get the FX metadata their original node had. Nodes of new ops (kernel calls, the
reshapes fusions add) carry none: Inductor re-traces the graph with fake tensors (aot_autograd
inside `compile_fx`), which runs the custom ops' fake implementations, so computing fake values
here would only cost time (milliseconds per custom op call under a symbolic shape env).
"""

from __future__ import annotations

import operator
from typing import Any

import torch.fx
from torch.fx._lazy_graph_module import _LazyGraphModule
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from irfuse import targets
from irfuse.dialects import aten, kernel
from irfuse.dialects.irfuse import YieldOp
from irfuse.emit import custom_ops  # noqa: F401  (registers the irfuse:: ops kernel calls name)
from irfuse.ir import call_args, call_syntax
from irfuse.raising.fx_import import decode_outputs
from irfuse.raising.purity import PURE, target_info


class EmitError(RuntimeError):
    """The IR holds an op that has no torch lowering (a fused op whose kernel was not selected)."""


class _Emitter:
    def __init__(
        self,
        graph: torch.fx.Graph,
        meta: dict[Operation | BlockArgument, dict[str, Any]],
    ):
        self.graph = graph
        self.meta = meta
        self.nodes: dict[SSAValue, Any] = {}
        self.pure: list[torch.fx.Node] = []  # nodes of pure calls, in emission order

    def drop_unread_pure(self) -> None:
        """Erase the pure calls' nodes that nothing reads, last first (a chain goes whole)."""
        for node in reversed(self.pure):
            if not node.users:
                self.graph.erase_node(node)

    def emit_block(self, block: Block) -> list[Any] | None:
        """Emit the ops of a block; return the values its terminator yields or returns."""
        for op in block.ops:
            if type(op) is aten.CallOp:  # (most ops: `isinstance` on xDSL's ABCs costs a call)
                self._emit_call(op)
            elif isinstance(op, ReturnOp | YieldOp):
                return [self.nodes[v] for v in op.operands]
            else:
                self.emit_op(op)
        return None

    def emit_op(self, op: Operation) -> None:
        if isinstance(op, aten.CallOp | kernel.CallOp):
            self._emit_call(op)
        elif isinstance(op, aten.GetAttrOp):
            node = self.graph.get_attr(op.attr_name.data)
            self._set_meta(node, op)
            self.nodes[op.result] = node
        else:
            region = getattr(op, "decomposition", None)
            if region is None or not region.blocks:
                raise EmitError(
                    f"'{op.name}' at {op.location} has no torch lowering: its kernel was not "
                    "selected and it carries no decomposition"
                )
            block = region.blocks[0]
            for arg, operand in zip(block.args, op.operands, strict=True):
                self.nodes[arg] = self.nodes[operand]
            yielded = self.emit_block(block)
            assert yielded is not None, f"{op.name}: decomposition without irfuse.yield"
            for res, node in zip(op.results, yielded, strict=True):
                self.nodes[res] = node

    def _emit_call(self, op: call_syntax.CallLikeOp) -> None:
        target = targets.resolve(op.target.data)
        operand_nodes = [self.nodes[v] for v in op.operands]
        args = tuple(call_args.decode_template(t, operand_nodes) for t in op.template.data)
        kwargs = {k: call_args.decode_template(t, operand_nodes) for k, t in op.keywords.items()}
        keys = None if op.result_keys is None else [k.data for k in op.result_keys.data]
        single = op.tuple_result is None and keys is None
        hint = op.results[0].name_hint if op.results and single else None
        node = self.graph.create_node("call_function", target, args, kwargs, name=hint)
        self._set_meta(node, op)
        if single:
            if type(op) is aten.CallOp and target_info(op.target.data).kind == PURE:
                self.pure.append(node)
            if op.results:
                self.nodes[op.results[0]] = node
            return
        val = node.meta.get("val")
        for i, res in enumerate(op.results):
            if not res.uses:
                continue
            index = i if keys is None else keys[i]
            item = self.graph.create_node(
                "call_function", operator.getitem, (node, index), name=res.name_hint
            )
            if val is not None:
                item.meta["val"] = val[index]
            self.nodes[res] = item

    def _set_meta(self, node: torch.fx.Node, op: Operation) -> None:
        original = self.meta.get(op)
        if original is not None:
            node.meta.update(original)


def emit_graph(
    func: FuncOp,
    source: torch.fx.GraphModule,
    meta: dict[Operation | BlockArgument, dict[str, Any]],
    input_names: list[str] | None = None,
) -> torch.fx.GraphModule:
    """Build a GraphModule that computes what `func` describes (constants come from `source`,
    argument names from `input_names`, the original graph's placeholders)."""
    graph = torch.fx.Graph()
    emitter = _Emitter(graph, meta)
    block = func.body.blocks[0]
    for arg in block.args:
        name = input_names[arg.index] if input_names else f"{arg.name_hint or 'arg'}_{arg.index}"
        node = graph.placeholder(name)
        original = meta.get(arg)
        if original is not None:
            node.meta.update(original)
        emitter.nodes[arg] = node
    returned = emitter.emit_block(block)
    assert returned is not None, "func.func without func.return"
    graph.output(decode_outputs(func, returned))
    emitter.drop_unread_pure()
    # Lazy: the Python code of the graph is generated at its first call (or when Inductor
    # traces it), not on irfuse's compile path.
    return _LazyGraphModule(source, graph)
