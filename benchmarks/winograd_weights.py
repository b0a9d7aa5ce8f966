"""Winograd's transformed weights stored in the archive against made at load (a load task from the
raw filters; docs/performance.md, "Winograd weights at load"), per model and per setting of
winograd_weights: archive size / ONNX size, load time (fresh process and in-process), first run,
and the run's median against ONNX Runtime's.

    python benchmarks/winograd_weights.py [--models resnet50_seeded ppocr_v4_det] [--modes stored load auto]
    python benchmarks/winograd_weights.py --calibrate     # the cost model's constants (ops/winograd.py)

--calibrate measures what ops/winograd.weights_at_load weighs, on layers of ResNet-50's largest
3x3 shape (256 -> 256 channels, F(4x4, 3x3)): the load task's time per MB of U it writes (the
model's load phase "run the load tasks", the least of 21 loads), its fixed cost (the same for a
layer of 16 -> 16), and what a stored MB costs a fresh process's load plus first run beyond a made
one (reading, checking, mapping and first touching it), from the two forms' fresh-process figures
(medians, the forms alternating): cold, the archive evicted from the page cache first (the first
load after a download or a reboot: what the cost model weighs), and warm.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from benchmarks import suite  # noqa: E402
from benchmarks.archive_size import CASES  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import om2gen  # noqa: E402
from om2gen.cli import bench, bench_fresh, sizes  # noqa: E402
from om2gen.formats.om2 import layout  # noqa: E402

MODES = ("stored", "load", "auto")
MB = 1 << 20


def measure(case: suite.Case, modes, threads: int, runs: int, fresh: int, log) -> list[dict]:
    """One row per setting. The fresh-process figures alternate the settings' archives round by
    round (medians of `fresh`), warm (in the page cache) and cold (evicted first); ORT's session and
    first run in a fresh process once (bench_fresh); the in-process load and the run medians with
    ORT's, alternating, per setting (bench.measure)."""
    archives = {mode: suite.compiled(case, "om2", suite._code_digest(), log, winograd_weights=mode) for mode in modes}
    given = case.feeds() if case.feeds else {}
    rows = {mode: {"model": case.name, "mode": mode, "load_tasks": _load_tasks(a),
                   "mb": sizes.archive_sizes(a)["bytes"] / MB,
                   "ratio": sizes.archive_sizes(a)["bytes"] / sizes.onnx_bytes(case.onnx())}
            for mode, a in archives.items()}
    with tempfile.TemporaryDirectory(prefix="om2gen-wino-") as tmp:
        npz = Path(tmp) / "feeds.npz"
        with om2gen.load(archives[modes[0]]) as m:
            feeds = bench.run_feeds(m.inputs, given, 0)
        np.savez(npz, **feeds)
        for a in archives.values():   # untimed: imports and the page cache
            _fresh_ms(a, npz, threads, False)
        samples = {(mode, cold): [] for mode in modes for cold in (False, True)}
        for i in range(fresh):
            for mode in (modes if i % 2 == 0 else modes[::-1]):
                for cold in (False, True):
                    samples[mode, cold].append(_fresh_ms(archives[mode], npz, threads, cold))
        session = bench.ort_session(case.onnx(), threads)
        o_feeds = bench.ort_feeds(session, {**feeds, **given}, case.onnx())
        del session
        ort = bench_fresh.measure_fresh(archives[modes[0]], feeds, threads, fresh, case.onnx(), o_feeds)["onnxruntime"]
    for mode, row in rows.items():
        warm, cold = samples[mode, False], samples[mode, True]
        row.update(fresh_load_ms=statistics.median(s[0] for s in warm),
                   fresh_first_run_ms=statistics.median(s[1] for s in warm),
                   cold_ms=statistics.median(s[0] + s[1] for s in cold),
                   ort_fresh_load_first_run_ms=ort["load_first_run_ms"])
        r = bench.measure(archives[mode], case.onnx(), threads=threads, runs=runs, loads=10, feeds=given,
                          openvino=False, fresh=0, max_seconds=60)
        row.update(load_ms=r["load"]["om2gen"]["median_ms"], run_ms=r["run"]["om2gen"]["median_ms"],
                   ort_run_ms=r["run"]["onnxruntime"]["median_ms"])
    return list(rows.values())


def _load_tasks(archive) -> int:
    with zipfile.ZipFile(archive) as z:
        return len(json.loads(z.read(layout.model_meta(0))).get("load_tasks", []))


def render(rows: list[dict], threads: int) -> str:
    lines = [f"{bench.machine_info()['cpu']}, {threads} threads", "",
             "| model | winograd_weights | layers made at load | .om2 MiB | .om2 / ONNX | load (fresh) | first run "
             "(fresh) | load + first run, cold | ORT session + first run (fresh) | load (in-process) | run median "
             "| ORT run median | run / ORT |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['mode']} | {r['load_tasks']} | {r['mb']:.1f} | {r['ratio']:.2f} | "
                     f"{r['fresh_load_ms']:.1f} ms | {r['fresh_first_run_ms']:.1f} ms | {r['cold_ms']:.1f} ms | "
                     f"{r['ort_fresh_load_first_run_ms']:.1f} ms | {r['load_ms']:.1f} ms | "
                     f"{r['run_ms']:.2f} ms | {r['ort_run_ms']:.2f} ms | {r['run_ms'] / r['ort_run_ms']:.2f} |")
    return "\n".join(lines)


# ---- the cost model's constants -----------------------------------------------------------------

def _conv_stack(path: Path, layers: int, channels: int, hw: int) -> None:
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((channels, channels, 3, 3)) * 0.05).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"y{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]))
        x = f"y{i}"
    g = helper.make_graph(nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, hw, hw])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, channels, hw, hw])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _load_task_ms(archive: Path, threads: int, loads: int = 21) -> float:
    """The least over loads of the model's load phase that runs its load tasks (the least: on a
    shared machine the other figures are the neighbours' as much as its own)."""
    times = []
    for _ in range(loads):
        with om2gen.load(archive, threads=threads) as m:
            times.append(dict(m.load_phases)["run the load tasks"] * 1e3)
    return min(times)


_FRESH = """
import sys, time
import numpy as np
import om2gen
feeds = dict(np.load(sys.argv[3]))
t = time.perf_counter()
m = om2gen.load(sys.argv[1], threads=int(sys.argv[2]))
t1 = time.perf_counter()
m.run(feeds)
print((t1 - t) * 1e3, (time.perf_counter() - t1) * 1e3)
"""


def _fresh_ms(archive: Path, feeds: Path, threads: int, cold: bool) -> tuple[float, float]:
    """(Load, first run) in a new process, in ms; cold: the archive's pages evicted from the page cache
    first (posix_fadvise DONTNEED), as after a download or a reboot."""
    if cold:
        fd = os.open(archive, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    out = subprocess.run([sys.executable, "-c", _FRESH, str(archive), str(threads), str(feeds)],
                         capture_output=True, text=True, check=True, env=bench_fresh._env())
    load, first_run = map(float, out.stdout.split()[-2:])
    return load, first_run


def calibrate(threads: int, processes: int) -> str:
    with tempfile.TemporaryDirectory(prefix="om2gen-wino-cal-", dir=Path.home()) as tmp:   # (a disk, not tmpfs)
        out = Path(tmp)
        big, small = out / "big.onnx", out / "small.onnx"
        layers, c, hw = 6, 256, 14
        _conv_stack(big, layers, c, hw)
        _conv_stack(small, layers, 16, hw)
        paths = {}
        for name, src in (("big", big), ("small", small)):
            for mode in ("stored", "load"):
                paths[name, mode] = om2gen.compile(src, out / f"{name}_{mode}.om2", winograd=4, winograd_weights=mode)
        u_mb = sizes.archive_sizes(paths["big", "stored"])["constants_bytes"] / MB
        g_mb = layers * c * c * 9 * 4 / MB
        per_task = _load_task_ms(paths["small", "load"], threads) / layers
        transform_per_mb = (_load_task_ms(paths["big", "load"], threads) / layers - per_task) / (u_mb / layers)
        lines = [f"{bench.machine_info()['cpu']}, {threads} threads; {layers} layers of {c} -> {c} channels, "
                 f"{hw}x{hw}, F(4x4, 3x3): U {u_mb:.1f} MB, g {g_mb:.1f} MB",
                 f"load task, fixed (16 -> 16 layers): {per_task:.3f} ms       -> LOAD_TASK_MS",
                 f"load task, per MB of U:           {transform_per_mb:.3f} ms/MB    -> TRANSFORM_MS_PER_MB"]
        np.savez(out / "feeds.npz", x=np.zeros((1, c, hw, hw), np.float32))
        for cold in (True, False):
            samples = {"stored": [], "load": []}
            for _ in range(processes):   # the two forms alternating, a fresh process each
                for mode in samples:
                    samples[mode].append(sum(_fresh_ms(paths["big", mode], out / "feeds.npz", threads, cold)))
            total = {mode: statistics.median(v) for mode, v in samples.items()}
            # stored - made = MAP (U - g) - TRANSFORM U - tasks * TASK
            per_mb = (total["stored"] - total["load"] + transform_per_mb * u_mb + layers * per_task) / (u_mb - g_mb)
            what = "cold (evicted from the page cache)" if cold else "warm (in the page cache)"
            lines.append(f"fresh load + first run, {what}: stored {total['stored']:.1f} ms, made at load "
                         f"{total['load']:.1f} ms (medians of {processes})")
            lines.append(f"  a stored MB costs {per_mb:.3f} ms/MB" + ("    -> MAP_MS_PER_MB" if cold else ""))
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["resnet50_seeded", "ppocr_v4_det"], choices=sorted(CASES))
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--fresh", type=int, default=5, metavar="N", help="fresh processes per engine and form")
    p.add_argument("--calibrate", action="store_true", help="measure the cost model's constants instead")
    args = p.parse_args()
    if args.calibrate:
        print(calibrate(args.threads, args.fresh))
        return 0
    rows = []
    for name in args.models:
        rows += measure(CASES[name], args.modes, args.threads, args.runs, args.fresh, lambda s: print(s, file=sys.stderr))
        print(render(rows, args.threads), file=sys.stderr, flush=True)
    print(render(rows, args.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
