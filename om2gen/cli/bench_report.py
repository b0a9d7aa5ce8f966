"""How `om2gen bench` prints its results (om2gen/cli/bench.py measures them): the side-by-side
table of one model, and the load-phase table of one or two models."""
from __future__ import annotations

from pathlib import Path


def ratio(a, b):
    """a / b, or None when either is missing (or b is 0)."""
    return a / b if a is not None and b else None


# ---- rendering --------------------------------------------------------------------------------

def _ms(v) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" if v >= 100 else f"{v:.2f}" if v >= 10 else f"{v:.3f}"


def _x(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def _header(r: dict, what: str, counts: str) -> list[str]:
    """The model, the engines, the machine, the inputs and how many loads and runs."""
    mi = r["machine"]
    sets = r.get("kernel_sets") or []   # an archive of several: which ran (runtime/isa.py)
    chosen = f", kernel set {r['kernel_set']} of {', '.join(sets)}" if len(sets) > 1 else ""
    head = f"om2gen bench: {r['model']} ({what}{chosen})"
    if r["onnx"] is not None:
        head += f" vs {r['onnx']} (ONNX Runtime {mi['onnxruntime']}, CPU EP)"
    return [head, *openvino_line(r),
            f"{r['threads']} thread(s); {mi['cpu']} ({mi.get('uarch')}), {mi['cores']} cores, {mi['isa']}; "
            f"Python {mi['python']}",
            "inputs: " + ", ".join(f"{i['name']} {i['dtype']}{i['shape']} ({i['data']})" for i in r["inputs"]),
            f"{r['load']['om2gen']['n']} loads{counts} after {r['warmup']} warm-up, the engines alternating; "
            "times in ms", ""]


def openvino_line(r: dict) -> list[str]:
    """What the OpenVINO column holds: its version and settings, or why it is empty."""
    o = r.get("openvino")
    if o is None:
        return []
    if o["status"] != "measured":
        return [f"OpenVINO: {o['status']}"]
    c = o["config"]
    return [f"vs OpenVINO {o['version']} (CPU, {', '.join(f'{k} {v}' for k, v in c.items())}; {o['shapes']})"]


def measured_openvino(r: dict) -> bool:
    return "openvino" in r.get("run", {})


def render_text(r: dict) -> str:
    if "gears" in r:
        return render_gears(r)
    if "shapes" in r:
        return render_shapes(r)
    ort = r["onnx"] is not None
    ov = measured_openvino(r)
    lines = _header(r, r["format"], f", {r['run']['om2gen']['n']} runs")
    cols = ["om2gen"] + (["ORT", "om2gen/ORT"] if ort else []) + (["OpenVINO", "OV/ORT"] if ov else [])
    rows = [("", *cols)]

    def row(label, key, sub, x=None, x_ov=None):
        vals = [_ms(r[key]["om2gen"][sub])]
        if ort:
            vals += [_ms(r[key]["onnxruntime"][sub]), _x(x)]
        if ov:
            vals += [_ms(r[key].get("openvino", {}).get(sub)), _x(x_ov)]
        rows.append((label, *vals))

    rat = r.get("ratio", {})
    row("load, median", "load", "median_ms", rat.get("load"))
    row("load, first in process", "load", "first_ms",
        ratio(r["load"]["om2gen"]["first_ms"], r["load"].get("onnxruntime", {}).get("first_ms")))
    for label, sub in (("fresh process: import", "import_ms"), ("fresh process: load", "load_ms"),
                       ("fresh process: first run", "first_run_ms"), ("fresh process: load + first run",
                                                                     "load_first_run_ms")):
        if "fresh" in r:
            fr = r["fresh"]
            row(label, "fresh", sub, ratio(fr["om2gen"][sub], fr.get("onnxruntime", {}).get(sub)))
    for k in ("median", "p90", "min"):
        row(f"run, {k}", "run", f"{k}_ms", rat.get(f"run_{k}"), rat.get(f"openvino_run_{k}"))
    over = r["overhead"]

    def us(e, k):
        if k == "overhead_us" and not over[e]["resolved"]:
            return "(noise)"
        return f"{over[e][k]:.1f}"
    for label, k, x in (("per-run overhead (us)", "overhead_us", rat.get("overhead")),
                        ("  Python run call (us)", "run_call_us", None),
                        ("  engine call, bound buffers (us)", "engine_call_us", None)):
        vals = [us("om2gen", k)]
        if ort:
            vals += [us("onnxruntime", k), _x(x) if x is not None else ""]
        if ov:
            vals += [us("openvino", k), ""]
        rows.append((label, *vals))
    width = max(len(cells[0]) for cells in rows) + 2
    for cells in rows:
        lines.append(cells[0].ljust(width) + "".join(v.rjust(12) for v in cells[1:]))
    how = "om2gen: Model.run - Model.execute_raw" + ("; ORT: session.run - session.run_with_iobinding" if ort else "") \
        + ("; OpenVINO: infer(feeds) - start_async + wait on bound inputs" if ov else "")
    if "fresh" in r:
        peer = ("; ORT: onnxruntime, then session creation" if ort else "")
        lines += ["", f"fresh process: median of {r['fresh']['om2gen']['n']} new processes per engine, each importing "
                      f"the engine (om2gen: numpy and the executor{peer}), then timing the load and the first run"]
    lines += ["", "per-run overhead = the Python run call minus the same engine's run on buffers bound beforehand",
              f"({how}), median of the paired differences"]
    noisy = [f"{name} (+-{2 * over[e]['stderr_us']:.1f} us)"
             for e, name in (("om2gen", "om2gen"), ("onnxruntime", "ORT"), ("openvino", "OpenVINO"))
             if e in over and not over[e]["resolved"]]
    if noisy:
        lines.append(f"(noise): smaller than this model's run-time noise for {', '.join(noisy)}; measure it on a "
                     "model with little compute, such as a single Add")
    return "\n".join(lines)


def _table(rows: list[tuple]) -> list[str]:
    """Rows of cells: the first column left-aligned, the others right-aligned, each as wide as it needs."""
    widths = [max(len(str(row[i])) for row in rows if i < len(row)) for i in range(max(map(len, rows)))]
    return ["".join([str(row[0]).ljust(widths[0])] + [str(c).rjust(w + 2) for c, w in zip(row[1:], widths[1:])])
            .rstrip() for row in rows]


def _shapes(shapes: dict) -> str:
    return ", ".join(f"{n}[{','.join(map(str, s))}]" for n, s in shapes.items())


def _per_shape_intro(r: dict, what: str, counts: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The header and load table of a model timed at several shapes (gears, dynamic), and its
    engines as (result key, column label); OpenVINO's when it ran at some shape."""
    ort = r["onnx"] is not None
    lines = _header(r, what, counts) + _load_rows(r, ort)
    ov = any(measured_openvino(part) for part in r.get("shapes", r.get("gears", [])))
    return lines, [("om2gen", "om2gen")] + ([("onnxruntime", "ORT")] if ort else []) + \
        ([("openvino", "OpenVINO")] if ov else [])


def _ratios(part: dict, engines) -> list[str]:
    """om2gen / ORT (and OpenVINO / ORT) of one shape's or gear's run medians."""
    keys = ["run_median", "openvino_run_median"][:len(engines) - 1]
    return [_x(part.get("ratio", {}).get(k)) for k in keys]


def _ratio_heads(engines) -> list[str]:
    return ["om2gen/ORT", "OV/ORT"][:len(engines) - 1]


def _load_rows(r: dict, ort: bool) -> list[str]:
    load = [("", "om2gen", *(["ORT", "om2gen/ORT"] if ort else []))]
    for label, key in (("load, median", "median_ms"), ("load, first in process", "first_ms")):
        lo = r["load"]
        load.append((label, _ms(lo["om2gen"][key]),
                     *([_ms(lo["onnxruntime"][key]), _x(ratio(lo["om2gen"][key], lo["onnxruntime"][key]))] if ort
                       else [])))
    return _table(load)


def render_shapes(r: dict) -> str:
    """A dynamic-shape model: its load times, then per run shape the first run at it and the run figures."""
    shapes = r["shapes"]
    lines, engines = _per_shape_intro(r, f"{r['format']}, dynamic shapes, {len(shapes)} run shape(s)",
                                      f"; per shape {shapes[0]['run']['om2gen']['n']} runs")
    lines += ["", "run at each shape (ms); first = the first run the loaded model makes at that shape"]
    rows = [("shapes", *(f"{name} {k}" for _, name in engines for k in ("first", "median", "p90", "min")),
             *_ratio_heads(engines))]
    for s in shapes:
        rows.append((_shapes(s["shapes"]),
                     *(v for e, _ in engines for v in (_ms(s["first_run_ms"].get(e)),
                                                        *(_ms(s["run"].get(e, {}).get(k))
                                                          for k in ("median_ms", "p90_ms", "min_ms")))),
                     *_ratios(s, engines)))
    return "\n".join(lines + _table(rows))


def render_gears(r: dict) -> str:
    """A model with gears: its load times, the run figures at every gear and the gear switch."""
    gears = r["gears"]
    lines, engines = _per_shape_intro(r, f"{r['format']}, {len(gears)} gears of {r['gear_type']}",
                                      f"; per gear {gears[0]['run']['om2gen']['n']} runs")
    lines += ["", "run at each gear (ms)"]
    rows = [("gear", "shapes", *(f"{name} {k}" for _, name in engines for k in ("median", "p90", "min")),
             *_ratio_heads(engines))]
    for g in gears:
        rows.append((str(g["gear"]), _shapes(g["shapes"]),
                     *(_ms(g["run"].get(e, {}).get(k)) for e, _ in engines for k in ("median_ms", "p90_ms", "min_ms")),
                     *_ratios(g, engines)))
    lines += _table(rows)
    sw = r.get("switch")
    if sw:
        a, b = sw["gears"]
        shapes = {g["gear"]: _shapes(g["shapes"]) for g in gears}
        lines += ["", f"gear switch between gear {a} ({shapes[a]}) and gear {b} ({shapes[b]}), {sw['rounds']} rounds: "
                  "each run right after a run of the same gear (repeat) or of the other gear (switched), median ms; "
                  "cost = median of the paired differences"]
        rows = [("", "repeat", "switched", "cost", "cost / repeat")]
        for e, name in engines:
            for gear, x in zip((a, b), sw.get(e, [])):   # (OpenVINO has no gears to switch)
                cost = f"{x['cost_ms']:+.3g}" if x["resolved"] else f"(noise +-{2 * x['stderr_ms']:.2g})"
                rel = f"{x['cost_ms'] / x['repeat']['median_ms'] * 100:+.1f}%" if x["resolved"] else ""
                rows.append((f"{name}, gear {gear}", _ms(x["repeat"]["median_ms"]), _ms(x["switched"]["median_ms"]),
                             cost, rel))
        lines += _table(rows)
    return "\n".join(lines)


def render_phases(r: dict, ort_ms: float | None = None) -> str:
    models = r["models"]
    order = merge_stage_order([[s["stage"] for s in m["stages"]] for m in models])
    by = [{s["stage"]: s["median_ms"] for s in m["stages"]} for m in models]
    labels = [f"{m.get('label') or Path(m['model']).name} ({m['format']})" for m in models]
    width = max([len(s) for s in order] + [24]) + 2
    colw = max([len(x) for x in labels] + [10]) + 2
    lines = [f"load phases: median ms over {r['loads']} loads per model (after one untimed load), "
             f"{r['threads']} thread(s)", "", "stage".ljust(width) + "".join(x.rjust(colw) for x in labels)]
    for stage in order:
        lines.append(stage.ljust(width) + "".join(_ms(b.get(stage)).rjust(colw) for b in by))
    lines.append("total of the stages".ljust(width) + "".join(_ms(m["total_ms"]).rjust(colw) for m in models))
    lines.append("om2gen.load wall time".ljust(width) + "".join(_ms(m["wall_ms"]).rjust(colw) for m in models))
    if ort_ms is not None:
        lines.append(f"(ONNX Runtime session creation, median: {_ms(ort_ms)} ms)")
    return "\n".join(lines)


def merge_stage_order(lists: list[list[str]]) -> list[str]:
    """One row order for several stage lists: each list's order is kept, stages common to
    several share a row, and stages of one model only sit where that model has them."""
    merged: list[str] = []
    pos = [0] * len(lists)
    while any(p < len(lst) for p, lst in zip(pos, lists)):
        progressed = False
        for i, lst in enumerate(lists):
            # take this list's stages that no other list still has ahead of it
            while pos[i] < len(lst) and not any(lst[pos[i]] in other[pos[j]:]
                                                for j, other in enumerate(lists) if j != i):
                if lst[pos[i]] not in merged:
                    merged.append(lst[pos[i]])
                pos[i] += 1
                progressed = True
        heads = [lst[p] for p, lst in zip(pos, lists) if p < len(lst)]
        if heads and all(h == heads[0] for h in heads):
            name = heads[0]
            if name not in merged:
                merged.append(name)
            pos = [p + 1 if p < len(lst) and lst[p] == name else p for p, lst in zip(pos, lists)]
            progressed = True
        if not progressed:  # the lists order common stages differently: take the first head
            i = next(i for i, (p, lst) in enumerate(zip(pos, lists)) if p < len(lst))
            if lists[i][pos[i]] not in merged:
                merged.append(lists[i][pos[i]])
            pos[i] += 1
    return merged
