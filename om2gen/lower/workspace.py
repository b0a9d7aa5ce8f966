"""The workspace: which tensors the steps make live there and for how long, and each task's
scratch region, planned into one arena by lower/memplan.py."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.program import Control, KernelCall, PlannedBuffer, TilingCall
from . import dynamic, memplan
from .state import Lowering


def scratch_key(task: int) -> str:
    """The workspace key of task `task`'s scratch region ("::" cannot start a value name)."""
    return f"::scratch{task}"


@dataclass
class Workspace:
    offsets: dict[str, int]         # by value name (the view-free root) or scratch_key
    size: int
    buffers: list[PlannedBuffer]    # by offset, then writer, then name


def plan(state: Lowering, output_of: dict[str, int], constants: dict) -> Workspace:
    """Every value a step writes or reads that is no model input, output or constant lives in
    the workspace from its writer to its last reader, or across a whole loop it lives into or
    out of (_across_loops). `output_of`: lower/bind.py's binding;
    `constants`: lower/constants.py's, by name."""
    values = state.graph.values
    inputs = state.input_index
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for t, step in enumerate(state.steps):
        call = step.call
        if isinstance(call, TilingCall):
            continue
        reads = [call.index] if isinstance(call, Control) else call.inputs
        for name in reads:
            if name:
                last[state.root(name)] = t
        for name in ([] if isinstance(call, Control) else call.outputs):
            if name:   # "": an omitted custom-op output
                first.setdefault(state.root(name), t)
                # a later writer keeps it too (a Loop's LoopNext writes cond_in, which no body step may read)
                last[state.root(name)] = max(last.get(state.root(name), t), t)
    for r, t in last.items():
        if r not in first and r not in inputs and r not in output_of and r not in constants and \
                r not in state.model_buffers:   # (a load task's output: the model's own buffer)
            # an empty tensor whose producer was skipped (nothing to compute) read by a node whose
            # output is not empty (a Pad of it): it needs an address, never bytes
            assert values[r].size == 0, f"{r!r} is read but nothing writes it"
            first[r] = t
    # a dynamic model's tensors take the most bytes their ranges give (lower/dynamic.py)
    buffers = [memplan.Buffer(r, dynamic.max_bytes(values[r].nbytes, f"tensor {r!r}"), t, max(t, last.get(r, t)))
               for r, t in first.items() if r not in output_of and r not in inputs]
    for t, step in enumerate(state.steps):
        if isinstance(step.call, KernelCall) and step.call.workspace:
            buffers.append(memplan.Buffer(scratch_key(t), step.call.workspace, t, t))
        if isinstance(step.call, TilingCall):   # written by the step, read by its kernel's
            buffers.append(memplan.Buffer(dynamic.tiling_key(step.call.kernel_step), 8 * (1 + len(step.call.fields)),
                                          t, step.call.kernel_step))
    if dynamic.is_dynamic(state):    # the symbols: bound before the replay, read by every tiling step
        buffers.append(memplan.Buffer(dynamic.SYMBOLS, 8 * max(1, len(dynamic.symbols(state))), 0,
                                      max(0, len(state.steps) - 1)))
    _across_loops(buffers, state.loops)
    offsets, size = memplan.plan(buffers)
    planned = sorted((PlannedBuffer(b.key, offsets[b.key], b.size, b.first, b.last) for b in buffers),
                     key=lambda b: (b.offset, b.first_task, b.name))
    return Workspace(offsets, size, planned)


def _across_loops(buffers: list[memplan.Buffer], loops: list[tuple[int, int]]) -> None:
    """A loop's steps [lo, hi] run again and again, so a buffer live at any of them and also
    before or after the loop (an outer value the body reads, a carried input, a scan output, the
    loop's index) is live across all of them: otherwise a step early in the body could reuse
    bytes that only a later step of the previous iteration, or a step after the loop, still
    needs. A buffer written and read within one iteration stays as it is (the body writes it
    again before reading it). Loops innermost first, so an extended range meets the outer loops."""
    for lo, hi in loops:
        for b in buffers:
            if b.first <= hi and b.last >= lo and not (lo <= b.first and b.last <= hi):
                b.first, b.last = min(b.first, lo), max(b.last, hi)
