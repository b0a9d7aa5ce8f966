"""What the QDQ folding passes (qdq.py, qdq_gemm.py) read off a QuantizeLinear/DequantizeLinear
pair, so that they fold where ONNX Runtime's CPU provider does and nowhere else:

- The integer type ORT's QDQ transformer sees. On x86, ORT does not fuse int8 activations into
  QLinearConv/QLinearMatMul (its session option session.qdqisint8allowed defaults to 0 there);
  instead QDQS8ToU8Transformer turns an int8 Q -> DQ pair into uint8 (zero point + 128, which
  gives the same values) where the Q's only reader is one DequantizeLinear, read by at most
  one node (ORT first gives each reader of a DQ its own copy, so a DQ read twice keeps its Q
  read twice). The selectors then compare those types: an op whose input was converted and
  whose output was not stays float. `converted` finds the tensors so converted, once, on the
  graph before either pass rewrites it; the passes compare `kind`s (the integers themselves
  need no conversion: a QLinear op on the int8 tensor equals ORT's on the uint8 one).
- A DequantizeLinear of constants (a weight, an int32 bias) which the importer folded into a
  float constant: graph.dequantized keeps its node and inputs, and `dequantized` gives it back
  as if the node were still there.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.graph import Graph, Node
from . import rewrite

_INT8 = ("int8", "uint8")


@dataclass(frozen=True)
class Quantized:
    """One side of a QDQ pair: the integer tensor (a DQ's input, a Q's output), its scale and
    zero point (value names, "" when absent), the axis, the integer type as stored and as ORT's
    selectors see it (`kind`), and the node (a folded DequantizeLinear's node too)."""
    data: str
    scale: str
    zero_point: str
    axis: int
    dtype: str
    kind: str
    node: Node

    def per_tensor(self, graph: Graph) -> bool:
        return all(n == "" or graph.values[n].size == 1 for n in (self.scale, self.zero_point))


def converted(graph: Graph) -> set[str]:
    """The int8 tensors between a Q and a DQ that ORT's QDQS8ToU8Transformer makes uint8."""
    producer = rewrite.producers(graph)
    users = graph.consumers()
    outputs = set(graph.outputs)
    names = set()
    for dq in graph.nodes:
        if dq.op_type != "DequantizeLinear" or dq.domain or len(dq.inputs) < 3:
            continue
        q = producer.get(dq.inputs[0])
        if q is None or q.op_type != "QuantizeLinear" or q.domain or len(q.inputs) < 3:
            continue
        if len(users.get(q.outputs[0], [])) != 1 or q.outputs[0] in outputs or \
                len(users.get(dq.outputs[0], [])) > 1:
            continue
        zq, zd = rewrite.const_array(graph, q.inputs[2]), rewrite.const_array(graph, dq.inputs[2])
        if zq is None or zd is None or zq.size != 1 or zd.size != 1 or zq.dtype != np.int8 or zd.dtype != np.int8:
            continue
        if int(zq.reshape(-1)[0]) == int(zd.reshape(-1)[0]):
            names.add(q.outputs[0])
    return names


def dequantized(graph: Graph, name: str, producer: dict, unsigned: set[str], added: set[str]) -> Quantized | None:
    """The DequantizeLinear (present, or folded into the constant `name` at import) that `name`
    is the output of; None if it is none. A folded one's inputs are put back into the graph (their
    names into `added`: the caller removes those no node reads in the end)."""
    node = producer.get(name)
    folded = None
    if node is None:
        folded = graph.dequantized.get(name)
        value = graph.values.get(name)
        if folded is None or value is None or not value.is_const:
            return None
        node = folded.node
    elif node.op_type != "DequantizeLinear" or node.domain:
        return None
    if folded is not None:
        for n, v in zip(node.inputs, folded.inputs):
            if n and n not in graph.values:
                graph.values[n] = v
                added.add(n)
            elif n and graph.values[n] is not v:
                return None   # (a value of that name made since: not the quantized input)
    data = graph.values[node.inputs[0]]
    return _side(node, data.dtype.name, unsigned)


def in_graph(graph: Graph, nodes) -> list[Node]:
    """Those of `nodes` in the graph (a folded DequantizeLinear is not: no source node to list)."""
    ids = {id(n) for n in graph.nodes}
    return [n for n in nodes if id(n) in ids]


def drop_unread(graph: Graph, added: set[str]) -> None:
    """Removes the folded DequantizeLinear inputs `dequantized` put back that no node reads."""
    read = {n for node in graph.nodes for n in node.inputs}
    for name in added - read:
        del graph.values[name]


def quantized(graph: Graph, node: Node, unsigned: set[str]) -> Quantized | None:
    """A QuantizeLinear's output side."""
    if node.op_type != "QuantizeLinear" or node.domain:
        return None
    return _side(node, graph.values[node.outputs[0]].dtype.name, unsigned)


def _side(node: Node, dtype: str, unsigned: set[str]) -> Quantized:
    data = node.inputs[0] if node.op_type == "DequantizeLinear" else node.outputs[0]
    kind = "uint8" if dtype == "int8" and data in unsigned else dtype
    axis = int(node.attrs.get("axis", 1)) if node.opset >= 13 else 1
    return Quantized(data, node.input(1), node.input(2), axis, dtype, kind, node)


def eight_bit(*sides: Quantized) -> bool:
    return all(s.dtype in _INT8 for s in sides)
