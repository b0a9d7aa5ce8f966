"""The args: where each address slot of a task points, and where each task's args sit in the
model's one args table."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from ..ir.program import ArgRef, Constant, Task
from ..ir.tasks import ArgKind
from . import memplan


@dataclass
class Places:
    """Where every value's bytes are, once outputs are bound, constants placed and the workspace
    planned."""
    root: Callable[[str], str]      # a value -> the value owning its bytes (Lowering.root)
    inputs: dict[str, int]          # model input -> its index
    outputs: dict[str, int]         # value written into an output buffer -> the output's index
    constants: dict[str, Constant]
    workspace: dict[str, int]       # value (or scratch key) -> its workspace offset
    buffers: dict[str, int] = dataclasses.field(default_factory=dict)   # a load task's output -> its model buffer

    def ref(self, name: str) -> ArgRef:
        r = self.root(name)
        if r in self.inputs:
            return ArgRef(ArgKind.INPUT, self.inputs[r], 0)
        if r in self.outputs:
            return ArgRef(ArgKind.OUTPUT, self.outputs[r], 0)
        if r in self.constants:
            return ArgRef(ArgKind.CONSTANT, 0, self.constants[r].offset)
        if r in self.buffers:
            return ArgRef(ArgKind.MODEL_BUFFER, self.buffers[r], 0)
        return ArgRef(ArgKind.WORKSPACE, 0, self.workspace[r])

    def placed(self, name: str) -> ArgRef | None:
        """ref(name), or None for a value nothing gave bytes (a view nothing reads)."""
        r = self.root(name)
        known = r in self.inputs or r in self.outputs or r in self.constants or r in self.workspace or r in self.buffers
        return self.ref(r) if known else None


def lay_out(tasks: list[Task]) -> int:
    """Gives each task its args' offset, in task order, each 8-aligned; returns the table's size."""
    offset = 0
    for task in tasks:
        task.args_offset = offset
        offset += memplan.align(task.args_size, 8)
    return offset
