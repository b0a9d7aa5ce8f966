"""A dynamic model's Program as its classic .om holds it (the RT2 path, docs/dynamic-shapes.md):
without the PREPROCESS_KERNEL tasks and the device tiling library they run, since the host op
library's Tiling (codegen/host_library.py) computes every kernel's tiling on the host before its
launch. The kernels, their tasks' address slots and the memory plan are the .om2's."""
from __future__ import annotations

import dataclasses

from ..ir.program import Program
from ..ir.tasks import ModelTaskType
from . import args


def for_om(program: Program) -> Program:
    kernels = [k for k in program.kernels if not k.library]
    index = {id(k): i for i, k in enumerate(kernels)}
    renumbered = {}
    tasks = []
    for old, t in enumerate(program.tasks):
        if t.task_type == ModelTaskType.MODEL_TASK_PREPROCESS_KERNEL:
            continue
        renumbered[old] = len(tasks)
        kernel = index[id(program.kernels[t.kernel])] if t.kernel >= 0 else t.kernel
        tasks.append(dataclasses.replace(t, kernel=kernel))
    plan = program.dynamic.host_plan
    for op in [*plan.ops, *plan.steps]:
        op.task = renumbered[op.task]
    out = dataclasses.replace(program, tasks=tasks, kernels=kernels,
                              dynamic=dataclasses.replace(program.dynamic, tilings=[]))
    out.args_size = args.lay_out(out.tasks)
    return out
