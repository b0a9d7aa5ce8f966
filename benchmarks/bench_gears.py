"""Gears (issue 14): what a model compiled with gears costs next to the same model compiled static.

    python benchmarks/bench_gears.py [--models resnet50 bert] [--threads 1 2] [--runs 15] [--budget 30]
                                     [--loads 10] [--out FILE.md] [--json FILE]

Models: the suite's ResNet-50 with a batch dim (benchmarks/models/resnet50_batch.py), gears of the
batch 1, 2, 4, 8, and the suite's 4-layer BERT-base encoder with a symbolic sequence length
(benchmarks/models/bert_base.py, dynamic_seq), gears of the sequence 32, 64, 128 (dynamic_dims).
The static models compiled for comparison are the same .onnx compiled at one gear's shapes.

  (a) run time at each gear: the gear archive against the static archive of that gear's shapes,
      runs of the two alternating in rounds (bench.interleave); medians, and the median of the
      per-round ratios (target: gear / static <= 1.05);
  (b) archive size: ResNet-50 with 8 gears (batch 1..8) and with 4 against static batch 8
      (target <= 1.1), BERT with 3 gears against static sequence 128;
  (c) load time: om2gen.load of each gear archive and of the static one, alternating, gc.collect()
      before each; medians;
  (d) the gear switch: each gear's run right after a run of the other gear against right after a
      run of its own (bench.measure_switch), om2gen and ONNX Runtime on the same .onnx.

Archives are compiled once and cached like the suite's (benchmarks/suite.py `compiled`).
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import om2gen  # noqa: E402
from benchmarks import models, suite  # noqa: E402
from om2gen.cli import bench  # noqa: E402

RUN_TARGET, SIZE_TARGET = 1.05, 1.10


@dataclass(frozen=True)
class GearModel:
    name: str
    case: suite.Case                  # the .onnx and the dynamic input shapes (-1 where a gear decides)
    option: str                       # the om2gen.compile option of the gears
    gears: tuple                      # its value for the run, load and switch figures
    size_gears: tuple = ()            # more gear sets, for the size and load figures
    switch: tuple[int, int] = (0, 1)  # the gears whose switch is timed

    def static_shapes(self, gear_shapes: dict) -> suite.Case:
        return dataclasses.replace(self.case, input_shapes={n: tuple(s) for n, s in gear_shapes.items()})


def _case(name: str, model: str, shapes: dict) -> suite.Case:
    return suite.Case(name, models.BUILDERS[model][1], lambda: models.path(model), shapes)


MODELS = {m.name: m for m in [
    GearModel("resnet50", _case("resnet50_batch", "resnet50_batch", {"gpu_0/data_0": (-1, 3, 224, 224)}),
              "dynamic_batch_size", (1, 2, 4, 8), size_gears=(tuple(range(1, 9)),)),
    GearModel("bert", _case("bert_base_4l_seq", "bert_base_4l_seq", {"input_ids": (1, -1), "attention_mask": (1, -1)}),
              "dynamic_dims", ((32, 32), (64, 64), (128, 128)), switch=(0, 2)),
]}


# ---- compiling --------------------------------------------------------------------------------

@dataclass
class Archives:
    geared: Path        # the archive with the gears of GearModel.gears
    gear: dict          # gear set (tuple) -> archive path (GearModel.gears and size_gears)
    static: list        # per gear of `geared`: the static archive of its shapes
    shapes: list        # per gear of `geared`: {input: shape}


def compile_all(m: GearModel, code: str, log) -> Archives:
    gear = {g: suite.compiled(m.case, "om2", code, log, **{m.option: list(g)}) for g in (m.gears, *m.size_gears)}
    with om2gen.load(gear[m.gears]) as model:
        shapes = model.gears
    static = [suite.compiled(m.static_shapes(s), "om2", code, log) for s in shapes]
    return Archives(gear[m.gears], gear, static, shapes)


# ---- measuring --------------------------------------------------------------------------------

def run_times(a: Archives, threads: int, runs: int, warmup: int, budget: float | None) -> list[dict]:
    """(a): per gear, the gear archive's and the static archive's run time at its shapes."""
    out = []
    with om2gen.load(a.geared, threads=threads) as geared:
        for i, (shapes, static_path) in enumerate(zip(a.shapes, a.static)):
            feeds = bench.gear_feeds(geared, i, {}, 0)
            with om2gen.load(static_path, threads=threads) as static:
                blocks = {"static": {"run": lambda: static.run(feeds)}, "gear": {"run": lambda: geared.run(feeds)}}
                for _ in range(warmup):
                    static.run(feeds)
                    geared.run(feeds)
                samples = bench.interleave(blocks, runs, budget)
            s, g = samples["static"]["run"], samples["gear"]["run"]
            out.append({"shapes": {n: list(v) for n, v in shapes.items()}, "n": len(s),
                        "static_ms": statistics.median(s) * 1e3, "gear_ms": statistics.median(g) * 1e3,
                        "ratio": statistics.median(g) / statistics.median(s),
                        "paired_ratio": statistics.median(y / x for x, y in zip(s, g))})
    return out


def load_times(paths: dict, threads: int, loads: int) -> dict:
    """(c): {label: median ms} of om2gen.load of each archive, the archives alternating, after one
    untimed load each, gc.collect() before every load."""
    def one(path):
        gc.collect()
        t0 = time.perf_counter()
        model = om2gen.load(path, threads=threads)
        dt = time.perf_counter() - t0
        model.close()
        return dt
    labels = list(paths)
    for label in labels:
        one(paths[label])
    times = {label: [] for label in labels}
    for i in range(loads):
        for label in (labels if i % 2 == 0 else labels[::-1]):
            times[label].append(one(paths[label]))
    return {label: statistics.median(v) * 1e3 for label, v in times.items()}


def switch_cost(m: GearModel, a: Archives, threads: int, runs: int, budget: float | None) -> dict:
    """(d): bench.measure_switch between gears m.switch, om2gen and ONNX Runtime."""
    i, j = m.switch
    session = bench.ort_session(m.case.onnx(), threads)
    with om2gen.load(a.geared, threads=threads) as geared:
        fa, fb = (bench.gear_feeds(geared, k, {}, 0) for k in (i, j))
        calls = {"om2gen": (lambda: geared.run(fa), lambda: geared.run(fb)),
                 "onnxruntime": (lambda: session.run(None, fa), lambda: session.run(None, fb))}
        for fn in (*calls["om2gen"], *calls["onnxruntime"]):
            fn()
        r = bench.measure_switch(calls, runs, budget, bench.IDLE_GAP_SECONDS if threads > 1 else 0.0)
    return {"gears": [i, j], "shapes": [a.shapes[i], a.shapes[j]], **r}


# ---- the report -------------------------------------------------------------------------------

def cpu_flags() -> str:
    """The AVX-512 feature flags /proc/cpuinfo lists ("none" without AVX-512)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return "unknown"
    avx512 = sorted(f for f in flags if f.startswith("avx512"))
    return " ".join(avx512) if avx512 else "none"


def _shapes(shapes: dict) -> str:
    return ", ".join(f"{n}[{','.join(map(str, s))}]" for n, s in shapes.items())


def _gear_label(m: GearModel, gears: tuple) -> str:
    """'4 gears (dynamic_batch_size=1;2;4;8)', as the CLI spells the option."""
    values = ";".join(",".join(map(str, g)) if isinstance(g, tuple) else str(g) for g in gears)
    return f"{len(gears)} gears ({m.option}={values})"


def render(report: dict) -> str:
    lines = [*suite.header(report), ""]
    for r in report["models"]:
        m = MODELS[r["name"]]
        lines += [f"### {r['name']}: {m.case.what}", "",
                  f"(a) run time at each gear, {_gear_label(m, m.gears)} against the static compile at that gear's "
                  f"shapes; median ms of up to {report['runs']} runs each, the two alternating (target: gear / static "
                  f"<= {RUN_TARGET})", "",
                  "| threads | shapes | runs | static ms | gear ms | gear / static | per-round ratio, median | met |",
                  "|---:|---|---:|---:|---:|---:|---:|:---:|"]
        for t, rows in r["run"].items():
            for x in rows:
                lines.append(f"| {t} | {_shapes(x['shapes'])} | {x['n']} | {suite._f(x['static_ms'])} | "
                             f"{suite._f(x['gear_ms'])} | {x['ratio']:.3f} | {x['paired_ratio']:.3f} | "
                             f"{'yes' if x['ratio'] <= RUN_TARGET else '**no**'} |")
        lines += ["", "(b) archive size against the static compile at the largest gear's shapes "
                      f"(target: <= {SIZE_TARGET})", "", "| archive | MB | / static |", "|---|---:|---:|"]
        for label, size in r["sizes"].items():
            lines.append(f"| {label} | {size / 1e6:.2f} | {size / r['sizes']['static, largest gear']:.3f} |")
        lines += ["", f"(c) load time, median of {report['loads']} loads each, alternating, gc.collect() before each, "
                      f"{report['load_threads']} thread(s)", "",
                  "| archive | load ms | / static |", "|---|---:|---:|"]
        for label, ms in r["load"].items():
            lines.append(f"| {label} | {suite._f(ms)} | {ms / r['load']['static, largest gear']:.2f} |")
        lines += ["", "(d) gear switch: each gear's run right after a run of the other gear (switched) against right "
                      "after a run of its own (repeat); median ms; cost = median of the paired differences, "
                      "(noise) when within two standard errors of 0", "",
                  "| threads | engine | gear | repeat ms | switched ms | cost ms | cost / repeat |",
                  "|---:|---|---|---:|---:|---:|---:|"]
        for t, sw in r["switch"].items():
            for engine, name in (("om2gen", "om2gen"), ("onnxruntime", "ORT")):
                for shapes, x in zip(sw["shapes"], sw[engine]):
                    cost = f"{x['cost_ms']:+.3g}" if x["resolved"] else f"(noise, +-{2 * x['stderr_ms']:.2g})"
                    rel = f"{x['cost_ms'] / x['repeat']['median_ms'] * 100:+.1f}%" if x["resolved"] else "-"
                    lines.append(f"| {t} | {name} | {_shapes(shapes)} | {suite._f(x['repeat']['median_ms'])} | "
                                 f"{suite._f(x['switched']['median_ms'])} | {cost} | {rel} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--runs", type=int, default=15, help="timed runs of each archive per gear (default: 15)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--budget", type=float, default=30.0,
                   help="seconds one gear's run comparison may take before it stops early (default: 30)")
    p.add_argument("--loads", type=int, default=10)
    p.add_argument("--out", help="also write the markdown report to this file")
    p.add_argument("--json", help="write the raw figures to this file")
    args = p.parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    code = suite._code_digest()
    compiled = {}
    t0 = time.perf_counter()
    for name in args.models:
        log(f"{name}: compiling (or finding) the archives")
        compiled[name] = compile_all(MODELS[name], code, log)
    if time.perf_counter() - t0 > 1.0:
        suite.os.sync()
        time.sleep(suite.SETTLE_AFTER_COMPILE_SECONDS)
    before = suite.cpu_times()
    load_threads = max(args.threads)
    report = {"runs": args.runs, "loads": args.loads, "load_threads": load_threads, "models": []}
    for name in args.models:
        m, a = MODELS[name], compiled[name]
        r = {"name": name, "run": {}, "switch": {}}
        for t in args.threads:
            log(f"{name}: run times, {t} thread(s)")
            r["run"][t] = run_times(a, t, args.runs, args.warmup, args.budget)
            log(f"{name}: gear switch, {t} thread(s)")
            r["switch"][t] = switch_cost(m, a, t, max(5, args.runs // 2), args.budget)
        largest = a.static[-1]
        r["sizes"] = {"static, largest gear": largest.stat().st_size,
                      **{_gear_label(m, g): path.stat().st_size for g, path in a.gear.items()}}
        log(f"{name}: load times")
        r["load"] = load_times({"static, largest gear": largest, **{_gear_label(m, g): path
                                                                    for g, path in a.gear.items()}},
                               load_threads, args.loads)
        report["models"].append(r)
    report.update(machine=bench.machine_info(), avx512=cpu_flags(), commit=suite._git_commit(),
                  machine_load=suite.machine_load(before, suite.cpu_times()),
                  command="python benchmarks/bench_gears.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    suite.write_outputs(render(report), report, args.out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
