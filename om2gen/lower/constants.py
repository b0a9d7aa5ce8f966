"""Constants: arrays an op derives at compile time (a folded BatchNorm's scales) become named
values, and every constant a step reads gets its place in the one constants blob."""
from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass

import numpy as np

from ..ir.dtypes import from_numpy
from ..ir.program import Constant, Control, CustomCall, Derived
from . import memplan
from .state import Lowering


def name_derived(state: Lowering) -> None:
    """Replaces each derived array among the kernel calls' inputs by a constant value of its own,
    so that every later stage sees value names only, and records how it was derived: a Derived
    says from what and how; of a bare array only the node is known, so its constant inputs are
    named as what it may come from."""
    graph = state.graph
    for step in state.steps + state.load_steps:
        call = step.call
        if isinstance(call, (Control, CustomCall)):
            continue
        for i, item in enumerate(call.inputs):
            if isinstance(item, Derived):
                arr, sources, transform = item.array, item.sources, item.transform
            elif isinstance(item, np.ndarray):
                node = step.node
                arr, transform = item, f"laid out by {node.op_type} {node.name!r} for its kernel"
                sources = [n for n in getattr(node, "inputs", []) if n and graph.values[n].is_const]
            else:
                continue
            name = f"{step.node.name}.packed_input{i}"
            for k in itertools.count(2):    # a node lowered to several calls: each call's arrays their own
                if name not in graph.values:
                    break
                name = f"{step.node.name}.packed_input{i}_{k}"
            value = state.new_value(name, from_numpy(arr.dtype), tuple(arr.shape), np.asarray(arr, order="C"))
            graph.derive(value.name, sources, transform)
            call.inputs[i] = value.name


@dataclass
class Blob:
    constants: dict[str, Constant]      # by value name, in the order the steps first read them
    size: int                           # bytes, each constant's place aligned (memplan.align)


def place(state: Lowering) -> Blob:
    """The constants the steps read, in first-use order, each aligned in one blob. Constants of
    equal bytes share one place: the same packed weights derived for each gear of a model (or
    two equal initializers) are stored once."""
    constants: dict[str, Constant] = {}
    placed: dict[tuple, list[Constant]] = {}    # (dtype, digest) -> the constants placed with it
    end = 0
    for step in state.steps + state.load_steps:   # (the load tasks' raw weights after the run's)
        for name in ([] if isinstance(step.call, Control) else step.call.inputs):
            r = state.root(name) if name else name
            if r and state.graph.values[r].is_const and r not in constants:
                arr = np.ascontiguousarray(state.graph.values[r].const)
                key = (arr.dtype.str, arr.nbytes, zlib.crc32(_bytes(arr)))     # equal bytes confirmed below
                same = next((c for c in placed.get(key, []) if np.array_equal(_bytes(c.array), _bytes(arr))), None)
                origin = state.graph.origin(r)
                if same is not None:
                    constants[r] = Constant(r, arr, same.offset, origin.sources, origin.transforms)
                    continue
                constants[r] = Constant(r, arr, end, origin.sources, origin.transforms)
                placed.setdefault(key, []).append(constants[r])
                end = memplan.align(end + arr.nbytes)
    return Blob(constants, end)


def _bytes(arr: np.ndarray) -> np.ndarray:
    """A contiguous array's bytes as a flat uint8 view (hashed and compared without a copy)."""
    return arr.reshape(-1).view(np.uint8)
