"""Load time of large models: om2gen.load of the .om2 (and .om) against ONNX Runtime's session
creation, in one process, alternating, gc.collect() before each; medians. With --fresh N: the
first load and first run in N fresh processes per engine (om2gen/cli/bench_fresh.py) instead,
against the issue's targets (`fresh_rows`, for benchmarks/suite.py too).

    python benchmarks/bench_load.py [--models resnet50 bert_base_4l] [--loads 15] [--threads 2]
    python benchmarks/bench_load.py --fresh 3 [--models mlp resnet50 ...] [--winograd-weights load]

Archives are compiled once and cached like the suite's (benchmarks/suite.py `compiled`).
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.archive_size import CASES  # noqa: E402   (the suite's, and ResNet-50 with seeded weights)
from benchmarks.suite import _code_digest, compiled  # noqa: E402

import om2gen  # noqa: E402
from om2gen.cli import bench, bench_fresh  # noqa: E402
from om2gen.cli.bench import ort_session  # noqa: E402

# IREE's first load in a fresh process and ORT's session creation on the AMD EPYC Zen 1
# (issue 16). IREE is not installed here: its figure is scaled by this machine's ORT session
# creation of the same model against Zen 1's, and the target is 2x that.
ZEN1 = {"mlp": {"iree_ms": 2.1, "ort_ms": 10.0}, "resnet50": {"iree_ms": 7.3, "ort_ms": 442.0}}


def fresh_rows(names, threads: int, processes: int = 3, log=print, **options) -> list[dict]:
    """Per model: bench_fresh.measure_fresh of its archive next to ORT on its .onnx, and the two
    targets: load + first run below ORT's session + first run, and (where the issue has IREE's
    figure) the first load within 2x IREE's, scaled to this machine."""
    code = _code_digest()
    rows = []
    for name in names:
        case = CASES[name]
        archive = compiled(case, "om2", code, log, **options)
        with om2gen.load(archive, threads=threads) as m:
            feeds = bench.run_feeds(m.inputs, case.feeds() if case.feeds else {}, 0)
        session = ort_session(case.onnx(), threads)
        o_feeds = bench.ort_feeds(session, {**feeds, **(case.feeds() if case.feeds else {})}, case.onnx())
        del session
        r = bench_fresh.measure_fresh(archive, feeds, threads, processes, case.onnx(), o_feeds)
        om, ort = r["om2gen"], r["onnxruntime"]
        row = {"model": name, **r, "first_run_target_met": om["load_first_run_ms"] < ort["load_first_run_ms"]}
        if name in ZEN1:
            z = ZEN1[name]
            row["iree_scaled_ms"] = z["iree_ms"] * ort["load_ms"] / z["ort_ms"]
            row["iree_target_met"] = om["load_ms"] <= 2 * row["iree_scaled_ms"]
        rows.append(row)
    return rows


def render_fresh(rows: list[dict], threads: int) -> str:
    lines = [f"{bench.machine_info()['cpu']}, {threads} threads; median of {rows[0]['om2gen']['n']} fresh processes "
             "per engine", "",
             "| model | om2gen import | om2gen load | + first run | ORT import | ORT session | + first run "
             "| IREE scaled (x2 target) | load within 2x IREE | load + run below ORT's |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        om, ort = r["om2gen"], r["onnxruntime"]
        iree = f"{r['iree_scaled_ms']:.1f} ms ({2 * r['iree_scaled_ms']:.1f})" if "iree_scaled_ms" in r else "-"
        met = {True: "met", False: "NOT met", None: "-"}
        lines.append(f"| {r['model']} | {om['import_ms']:.1f} ms | {om['load_ms']:.1f} ms | "
                     f"{om['load_first_run_ms']:.1f} ms | {ort['import_ms']:.1f} ms | {ort['load_ms']:.1f} ms | "
                     f"{ort['load_first_run_ms']:.1f} ms | {iree} | {met[r.get('iree_target_met')]} | "
                     f"{met[r['first_run_target_met']]} |")
    return "\n".join(lines)


def _timed(make) -> float:
    gc.collect()
    t = time.perf_counter()
    obj = make()
    elapsed = time.perf_counter() - t
    obj.close() if hasattr(obj, "close") else None
    del obj
    return elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["resnet50", "bert_base_4l"], choices=sorted(CASES))
    p.add_argument("--loads", type=int, default=15)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--fresh", type=int, default=0, metavar="N",
                   help="time the first load and first run in N fresh processes per engine instead")
    p.add_argument("--winograd-weights", choices=("auto", "stored", "load"),
                   help="compile option winograd_weights= of the .om2 (default: auto)")
    args = p.parse_args()
    options = {"winograd_weights": args.winograd_weights} if args.winograd_weights else {}
    if args.fresh:
        print(render_fresh(fresh_rows(args.models, args.threads, args.fresh, **options), args.threads))
        return 0
    code = _code_digest()
    print(f"{'model':16} {'file':>10} {'om2gen .om2':>12} {'om2gen .om':>11} {'ORT session':>12} {'.om2/ORT':>9}")
    for name in args.models:
        case = CASES[name]
        om2, om = compiled(case, "om2", code, print, **options), compiled(case, "om", code, print)
        times = {"om2": [], "om": [], "ort": []}
        for i in range(args.loads + 2):
            times["ort"].append(_timed(lambda: ort_session(str(case.onnx()), args.threads)))
            times["om2"].append(_timed(lambda: om2gen.load(om2, threads=args.threads)))
            times["om"].append(_timed(lambda: om2gen.load(om, threads=args.threads)))
        med = {k: statistics.median(v[2:]) * 1e3 for k, v in times.items()}
        print(f"{name:16} {om2.stat().st_size / 1e6:8.0f}MB {med['om2']:10.1f}ms {med['om']:9.1f}ms "
              f"{med['ort']:10.1f}ms {med['om2'] / med['ort']:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
