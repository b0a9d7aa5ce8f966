"""QDQ folding around element-wise and pooling ops, as ONNX Runtime's QDQ transformer does: an op
whose data inputs all come from DequantizeLinear and whose only reader is a QuantizeLinear
(every scale and zero point a per-tensor constant, int8 or uint8) computes on the integers:

- Add, Mul -> com.microsoft.QLinearAdd / QLinearMul; Sigmoid, LeakyRelu -> QLinearSigmoid /
  QLinearLeakyRelu; GlobalAveragePool -> QLinearGlobalAveragePool (ops/qlinear.py); Softmax
  over the last axis -> QLinearSoftmax (ops/qlinear_softmax.py), whose results are ORT's for
  the fused form; AveragePool -> QLinearAveragePool's arithmetic (float pool, then
  round(y / s + z)).
- MaxPool (without Indices: the op has one output), Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat (every input's parameters
  those of the output), and Relu: when the DequantizeLinear and QuantizeLinear parameters are
  the same, the op runs on the integer tensor itself (Relu as a Clip at the zero point), which
  the round trip through float gives exactly.

A DequantizeLinear of a constant (an Add's bias), folded at import, counts as the node it was
(qdq_types.dequantized). Where the pattern is incomplete (parameters per axis; the float value
read elsewhere) the float path stays. The integer folding around Conv,
MatMul and Gemm is not this pass's.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from ..ops.qlinear import MS, TYPES
from ..ops.quantize import RANGES
from . import qdq_types, rewrite

_QLINEAR = {"Add": "QLinearAdd", "Mul": "QLinearMul", "Sigmoid": "QLinearSigmoid", "LeakyRelu": "QLinearLeakyRelu",
            "GlobalAveragePool": "QLinearGlobalAveragePool", "Softmax": "QLinearSoftmax"}
_ON_INTEGERS = {"MaxPool", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Relu"}
_DATA_INPUTS = {"Add": 2, "Mul": 2, "Concat": None}   # how many inputs are data (None: all); others: the first


def run(graph: Graph, ctx=None, unsigned: set[str] | None = None) -> int:
    """unsigned: the int8 tensors ORT makes uint8 (qdq_types.converted of the graph before any
    QDQ folding), found here if not given."""
    unsigned = qdq_types.converted(graph) if unsigned is None else unsigned
    producer = rewrite.producers(graph)
    users = graph.consumers()
    outputs = set(graph.outputs)
    gone, made, added = set(), 0, set()
    for q in list(graph.nodes):
        if q.op_type != "QuantizeLinear" or q.domain or id(q) in gone:
            continue
        mid = producer.get(q.inputs[0])
        if mid is None or mid.domain or mid.op_type not in _QLINEAR.keys() | _ON_INTEGERS | {"AveragePool"} \
                or not rewrite.sole_reader(mid, q.inputs[0], users, outputs) or len([o for o in mid.outputs if o]) != 1:
            continue
        out = _params(graph, q, unsigned)
        count = _DATA_INPUTS.get(mid.op_type, 1)
        data = mid.inputs[:count] if count else mid.inputs
        sides = [qdq_types.dequantized(graph, x, producer, unsigned, added) for x in data]
        if out is None or not all(sides):
            continue
        dqs = [d.node for d in sides]
        listed = qdq_types.in_graph(graph, dqs)   # the DQ nodes a fused node lists as its sources
        ins = [_params(graph, d, unsigned) for d in dqs]
        if any(p is None or p[3] != out[3] for p in ins):
            continue
        if mid.op_type == "AveragePool":
            graph.nodes[graph.nodes.index(mid):graph.nodes.index(mid) + 1] = _average_pool(graph, mid, q, listed)
            gone.add(id(q))
            made += 1
            continue
        if mid.op_type in _QLINEAR:
            if not graph.values[mid.outputs[0]].is_static:
                continue   # the QLinear ops take static shapes only; Q/DQ run a dynamic model as they are
            if mid.op_type == "Softmax" and not _last_axis(graph, mid):
                continue   # (om2gen's QLinearSoftmax: the last axis only)
            replacement = _qlinear(mid, q, dqs, listed)
        elif all(p[:2] == out[:2] for p in ins):
            replacement = _on_integers(graph, mid, q, dqs, out, listed)
        else:
            continue
        index = graph.nodes.index(mid)
        graph.nodes[index] = replacement
        graph.values.pop(mid.outputs[0], None)
        gone.add(id(q))
        made += 1
    graph.nodes = [n for n in graph.nodes if id(n) not in gone]
    qdq_types.drop_unread(graph, added)
    return made


def _params(graph: Graph, node: Node, unsigned: set[str]):
    """(scale, zero point, integer type, the type as ORT's selectors see it: qdq_types) of a
    QuantizeLinear/DequantizeLinear whose scale and zero point are per-tensor constants; None
    otherwise."""
    scale = rewrite.const_array(graph, node.input(1))
    zp_name = node.input(2)
    zp = rewrite.const_array(graph, zp_name)
    if scale is None or scale.size != 1 or scale.dtype != np.float32 or (zp_name and (zp is None or zp.size != 1)):
        return None
    data = node.inputs[0] if node.op_type == "DequantizeLinear" else node.outputs[0]
    dtype = graph.values[data].dtype.name
    if dtype not in TYPES:
        return None
    kind = "uint8" if dtype == "int8" and data in unsigned else dtype
    return float(scale.reshape(-1)[0]), int(zp.reshape(-1)[0]) if zp is not None else 0, dtype, kind


def _qparams(node: Node) -> list[str]:
    return [node.input(1), node.input(2)]


def _qlinear(mid: Node, q: Node, dqs: list[Node], listed: list[Node]) -> Node:
    inputs = [n for d in dqs for n in [d.inputs[0], *_qparams(d)]] + _qparams(q)
    attrs = {"alpha": mid.attrs.get("alpha", 0.01)} if mid.op_type == "LeakyRelu" else {}
    if mid.op_type == "Softmax":   # ORT's QLinearSoftmax: the Softmax's axis and opset
        attrs = {"opset": mid.opset, **({"axis": mid.attrs["axis"]} if "axis" in mid.attrs else {})}
    return Node(mid.name, _QLINEAR[mid.op_type], inputs, list(q.outputs), attrs, domain=MS, opset=1,
                fused_from=rewrite.sources(*listed, mid, q))


def _average_pool(graph: Graph, mid: Node, q: Node, listed: list[Node]) -> list[Node]:
    """ORT's QLinearAveragePool (what its QDQ transformer makes of DQ -> AveragePool -> Q): the
    float pool of the dequantized input, then round(y / y_scale + y_zero_point), clamped, which
    differs from QuantizeLinear's rint(y / y_scale) + y_zero_point on the ties a pool of integers
    often gives (ops/qlinear.py expands the QOperator op the same way)."""
    out = graph.values[q.outputs[0]]
    lo, hi = RANGES[out.dtype.name]
    zp = rewrite.const_array(graph, q.input(2)) if q.input(2) else np.zeros(())
    consts = {k: rewrite.add_constant(graph, f"{mid.name}_{k}", np.array(v, np.float32), sources=[],
                                      transform="QLinearAveragePool's requantization")
              for k, v in (("zy", float(np.asarray(zp).reshape(-1)[0])), ("lo", lo), ("hi", hi))}
    pooled = mid.outputs[0]
    shape = graph.values[pooled].shape
    names = [rewrite.add_value(graph, f"{pooled}_{k}", graph.values[pooled].dtype, shape)
             for k in ("scaled", "shifted", "rounded", "clipped")]
    src = rewrite.sources(*listed, mid, q)
    steps = [("Div", [pooled, q.input(1)], 14, {}), ("Add", [names[0], consts["zy"]], 14, {}),
             ("Round", [names[1]], 11, {}), ("Clip", [names[2], consts["lo"], consts["hi"]], 13, {}),
             ("Cast", [names[3]], 13, {"to": out.dtype.onnx})]
    outs = names + list(q.outputs)
    return [mid] + [Node(f"{mid.name}/{op.lower()}", op, ins, [outs[i]], attrs, opset=opset, fused_from=src)
                    for i, (op, ins, opset, attrs) in enumerate(steps)]


def _last_axis(graph: Graph, softmax: Node) -> bool:
    rank = len(graph.values[softmax.inputs[0]].shape)
    axis = int(softmax.attrs.get("axis", 1 if softmax.opset < 13 else -1))
    return axis % rank == rank - 1


def _on_integers(graph: Graph, mid: Node, q: Node, dqs: list[Node], out, listed: list[Node]) -> Node:
    count = len(dqs)
    inputs = [d.inputs[0] for d in dqs] + mid.inputs[count:]
    if mid.op_type == "Relu":   # max(x, zero point): what Relu is on the quantized scale
        zp = rewrite.add_constant(graph, f"{mid.name}_zero_point", np.array(out[1], out[2]),
                                  sources=[q.input(2)] if q.input(2) else [], transform="Relu on the quantized scale")
        return Node(mid.name, "Clip", [inputs[0], zp], list(q.outputs), opset=13,
                    fused_from=rewrite.sources(*listed, mid, q))
    return Node(mid.name, mid.op_type, inputs, list(q.outputs), dict(mid.attrs), domain=mid.domain, opset=mid.opset,
                fused_from=rewrite.sources(*listed, mid, q))
