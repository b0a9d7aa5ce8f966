"""Fusion's effect: each model compiled with the graph rewrites off (OM2GEN_FUSION=0) and on, run
next to ONNX Runtime in the same process, as one markdown table.

    python benchmarks/bench_fusion.py [--models NAME ...] [--runs K] [--threads N] [--json FILE]

Per model: tasks and kernels without and with fusion, median run time of each engine (inputs
and outputs bound once; om2gen Model.execute_raw, ORT run_with_iobinding; CPU provider, default
optimisations, the same intra-op thread count) and the ratios. The three engines take turns
within each round (in alternating order, after an untimed settling run), so the noise of a
shared machine hits them alike; report ratios, not absolute times. Models: the real-model tier
(samples/real_models/catalog.py, fetched and pinned there).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "samples" / "real_models"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import catalog  # noqa: E402
import om2gen  # noqa: E402
from om2gen.cli import bench  # noqa: E402
from om2gen.formats.om2 import layout  # noqa: E402
from om2gen import pipeline  # noqa: E402


def compile_variant(model, path: Path, fused: bool) -> dict:
    old = os.environ.get(pipeline.FUSION_ENV)
    os.environ[pipeline.FUSION_ENV] = "1" if fused else "0"
    try:
        t0 = time.perf_counter()
        om2gen.compile(catalog.fetch(model), path, input_shapes=model.input_shapes, input_values=model.input_values)
        seconds = time.perf_counter() - t0
    finally:
        if old is None:
            os.environ.pop(pipeline.FUSION_ENV, None)
        else:
            os.environ[pipeline.FUSION_ENV] = old
    with zipfile.ZipFile(path) as z:
        stats = json.loads(z.read(layout.model_meta(0)))["stats"]
    return {"tasks": stats["tasks"], "kernels": stats["kernels"], "compile_s": seconds}


def ort_feeds(model) -> dict:
    """The om2gen feeds plus the inputs om2gen froze, typed as the ONNX graph declares them."""
    feeds = catalog.inputs_for(model)
    declared = {i.name: i for i in onnx.load(str(catalog.fetch(model)), load_external_data=False).graph.input}
    for k, v in model.input_values.items():
        feeds[k] = np.array(v, dtype=onnx.helper.tensor_dtype_to_np_dtype(declared[k].type.tensor_type.elem_type))
    return feeds


def measure(calls: dict, runs: int, warmup: int, max_seconds: float) -> dict:
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    times = {k: [] for k in calls}
    names = list(calls)
    start = time.perf_counter()
    for r in range(runs):
        for name in (names if r % 2 == 0 else names[::-1]):
            calls[name]()   # settle (the other engine's workers go idle)
            t0 = time.perf_counter()
            calls[name]()
            times[name].append(time.perf_counter() - t0)
        if r >= 4 and time.perf_counter() - start > max_seconds:
            break
    return {k: statistics.median(v) * 1e3 for k, v in times.items()} | {"rounds": len(times[names[0]])}


def bench_model(model, workdir: Path, threads: int, runs: int, warmup: int, max_seconds: float) -> dict:
    import onnxruntime as ort
    result = {"model": model.name}
    paths = {}
    for variant, fused in (("plain", False), ("fused", True)):
        paths[variant] = workdir / f"{model.name}_{variant}.om2"
        result[variant] = compile_variant(model, paths[variant], fused)
    feeds = ort_feeds(model)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    session = ort.InferenceSession(str(catalog.fetch(model)), so, providers=["CPUExecutionProvider"])
    loaded = {v: om2gen.load(p, threads=threads) for v, p in paths.items()}
    try:
        calls, outs = {}, {}
        for v, m in loaded.items():
            calls[v] = bench.om2_engine_call(m, feeds)
            outs[v] = calls[v].keep[1]
        calls["ort"] = bench.ort_engine_call(session, {i.name: feeds[i.name] for i in session.get_inputs()})
        times = measure(calls, runs, warmup, max_seconds)
        # sanity: both archives compute the same thing
        result["max_abs_diff"] = max(float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0
                                     for a, b in zip(outs["plain"], outs["fused"]))
    finally:
        for m in loaded.values():
            m.close()
    result["ms"] = {k: times[k] for k in ("plain", "fused", "ort")}
    result["rounds"] = times["rounds"]
    result["ratio"] = {"fused/plain": times["fused"] / times["plain"], "fused/ort": times["fused"] / times["ort"],
                       "plain/ort": times["plain"] / times["ort"]}
    return result


def table(results: list[dict], threads: int) -> str:
    lines = [f"Fusion on the real models, {threads} thread(s): median run time (ms), om2gen without fusion "
             "(plain) and with it (fused), ONNX Runtime (ort).", "",
             "| model | tasks plain → fused | kernels plain → fused | plain ms | fused ms | ort ms | "
             "fused/plain | fused/ort | plain/ort |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        p, f, ms, x = r["plain"], r["fused"], r["ms"], r["ratio"]
        lines.append(f"| {r['model']} | {p['tasks']} → {f['tasks']} | {p['kernels']} → {f['kernels']} | "
                     f"{ms['plain']:.2f} | {ms['fused']:.2f} | {ms['ort']:.2f} | {x['fused/plain']:.2f} | "
                     f"{x['fused/ort']:.2f} | {x['plain/ort']:.2f} |")
    if results:
        geo = lambda key: float(np.exp(np.mean([np.log(r["ratio"][key]) for r in results])))  # noqa: E731
        lines.append(f"| geometric mean | | | | | | {geo('fused/plain'):.2f} | {geo('fused/ort'):.2f} | "
                     f"{geo('plain/ort'):.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=[m.name for m in catalog.MODELS],
                    choices=[m.name for m in catalog.MODELS])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max-seconds", type=float, default=30.0, help="time budget of the timed rounds per model")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = ap.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="om2gen-bench-fusion-") as tmp:
        for name in args.models:
            r = bench_model(catalog.BY_NAME[name], Path(tmp), args.threads, args.runs, args.warmup, args.max_seconds)
            results.append(r)
            print(f"{name}: tasks {r['plain']['tasks']} -> {r['fused']['tasks']}, ms plain {r['ms']['plain']:.2f} "
                  f"fused {r['ms']['fused']:.2f} ort {r['ms']['ort']:.2f}", file=sys.stderr, flush=True)
    print(table(results, args.threads))
    if args.json:
        args.json.write_text(json.dumps({"threads": args.threads, "results": results}, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
