"""om2gen inspect: what an archive holds, read without loading or running anything."""
from __future__ import annotations

from ..errors import AbiError, ArchiveError
from ..formats import OM_MAGIC
from ..formats.om2 import layout
from ..formats.om2.reader import Archive
from ..formats.om.inspect import gear_lines
from ..runtime import isa
from . import sizes


def inspect_archive(path, onnx=None) -> dict:
    """Dispatches by content: an OM2 archive (ZIP) or a classic OM file (magic "IMOD"). With
    `onnx`, the .onnx it was compiled from, "sizes" gives the archive's size next to the ONNX
    file's."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        head = b""   # let the archive reader report the error
    if head == OM_MAGIC:
        from ..formats.om.inspect import inspect_om
        info = inspect_om(path)
    else:
        info = _inspect_om2(path)
    info["sizes"] = sizes.archive_sizes(path)
    if onnx is not None:
        info["sizes"]["onnx_bytes"] = sizes.onnx_bytes(onnx)
    return info


def size_text(info: dict) -> str:
    return sizes.size_line(info["sizes"], info["sizes"].get("onnx_bytes"))


def _inspect_om2(path) -> dict:
    with Archive(path) as a:
        m = a.manifest
        info = {"path": str(path), "manifest": {k: v for k, v in m.items() if k != "entries"},
                "entries": [{"name": n, "size": a.info(n).file_size, "stored": a.info(n).compress_type == 0,
                             "sha256": a.entries.get(n, {}).get("sha256", "")} for n in a.names()],
                "models": []}
        for model in m.get("models", []):
            meta = a.read_json(model["meta"])
            entry = {"index": model["index"], "name": meta["name"], "inputs": meta["inputs"],
                     "outputs": meta["outputs"], "work_size": meta["work_size"], "kernels": meta["kernels"],
                     "library": meta["library"], "stats": meta.get("stats", {}),
                     "custom_ops": meta.get("custom_ops") or {}, "so_bins": meta.get("so_bins"),
                     "gears": _gears(meta, str(path)), "dynamic_shapes": meta.get("dynamic_shapes"),
                     "load_tasks": meta.get("load_tasks") or [], "model_buffers": meta.get("model_buffers") or []}
            tinfo = layout.task_info_json(model["index"])
            if tinfo in a.entries:
                entry["tasks"] = a.read_json(tinfo)["tasks"]
                entry["ops"] = sorted({t["op_type"] for t in entry["tasks"]})
            gm = layout.ge_model_json(model["index"])
            if gm in a.entries:
                entry["graph_nodes"] = [{"name": n["name"], "op_type": n["op_type"]} for n in a.read_json(gm)["nodes"]]
                entry.setdefault("ops", sorted({n["op_type"] for n in entry["graph_nodes"]}))
            if "tasks" not in entry:
                entry["tasks"] = _tasks_from_source(a, meta, model["index"])
                entry["ops"] = sorted({t["op_type"] for t in entry["tasks"]})
            if "target" in model:   # one of several kernel sets
                entry["target"] = model["target"]
            info["models"].append(entry)
        info["kernel_sets"], info["runs_here"] = _kernel_sets(m, str(path))
    return info


def _kernel_sets(manifest: dict, where: str) -> tuple[list[str], dict]:
    """The targets the archive carries kernels for, and the one a load here would run (the best
    this CPU supports, or the one $OM2GEN_ISA forces), or why none."""
    try:
        sets = isa.sets_of(manifest, where)
    except ArchiveError as e:
        return [], {"target": None, "why": str(e)}
    try:
        index = isa.choose(sets, where)
    except AbiError as e:
        return [s["name"] for s in sets], {"target": None, "why": str(e)}
    return [s["name"] for s in sets], {"target": sets[index]["name"], "model": index,
                                       "forced": isa.forced(None)[0] is not None}


def _gears(meta: dict, where: str) -> dict | None:
    """A gear model's gears: the type, and per gear its input and output shapes (runtime/gears.py
    reads model_meta.json's GE keys)."""
    from ..runtime import gears
    g = gears.from_meta(meta, where)
    if g is None:
        return None
    outputs = [d["name"] for d in meta["outputs"]]
    return {"dynamic_type": gears.TYPE_NAMES[g.dynamic_type], "values": [list(v) for v in g.values],
            "gears": [{"inputs": {n: list(s[n]) for n in g.inputs}, "outputs": dict(zip(outputs, map(list, o)))}
                      for s, o in zip(g.input_shapes, g.output_shapes)]}


def _tasks_from_source(a: Archive, meta: dict, index: int) -> list[dict]:
    """Without --debug, the task list is read back from the generated source's dispatch table."""
    import re
    src = next((n for n in a.entries if n.startswith(layout.csrc_dir(index)) and n.endswith(layout.TABLES_SOURCE_SUFFIX)), None)
    if src is None:
        return []
    text = a.read(src).decode("utf-8", "replace")
    pat = re.compile(r"/\* (k\d+_\w+): node \"(.*?)\" \((\w+)\), kernel (\S+), block_dim (\d+)")
    return [{"label": m[1], "op_name": m[2], "op_type": m[3], "kernel": m[4], "block_dim": int(m[5])}
            for m in pat.finditer(text)]


def render_text(info: dict) -> str:
    if info.get("format") == "om":
        from ..formats.om.inspect import render_text as render_om
        text = render_om(info)
        return text if "sizes" not in info else text.replace("\n", f"\n{size_text(info)}\n", 1)
    m = info["manifest"]
    lines = [f"{info['path']}: {m.get('format')} {m.get('format_version')} by {m.get('generator')}",
             *([size_text(info)] if "sizes" in info else []),
             f"{'baseline ' if len(info.get('kernel_sets', [])) > 1 else ''}target {m['target']['name']} "
             f"({m['target']['arch']}; ISA {', '.join(m['target']['isa_features'])}), "
             f"model ABI {m.get('abi_version')}, kernel ABI {m.get('kernel_abi_version')}"]
    if len(info.get("kernel_sets", [])) > 1 or info.get("runs_here", {}).get("target") is None:
        here = info.get("runs_here", {})
        runs = (f"this CPU runs {here['target']} (model {here['model']}"
                + (f", forced by {isa.ISA_ENV})" if here.get("forced") else ", the best it supports)")
                if here.get("target") else f"none runs here: {here.get('why')}")
        lines.append(f"kernel sets: {', '.join(info.get('kernel_sets', []))}; {runs}")
    if isinstance(m.get("so_in_om_info"), dict):
        p = m["so_in_om_info"]
        lines.append(f"platform (SoInOmInfo): {p.get('cpu_info')} {p.get('os_info')}, {p.get('opp_version')}, "
                     f"compiled by {p.get('compiler_version')}")
    for model in info["models"]:
        kernel_set = f" [{model['target']['name']}]" if "target" in model else ""
        lines.append(f"model {model['index']}{kernel_set}: {model['name']}  workspace {model['work_size']} bytes, "
                     f"{model['stats'].get('tasks', '?')} tasks, {len(model['kernels'])} kernels")
        dyn = model.get("dynamic_shapes") or {}
        for kind, ios in (("input ", model["inputs"]), ("output", model["outputs"])):
            for i, io in enumerate(ios):
                dims = f" (dims {io['origin_input_dims']}: -1 where a gear decides)" if "origin_input_dims" in io else ""
                exprs = dyn.get("inputs" if kind == "input " else "outputs", [])
                if i < len(exprs):   # a dynamic model: each dim as the expression the run evaluates
                    dims = f" = [{', '.join(exprs[i])}]"
                lines.append(f"  {kind} {io['name']}: {io['dtype']}{io['shape']}{dims}")
        for s in dyn.get("symbols", []):
            lo, hi = s["range"]
            m = s.get("multiple", 1)
            per = f" = {m} * {s['name']}, a multiple of {m}" if m > 1 else ""
            where = f"the count node {s['producer']} writes" if s.get("producer") else \
                f"input {s['input']} dim {s['axis']}{per}"
            lines.append(f"  dynamic dim {s['name']}: {lo}~{'' if hi < 0 else hi} ({where})")
        lines += gear_lines(model.get("gears"))
        lines.append(f"  ops: {', '.join(model.get('ops', []))}")
        custom = model.get("custom_ops") or {}
        if custom.get("op_types"):
            lines.append(f"  custom operators: {', '.join(custom['op_types'])} from "
                         f"{', '.join(n.rsplit('/', 1)[1] for n in custom['shared_libs'])}")
        so_bins = model.get("so_bins")
        if isinstance(so_bins, dict):
            flag = so_bins.get("so_in_om_flag", 0)
            flag = f"0x{flag:04X}" if isinstance(flag, int) and not isinstance(flag, bool) else f"{flag!r} (invalid)"
            lines.append(f"  packed SOs ({so_bins.get('store')}, so_in_om_flag {flag}):")
            for b in so_bins.get("items", []):
                lines.append(f"    {b['type']:<16} {(b['vendor'] + '/' if b['vendor'] else '') + b['name']}  "
                             f"{b['size']} bytes")
        if model.get("load_tasks"):
            made = sum(b.get("size", 0) for b in model.get("model_buffers", []))
            lines.append(f"  load tasks (run once at load; {len(model['model_buffers'])} model buffers, {made} bytes):")
            for t in model["load_tasks"]:
                lines.append(f"    {t['label']:<28} {t['op_type']:<20} node {t['node']!r} -> {t['kernel']} "
                             f"(block_dim {t['block_dim']}; writes model buffer {', '.join(map(str, t['writes']))})")
        for t in model["tasks"]:
            lines.append(f"  task {t['label']:<28} {t['op_type']:<20} node {t['op_name']!r} -> {t['kernel']} "
                         f"(block_dim {t['block_dim']})")
    lines.append("entries:")
    for e in info["entries"]:
        lines.append(f"  {e['size']:>10}  {'stored ' if e['stored'] else 'deflate'}  {e['name']}")
    return "\n".join(lines)


def add_parser(sub) -> None:
    i = sub.add_parser("inspect", help="show what an .om2 archive or .om file holds")
    i.add_argument("model", help="the .om2 or .om file")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.add_argument("--onnx", metavar="MODEL.onnx", help="the .onnx it was compiled from: shows the archive's size "
                   "next to the ONNX file's")
    i.set_defaults(func=cmd_inspect)


def cmd_inspect(args) -> int:
    import json

    info = inspect_archive(args.model, args.onnx)
    print(json.dumps(info, indent=1, sort_keys=True) if args.json else render_text(info))
    return 0
