"""Graph → Program, as a pipeline of stages over one Lowering state (lower/state.py):

  emit        nodes → steps (kernel calls, custom operators, If's labels and switches)
  constants   derived arrays named; then every constant read placed in the blob
  bind        graph outputs written in place, or copied into their own buffer
  dynamic     a dynamic model's run-dependent kernels: tiling sinks after PREPROCESS_KERNEL steps
  workspace   the other tensors' lifetimes and each task's scratch, planned (memplan)
  tasks       steps → tasks, kernels rendered by the renderer the pipeline hands in; the load
              steps (KernelCall.at_load) → the load tasks, which write the model's own buffers
  args        each task's args (the load tasks' after the run's) placed in the one args table
  program     all of it as the ir.program.Program
"""
from __future__ import annotations

from ..ir.graph import Graph
from ..ir.program import LowerContext, Program
from . import args, bind, constants, dynamic, emit, program, tasks, workspace
from .state import Lowering


def lower_graph(graph: Graph, ctx: LowerContext) -> Program:
    state = Lowering(graph, ctx)
    emit.emit(state, graph.nodes)
    constants.name_derived(state)       # before anything reads the calls' inputs as names
    output_of = bind.bind_outputs(state)
    dynamic.sink(state)                 # a dynamic model's kernels whose tiling the run computes
    blob = constants.place(state)
    work = workspace.plan(state, output_of, blob.constants)
    places = args.Places(state.root, state.input_index, output_of, blob.constants, work.offsets, state.model_buffers)
    table = tasks.build(state, places)
    args_size = args.lay_out(table.tasks + table.load_tasks)
    return program.assemble(state, blob, work, table, places, args_size)
