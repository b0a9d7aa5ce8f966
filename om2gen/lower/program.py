"""The stages' results → the ir.program.Program code generation and the writers read."""
from __future__ import annotations

from ..ir import symbolic
from ..ir.program import DynamicInfo, IoDesc, ModelBuffer, Program, TilingCall, View
from . import dynamic, host_ops
from .args import Places
from .constants import Blob
from .graph_json import graph_json
from .state import Lowering
from .tasks import TILING_LIBRARY, TaskTable
from .workspace import Workspace


def assemble(state: Lowering, blob: Blob, work: Workspace, table: TaskTable, places: Places,
             args_size: int) -> Program:
    graph = state.graph

    def io(name: str) -> IoDesc:
        """A dynamic dim is -1 (GE's unknown dim), and the bytes those of the largest shape."""
        v = graph.values[name]
        return IoDesc(name, v.dtype.name, tuple(-1 if isinstance(d, symbolic.Expr) else d for d in v.shape),
                      dynamic.max_bytes(v.nbytes, f"{'input' if name in graph.inputs else 'output'} {name!r}"))

    views = [View(v, src, state.root(v), state.view_nodes[v], places.placed(v))
             for v, src in sorted(state.views.items())]
    return Program(
        name=graph.name, inputs=[io(n) for n in graph.inputs], outputs=[io(n) for n in graph.outputs],
        kernels=table.kernels, tasks=table.tasks, constants=list(blob.constants.values()), constants_size=blob.size,
        work_size=work.size, args_size=args_size, source_digest=graph.source_digest, opsets=graph.opsets,
        graph_json=graph_json(graph, blob.constants.values(), places.placed), label_num=state.label_num,
        label_lists=table.label_lists, custom_ops=table.custom_ops, buffers=work.buffers, views=views,
        gears=state.gears, dynamic=_dynamic_info(state, work, places) if dynamic.is_dynamic(state) else None,
        load_tasks=table.load_tasks, model_buffers=_model_buffers(state))


def _model_buffers(state: Lowering) -> list[ModelBuffer]:
    """The buffers the load tasks write, by index (each load step's outputs in turn)."""
    node_of = {out: step.node.name for step in state.load_steps for out in step.call.outputs}
    return [ModelBuffer(name, state.graph.values[name].nbytes, node_of[name])
            for name, _ in sorted(state.model_buffers.items(), key=lambda kv: kv[1])]


def _dynamic_info(state: Lowering, work: Workspace, places: Places) -> DynamicInfo:
    values = state.graph.values
    return DynamicInfo(symbols=dynamic.symbols(state), symbols_offset=work.offsets[dynamic.SYMBOLS],
                       input_dims=[tuple(values[n].shape) for n in state.graph.inputs],
                       output_dims=[tuple(values[n].shape) for n in state.graph.outputs],
                       # none: no kernel's tiling depends on the run (a NonZero whose count only the outputs show)
                       tiling_library=TILING_LIBRARY if any(isinstance(s.call, TilingCall) for s in state.steps) else "",
                       tilings=[s.call for s in state.steps if isinstance(s.call, TilingCall)],
                       host_plan=host_ops.describe(state, work, places))
