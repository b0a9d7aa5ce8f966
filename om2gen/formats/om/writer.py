"""A compiled Program → classic Ascend GE OM (v1) file bytes (docs/om-format.md).

Partitions, in GE's save order (GE_FACTS §1.6): SO_BINS (the shared objects the model packs,
so_providers; docs/so-in-om.md) and CUSTOM_OPS (custom operators only), MODEL_INOUT_INFO (the
inputs, outputs and gears as GE's TLV blocks, formats/om/inout_info.py), MODEL_DEF
(ge.proto.ModelDef: the graph, formats/om/graph_def.py, and the loader's attributes),
WEIGHTS_DATA (the constants blob, if any), TBE_KERNELS (KernelStore of the kernel ELF objects),
TASK_INFO (domi.ModelTaskDef).

Every address slot of a task's `KernelDef.args` holds a GE *logical* address (uint64;
graph_def.MemoryPlan), followed by the tiling bytes; the same addresses appear in
`OpDef.input_i/output_i/workspace`. Everything is deterministic: same Program, same bytes.
"""
from __future__ import annotations

from pathlib import Path

from ...ir.tasks import CcKernelType, ModelTaskType
from ...version import GENERATOR
from .. import op_so_store
from . import dynamic_shapes, inout_info, integrity, kernel_store, proto
from .container import Partition, write_om
from .graph_def import FEATURE_BASE, VARIABLE_BASE, WEIGHT_BASE, GraphBuilder, MemoryPlan, fill_addresses
from .layout import ModelPartitionType as PT
from .model_def_attrs import attr_i, attr_list_i, attr_list_s, attr_s

TVM_MAGIC = "RT_DEV_BINARY_MAGIC_ELF"


# ---------------------------------------------------------------------------------------------
# the OM

def om_partitions(program, graph_json: dict, target, so_pack, platform) -> tuple[list[Partition], dict]:
    """The partitions (in table order) and the header fields of the OM of `program`. `so_pack`
    (so_in_om.providers.SoPack): the shared objects the model packs; `platform`: the
    so_in_om.info.SoInOmInfo to record (MODEL_DEF attrs host_env_cpu, host_env_os, ...)."""
    mem = MemoryPlan(program)
    gb = GraphBuilder(program, graph_json, mem)
    gb.build()

    # --- TASK_INFO
    mtd = proto.ModelTaskDef(version="om2gen", memory_size=mem.memory_size, stream_num=1, event_num=0,
                             weight_size=mem.weight_size, base_addr=FEATURE_BASE, weight_addr=WEIGHT_BASE,
                             batch_num=0)
    refers = []     # (the part of a TaskDef that names its op, the op): ids are final after finish()
    for t, task in enumerate(program.tasks):
        op = gb.op_for_task(task)
        args = mem.args(task)
        td = mtd.task.add(id=t, type=int(task.task_type), stream_id=0)
        tt = task.task_type
        if tt == ModelTaskType.MODEL_TASK_LABEL_SET:
            td.label_id = task.label_ref
            td.label_set.CopyFrom(proto.LabelSetDef(label_id=task.label_ref))
            refers.append((td.label_set, op))
        elif tt == ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX:
            labels = program.label_lists[task.label_ref]
            td.label_switch_by_index.CopyFrom(proto.LabelSwitchByIndexDef(label_max=len(labels)))
            refers.append((td.label_switch_by_index, op))
            op.attr["_label_switch_list"].CopyFrom(attr_list_i(labels))
            fill_addresses(op, task, mem)
        elif tt == ModelTaskType.MODEL_TASK_STREAM_LABEL_GOTO:
            labels = program.label_lists[task.label_ref]
            td.label_id = labels[0]
            td.label_goto_ex.CopyFrom(proto.LabelGotoExDef(label_id=labels[0]))
            refers.append((td.label_goto_ex, op))
            fill_addresses(op, task, mem)
        else:
            ctx = proto.KernelContext(kernel_type=int(task.kernel_type), args_format=task.args_format,
                                      args_count=len(task.args))
            kd = proto.KernelDef(context=ctx, block_dim=task.block_dim, args=args, args_size=len(args))
            if task.kernel >= 0:
                entry = program.kernels[task.kernel].entry
                kd.kernel_name = entry
                if "_kernelname" not in op.attr:
                    op.attr["_kernelname"].CopyFrom(attr_s(entry))
                    op.attr["tvm_magic"].CopyFrom(attr_s(TVM_MAGIC))
                    op.attr["tvm_blockdim"].CopyFrom(attr_i(task.block_dim))
            elif tt == ModelTaskType.MODEL_TASK_CUSTOM_KERNEL:
                c = program.custom_ops[task.label_ref]
                kd.context.kernel_type = int(CcKernelType.CUSTOMIZED)
                kd.kernel_name = c.op_type
                kd.so_name = so_pack.custom_names[c.library]
                op.attr["_custom_op_item"].CopyFrom(attr_i(task.label_ref))
            td.kernel.CopyFrom(kd)
            refers.append((td.kernel.context, op))
            fill_addresses(op, task, mem)
    graphs = gb.finish()
    if program.dynamic is not None:   # -1 dims with their ranges (the RT2 path)
        dynamic_shapes.mark(graphs[0], program)
    for part, op in refers:
        part.op_index = op.id
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
    md.graph.extend(graphs)   # the root graph, then a gear model's subgraphs
    attrs = {
        "memory_size": mem.memory_size, "weight_size": mem.weight_size, "stream_num": 1, "event_num": 0,
        "notify_num": 0, "label_num": program.label_num, "batch_num": 0,
        "task_gen_base_addr": FEATURE_BASE, "task_gen_weight_addr": WEIGHT_BASE,
        "task_gen_variable_addr": VARIABLE_BASE, "variable_size": 0,
        "zero_copy_memory_size": mem.zero_copy_size, "session_id": 0,
    }
    for k, v in attrs.items():
        md.attr[k].CopyFrom(attr_i(v))
    md.attr["soc_version"].CopyFrom(attr_s(target.name))
    for key, value in platform.model_def_attrs().items():   # SoInOmInfo (compiler_version = GENERATOR)
        md.attr[key].CopyFrom(attr_s(value))
    md.attr["om_info_list"].CopyFrom(attr_list_i([len(weights), len(tbe), 0, len(task_info), len(so_bins)]))
    if so_flag:
        md.attr["so_in_om_flag"].CopyFrom(attr_i(so_flag))
    if so_pack.bins:   # checked before any of them is loaded (integrity.check_so_bins)
        md.attr[integrity.SO_BINS_SHA256].CopyFrom(attr_list_s(integrity.so_bins_digests(so_pack.bins)))
    md.attr[integrity.PARTITION_BLAKE3].CopyFrom(attr_list_s(integrity.partition_digests(
        {"CUSTOM_OPS": custom, "WEIGHTS_DATA": weights, "TBE_KERNELS": tbe, "TASK_INFO": task_info}, md)))
    model_def = md.SerializeToString(deterministic=True)

    inout = inout_info.build(inout_info.describe(program.inputs, program.outputs, program.gears,
                                                 dynamic_shapes.ranges(graphs[0]) if program.dynamic else None))
    parts = [Partition(PT.SO_BINS, so_bins), Partition(PT.CUSTOM_OPS, custom), Partition(PT.MODEL_INOUT_INFO, inout),
             Partition(PT.MODEL_DEF, model_def), Partition(PT.WEIGHTS_DATA, weights), Partition(PT.TBE_KERNELS, tbe),
             Partition(PT.TASK_INFO, task_info)]
    name = program.name.encode("utf-8")[:31].decode("utf-8", "ignore")
    header = {"name": name, "platform_version": target.arch.encode()[:19], "userdefineinfo": b"om2gen",
              "genmode": 0, "is_unknow_model": int(program.dynamic is not None),
              # GE: host infer-shape/tiling SOs are host code, so the loader must check the OS/CPU
              "need_check_os_cpu_info": int(bool(so_pack.of_type(op_so_store.SoBinType.kSpaceRegistry)))}
    return [p for p in parts if p.data], header


def write(path, program, graph_json: dict, target, so_pack, platform) -> bytes:
    """Write the OM atomically (container.write_om) and return its bytes."""
    parts, header = om_partitions(program, graph_json, target, so_pack, platform)
    return write_om(Path(path), parts, **header)
