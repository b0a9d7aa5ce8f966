"""A compiled Program → classic Ascend GE OM (v1) file bytes (docs/om-format.md).

Partitions, in GE's save order (GE_FACTS §1.6): SO_BINS (the shared objects the model packs,
so_providers; docs/so-in-om.md) and CUSTOM_OPS (custom operators only), MODEL_DEF (ge.proto.ModelDef), WEIGHTS_DATA (the constants blob, if any), TBE_KERNELS
(KernelStore of the kernel ELF objects), TASK_INFO (domi.ModelTaskDef).

Addresses are GE-style *logical* addresses (GE_FACTS §1.7): feature-map memory (scratch,
then the model inputs, then the model outputs) starts at `task_gen_base_addr` = FEATURE_BASE,
the weights at `task_gen_weight_addr` = WEIGHT_BASE. Every address slot of a task's
`KernelDef.args` holds such a logical address (uint64), followed by the tiling bytes; the same
addresses appear in `OpDef.input_i/output_i/workspace`. A loader maps them to real memory by
subtracting the base (GE's `GetRtAddress`). Everything is deterministic: same Program, same bytes.
"""
from __future__ import annotations

import struct
from pathlib import Path

from ...ir import dtypes
from ...ir.tasks import ArgKind, CcKernelType, ModelTaskType
from ...version import GENERATOR
from .. import op_so_store
from . import integrity, kernel_store, proto
from .container import Partition, write_om
from .layout import ORIGINAL_OP_NAMES
from .layout import ModelPartitionType as PT

FEATURE_BASE = 0x1_0000_0000     # task_gen_base_addr: logical base of feature-map memory
WEIGHT_BASE = 0x100_0000_0000    # task_gen_weight_addr: logical base of the weights
VARIABLE_BASE = 0x200_0000_0000  # task_gen_variable_addr (om2gen models have no variables)
IO_ALIGN = 512                   # alignment of each model input/output in feature-map memory
TVM_MAGIC = "RT_DEV_BINARY_MAGIC_ELF"

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
# AttrDef helpers

def _a_s(text: str):
    return proto.AttrDef(s=text.encode("utf-8"))


def _a_i(v: int):
    return proto.AttrDef(i=int(v))


def _a_list_i(values):
    return proto.AttrDef(list=proto.AttrDef.ListValue(i=[int(v) for v in values], val_type=2))


def _a_list_s(values):
    return proto.AttrDef(list=proto.AttrDef.ListValue(s=[v.encode("utf-8") for v in values], val_type=1))


def _onnx_attr(v):
    """A graph_json attribute value as an AttrDef, or None if it has no plain GE form."""
    if isinstance(v, bool):
        return proto.AttrDef(b=v)
    if isinstance(v, int):
        return _a_i(v)
    if isinstance(v, float):
        return proto.AttrDef(f=v)
    if isinstance(v, str):
        return _a_s(v)
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return _a_list_i(v)
    if isinstance(v, list) and v and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        return proto.AttrDef(list=proto.AttrDef.ListValue(f=[float(x) for x in v], val_type=3))
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return _a_list_s(v)
    return None


def _tensor_desc(val: dict, *, data_offset: int | None = None):
    dt = dtypes.BY_NAME[val["dtype"]]
    shape = [int(d) for d in val["shape"]]
    size = dt.itemsize
    for d in shape:
        size *= d
    td = proto.TensorDescriptor(name=val["name"], dtype=dt.ge_proto, shape=proto.ShapeDef(dim=shape), layout="ND",
                                size=size, real_dim_cnt=len(shape))
    td.attr["format_for_int"].CopyFrom(_a_i(2))
    td.attr["origin_format"].CopyFrom(_a_s("ND"))
    td.attr["origin_format_for_int"].CopyFrom(_a_i(2))
    td.attr["origin_data_type"].CopyFrom(_a_s(dt.ge_string[3:]))
    td.attr["origin_shape"].CopyFrom(_a_list_i(shape))
    td.attr["origin_shape_initialized"].CopyFrom(proto.AttrDef(b=True))
    if data_offset is not None:
        td.data_offset = data_offset
        td.weight_size = size
    return td


# ---------------------------------------------------------------------------------------------
# MODEL_DEF graph

class _GraphBuilder:
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
            op.attr["index"].CopyFrom(_a_i(i))
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
                op.attr["_onnx_domain"].CopyFrom(_a_s(n["domain"]))
            if n.get("fused_from"):
                op.attr[ORIGINAL_OP_NAMES].CopyFrom(_a_list_s(n["fused_from"]))
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


def _fill_addresses(op, task, mem: MemoryPlan) -> None:
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


# ---------------------------------------------------------------------------------------------
# the OM

def om_partitions(program, graph_json: dict, target, so_pack, platform) -> tuple[list[Partition], dict]:
    """The partitions (in table order) and the header fields of the OM of `program`. `so_pack`
    (so_in_om.providers.SoPack): the shared objects the model packs; `platform`: the
    so_in_om.info.SoInOmInfo to record (MODEL_DEF attrs host_env_cpu, host_env_os, ...)."""
    mem = MemoryPlan(program)
    gb = _GraphBuilder(program, graph_json, mem)
    gb.build()

    # --- TASK_INFO
    mtd = proto.ModelTaskDef(version="om2gen", memory_size=mem.memory_size, stream_num=1, event_num=0,
                             weight_size=mem.weight_size, base_addr=FEATURE_BASE, weight_addr=WEIGHT_BASE,
                             batch_num=0)
    for t, task in enumerate(program.tasks):
        op_index = gb.op_for_task(t, task)
        op = gb.graph.op[op_index]
        args = mem.args(task)
        td = mtd.task.add(id=t, type=int(task.task_type), stream_id=0)
        tt = task.task_type
        if tt == ModelTaskType.MODEL_TASK_LABEL_SET:
            td.label_id = task.label_ref
            td.label_set.CopyFrom(proto.LabelSetDef(op_index=op_index, label_id=task.label_ref))
        elif tt == ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX:
            labels = program.label_lists[task.label_ref]
            td.label_switch_by_index.CopyFrom(proto.LabelSwitchByIndexDef(op_index=op_index, label_max=len(labels)))
            op.attr["_label_switch_list"].CopyFrom(_a_list_i(labels))
            _fill_addresses(op, task, mem)
        elif tt == ModelTaskType.MODEL_TASK_STREAM_LABEL_GOTO:
            labels = program.label_lists[task.label_ref]
            td.label_id = labels[0]
            td.label_goto_ex.CopyFrom(proto.LabelGotoExDef(op_index=op_index, label_id=labels[0]))
            _fill_addresses(op, task, mem)
        else:
            ctx = proto.KernelContext(kernel_type=int(task.kernel_type), op_index=op_index,
                                      args_format=task.args_format, args_count=len(task.args))
            kd = proto.KernelDef(context=ctx, block_dim=task.block_dim, args=args, args_size=len(args))
            if task.kernel >= 0:
                entry = program.kernels[task.kernel].entry
                kd.kernel_name = entry
                if "_kernelname" not in op.attr:
                    op.attr["_kernelname"].CopyFrom(_a_s(entry))
                    op.attr["tvm_magic"].CopyFrom(_a_s(TVM_MAGIC))
                    op.attr["tvm_blockdim"].CopyFrom(_a_i(task.block_dim))
            elif tt == ModelTaskType.MODEL_TASK_CUSTOM_KERNEL:
                c = program.custom_ops[task.label_ref]
                kd.context.kernel_type = int(CcKernelType.CUSTOMIZED)
                kd.kernel_name = c.op_type
                kd.so_name = so_pack.custom_names[c.library]
                op.attr["_custom_op_item"].CopyFrom(_a_i(task.label_ref))
            td.kernel.CopyFrom(kd)
            _fill_addresses(op, task, mem)
    graph = gb.finish()
    task_info = mtd.SerializeToString(deterministic=True)

    # --- TBE_KERNELS, WEIGHTS_DATA
    tbe = kernel_store.build((k.entry, k.binary) for k in program.kernels) if program.kernels else b""
    blob = bytearray(program.constants_size)
    for c in program.constants:
        blob[c.offset:c.offset + c.nbytes] = c.array.tobytes()
    weights = bytes(blob)

    # --- SO_BINS (every SO the model packs, so_providers), CUSTOM_OPS
    so_bins, so_flag = so_pack.store, so_pack.flag
    custom = b""
    if program.custom_ops:
        custom = op_so_store.build_custom_ops(op_so_store.CustomOpKernel(c.op_type, c.blob)
                                           for c in program.custom_ops)

    # --- MODEL_DEF
    md = proto.ModelDef(name=program.name, version=1, custom_version=GENERATOR)
    md.graph.append(graph)
    attrs = {
        "memory_size": mem.memory_size, "weight_size": mem.weight_size, "stream_num": 1, "event_num": 0,
        "notify_num": 0, "label_num": program.label_num, "batch_num": 0,
        "task_gen_base_addr": FEATURE_BASE, "task_gen_weight_addr": WEIGHT_BASE,
        "task_gen_variable_addr": VARIABLE_BASE, "variable_size": 0,
        "zero_copy_memory_size": mem.zero_copy_size, "session_id": 0,
    }
    for k, v in attrs.items():
        md.attr[k].CopyFrom(_a_i(v))
    md.attr["soc_version"].CopyFrom(_a_s(target.name))
    for key, value in platform.model_def_attrs().items():   # SoInOmInfo (compiler_version = GENERATOR)
        md.attr[key].CopyFrom(_a_s(value))
    md.attr["om_info_list"].CopyFrom(_a_list_i([len(weights), len(tbe), 0, len(task_info), len(so_bins)]))
    if so_flag:
        md.attr["so_in_om_flag"].CopyFrom(_a_i(so_flag))
    if so_pack.bins:   # checked before any of them is loaded (integrity.check_so_bins)
        md.attr[integrity.SO_BINS_SHA256].CopyFrom(_a_list_s(integrity.so_bins_digests(so_pack.bins)))
    md.attr[integrity.PARTITION_BLAKE3].CopyFrom(_a_list_s(integrity.partition_digests(
        {"CUSTOM_OPS": custom, "WEIGHTS_DATA": weights, "TBE_KERNELS": tbe, "TASK_INFO": task_info}, md)))
    model_def = md.SerializeToString(deterministic=True)

    parts = [Partition(PT.SO_BINS, so_bins), Partition(PT.CUSTOM_OPS, custom), Partition(PT.MODEL_DEF, model_def),
             Partition(PT.WEIGHTS_DATA, weights), Partition(PT.TBE_KERNELS, tbe),
             Partition(PT.TASK_INFO, task_info)]
    name = program.name.encode("utf-8")[:31].decode("utf-8", "ignore")
    header = {"name": name, "platform_version": target.arch.encode()[:19], "userdefineinfo": b"om2gen",
              "genmode": 0, "is_unknow_model": 0,
              # GE: host infer-shape/tiling SOs are host code, so the loader must check the OS/CPU
              "need_check_os_cpu_info": int(bool(so_pack.of_type(op_so_store.SoBinType.kSpaceRegistry)))}
    return [p for p in parts if p.data], header


def write(path, program, graph_json: dict, target, so_pack, platform) -> bytes:
    """Write the OM atomically (container.write_om) and return its bytes."""
    parts, header = om_partitions(program, graph_json, target, so_pack, platform)
    return write_om(Path(path), parts, **header)
