"""A Program as the rows of Om2ModelTables (runtime_abi/include/om2/om2_model_tables.h).

The one place that flattens a Program's tables: every task's address slots go into one slot
array, its tiling words into one int64 array, the label lists into one entry array and the
custom ops' tensor descriptions into one array, each task or op keeping where its part starts.
Two writers read the result: codegen/model_cpp.py spells it as the C++ constants of
<model>_tables.cpp, and runtime/tables.py builds the same structs in memory for the classic-OM
executor, so the two cannot drift apart. Values stay Python's (enum members, DType objects):
each writer spells them its own way (C names there, numbers here).
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, fields

from .dtypes import BY_NAME, DType
from .program import Program
from .tasks import ArgKind, CcKernelType, ModelTaskType, OpDispatchType


@dataclass(frozen=True)
class IoDesc:
    """Om2IoDesc."""
    name: str
    dtype: DType
    size: int                   # bytes
    dims: tuple[int, ...]


@dataclass(frozen=True)
class KernelBin:
    """Om2KernelBin."""
    bin_file: str
    entry: str


@dataclass(frozen=True)
class ArgSlot:
    """Om2ArgSlot: one 8-byte address slot of the args table."""
    args_offset: int
    kind: ArgKind
    index: int
    offset: int


@dataclass(frozen=True)
class OpDef:
    """Om2OpDef, its fields in the header's order (a unit test checks them against it)."""
    dispatch_type: OpDispatchType
    task_type: ModelTaskType
    kernel_type: CcKernelType
    kernel: int                 # what it indexes depends on dispatch_type (the header says)
    block_dim: int
    args_offset: int
    args_size: int
    first_slot: int
    slot_num: int
    first_tiling: int
    tiling_num: int
    op_name: str
    op_type: str


OP_DEF_FIELDS = tuple(f.name for f in fields(OpDef))


@dataclass(frozen=True)
class LabelList:
    """Om2LabelList: label_list_entries[first, first + num)."""
    first: int
    num: int


@dataclass(frozen=True)
class CustomTensorDesc:
    """Om2CustomTensorDesc."""
    dtype: DType
    dims: tuple[int, ...]


@dataclass(frozen=True)
class CustomOpDef:
    """Om2CustomOpDef: its tensors are custom_tensor_descs[first_desc, first_desc + input_num + output_num)."""
    op_type: str
    bin_file: str
    input_num: int
    output_num: int
    first_desc: int


# Om2ModelTables.constant_num: a Program has one constants blob.
CONSTANT_NUM = 1
# The args table is allocated (aclrtMalloc) even for a model of no tasks: never with 0 bytes.
MIN_ARGS_SIZE = 8


@dataclass(frozen=True)
class ModelTables:
    """Om2ModelTables, with each array a tuple (its count is its length)."""
    model_name: str
    inputs: tuple[IoDesc, ...]
    outputs: tuple[IoDesc, ...]
    kernel_bins: tuple[KernelBin, ...]
    arg_slots: tuple[ArgSlot, ...]
    tiling_data: tuple[int, ...]
    op_defs: tuple[OpDef, ...]
    work_size: int
    args_size: int
    io_slot_num: int            # arg slots that point at model inputs or outputs
    label_num: int
    label_lists: tuple[LabelList, ...]
    label_list_entries: tuple[int, ...]
    custom_ops: tuple[CustomOpDef, ...]
    custom_tensor_descs: tuple[CustomTensorDesc, ...]
    constants_size: int
    constant_num: int = CONSTANT_NUM
    gear_values: tuple[tuple[int, ...], ...] = ()       # per gear, the shape data (none: a static model)
    gear_io_sizes: tuple[tuple[int, ...], ...] = ()     # per gear, each input's then each output's bytes
    model_buffer_sizes: tuple[int, ...] = ()            # the buffers the load tasks write, bytes each
    load_op_defs: tuple[OpDef, ...] = ()                # the load tasks (slots and tiling after the run's)

    def slots_of(self, op: OpDef) -> tuple[ArgSlot, ...]:
        return self.arg_slots[op.first_slot:op.first_slot + op.slot_num]

    def tiling_of(self, op: OpDef) -> tuple[int, ...]:
        return self.tiling_data[op.first_tiling:op.first_tiling + op.tiling_num]

    def descs_of(self, op: CustomOpDef) -> tuple[CustomTensorDesc, ...]:
        return self.custom_tensor_descs[op.first_desc:op.first_desc + op.input_num + op.output_num]


def tiling_words(tiling: bytes) -> tuple[int, ...]:
    """A task's tiling bytes as int64 words (a trailing partial word, which no kernel reads, is dropped)."""
    n = len(tiling) // 8
    return struct.unpack(f"<{n}q", tiling[:8 * n])


def flatten(program: Program) -> ModelTables:
    def io(d) -> IoDesc:
        return IoDesc(d.name, BY_NAME[d.dtype], d.nbytes, tuple(d.shape))

    slots: list[ArgSlot] = []
    words: list[int] = []

    def op_defs(tasks) -> list[OpDef]:
        ops = []
        for t in tasks:
            task_words = tiling_words(t.tiling)
            ops.append(OpDef(t.dispatch_type, t.task_type, t.kernel_type, t.kernel if t.kernel >= 0 else t.label_ref,
                             t.block_dim, t.args_offset, t.args_size, len(slots), len(t.args), len(words),
                             len(task_words), t.op_name, t.op_type))
            slots.extend(ArgSlot(t.args_offset + 8 * i, a.kind, a.index, a.offset) for i, a in enumerate(t.args))
            words.extend(task_words)
        return ops
    ops = op_defs(program.tasks)
    load_ops = op_defs(program.load_tasks)

    lists, entries = [], []
    for labels in program.label_lists:
        lists.append(LabelList(len(entries), len(labels)))
        entries += labels

    customs, descs = [], []
    for c in program.custom_ops:
        customs.append(CustomOpDef(c.op_type, c.bin_name, c.input_num, c.output_num, len(descs)))
        descs += [CustomTensorDesc(dt, tuple(shape)) for dt, shape in c.descs]

    return ModelTables(
        model_name=program.name,
        inputs=tuple(io(d) for d in program.inputs), outputs=tuple(io(d) for d in program.outputs),
        kernel_bins=tuple(KernelBin(k.file_name, k.entry) for k in program.kernels),
        arg_slots=tuple(slots), tiling_data=tuple(words), op_defs=tuple(ops),
        work_size=program.work_size, args_size=max(program.args_size, MIN_ARGS_SIZE),
        io_slot_num=sum(s.kind in (ArgKind.INPUT, ArgKind.OUTPUT) for s in slots),
        label_num=program.label_num, label_lists=tuple(lists), label_list_entries=tuple(entries),
        custom_ops=tuple(customs), custom_tensor_descs=tuple(descs), constants_size=program.constants_size,
        model_buffer_sizes=tuple(b.size for b in program.model_buffers), load_op_defs=tuple(load_ops),
        **_gears(program))


def _gears(program: Program) -> dict:
    g = program.gears
    if g is None:
        return {}
    sizes = []
    for ins, outs in zip(g.input_shapes, g.output_shapes):
        sizes.append(tuple(math.prod(s) * BY_NAME[d.dtype].itemsize
                           for d, s in zip([*program.inputs, *program.outputs], [*ins, *outs])))
    return {"gear_values": tuple(tuple(v) for v in g.values), "gear_io_sizes": tuple(sizes)}
