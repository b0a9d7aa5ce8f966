"""MatMul + Add becomes Gemm: the addend goes into the GEMM's C operand, which the kernel adds
to each output tile while it is still in cache (templates/kernels/matmul.c.j2), instead of a
separate element-wise pass over the product.

The MatMul's second operand must be a matrix (as Linear layers have: [K, N]); a first operand of
rank > 2 is viewed as rows x K (Reshape is a view, no copy) and the result viewed back. The
addend is either a bias over N (any shape holding N values along the last dim) or a tensor of
exactly the product's shape (a residual connection), read through C's strides.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from ..ops import common
from . import rewrite

GEMM_OPSET = 13
RESHAPE_OPSET = 14


def run(graph: Graph, ctx=None) -> int:
    producer = rewrite.producers(graph)
    users = graph.consumers()
    outputs = set(graph.outputs)
    made = 0
    replaced: dict[int, list[Node]] = {}
    for add in graph.nodes:
        if add.op_type != "Add" or add.domain or add.opset < 7 or id(add) in replaced:
            continue
        for k in (0, 1):
            mm = producer.get(add.inputs[k])
            if mm is None or mm.op_type != "MatMul" or mm.domain or id(mm) in replaced:
                continue
            y = mm.outputs[0]
            if y in outputs or len(users.get(y, [])) != 1:
                continue
            nodes = _as_gemm(graph, mm, add, add.inputs[1 - k])
            if nodes is not None:
                replaced[id(mm)] = []
                replaced[id(add)] = nodes
                made += 1
                break
    if made:
        new_nodes = []
        for n in graph.nodes:
            new_nodes.extend(replaced.get(id(n), [n]))
        graph.nodes = new_nodes
    return made


def _as_gemm(graph: Graph, mm: Node, add: Node, addend: str) -> list[Node] | None:
    a, b, y = (graph.values[n] for n in (mm.inputs[0], mm.inputs[1], mm.outputs[0]))
    c = graph.values[addend]
    out = graph.values[add.outputs[0]]
    if a.dtype.name != "float32" or b.dtype != a.dtype or c.dtype != a.dtype:
        return None
    if len(b.shape) != 2 or len(a.shape) < 2 or out.shape != y.shape:
        return None
    n = b.shape[1]
    rows = common.prod(a.shape[:-1])
    nodes: list[Node] = []
    if c.size == n and c.shape and c.shape[-1] == n:
        if c.is_const:
            c_in = rewrite.add_constant(graph, f"{add.name}::bias", np.asarray(c.const).reshape(n), sources=[addend],
                                        transform=f"Add {add.name!r} addend as the bias of a Gemm")
        else:
            c_in = _reshape(graph, nodes, addend, (n,), f"{add.name}::bias_view")
    elif c.shape == y.shape:
        if c.is_const:
            c_in = rewrite.add_constant(graph, f"{add.name}::addend", np.asarray(c.const).reshape(rows, n),
                                        sources=[addend], transform=f"Add {add.name!r} addend as a Gemm's C")
        else:
            c_in = _reshape(graph, nodes, addend, (rows, n), f"{add.name}::addend_view")
    else:
        return None
    a_in = mm.inputs[0] if len(a.shape) == 2 else _reshape(graph, nodes, mm.inputs[0], (rows, a.shape[-1]),
                                                           f"{mm.name}::rows")
    final = add.outputs[0]
    gemm_out = final if len(a.shape) == 2 else rewrite.add_value(graph, f"{mm.name}::gemm", y.dtype, (rows, n))
    gemm = Node(f"{mm.name}::gemm", "Gemm", [a_in, mm.inputs[1], c_in], [gemm_out], {}, "", GEMM_OPSET,
                fused_from=rewrite.sources(mm, add))
    nodes.append(gemm)
    if gemm_out != final:
        _reshape(graph, nodes, gemm_out, out.shape, f"{add.name}::view", output=final)
    graph.values.pop(mm.outputs[0], None)
    return nodes


def _reshape(graph: Graph, nodes: list[Node], src: str, shape, name: str, output: str | None = None) -> str:
    """Appends a Reshape (a view: no kernel) of `src` to `shape`; returns the new value's name."""
    spec = rewrite.add_shape(graph, f"{name}_shape", shape, transform=f"the shape of the view {name!r}")
    if output is None:
        output = rewrite.add_value(graph, name, graph.values[src].dtype, shape)
    nodes.append(Node(name, "Reshape", [src, spec], [output], {}, "", RESHAPE_OPSET))
    return output

