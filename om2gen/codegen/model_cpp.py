"""Program → the model library's C++ sources (templates/model/tables.cpp.j2, load_and_run.cpp.j2)."""
from __future__ import annotations

from ..formats.om2 import layout
from ..ir import model_tables, symbolic
from ..ir.program import Program
from ..ir.tasks import OpDispatchType
from ..version import GENERATOR
from . import literals
from . import render as jinja
from .load_and_run import load_and_run_source

# Om2OpDef's fields in declaration order (ir/model_tables.py; a unit test checks them against
# runtime_abi/include/om2/om2_model_tables.h). The model library is C++17, where designated
# initializers are an extension (-Wpedantic and clang's default warnings reject them), so each
# kOpDefs entry is a block with every value named in a comment instead.
OP_DEF_FIELDS = model_tables.OP_DEF_FIELDS


def render_sources(program: Program, stem: str, arch: str, producer: str = "", index: int = 0) -> dict[str, str]:
    """The model library's sources: {file name: text}, for model `index` of an archive. The tables
    are this model; the load-and-run code is the same for every model (so its object is compiled
    once and cached)."""
    tables = layout.tables_source(stem)
    return {tables: render_tables(program, tables, arch, producer, index), **load_and_run_source()}


def _array_size(rows) -> int:
    """A C array's declared size: never 0 (an empty initializer list is no C++ array)."""
    return max(len(rows), 1)


def _dims(dims) -> str:
    """A dims initializer: a rank-0 tensor's array holds one unused 0."""
    return ", ".join(map(str, dims)) or "0"


def render_tables(program: Program, file_name: str, arch: str, producer: str = "", index: int = 0) -> str:
    """<model>_tables.cpp: the rows of ir/model_tables.py as C++ constants, each with the names and
    descriptions (of the Program's tasks) that say what it is."""
    tables = model_tables.flatten(program)

    def io(d: model_tables.IoDesc) -> dict:
        return {"name": d.name, "acl_type": d.dtype.acl_name, "nbytes": d.size, "rank": len(d.dims),
                "dims_or_zero": _dims(d.dims),
                "comment": f"{d.name}: {d.dtype.name}[{','.join(map(str, d.dims))}] ({d.size} bytes)"}

    width = max(map(len, OP_DEF_FIELDS))
    tasks = [_task_row(program, tables, t, op, width) for t, op in zip(program.tasks, tables.op_defs)]
    load_tasks = [_task_row(program, tables, t, op, width) for t, op in zip(program.load_tasks, tables.load_op_defs)]
    m = {
        "file_name": file_name, "model_name": tables.model_name, "generator": GENERATOR,
        "source_digest": program.source_digest, "source_format": program.source_format, "producer": producer,
        "opsets": ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(program.opsets.items())),
        "inputs": [io(d) for d in tables.inputs], "outputs": [io(d) for d in tables.outputs],
        "kernels": [{"bin_file": b.bin_file, "entry": b.entry, "template": k.template}
                    for b, k in zip(tables.kernel_bins, program.kernels)],
        "tasks": tasks, "load_tasks": load_tasks, "all_tasks": tasks + load_tasks,   # (the slots' and tiling's order)
        "model_buffer_bytes": sum(b.size for b in program.model_buffers),
        "model_buffers": [{"size": b.size, "comment": f"{b.name}: written by node {b.node}"}
                          for b in program.model_buffers],
        "array_sizes": {"inputs": _array_size(tables.inputs), "outputs": _array_size(tables.outputs),
                        "kernel_bins": _array_size(tables.kernel_bins), "op_defs": _array_size(tables.op_defs)},
        "constant_num": tables.constant_num,
        "work_size": tables.work_size, "constants_size": tables.constants_size, "args_size": tables.args_size,
        "io_slot_num": tables.io_slot_num, "tiling_word_num": len(tables.tiling_data),
        "label_num": tables.label_num,
        "label_lists": [{"first": ls.first, "num": ls.num,
                         "labels": ", ".join(f"L{x}" for x in tables.label_list_entries[ls.first:ls.first + ls.num])}
                        for ls in tables.label_lists],
        "label_list_entries": list(tables.label_list_entries),
        "custom_ops": _custom_ops(tables),
        "gears": [{"shape_data": ", ".join(map(str, v)), "io_sizes": ", ".join(map(str, z)),
                   "comment": f"gear {i}: " + ", ".join(f"{d.name}[{','.join(map(str, s))}]" for d, s in
                                                      zip(tables.inputs[:-1], program.gears.input_shapes[i]))}
                  for i, (v, z) in enumerate(zip(tables.gear_values, tables.gear_io_sizes))],
        "gear_value_num": len(tables.gear_values[0]) if tables.gear_values else 0,
        "memory_summary": _memory_summary(program),
        **_dynamic(program),
        # where the archive keeps what the comments point at
        "paths": {"build_commands": layout.build_commands(index), "memory_plan": layout.memory_plan_json(index),
                  "kernels": layout.kernels_dir(arch), "custom_op_binaries": layout.custom_op_binaries_dir(arch),
                  "load_and_run": layout.LOAD_AND_RUN_SOURCE},
    }
    return jinja.render("model/tables.cpp.j2", m=m)


def _task_row(program: Program, tables: model_tables.ModelTables, t, op, width: int) -> dict:
    """One kOpDefs (or kLoadOpDefs) entry with what its comments say."""
    names = t.inputs_desc + t.outputs_desc + ["scratch"] * (op.slot_num - len(t.inputs_desc) - len(t.outputs_desc))
    slots = [{"args_offset": s.args_offset, "kind": s.kind.c_name, "index": s.index, "offset": s.offset,
              "comment": name.split(": ")[0]} for s, name in zip(tables.slots_of(op), names)]
    kernel_note = _kernel_note(program, t)
    values = (f"OM2_DISPATCH_{op.dispatch_type.name}", op.task_type.name, f"CC_KERNEL_{op.kernel_type.name}",
              op.kernel, op.block_dim, op.args_offset, op.args_size, op.first_slot, op.slot_num, op.first_tiling,
              op.tiling_num, literals.c_string(op.op_name), literals.c_string(op.op_type))
    fields = [{"name": f"{name:<{width}}", "value": v, "note": kernel_note if name == "kernel" else ""}
              for name, v in zip(OP_DEF_FIELDS, values)]
    return {
        "label": t.label, "fields": fields, "op_name": t.op_name, "op_type": t.op_type,
        "kernel_entry": program.kernels[t.kernel].entry if t.kernel >= 0 else "-",
        "block_dim": t.block_dim,
        "tiling_rows": _tiling_rows(list(tables.tiling_of(op)), tiling_names(t)),
        "slots": slots, "inputs_desc": t.inputs_desc, "outputs_desc": t.outputs_desc, "attrs_desc": t.attrs_desc,
        "fuses": t.fuses,
    }

TILING_WORDS_PER_ROW = 6


def _memory_summary(program: Program) -> list[str]:
    """The memory plan in a few comment lines (the whole plan: layout.memory_plan_json)."""
    scratch = sum(b.name.startswith("::scratch") for b in program.buffers)
    lines = [f"Workspace {program.work_size} bytes: {len(program.buffers)} buffers ({scratch} of them task scratch "
             f"regions); {len(program.views)} {'value is a view' if len(program.views) == 1 else 'values are views'} of "
             "another's bytes."]
    if program.buffers:
        b = max(program.buffers, key=lambda b: (b.size, -b.offset))
        label = program.tasks[b.first_task].label
        lines.append(f"Largest: {b.name}, {b.size} bytes at offset {b.offset}, written by {label}"
                     + (f", last read by {program.tasks[b.last_task].label}." if b.last_task != b.first_task else "."))
    return lines


def tiling_names(t) -> list[str]:
    """The names of a task's tiling words: its kernel's TilingData fields, or word<i> when the
    task came without them (read from an OM file)."""
    words = len(t.tiling) // 8
    return list(t.tiling_fields) if len(t.tiling_fields) == words else [f"word{i}" for i in range(words)]


def _tiling_rows(words: list[int], fields: list[str]) -> list[dict]:
    """A task's tiling words, a few per row, each row with the names of its words beside it."""
    rows = []
    for i in range(0, len(words), TILING_WORDS_PER_ROW):
        chunk = list(zip(fields, words))[i:i + TILING_WORDS_PER_ROW]
        rows.append({"words": "".join(f"{w}, " for _, w in chunk),
                     "names": " ".join(f"{n}={w}" for n, w in chunk)})
    width = max((len(r["words"]) for r in rows), default=0)
    for r in rows:
        r["words"] = f"{r['words']:<{width}}"
    return rows


def _kernel_note(program: Program, t) -> str:
    """What an Om2OpDef's `kernel` field indexes, by dispatch type (om2_model_tables.h)."""
    if t.kernel >= 0:
        return program.kernels[t.kernel].entry
    return {OpDispatchType.CUSTOM_KERNEL: f"kCustomOps[{t.label_ref}]",
            OpDispatchType.LABEL_SET: f"label L{t.label_ref}",
            OpDispatchType.LABEL_SWITCH_BY_INDEX: f"kLabelLists[{t.label_ref}]",
            OpDispatchType.LABEL_GOTO_EX: f"kLabelLists[{t.label_ref}]"}.get(t.dispatch_type, "")


def _custom_ops(tables: model_tables.ModelTables) -> list[dict]:
    ops = []
    for c in tables.custom_ops:
        descs = [{"acl": d.dtype.acl_name, "rank": len(d.dims), "dims": _dims(d.dims),
                  "role": "input" if i < c.input_num else "output",
                  "comment": f"{d.dtype.name}[{','.join(map(str, d.dims))}]"} for i, d in enumerate(tables.descs_of(c))]
        ops.append({"op_type": c.op_type, "bin_file": c.bin_file, "input_num": c.input_num,
                    "output_num": c.output_num, "first_desc": c.first_desc, "descs": descs})
    return ops


def _dynamic(program: Program) -> dict:
    """A dynamic model's symbols and its inputs' and outputs' dims as C++ (ir/symbolic.py)."""
    d = program.dynamic
    if d is None:
        return {"symbols": [], "io_dims": [], "symbols_offset": 0, "guard_function": ""}

    def c_name(s) -> str:
        return f"sym_{s.name}"
    symbols = [{"name": s.name, "lo": s.lo, "hi": -1 if s.hi is None else s.hi, "input": max(0, s.input),
                "axis": max(0, s.axis), "multiple": s.multiple, "c_name": f"sym_{s.name}", "producer": s.producer,
                "comment": f"{s.name}: {s.source(program.inputs)}, {s.lo}~{'' if s.hi is None else s.hi}"}
               for s in d.symbols]
    io_dims = []
    for kind, descs, dims in (("input", program.inputs, d.input_dims), ("output", program.outputs, d.output_dims)):
        for io, shape in zip(descs, dims):
            for axis, dim in enumerate(shape):
                io_dims.append({"expr": symbolic.c_expr(dim, c_name),
                                "comment": f"{kind} {io.name} dim {axis}: {symbolic.text(dim)}"})
    return {"symbols": symbols, "io_dims": io_dims, "symbols_offset": d.symbols_offset,
            "guard_function": d.guard_function}
