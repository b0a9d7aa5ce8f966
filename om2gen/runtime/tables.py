"""A Program → Om2ModelTables in memory (om2/om2_model_tables.h), for the table-driven model.

The generated <model>_tables.cpp of an OM2 archive holds these tables as C++ constants; the
classic-OM executor builds the same structs here, from what formats/om/reader.py parsed, and passes
them to om2x_tables_model_load — the same load-and-run code then registers, captures and runs.
Every cffi allocation is kept by the returned Tables object, which must outlive the model.
"""
from __future__ import annotations

import struct

from ..ir import dtypes
from ..ir.program import Program
from ..ir.tasks import ArgKind
from ..native import ffi



class Tables:
    def __init__(self, program: Program):
        self._keep = []
        p = program
        t = self.ptr = ffi.new("Om2ModelTables *")
        t.model_name = self._str(p.name)
        t.input_num, t.inputs = len(p.inputs), self._io(p.inputs)
        t.output_num, t.outputs = len(p.outputs), self._io(p.outputs)

        bins = self._array("Om2KernelBin", len(p.kernels))
        for i, k in enumerate(p.kernels):
            bins[i].bin_file, bins[i].entry = self._str(k.file_name), self._str(k.entry)
        t.kernel_bin_num, t.kernel_bins = len(p.kernels), bins

        slots = self._array("Om2ArgSlot", sum(len(task.args) for task in p.tasks))
        words = []
        ops = self._array("Om2OpDef", len(p.tasks))
        s = io_slots = 0
        for i, task in enumerate(p.tasks):
            op = ops[i]
            op.dispatch_type, op.task_type, op.kernel_type = int(task.dispatch_type), int(task.task_type), \
                int(task.kernel_type)
            op.kernel = task.kernel if task.kernel >= 0 else task.label_ref
            op.block_dim, op.args_offset, op.args_size = task.block_dim, task.args_offset, task.args_size
            op.first_slot, op.slot_num = s, len(task.args)
            op.first_tiling, op.tiling_num = len(words), len(task.tiling) // 8
            op.op_name, op.op_type = self._str(task.op_name), self._str(task.op_type)
            for k, a in enumerate(task.args):
                slots[s].args_offset, slots[s].kind = task.args_offset + 8 * k, int(a.kind)
                slots[s].index, slots[s].offset = a.index, a.offset
                io_slots += a.kind in (ArgKind.INPUT, ArgKind.OUTPUT)
                s += 1
            words += struct.unpack(f"<{len(task.tiling) // 8}q", task.tiling[:len(task.tiling) // 8 * 8])
        t.arg_slot_num, t.arg_slots = s, slots
        t.tiling_data = self._keep_new("int64_t[]", words + [0])
        t.tiling_word_num = len(words)
        t.constants_size = p.constants_size
        t.task_num, t.op_defs = len(p.tasks), ops
        t.constant_num = 1
        t.work_size = p.work_size
        t.args_size = max(p.args_size, 8)
        t.io_slot_num = io_slots
        t.label_num = p.label_num

        lists = self._array("Om2LabelList", len(p.label_lists))
        entries = []
        for i, labels in enumerate(p.label_lists):
            lists[i].first, lists[i].num = len(entries), len(labels)
            entries += labels
        t.label_list_num, t.label_lists = len(p.label_lists), lists
        t.label_list_entries = self._keep_new("uint32_t[]", entries + [0])

        customs = self._array("Om2CustomOpDef", len(p.custom_ops))
        descs = self._array("Om2CustomTensorDesc", sum(len(c.descs) for c in p.custom_ops))
        d = 0
        for i, c in enumerate(p.custom_ops):
            op = customs[i]
            op.op_type, op.bin_file = self._str(c.op_type), self._str(c.bin_name)
            op.input_num, op.output_num, op.first_desc = c.input_num, c.output_num, d
            for dt, shape in c.descs:
                descs[d].data_type, descs[d].dim_num = dt.acl, len(shape)
                for j, dim in enumerate(shape):
                    descs[d].dims[j] = dim
                d += 1
        t.custom_op_num, t.custom_ops, t.custom_tensor_descs = len(p.custom_ops), customs, descs

    def _keep_new(self, ctype: str, init):
        obj = ffi.new(ctype, init)
        self._keep.append(obj)
        return obj

    def _array(self, ctype: str, n: int):
        return self._keep_new(f"{ctype}[]", max(n, 1))

    def _str(self, text: str):
        return self._keep_new("char[]", text.encode("utf-8"))

    def _io(self, descs):
        arr = self._array("Om2IoDesc", len(descs))
        for i, d in enumerate(descs):
            arr[i].name = self._str(d.name)
            arr[i].data_type = dtypes.BY_NAME[d.dtype].acl
            arr[i].size = d.nbytes
            arr[i].dim_num = len(d.shape)
            arr[i].dims = self._keep_new("int64_t[]", list(d.shape) or [0])
        return arr
