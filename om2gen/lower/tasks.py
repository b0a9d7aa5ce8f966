"""Steps → tasks: a kernel task per kernel call (its kernel rendered by the renderer the pipeline
hands in, LowerContext.render_kernel, and shared by identical calls), a CUSTOM_KERNEL task per
custom operator, a label task per control step."""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

import numpy as np
import onnx

from ..ir.dtypes import OMITTED
from ..ir.graph import Graph
from ..ir.program import ArgRef, Control, CustomCall, CustomOpDef, Kernel, KernelCall, Task, TensorDesc, TilingCall
from ..ir.tasks import ArgKind, CcKernelType, ModelTaskType, OpDispatchType
from . import dynamic
from .args import Places
from .state import Lowering
from .workspace import scratch_key


@dataclass
class TaskTable:
    kernels: list[Kernel] = field(default_factory=list)         # each specialisation once
    tasks: list[Task] = field(default_factory=list)             # one per step, in step order
    label_lists: list[list[int]] = field(default_factory=list)  # the switches' and gotos' targets
    custom_ops: list[CustomOpDef] = field(default_factory=list)
    load_tasks: list[Task] = field(default_factory=list)        # one per load step, in launch order


def build(state: Lowering, places: Places) -> TaskTable:
    """The tasks of all steps; their args offsets are laid out afterwards (lower/args.py)."""
    assert state.ctx.render_kernel is not None, "lowering needs the kernel renderer (LowerContext.render_kernel)"
    table = TaskTable()
    kernel_index: dict[str, int] = {}
    for t, step in enumerate(state.steps):
        call = step.call
        if isinstance(call, CustomCall):
            task = _custom_task(state.graph, step.node, call, t, places, table.custom_ops)
        elif isinstance(call, Control):
            task = _control_task(step.node, call, t, places, table.label_lists)
        elif isinstance(call, TilingCall):
            task = _tiling_task(state, step.node, call, t, places, table, kernel_index)
        else:
            kernel = state.ctx.render_kernel(call, state.ctx)
            if kernel.entry not in kernel_index:
                kernel_index[kernel.entry] = len(table.kernels)
                table.kernels.append(kernel)
            count_at = dynamic.symbol_offset(state, places.workspace, call.count_symbol) if call.count_symbol else 0
            task = _kernel_task(state.graph, step.node, call, t, places, kernel_index[kernel.entry], count_at)
        table.tasks.append(task)
    for t, step in enumerate(state.load_steps):
        assert not step.call.workspace and not step.call.sink, "a load task has no scratch and a static tiling"
        kernel = state.ctx.render_kernel(step.call, state.ctx)
        if kernel.entry not in kernel_index:
            kernel_index[kernel.entry] = len(table.kernels)
            table.kernels.append(kernel)
        table.load_tasks.append(_kernel_task(state.graph, step.node, step.call, t, places, kernel_index[kernel.entry],
                                             0, prefix="l"))
    return table


def _kernel_task(graph: Graph, node, call: KernelCall, t: int, places: Places, kernel: int, count_at: int,
                 prefix: str = "k") -> Task:
    """count_at: the workspace offset of the data-dependent count the call writes (if it writes one);
    prefix: the label's, "k" for the run's tasks, "l" for the load tasks (named by their kernel
    alone: a weight transform computes none of the ops a fusion folded into its node)."""
    ins = [n for n in call.inputs if n]
    args = [places.ref(n) for n in ins] + [places.ref(n) for n in call.outputs]
    roles = ["i"] * len(ins) + ["o"] * len(call.outputs)
    slot_bytes = [dynamic.max_bytes(graph.values[n].nbytes, f"tensor {n!r}") for n in ins + call.outputs]
    if call.count_symbol:   # the data-dependent count it writes, read by the tiling steps after it
        args.append(ArgRef(ArgKind.WORKSPACE, 0, count_at))
        roles.append("o")
        slot_bytes.append(8)
    if call.workspace:
        args.append(ArgRef(ArgKind.WORKSPACE, 0, places.workspace[scratch_key(t)]))
        roles.append("ws")
        slot_bytes.append(call.workspace)
    tiling = b""
    if call.sink:   # the tiling is in the workspace, where the task before it writes it (lower/dynamic.py)
        args.append(ArgRef(ArgKind.WORKSPACE, 0, places.workspace[dynamic.tiling_key(t)]))
        roles.append("t")
        slot_bytes.append(8 * (1 + len(call.tiling)))
    else:
        tiling = struct.pack(f"<{len(call.tiling)}q", *call.tiling.values())
    return Task(task_type=ModelTaskType.MODEL_TASK_KERNEL, dispatch_type=OpDispatchType.AICORE,
                kernel_type=CcKernelType.TE, kernel=kernel, block_dim=call.block_dim, args=args,
                tiling=tiling, op_name=node.name,
                op_type=node.op_type,
                label=f"{prefix}{t:03d}_{task_name(node, call.name, graph) if prefix == 'k' else call.name}",
                inputs_desc=[_describe(graph, n) for n in ins],
                outputs_desc=[_describe(graph, n) for n in call.outputs],
                attrs_desc=_attrs_desc(node), roles=roles, slot_bytes=slot_bytes, tiling_fields=list(call.tiling),
                fuses=_covers(graph, node))


def _tiling_task(state: Lowering, node, call: TilingCall, t: int, places: Places, table: "TaskTable",
                 kernel_index: dict[str, int]) -> Task:
    """The PREPROCESS_KERNEL task before a sink kernel: one block of its device tiling function
    (the op_master_device library's entry tiling_k<step>), reading the symbols and writing the
    kernel's tiling."""
    call.entry = f"tiling_k{call.kernel_step:03d}"
    kernel_index[call.entry] = len(table.kernels)
    table.kernels.append(Kernel(entry=call.entry, source="", template="", digest="", library=TILING_LIBRARY))
    kernel = state.steps[call.kernel_step].call
    symbol_bytes = 8 * max(1, len(dynamic.symbols(state)))
    return Task(task_type=ModelTaskType.MODEL_TASK_PREPROCESS_KERNEL, dispatch_type=OpDispatchType.AICORE,
                kernel_type=CcKernelType.CUST_AI_CPU, kernel=kernel_index[call.entry], block_dim=1,
                args=[ArgRef(ArgKind.WORKSPACE, 0, places.workspace[dynamic.SYMBOLS]),
                      ArgRef(ArgKind.WORKSPACE, 0, places.workspace[dynamic.tiling_key(call.kernel_step)])],
                op_name=node.name, op_type=node.op_type,
                label=f"k{t:03d}_tiling_{task_name(node, kernel.name, state.graph)}", roles=["i", "o"],
                slot_bytes=[symbol_bytes, 8 * (1 + len(call.fields))], tiling_fields=[])


# the device tiling library's file name until code generation names it by its content
TILING_LIBRARY = "op_master_device.so"


def _custom_task(graph: Graph, node, call: CustomCall, t: int, places: Places, customs: list[CustomOpDef]) -> Task:
    """An omitted output position ("") keeps its place: desc OMITTED, a slot nobody reads."""
    names = call.inputs + call.outputs
    customs.append(CustomOpDef(op_type=call.op_type, bin_name=call.bin_name, blob=call.blob, library=call.library,
                               input_num=len(call.inputs), output_num=len(call.outputs),
                               descs=[TensorDesc(graph.values[n].dtype, graph.values[n].shape) if n
                                      else TensorDesc(OMITTED, ()) for n in names]))
    return Task(task_type=ModelTaskType.MODEL_TASK_CUSTOM_KERNEL, dispatch_type=OpDispatchType.CUSTOM_KERNEL,
                kernel_type=CcKernelType.CUSTOMIZED,
                args=[places.ref(n) if n else ArgRef(ArgKind.WORKSPACE, 0, 0) for n in names],
                op_name=node.name, op_type=node.op_type, label=f"k{t:03d}_{call.op_type}",
                inputs_desc=[_describe(graph, n) for n in call.inputs],
                outputs_desc=[_describe(graph, n) if n else "(omitted)" for n in call.outputs],
                attrs_desc=_attrs_desc(node), roles=["i"] * len(call.inputs) + ["o"] * len(call.outputs),
                label_ref=len(customs) - 1)


_CONTROL = {
    "label": (ModelTaskType.MODEL_TASK_LABEL_SET, OpDispatchType.LABEL_SET, "LabelSet"),
    "switch": (ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX, OpDispatchType.LABEL_SWITCH_BY_INDEX,
               "LabelSwitchByIndex"),
    "goto": (ModelTaskType.MODEL_TASK_STREAM_LABEL_GOTO, OpDispatchType.LABEL_GOTO_EX, "LabelGoto"),
}


def _control_task(node, call: Control, t: int, places: Places, label_lists: list[list[int]]) -> Task:
    task_type, dispatch, name = _CONTROL[call.kind]
    if call.kind == "label":
        label, args, inputs = call.labels[0], [], []
    else:
        label = len(label_lists)
        label_lists.append(list(call.labels))
        args, inputs = [places.ref(call.index)], [f"{call.index}: uint32[] (branch index)"]
    targets = ", ".join(f"L{x}" for x in call.labels)
    return Task(task_type=task_type, dispatch_type=dispatch, kernel_type=CcKernelType.INVALID, args=args,
                op_name=node.name, op_type=node.op_type, label=f"k{t:03d}_{name}" + (f"_{call.note}" if call.note else ""),
                inputs_desc=inputs, attrs_desc=f"labels {targets}", roles=["i"] * len(args), label_ref=label)


_FUSED_PREFIX = {"FusedElementwise": "Fused"}


def task_name(node, name: str, graph: Graph) -> str:
    """What a task's label calls it: the kernel call's name, then the op type of every source node
    a fusion folded into the node (its fused_from), in order: k005_Conv_BatchNormalization_
    Add_Relu. A node standing for the ones it covers (an element-wise group, a LayerNormalization
    pattern) is named by its kind and all of their op types."""
    covered = list(getattr(node, "fused_from", None) or [])
    if len(covered) < 2 and (not covered or covered[0] == node.name):
        return name
    ops = [re.sub(r"\W", "_", graph.source_ops.get(n, "")) or "_" for n in covered]
    if covered[0] == node.name:
        return "_".join([name] + ops[1:])
    return "_".join([_FUSED_PREFIX.get(node.op_type, name)] + ops)


def _describe(graph: Graph, name: str) -> str:
    """'x: float32[1,3]'; a constant also says where it comes from, when that is not itself: the
    model's initializers and each transform that made it ('(const: w, bn_var; BN folded; packed)')."""
    v = graph.values[name]
    if not v.is_const:
        return f"{name}: {v.describe()}"
    o = graph.origin(name)
    if o.sources == (name,) and not o.transforms:
        return f"{name}: {v.describe()} (const)"
    sources = [s if s not in graph.values or graph.values[s].is_const else f"the shape of {s}" for s in o.sources]
    return f"{name}: {v.describe()} (const: from {', '.join(sources) or 'no initializer'}; " \
           f"{'; '.join(_compact(o.transforms))})"


_FOLDED = " evaluated at compile time"


def _compact(transforms) -> list[str]:
    """Consecutive nodes folded at import as one entry ('Shape, Gather, Range folded at compile time')."""
    out, run = [], []
    for t in [*transforms, None]:
        if t is not None and t.endswith(_FOLDED):
            run.append(t)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else
                       f"{', '.join(r.split(' ', 1)[0] for r in run)}{_FOLDED}")
            run = []
        if t is not None:
            out.append(t)
    return out


def _covers(graph: Graph, node) -> str:
    """The source nodes a fused node computes, with their op types: 'conv1 (Conv), bn1 (...)'."""
    covered = list(getattr(node, "fused_from", None) or [])
    if len(covered) < 2:
        return ""
    return ", ".join(f"{n} ({graph.source_ops.get(n, '?')})" for n in covered)


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
