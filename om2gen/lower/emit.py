"""Nodes → steps: each node's op lowers itself (ops/*.py lower()); an If becomes a switch over
its two branches; a custom operator's model inputs are staged first."""
from __future__ import annotations

from ..ir import dtypes
from ..ir.graph import REGIONS, Node, Value
from ..ir.program import Alias, Control, CustomCall, KernelCall
from ..ops import registry
from ..ops.elementwise import copy_call, elementwise_call
from .state import Lowering


def emit(state: Lowering, nodes: list[Node]) -> None:
    graph = state.graph
    for node in nodes:
        if REGIONS in node.attrs:
            _emit_if(state, node)
            continue
        op = registry.lookup(node)
        ins = [graph.values[n] if n else None for n in node.inputs]
        outs = [graph.values[n] for n in node.outputs if n]
        if all(v.size == 0 for v in outs):
            continue  # empty outputs: nothing to compute, nothing to launch
        result = op.lower(node, ins, outs, state.ctx)
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
        state.add(node, Control("label", [label]))
        emit(state, nodes)
        for src, dst in zip(names, node.outputs):
            if dst:
                state.add(node, copy_call(values[src], values[dst]))
        if key == "then":
            state.add(node, Control("goto", [end_label], index.name))
    state.add(node, Control("label", [end_label]))


def branch_index_call(node: Node, cond: Value, index: Value) -> KernelCall:
    """index = cond ? 0 (then) : 1 (else), as the uint32 LABEL_SWITCH_BY_INDEX reads."""
    return elementwise_call(node, "BranchIndex", [Value(cond.name, cond.dtype, ())], index, "x0 ? 0u : 1u")
