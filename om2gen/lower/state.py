"""What lowering's stages (lower/lowering.py runs them in order) hand each other.

Emission fills a Lowering with steps, views and labels; naming the derived constants and binding
the outputs still add to it (values, copy steps). From then on the state is only read: each
stage returns what it decides (the output binding, the constants blob, the workspace plan, the
tasks) as a value of its own, which the next stages take as arguments.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir.dtypes import DType
from ..ir.graph import Graph, Node, Value
from ..ir.program import Control, CustomCall, GearTable, KernelCall, LowerContext, TilingCall
from ..ops import shape_values


@dataclass
class OutputCopy:
    """The node a copy into a graph output's own buffer is reported under (lower/bind.py): it
    stands for no node of the graph."""
    name: str                                   # "copy_to_output:<the output>"
    op_type: str = "Copy"
    attrs: dict = field(default_factory=dict)   # none: the task's comment lists no attributes


@dataclass
class Step:
    """One task to be, in launch order (its index is the task's number, k<index>_...)."""
    node: Node | OutputCopy
    call: KernelCall | Control | CustomCall | TilingCall


@dataclass
class Lowering:
    """The graph being lowered and what emission decided about it. The graph gains the values
    lowering makes (staged inputs, branch indices, derived constants, output copies), so that
    every name a step reads has its Value."""
    graph: Graph
    ctx: LowerContext
    steps: list[Step] = field(default_factory=list)
    views: dict[str, str] = field(default_factory=dict)         # value -> the value it is a view of (Alias)
    view_nodes: dict[str, str] = field(default_factory=dict)    # value -> the node that made the view
    label_num: int = 0                                          # labels handed out so far
    custom_outputs: set[str] = field(default_factory=set)       # values a custom operator writes
    input_index: dict[str, int] = field(init=False)             # graph input -> its index
    branch_outputs: dict[str, int] = field(default_factory=dict)   # a gear's value -> the output it writes
    gears: GearTable | None = None                              # what a gear model's Case decided (emit)
    refused: list[str] = field(default_factory=list)            # dynamic-model nodes emit could not lower
    # each Loop's body as steps [first, last] (its body label to its back-edge switch), innermost first
    loops: list[tuple[int, int]] = field(default_factory=list)
    # the load tasks to be (KernelCall.at_load), in launch order, and the values they write: each
    # a model buffer (by value name: its index), which no step of the run writes
    load_steps: list[Step] = field(default_factory=list)
    model_buffers: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.input_index = {n: i for i, n in enumerate(self.graph.inputs)}

    def add(self, node: Node | OutputCopy, call: KernelCall | Control | CustomCall) -> None:
        """Appends the step; a value computed from the input shapes that it reads as data (not
        folded to a constant) is written just before it (ops/shape_values.dims_call), so that each
        reader has it wherever the control flow went."""
        if isinstance(call, KernelCall) and call.at_load:
            self._add_load(node, call)
            return
        reads = [call.index] if isinstance(call, Control) else getattr(call, "inputs", [])
        for name in reads:
            v = self.graph.values.get(name) if isinstance(name, str) and name else None
            if v is not None and not v.is_const and v.dims is not None and not isinstance(call, Control):
                self.steps.append(Step(node, shape_values.dims_call(node, v)))
        self.steps.append(Step(node, call))

    def _add_load(self, node: Node | OutputCopy, call: KernelCall) -> None:
        """A load step, unless an earlier one computes the same from equal constants (the gears of a
        model hold one copy of the weights per gear's graph): its outputs are then views of that
        one's, and the model makes the buffer once."""
        key = (call.template, call.name, repr(sorted(call.params.items())), tuple(call.tiling.items()), call.block_dim)
        assert all(isinstance(n, str) and self.graph.values[n].is_const for n in call.inputs), \
            f"a load task of {node.name} reads {call.inputs}: it may read constants only"
        arrays = [np.ascontiguousarray(self.graph.values[n].const) for n in call.inputs]
        for step in self.load_steps:
            other = step.call
            if (other.template, other.name, repr(sorted(other.params.items())), tuple(other.tiling.items()),
                    other.block_dim) == key and len(other.inputs) == len(arrays) and \
                    all(_same(self.graph.values[n].const, a) for n, a in zip(other.inputs, arrays)):
                for mine, theirs in zip(call.outputs, other.outputs):
                    self.views[mine] = theirs
                    self.view_nodes[mine] = node.name
                return
        for name in call.outputs:
            self.model_buffers[name] = len(self.model_buffers)
        self.load_steps.append(Step(node, call))

    def new_value(self, name: str, dtype: DType, shape: tuple[int, ...], const: np.ndarray | None = None) -> Value:
        value = self.graph.values[name] = Value(name, dtype, shape, const)
        return value

    def new_label(self) -> int:
        self.label_num += 1
        return self.label_num - 1

    def root(self, name: str) -> str:
        """The value that owns `name`'s bytes: `name` itself, or what it is a view of."""
        while name in self.views:
            name = self.views[name]
        return name


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    a = np.ascontiguousarray(a)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.reshape(-1).view(np.uint8),
                                                                        b.reshape(-1).view(np.uint8))
