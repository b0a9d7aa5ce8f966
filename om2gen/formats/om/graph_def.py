"""MODEL_DEF's graph (ge.proto.GraphDef) of a compiled Program, and the logical addresses its ops
and the tasks point at (docs/om-format.md, *Addresses* and *MODEL_DEF*).

Addresses are GE-style *logical* addresses (GE_FACTS §1.7): feature-map memory (scratch, then
the model inputs, then the model outputs) starts at `task_gen_base_addr` = FEATURE_BASE, the
weights at `task_gen_weight_addr` = WEIGHT_BASE; a loader maps them to real memory by
subtracting the base (GE's `GetRtAddress`). The graph's ops are the program's graph dump
(Program.graph_json) plus the ops GE has for what the dump has no node for: Data, Const, label
ops, NetOutput.
"""
from __future__ import annotations

import struct

from ...ir import dtypes
from ...ir.tasks import ArgKind, ModelTaskType
from . import proto
from .layout import ORIGINAL_OP_NAMES
from .model_def_attrs import attr_i, attr_list_i, attr_list_s, attr_s

FEATURE_BASE = 0x1_0000_0000     # task_gen_base_addr: logical base of feature-map memory
WEIGHT_BASE = 0x100_0000_0000    # task_gen_weight_addr: logical base of the weights
VARIABLE_BASE = 0x200_0000_0000  # task_gen_variable_addr (om2gen models have no variables)
IO_ALIGN = 512                   # alignment of each model input/output in feature-map memory

_LABEL_OP_TYPES = {
    ModelTaskType.MODEL_TASK_LABEL_SET: "LabelSet",
    ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX: "LabelSwitchByIndex",
    ModelTaskType.MODEL_TASK_STREAM_LABEL_GOTO: "LabelGotoEx",
}


def _align(n: int, a: int = IO_ALIGN) -> int:
    return (n + a - 1) // a * a


class MemoryPlan:
    """Logical addresses of everything a task can point at."""

    def __init__(self, program):
        self.work_size = program.work_size
        pos = _align(program.work_size)
        self.inputs, self.outputs = [], []
        for d in program.inputs:
            self.inputs.append(pos)
            pos = _align(pos + max(d.nbytes, 1))
        for d in program.outputs:
            self.outputs.append(pos)
            pos = _align(pos + max(d.nbytes, 1))
        self.io_start = _align(program.work_size)
        self.memory_size = pos
        self.zero_copy_size = pos - self.io_start
        self.weight_size = program.constants_size

    def address(self, ref) -> int:
        if ref.kind == ArgKind.INPUT:
            return FEATURE_BASE + self.inputs[ref.index] + ref.offset
        if ref.kind == ArgKind.OUTPUT:
            return FEATURE_BASE + self.outputs[ref.index] + ref.offset
        if ref.kind == ArgKind.WORKSPACE:
            return FEATURE_BASE + ref.offset
        if ref.kind == ArgKind.CONSTANT:
            return WEIGHT_BASE + ref.offset
        return 0   # no other kinds occur in args slots; GE leaves such slots zero

    def args(self, task) -> bytes:
        return b"".join(struct.pack("<Q", self.address(a)) for a in task.args) + bytes(task.tiling)


# ---------------------------------------------------------------------------------------------
# AttrDef values

def _onnx_attr(v):
    """A graph_json attribute value as an AttrDef, or None if it has no plain GE form."""
    if isinstance(v, bool):
        return proto.AttrDef(b=v)
    if isinstance(v, int):
        return attr_i(v)
    if isinstance(v, float):
        return proto.AttrDef(f=v)
    if isinstance(v, str):
        return attr_s(v)
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return attr_list_i(v)
    if isinstance(v, list) and v and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        return proto.AttrDef(list=proto.AttrDef.ListValue(f=[float(x) for x in v], val_type=3))
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return attr_list_s(v)
    return None


def _tensor_desc(val: dict, *, data_offset: int | None = None):
    dt = dtypes.BY_NAME[val["dtype"]]
    shape = [int(d) for d in val["shape"]]
    size = dt.itemsize
    for d in shape:
        size *= d
    td = proto.TensorDescriptor(name=val["name"], dtype=dt.ge_proto, shape=proto.ShapeDef(dim=shape), layout="ND",
                                size=size, real_dim_cnt=len(shape))
    td.attr["format_for_int"].CopyFrom(attr_i(2))
    td.attr["origin_format"].CopyFrom(attr_s("ND"))
    td.attr["origin_format_for_int"].CopyFrom(attr_i(2))
    td.attr["origin_data_type"].CopyFrom(attr_s(dt.ge_string[3:]))
    td.attr["origin_shape"].CopyFrom(attr_list_i(shape))
    td.attr["origin_shape_initialized"].CopyFrom(proto.AttrDef(b=True))
    if data_offset is not None:
        td.data_offset = data_offset
        td.weight_size = size
    return td


# ---------------------------------------------------------------------------------------------
# MODEL_DEF graph

class GraphBuilder:
    def __init__(self, program, graph_json, mem: MemoryPlan):
        self.program, self.g, self.mem = program, graph_json, mem
        self.graph = proto.GraphDef(name=graph_json.get("name") or program.name)
        self.names: set[str] = set()
        self.producer: dict[str, str] = {}     # value name -> "op:idx"
        self.values: dict[str, dict] = {}
        self.op_id: dict[str, int] = {}        # graph node name -> OpDef.id
        self.ops: dict[str, object] = {}

    def unique(self, name: str) -> str:
        base, n = name or "op", 1
        while name in self.names or not name:
            name = f"{base}_{n}"
            n += 1
        self.names.add(name)
        return name

    def add_op(self, name: str, op_type: str):
        op = self.graph.op.add(name=name, type=op_type, id=len(self.graph.op), stream_id=0)
        return op

    def build(self):
        g, mem = self.g, self.mem
        for v in g["inputs"] + g["outputs"]:
            self.values[v["name"]] = v
        for n in g["nodes"]:
            for v in [x for x in n["inputs"] + n["outputs"] if x]:
                self.values.setdefault(v["name"], v)
        for n in g["nodes"]:
            self.names.add(n["name"])   # graph nodes keep their names; synthetic ops give way
        constants = {c.name: c for c in self.program.constants}

        # Data ops, one per model input
        for i, v in enumerate(g["inputs"]):
            op = self.add_op(self.unique(v["name"]), "Data")
            op.attr["index"].CopyFrom(attr_i(i))
            op.input_desc.append(_tensor_desc(v))
            op.output_desc.append(_tensor_desc(v))
            op.input_i.append(FEATURE_BASE + mem.inputs[i])
            op.output_i.append(FEATURE_BASE + mem.inputs[i])
            self.producer[v["name"]] = f"{op.name}:0"
            self.graph.input.append(f"{op.name}:0")

        # Const ops for initializers that no node produces
        produced = {o["name"] for n in g["nodes"] for o in n["outputs"] if o}
        for n in g["nodes"]:
            for v in n["inputs"]:
                if not v or v["name"] in self.producer or v["name"] in produced or not v.get("const"):
                    continue
                c = constants.get(v["name"])
                op = self.add_op(self.unique(v["name"]), "Const")
                op.output_desc.append(_tensor_desc(v, data_offset=c.offset if c else None))
                if c is not None:
                    op.output_i.append(WEIGHT_BASE + c.offset)
                self.producer[v["name"]] = f"{op.name}:0"

        # the compiled graph's nodes
        for n in g["nodes"]:
            op = self.add_op(n["name"], n["op_type"])
            self.op_id[n["name"]] = op.id
            self.ops[n["name"]] = op
            for k, v in sorted(n.get("attrs", {}).items()):
                a = _onnx_attr(v)
                if a is not None:
                    op.attr[k].CopyFrom(a)
            if n.get("domain"):
                op.attr["_onnx_domain"].CopyFrom(attr_s(n["domain"]))
            if n.get("fused_from"):
                op.attr[ORIGINAL_OP_NAMES].CopyFrom(attr_list_s(n["fused_from"]))
            for v in n["inputs"]:
                if v is None:
                    op.input.append("")
                    continue
                op.input.append(self.producer.get(v["name"], ""))
                op.input_desc.append(_tensor_desc(v))
                op.is_input_const.append(bool(v.get("const")))
            for k, v in enumerate(n["outputs"]):
                if v is None:   # an omitted optional output keeps its position, as in GE's OpDesc
                    op.output_desc.append(proto.TensorDescriptor(dtype=proto.DT_UNDEFINED, layout="ND"))
                    continue
                op.output_desc.append(_tensor_desc(v))
                self.producer[v["name"]] = f"{op.name}:{k}"

    def op_for_task(self, t, task) -> int:
        """OpDef.id of the op a task belongs to; control tasks and tasks of nodes the compiler
        added (e.g. output copies) get an op of their own."""
        if task.task_type in _LABEL_OP_TYPES:
            op = self.add_op(self.unique(f"{task.op_name}/{task.label}"), _LABEL_OP_TYPES[task.task_type])
            return op.id
        if task.op_name not in self.op_id:
            op = self.add_op(self.unique(task.op_name), task.op_type)
            self.op_id[task.op_name] = op.id
            self.ops[task.op_name] = op
        return self.op_id[task.op_name]

    def finish(self):
        g, mem = self.g, self.mem
        op = self.add_op(self.unique("NetOutput"), "NetOutput")
        for i, v in enumerate(g["outputs"]):
            src = self.producer.get(v["name"], "")
            op.input.append(src)
            op.input_desc.append(_tensor_desc(v))
            op.input_i.append(FEATURE_BASE + mem.outputs[i])
            self.graph.output.append(src)
        return self.graph


def fill_addresses(op, task, mem: MemoryPlan) -> None:
    """input_i / output_i / workspace of an op from its (first) task's address slots."""
    if op.input_i or op.output_i or op.workspace:
        return
    for role, ref in zip(task.roles, task.args):
        addr = mem.address(ref)
        if role == "i":
            op.input_i.append(addr)
        elif role == "o":
            op.output_i.append(addr)
        elif role == "ws":
            op.workspace.append(addr)
