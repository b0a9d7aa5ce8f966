"""Dynamic shapes against static compiles (issue 15, docs/dynamic-shapes.md).

    python benchmarks/bench_dynamic.py [--models resnet50 bert] [--threads 1 2] [--runs 15] [--budget 30]
    python benchmarks/bench_dynamic.py --format om [--models resnet50 bert] [--threads 1] [--runs 7]

Per model, one dynamic archive (ranges) and one static archive per measured shape. At each shape
the two archives' runs alternate in rounds (bench.interleave), with ONNX Runtime on the same
.onnx in the same rounds. Reported: median ms of each, the dynamic/static ratio of medians (target
<= 1.25), the median of per-round ratios, and om2gen/ORT; load time of the dynamic archive
against a static one; the first run's cost at a new size. Models:

- ResNet-50 with a symbolic batch (benchmarks/models/resnet50_batch.py), batch 1~8, at 1, 4, 8.
- The suite's BERT-base encoder (4 layers) with a dynamic sequence (bert_base.py dynamic_seq=True),
  sequence 1~256, at 32, 128, 256.

--format om: the dynamic model as a classic .om, run the RT2 way (runtime/rt2.py). Per size, in
increasing order from a fresh load (so each is a new maximum): the first run (InferShape, Tiling,
the arena grown, the kernels), then repeated runs (median ms), the executor's InferShape + Tiling
time per op (ns/op, median over the repeated runs) and its arena plan time; and the dynamic .om2's
median at the same size for comparison.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import models, suite  # noqa: E402

import om2gen  # noqa: E402
from om2gen.cli import bench  # noqa: E402

TARGET = 1.25


@dataclass(frozen=True)
class DynamicModel:
    name: str
    model: str                      # benchmarks/models builder
    ranges: dict                    # input_shapes of the dynamic compile
    shapes: tuple                   # per measured size: {input: shape}
    feeds: object                   # (rng, {input: shape}) -> feeds


def _images(rng, shapes):
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}


def _tokens(rng, shapes):
    return {n: (rng.integers(0, 1000, s) if n == "input_ids" else np.ones(s)).astype(np.int64)
            for n, s in shapes.items()}


MODELS = {m.name: m for m in [
    DynamicModel("resnet50", "resnet50_batch", {"gpu_0/data_0": ("1~8", 3, 224, 224)},
                 tuple({"gpu_0/data_0": (b, 3, 224, 224)} for b in (1, 4, 8)), _images),
    DynamicModel("bert", "bert_base_4l_seq", {"input_ids": (1, "1~256"), "attention_mask": (1, "1~256")},
                 tuple({"input_ids": (1, s), "attention_mask": (1, s)} for s in (32, 128, 256)), _tokens),
]}


def _case(m: DynamicModel, shapes: dict) -> suite.Case:
    return suite.Case(f"{m.model}_{'_'.join(str(d) for s in shapes.values() for d in s)}", models.BUILDERS[m.model][1],
                      lambda: models.path(m.model), shapes)


def run(m: DynamicModel, threads: int, runs: int, budget: float, code: str, log) -> list[dict]:
    dyn_path = suite.compiled(_case(m, m.ranges), "om2", code, log)
    session = bench.ort_session(models.path(m.model), threads)
    rows = []
    rng = np.random.default_rng(0)
    with om2gen.load(dyn_path, threads=threads) as dyn:
        for shapes in m.shapes:
            feeds = m.feeds(rng, shapes)
            with om2gen.load(suite.compiled(_case(m, shapes), "om2", code, log), threads=threads) as static:
                for fn in (lambda: static.run(feeds), lambda: dyn.run(feeds), lambda: session.run(None, feeds)):
                    fn()
                samples = bench.interleave({"static": {"run": lambda: static.run(feeds)},
                                            "dynamic": {"run": lambda: dyn.run(feeds)},
                                            "ort": {"run": lambda: session.run(None, feeds)}}, runs, budget)
            s, d, o = (samples[k]["run"] for k in ("static", "dynamic", "ort"))
            rows.append({"shapes": shapes, "n": len(s), "static_ms": statistics.median(s) * 1e3,
                         "dynamic_ms": statistics.median(d) * 1e3, "ort_ms": statistics.median(o) * 1e3,
                         "ratio": statistics.median(d) / statistics.median(s),
                         "paired": statistics.median(y / x for x, y in zip(s, d)),
                         "vs_ort": statistics.median(d) / statistics.median(o)})
    return rows


def first_run_at_new_size(m: DynamicModel, threads: int, code: str, log) -> list[dict]:
    """A fresh load, then each size's first run against its second: what a new size costs."""
    out = []
    rng = np.random.default_rng(1)
    with om2gen.load(suite.compiled(_case(m, m.ranges), "om2", code, log), threads=threads) as dyn:
        for shapes in m.shapes:
            feeds = m.feeds(rng, shapes)
            t0 = time.perf_counter()
            dyn.run(feeds)
            t1 = time.perf_counter()
            dyn.run(feeds)
            t2 = time.perf_counter()
            out.append({"shapes": shapes, "first_ms": (t1 - t0) * 1e3, "second_ms": (t2 - t1) * 1e3})
    return out


def rt2_costs(m: DynamicModel, threads: int, runs: int, code: str, log) -> list[dict]:
    """The RT2 path's costs at each size (the module comment, --format om)."""
    out = []
    rng = np.random.default_rng(2)
    with om2gen.load(suite.compiled(_case(m, m.ranges), "om", code, log), threads=threads) as om, \
            om2gen.load(suite.compiled(_case(m, m.ranges), "om2", code, log), threads=threads) as om2:
        for shapes in m.shapes:
            feeds = m.feeds(rng, shapes)
            t0 = time.perf_counter()
            om.run(feeds)
            first = time.perf_counter() - t0
            grew = om.rt2_stats["arena_grows"]
            times, host, plan = [], [], []
            for _ in range(runs):
                t0 = time.perf_counter()
                om.run(feeds)
                times.append(time.perf_counter() - t0)
                s = om.rt2_stats
                host.append(s["host_ns"] / s["ops"])
                plan.append(s["plan_ns"])
            assert om.rt2_stats["arena_grows"] == grew, "a repeated run grew the arena"
            om2.run(feeds)
            om2_times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                om2.run(feeds)
                om2_times.append(time.perf_counter() - t0)
            out.append({"shapes": shapes, "ops": s["ops"], "first_ms": first * 1e3,
                        "repeat_ms": statistics.median(times) * 1e3, "ns_per_op": statistics.median(host),
                        "plan_us": statistics.median(plan) / 1e3, "arena_mb": s["arena_bytes"] / 2**20,
                        "om2_ms": statistics.median(om2_times) * 1e3})
    return out


def main_om(args, code: str) -> int:
    for name in args.models:
        m = MODELS[name]
        for threads in args.threads:
            print(f"\n{name}, {threads} thread(s): dynamic {m.ranges} as .om (RT2 path), sizes in increasing order")
            print(f"{'shapes':<36} {'ops':>4} {'first ms':>9} {'repeat ms':>10} {'ns/op':>7} {'plan us':>8} "
                  f"{'arena MB':>9} {'.om2 ms':>8}")
            for r in rt2_costs(m, threads, args.runs, code, lambda *_: None):
                shapes = ", ".join(f"{k}{list(v)}" for k, v in r["shapes"].items())
                print(f"{shapes[:36]:<36} {r['ops']:>4} {r['first_ms']:>9.2f} {r['repeat_ms']:>10.2f} "
                      f"{r['ns_per_op']:>7.0f} {r['plan_us']:>8.1f} {r['arena_mb']:>9.2f} {r['om2_ms']:>8.2f}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--budget", type=float, default=30.0)
    ap.add_argument("--format", choices=("om2", "om"), default="om2",
                    help="om: the classic .om's RT2 costs (InferShape + Tiling per op, a first run at a new size)")
    args = ap.parse_args(argv)
    code = suite._code_digest()
    info = bench.machine_info()
    print(f"{info['cpu']}, {info['cores']} cores, {info['isa']}; om2gen {info['om2gen']}, ONNX Runtime "
          f"{info['onnxruntime']}, commit {suite._git_commit()}")
    if args.format == "om":
        return main_om(args, code)
    worst = 0.0
    for name in args.models:
        m = MODELS[name]
        for threads in args.threads:
            print(f"\n{name}, {threads} thread(s): dynamic {m.ranges} against static compiles")
            print(f"{'shapes':<40} {'static ms':>10} {'dynamic ms':>11} {'dyn/static':>10} {'paired':>7} "
                  f"{'ORT ms':>8} {'dyn/ORT':>8}")
            for r in run(m, threads, args.runs, args.budget, code, lambda *_: None):
                worst = max(worst, r["ratio"])
                shapes = ", ".join(f"{k}{list(v)}" for k, v in r["shapes"].items())
                print(f"{shapes[:40]:<40} {r['static_ms']:>10.2f} {r['dynamic_ms']:>11.2f} {r['ratio']:>10.3f} "
                      f"{r['paired']:>7.3f} {r['ort_ms']:>8.2f} {r['vs_ort']:>8.3f}")
        for r in first_run_at_new_size(m, args.threads[-1], code, lambda *_: None):
            print(f"first run at {list(r['shapes'].values())[0]}: {r['first_ms']:.2f} ms, then {r['second_ms']:.2f} ms")
    print(f"\nworst dynamic/static ratio of medians: {worst:.3f} (target <= {TARGET})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
