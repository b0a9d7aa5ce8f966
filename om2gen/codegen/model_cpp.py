"""Program → the model library's C++ source (templates/model/model.cpp.j2)."""
from __future__ import annotations

import struct

from ..formats.om2 import layout
from ..ir.dtypes import BY_NAME
from ..ir.program import Program
from ..ir.tasks import ArgKind, OpDispatchType
from ..version import GENERATOR
from . import literals
from . import render as jinja

# Om2OpDef's fields in declaration order (runtime_abi/include/om2/om2_model_tables.h; a unit test
# checks the two agree). The model library is C++17, where designated initializers are an
# extension (-Wpedantic and clang's default warnings reject them), so each kOpDefs entry is a
# block with every value named in a comment instead.
OP_DEF_FIELDS = ("dispatch_type", "task_type", "kernel_type", "kernel", "block_dim", "args_offset", "args_size",
                 "first_slot", "slot_num", "first_tiling", "tiling_num", "op_name", "op_type")


def render_sources(program: Program, stem: str, arch: str, producer: str = "", index: int = 0) -> dict[str, str]:
    """The model library's sources: {file name: text}, for model `index` of an archive. The tables
    are this model; the load-and-run code is the same for every model (so its object is compiled
    once and cached)."""
    tables = layout.tables_source(stem)
    return {tables: render_tables(program, tables, arch, producer, index),
            layout.LOAD_AND_RUN_SOURCE: jinja.render("model/load_and_run.cpp.j2", generator=GENERATOR,
                                                     table_driven=False)}


def render_tables(program: Program, file_name: str, arch: str, producer: str = "", index: int = 0) -> str:
    def io(d):
        return {"name": d.name, "acl_type": BY_NAME[d.dtype].acl_name, "nbytes": d.nbytes,
                "rank": len(d.shape), "dims_or_zero": ", ".join(map(str, d.shape)) or "0",
                "comment": f"{d.name}: {d.dtype}[{','.join(map(str, d.shape))}] ({d.nbytes} bytes)"}

    width = max(map(len, OP_DEF_FIELDS))
    tasks = []
    first_slot = first_tiling = 0
    io_slots = 0
    for t in program.tasks:
        slots = []
        names = t.inputs_desc + t.outputs_desc + ["scratch"] * (len(t.args) - len(t.inputs_desc) - len(t.outputs_desc))
        for i, (a, name) in enumerate(zip(t.args, names)):
            slots.append({"args_offset": t.args_offset + 8 * i, "kind": a.kind.c_name, "index": a.index,
                          "offset": a.offset, "comment": name.split(": ")[0]})
            io_slots += a.kind in (ArgKind.INPUT, ArgKind.OUTPUT)
        words = list(struct.unpack(f"<{len(t.tiling) // 8}q", t.tiling))
        kernel_note = _kernel_note(program, t)
        values = (f"OM2_DISPATCH_{t.dispatch_type.name}", t.task_type.name, f"CC_KERNEL_{t.kernel_type.name}",
                  t.kernel if t.kernel >= 0 else t.label_ref, t.block_dim, t.args_offset, t.args_size,
                  first_slot, len(t.args), first_tiling, len(words), literals.c_string(t.op_name),
                  literals.c_string(t.op_type))
        fields = [{"name": f"{name:<{width}}", "value": v, "note": kernel_note if name == "kernel" else ""}
                  for name, v in zip(OP_DEF_FIELDS, values)]
        tasks.append({
            "label": t.label, "fields": fields, "op_name": t.op_name, "op_type": t.op_type,
            "kernel_entry": program.kernels[t.kernel].entry if t.kernel >= 0 else "-",
            "block_dim": t.block_dim,
            "tiling_rows": _tiling_rows(words, tiling_names(t)),
            "slots": slots, "inputs_desc": t.inputs_desc, "outputs_desc": t.outputs_desc, "attrs_desc": t.attrs_desc,
        })
        first_slot += len(t.args)
        first_tiling += len(words)
    m = {
        "file_name": file_name, "model_name": program.name, "generator": GENERATOR,
        "source_digest": program.source_digest, "source_format": program.source_format, "producer": producer,
        "opsets": ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(program.opsets.items())),
        "inputs": [io(d) for d in program.inputs], "outputs": [io(d) for d in program.outputs],
        "kernels": program.kernels, "tasks": tasks,
        "work_size": program.work_size, "constants_size": program.constants_size, "args_size": max(program.args_size, 8),
        "io_slot_num": io_slots, "tiling_word_num": first_tiling,
        "label_num": program.label_num,
        "label_lists": [{"first": sum(len(x) for x in program.label_lists[:i]), "num": len(ls),
                         "labels": ", ".join(f"L{x}" for x in ls)} for i, ls in enumerate(program.label_lists)],
        "label_list_entries": [x for ls in program.label_lists for x in ls],
        "custom_ops": _custom_ops(program),
        "memory_summary": _memory_summary(program),
        # where the archive keeps what the comments point at
        "paths": {"build_commands": layout.build_commands(index), "memory_plan": layout.memory_plan_json(index),
                  "kernels": layout.kernels_dir(arch), "custom_op_binaries": layout.custom_op_binaries_dir(arch),
                  "load_and_run": layout.LOAD_AND_RUN_SOURCE},
    }
    return jinja.render("model/tables.cpp.j2", m=m)


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


def _custom_ops(program: Program) -> list[dict]:
    ops, first = [], 0
    for c in program.custom_ops:
        descs = [{"acl": dt.acl_name, "rank": len(shape), "dims": ", ".join(map(str, shape)) or "0",
                  "comment": f"{dt.name}[{','.join(map(str, shape))}]"} for dt, shape in c.descs]
        ops.append({"op_type": c.op_type, "bin_file": c.bin_name, "input_num": c.input_num,
                    "output_num": c.output_num, "first_desc": first, "descs": descs})
        first += len(descs)
    return ops
