"""Small graph-editing helpers the rewriting passes share."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..ir import Graph, Node, Value


def producers(graph: Graph) -> dict[str, Node]:
    """{value name: the top-level node producing it}."""
    return {o: n for n in graph.nodes for o in n.outputs if o}


def fresh_name(graph: Graph, base: str) -> str:
    name, k = base, 1
    while name in graph.values:
        k += 1
        name = f"{base}_{k}"
    return name


def add_constant(graph: Graph, base: str, array: np.ndarray) -> str:
    """A new constant value (under a name no value has yet); returns its name."""
    name = fresh_name(graph, base)
    arr = np.asarray(array, order="C")
    graph.values[name] = Value(name, dtypes.from_numpy(arr.dtype), tuple(arr.shape), arr)
    return name


def add_value(graph: Graph, base: str, dtype, shape) -> str:
    """A new computed value's name and type."""
    name = fresh_name(graph, base)
    graph.values[name] = Value(name, dtype, tuple(int(d) for d in shape))
    return name


def const_array(graph: Graph, name: str) -> np.ndarray | None:
    v = graph.values.get(name) if name else None
    return None if v is None or not v.is_const else np.asarray(v.const)


def note_covered(node: Node, *absorbed: Node) -> None:
    """Records in the node's `nodes` attribute (shown in its task comment) the source nodes it now
    computes besides itself."""
    covered = list(node.attrs.get("nodes") or [node.name])
    for n in absorbed:
        covered += [c for c in (n.attrs.get("nodes") or [n.name]) if c not in covered]
    node.attrs["nodes"] = covered
