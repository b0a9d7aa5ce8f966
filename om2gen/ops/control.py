"""If: a condition known at compile time inlines the taken branch into the graph; a condition
computed at run time keeps both branches as regions of the If node, and lowering emits GE's
label/switch task family (LABEL_SWITCH_BY_INDEX, LABEL_SET, LABEL_GOTO) so that the captured
model chooses the branch at replay.
"""
from __future__ import annotations

import numpy as np
import onnx

from .. import advice
from ..errors import ModelError, NeedsConstantError, ShapeError, UnsupportedOpError
from ..ir import dtypes
from ..ir.attributes import attribute_value
from ..ir.graph import REGIONS, Node, Value
from ..ir.program import KernelCall
from .registry import Op, register


@register("If", since=1)
class If(Op):
    def infer_regions(self, node, ins, infer_nodes, values, inputs_of=None):
        """Both branches, inferred as regions, each from the values it reads (the outer scope as
        that branch sees it; its own nested Ifs fold on its own shapes). Afterwards node.inputs is
        [cond] + every outer value the branches read, so dead-code removal and liveness see those
        uses. inputs_of(name): the run-time model inputs a value comes from (for the advice when
        a branch cannot be compiled for the pinned shapes). None where a branch of a dynamic model
        has a node that cannot take its shapes (frontend/dynamic_dims.py has noted it)."""
        cond = ins[0]
        if cond is None or cond.size != 1 or cond.dtype.name != "bool":
            raise ModelError(f"node {node.name!r} (If): the condition must be a single bool")
        regions = {}
        for key in ("then", "else"):
            branch = node.attrs[f"{key}_branch"]
            if len(branch.output) != len(node.outputs):
                raise ModelError(f"node {node.name!r} (If): the {key} branch has {len(branch.output)} outputs, "
                                 f"the node {len(node.outputs)}")
            names = [f"{node.name}/{key}:{i}" for i in range(len(node.outputs))]
            try:
                nodes = infer_nodes(inline_subgraph(branch, f"{node.name}/{key}/", names, node.opset,
                                                     node.attrs.get(SCOPE)))
            except NeedsConstantError:
                raise   # its advice (freeze that input) holds inside a branch too
            except ShapeError as exc:
                raise _branch_error(node, key, exc, inputs_of(node.inputs[0]) if inputs_of else []) from None
            regions[key] = (nodes, names)
        if any(name not in values for _, outs in regions.values() for name in outs):
            return None   # a branch node could not take a dynamic model's shapes (the frontend names it)
        node.attrs[REGIONS] = regions
        defined = {o for nodes, _ in regions.values() for n in nodes for o in n.outputs}
        captured = {i for nodes, _ in regions.values() for n in nodes for i in n.inputs if i and i not in defined}
        # a branch output no kept node produces (a constant, or an outer value) is read by the If too
        captured |= {o for _, outs in regions.values() for o in outs if o not in defined}
        captured = sorted(captured)
        node.inputs = node.inputs[:1] + captured
        outs = []
        for i, name in enumerate(node.outputs):
            a, b = values[regions["then"][1][i]], values[regions["else"][1][i]]
            if a.dtype == b.dtype and a.shape != b.shape and one_element(a, b):
                # Paddle's exports mix [] and [1] for one number: the output is the longer shape
                # (the same bytes; each branch's is copied into it as they are)
                a = max(a, b, key=lambda v: len(v.shape))
            if a.dtype != b.dtype or a.shape != b.shape and not one_element(a, b):
                raise UnsupportedOpError(
                    f"node {node.name!r} (If): output {name!r} is {a.describe()} in the then branch and "
                    f"{b.describe()} in the else branch; om2gen needs one static shape per output")
            outs.append(Value("", a.dtype, a.shape))
        return outs

    def infer(self, node, ins):
        raise AssertionError("If is inferred through infer_regions")

    def expand(self, node: Node, ins) -> list[Node] | None:
        """The nodes of the taken branch, renamed into the outer graph, or None if the condition is
        not a compile-time constant."""
        cond = ins[0]
        if cond is None or not cond.is_const:
            return None
        arr = np.asarray(cond.const).reshape(-1)
        if arr.size != 1:
            raise ModelError(f"node {node.name!r} (If): the condition must be a single value, got {arr.size}")
        branch = node.attrs["then_branch" if bool(arr[0]) else "else_branch"]
        if len(branch.output) != len(node.outputs):
            raise ModelError(f"node {node.name!r} (If): the branch has {len(branch.output)} outputs, the node "
                             f"{len(node.outputs)}")
        return inline_subgraph(branch, f"{node.name}/", node.outputs, node.opset, node.attrs.get(SCOPE))


SCOPE = "_scope"   # node.attrs key: names of enclosing subgraphs already renamed by inlining


def one_element(*vs: Value) -> bool:
    """Whether each value is one number in a static shape of unit dims ([], [1], [1, 1], ...)."""
    return all(v.is_static and v.size == 1 for v in vs)


def inline_subgraph(g: onnx.GraphProto, prefix: str, outputs: list[str], opset: int,
                    outer: dict[str, str] | None = None) -> list[Node]:
    """The subgraph's nodes with every name it defines prefixed; names it does not define refer to
    the enclosing graph (through `outer`, the renames of enclosing inlined subgraphs). Its
    outputs are copied to `outputs` with Identity nodes. Nodes with subgraphs of their own carry
    the combined renames, so their subgraphs resolve names the same way when they are inlined."""

    defined = {i.name for i in g.initializer} | {o for n in g.node for o in n.output if o}
    defined |= {i.name for i in g.input}
    scope = dict(outer or {})
    scope.update({name: prefix + name for name in defined})

    def rename(name: str) -> str:
        return scope.get(name, name)

    nodes = []
    for t in g.initializer:
        nodes.append(Node(f"{prefix}{t.name}", "Constant", [], [rename(t.name)],
                          {"value": onnx.numpy_helper.to_array(t)}, "", opset))
    for i, n in enumerate(g.node):
        domain = n.domain if n.domain != "ai.onnx" else ""
        attrs = {a.name: attribute_value(a) for a in n.attribute}
        if any(isinstance(v, onnx.GraphProto) for v in attrs.values()):
            attrs[SCOPE] = scope
        nodes.append(Node(prefix + (n.name or f"{n.op_type}_{i}"), n.op_type, [rename(x) if x else "" for x in n.input],
                          [rename(x) if x else "" for x in n.output], attrs, domain, opset))
    for out, target in zip(g.output, outputs):
        if target:
            nodes.append(Node(f"{prefix}output:{target}", "Identity", [rename(out.name)], [target], {}, "", opset))
    return nodes


def _branch_error(node, key: str, exc: ShapeError, sources: list[str]) -> NeedsConstantError:
    """A branch of a run-time If that these input shapes make invalid (the model fails there too,
    the first time that branch is taken): say which input decides the branch and how to fix it."""
    them = "that input" if len(sources) == 1 else "those inputs"
    decided = f"by {'input' if len(sources) == 1 else 'inputs'} {', '.join(map(repr, sources))}" if sources \
        else "by a value computed at run time"
    freeze = (f"freeze {them} if the model always takes one branch "
              f"({', '.join(advice.value_option(s) for s in sources)}), so that the If folds, or " if sources else "")
    return NeedsConstantError(
        f"node {node.name!r} (If): its branch is chosen at run time ({decided}), so om2gen compiles both branches, "
        f"but the {key} branch cannot run with these input shapes: {exc}. To compile it, {freeze}pin input shapes "
        f"both branches accept ({advice.shape_option()})", sources[0] if sources else "")


@register("MapIndex", since=1, domain="om2gen")
class MapIndex(Op):
    """Gears (frontend/multi_batch.py): which row of the gear table (input 1, int32 [gears,
    values]) the shape data (input 0, int32 [values]) equals, as a uint32 index; `gears` when no
    row does. GE's MapIndex node of the multi-batch clone."""

    def infer(self, node, ins):
        data, table = ins
        if data.dtype.name != "int32" or table.dtype.name != "int32" or len(table.shape) != 2 \
                or data.shape != (table.shape[1],):
            raise ModelError(f"node {node.name!r} (MapIndex): needs int32 shape data [n] and an int32 gear table "
                             f"[gears, n], got {data.describe()} and {table.describe()}")
        return [Value("", dtypes.BY_NAME["uint32"], ())]

    def lower(self, node, ins, outs, ctx):
        data, table = ins
        gears, values = table.shape
        params = {"summary": f"MapIndex: the gear of {data.describe()} among {gears} gears", "gears": gears,
                  "values": values}
        return KernelCall("kernels/map_index.c.j2", "MapIndex", params, [data.name, table.name], [outs[0].name],
                          block_dim=1, tiling={"gears": gears, "values": values})
