"""om2gen inspect for classic OM files: header, partitions, graph, tasks, kernels, packed SOs,
MODEL_INOUT_INFO.

Reads and validates the file (container.read_om); never loads or runs anything.
"""
from __future__ import annotations

from google.protobuf.message import DecodeError

from ...errors import ArchiveError
from ...ir import dtypes
from ...ir.gears import TYPE_NAMES
from ...ir.tasks import CcKernelType, ModelTaskType
from .. import op_so_store
from . import dynamic_shapes, inout_info, kernel_store, proto
from .container import read_om
from .layout import FORMAT_ND, HEADER_FIELDS
from .layout import ModelPartitionType as PT
from .layout import table_size
from .model_def_attrs import flag_from_model_def

_GE_PROTO_NAMES = {d.ge_proto: d.name for d in dtypes.BY_NAME.values()}


def _enum_name(enum, value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return str(value)


def _attr_value(a):
    which = a.WhichOneof("value")
    if which == "s":
        return a.s.decode("utf-8", "replace")
    if which in ("i", "f", "b", "dt"):
        return getattr(a, which)
    if which == "list":
        lv = a.list
        for f in ("i", "f", "b"):
            if len(getattr(lv, f)):
                return list(getattr(lv, f))
        if len(lv.s):
            return [x.decode("utf-8", "replace") for x in lv.s]
        return []
    return f"<{which}>" if which else None


def _parse(cls, data: bytes, what: str):
    msg = cls()
    try:
        msg.ParseFromString(data)
    except DecodeError as e:
        raise ArchiveError(f"{what} partition does not parse as {cls.DESCRIPTOR.full_name}: {e}") from None
    return msg


def _desc(td) -> str:
    """dtype[dims]; a dynamic tensor's ranges after it (GE's shape_range: lo~hi, lo~ unbounded)."""
    text = f"{_GE_PROTO_NAMES.get(td.dtype, f'dt{td.dtype}')}{list(td.shape.dim)}"
    if "shape_range" in td.attr:
        rows = [list(r.list_i) for r in td.attr["shape_range"].list_list_int.list_list_i]
        text += " range [" + ", ".join(f"{r[0]}~{'' if r[1] < 0 else r[1]}" if len(r) == 2 and r[0] != r[1]
                                      else str(r[0] if r else "?") for r in rows) + "]"
    return text


def _model_io(md):
    """The inputs, outputs and GearTable (None: a static model) as formats/om/reader.py reads
    them from MODEL_DEF; ArchiveError if they do not read."""
    from . import gears
    from .reader import _io
    if not md.graph:
        raise ArchiveError("MODEL_DEF holds no graph")
    inputs, outputs = _io(md.graph[0])
    ins, outs = [d for _, d in inputs], [d for _, d in outputs]
    case = gears.gear_case(md.graph[0])
    return ins, outs, None if case is None else gears.read_table(md, case, ins, outs)


def _gears(md) -> dict | None:
    """A gear model's gears as formats/om/gears.py reads them: the type, and per gear its input
    and output shapes (what `om2gen inspect` shows of an .om2's model_meta.json); a gear
    description that does not read is shown by its error, not raised."""
    from . import gears
    if not md.graph or gears.gear_case(md.graph[0]) is None:
        return None
    try:
        ins, outs, table = _model_io(md)
    except ArchiveError as exc:
        return {"error": str(exc)}
    return {"dynamic_type": TYPE_NAMES[table.dynamic_type], "values": [list(v) for v in table.values],
            "gears": [{"inputs": {d.name: list(s) for d, s in zip(ins[:-1], i)},
                       "outputs": {d.name: list(s) for d, s in zip(outs, o)}}
                      for i, o in zip(table.input_shapes, table.output_shapes)]}


AGREES = "agrees with MODEL_DEF"


def _inout(data, md) -> dict | None:
    """A MODEL_INOUT_INFO partition's blocks (inout_info.to_json) and, under "check", whether they
    say what MODEL_DEF says; one that does not parse: {"error"}. None: the file has none."""
    if data is None:
        return None
    try:
        info = inout_info.to_json(inout_info.parse(data))
    except ArchiveError as exc:
        return {"error": str(exc)}
    try:
        inout_info.check(data, inout_info.describe(*_model_io(md), dynamic_shapes.ranges(md.graph[0])))
        info["check"] = AGREES
    except ArchiveError as exc:
        info["check"] = str(exc)
    return info


def inspect_om(path) -> dict:
    om = read_om(path)
    h = om.header
    header = {}
    for name, _, code in HEADER_FIELDS:
        v = getattr(h, name)
        if name in ("padd", "reserved", "checksum"):
            continue
        header[name] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    info = {"path": str(path), "format": "om", "header": header, "models": []}
    pos = 256
    for index, parts in enumerate(om.models):
        pos += table_size(len(parts))
        partitions = []
        for p in parts:
            partitions.append({"type": p.type.name, "type_id": int(p.type), "offset": pos, "size": len(p.data)})
            pos += len(p.data)
        model = {"index": index, "partitions": partitions}
        model_def = om.partition(PT.MODEL_DEF, index)
        md = _parse(proto.ModelDef, model_def, "MODEL_DEF")
        model["name"] = md.name
        model["attrs"] = {k: _attr_value(md.attr[k]) for k in sorted(md.attr)}
        ops = []
        for g in md.graph:   # the root graph, then a gear model's subgraphs
            for op in g.op:
                ops.append({"id": op.id, "name": op.name, "type": op.type, "graph": g.name, "inputs": list(op.input),
                            "outputs": [_desc(td) for td in op.output_desc]})
        for g in md.graph[:1]:
            model["inputs"] = [{"name": op.name, "desc": _desc(op.output_desc[0])} for op in g.op
                               if op.type == "Data" and op.output_desc]
            model["outputs"] = [{"source": src, "desc": _desc(td)} for op in g.op if op.type == "NetOutput"
                                for src, td in zip(op.input, op.input_desc)]
            model["gears"] = _gears(md)
        model["inout_info"] = _inout(next((p.data for p in parts if p.type == PT.MODEL_INOUT_INFO), None), md)
        model["graphs"] = [g.name for g in md.graph]
        model["ops"] = ops
        op_names = {op["id"]: op["name"] for op in ops}

        mtd = _parse(proto.ModelTaskDef, om.partition(PT.TASK_INFO, index), "TASK_INFO")
        tasks = []
        for t in mtd.task:
            entry = {"id": t.id, "type": _enum_name(ModelTaskType, t.type), "type_id": t.type, "stream_id": t.stream_id}
            if t.HasField("kernel"):
                k = t.kernel
                entry.update(kernel=k.kernel_name or None, block_dim=k.block_dim, args_size=k.args_size,
                             kernel_type=_enum_name(CcKernelType, k.context.kernel_type),
                             args_format=k.context.args_format, op=op_names.get(k.context.op_index))
                if k.so_name:
                    entry["so_name"] = k.so_name
            for field, key in (("label_set", "label_id"), ("label_goto_ex", "label_id"),
                               ("label_switch_by_index", "label_max")):
                if t.HasField(field):
                    sub = getattr(t, field)
                    entry.update({key: getattr(sub, key), "op": op_names.get(sub.op_index)})
            tasks.append(entry)
        model["tasks"] = tasks
        model["task_info"] = {"memory_size": mtd.memory_size, "weight_size": mtd.weight_size,
                              "stream_num": mtd.stream_num, "event_num": mtd.event_num}
        model["kernels"] = [{"name": n, "size": len(b)}
                            for n, b in kernel_store.load(om.partition(PT.TBE_KERNELS, index))]
        model["so_bins"] = [{"name": b.name, "vendor": b.vendor, "type": b.bin_type.name, "size": len(b.data)}
                            for b in op_so_store.load(om.partition(PT.SO_BINS, index))]
        model["custom_ops"] = [{"op_type": k.op_type, "size": len(k.data)}
                               for k in op_so_store.load_custom_ops(om.partition(PT.CUSTOM_OPS, index))]
        flag = flag_from_model_def(md, f"{path} model {index}")
        model["so_in_om_flag"] = flag
        model["so_in_om_types"] = [t.name for t in op_so_store.types_of(flag)]
        info["models"].append(model)
    info["size"] = pos
    return info


def gear_lines(gears: dict | None) -> list[str]:
    """A gear model's gears as `om2gen inspect` shows them, for either format ({"dynamic_type",
    "values", "gears": [{"inputs", "outputs"}]}; an .om's that did not read: {"error"})."""
    if not gears:
        return []
    if "error" in gears:
        return [f"  gears: {gears['error']}"]
    lines = [f"  gears ({gears['dynamic_type']}, {len(gears['gears'])}; shapes: the largest gear's):"]
    for i, g in enumerate(gears["gears"]):
        ins = ", ".join(f"{n}{d}" for n, d in g["inputs"].items())
        outs = ", ".join(f"{n}{d}" for n, d in g["outputs"].items())
        lines.append(f"    gear {i} {gears['values'][i]}: {ins} -> {outs}")
    return lines


def inout_lines(inout: dict | None) -> list[str]:
    """A MODEL_INOUT_INFO as `om2gen inspect` shows it (the dict of _inout)."""
    if inout is None:
        return []
    if "error" in inout:
        return [f"  MODEL_INOUT_INFO: {inout['error']}"]
    agrees = inout["check"] == AGREES
    lines = [f"  MODEL_INOUT_INFO ({AGREES if agrees else 'does not agree with MODEL_DEF'}):"]
    for kind in ("inputs", "outputs"):
        for t in inout[kind]:
            dt = dtypes.BY_ACL.get(t["dt"])
            extra = "".join(f", {k} {t[k]}" for k in ("dimsV2", "shape_range") if t[k] and t[k] != t["dims"])
            fmt = "ND" if t["format"] == FORMAT_ND else f"format {t['format']}"
            lines.append(f"    {kind[:-1]:<6} {t['name']}: {dt.name if dt else 'dt%d' % t['dt']}{t['dims']} {fmt}, "
                         f"{t['size']} bytes{extra}")
    for field, t in inout_info.FIELDS.items():
        if field not in ("inputs", "outputs") and inout[field]:
            lines.append(f"    {t.name}: {inout[field]}")
    return lines + ([] if agrees else [f"    {inout['check']}"])


def render_text(info: dict) -> str:
    h = info["header"]
    lines = [f"{info['path']}: classic OM (magic 0x{h['magic']:08X}, version 0x{h['version']:08X}), "
             f"{info['size']} bytes",
             f"header: name {h['name']!r}, model_num {h['model_num']}, model_length {h['model_length']}, "
             f"modeltype {h['modeltype']}, genmode {h['genmode']}, is_unknow_model {h['is_unknow_model']}, "
             f"platform_version {h['platform_version']!r}, encrypt {h['is_encrypt']}, "
             f"need_check_os_cpu_info {h['need_check_os_cpu_info']}"]
    for m in info["models"]:
        lines.append(f"model {m['index']}: {m['name']}")
        lines.append("  partitions:")
        for p in m["partitions"]:
            lines.append(f"    {p['type']:<16} offset {p['offset']:>9}  size {p['size']:>9}")
        a = m["attrs"]
        keys = ("memory_size", "weight_size", "zero_copy_memory_size", "stream_num", "event_num", "label_num",
                "soc_version", "so_in_om_flag")
        lines.append("  attrs: " + ", ".join(
            f"{k}={'0x%04X' % a[k] if k == 'so_in_om_flag' else a[k]}" for k in keys if k in a))
        for io in m.get("inputs", []):
            lines.append(f"  input  {io['name']}: {io['desc']}")
        for io in m.get("outputs", []):
            lines.append(f"  output {io['source']}: {io['desc']}")
        lines += gear_lines(m.get("gears"))
        lines += inout_lines(m.get("inout_info"))
        for graph in m["graphs"]:
            ops = [op for op in m["ops"] if op.get("graph", graph) == graph]
            lines.append(f"  graph {graph}: {len(ops)} ops")
            for op in ops:
                lines.append(f"    op {op['id']:>4} {op['type']:<20} {op['name']}")
        lines.append(f"  tasks: {len(m['tasks'])}")
        for t in m["tasks"]:
            extra = f" kernel {t['kernel']} block_dim {t['block_dim']}" if "block_dim" in t else ""
            if "label_id" in t:
                extra += f" label {t['label_id']}"
            if "label_max" in t:
                extra += f" label_max {t['label_max']}"
            lines.append(f"    task {t['id']:>4} {t['type']:<38} op {t.get('op')!r}{extra}")
        lines.append(f"  TBE_KERNELS: {len(m['kernels'])} kernels")
        for k in m["kernels"]:
            lines.append(f"    {k['size']:>9}  {k['name']}")
        if m["so_bins"] or m["so_in_om_flag"]:
            lines.append(f"  SO_BINS (so_in_om_flag 0x{m['so_in_om_flag']:04X}: "
                         f"{', '.join(m['so_in_om_types']) or 'none'}):")
            for b in m["so_bins"]:
                lines.append(f"    {b['size']:>9}  {b['type']:<15} {b['vendor']}/{b['name']}")
        if m["custom_ops"]:
            lines.append(f"  CUSTOM_OPS: {', '.join(c['op_type'] for c in m['custom_ops'])}")
    return "\n".join(lines)
