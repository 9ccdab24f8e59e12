"""FX (ATen) -> IR: one op per FX node, nothing lost.

The ATen graph that aot_autograd hands the backend becomes a `func.func` in a `builtin.module`:
placeholders are block arguments (tensors and SymInts, typed from their fake values), `get_attr`
nodes are `aten.get_attr`, every `call_function` is an `aten.call` (its target and every
non-tensor argument kept; a user Triton kernel's call names its kernel, `user_kernels`), `getitem`
on a multi-result (tuple or dict) call maps to that call's results, and the
output node is `func.return`. Each op keeps the node's name and source line as its location. The
FX metadata stays beside the IR (`ImportedGraph.meta`) for emit. Lifted scalars are read as the
constants they were traced with, and symbolic sizes are typed as the ShapeEnv knows them, after
the size contracts of vLLM's custom ops (`import_graph`).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import sympy
import torch
import torch.fx
from torch.distributed.distributed_c10d import _resolve_process_group
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._sympy.functions import FloorDiv
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FileLineColLoc,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    NameLoc,
    StringAttr,
    UnknownLoc,
    f64,
    i64,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue

from irfuse import dtypes, targets
from irfuse.dialects import aten
from irfuse.dialects.irfuse import OpaqueType, sym_type, tensor_type
from irfuse.ir import call_args
from irfuse.raising import size_contracts, user_kernels, vllm_layers

OUTPUTS_ATTR = "irfuse.outputs"
_TARGETS: dict[Any, StringAttr] = {}
"""Function attribute holding the output template when the FX output is not a flat tuple."""


class ImportError_(ValueError):
    """A graph that irfuse cannot represent faithfully (the pipeline then leaves it alone)."""


@dataclass
class ImportedGraph:
    """The IR of one FX graph and what emit needs besides it: the FX metadata of every imported
    node (its fake value above all), keyed by op or block argument, so that emit can give the
    rebuilt graph the metadata Inductor needs without re-running fake propagation."""

    module: ModuleOp
    func: FuncOp
    source: torch.fx.GraphModule
    meta: dict[Operation | BlockArgument, dict[str, Any]] = field(default_factory=dict)
    input_names: list[str] = field(default_factory=list)
    """The FX placeholder names, which emit keeps (they are the compiled function's arguments)."""


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_NUMBERED = re.compile(r"(_\d+)+$")


def name_hint(name: str) -> str:
    """An SSA name hint for an FX name: `add_16` -> `add` (the printer numbers values itself;
    a hint that still ended in `_N` could collide with a number the printer adds)."""
    return _NUMBERED.sub("", name) or "v"


A = TypeVar("A", bound=Attribute)

_UNKNOWN = UnknownLoc()
_LINES: dict[str, Attribute] = {}
_EXPRS: dict[Any, int | str] = {}


def _trusted(cls: type[A], **fields: Any) -> A:
    """An attribute of `cls` with these fields, built without xDSL's verification: for
    attributes the importer builds by the thousand from values valid by construction (a
    string, a location, a list of attributes); equal to, and hashed like, the verified one."""
    attr = cls.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(attr, name, value)
    return attr


def _location(node: torch.fx.Node) -> NameLoc:
    """`loc("fx_name"("file.py":line:0))`: the node's name and the last frame of its trace."""
    trace = node.meta.get("stack_trace")
    inner: Attribute = _UNKNOWN
    if trace:
        tail = trace[-400:]
        found = _LINES.get(tail)
        if found is None:
            frames = _FRAME.findall(tail)
            found = _UNKNOWN
            if frames:
                path, line = frames[-1]
                found = FileLineColLoc(StringAttr(path), IntAttr(int(line)), IntAttr(0))
            _LINES[tail] = found
        inner = found
    return _trusted(NameLoc, desc=_trusted(StringAttr, data=node.name), location=inner)


def _dim(d: int | torch.SymInt) -> int | str:
    if isinstance(d, int):
        return d
    expr = _halves_read_as_one(d.node.expr, d.node.shape_env)
    found = _EXPRS.get(expr)
    if found is None:
        found = int(expr) if expr.is_number else str(expr)
        _EXPRS[expr] = found
    return found


def _halves_read_as_one(expr: Any, shape_env: Any) -> Any:
    """`s - s // 2` as `s // 2` where the shape environment knows s is even (a guard
    `size_contracts` settled for the two halves of a gated activation), so the halves' types
    agree; any other expression as it is."""
    divisible = getattr(shape_env, "divisible", None)
    if not divisible or not expr.has(FloorDiv):
        return expr
    for mod in divisible:
        if len(mod.args) != 2 or mod.args[1] != 2:
            continue
        half = FloorDiv(mod.args[0], 2)
        if not expr.has(half):
            continue
        k = sympy.Dummy("half", integer=True)
        reduced = sympy.expand(expr.subs(half, k).subs(mod.args[0], 2 * k))
        if not reduced.has(mod.args[0]):
            expr = reduced.subs(k, half)
    return expr


def value_type(val: Any) -> Attribute:
    """The IR type of an FX node's value (`node.meta["val"]`)."""
    if isinstance(val, torch.Tensor):
        shape = tuple([d if type(d) is int else _dim(d) for d in val.shape])
        return tensor_type(shape, dtypes.to_ir(val.dtype))
    if isinstance(val, torch.SymInt):
        return sym_type(str(_dim(val)))
    if isinstance(val, torch.SymFloat):
        return sym_type(str(val.node.expr), "float")
    if isinstance(val, torch.SymBool):
        return sym_type(str(val.node.expr), "bool")
    if isinstance(val, bool):
        return sym_type(str(val), "bool")
    if isinstance(val, int):
        return sym_type(str(val))
    if isinstance(val, float):
        return sym_type(repr(val), "float")
    if vllm_layers.traced_name(val) is not None:
        return OpaqueType(StringAttr(vllm_layers.LAYER_NAME_TYPE))
    return OpaqueType(StringAttr(type(val).__name__))


_INTS = {i: IntAttr(i) for i in range(-8, 4097)}
_REFS = [call_args.OperandRefAttr(IntAttr(i)) for i in range(64)]


_Value = SSAValue | tuple[SSAValue, ...] | dict[str, SSAValue] | None
"""What an FX node stands for in the IR: a value, or the results of a tuple or dict call."""


class _Encoder:
    """Encodes an FX call's arguments as a template plus the operand list it refers to."""

    def __init__(self, values: dict[torch.fx.Node, _Value]):
        self.values = values
        self.operands: list[SSAValue] = []

    def encode(self, arg: Any) -> Attribute:
        if isinstance(arg, torch.fx.Node):
            value = self.values[arg]
            if isinstance(value, tuple):
                return call_args.TupleAttr(ArrayAttr([self._operand(v) for v in value]))
            if isinstance(value, dict):
                return DictionaryAttr({k: self._operand(v) for k, v in value.items()})
            return self._operand(value)
        if isinstance(arg, bool):
            return call_args.TRUE if arg else call_args.FALSE
        if isinstance(arg, int):
            return _INTS.get(arg) or IntAttr(arg)
        if isinstance(arg, float):
            return call_args.FloatArgAttr(arg)
        if arg is None:
            return call_args.NONE
        if isinstance(arg, str):
            return StringAttr(arg)
        if isinstance(arg, list):
            return ArrayAttr([self.encode(a) for a in arg])
        if isinstance(arg, tuple):
            return call_args.TupleAttr(ArrayAttr([self.encode(a) for a in arg]))
        if isinstance(arg, dict) and all(isinstance(k, str) for k in arg):
            return DictionaryAttr({k: self.encode(v) for k, v in arg.items()})
        if isinstance(arg, torch.dtype):
            return dtypes.to_ir(arg)
        if isinstance(arg, torch.device):
            return call_args.DeviceAttr(StringAttr(str(arg)))
        if isinstance(arg, torch.layout):
            return call_args.LayoutAttr(StringAttr(str(arg)))
        if isinstance(arg, torch.memory_format):
            return call_args.MemoryFormatAttr(StringAttr(str(arg)))
        if isinstance(arg, torch._ops.OpOverload | torch._ops.HigherOrderOperator):
            return call_args.TargetAttr(StringAttr(targets.name_of(arg)))
        raise ImportError_(f"cannot represent the argument {arg!r} ({type(arg).__name__})")

    def _operand(self, value: SSAValue) -> call_args.OperandRefAttr:
        self.operands.append(value)
        index = len(self.operands) - 1
        return _REFS[index] if index < len(_REFS) else call_args.OperandRefAttr(IntAttr(index))


def _result_types(val: Any) -> tuple[list[Attribute], bool, ArrayAttr | None]:
    """The result types of a call that returned `val`, whether it returned a tuple (or list), and
    the keys of a dict it returned (a user Triton kernel's functionalized call)."""
    if isinstance(val, list | tuple):
        return [value_type(v) for v in val], True, None
    if isinstance(val, dict) and all(isinstance(k, str) for k in val):
        return ([value_type(v) for v in val.values()], False,
                ArrayAttr([StringAttr(k) for k in val]))
    if val is None:
        return [], False, None
    return [value_type(val)], False, None


def import_graph(
    gm: torch.fx.GraphModule,
    name: str = "forward",
    constants: Mapping[int, float | int] | None = None,
    marked_symbols: frozenset[str] = frozenset(),
) -> ImportedGraph:
    """Build the IR of an ATen FX graph. `constants` maps placeholder indices of lifted scalars
    (0-d tensors) to the values they are read as; `marked_symbols` are sizes the user marked
    dynamic, which the size contracts never equate with a number.

    A lifted scalar (a Python float such as a module's `eps`, which Dynamo passes as a 0-d f64
    tensor under `dynamic=True`) keeps its argument (the compiled function's signature keeps
    it), and its uses read an `aten::scalar_tensor` of the traced value instead, so raising sees
    the constant a static graph has; the backend checks these inputs on every call
    (`irfuse.backend`). Before import the size contracts of vLLM's custom ops are guarded in the
    ShapeEnv where the traced sizes meet them (`size_contracts`), so a hidden size Dynamo made
    symbolic but an op requires equal to a weight's imports as that number."""
    size_contracts.settle(gm, marked_symbols)
    block = Block()
    values: dict[torch.fx.Node, _Value] = {}
    meta: dict[Operation | BlockArgument, dict[str, Any]] = {}
    ops: list[Operation] = []
    output_node: torch.fx.Node | None = None
    layer_args: dict[int, str] = {}

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            layer = vllm_layers.traced_name(node.meta.get("val"))
            if layer is not None:
                layer_args[len(block.args)] = layer
            arg = block.insert_arg(value_type(node.meta.get("val")), len(block.args))
            arg.name_hint = name_hint(node.name)
            values[node] = arg
            meta[arg] = node.meta
            if constants and arg.index in constants:
                op = _traced_constant(node, constants[arg.index])
                values[node] = op.results[0]
                meta[op] = node.meta
                ops.append(op)
        elif node.op == "get_attr":
            attr = _fetch_attr(gm, node.target)
            op = aten.GetAttrOp(node.target, value_type(attr))
            scalar = _scalar_constant(attr)
            if scalar is not None:
                op.attributes[aten.SCALAR_VALUE_ATTR] = scalar
            op.result.name_hint = name_hint(node.name)
            op.location = _location(node)
            values[node] = op.result
            meta[op] = node.meta
            ops.append(op)
        elif node.op == "call_function":
            if node.target is operator.getitem and isinstance(values.get(node.args[0]),
                                                              tuple | dict):
                values[node] = values[node.args[0]][node.args[1]]
                continue
            encoder = _Encoder(values)
            template = _trusted(ArrayAttr, data=tuple([encoder.encode(a) for a in node.args]))
            kwargs = node.kwargs
            kw_template = (
                DictionaryAttr({k: encoder.encode(v) for k, v in kwargs.items()})
                if kwargs
                else None
            )
            result_types, is_tuple, keys = _result_types(node.meta.get("val"))
            target = _TARGETS.get(node.target)
            if target is None:
                target = _TARGETS[node.target] = StringAttr(targets.name_of(node.target))
            op = aten.CallOp.build_fast(
                target,
                encoder.operands,
                template,
                result_types,
                kw_template,
                is_tuple,
                _location(node),
                keys,
            )
            kernel = user_kernels.kernel_name(node)
            if kernel is not None:
                op.attributes[user_kernels.KERNEL_ATTR] = StringAttr(kernel)
            hint = name_hint(node.name)
            for res in op.results:
                res.name_hint = hint
            if keys is not None:
                values[node] = dict(zip((k.data for k in keys.data), op.results, strict=True))
            else:
                values[node] = (tuple(op.results) if is_tuple else
                                (op.results[0] if op.results else None))
            meta[op] = node.meta
            ops.append(op)
        elif node.op == "output":
            output_node = node
        else:
            raise ImportError_(f"unsupported FX node kind '{node.op}' ({node.name})")

    if output_node is None:
        raise ImportError_("the graph has no output node")
    result = output_node.args[0]
    encoder = _Encoder(values)
    out_template = encoder.encode(result)
    ret = ReturnOp(*encoder.operands)
    ops.append(ret)
    block.add_ops(ops)
    func = FuncOp(
        name,
        ([a.type for a in block.args], [v.type for v in encoder.operands]),
        Region(block),
    )
    if not _is_flat_tuple(out_template, len(encoder.operands)):
        func.attributes[OUTPUTS_ATTR] = out_template
    if layer_args:
        func.arg_attrs = ArrayAttr([
            DictionaryAttr({vllm_layers.LAYER_NAME_ATTR: StringAttr(layer_args[i])}
                           if i in layer_args else {})
            for i in range(len(block.args))
        ])
    names = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    module = ModuleOp([func])
    layers = vllm_layers.describe([*layer_args.values(), *_layer_name_constants(gm)])
    if layers:
        module.attributes[vllm_layers.LAYERS_ATTR] = vllm_layers.facts_attr(layers)
    groups = _process_groups(gm)
    if groups:
        module.attributes[PROCESS_GROUPS_ATTR] = DictionaryAttr(
            {name: IntegerAttr(size, i64) for name, size in groups.items()}
        )
    return ImportedGraph(module, func, gm, meta, names)


def _layer_name_constants(gm: torch.fx.GraphModule) -> list[str]:
    """The layer names vLLM's ops (and their functionalized calls) take as string constants."""
    found: list[str] = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = node.kwargs.get("layer_name")
        target = node.target
        if name is None and isinstance(target, torch._ops.OpOverload) \
                and target.namespace == "vllm":
            for arg, spec in zip(node.args, target._schema.arguments, strict=False):
                if spec.name == "layer_name":
                    name = arg
        if isinstance(name, str):
            found.append(name)
    return found


def _traced_constant(node: torch.fx.Node, value: float | int) -> Operation:
    """`aten::scalar_tensor(value, dtype)` for the lifted scalar placeholder `node`."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dim() != 0:
        raise ImportError_(f"{node.name} is not a 0-d tensor; it cannot be read as a constant")
    encoder = _Encoder({})
    op = aten.CallOp.build_fast(
        StringAttr(targets.name_of(torch.ops.aten.scalar_tensor.default)),
        [],
        ArrayAttr([encoder.encode(value)]),
        [value_type(val)],
        DictionaryAttr({"dtype": encoder.encode(val.dtype)}),
        False,
        NameLoc(StringAttr(f"{node.name}_traced"), UnknownLoc()),
    )
    op.results[0].name_hint = name_hint(f"{node.name}_traced")
    return op


PROCESS_GROUPS_ATTR = "irfuse.process_groups"
"""Module attribute: the world size of every process group the graph's collectives name, read
from torch.distributed at import (an all-reduce call names its group, not its size), so that
the IR alone says it and irfuse-opt can raise the collectives of a dumped graph."""


def _process_groups(gm: torch.fx.GraphModule) -> dict[str, int]:
    found: dict[str, int] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if "c10d" not in node.target.namespace and node.target.namespace != "vllm":
            continue
        for arg in (*node.args, *node.kwargs.values()):
            if isinstance(arg, str) and arg not in found:
                size = _group_size(arg)
                if size is not None:
                    found[arg] = size
    return found


def _group_size(name: str) -> int | None:
    try:
        return _resolve_process_group(name).size()
    except Exception:  # noqa: BLE001 (not a group name, or no process group in this process)
        return None


def _is_flat_tuple(template: Attribute, n: int) -> bool:
    if not isinstance(template, call_args.TupleAttr):
        return False
    items = template.items.data
    return len(items) == n and all(
        isinstance(t, call_args.OperandRefAttr) and t.index.data == i for i, t in enumerate(items)
    )


def _scalar_constant(attr: Any) -> Attribute | None:
    """The number a 0-d constant tensor holds (`x[mask] = 0.0` makes one), so that raising can
    read it as the constant it is."""
    if (
        not isinstance(attr, torch.Tensor)
        or attr.dim() != 0
        or isinstance(attr, torch._subclasses.FakeTensor)
        or attr.device.type == "meta"
        or attr.dtype == torch.bool
    ):
        return None
    with _disable_current_modes():  # import may run under the compiler's fake-tensor mode
        number = attr.item()
    if attr.is_floating_point():
        return FloatAttr(float(number), f64)
    if not attr.is_complex():
        return IntegerAttr(int(number), i64)
    return None


def _fetch_attr(gm: torch.fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def decode_outputs(func: FuncOp, values: Sequence[Any]) -> Any:
    """Rebuild the FX output structure from the returned values (the inverse of import)."""
    template = func.attributes.get(OUTPUTS_ATTR)
    if template is None:
        return tuple(values)
    return call_args.decode_template(template, values)
