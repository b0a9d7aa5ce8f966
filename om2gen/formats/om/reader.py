"""A classic OM file → the Program it holds: what GE's loader works out at load time.

GE loads an OM in stages (ModelHelper::LoadModel, then DavinciModel::Init): read the file,
walk the partition table, parse MODEL_DEF (ge.proto.ModelDef), take the kernels out of
TBE_KERNELS, place WEIGHTS_DATA, parse TASK_INFO (domi.ModelTaskDef) and turn every TaskDef
into a task whose args point at real memory. This module does the parsing half and returns a
`lower.program.Program` — the same tables an OM2 model library is generated from — so the
executor (runtime/om_loader.py) runs it through the same load-and-run code, and `om2gen convert`
renders it as an OM2 archive.

Every task arg slot holds a GE *logical* address (formats/om/writer.py): feature-map memory from
ModelTaskDef.base_addr (scratch, then each model input and output, 512-aligned), weights from
weight_addr. `_AddressMap` maps them back to (input | output | workspace | constants, offset),
which is GE's GetRtAddress with the I/O regions kept apart so runs stay zero-copy. Anything
that does not decode is an ArchiveError naming the task and the slot. A MODEL_INOUT_INFO, when
the file has one, must say what MODEL_DEF says (formats/om/inout_info.py).
"""
from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass, field

import numpy as np

from ...errors import ArchiveError
from ...ir import dtypes
from ...ir.dtypes import OMITTED
from ...ir.gears import branch_key
from ...ir.program import ArgRef, Constant, CustomOpDef, GraphJson, IoDesc, Kernel, Program, Task, TensorDesc
from ...ir.tasks import ArgKind, CcKernelType, ModelTaskType, OpDispatchType
from .. import op_so_store
from . import dynamic_shapes, gears, inout_info, integrity, kernel_store, proto
from .container import OmFile
from .layout import ORIGINAL_OP_NAMES
from .layout import ModelPartitionType as PT

_BY_GE_PROTO = {d.ge_proto: d for d in dtypes.BY_NAME.values()}
MAX_BLOCK_DIM = 65535     # GE's limit on a kernel launch's block_dim
MAX_DIM = 1 << 40         # any larger dim cannot describe a tensor that fits in memory
MAX_CUSTOM_RANK = 8       # OM2_CUSTOM_MAX_DIMS (om2/custom_op.h)

_DISPATCH = {
    ModelTaskType.MODEL_TASK_KERNEL: OpDispatchType.AICORE,
    ModelTaskType.MODEL_TASK_CUSTOM_KERNEL: OpDispatchType.CUSTOM_KERNEL,
    ModelTaskType.MODEL_TASK_LABEL_SET: OpDispatchType.LABEL_SET,
    ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX: OpDispatchType.LABEL_SWITCH_BY_INDEX,
    ModelTaskType.MODEL_TASK_STREAM_LABEL_GOTO: OpDispatchType.LABEL_GOTO_EX,
}


@dataclass
class OmModel:
    """What loading needs from an OM file, besides the Program."""
    program: Program
    model_def: object                  # proto.ModelDef
    weights: memoryview                # WEIGHTS_DATA (a view into the file's bytes)
    so_bins: list = field(default_factory=list)      # so_store.OpSoBin, from SO_BINS
    custom_items: list = field(default_factory=list)  # so_store.CustomOpKernel, from CUSTOM_OPS
    custom_op_refs: list = field(default_factory=list)  # per Program.custom_ops entry: its SO_BINS library name


def _parse(cls, data, what: str):
    msg = cls()
    try:
        msg.ParseFromString(bytes(data))
    except Exception as e:  # protobuf raises DecodeError, or RuntimeWarning-ish errors from upb
        raise ArchiveError(f"the {what} partition is not a valid {cls.DESCRIPTOR.full_name} ({e})") from None
    return msg


def parse_model_def(om: OmFile):
    return _parse(proto.ModelDef, om.partition(PT.MODEL_DEF), "MODEL_DEF")


def parse_task_def(om: OmFile):
    return _parse(proto.ModelTaskDef, om.partition(PT.TASK_INFO), "TASK_INFO")


def _attr_int(md, name: str, default: int | None = None) -> int:
    if name in md.attr:
        a = md.attr[name]
        if a.WhichOneof("value") != "i":
            raise ArchiveError(f"MODEL_DEF attribute {name!r} is a {a.WhichOneof('value')}, not an int")
        if a.i < 0:
            raise ArchiveError(f"MODEL_DEF attribute {name!r} is {a.i}; it cannot be negative")
        return int(a.i)
    if default is None:
        raise ArchiveError(f"MODEL_DEF has no {name!r} attribute; the OM is incomplete")
    return default


def _io_desc(td, what: str) -> IoDesc:
    dt = _BY_GE_PROTO.get(td.dtype)
    if dt is None:
        raise ArchiveError(f"{what} has ge.proto data type {td.dtype}, which om2gen cannot run")
    shape = tuple(int(d) for d in td.shape.dim)
    if any(d < -1 for d in shape) or (any(d < 0 for d in shape) and td.size != -1
                                       and dynamic_shapes.shape_range(td, what) is None):
        raise ArchiveError(f"{what} has a dynamic shape {list(shape)} without its ranges (GE's shape_range) or "
                           "unknown size; om2gen runs static-shape OM files and dynamic ones the RT2 way")
    if any(d > MAX_DIM for d in shape):
        raise ArchiveError(f"{what} has shape {list(shape)}, too large for any memory")
    nbytes = dt.itemsize * math.prod(shape)
    if any(d < 0 for d in shape):   # a dynamic model's: the bytes the task list plans for it (or unknown)
        nbytes = max(int(td.size), 0)
    return IoDesc(td.name or what, dt.name, shape, nbytes)


class _AddressMap:
    """GE logical address → ArgRef (what the slot points at)."""

    def __init__(self, md, weight_size: int, inputs, outputs):
        self.base = _attr_int(md, "task_gen_base_addr")
        self.weight_base = _attr_int(md, "task_gen_weight_addr")
        self.memory_size = _attr_int(md, "memory_size")
        self.weight_size = weight_size
        self.regions = [(ArgKind.INPUT, i, addr, d.nbytes) for i, (addr, d) in enumerate(inputs)]
        self.regions += [(ArgKind.OUTPUT, i, addr, d.nbytes) for i, (addr, d) in enumerate(outputs)]
        for kind, i, addr, size in self.regions:
            if not self.base <= addr <= addr + size <= self.base + self.memory_size:
                raise ArchiveError(f"model {kind.name.lower()} {i} at 0x{addr:x} (+{size}) lies outside the "
                                   f"feature-map memory 0x{self.base:x} (+{self.memory_size})")
        ordered = sorted(self.regions, key=lambda r: r[2])
        for (k1, i1, a1, s1), (k2, i2, a2, _) in zip(ordered, ordered[1:]):
            if a1 + s1 > a2:
                raise ArchiveError(f"model {k1.name.lower()} {i1} (0x{a1:x} +{s1}) overlaps model "
                                   f"{k2.name.lower()} {i2} at 0x{a2:x}; each input and output needs its own memory")
        # scratch comes first; the inputs and outputs follow it (formats/om/writer.py MemoryPlan)
        self.work_size = min((addr for _, _, addr, _ in self.regions), default=self.base + self.memory_size) - self.base

    def ref(self, addr: int, where: str, size: int = 0, write: bool = False) -> ArgRef:
        """What `addr` points at; with size, the whole [addr, addr + size) must lie in it, and a
        slot that is written (write) may not point into the weights."""
        for kind, i, off, region in self.regions:
            if off <= addr < off + max(region, 1):
                if addr + size > off + region:
                    raise ArchiveError(f"{where}: {size} bytes at 0x{addr:x} run past the end of model "
                                       f"{kind.name.lower()} {i} (0x{off:x} +{region}); the OM is corrupt")
                return ArgRef(kind, i, addr - off)
        if self.base <= addr < self.base + self.work_size:
            if addr + size > self.base + self.work_size:
                raise ArchiveError(f"{where}: {size} bytes at 0x{addr:x} run past the end of the scratch memory "
                                   f"(0x{self.base:x} +{self.work_size}); the OM is corrupt")
            return ArgRef(ArgKind.WORKSPACE, 0, addr - self.base)
        if self.weight_base <= addr <= self.weight_base + self.weight_size:
            if write:
                raise ArchiveError(f"{where} writes to 0x{addr:x}, inside the weights (0x{self.weight_base:x} "
                                   f"+{self.weight_size}), which are read-only; the OM is corrupt")
            if addr + size > self.weight_base + self.weight_size:
                raise ArchiveError(f"{where}: {size} bytes at 0x{addr:x} run past the end of the weights "
                                   f"(0x{self.weight_base:x} +{self.weight_size}); the OM is corrupt")
            return ArgRef(ArgKind.CONSTANT, 0, addr - self.weight_base)
        raise ArchiveError(f"{where} holds address 0x{addr:x}, which is neither in the feature-map memory "
                           f"(0x{self.base:x} +{self.memory_size}) nor in the weights (0x{self.weight_base:x} "
                           f"+{self.weight_size}); the OM is corrupt")


def _io(graph) -> tuple[list, list]:
    """[(logical address, IoDesc)] of the model inputs (Data ops, by their index attr) and outputs
    (the NetOutput op's inputs)."""
    data, outputs = {}, []
    for op in graph.op:
        if op.type == "Data":
            index = int(op.attr["index"].i) if "index" in op.attr else len(data)
            if index in data or not op.output_desc or not op.output_i:
                raise ArchiveError(f"Data op {op.name!r} has a repeated index {index} or no output address")
            data[index] = (int(op.output_i[0]), _io_desc(op.output_desc[0], f"input {op.name!r}"))
        elif op.type == "NetOutput":
            if len(op.input_i) != len(op.input_desc):
                raise ArchiveError(f"NetOutput op {op.name!r} has {len(op.input_desc)} outputs but "
                                   f"{len(op.input_i)} addresses")
            outputs = [(int(a), _io_desc(td, f"output {k}")) for k, (a, td) in enumerate(zip(op.input_i,
                                                                                           op.input_desc))]
    if sorted(data) != list(range(len(data))):
        raise ArchiveError(f"the Data ops' index attributes are {sorted(data)}, expected 0..{len(data) - 1}")
    return [data[i] for i in range(len(data))], outputs


def _slots(addresses, amap: _AddressMap, where: str, roles=None, op=None) -> list[ArgRef]:
    """The slots' ArgRefs. Where the op's tensor descriptions match its slots by role (inputs to
    "i" slots, outputs to "o" slots), each slot is checked to hold its whole tensor."""
    roles = roles or ["i"] * len(addresses)
    sizes = [0] * len(addresses)
    if op is not None:
        for role, descs in (("i", op.input_desc), ("o", op.output_desc)):
            idx = [k for k, r in enumerate(roles) if r == role]
            if len(idx) == len(descs):
                for k, td in zip(idx, descs):
                    omitted = role == "o" and td.dtype == proto.DT_UNDEFINED   # an omitted optional output
                    sizes[k] = 0 if omitted else _io_desc(td, f"{where}, slot {k}").nbytes
    return [amap.ref(int(a), f"{where}, slot {k}", sizes[k], roles[k] in ("o", "ws"))
            for k, a in enumerate(addresses)]


def _descs(op, names) -> list[str]:
    out = []
    for k, td in enumerate(names):
        dt = _BY_GE_PROTO.get(td.dtype)
        out.append(f"{td.name or f'{op.name}:{k}'}: {dt.name if dt else td.dtype}"
                   f"[{','.join(str(d) for d in td.shape.dim)}]")
    return out


def read(om: OmFile, where: str, stages=None) -> OmModel:
    """Parses MODEL_DEF, TBE_KERNELS, WEIGHTS_DATA, TASK_INFO, SO_BINS and CUSTOM_OPS of `om`
    into a Program. `stages(name)` is called after each parsing stage (load-phase timing).
    Errors are ArchiveErrors that start with `where` (the file)."""
    try:
        return _read(om, stages or (lambda name: None))
    except ArchiveError as e:
        raise ArchiveError(f"{where}: {e}") from None


def _check_labels(program: Program, task_graphs: list[str], bodies: dict) -> None:
    """Each label is set by exactly one LABEL_SET task, and every switch/goto jumps forward, or
    back only as a Loop's back edge: from a task of a Loop's body subgraph (task_graphs[i]: the
    graph of task i's op; bodies: the Loop bodies, by graph name) to a label set in the same body.
    Whether such a loop ends is the model's own matter, as in GE (a replay with a timeout stops
    at it)."""
    set_at = {}
    for i, task in enumerate(program.tasks):
        if task.task_type == ModelTaskType.MODEL_TASK_LABEL_SET:
            if task.label_ref in set_at:
                raise ArchiveError(f"TASK_INFO tasks {set_at[task.label_ref]} and {i} both set label {task.label_ref}")
            set_at[task.label_ref] = i
    for i, task in enumerate(program.tasks):
        if task.task_type in (ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX,
                              ModelTaskType.MODEL_TASK_STREAM_LABEL_GOTO):
            for label in program.label_lists[task.label_ref]:
                if label not in set_at:
                    raise ArchiveError(f"TASK_INFO task {i} jumps to label {label}, which no LABEL_SET task sets")
                back_edge = task_graphs[i] in bodies and task_graphs[set_at[label]] == task_graphs[i]
                if set_at[label] <= i and not back_edge:
                    raise ArchiveError(f"TASK_INFO task {i} jumps back to label {label} (set by task "
                                       f"{set_at[label]}); om2gen runs backward jumps only as the back edge of a "
                                       "Loop, from its body subgraph to a label set in that body")


def _check_outputs_written(program: Program) -> None:
    """Every model output is written by some task (a slot of role "o" pointing into it): a model
    whose TASK_INFO lost the task that writes an output would hand back uninitialised memory."""
    written = set()
    for t in program.tasks:
        roles = t.roles if "o" in t.roles else ["o"] * len(t.args)   # no args_format: any slot may write
        written |= {r.index for r, role in zip(t.args, roles) if r.kind == ArgKind.OUTPUT and role == "o"}
    for i, out in enumerate(program.outputs):
        if i not in written and out.nbytes:
            raise ArchiveError(f"no task writes model output {i} ({out.name!r}); TASK_INFO is incomplete, the OM is "
                               "corrupt")


def _read(om: OmFile, stage) -> OmModel:
    md = parse_model_def(om)
    if not md.graph:
        raise ArchiveError("MODEL_DEF holds no graph")
    graph = md.graph[0]
    case = gears.gear_case(graph)
    bodies = _loop_bodies(md)
    if len(md.graph) != 1 + len(bodies) and case is None:
        raise ArchiveError(f"MODEL_DEF holds {len(md.graph)} graphs, but its root graph has no gear Case (a Case op "
                           f"with {gears.BATCH_NUM}) and {len(bodies)} Loop bodies; om2gen runs OM files whose "
                           "subgraphs are gears or Loop bodies")
    ops = _ops_by_id(md)
    graph_of = {op.id: g.name for g in md.graph for op in g.op}
    stage("parse ModelDef")
    integrity.check_partitions(md, om, "")
    stage("check partition digests")
    mtd = parse_task_def(om)
    stage("parse TaskDefs")
    kernels = []
    index_of = {}
    for name, binary in kernel_store.load(om.partition(PT.TBE_KERNELS)):
        index_of[name] = len(kernels)
        kernels.append(Kernel(entry=name, source="", template="(from the OM's TBE_KERNELS)",
                              digest=hashlib.sha256(binary).hexdigest(), binary=binary))
    stage("read kernel binaries")
    weights = memoryview(om.partition(PT.WEIGHTS_DATA))
    so_bins = op_so_store.load(om.partition(PT.SO_BINS))
    custom_items = op_so_store.load_custom_ops(om.partition(PT.CUSTOM_OPS))

    inputs, outputs = _io(graph)
    for kind, ios in (("input", inputs), ("output", outputs)):
        names = [d.name for _, d in ios]
        if len(set(names)) != len(names):
            raise ArchiveError(f"two model {kind}s share a name ({', '.join(names)}); each needs its own")
    amap = _AddressMap(md, len(weights), inputs, outputs)
    program = Program(
        name=md.name or graph.name, inputs=[d for _, d in inputs], outputs=[d for _, d in outputs],
        kernels=kernels, tasks=[], constants=[], constants_size=len(weights), work_size=amap.work_size,
        args_size=0, source_digest=hashlib.sha256(bytes(om.partition(PT.MODEL_DEF))).hexdigest(), opsets={},
        label_num=_attr_int(md, "label_num", 0), source_format="classic OM (MODEL_DEF partition)",
        gears=None if case is None else gears.read_table(md, case, [d for _, d in inputs], [d for _, d in outputs],
                                                         set(bodies)))
    if len(weights):
        program.constants.append(Constant("WEIGHTS_DATA", np.frombuffer(weights, np.uint8), 0))
    model = OmModel(program, md, weights, so_bins, custom_items)
    if program.label_num > len(mtd.task):
        raise ArchiveError(f"MODEL_DEF says label_num {program.label_num}, but TASK_INFO has only "
                           f"{len(mtd.task)} tasks to set them")
    args_offset = 0
    task_graphs = []
    for t, td in enumerate(mtd.task):
        task = _task(t, td, ops, amap, program, model, index_of, args_offset)
        program.tasks.append(task)
        task_graphs.append(graph_of[_op_index(td)])
        args_offset += (task.args_size + 7) // 8 * 8
    program.args_size = args_offset
    _check_labels(program, task_graphs, bodies)
    _check_outputs_written(program)
    program.graph_json = _graph_json(md, case, program)
    # last: a MODEL_DEF edit the checks above refuse is named by them, not as a disagreement here
    inout = next((p.data for p in om.partitions if p.type == PT.MODEL_INOUT_INFO), None)
    if inout is not None:   # om2gen writes it into every .om; older ones have none
        inout_info.check(inout, inout_info.describe(program.inputs, program.outputs, program.gears,
                                                    dynamic_shapes.ranges(graph)))
    stage("decode the task args")
    return model


def target_of(model_def, where: str):
    """The om2gen target (toolchain.targets.Target) an OM was built for: its soc_version."""
    from ...toolchain import targets
    a = model_def.attr["soc_version"] if "soc_version" in model_def.attr else None
    name = a.s.decode("utf-8", "replace") if a is not None and a.WhichOneof("value") == "s" else ""
    if name not in targets.TARGETS:
        raise ArchiveError(f"{where}: built for soc_version {name!r}, which is not an om2gen target "
                           f"({', '.join(targets.TARGETS)}); only OM files written by om2gen can be run or converted")
    return targets.TARGETS[name]


def _ops_by_id(md) -> dict:
    """{OpDef.id: op} over every graph (a task's op_index is an id: GE numbers the ops of the root
    graph and its subgraphs as one list)."""
    ops = {}
    for graph in md.graph:
        for op in graph.op:
            if op.id in ops:
                raise ArchiveError(f"ops {ops[op.id].name!r} and {op.name!r} have the same id {op.id}; each op's id "
                                   "is its own")
            ops[op.id] = op
    return ops


def _loop_bodies(md) -> dict:
    """{graph name: the Loop op whose body it is}: every Loop op (in any graph) names one body
    subgraph that MODEL_DEF holds and no other op names."""
    graphs = {g.name for g in md.graph[1:]}
    bodies = {}
    for g in md.graph:
        for op in g.op:
            if op.type != "Loop":
                continue
            names = list(op.subgraph_name)
            if len(names) != 1 or names[0] not in graphs or names[0] in bodies or names[0] == g.name:
                raise ArchiveError(f"Loop op {op.name!r} names the subgraphs {names}; a Loop names one body, a graph "
                                   f"of MODEL_DEF ({sorted(graphs)}) that no other Loop names")
            bodies[names[0]] = op
    return bodies


def _op_index(td) -> int:
    """The OpDef id a TaskDef refers to (where, by its type; _task has checked it exists)."""
    part = {ModelTaskType.MODEL_TASK_LABEL_SET: "label_set",
            ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX: "label_switch_by_index",
            ModelTaskType.MODEL_TASK_STREAM_LABEL_GOTO: "label_goto_ex"}.get(ModelTaskType(td.type))
    return getattr(td, part).op_index if part else td.kernel.context.op_index


def _op(ops: dict, index: int, where: str):
    if index not in ops:
        raise ArchiveError(f"{where} refers to op {index}, which MODEL_DEF does not have (its {len(ops)} ops have "
                           f"the ids {min(ops, default=0)}..{max(ops, default=0)})")
    return ops[index]


def _task(t: int, td, ops: dict, amap: _AddressMap, program: Program, model: OmModel, index_of: dict,
          args_offset: int) -> Task:
    where = f"TASK_INFO task {t}"
    try:
        tt = ModelTaskType(td.type)
    except ValueError:
        raise ArchiveError(f"{where} has task type {td.type}, which GE does not define") from None
    if tt not in _DISPATCH:
        raise ArchiveError(f"{where} is a {tt.name} task, which om2gen's executor does not run (it runs "
                           f"{', '.join(x.name for x in _DISPATCH)})")
    if tt in (ModelTaskType.MODEL_TASK_KERNEL, ModelTaskType.MODEL_TASK_CUSTOM_KERNEL):
        kd = td.kernel
        op = _op(ops, kd.context.op_index, where)
        where = f"{where} (op {op.name!r})"
        n = kd.context.args_count
        args = bytes(kd.args)
        if len(args) != kd.args_size or len(args) < 8 * n:
            raise ArchiveError(f"{where}: args hold {len(args)} bytes, args_size says {kd.args_size}, and "
                               f"{n} address slots need {8 * n}")
        if (len(args) - 8 * n) % 8:
            raise ArchiveError(f"{where}: {len(args) - 8 * n} tiling bytes after the address slots; tiling data "
                               "is whole int64 words")
        if not 0 <= kd.block_dim <= MAX_BLOCK_DIM:
            raise ArchiveError(f"{where}: block_dim {kd.block_dim}, GE allows 1..{MAX_BLOCK_DIM}")
        roles = [r for r in kd.context.args_format.strip("{}").split("}{") if r]
        if len(roles) != n and roles[-1:] == ["t"]:   # the tiling inline; a sink kernel's is an address slot
            roles = roles[:-1]
        if roles and len(roles) != n:
            raise ArchiveError(f"{where}: args_format {kd.context.args_format!r} describes {len(roles)} address slots, "
                               f"args_count says {n}; the OM is corrupt")
        if len(roles) != n:
            roles = ["i"] * n
        refs = _slots(struct.unpack_from(f"<{n}Q", args), amap, where, roles, op)
        if tt == ModelTaskType.MODEL_TASK_KERNEL:
            if kd.kernel_name not in index_of:
                raise ArchiveError(f"{where} runs kernel {kd.kernel_name!r}, which TBE_KERNELS does not hold")
            kernel, ref = index_of[kd.kernel_name], -1
            try:
                kernel_type = CcKernelType(kd.context.kernel_type)
            except ValueError:
                raise ArchiveError(f"{where} has kernel type {kd.context.kernel_type}, which GE does not define") from None
        else:
            kernel, kernel_type = -1, CcKernelType.CUSTOMIZED
            ref = _custom_op(op, kd, refs, roles, model, where)
        return Task(task_type=tt, dispatch_type=_DISPATCH[tt], kernel_type=kernel_type, kernel=kernel,
                    block_dim=max(int(kd.block_dim), 1), args=refs, tiling=args[8 * n:], op_name=op.name,
                    op_type=op.type, label=f"k{t:03d}_{op.type}", inputs_desc=_descs(op, op.input_desc),
                    outputs_desc=_descs(op, op.output_desc), args_offset=args_offset, roles=roles, label_ref=ref)
    if tt == ModelTaskType.MODEL_TASK_LABEL_SET:
        op = _op(ops, td.label_set.op_index, where)
        label = int(td.label_set.label_id)
        if not 0 <= label < program.label_num:
            raise ArchiveError(f"{where} sets label {label}, the model has {program.label_num} labels")
        return Task(task_type=tt, dispatch_type=_DISPATCH[tt], kernel_type=CcKernelType.INVALID, op_name=op.name,
                    op_type=op.type, label=f"k{t:03d}_LabelSet", attrs_desc=f"labels L{label}",
                    args_offset=args_offset, label_ref=label)
    if tt == ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX:
        op = _op(ops, td.label_switch_by_index.op_index, where)
        labels = list(op.attr["_label_switch_list"].list.i) if "_label_switch_list" in op.attr else []
        if len(labels) != td.label_switch_by_index.label_max or not labels:
            raise ArchiveError(f"{where}: op {op.name!r} lists labels {labels}, label_max is "
                               f"{td.label_switch_by_index.label_max}")
    else:
        op = _op(ops, td.label_goto_ex.op_index, where)
        labels = [int(td.label_goto_ex.label_id)]
    if any(not 0 <= x < program.label_num for x in labels):
        raise ArchiveError(f"{where} jumps to labels {labels}, the model has {program.label_num} labels")
    if len(op.input_i) != 1:
        raise ArchiveError(f"{where}: op {op.name!r} must have one input address (the branch index), has "
                           f"{len(op.input_i)}")
    program.label_lists.append(labels)
    refs = _slots(op.input_i, amap, f"{where} (op {op.name!r})")
    return Task(task_type=tt, dispatch_type=_DISPATCH[tt], kernel_type=CcKernelType.INVALID, args=refs,
                op_name=op.name, op_type=op.type, label=f"k{t:03d}_{op.type}",
                inputs_desc=[f"{op.name}: uint32[] (branch index)"],
                attrs_desc="labels " + ", ".join(f"L{x}" for x in labels), args_offset=args_offset, roles=["i"],
                label_ref=len(program.label_lists) - 1)


def _custom_op(op, kd, refs, roles, model: OmModel, where: str) -> int:
    """Registers the custom operator instance of a CUSTOM_KERNEL task; returns its index."""
    item = int(op.attr["_custom_op_item"].i) if "_custom_op_item" in op.attr else -1
    if not 0 <= item < len(model.custom_items):
        raise ArchiveError(f"{where}: custom operator item {item}, CUSTOM_OPS holds {len(model.custom_items)}")
    kernel = model.custom_items[item]
    if kernel.op_type != kd.kernel_name:
        raise ArchiveError(f"{where}: task runs custom op {kd.kernel_name!r}, CUSTOM_OPS item {item} is "
                           f"{kernel.op_type!r}")
    n_in = sum(1 for r in roles if r == "i")
    descs = []
    for k, td in enumerate(list(op.input_desc)[:n_in] + list(op.output_desc)):
        if k >= n_in and td.dtype == proto.DT_UNDEFINED:   # an omitted optional output (ops/custom.OMITTED)
            descs.append(TensorDesc(OMITTED, ()))
            continue
        dt = _BY_GE_PROTO.get(td.dtype)
        if dt is None:
            raise ArchiveError(f"{where}: a tensor of ge.proto data type {td.dtype}")
        shape = tuple(int(d) for d in td.shape.dim)
        if len(shape) > MAX_CUSTOM_RANK or any(not 0 <= d <= MAX_DIM for d in shape):
            raise ArchiveError(f"{where}: custom operator tensor of shape {list(shape)}; custom operators take "
                               f"static shapes of rank <= {MAX_CUSTOM_RANK}")
        descs.append(TensorDesc(dt, shape))
    if len(descs) != len(refs):
        raise ArchiveError(f"{where}: {len(refs)} address slots for {len(descs)} tensor descriptions")
    digest = hashlib.sha256(kernel.data).hexdigest()[:12]
    model.program.custom_ops.append(CustomOpDef(
        op_type=kernel.op_type, bin_name=f"{kernel.op_type}_{digest}_CustomKernel.bin", blob=kernel.data,
        library="", input_num=n_in, output_num=len(descs) - n_in, descs=descs))
    model.custom_op_refs.append(kd.so_name)
    return len(model.program.custom_ops) - 1


def _attr_value(a):
    kind = a.WhichOneof("value")
    if kind == "list":
        lv = a.list
        for name in ("i", "f", "s", "b"):
            values = list(getattr(lv, name))
            if values:
                return [v.decode("utf-8", "replace") for v in values] if name == "s" else values
        return []
    if kind == "s":
        return a.s.decode("utf-8", "replace")
    return getattr(a, kind) if kind in ("i", "f", "b") else None


def _fused_from(op) -> list[str]:
    """The original ops a fused op computes (GE's _datadump_original_op_names), [] for others. A
    value of another kind names none, and is left out as the attrs _attr_value cannot read are."""
    if ORIGINAL_OP_NAMES not in op.attr:
        return []
    names = _attr_value(op.attr[ORIGINAL_OP_NAMES])
    return names if isinstance(names, list) and all(isinstance(n, str) for n in names) else []


def _graph_json(md, case, program: Program) -> GraphJson:
    """The graph summary an OM2 archive carries (op_attr.json, debug/ge_model.json): the root
    graph's nodes, a gear model's Case with its attributes as the compiler names them and each
    gear's subgraph (lower/graph_json.py)."""
    io = lambda d: {"name": d.name, "dtype": d.dtype, "shape": list(d.shape)}  # noqa: E731
    root = md.graph[0]
    graphs = {g.name: g for g in md.graph}
    nodes = _nodes(root, graphs)
    if case is not None:
        g = program.gears
        subgraphs = {sub.name: sub for sub in md.graph[1:]}
        node = next(n for n in nodes if n["name"] == case.name)
        node["attrs"] = {"batch_num": len(g.values), "dynamic_type": g.dynamic_type,
                         "user_designate_shape_order": list(g.order),
                         **{f"pred_value_{i}": list(v) for i, v in enumerate(g.values)}}
        node["subgraphs"] = [{"name": branch_key(i), **_subgraph_io(subgraphs[name], program),
                              "nodes": _nodes(subgraphs[name], graphs)} for i, name in enumerate(case.subgraph_name)]
    return {"name": root.name or program.name, "inputs": [io(d) for d in program.inputs],
            "outputs": [io(d) for d in program.outputs], "nodes": nodes}


def _subgraph_io(graph, program: Program) -> dict:
    """A gear subgraph's inputs (its Data ops for the model's inputs) and outputs (its
    NetOutput's), each with the model input or output it stands for (gears.read_table has
    checked them: a Data op's _parent_node_index names the input, a NetOutput's inputs are the
    outputs in order)."""
    def value(td, outer: str) -> dict:
        dt = _BY_GE_PROTO.get(td.dtype)
        return {"name": td.name, "dtype": dt.name if dt else str(td.dtype), "shape": list(td.shape.dim),
                "outer": outer}
    inputs, outputs = [], []
    for op in graph.op:
        parent = op.attr[gears.PARENT_NODE_INDEX].i if gears.PARENT_NODE_INDEX in op.attr else 0
        if op.type == "Data" and parent:
            inputs.append({**value(op.output_desc[0], program.inputs[parent - 1].name), "name": op.name})
        elif op.type == "NetOutput":
            outputs = [value(td, program.outputs[j].name) for j, td in enumerate(op.input_desc)]
    return {"inputs": inputs, "outputs": outputs}


def _nodes(graph, graphs: dict) -> list:
    """The graph's nodes as the dump has them; a Loop's with its body (graphs: MODEL_DEF's, by name)."""
    nodes = []
    for op in graph.op:
        if op.type in ("Data", "Const", "NetOutput", "LabelSet", "LabelSwitchByIndex", "LabelGotoEx"):
            continue
        attrs = {k: v for k, v in sorted((k, _attr_value(a)) for k, a in op.attr.items())
                 if v is not None and not k.startswith("_") and k not in ("tvm_magic", "tvm_blockdim")}
        node = {"name": op.name, "op_type": op.type, "fused_from": _fused_from(op), "attrs": attrs}
        if op.type == "Loop":   # _loop_bodies has checked it names one body
            body = graphs[op.subgraph_name[0]]
            node["subgraphs"] = [{"name": "body", **_body_io(body), "nodes": _nodes(body, graphs)}]
        nodes.append(node)
    return nodes


def _body_io(graph) -> dict:
    """A Loop body's inputs (its Data ops, by index) and outputs (its NetOutput's)."""
    def value(td, name: str) -> dict:
        dt = _BY_GE_PROTO.get(td.dtype)
        return {"name": name, "dtype": dt.name if dt else str(td.dtype), "shape": list(td.shape.dim)}
    data = [op for op in graph.op if op.type == "Data" and op.output_desc]
    data.sort(key=lambda op: op.attr["index"].i if "index" in op.attr else 0)
    nets = [op for op in graph.op if op.type == "NetOutput"]
    outputs = [value(td, td.name or f"output {j}") for j, td in enumerate(nets[0].input_desc)] if nets else []
    return {"inputs": [value(op.output_desc[0], op.name) for op in data], "outputs": outputs}
