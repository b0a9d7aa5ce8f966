"""The graph om2gen compiles: typed values with shapes, nodes in topological order.

Constants are kept as numpy arrays on their values. A dim is an int, or in a dynamic model
(docs/dynamic-shapes.md) an ir.symbolic.Expr over the model's dynamic dims; a gear model's Case
holds one static graph per gear (frontend/multi_batch.py). An int tensor computed from dynamic
dims (Shape, and the Gather/Concat/Unsqueeze... of a shape sub-graph) keeps its elements as
`dims`: known at compile time as expressions, though not constants.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import symbolic
from .dtypes import DType

# node.attrs key of a control-flow node's regions (ops/control.py): {"then": (nodes, output
# names), "else": (...)}
REGIONS = "_regions"
# a gear model's Case node (frontend/multi_batch.py), besides its regions "batch_<i>": per gear
# {gear value: the model input or output it stands for}, and each user input's dims with -1
# where a gear decides
CASE_IO = "_gear_io"
ORIGIN_DIMS = "_origin_input_dims"
# a Loop node (ops/loop.py), besides its region "body" (its nodes, and the values of the body's
# outputs: cond, the carried values, the scan values): a LoopIO
LOOP_IO = "_loop_io"


@dataclass
class Value:
    name: str
    dtype: DType
    shape: tuple            # ints; Exprs for a dynamic model's dynamic dims
    const: np.ndarray | None = None
    dims: np.ndarray | None = None      # an int tensor's elements as ints and Exprs (see the module doc)
    bounds: tuple | None = None         # a run-time number's (least, most), where known (frontend/value_bounds.py)

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def is_static(self) -> bool:
        """Whether every dim is known at compile time."""
        return all(isinstance(d, int) for d in self.shape)

    @property
    def size(self):
        """The element count: an int, or an Expr for a dynamic shape."""
        if self.is_static:
            return int(np.prod(self.shape, dtype=np.int64))
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def describe(self) -> str:
        return f"{self.dtype.name}[{','.join(str(d) for d in self.shape)}]"


@dataclass
class LoopIO:
    """What a Loop node's body reads and how often it runs. inputs: the values standing for the
    body's inputs (iteration_num, cond, then the loop-carried values), written by the loop
    itself; carried: how many values are carried; trip_count: how many times the body runs when
    that is known at compile time (None: decided at run time); cond_exits: whether the body's
    cond output can end the loop (ONNX: not when the Loop has no cond input)."""
    inputs: list[str]
    carried: int
    trip_count: int | None
    cond_exits: bool


@dataclass
class Node:
    name: str
    op_type: str
    inputs: list[str]            # "" marks an absent optional input
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""
    opset: int = 0
    # The source nodes (as imported) this node computes since a fusion pass folded them into it,
    # in order (passes/rewrite.py: sources); empty for a node no pass merged. IR metadata, not an
    # attribute: the op never reads it, the debug graph and the task labels do.
    fused_from: list[str] = field(default_factory=list)

    def input(self, i: int) -> str:
        return self.inputs[i] if i < len(self.inputs) else ""


@dataclass(frozen=True)
class Derivation:
    """How a constant the compiler made came about: from which values (initializers, model
    inputs whose shape it holds, or other derived constants), by which transform."""
    sources: tuple[str, ...]
    transform: str              # "BatchNormalization 'bn1' folded into Conv 'conv1' weights", ...


@dataclass(frozen=True)
class Origin:
    """A constant traced back to the model: the initializers (or inputs) it comes from and every
    transform applied on the way, in order; an initializer itself has no transforms."""
    sources: tuple[str, ...]
    transforms: tuple[str, ...]


@dataclass(frozen=True)
class Dequantized:
    """A constant the importer folded from a DequantizeLinear of constants, kept as the node and
    its input values were: the float constant is the model's own arithmetic, and a pass that
    folds QDQ into an integer kernel (passes/qdq_gemm.py) reads the quantized weight from here."""
    node: Node
    inputs: tuple               # the node's input Values (None for an absent one)


@dataclass
class Graph:
    name: str
    values: dict[str, Value]
    nodes: list[Node]
    inputs: list[str]
    outputs: list[str]
    opsets: dict[str, int]
    source_digest: str = ""
    producer: str = ""
    # op type of every node as imported, by name: a fused node's fused_from lists the source nodes
    # it computes, and its task label names their op types
    source_ops: dict[str, str] = field(default_factory=dict)
    # constants the compiler made (folded nodes, fused weights, packed layouts), by value name:
    # how each came about, so that every constant can be traced back to the model (origin())
    derivations: dict[str, Derivation] = field(default_factory=dict)
    # constants folded from DequantizeLinear at import, by value name (Dequantized)
    dequantized: dict[str, Dequantized] = field(default_factory=dict)

    def derive(self, name: str, sources, transform: str) -> None:
        self.derivations[name] = Derivation(tuple(s for s in sources if s), transform)

    def origin(self, name: str) -> Origin:
        """The initializers (or model inputs) behind constant `name` and the transforms that made it."""
        sources: list[str] = []
        transforms: list[str] = []
        seen: set[str] = set()

        def walk(n: str) -> None:
            if n in seen:
                return
            seen.add(n)
            d = self.derivations.get(n)
            if d is None:
                if n not in sources:
                    sources.append(n)
                return
            for s in d.sources:
                walk(s)
            transforms.append(d.transform)
        walk(name)
        return Origin(tuple(sources), tuple(transforms))

    def note_source_ops(self) -> None:
        """Records the op type of every node (If branches' too) before the passes rewrite them."""
        def walk(nodes):
            for n in nodes:
                self.source_ops.setdefault(n.name, n.op_type)
                for region_nodes, _ in n.attrs.get(REGIONS, {}).values():
                    walk(region_nodes)
        walk(self.nodes)

    def value(self, name: str) -> Value:
        return self.values[name]

    def consumers(self) -> dict[str, list[Node]]:
        users: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in node.inputs:
                if name:
                    users.setdefault(name, []).append(node)
        return users

    def verify(self, stage: str) -> None:
        """The IR invariants every pass must keep; a failure is an om2gen bug, reported with context."""
        defined = set(self.inputs) | {n for n, v in self.values.items() if v.is_const or v.dims is not None}
        for node in self.nodes:
            for name in node.inputs:
                assert not name or name in defined, f"after {stage}: node {node.name!r} reads undefined {name!r}"
            for name in node.outputs:
                if not name:
                    continue  # an optional output the model does not use
                assert name in self.values, f"after {stage}: output {name!r} of {node.name!r} has no value"
                assert all((isinstance(d, int) and d >= 0) or isinstance(d, symbolic.Expr)
                           for d in self.values[name].shape), \
                    f"after {stage}: {name!r} has a malformed shape {self.values[name].shape}"
                defined.add(name)
        for name in self.outputs:
            assert name in defined, f"after {stage}: graph output {name!r} is never produced"
