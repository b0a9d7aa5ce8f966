"""The final graph's readable dump (debug/ge_model.json, op_attr.json): its values and nodes as
JSON, attributes by value (tensors and branches by what they are, not their contents); a node
with regions (a gear model's Case, an If, a Loop) has them as subgraphs, which the OM writer turns
into MODEL_DEF's subgraphs (formats/om/graph_def.py)."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import onnx

from ..ir import symbolic
from ..ir.graph import CASE_IO, LOOP_IO, REGIONS, Graph, Node
from ..ir.program import ArgRef, GraphJson, NodeJson, SubgraphJson, ValueJson

Placed = Callable[[str], "ArgRef | None"]


def graph_json(graph: Graph, constants=(), placed: Placed | None = None) -> GraphJson:
    """constants: the Program's (ir.program.Constant), each listed with what it comes from;
    placed: where a value's bytes are (lower/args.Places.placed), given to a Loop body's inputs
    and outputs (the OM writer puts them on the body's Data and NetOutput ops)."""
    placed = placed or (lambda name: None)
    return {
        "name": graph.name,
        "opsets": graph.opsets,
        "inputs": [_value(graph, n) for n in graph.inputs],
        "outputs": [_value(graph, n) for n in graph.outputs],
        "nodes": [_node(graph, n, placed) for n in graph.nodes],
        "constants": [{"name": c.name, "offset": c.offset, "dtype": c.array.dtype.name, "shape": list(c.array.shape),
                       "sources": list(c.sources), "transforms": list(c.transforms)} for c in constants],
    }


def _value(graph: Graph, name: str, outer: str | None = None) -> ValueJson:
    v = graph.values[name]
    out: ValueJson = {"name": name, "dtype": v.dtype.name, "shape": [d if isinstance(d, int) else -1 for d in v.shape],
                      "const": v.is_const}
    if not v.is_static:   # a dynamic model's dims: GE's -1 in shape, the expressions beside it
        out["dims"] = [symbolic.text(d) for d in v.shape]
    if outer is not None:
        out["outer"] = outer
    return out


def _node(graph: Graph, n: Node, placed: Placed) -> NodeJson:
    out: NodeJson = {
        "name": n.name, "op_type": n.op_type, "domain": n.domain, "fused_from": list(n.fused_from),
        "inputs": [_value(graph, i) if i else None for i in n.inputs],
        "outputs": [_value(graph, o) if o else None for o in n.outputs],   # None: an omitted position
        "attrs": {k: _attr_json(v) for k, v in sorted(n.attrs.items()) if not k.startswith("_")}}
    if REGIONS in n.attrs:
        out["subgraphs"] = [_subgraph(graph, n, g, key, nodes, names, placed)
                            for g, (key, (nodes, names)) in enumerate(n.attrs[REGIONS].items())]
    return out


def _subgraph(graph: Graph, n: Node, index: int, key: str, nodes: list[Node], names: list[str],
              placed: Placed) -> SubgraphJson:
    """A region as the subgraph GE would make of it: its inputs are the values that stand for the
    model's inputs in it (a gear's inputs: CASE_IO; an If's branches read outer values
    directly, so have none), its outputs the values the node's outputs take, each with the
    outer value it stands for. A Loop's body lists all its inputs (iteration_num, cond, the
    carried values: the ones a loop input starts with it) and outputs (cond, the carried and scan
    values: those the Loop outputs take it) and the outer values its nodes read (reads), each with
    where its bytes are."""
    nested = [_node(graph, m, placed) for m in nodes]
    io = n.attrs.get(LOOP_IO)
    if io is not None:
        starts = [None] + [x or None for x in n.inputs[1:2 + io.carried]]
        ends = [None] + [x or None for x in n.outputs]
        reads = [x for x in n.inputs[2 + io.carried:] if x and not graph.values[x].is_const]
        return {"name": key, "inputs": [_placed(_value(graph, x, s), placed(x)) for x, s in zip(io.inputs, starts)],
                "outputs": [_placed(_value(graph, x, e), placed(x)) for x, e in zip(names, ends + [None] * len(names))],
                "reads": [_placed(_value(graph, x), placed(x)) for x in reads], "nodes": nested}
    outer_of = n.attrs.get(CASE_IO, {}).get(index, {})
    by_outer = {outer: v for v, outer in outer_of.items()}
    return {"name": key,
            "inputs": [_value(graph, by_outer[x], x) for x in graph.inputs if x in by_outer],
            "outputs": [_value(graph, src, dst) for src, dst in zip(names, n.outputs) if src and dst],
            "nodes": nested}


def _placed(v: ValueJson, ref: ArgRef | None) -> ValueJson:
    if ref is not None:
        v["place"] = ref.to_json()
    return v


def _attr_json(v):
    if isinstance(v, float) and not math.isfinite(v):   # JSON has no infinities: a Clip's open bound
        return str(v)   # "inf", "-inf", "nan"
    if isinstance(v, np.ndarray):
        return {"tensor": list(v.shape), "dtype": v.dtype.name}
    if isinstance(v, (list, tuple)):
        return [_attr_json(x) for x in v]
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    if isinstance(v, onnx.GraphProto):
        return {"graph": v.name, "nodes": len(v.node)}
    return str(v)
