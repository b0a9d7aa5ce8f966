"""Conv + Relu / Clip: an activation that directly follows a float32 Conv, and is the only reader
of its output, goes into the Conv kernel's store, so it is not a task of its own: the Conv becomes
an om2gen.FusedConv with that activation (ops/fused_conv.py; every Conv path clamps its final
output), or a FusedConv that adds a residual (passes/conv_add.py) takes it. Relu is the clamp
[0, inf); Clip needs compile-time constant bounds (attributes before opset 11, constant inputs
since).

The Conv takes over the activation's output name, so a graph output stays what it was.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.graph import Graph, Node
from ..ops import fused_activation, fused_conv, registry
from ..ops.registry import OM2GEN_DOMAIN
from . import rewrite


def run(graph: Graph, ctx=None) -> int:
    return fuse(graph, {"Conv": (fused_conv.OP_TYPE, fused_conv.FusedConv.attrs)})


def fuse(graph: Graph, kinds: dict[str, tuple[str, dict]]) -> int:
    """Folds each Relu / constant Clip into the node that produces its only input, when that node
    is an ONNX operator of `kinds` (op type -> the fused operator it becomes, and the attributes
    that operator declares) or one of those fused operators without an activation yet."""
    fused_types = {op_type for op_type, _ in kinds.values()}
    producer = rewrite.producers(graph)
    users = graph.consumers()
    outputs = set(graph.outputs)
    fused = set()
    for act in graph.nodes:
        if act.op_type not in ("Relu", "Clip") or act.domain or not act.inputs or len(act.outputs) != 1:
            continue
        x = act.inputs[0]
        conv = producer.get(x)
        if not rewrite.sole_reader(conv, x, users, outputs) or not _takes_activation(conv, kinds, fused_types):
            continue
        v = graph.values.get(x)
        if v is None or v.dtype.name != "float32":
            continue
        bounds = _bounds(graph, act)
        if bounds is None:
            continue
        if conv.domain != OM2GEN_DOMAIN:
            rewrite.make_fused(conv, *kinds[conv.op_type])
        conv.attrs.update(fused_activation.attrs_for(*bounds))
        rewrite.absorb(graph, conv, act)
        fused.add(id(act))
    graph.nodes = [n for n in graph.nodes if id(n) not in fused]
    return len(fused)


def _takes_activation(node: Node, kinds: dict, fused_types: set[str]) -> bool:
    if not node.domain:
        return node.op_type in kinds
    return node.domain == OM2GEN_DOMAIN and node.op_type in fused_types \
        and fused_activation.ACTIVATION not in node.attrs


def _bounds(graph: Graph, act: Node) -> tuple[float, float] | None:
    """(lo, hi) of the clamp the activation is, None if its bounds are not constants."""
    if act.op_type == "Relu":
        return 0.0, math.inf
    if act.opset < 11:
        op = registry.lookup(act)
        return float(op.attr(act, "min")), float(op.attr(act, "max"))
    lo, hi = -math.inf, math.inf
    for i in (1, 2):
        name = act.inputs[i] if len(act.inputs) > i else ""
        if not name:
            continue
        bound = rewrite.const_array(graph, name)
        if bound is None or bound.size != 1 or bound.dtype != np.float32:
            return None
        if i == 1:
            lo = float(bound.reshape(-1)[0])
        else:
            hi = float(bound.reshape(-1)[0])
    return lo, hi
