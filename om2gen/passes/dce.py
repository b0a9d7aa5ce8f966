"""Dead-code removal: drop nodes no graph output depends on, and constants nothing reads."""
from __future__ import annotations

from ..ir.graph import Graph


def run(graph: Graph) -> None:
    needed = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if any(o in needed for o in node.outputs if o):
            kept.append(node)
            needed.update(i for i in node.inputs if i)
    graph.nodes = list(reversed(kept))
    produced = {o for node in graph.nodes for o in node.outputs}
    for name in [n for n, v in graph.values.items() if v.is_const and n not in needed and n not in produced]:
        del graph.values[name]
