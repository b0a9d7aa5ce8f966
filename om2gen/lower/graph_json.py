"""The final graph's readable dump (debug/ge_model.json, op_attr.json): its values and nodes as
JSON, attributes by value (tensors and branches by what they are, not their contents)."""
from __future__ import annotations

import math

import numpy as np
import onnx

from ..ir.graph import Graph
from ..ir.program import GraphJson, ValueJson


def graph_json(graph: Graph, constants=()) -> GraphJson:
    """constants: the Program's (ir.program.Constant), each listed with what it comes from."""
    def val(name: str) -> ValueJson:
        v = graph.values[name]
        return {"name": name, "dtype": v.dtype.name, "shape": list(v.shape), "const": v.is_const}
    return {
        "name": graph.name,
        "opsets": graph.opsets,
        "inputs": [val(n) for n in graph.inputs],
        "outputs": [val(n) for n in graph.outputs],
        "nodes": [{"name": n.name, "op_type": n.op_type, "domain": n.domain, "fused_from": list(n.fused_from),
                   "inputs": [val(i) if i else None for i in n.inputs],
                   "outputs": [val(o) if o else None for o in n.outputs],   # None: an omitted position
                   "attrs": {k: _attr_json(v) for k, v in sorted(n.attrs.items()) if not k.startswith("_")}}
                  for n in graph.nodes],
        "constants": [{"name": c.name, "offset": c.offset, "dtype": c.array.dtype.name, "shape": list(c.array.shape),
                       "sources": list(c.sources), "transforms": list(c.transforms)} for c in constants],
    }


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
