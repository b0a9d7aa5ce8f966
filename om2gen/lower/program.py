"""The stages' results → the ir.program.Program code generation and the writers read."""
from __future__ import annotations

from ..ir.program import IoDesc, Program, View
from .args import Places
from .constants import Blob
from .graph_json import graph_json
from .state import Lowering
from .tasks import TaskTable
from .workspace import Workspace


def assemble(state: Lowering, blob: Blob, work: Workspace, table: TaskTable, places: Places,
             args_size: int) -> Program:
    graph = state.graph

    def io(name: str) -> IoDesc:
        v = graph.values[name]
        return IoDesc(name, v.dtype.name, v.shape, v.nbytes)

    views = [View(v, src, state.root(v), state.view_nodes[v], places.placed(v))
             for v, src in sorted(state.views.items())]
    return Program(
        name=graph.name, inputs=[io(n) for n in graph.inputs], outputs=[io(n) for n in graph.outputs],
        kernels=table.kernels, tasks=table.tasks, constants=list(blob.constants.values()), constants_size=blob.size,
        work_size=work.size, args_size=args_size, source_digest=graph.source_digest, opsets=graph.opsets,
        graph_json=graph_json(graph, blob.constants.values()), label_num=state.label_num, label_lists=table.label_lists,
        custom_ops=table.custom_ops, buffers=work.buffers, views=views, gears=state.gears)
