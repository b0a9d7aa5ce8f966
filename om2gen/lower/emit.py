"""Nodes → steps: each node's op lowers itself (ops/*.py lower()); an If becomes a switch over
its two branches, a gear model's Case a switch over its gears, a Loop a body between labels with
a switch back to its start; a custom operator's model inputs are staged first."""
from __future__ import annotations

from ..ir import dtypes, symbolic
from ..ir.graph import CASE_IO, LOOP_IO, ORIGIN_DIMS, REGIONS, Node, Value
from ..ir.program import Alias, Control, CustomCall, GearTable, KernelCall
from ..ops import loop, registry
from ..ops.elementwise import copy_call, elementwise_call
from . import bind
from .state import Lowering


def emit(state: Lowering, nodes: list[Node]) -> None:
    graph = state.graph
    for node in nodes:
        if REGIONS in node.attrs:
            {"Case": _emit_case, "Loop": _emit_loop}.get(node.op_type, _emit_if)(state, node)
            continue
        op = registry.lookup(node)
        ins = [graph.values[n] if n else None for n in node.inputs]
        outs = [graph.values[n] for n in node.outputs if n]
        try:
            if all(symbolic.decided(lambda v=v: v.size == 0, False) for v in outs):   # (a count may be 0)
                continue  # empty outputs: nothing to compute, nothing to launch
            result = op.lower(node, ins, outs, state.ctx)
        except symbolic.Undecidable as exc:   # a dynamic model's op whose lowering needs what the run decides
            state.refused.append(f"{node.name} ({node.op_type}): its lowering asks {exc.question!r}, which only "
                                 "the run answers")
            continue
        except TypeError:   # arithmetic an Expr does not take (a float division of a size, numpy on it)
            if all(v is None or v.is_static for v in [*ins, *outs]):
                raise
            state.refused.append(f"{node.name} ({node.op_type}): its lowering computes with sizes in a way that "
                                 "takes no dynamic ones yet")
            continue
        if isinstance(result, Alias):
            state.views[node.outputs[0]] = result.source
            state.view_nodes[node.outputs[0]] = node.name
        elif isinstance(result, CustomCall):
            _emit_custom(state, node, result)
        else:
            for call in (result if isinstance(result, list) else [result]):
                for temp in getattr(call, "temps", ()):
                    state.new_value(temp.name, temp.dtype, temp.shape)
                state.add(node, call)


def _emit_custom(state: Lowering, node: Node, call: CustomCall) -> None:
    """A custom op's Execute runs once, at capture, so its tensors need fixed addresses: a model
    input it reads is first copied into the workspace; its outputs never become the caller's
    output buffers (a copy follows instead: lower/bind.py)."""
    values = state.graph.values
    for i, name in enumerate(call.inputs):
        r = state.root(name)
        if r in state.input_index:
            staged = state.new_value(f"{node.name}:staged_input{i}", values[r].dtype, values[name].shape)
            state.add(node, copy_call(values[r], staged))
            call.inputs[i] = staged.name
    state.custom_outputs.update(n for n in call.outputs if n)
    state.add(node, call)


def _emit_if(state: Lowering, node: Node) -> None:
    """switch(index) -> then: ... goto end | else: ... | end. Both branches write the If's
    outputs, so what follows reads them wherever the replay went."""
    values = state.graph.values
    index = state.new_value(f"{node.name}:branch_index", dtypes.BY_NAME["uint32"], ())
    state.add(node, branch_index_call(node, values[node.inputs[0]], index))
    then_label, else_label, end_label = state.new_label(), state.new_label(), state.new_label()
    state.add(node, Control("switch", [then_label, else_label], index.name))
    for key, label in (("then", then_label), ("else", else_label)):
        nodes, names = node.attrs[REGIONS][key]
        state.add(node, Control("label", [label], note=key))
        emit(state, nodes)
        for src, dst in zip(names, node.outputs):
            if dst:
                state.add(node, copy_call(values[src], values[dst]))
        if key == "then":
            state.add(node, Control("goto", [end_label], index.name, note="end"))
    state.add(node, Control("label", [end_label], note="end"))


def _emit_loop(state: Lowering, node: Node) -> None:
    """carried inputs = initial values; LoopEnter; switch(index) -> body | exit
       body: the body's steps; each scan value into its row; LoopNext; carried inputs = carried
             outputs; switch(index) -> body | exit
       exit: the Loop's carried outputs are views of the carried inputs (the last iteration's).
    The updates are one parallel assignment: a value they read that lives in a body input
    another update overwrites (a carried output that is another carried input, a cond output
    that is a carried input) is copied aside first. The steps between the two labels are a
    loop span (state.loops): the workspace keeps alive across all of it whatever lives into or
    out of it."""
    values = state.graph.values
    io = node.attrs[LOOP_IO]
    nodes, names = node.attrs[REGIONS]["body"]
    n = io.carried
    iteration, cond_in = values[io.inputs[0]], values[io.inputs[1]]
    carried = [values[x] for x in io.inputs[2:]]
    trips = values[node.inputs[0]] if node.inputs[0] else None
    cond = values[node.inputs[1]] if node.inputs[1] else None
    index = state.new_value(f"{node.name}:loop_index", dtypes.BY_NAME["uint32"], ())
    for src, dst in zip(node.inputs[2:2 + n], carried):
        if dst.size:
            state.add(node, copy_call(values[src], dst))
    count = loop.scan_count(node, values)   # scan rows the run decides (a data-dependent count)
    state.add(node, loop.control_call(node, first=True, iteration=iteration, cond_in=cond_in, index=index,
                                      max_trips=trips, cond=cond, cond_exits=cond is not None, count_symbol=count))
    body_label, exit_label = state.new_label(), state.new_label()
    state.add(node, Control("switch", [body_label, exit_label], index.name, note="loop"))
    start = len(state.steps)
    state.add(node, Control("label", [body_label], note="body"))
    emit(state, nodes)
    for src, dst in zip(names[1 + n:], node.outputs[n:]):
        if dst and symbolic.decided(lambda: values[dst].size != 0, True):
            state.add(node, loop.scan_write_call(node, values[src], iteration, values[dst]))
    overwritten = {iteration.name, cond_in.name, *(c.name for c in carried)}

    def read(name: str, into: Value, tag: str) -> Value:
        """What the update of `into` reads for `name`: itself, or a copy taken before any update."""
        r = state.root(name)
        if r == into.name or r not in overwritten:
            return values[name]
        staged = state.new_value(f"{node.name}:{tag}", values[name].dtype, values[name].shape)
        state.add(node, copy_call(values[name], staged))
        return staged

    cond_out = read(names[0], cond_in, "staged_cond")
    updates = [(read(src, dst, f"staged_carried{j}"), dst) for j, (src, dst) in enumerate(zip(names[1:1 + n], carried))
               if dst.size and state.root(src) != dst.name]
    state.add(node, loop.control_call(node, first=False, iteration=iteration, cond_in=cond_in, index=index,
                                      max_trips=trips, cond=cond_out, cond_exits=io.cond_exits, count_symbol=count))
    for src, dst in updates:
        state.add(node, copy_call(src, dst))
    state.add(node, Control("switch", [body_label, exit_label], index.name, note="next"))
    state.loops.append((start, len(state.steps) - 1))
    state.add(node, Control("label", [exit_label], note="exit"))
    for out, dst in zip(node.outputs[:n], carried):
        if out:
            state.views[out] = dst.name
            state.view_nodes[out] = node.name


def _emit_case(state: Lowering, node: Node) -> None:
    """A gear model (frontend/multi_batch.py): switch(gear) -> batch_0: ... goto end | batch_1:
    ... | ... | end. A gear's inputs are views of the model's inputs and its outputs are written
    into the model's output buffers, so a gear costs what the static model of its shapes does."""
    values = state.graph.values
    regions, io = node.attrs[REGIONS], node.attrs[CASE_IO]
    index = node.inputs[0]
    labels = [state.new_label() for _ in regions]
    end_label = state.new_label()
    state.add(node, Control("switch", labels, index))
    in_shapes, out_shapes = [], []
    for g, (key, (nodes, outs)) in enumerate(regions.items()):
        state.add(node, Control("label", [labels[g]], note=key))
        outer_of = io[g]
        for gear_value, outer in outer_of.items():
            if outer in state.input_index:
                state.views[gear_value] = outer
                state.view_nodes[gear_value] = node.name
        emit(state, nodes)
        bind.bind_branch(state, outs)
        if g < len(regions) - 1:
            state.add(node, Control("goto", [end_label], index, note="end"))
        gear_of = {outer: v for v, outer in outer_of.items()}
        in_shapes.append([values[gear_of[n]].shape if n in gear_of else values[n].shape for n in state.graph.inputs])
        out_shapes.append([values[o].shape for o in outs])
    state.add(node, Control("label", [end_label], note="end"))
    state.gears = GearTable(node.attrs["dynamic_type"], [list(node.attrs[f"pred_value_{g}"]) for g in range(len(regions))],
                            list(node.attrs["user_designate_shape_order"]), dict(node.attrs[ORIGIN_DIMS]),
                            in_shapes, out_shapes)


def branch_index_call(node: Node, cond: Value, index: Value) -> KernelCall:
    """index = cond ? 0 (then) : 1 (else), as the uint32 LABEL_SWITCH_BY_INDEX reads."""
    return elementwise_call(node, "BranchIndex", [Value(cond.name, cond.dtype, ())], index, "x0 ? 0u : 1u")
