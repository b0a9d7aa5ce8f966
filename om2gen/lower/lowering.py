"""Graph → Program: kernel calls per node, output binding, constants, memory plan, args layout."""
from __future__ import annotations

import re
import struct

import numpy as np
import onnx

from ..ir import dtypes
from ..ir.graph import REGIONS, Graph, Value
from ..ir.program import (Alias, ArgRef, Constant, Control, CustomCall, CustomOpDef, GraphJson, IoDesc, Kernel,
                          KernelCall, LowerContext, PlannedBuffer, Program, Task, TensorDesc, View)
from ..ir.tasks import ArgKind, CcKernelType, ModelTaskType, OpDispatchType
from ..ops import registry
from ..ops.elementwise import copy_call
from . import memplan


def lower_graph(graph: Graph, ctx: LowerContext) -> Program:
    calls: list[tuple[object, KernelCall | Control]] = []
    alias: dict[str, str] = {}
    alias_node: dict[str, str] = {}
    labels = [0]   # next label id

    def new_label() -> int:
        labels[0] += 1
        return labels[0] - 1

    def emit(nodes) -> None:
        for node in nodes:
            if REGIONS in node.attrs:
                emit_if(node)
                continue
            op = registry.lookup(node)
            ins = [graph.values[n] if n else None for n in node.inputs]
            outs = [graph.values[n] for n in node.outputs if n]
            if all(v.size == 0 for v in outs):
                continue  # empty outputs: nothing to compute, nothing to launch
            result = op.lower(node, ins, outs, ctx)
            if isinstance(result, Alias):
                alias[node.outputs[0]] = result.source
                alias_node[node.outputs[0]] = node.name
            elif isinstance(result, CustomCall):
                emit_custom(node, result)
            else:
                for call in (result if isinstance(result, list) else [result]):
                    calls.append((node, call))

    custom_outputs: set[str] = set()

    def emit_custom(node, call: CustomCall) -> None:
        """A custom op's Execute runs once, at capture, so its tensors need fixed addresses: a
        model input it reads is first copied into the workspace; its outputs never become the
        caller's output buffers (a copy follows instead, see the output binding below)."""
        for i, name in enumerate(call.inputs):
            r = root(name)
            if r in graph_inputs:
                staged = f"{node.name}:staged_input{i}"
                graph.values[staged] = Value(staged, graph.values[r].dtype, graph.values[name].shape)
                calls.append((node, copy_call(graph.values[r], graph.values[staged])))
                call.inputs[i] = staged
        custom_outputs.update(n for n in call.outputs if n)
        calls.append((node, call))

    def emit_if(node) -> None:
        """switch(index) -> then: ... goto end | else: ... | end. Both branches write the If's
        outputs, so what follows reads them wherever the replay went."""
        cond = graph.values[node.inputs[0]]
        index = f"{node.name}:branch_index"
        graph.values[index] = Value(index, dtypes.BY_NAME["uint32"], ())
        calls.append((node, branch_index_call(node, cond, graph.values[index])))
        then_label, else_label, end_label = new_label(), new_label(), new_label()
        calls.append((node, Control("switch", [then_label, else_label], index)))
        for key, label in (("then", then_label), ("else", else_label)):
            nodes, names = node.attrs[REGIONS][key]
            calls.append((node, Control("label", [label])))
            emit(nodes)
            for src, dst in zip(names, node.outputs):
                if dst:
                    calls.append((node, copy_call(graph.values[src], graph.values[dst])))
            if key == "then":
                calls.append((node, Control("goto", [end_label], index)))
        calls.append((node, Control("label", [end_label])))

    graph_inputs = set(graph.inputs)

    def root(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    emit(graph.nodes)

    # Derived constants (e.g. folded BatchNorm scales) become named constant values.
    for node, call in calls:
        if isinstance(call, (Control, CustomCall)):
            continue
        for i, item in enumerate(call.inputs):
            if isinstance(item, np.ndarray):
                name = f"{node.name}.packed_input{i}"
                graph.values[name] = Value(name, _dtype_of(item), tuple(item.shape), np.asarray(item, order="C"))
                call.inputs[i] = name

    # Graph outputs are written in place by their producer when possible; otherwise copied.
    inputs = {n: i for i, n in enumerate(graph.inputs)}
    output_of: dict[str, int] = {}
    for j, name in enumerate(graph.outputs):
        r = root(name)
        if graph.values[name].size == 0:
            continue  # an empty output: nothing to write
        if r in inputs or graph.values[r].is_const or r in output_of or r in custom_outputs:
            src, dst = graph.values[r], graph.values[name]
            copy_name = f"{name}::out{j}"
            graph.values[copy_name] = Value(copy_name, dst.dtype, dst.shape)
            call = copy_call(src, graph.values[copy_name])
            calls.append((_OutputCopyNode(name), call))
            output_of[copy_name] = j
        else:
            output_of[r] = j

    # Constants, in first-use order, each aligned in one blob.
    constants: dict[str, Constant] = {}
    blob_end = 0
    for _, call in calls:
        for name in ([] if isinstance(call, Control) else call.inputs):
            r = root(name) if name else name
            if r and graph.values[r].is_const and r not in constants:
                arr = graph.values[r].const
                constants[r] = Constant(r, arr, blob_end)
                blob_end = memplan.align(blob_end + arr.nbytes)

    # Workspace plan over the tensors kernels produce, plus each task's scratch region.
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for t, (_, call) in enumerate(calls):
        reads = [call.index] if isinstance(call, Control) else call.inputs
        for name in reads:
            if name:
                last[root(name)] = t
        for name in ([] if isinstance(call, Control) else call.outputs):
            if name:   # "": an omitted custom-op output
                first.setdefault(root(name), t)
    for r, t in last.items():
        if r not in first and r not in inputs and r not in output_of and r not in constants:
            # an empty tensor whose producer was skipped (nothing to compute) read by a node whose
            # output is not empty (a Pad of it): it needs an address, never bytes
            assert graph.values[r].size == 0, f"{r!r} is read but nothing writes it"
            first[r] = t
    buffers = []
    for r, t in first.items():
        if r in output_of or r in inputs:
            continue
        buffers.append(memplan.Buffer(r, graph.values[r].nbytes, t, max(t, last.get(r, t))))
    for t, (_, call) in enumerate(calls):
        if isinstance(call, KernelCall) and call.workspace:
            buffers.append(memplan.Buffer(f"::scratch{t}", call.workspace, t, t))
    offsets, work_size = memplan.plan(buffers)
    planned = sorted((PlannedBuffer(b.key, offsets[b.key], b.size, b.first, b.last) for b in buffers),
                     key=lambda b: (b.offset, b.first_task, b.name))

    def ref(name: str) -> ArgRef:
        r = root(name)
        if r in inputs:
            return ArgRef(ArgKind.INPUT, inputs[r], 0)
        if r in output_of:
            return ArgRef(ArgKind.OUTPUT, output_of[r], 0)
        if r in constants:
            return ArgRef(ArgKind.CONSTANT, 0, constants[r].offset)
        return ArgRef(ArgKind.WORKSPACE, 0, offsets[r])

    def placed(name: str) -> ArgRef | None:
        r = root(name)
        return ref(r) if r in inputs or r in output_of or r in constants or r in offsets else None

    kernels: list[Kernel] = []
    kernel_index: dict[str, int] = {}
    tasks: list[Task] = []
    args_offset = 0
    label_lists: list[list[int]] = []
    customs: list[CustomOpDef] = []
    for t, (node, call) in enumerate(calls):
        if isinstance(call, CustomCall):
            task = _custom_task(call, node, t, customs, ref, args_offset, graph)
            args_offset += memplan.align(task.args_size, 8)
            tasks.append(task)
            continue
        if isinstance(call, Control):
            task = _control_task(call, node, t, label_lists, ref, args_offset)
            args_offset += memplan.align(task.args_size, 8)
            tasks.append(task)
            continue
        kernel = ctx.render_kernel(call, ctx)
        if kernel.entry not in kernel_index:
            kernel_index[kernel.entry] = len(kernels)
            kernels.append(kernel)
        args = [ref(n) for n in call.inputs if n] + [ref(n) for n in call.outputs]
        roles = ["i"] * len([n for n in call.inputs if n]) + ["o"] * len(call.outputs)
        slot_bytes = [graph.values[n].nbytes for n in call.inputs if n] + [graph.values[n].nbytes for n in call.outputs]
        if call.workspace:
            args.append(ArgRef(ArgKind.WORKSPACE, 0, offsets[f"::scratch{t}"]))
            roles.append("ws")
            slot_bytes.append(call.workspace)
        tiling = struct.pack(f"<{len(call.tiling)}q", *call.tiling.values())
        task = Task(task_type=ModelTaskType.MODEL_TASK_KERNEL, dispatch_type=OpDispatchType.AICORE,
                    kernel_type=CcKernelType.TE, kernel=kernel_index[kernel.entry], block_dim=call.block_dim,
                    args=args, tiling=tiling, op_name=node.name, op_type=node.op_type,
                    label=f"k{t:03d}_{task_name(node, call.name, graph)}",
                    inputs_desc=[_describe(graph, n) for n in call.inputs if n],
                    outputs_desc=[_describe(graph, n) for n in call.outputs],
                    attrs_desc=_attrs_desc(node), args_offset=args_offset, roles=roles, slot_bytes=slot_bytes,
                    tiling_fields=list(call.tiling))
        args_offset += memplan.align(task.args_size, 8)
        tasks.append(task)

    def io(name: str) -> IoDesc:
        v = graph.values[name]
        return IoDesc(name, v.dtype.name, v.shape, v.nbytes)

    return Program(
        name=graph.name, inputs=[io(n) for n in graph.inputs], outputs=[io(n) for n in graph.outputs],
        kernels=kernels, tasks=tasks, constants=list(constants.values()), constants_size=blob_end,
        work_size=work_size, args_size=args_offset, source_digest=graph.source_digest, opsets=graph.opsets,
        graph_json=_graph_json(graph), label_num=labels[0], label_lists=label_lists, custom_ops=customs,
        buffers=planned, views=[View(v, src, root(v), alias_node[v], placed(v)) for v, src in sorted(alias.items())])


_FUSED_PREFIX = {"FusedElementwise": "Fused"}


def task_name(node, name: str, graph: Graph) -> str:
    """What a task's label calls it: the kernel call's name, then the op type of every source node
    a fusion folded into the node (its `nodes` attribute), in order: k005_Conv_BatchNormalization_
    Add_Relu. A node standing for the ones it covers (an element-wise group, a LayerNormalization
    pattern) is named by its kind and all of their op types."""
    covered = list(getattr(node, "attrs", {}).get("nodes") or [])
    if len(covered) < 2 and (not covered or covered[0] == node.name):
        return name
    ops = [re.sub(r"\W", "_", graph.source_ops.get(n, "")) or "_" for n in covered]
    if covered[0] == node.name:
        return "_".join([name] + ops[1:])
    return "_".join([_FUSED_PREFIX.get(node.op_type, node.op_type)] + ops)


def _custom_task(call: CustomCall, node, t: int, customs: list[CustomOpDef], ref, args_offset: int, graph) -> Task:
    """An omitted output position ("") keeps its place: desc OMITTED, a slot nobody reads."""
    from ..ir.dtypes import OMITTED
    names = call.inputs + call.outputs
    customs.append(CustomOpDef(op_type=call.op_type, bin_name=call.bin_name, blob=call.blob, library=call.library,
                               input_num=len(call.inputs), output_num=len(call.outputs),
                               descs=[TensorDesc(graph.values[n].dtype, graph.values[n].shape) if n
                                      else TensorDesc(OMITTED, ()) for n in names]))
    return Task(task_type=ModelTaskType.MODEL_TASK_CUSTOM_KERNEL, dispatch_type=OpDispatchType.CUSTOM_KERNEL,
                kernel_type=CcKernelType.CUSTOMIZED,
                args=[ref(n) if n else ArgRef(ArgKind.WORKSPACE, 0, 0) for n in names],
                op_name=node.name, op_type=node.op_type, label=f"k{t:03d}_{call.op_type}",
                inputs_desc=[_describe(graph, n) for n in call.inputs],
                outputs_desc=[_describe(graph, n) if n else "(omitted)" for n in call.outputs],
                attrs_desc=_attrs_desc(node), args_offset=args_offset,
                roles=["i"] * len(call.inputs) + ["o"] * len(call.outputs), label_ref=len(customs) - 1)


_CONTROL = {
    "label": (ModelTaskType.MODEL_TASK_LABEL_SET, OpDispatchType.LABEL_SET, "LabelSet"),
    "switch": (ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX, OpDispatchType.LABEL_SWITCH_BY_INDEX,
               "LabelSwitchByIndex"),
    "goto": (ModelTaskType.MODEL_TASK_STREAM_LABEL_GOTO, OpDispatchType.LABEL_GOTO_EX, "LabelGoto"),
}


def _control_task(call: Control, node, t: int, label_lists: list[list[int]], ref, args_offset: int) -> Task:
    task_type, dispatch, name = _CONTROL[call.kind]
    if call.kind == "label":
        label, args, inputs = call.labels[0], [], []
    else:
        label = len(label_lists)
        label_lists.append(list(call.labels))
        args, inputs = [ref(call.index)], [f"{call.index}: uint32[] (branch index)"]
    targets = ", ".join(f"L{x}" for x in call.labels)
    return Task(task_type=task_type, dispatch_type=dispatch, kernel_type=CcKernelType.INVALID, args=args,
                op_name=node.name, op_type=node.op_type, label=f"k{t:03d}_{name}", inputs_desc=inputs,
                attrs_desc=f"labels {targets}", args_offset=args_offset, roles=["i"] * len(args), label_ref=label)


def branch_index_call(node, cond: Value, index: Value) -> KernelCall:
    """index = cond ? 0 (then) : 1 (else), as the uint32 LABEL_SWITCH_BY_INDEX reads."""
    from ..ops.elementwise import elementwise_call
    return elementwise_call(node, "BranchIndex", [Value(cond.name, cond.dtype, ())], index, "x0 ? 0u : 1u")


class _OutputCopyNode:
    op_type = "Copy"
    attrs: dict = {}

    def __init__(self, output: str):
        self.name = f"copy_to_output:{output}"


def _dtype_of(arr: np.ndarray):
    from ..ir.dtypes import from_numpy
    return from_numpy(arr.dtype)


def _describe(graph: Graph, name: str) -> str:
    v = graph.values[name]
    return f"{name}: {v.describe()}{' (const)' if v.is_const else ''}"


def _attrs_desc(node) -> str:
    parts = []
    for k in sorted(a for a in node.attrs if not a.startswith("_")):
        v = node.attrs[k]
        if isinstance(v, np.ndarray):
            v = f"tensor{list(v.shape)}"
        elif isinstance(v, onnx.GraphProto):   # an If branch: its nodes are tasks of their own
            v = f"graph({len(v.node)} nodes)"
        parts.append(f"{k}={v}")
    return " ".join(parts)


def _attr_json(v):
    if isinstance(v, np.ndarray):
        return {"tensor": list(v.shape), "dtype": v.dtype.name}
    if isinstance(v, (list, tuple)):
        return [_attr_json(x) for x in v]
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    if isinstance(v, onnx.GraphProto):
        return {"graph": v.name, "nodes": len(v.node)}
    return str(v)


def _graph_json(graph: Graph) -> GraphJson:
    def val(name):
        v = graph.values[name]
        return {"name": name, "dtype": v.dtype.name, "shape": list(v.shape), "const": v.is_const}
    return {
        "name": graph.name,
        "opsets": graph.opsets,
        "inputs": [val(n) for n in graph.inputs],
        "outputs": [val(n) for n in graph.outputs],
        "nodes": [{"name": n.name, "op_type": n.op_type, "domain": n.domain,
                   "inputs": [val(i) if i else None for i in n.inputs],
                   "outputs": [val(o) if o else None for o in n.outputs],   # None: an omitted position
                   "attrs": {k: _attr_json(v) for k, v in sorted(n.attrs.items()) if not k.startswith("_")}}
                  for n in graph.nodes],
    }
