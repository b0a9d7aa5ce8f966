"""If: a branch chosen by a condition known at compile time is inlined into the graph.

A condition computed at run time needs both branches in the captured model and a label/switch
task (GE's LABEL_SWITCH_BY_INDEX) choosing one at replay; that path is not built yet, so such an
If is refused with what to do: freeze the inputs the condition depends on (--input-value).
"""
from __future__ import annotations

import numpy as np
import onnx

from ..errors import ModelError, UnsupportedOpError
from ..ir import Node
from .registry import Op, register


@register("If", since=1)
class If(Op):
    def infer(self, node, ins):
        raise UnsupportedOpError(
            f"node {node.name!r} (If): its condition {node.inputs[0]!r} is computed at run time; om2gen compiles "
            "an If whose condition is known at compile time — freeze the model inputs it depends on with "
            "--input-value NAME=VALUE")

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
        return inline_subgraph(branch, f"{node.name}/", node.outputs, node.opset)


def inline_subgraph(g: onnx.GraphProto, prefix: str, outputs: list[str], opset: int) -> list[Node]:
    """The subgraph's nodes with every name it defines prefixed; names it does not define refer to
    the enclosing graph. Its outputs are copied to `outputs` with Identity nodes."""
    from ..frontend.onnx_import import _attr_value  # the frontend's attribute decoding

    defined = {i.name for i in g.initializer} | {o for n in g.node for o in n.output if o}
    defined |= {i.name for i in g.input}

    def rename(name: str) -> str:
        return prefix + name if name in defined else name

    nodes = []
    for t in g.initializer:
        nodes.append(Node(f"{prefix}{t.name}", "Constant", [], [rename(t.name)],
                          {"value": onnx.numpy_helper.to_array(t)}, "", opset))
    for i, n in enumerate(g.node):
        domain = n.domain if n.domain != "ai.onnx" else ""
        nodes.append(Node(prefix + (n.name or f"{n.op_type}_{i}"), n.op_type, [rename(x) if x else "" for x in n.input],
                          [rename(x) if x else "" for x in n.output],
                          {a.name: _attr_value(a) for a in n.attribute}, domain, opset))
    for out, target in zip(g.output, outputs):
        if target:
            nodes.append(Node(f"{prefix}output:{target}", "Identity", [rename(out.name)], [target], {}, "", opset))
    return nodes
