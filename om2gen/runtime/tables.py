"""A Program → Om2ModelTables in memory (om2/om2_model_tables.h), for the table-driven model.

The generated <model>_tables.cpp of an OM2 archive holds these tables as C++ constants; the
classic-OM executor builds the same structs here, from what formats/om/reader.py parsed (flattened
by ir/model_tables.py, as the C++ is), and passes them to om2x_tables_model_load — the same
load-and-run code then registers, captures and runs.
Every cffi allocation is kept by the returned Tables object, which must outlive the model.
"""
from __future__ import annotations

from ..ir.model_tables import flatten
from ..ir.program import Program
from ..native import ffi


class Tables:
    def __init__(self, program: Program):
        self._keep = []
        m = flatten(program)
        t = self.ptr = ffi.new("Om2ModelTables *")
        t.model_name = self._str(m.model_name)
        t.input_num, t.inputs = len(m.inputs), self._io(m.inputs)
        t.output_num, t.outputs = len(m.outputs), self._io(m.outputs)

        bins = self._array("Om2KernelBin", len(m.kernel_bins))
        for c, k in zip(bins, m.kernel_bins):
            c.bin_file, c.entry = self._str(k.bin_file), self._str(k.entry)
        t.kernel_bin_num, t.kernel_bins = len(m.kernel_bins), bins

        slots = self._array("Om2ArgSlot", len(m.arg_slots))
        for c, s in zip(slots, m.arg_slots):
            c.args_offset, c.kind, c.index, c.offset = s.args_offset, int(s.kind), s.index, s.offset
        t.arg_slot_num, t.arg_slots = len(m.arg_slots), slots
        t.tiling_data = self._keep_new("int64_t[]", list(m.tiling_data) + [0])
        t.tiling_word_num = len(m.tiling_data)

        ops = self._array("Om2OpDef", len(m.op_defs))
        for c, op in zip(ops, m.op_defs):
            c.dispatch_type, c.task_type, c.kernel_type = int(op.dispatch_type), int(op.task_type), int(op.kernel_type)
            c.kernel, c.block_dim, c.args_offset, c.args_size = op.kernel, op.block_dim, op.args_offset, op.args_size
            c.first_slot, c.slot_num, c.first_tiling, c.tiling_num = op.first_slot, op.slot_num, op.first_tiling, \
                op.tiling_num
            c.op_name, c.op_type = self._str(op.op_name), self._str(op.op_type)
        t.task_num, t.op_defs = len(m.op_defs), ops

        t.constants_size = m.constants_size
        t.gear_num = len(m.gear_values)
        t.gear_value_num = len(m.gear_values[0]) if m.gear_values else 0
        t.gear_values = self._keep_new("int32_t[]", [v for g in m.gear_values for v in g] + [0])
        t.gear_io_sizes = self._keep_new("uint64_t[]", [z for g in m.gear_io_sizes for z in g] + [0])
        t.constant_num = m.constant_num
        t.work_size = m.work_size
        t.args_size = m.args_size
        t.io_slot_num = m.io_slot_num
        t.label_num = m.label_num

        lists = self._array("Om2LabelList", len(m.label_lists))
        for c, ls in zip(lists, m.label_lists):
            c.first, c.num = ls.first, ls.num
        t.label_list_num, t.label_lists = len(m.label_lists), lists
        t.label_list_entries = self._keep_new("uint32_t[]", list(m.label_list_entries) + [0])

        customs = self._array("Om2CustomOpDef", len(m.custom_ops))
        for c, op in zip(customs, m.custom_ops):
            c.op_type, c.bin_file = self._str(op.op_type), self._str(op.bin_file)
            c.input_num, c.output_num, c.first_desc = op.input_num, op.output_num, op.first_desc
        descs = self._array("Om2CustomTensorDesc", len(m.custom_tensor_descs))
        for c, d in zip(descs, m.custom_tensor_descs):
            c.data_type, c.dim_num = d.dtype.acl, len(d.dims)
            for j, dim in enumerate(d.dims):
                c.dims[j] = dim
        t.custom_op_num, t.custom_ops, t.custom_tensor_descs = len(m.custom_ops), customs, descs

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
        for c, d in zip(arr, descs):
            c.name = self._str(d.name)
            c.data_type = d.dtype.acl
            c.size = d.size
            c.dim_num = len(d.dims)
            c.dims = self._keep_new("int64_t[]", list(d.dims) or [0])
        return arr
