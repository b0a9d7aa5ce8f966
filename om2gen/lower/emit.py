"""Nodes → steps: each node's op lowers itself (ops/*.py lower()); an If becomes a switch over
its two branches, a gear model's Case a switch over its gears; a custom operator's model inputs
are staged first."""
from __future__ import annotations

from ..ir import dtypes, symbolic
from ..ir.graph import CASE_IO, ORIGIN_DIMS, REGIONS, Node, Value
from ..ir.program import Alias, Control, CustomCall, GearTable, KernelCall
from ..ops import registry
from ..ops.elementwise import copy_call, elementwise_call
from . import bind
from .state import Lowering


def emit(state: Lowering, nodes: list[Node]) -> None:
    graph = state.graph
    for node in nodes:
        if REGIONS in node.attrs:
            (_emit_case if node.op_type == "Case" else _emit_if)(state, node)
            continue
        op = registry.lookup(node)
        ins = [graph.values[n] if n else None for n in node.inputs]
        outs = [graph.values[n] for n in node.outputs if n]
        try:
            if all(v.size == 0 for v in outs):
                continue  # empty outputs: nothing to compute, nothing to launch
            result = op.lower(node, ins, outs, state.ctx)
        except symbolic.Undecidable as exc:   # a dynamic model's op whose lowering needs what the run decides
            state.refused.append(f"{node.name} ({node.op_type}): its lowering asks {exc.question!r}, which only "
                                 "the run answers")
            continue
        if isinstance(result, Alias):
            state.views[node.outputs[0]] = result.source
            state.view_nodes[node.outputs[0]] = node.name
        elif isinstance(result, CustomCall):
            _emit_custom(state, node, result)
        else:
            for call in (result if isinstance(result, list) else [result]):
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
