"""The benchmark suite: a fixed set of models, om2gen next to ONNX Runtime and OpenVINO with 1 and
2 threads, as one markdown table (docs/performance.md explains every figure).

    python benchmarks/suite.py [--out FILE.md] [--quick] [--threads 1 2] [--models NAME ...]
                               [--runs K] [--json FILE] [--no-phases] [--no-peak] [--no-compile-times]

Models: ResNet-50 and the other real models of the real-model tier (samples/real_models/
catalog.py fetches and pins them), MobileNetV2, a 4-layer BERT-base encoder, an MLP and a
single-Add model (benchmarks/models/ builds those with seeded weights). Each is compiled once
and the archive cached under $OM2GEN_CACHE_DIR/bench/archives, keyed by the model, the compile
options and a digest of om2gen's code, so a changed kernel template recompiles it and nothing
else does. Every measurement is `om2gen bench`'s (om2gen/cli/bench.py): the engines alternate in
the same process and the figures are medians. OpenVINO (the optional `bench` extra; CPU plugin,
latency hint, the same thread count, f32) is the third engine when it is installed; without it
its columns say so. The table's header names the CPU (model, microarchitecture, ISA). Also
reported: ResNet-50's achieved GFLOP/s against this CPU's FMA peak (benchmarks/fma_peak.c), and
with the full set the load phases of ResNet-50 and the BERT encoder as OM2 archive and as
classic OM file, side by side, and ResNet-50's compile time with an empty and a warm kernel
cache; the issue's targets that these figures decide are listed with the measured value and
whether they are met.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "samples" / "real_models"))

import catalog  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from benchmarks import flops, fma_peak, models, peak_memory  # noqa: E402
from benchmarks.models import bert_base  # noqa: E402

import om2gen  # noqa: E402
from om2gen.cli import bench, bench_report  # noqa: E402
from om2gen.toolchain.compiler import cache_dir  # noqa: E402


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    onnx: object                     # () -> Path of the .onnx
    input_shapes: dict = field(default_factory=dict)
    input_values: dict = field(default_factory=dict)
    feeds: object = None             # () -> {name: array} for both engines (incl. frozen inputs); None: random


def _real(name: str) -> Case:
    m = catalog.BY_NAME[name]
    return Case(name, m.what, lambda: catalog.fetch(m), m.input_shapes, m.input_values,
                lambda: {**catalog.inputs_for(m), **_frozen_arrays(catalog.fetch(m), m.input_values)})


def _built(name: str, make_inputs=None) -> Case:
    feeds = (lambda: make_inputs(np.random.default_rng(0))) if make_inputs else None
    return Case(name, models.BUILDERS[name][1], lambda: models.path(name), feeds=feeds)


def _frozen_arrays(onnx_path, values: dict) -> dict:
    """The values of inputs frozen at compile time, typed as the ONNX graph declares them (ORT
    still takes them as inputs)."""
    if not values:
        return {}
    declared = {i.name: i for i in onnx.load(str(onnx_path), load_external_data=False).graph.input}
    return {k: np.array(v, dtype=onnx.helper.tensor_dtype_to_np_dtype(declared[k].type.tensor_type.elem_type))
            for k, v in values.items()}


CASES = {c.name: c for c in [
    _real("resnet50"),
    _built("mobilenet_v2"),
    _built("bert_base_4l", bert_base.make_inputs),
    _built("mlp"),
    _built("add"),
    *[_real(m.name) for m in catalog.MODELS if m.name != "resnet50"],
]}
QUICK = ["add", "mlp", "squeezenet", "mobilenet_v2"]
PHASE_MODELS = ["resnet50", "bert_base_4l"]


# ---- compiling (cached) -----------------------------------------------------------------------

def _code_digest() -> str:
    """om2gen's Python code, kernel/model templates and runtime headers: what an archive depends on."""
    h = hashlib.sha256(om2gen.__version__.encode())
    for base in ("om2gen", "templates", "runtime_abi/include"):
        for path in sorted((ROOT / base).rglob("*")):
            if path.is_relative_to(ROOT / "om2gen" / "cli"):   # the commands (bench itself) build nothing
                continue
            if path.is_file() and path.suffix in (".py", ".j2", ".h", ".hpp", ".cpp", ".c", ".json"):
                h.update(path.relative_to(ROOT).as_posix().encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def compiled(case: Case, fmt: str, code: str, log, **options) -> Path:
    """The case's archive (fmt "om2") or classic OM file ("om"), compiled on first use; options:
    more keyword arguments of om2gen.compile (gears: dynamic_batch_size=[1, 2, 4, 8], ...)."""
    src = Path(case.onnx())
    what = [_file_digest(src), case.input_shapes, case.input_values, fmt, code] + ([options] if options else [])
    key = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]
    out = cache_dir() / "bench" / "archives" / f"{case.name}-{key}.{fmt}"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f"{out.stem}.{os.getpid()}.tmp.{fmt}")
    t0 = time.perf_counter()
    try:
        om2gen.compile(src, partial, input_shapes=case.input_shapes, input_values=case.input_values, format=fmt,
                       **options)
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    log(f"  compiled {case.name}.{fmt} in {time.perf_counter() - t0:.1f} s")
    return out


def compile_times(case: Case) -> dict:
    """Seconds to compile the case with an empty kernel cache, then again with the cache warm."""
    import tempfile
    src = Path(case.onnx())
    saved = os.environ.get("OM2GEN_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="om2gen-bench-compile-") as tmp:
        os.environ["OM2GEN_CACHE_DIR"] = str(Path(tmp) / "cache")
        try:
            times = {}
            for label in ("cold_s", "warm_s"):
                t0 = time.perf_counter()
                om2gen.compile(src, Path(tmp) / f"{label}.om2", input_shapes=case.input_shapes,
                               input_values=case.input_values)
                times[label] = time.perf_counter() - t0
        finally:
            if saved is None:
                os.environ.pop("OM2GEN_CACHE_DIR", None)
            else:
                os.environ["OM2GEN_CACHE_DIR"] = saved
    return times


# ---- running ----------------------------------------------------------------------------------

# After compiling, a pause before the first measurement: the compile's processes and the page
# cache writing the archives out must not overlap a timed run (MobileNetV2 on 2 threads measured
# 9.0 vs ORT 6.7 ms right after a compile, 4.2 vs 3.9 ms with the archives cached).
SETTLE_AFTER_COMPILE_SECONDS = 3.0


def run_suite(names, threads_list, runs, warmup, loads, budget, log, target=None) -> dict:
    """Every model compiled (for `target`, default this machine's), then measured at each thread count."""
    code = _code_digest()
    options = {"target": target} if target else {}
    rows, ready = [], {}
    # every model is compiled (or found in the cache) before any is timed
    t0 = time.perf_counter()
    for name in names:
        case = CASES[name]
        log(f"{name}: {case.what}")
        try:
            archive = compiled(case, "om2", code, log, **options)
            ready[name] = (archive, case.feeds() if case.feeds else None)
        except Exception as exc:   # one broken model must not stop the suite: its row says why
            rows += [{"model": name, "threads": t, "error": _error(exc)} for t in threads_list]
            log(f"  FAILED: {_error(exc)}")
    if time.perf_counter() - t0 > 1.0:
        os.sync()
        time.sleep(SETTLE_AFTER_COMPILE_SECONDS)
    for name, (archive, feeds) in ready.items():
        case = CASES[name]
        log(f"{name}: measuring")
        sizes = {"archive": archive.stat().st_size, "onnx": Path(case.onnx()).stat().st_size}
        for t in threads_list:
            try:
                r = bench.measure(archive, case.onnx(), threads=t, runs=runs, warmup=warmup, loads=loads,
                                  feeds=feeds, max_seconds=budget)
                rows.append({"model": name, "threads": t, "result": r, "sizes": sizes})
                ov = (f"{r['run']['openvino']['median_ms']:.3f} ms" if "openvino" in r["run"]
                      else r["openvino"]["status"])
                log(f"  {t} thread(s): run {r['run']['om2gen']['median_ms']:.3f} ms vs ORT "
                    f"{r['run']['onnxruntime']['median_ms']:.3f} ms, OpenVINO {ov}; load "
                    f"{r['load']['om2gen']['median_ms']:.2f} ms vs ORT {r['load']['onnxruntime']['median_ms']:.2f} ms")
            except Exception as exc:
                rows.append({"model": name, "threads": t, "error": _error(exc)})
                log(f"  {t} thread(s) FAILED: {_error(exc)}")
    order = {name: i for i, name in enumerate(names)}
    rows.sort(key=lambda r: (order[r["model"]], threads_list.index(r["threads"])))
    return {"rows": rows, "code_digest": code}


def _error(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if os.environ.get("OM2_DEBUG"):
        traceback.print_exc()
    return f"{type(exc).__name__}: {text[:200]}"


def gflops_report(rows, peaks) -> list[dict]:
    """ResNet-50's achieved GFLOP/s (om2gen and ORT) against the FMA peak for its thread count."""
    out = []
    counted = flops.count(onnx.load(str(CASES["resnet50"].onnx())), CASES["resnet50"].input_shapes)
    isa = "avx512" if "avx512" in peaks else next(iter(peaks), None)
    for row in rows:
        if row["model"] != "resnet50" or "result" not in row:
            continue
        r, t = row["result"], row["threads"]
        peak = peaks.get(isa, {}).get(t) if isa else None
        entry = {"threads": t, "gflop": counted["flops"] / 1e9, "isa": isa, "peak_gflops": peak}
        for engine in ("om2gen", "onnxruntime"):
            achieved = counted["flops"] / (r["run"][engine]["median_ms"] / 1e3) / 1e9
            entry[engine] = {"gflops": achieved, "of_peak": achieved / peak if peak else None}
        out.append(entry)
    return out


def memory_report(names, code, threads, log) -> list[dict]:
    """Peak memory while running, om2gen vs ORT, each in a fresh process (benchmarks/peak_memory.py)."""
    out = []
    for name in names:
        case = CASES[name]
        try:
            feeds = case.feeds() if case.feeds else None
            r = peak_memory.measure(compiled(case, "om2", code, log), case.onnx(), threads, feeds=feeds)
            out.append({"model": name, "threads": threads, "result": r})
            log(f"  {name}: +{r['om2gen']['delta_mb']:.1f} MB vs ORT +{r['onnxruntime']['delta_mb']:.1f} MB")
        except Exception as exc:
            out.append({"model": name, "error": _error(exc)})
            log(f"  peak memory of {name} FAILED: {_error(exc)}")
    return out


def phases_report(names, code, loads, threads, log) -> list[dict]:
    out = []
    for name in names:
        case = CASES[name]
        try:
            paths = [compiled(case, "om2", code, log), compiled(case, "om", code, log)]
            r = bench.measure_phases(paths, loads, threads)
            for m, fmt in zip(r["models"], ("om2", "om")):
                m["label"] = f"{name}.{fmt}"
            r["onnxruntime_session_ms"] = bench.measure_loads(paths[0], case.onnx(), r["threads"], loads,
                                                              om2=False)["onnxruntime"]["median_ms"]
            out.append({"model": name, "result": r})
        except Exception as exc:
            out.append({"model": name, "error": _error(exc)})
            log(f"  phases of {name} FAILED: {_error(exc)}")
    return out


# ---- the report -------------------------------------------------------------------------------

def _f(v, digits=None) -> str:
    """About four significant digits (a fixed number of decimals with `digits`)."""
    if v is None:
        return "-"
    if digits is not None:
        return f"{v:.{digits}f}"
    return f"{v:.1f}" if v >= 100 else f"{v:.2f}" if v >= 10 else f"{v:.3f}" if v >= 1 else f"{v:.4f}"


def geomean(values) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _git_commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return f"{head}{' (with uncommitted changes)' if dirty else ''}" if head else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def cpu_times() -> dict:
    """Load average and the cumulative busy / steal jiffies of all CPUs (/proc/stat)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        with open("/proc/loadavg") as f:
            load = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return {}
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    steal = fields[7] if len(fields) > 7 else 0
    return {"load": load, "total": sum(fields[:8]), "idle": idle, "steal": steal}


def machine_load(before: dict, after: dict) -> str:
    """How busy the machine was: other processes and the hypervisor (steal) skew the figures."""
    if not before or not after or after["total"] <= before["total"]:
        return "unknown"
    total = after["total"] - before["total"]
    steal = (after["steal"] - before["steal"]) / total
    return (f"1-min load average {before['load']:.2f} at the start, {after['load']:.2f} at the end; "
            f"CPU time stolen by the hypervisor {steal * 100:.1f}%")


TARGET_MODELS = ("resnet50", "mobilenet_v2", "bert_base_4l")
# weight-dominated models whose .onnx holds its weights (ResNet-50's light model fills them with ConstantOfShape)
SIZE_MODELS = ("mobilenet_v2", "bert_base_4l")


def targets(report: dict) -> list[tuple[str, str, bool | None]]:
    """Issue 6's targets that the suite measures: (target, measured, met)."""
    ok = {(r["model"], r["threads"]): r["result"] for r in report["rows"] if "result" in r}
    sizes = {r["model"]: r["sizes"] for r in report["rows"] if "sizes" in r}
    out = []
    for (model, t), r in ok.items():
        if model in TARGET_MODELS:
            v = r["ratio"]["run_median"]
            out.append((f"run ratio <= 1.0: {model}, {t} thread(s)", f"{v:.2f}", v <= 1.0))
    ratios = [r["ratio"]["run_median"] for r in ok.values()]
    if ratios:
        g = geomean(ratios)
        out.append(("geometric mean of the run ratios <= 0.8", f"{g:.2f} ({len(ratios)} rows)", g <= 0.8))
        above = [f"{m} {t}: {r['ratio']['run_median']:.2f}" for (m, t), r in ok.items()
                 if r["ratio"]["run_median"] > 1.0]
        out.append(("no row's run ratio above 1.0 (issue 16)", "; ".join(above) or "none above", not above))
    vs_ov = {k: r["ratio"]["run_median_vs_openvino"] for k, r in ok.items() if "run_median_vs_openvino" in r["ratio"]}
    if vs_ov:
        slower = [f"{m} {t}: {v:.2f}" for (m, t), v in vs_ov.items() if v > 1.0]
        out.append(("om2gen no slower than OpenVINO in any row (om2gen / OpenVINO, issue 16)",
                    "; ".join(slower) or f"none slower ({len(vs_ov)} rows)", not slower))
    for (model, t), r in ok.items():
        if model in ("resnet50", "bert_base_4l"):
            v = r["ratio"]["load"]
            out.append((f"load ratio <= 0.1: {model}, {t} thread(s)", f"{v:.3f}", v <= 0.1))
    for (model, t), r in ok.items():
        if model == "resnet50":
            ms = r["load"]["om2gen"]["median_ms"]
            out.append((f"ResNet-50 load <= 20 ms, {t} thread(s)", f"{ms:.2f} ms", ms <= 20))
    for (model, t), r in ok.items():
        if model == "add":
            ov = r["overhead"]
            v = ov["om2gen"]["run_call_us"] / ov["onnxruntime"]["run_call_us"]
            out.append((f"per-run overhead (single-Add run) <= 0.5 of ORT, {t} thread(s)",
                        f"{v:.2f} ({ov['om2gen']['run_call_us']:.1f} vs {ov['onnxruntime']['run_call_us']:.1f} us)",
                        v <= 0.5))
    ct = report.get("compile")
    if ct and "cold_s" in ct:
        out.append(("compile ResNet-50 <= 30 s, empty kernel cache", f"{ct['cold_s']:.1f} s", ct["cold_s"] <= 30))
        out.append(("compile ResNet-50 <= 3 s, warm kernel cache", f"{ct['warm_s']:.1f} s", ct["warm_s"] <= 3))
    for m in report.get("memory", []):
        if "result" in m:
            r = m["result"]
            out.append((f"peak memory while running <= ORT's: {m['model']}, {m['threads']} thread(s)",
                        f"+{r['om2gen']['delta_mb']:.0f} vs +{r['onnxruntime']['delta_mb']:.0f} MB "
                        f"(ratio {r['ratio']:.2f})", r["ratio"] <= 1.0))
    for model in SIZE_MODELS:
        if model in sizes:
            v = sizes[model]["archive"] / sizes[model]["onnx"]
            out.append((f"archive size <= 1.02 x ONNX file: {model}",
                        f"{v:.3f} ({sizes[model]['archive'] / 1e6:.1f} / {sizes[model]['onnx'] / 1e6:.1f} MB)",
                        v <= 1.02))
    return out


def header(report: dict) -> list[str]:
    """The command, the machine (CPU model and microarchitecture, the ISA flags the kernels use;
    report["avx512"], the CPU's AVX-512 flags, when given), the engines and how loaded it was."""
    mi = report["machine"]
    isa = (f"{report['target']}, given; this machine's {mi['isa']}" if report.get("target") else mi["isa"]) \
        + (f"; AVX-512 flags: {report['avx512']}" if report.get("avx512") else "")
    ov = (f"OpenVINO {mi['openvino']} (CPU plugin, PERFORMANCE_HINT LATENCY, INFERENCE_NUM_THREADS = threads, "
          "INFERENCE_PRECISION_HINT f32, reshaped to the run's input shapes)" if mi.get("openvino")
          else "OpenVINO not installed (pip install 'om2gen[bench]')")
    return [f"Command: `{report['command']}`  ",
            f"CPU: {mi['cpu']} ({mi.get('uarch', 'microarchitecture unknown')}), ISA flags: "
            f"{', '.join(mi.get('isa_flags', [])) or 'unknown'}  ",
            f"Machine: {mi['cores']} cores, {mi['arch']} (target {isa}); Python {mi['python']}, "
            f"ONNX Runtime {mi['onnxruntime']} (CPU EP, default optimisations, intra-op threads = threads), "
            f"{ov}, om2gen {mi['om2gen']} at {report['commit']}  ",
            f"Machine load while measuring: {report['machine_load']}  "]


def write_outputs(text: str, report: dict, out: str | None, json_path: str | None) -> None:
    """The markdown on stdout (and into `out`), the raw figures into `json_path`."""
    print(text)
    if out:
        Path(out).write_text(text)
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=1, default=str))


def _openvino_cell(r: dict) -> str:
    """The run OpenVINO column: its median, or why there is none (not installed, failed)."""
    if "openvino" in r["run"]:
        return _f(r["run"]["openvino"]["median_ms"])
    return r.get("openvino", {}).get("status", "not measured").split(" (")[0].split(":")[0]


def render(report: dict) -> str:
    lines = [*header(report),
             f"Each row: {report['settings']}; times in ms, ratios engine / ORT (below 1: faster than ORT).", "",
             "| model | threads | load om2gen | load ORT | load ratio | run om2gen | run ORT | run OpenVINO "
             "| run ratio | OpenVINO ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    ratios, ov_ratios, ov_notes = {}, {}, {}
    for row in report["rows"]:
        if "error" in row:
            lines.append(f"| {row['model']} | {row['threads']} | {row['error']} ||||||||")
            continue
        r = row["result"]
        lo, ru = r["load"], r["run"]
        ratios.setdefault(row["threads"], []).append(r["ratio"]["run_median"])
        ov = r["ratio"].get("openvino_run_median")
        if ov is not None:
            ov_ratios.setdefault(row["threads"], []).append(ov)
        elif r.get("openvino", {}).get("status", "").startswith("failed"):
            ov_notes[row["model"]] = r["openvino"]["status"]
        lines.append(f"| {row['model']} | {row['threads']} | {_f(lo['om2gen']['median_ms'])} | "
                     f"{_f(lo['onnxruntime']['median_ms'])} | {_f(r['ratio']['load'], 2)} | "
                     f"{_f(ru['om2gen']['median_ms'])} | {_f(ru['onnxruntime']['median_ms'])} | {_openvino_cell(r)} | "
                     f"{_f(r['ratio']['run_median'], 2)} | {_f(ov, 2)} |")
    for name, (label, by) in {"om2gen": ("run ratios", ratios), "OpenVINO": ("OpenVINO ratios", ov_ratios)}.items():
        flat = [x for v in by.values() for x in v]
        if flat:
            per_threads = "".join(f"; {t} thread(s): {_f(geomean(v), 2)}" for t, v in sorted(by.items()))
            lines += ["", f"Geometric mean of the {label} ({name} / ORT): **{_f(geomean(flat), 2)}** over "
                      f"{len(flat)} rows{per_threads}."]
    lines += [f"OpenVINO could not run {m}: {why}" for m, why in ov_notes.items()]
    met = targets(report)
    if met:
        lines += ["", "| issue 6 and 16 target | measured | met |", "|---|---:|:---:|"]
        lines += [f"| {t} | {m} | {'yes' if ok else '**no**'} |" for t, m, ok in met]
        missing = ([] if report.get("memory") else ["peak memory (measured without --quick)"]) + \
            ([] if report.get("compile") else ["compile time (measured without --quick)"])
        if missing:
            lines.append(f"\n(Not measured here: {'; '.join(missing)}.)")
        if report.get("memory"):
            lines.append("\nPeak memory is the rise of the peak resident set (VmHWM) over a process that "
                         "imported both engines, while loading the model and running it 5 times; each engine "
                         "in a process of its own.")
    if report.get("peaks"):
        lines += ["", "FMA peak of this CPU (benchmarks/fma_peak.c, float32, best of 7 rounds): "
                  + "; ".join(f"{isa} {t} thread(s) {g:.1f} GFLOP/s" for isa, by in report["peaks"].items()
                              for t, g in sorted(by.items())) + "."]
    for g in report.get("gflops", []):
        o, x = g["om2gen"], g["onnxruntime"]
        pct = (lambda e: f" ({e['of_peak'] * 100:.0f}% of the {g['isa']} peak)" if e["of_peak"] else "")
        lines.append(f"ResNet-50 ({g['gflop']:.2f} GFLOP per inference), {g['threads']} thread(s): om2gen "
                     f"{o['gflops']:.1f} GFLOP/s{pct(o)}, ORT {x['gflops']:.1f} GFLOP/s{pct(x)}.")
    for p in report.get("phases", []):
        lines += ["", f"Load phases of {p['model']}, OM2 archive and classic OM file:", ""]
        if "error" in p:
            lines.append(f"failed: {p['error']}")
            continue
        lines += ["```", bench_report.render_phases(p["result"], p["result"].get("onnxruntime_session_ms")), "```"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="also write the markdown report to this file")
    p.add_argument("--json", help="write the raw results (every figure of every row) to this file")
    p.add_argument("--quick", action="store_true", help=f"a smaller set ({', '.join(QUICK)}), fewer runs, "
                                                       "no load phases")
    p.add_argument("--models", nargs="+", choices=sorted(CASES), help="only these models")
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2], help="thread counts (default: 1 2)")
    p.add_argument("--runs", type=int, help="timed runs per engine and row (default: 30; quick: 15)")
    p.add_argument("--target", help="compile the models for this --target (e.g. x86_64-avx2, x86_64-avx2:znver1: the "
                                    "AVX2 kernels on an AVX-512 machine); default: this machine's, tuned for it")
    p.add_argument("--budget", type=float, default=5.0,
                   help="seconds a row's run (and load) measurement may take before it stops early (default: 5)")
    p.add_argument("--no-phases", action="store_true", help="skip the OM2 vs OM load phases")
    p.add_argument("--no-peak", action="store_true", help="skip the FMA peak and GFLOP/s")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory comparison")
    p.add_argument("--no-compile-times", action="store_true",
                   help="skip compiling ResNet-50 with an empty and a warm kernel cache")
    args = p.parse_args(argv)

    names = args.models or (QUICK if args.quick else list(CASES))
    runs = args.runs or (15 if args.quick else 30)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    t0, before = time.perf_counter(), cpu_times()
    report = run_suite(names, args.threads, runs, 3, 5 if args.quick else 10, args.budget, log, args.target)
    report.update(target=args.target, machine=bench.machine_info(), commit=_git_commit(),
                  machine_load=machine_load(before, cpu_times()),
                  command="python benchmarks/suite.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  settings=f"median of up to {runs} runs after 3 warm-up and of up to {5 if args.quick else 10} "
                           f"loads per engine (fewer when a row exceeds {args.budget:g} s), engines alternating")
    if not args.no_peak and "resnet50" in names:
        log("FMA peak ...")
        try:
            report["peaks"] = fma_peak.measure(max(args.threads))
            report["gflops"] = gflops_report(report["rows"], report["peaks"])
        except Exception as exc:
            log(f"  FAILED: {_error(exc)}")
    if "resnet50" in names and not (args.quick or args.no_compile_times):
        log("compile time of resnet50 (empty, then warm kernel cache) ...")
        try:
            report["compile"] = compile_times(CASES["resnet50"])
        except Exception as exc:
            report["compile"] = {"error": _error(exc)}
            log(f"  FAILED: {_error(exc)}")
    memory_models = [n for n in TARGET_MODELS if n in names]
    if memory_models and not (args.quick or args.no_memory):
        log("peak memory ...")
        report["memory"] = memory_report(memory_models, report["code_digest"], max(args.threads), log)
    phase_models = [n for n in PHASE_MODELS if n in names]
    if phase_models and not (args.no_phases or args.quick):
        log("load phases ...")
        report["phases"] = phases_report(phase_models, report["code_digest"], 10, max(args.threads), log)
    write_outputs(render(report), report, args.out, args.json)
    log(f"suite done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
