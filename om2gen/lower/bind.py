"""Graph outputs → the caller's output buffers: the producer of an output writes it in place
where it can; otherwise a copy step writes the output's own buffer."""
from __future__ import annotations

from ..ir import symbolic
from ..ops.elementwise import copy_call
from .state import Lowering, OutputCopy


def bind_outputs(state: Lowering) -> dict[str, int]:
    """Appends the copies needed and returns the output index of each value a task writes into
    an output buffer. A producer cannot write in place when the output's bytes are a model input
    or a constant, already another output's, or a custom operator's (those live at fixed
    addresses: lower/emit.py). A gear model's outputs were bound gear by gear (bind_branch)."""
    if state.gears is not None:
        return dict(state.branch_outputs)
    return _bind(state, state.graph.outputs)


def bind_branch(state: Lowering, names: list[str]) -> None:
    """A gear's outputs (names[j] writes output j), bound where the gear's steps are: only one
    gear runs, so each gear's producers write the same output buffers, and a copy a gear needs
    is one of its own steps."""
    state.branch_outputs.update(_bind(state, names))


def _bind(state: Lowering, names: list[str]) -> dict[str, int]:
    values = state.graph.values
    output_of: dict[str, int] = {}
    for j, name in enumerate(names):
        r = state.root(name)
        if symbolic.decided(lambda: values[name].size == 0, False):
            continue  # an empty output: nothing to write (a data-dependent count may be 0 or not)
        if r in state.input_index or values[r].is_const or r in output_of or r in state.custom_outputs:
            dst = values[name]
            copy = state.new_value(f"{name}::out{j}", dst.dtype, dst.shape)
            state.add(OutputCopy(f"copy_to_output:{name}"), copy_call(values[r], copy))
            output_of[copy.name] = j
        else:
            output_of[r] = j
    return output_of
