"""Small graph-editing helpers the rewriting passes share."""
from __future__ import annotations

import numpy as np

from ..ir import dtypes, symbolic
from ..ir.graph import Graph, Node, Value
from ..ops.registry import OM2GEN_DOMAIN


def producers(graph: Graph) -> dict[str, Node]:
    """{value name: the top-level node producing it}."""
    return {o: n for n in graph.nodes for o in n.outputs if o}


def fresh_name(graph: Graph, base: str) -> str:
    name, k = base, 1
    while name in graph.values:
        k += 1
        name = f"{base}_{k}"
    return name


def add_constant(graph: Graph, base: str, array: np.ndarray, *, sources, transform: str) -> str:
    """A new constant value (under a name no value has yet), made from the values `sources` by
    `transform` (recorded: graph.origin() traces it back to the model); returns its name."""
    name = fresh_name(graph, base)
    arr = np.asarray(array, order="C")
    graph.values[name] = Value(name, dtypes.from_numpy(arr.dtype), tuple(arr.shape), arr)
    graph.derive(name, sources, transform)
    return name


def add_value(graph: Graph, base: str, dtype, shape) -> str:
    """A new computed value's name and type (a dynamic model's dims stay expressions)."""
    name = fresh_name(graph, base)
    graph.values[name] = Value(name, dtype, tuple(d if isinstance(d, symbolic.Expr) else int(d) for d in shape))
    return name


def add_shape(graph: Graph, base: str, shape, *, transform: str) -> str:
    """A shape operand (a Reshape's target): an int64 constant, or where a dim is dynamic a value
    known as dims (ir/graph.py), as the frontend makes for a shape computed from the inputs."""
    if symbolic.is_static(tuple(shape)):
        return add_constant(graph, base, np.asarray(shape, np.int64), sources=[], transform=transform)
    name = fresh_name(graph, base)
    graph.values[name] = Value(name, dtypes.INT64, (len(shape),), dims=np.array(list(shape), dtype=object))
    return name


def const_array(graph: Graph, name: str) -> np.ndarray | None:
    v = graph.values.get(name) if name else None
    return None if v is None or not v.is_const else np.asarray(v.const)


def sole_reader(producer: Node | None, x: str, users: dict, outputs: set) -> bool:
    """Whether `producer` computes x as its first output and one node (the one to absorb) is the
    only reader of x, which is no graph output: then that node can go into the producer."""
    return producer is not None and producer.outputs[0] == x and x not in outputs and len(users.get(x, [])) == 1


def absorb(graph: Graph, producer: Node, node: Node) -> None:
    """`producer` now computes `node`'s output too: the value between them is gone, the producer
    takes node's output name (so a graph output keeps its name) and lists node as covered. The
    caller removes `node` from the graph."""
    graph.values.pop(producer.outputs[0])
    producer.outputs[0] = node.outputs[0]
    producer.fused_from = sources(producer, node)


def sources(*nodes: Node) -> list[str]:
    """The source nodes `nodes` compute, in order, each once: what a node's fused_from lists, or
    the node itself when no fusion made it. A node a pass makes from them records this as its
    fused_from (shown in the debug graph and named by its task label)."""
    covered: list[str] = []
    for n in nodes:
        covered += [c for c in (n.fused_from or [n.name]) if c not in covered]
    return covered


def make_fused(node: Node, op_type: str, declared: dict) -> None:
    """Turns `node` into om2gen's fused operator `op_type` in place (same name, inputs, outputs and
    fused_from), keeping the attributes that operator declares (`declared`, its attrs); the
    caller adds what the fusion brings."""
    node.op_type, node.domain, node.opset = op_type, OM2GEN_DOMAIN, 1
    node.attrs = {k: v for k, v in node.attrs.items() if k in declared}
