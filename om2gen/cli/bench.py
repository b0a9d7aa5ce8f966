"""om2gen bench: load time, run latency and per-run overhead of a compiled model, next to ONNX
Runtime (CPU execution provider, default optimisations, the same intra-op thread count) in the
same process; with --phases, load time broken into its stages (Model.load_phases), for one
model or an OM2 archive and a classic OM file side by side.

Measurements of the two engines alternate in rounds so that the machine's noise hits both, and
every figure is a median (with p90 and min for run latency). A round runs each engine as a block
that starts with one untimed run, so that the other engine's spinning worker threads have gone
idle before anything is timed.

Per-run overhead is what the Python run call costs on top of the same engine's run on buffers
bound beforehand: om2gen `Model.run(feeds)` minus `Model.execute_raw` on preallocated inputs and
outputs, ORT `session.run(None, feeds)` minus `session.run_with_iobinding` on bound OrtValues.
On a model whose compute is negligible (the single-Add model) the whole run latency is
overhead; that is the issue's target figure.

A model compiled with gears (docs/gears.md) is timed at every gear, next to ONNX Runtime on the
same .onnx at that gear's shapes, and for the cost of a gear switch: the run time of a gear
right after a run of another gear against right after a run of its own. A dynamic-shape model
is timed at the shapes --input-shape names (bench_shapes.py).
"""
from __future__ import annotations

import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..errors import InputError, ModelError, Om2Error, RuntimeFailure
from ..runtime import gears as gears_mod
from . import bench_fresh, bench_openvino
from . import bench_report as report
from . import bench_shapes, parsing

DEFAULT_PHASE_LOADS = 20


# ---- statistics -------------------------------------------------------------------------------

def summary(seconds: list[float]) -> dict:
    """median, p90 (nearest rank), min and count of a list of durations, in milliseconds."""
    if not seconds:
        return {"median_ms": None, "p90_ms": None, "min_ms": None, "n": 0}
    ordered = sorted(seconds)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]
    return {"median_ms": statistics.median(ordered) * 1e3, "p90_ms": p90 * 1e3, "min_ms": ordered[0] * 1e3,
            "n": len(ordered)}


def paired_difference(a: list[float], b: list[float]) -> dict:
    """The median of the paired differences a[i] - b[i] (seconds), with the standard error of
    that median (from the differences' median absolute deviation); `resolved` is False when it
    is within two standard errors of zero."""
    diffs = [x - y for x, y in zip(a, b)]
    med = statistics.median(diffs)
    mad = statistics.median([abs(d - med) for d in diffs])
    stderr = 1.4826 * mad * 1.2533 / math.sqrt(len(diffs))
    return {"median": med, "stderr": stderr, "resolved": abs(med) > 2 * stderr}


def overhead(run_call: list[float], engine_call: list[float]) -> dict:
    """Per-run overhead from the paired samples of one engine (each round times a run call and
    an engine call back to back): the median of the differences, in microseconds, with the
    standard error of that median. `resolved` is False when the overhead is within two standard
    errors of zero, that is below the noise of the model's run time (measure it on the
    single-Add model instead)."""
    d = paired_difference(run_call, engine_call)
    return {"run_call_us": statistics.median(run_call) * 1e6, "engine_call_us": statistics.median(engine_call) * 1e6,
            "overhead_us": d["median"] * 1e6, "stderr_us": d["stderr"] * 1e6, "resolved": d["resolved"]}


def default_threads() -> int:
    """All cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    from ..toolchain import targets, uarch
    tuned = targets.default_target()
    info = {"cpu": cpu, "cores": os.cpu_count(), "arch": platform.machine(), "isa": tuned.name,
            "uarch": tuned.tune, "isa_flags": uarch.isa_flags(targets.host_features()),
            "python": platform.python_version()}
    from ..version import __version__
    info["om2gen"] = __version__
    try:
        import onnxruntime
        info["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        info["onnxruntime"] = None
    info["openvino"] = bench_openvino.version()
    return info


# ---- inputs -----------------------------------------------------------------------------------

def random_feeds(inputs, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random data of each input's dtype and shape: standard normal floats, integers in
    [0, 2) (valid indices and masks for any model), random booleans."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for t in inputs:
        dtype, shape = np.dtype(t.dtype), tuple(t.shape)
        if -1 in shape:   # a classic .om's unbounded dim: no largest shape to run at
            raise InputError(f"input {t.name!r} has shape {list(t.shape)} with an unbounded dim: pass --input "
                             f"{t.name}=FILE.npy at the shape to measure")
        if dtype.kind == "f":
            feeds[t.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            feeds[t.name] = rng.integers(0, 2, shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[t.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            raise InputError(f"input {t.name!r}: no random data for dtype {dtype}; pass --input {t.name}=FILE.npy")
    return feeds


def model_format(path) -> str:
    """"OM2" or "OM", by content as om2gen.load decides."""
    from ..runtime.model import detect_format
    return detect_format(path).upper()


# ---- the two engines --------------------------------------------------------------------------

def _ort():
    try:
        import onnxruntime
    except ImportError:
        raise Om2Error("comparing with ONNX Runtime (--onnx) needs the onnxruntime package: "
                       "pip install onnxruntime") from None
    return onnxruntime


def ort_session(onnx_path, threads: int):
    """An ORT InferenceSession as the issue specifies: CPU EP, default optimisations, intra-op
    threads = threads."""
    ort = _ort()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    try:
        return ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises its own exception types (Fail, InvalidGraph, NoSuchFile, ...)
        raise ModelError(f"{onnx_path}: ONNX Runtime cannot load it ({str(exc).strip()[:300]})") from None


def ort_feeds(session, feeds: dict, onnx_path) -> dict:
    """The feeds ORT's graph takes, by name; an input the om2gen model froze at compile time
    (--input-value) must be given explicitly."""
    out = {}
    for i in session.get_inputs():
        if i.name not in feeds:
            raise InputError(f"{onnx_path}: ONNX Runtime needs input {i.name!r}, which the compiled model does not "
                             f"take (frozen at compile time?); pass it with --input {i.name}=FILE.npy")
        out[i.name] = feeds[i.name]
    return out


def _ort_run(session, feeds):
    try:
        return session.run(None, feeds)
    except Exception as exc:
        raise RuntimeFailure(f"ONNX Runtime failed to run the model ({str(exc).strip()[:300]})") from None


def ort_engine_call(session, feeds):
    """session.run_with_iobinding on inputs and outputs bound once, as CPU OrtValues (session.run
    for a model whose declared output shapes its results contradict)."""
    ort = _ort()
    binding = session.io_binding()
    keep = []
    for name, arr in feeds.items():
        arr = np.ascontiguousarray(arr)
        keep.append(arr)
        binding.bind_cpu_input(name, arr)
    outputs = _ort_run(session, feeds)
    if not all(_fits_declared(meta.shape, arr.shape) for meta, arr in zip(session.get_outputs(), outputs)):
        # run_with_iobinding refuses an output whose shape contradicts the model's declared one
        # (ddddocr_old declares [1, ?] for a [20, 1, 8210] output), where session.run only warns
        def plain():
            session.run(None, feeds)
        return plain
    for meta, arr in zip(session.get_outputs(), outputs):
        value = ort.OrtValue.ortvalue_from_numpy(np.empty_like(arr))
        keep.append(value)
        binding.bind_ortvalue_output(meta.name, value)

    def call():
        session.run_with_iobinding(binding)
    call.keep = keep
    return call


def _fits_declared(declared, shape) -> bool:
    """Whether a run's output shape agrees with ORT's declared one (a str or None dim: any)."""
    if declared is None:
        return True
    return len(declared) == len(shape) and all(not isinstance(d, int) or d == n for d, n in zip(declared, shape))


def om2_engine_call(model, feeds):
    """Model.execute_raw on inputs and outputs allocated once, passed by address (an output whose
    size the data decides at its largest: slanet_plus's steps)."""
    keep = [np.ascontiguousarray(feeds[t.name]) for t in model.inputs]
    outs = [np.empty(t.max_shape or t.shape, t.dtype) for t in model.outputs]
    in_ptrs = [a.ctypes.data for a in keep]
    out_ptrs = [a.ctypes.data for a in outs]

    def call():
        model.execute_raw(in_ptrs, out_ptrs)
    call.keep = (keep, outs)
    return call


def _load_om2(path, threads):
    from .. import load
    return load(path, threads=threads)


# ---- measuring --------------------------------------------------------------------------------

def _timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


# ONNX Runtime's intra-op workers keep spinning for tens of milliseconds after a run (measured
# here: MobileNetV2 on 2 threads took 11.6 ms in om2gen right after an ORT run, 5.3 ms alone,
# 6.3 ms 50 ms later), holding the cores the other engine's pool needs. With more than one
# thread, each engine's turn starts after this idle gap, so neither is timed against the
# other's leftover spinning.
IDLE_GAP_SECONDS = 0.1


def interleave(blocks: dict, rounds: int, max_seconds: float | None = None, min_rounds: int = 5,
               idle_gap: float = 0.0) -> dict:
    """Runs rounds of blocks. blocks: {engine: {series: callable}}; in a round every engine (in
    alternating order) waits idle_gap seconds, makes one untimed settling call, then one timed
    call of each of its series. Returns {engine: {series: [seconds, ...]}}. Stops early once
    max_seconds have passed and at least min_rounds are done."""
    samples = {e: {s: [] for s in series} for e, series in blocks.items()}
    engines = list(blocks)
    start = time.perf_counter()
    for r in range(rounds):
        for engine in (engines if r % 2 == 0 else engines[::-1]):
            series = blocks[engine]
            if idle_gap:
                time.sleep(idle_gap)
            next(iter(series.values()))()
            for name, fn in series.items():
                samples[engine][name].append(_timed(fn)[0])
        if max_seconds is not None and r + 1 >= min_rounds and time.perf_counter() - start > max_seconds:
            break
    return samples


def measure_loads(model_path, onnx_path, threads: int, loads: int, max_seconds: float | None = None,
                  om2: bool = True) -> dict:
    """Load time: om2gen.load until the model is ready to run (unless om2 is False), and ORT
    session creation (if onnx_path), in alternation. The first load of each (imports, one-time
    process setup) is kept apart."""
    def om2_load():
        dt, m = _timed(lambda: _load_om2(model_path, threads))
        m.close()
        return dt

    def ort_load():
        dt, s = _timed(lambda: ort_session(onnx_path, threads))
        del s
        gc.collect()
        return dt

    fns = {"om2gen": om2_load} if om2 else {}
    if onnx_path is not None:
        fns["onnxruntime"] = ort_load
    first = {k: f() for k, f in fns.items()}
    times = {k: [] for k in fns}
    start = time.perf_counter()
    for i in range(loads):
        for k in (list(fns) if i % 2 == 0 else list(fns)[::-1]):
            times[k].append(fns[k]())
        if max_seconds is not None and i + 1 >= 3 and time.perf_counter() - start > max_seconds:
            break
    out = {}
    for k in fns:
        out[k] = summary(times[k])
        out[k]["first_ms"] = first[k] * 1e3
    return out


def measure(model_path, onnx_path=None, *, threads: int | None = None, runs: int = 50, warmup: int = 5,
            loads: int = 10, seed: int = 0, feeds: dict | None = None, max_seconds: float | None = None,
            switch: tuple[int, int] | None = None, shapes: list[dict] | None = None, openvino: bool = True,
            fresh: int = 3) -> dict:
    """Everything `om2gen bench` prints, as a dict (times in milliseconds).

    feeds: {name: array} overriding the random inputs (and giving ORT-only inputs);
    max_seconds: a time budget for each of the load and run measurements (at least 3 loads and
    5 runs are always made). A model with gears is measured at every gear (`gears`: one entry
    per gear with the figures a static model has at the top level) and for the cost of a gear
    switch (`switch`) between the gears `switch` names (default: its first two). A dynamic-shape
    model is measured at each of `shapes` ({input: shape} each; default: its largest), with the
    first run at each (`shapes` in the result: bench_shapes.py). With onnx_path, OpenVINO runs too
    (bench_openvino.py) unless `openvino` is False; `openvino` in the result says whether it was
    measured, and why not. fresh: the number of fresh processes per engine that time the first
    load and the first run of a static model (`fresh`: bench_fresh.py; 0: none)."""
    threads = threads or default_threads()
    if threads < 1 or runs < 1 or warmup < 0 or loads < 1:
        raise InputError(f"bench needs threads >= 1, runs >= 1, warmup >= 0, loads >= 1 "
                         f"(got {threads}, {runs}, {warmup}, {loads})")
    if onnx_path is not None and not Path(onnx_path).is_file():
        raise InputError(f"--onnx {onnx_path}: no such file")
    result = {"model": str(model_path), "format": model_format(model_path),
              "onnx": str(onnx_path) if onnx_path is not None else None, "threads": threads, "runs": runs,
              "warmup": warmup, "loads": loads, "seed": seed, "machine": machine_info()}
    result["load"] = measure_loads(model_path, onnx_path, threads, loads, max_seconds)

    model = _load_om2(model_path, threads)
    session = ov = None
    try:
        given = dict(feeds or {})
        # which kernel set ran (runtime/isa.py: the best this CPU supports, or $OM2GEN_ISA's)
        result["kernel_set"], result["kernel_sets"] = model.isa, list(model.kernel_sets)
        if onnx_path is not None:
            session = ort_session(onnx_path, threads)
            ov = bench_openvino.Engine(onnx_path, threads, enabled=openvino)
        result["inputs"] = [{"name": t.name, "dtype": str(np.dtype(t.dtype)), "shape": list(t.shape),
                             "data": "given" if t.name in given else f"random, seed {seed}"} for t in model.inputs]
        timing = {"runs": runs, "warmup": warmup, "max_seconds": max_seconds,
                  "idle_gap": IDLE_GAP_SECONDS if threads > 1 and session is not None else 0.0}
        if bench_shapes.is_dynamic(model):
            result["shapes"] = [measure_shape(model, session, onnx_path, given, seed, timing, s, ov)
                                for s in bench_shapes.shape_sets(model, shapes or [], given)]
        elif shapes:
            fixed = ", ".join(f"{t.name}{list(t.shape)}" for t in model.inputs)
            raise InputError(f"--input-shape: {model_path} runs at one shape per input ({fixed}); --input-shape "
                             "picks the run shapes of a dynamic-shape model")
        elif model._gears is None:
            f = run_feeds(model.inputs, given, seed)
            result.update(run_figures(_timed_blocks(_blocks(model, session, onnx_path, f, given, ov=ov), **timing)))
            if fresh:
                time.sleep(IDLE_GAP_SECONDS)   # this process's ORT workers go idle first
                o_feeds = ort_feeds(session, {**f, **given}, onnx_path) if session is not None else None
                result["fresh"] = bench_fresh.measure_fresh(model_path, f, threads, fresh, onnx_path, o_feeds)
        else:
            result.update(measure_gears(model, session, onnx_path, given, seed, timing, switch, ov))
        if ov is not None:
            result["openvino"] = ov.info()
    finally:
        model.close()
        del session, ov
    if onnx_path is not None:
        load_ratio = report.ratio(result["load"]["om2gen"]["median_ms"], result["load"]["onnxruntime"]["median_ms"])
        result["ratio"] = {"load": load_ratio, **result.get("ratio", {})}
    return result


def measure_shape(model, session, onnx_path, given: dict, seed: int, timing: dict, shapes: dict, ov=None) -> dict:
    """A dynamic-shape model at one run shape: each engine's first run at it, then the run
    figures with the engines' runs interleaved."""
    f = run_feeds(bench_shapes.inputs_at(model, shapes), given, seed)
    blocks = _blocks(model, session, onnx_path, f, given, engine_calls=False, ov=ov)
    first = bench_shapes.first_runs(blocks)
    return {"shapes": {n: list(s) for n, s in shapes.items()}, "first_run_ms": first,
            **run_figures(_timed_blocks(blocks, **timing))}


def run_feeds(inputs, given: dict, seed: int) -> dict:
    """The given arrays, and random ones (random_feeds) for the other inputs."""
    out = random_feeds([t for t in inputs if t.name not in given], seed)
    out.update({t.name: given[t.name] for t in inputs if t.name in given})
    return out


def _check_given(model, session, given: dict) -> None:
    unknown = set(given) - {t.name for t in model.inputs} - {i.name for i in (session.get_inputs() if session else [])}
    if unknown:
        raise InputError(f"--input {', '.join(sorted(unknown))}: neither model has such an input; the compiled "
                         f"model's inputs are {', '.join(t.name for t in model.inputs)}")


def _blocks(model, session, onnx_path, om2_feeds: dict, given: dict, engine_calls: bool = True, ov=None) -> dict:
    """The timed calls of one input shape: per engine, its run call (and its engine call).
    OpenVINO (ov, a bench_openvino.Engine) runs on ORT's feeds, when it can."""
    o_feeds = ort_feeds(session, {**om2_feeds, **given}, onnx_path) if session is not None else None
    _check_given(model, session, given)
    blocks = {"om2gen": {"run": lambda: model.run(om2_feeds)}}
    if engine_calls:
        blocks["om2gen"]["engine"] = om2_engine_call(model, om2_feeds)
    if session is not None:
        blocks["onnxruntime"] = {"run": lambda: session.run(None, o_feeds)}
        if engine_calls:
            blocks["onnxruntime"]["engine"] = ort_engine_call(session, o_feeds)
    ov_calls = ov.calls(o_feeds, engine_calls) if ov is not None else None
    if ov_calls is not None:
        blocks["openvino"] = ov_calls
    return blocks


def _timed_blocks(blocks: dict, runs: int, warmup: int, max_seconds, idle_gap: float) -> dict:
    """Warm-up calls of every series, then `interleave`."""
    for _ in range(warmup):
        for series in blocks.values():
            for fn in series.values():
                fn()
    return interleave(blocks, runs, max_seconds, idle_gap=idle_gap if len(blocks) > 1 else 0.0)


def run_figures(samples: dict) -> dict:
    """run (median, p90, min), per-run overhead (when the engine calls were timed) and the
    om2gen / ORT ratios of one shape's samples; with OpenVINO measured, also OpenVINO / ORT
    (openvino_run_*) and om2gen / OpenVINO (run_*_vs_openvino)."""
    out = {"run": {e: summary(s["run"]) for e, s in samples.items()}}
    if "engine" in samples["om2gen"]:
        out["overhead"] = {e: overhead(s["run"], s["engine"]) for e, s in samples.items()}
    if "onnxruntime" in samples:
        run = out["run"]
        out["ratio"] = {f"run_{k}": report.ratio(run["om2gen"][f"{k}_ms"], run["onnxruntime"][f"{k}_ms"])
                        for k in ("median", "p90", "min")}
        if "overhead" in out:
            ov = out["overhead"]
            out["ratio"]["overhead"] = report.ratio(*(o["overhead_us"] if o["resolved"] else None
                                                      for o in (ov["om2gen"], ov["onnxruntime"])))
        if "openvino" in samples:
            for k in ("median", "p90", "min"):
                ms = {e: run[e][f"{k}_ms"] for e in run}
                out["ratio"][f"openvino_run_{k}"] = report.ratio(ms["openvino"], ms["onnxruntime"])
                out["ratio"][f"run_{k}_vs_openvino"] = report.ratio(ms["om2gen"], ms["openvino"])
    return out


# ---- models with gears ------------------------------------------------------------------------

def gear_feeds(model, gear: int, given: dict, seed: int) -> dict:
    """Inputs at one gear's shapes: the given arrays, random data for the others."""
    shapes = model.gears[gear]
    return run_feeds([SimpleNamespace(name=t.name, dtype=t.dtype, shape=shapes[t.name]) for t in model.inputs],
                     given, seed)


def _gears_given_inputs_fit(model, given: dict) -> list[int]:
    """The gears whose shapes the given arrays of dynamic inputs have (all gears if none is given)."""
    dynamic = [t.name for t in model.inputs if -1 in t.shape and t.name in given]
    fit = [i for i, g in enumerate(model.gears) if all(tuple(np.shape(given[n])) == g[n] for n in dynamic)]
    if not fit:
        raise InputError(f"--input {', '.join(f'{n}{list(np.shape(given[n]))}' for n in dynamic)}: no gear of the "
                         f"model has these shapes; its gears are {model._gears.listing()}")
    return fit


def measure_gears(model, session, onnx_path, given: dict, seed: int, timing: dict,
                  switch: tuple[int, int] | None = None, ov=None) -> dict:
    """A model with gears: run figures at every gear (that the given inputs fit), each gear's
    runs interleaved with ONNX Runtime's (and OpenVINO's) at the same shapes, then the gear
    switch (om2gen and ORT)."""
    g = model._gears
    measured = _gears_given_inputs_fit(model, given)
    dynamic = g.dynamic
    out = {"gear_type": gears_mod.TYPE_NAMES[g.dynamic_type], "gears": []}
    for i in measured:
        f = gear_feeds(model, i, given, seed)
        samples = _timed_blocks(_blocks(model, session, onnx_path, f, given, engine_calls=False, ov=ov), **timing)
        out["gears"].append({"gear": i, "shapes": {n: list(model.gears[i][n]) for n in dynamic},
                             **run_figures(samples)})
    if switch is None and len(measured) >= 2:
        switch = (measured[0], measured[1])
    if switch is not None:
        a, b = switch
        for k in (a, b):
            if k not in measured:
                raise InputError(f"--switch {a},{b}: gear {k} is not among the measured gears "
                                 f"({', '.join(map(str, measured))})")
        if a == b:
            raise InputError(f"--switch {a},{b}: a switch needs two different gears")
        fa, fb = gear_feeds(model, a, given, seed), gear_feeds(model, b, given, seed)
        calls = {"om2gen": (lambda: model.run(fa), lambda: model.run(fb))}
        if session is not None:
            oa, ob = (ort_feeds(session, {**f, **given}, onnx_path) for f in (fa, fb))
            calls["onnxruntime"] = (lambda: session.run(None, oa), lambda: session.run(None, ob))
        # a round times 8 runs per engine (SWITCH_CYCLE): runs / 4 rounds make 2 x runs
        rounds = max(5, math.ceil(timing["runs"] / 4))
        out["switch"] = {"gears": [a, b], **measure_switch(calls, rounds, timing["max_seconds"],
                                                           timing["idle_gap"] if len(calls) > 1 else 0.0)}
    return out


# Each round of the gear-switch measurement runs, after one untimed run of the first gear, the
# cycle A B B A twice: every run of the cycle follows either the other gear (a switch) or its
# own (a repeat), and each kind sits at two positions of the round.
SWITCH_CYCLE = "ABBAABBA"


def measure_switch(calls: dict, rounds: int, max_seconds: float | None = None, idle_gap: float = 0.0,
                   min_rounds: int = 5) -> dict:
    """The cost of a gear switch between consecutive runs. calls: {engine: (run gear A, run gear
    B)}. Per engine and gear: the run time right after the same gear (repeat) and right after
    the other gear (switched), and the switch cost, the median of the paired differences
    (switched - repeat, within a round) with its standard error. The engines alternate by
    round, after idle_gap seconds each."""
    engines = list(calls)
    samples = {e: {k: [] for k in ("A_repeat", "A_switched", "B_repeat", "B_switched")} for e in engines}
    start = time.perf_counter()
    done = 0
    for r in range(rounds):
        for e in (engines if r % 2 == 0 else engines[::-1]):
            run = dict(zip("AB", calls[e]))
            if idle_gap:
                time.sleep(idle_gap)
            run["A"]()
            last = "A"
            for gear in SWITCH_CYCLE:
                samples[e][f"{gear}_{'repeat' if gear == last else 'switched'}"].append(_timed(run[gear])[0])
                last = gear
        done = r + 1
        if max_seconds is not None and done >= min_rounds and time.perf_counter() - start > max_seconds:
            break
    out = {"rounds": done}
    for e in engines:
        s = samples[e]
        per_gear = []
        for gear in "AB":
            # two of each kind per round: pair the k-th repeat with the k-th switched run
            d = paired_difference(s[f"{gear}_switched"], s[f"{gear}_repeat"])
            per_gear.append({"repeat": summary(s[f"{gear}_repeat"]), "switched": summary(s[f"{gear}_switched"]),
                             "cost_ms": d["median"] * 1e3, "stderr_ms": d["stderr"] * 1e3,
                             "resolved": d["resolved"]})
        out[e] = per_gear
    return out


# ---- load phases ------------------------------------------------------------------------------

def measure_phases(paths, loads: int = DEFAULT_PHASE_LOADS, threads: int | None = None) -> dict:
    """Model.load_phases of each model over `loads` loads (after one untimed load each), the
    loads of the models alternating. Per model: the median seconds of each stage (in load
    order), the median sum of the stages and the median wall time of om2gen.load."""
    threads = threads or default_threads()
    if loads < 1:
        raise InputError(f"--loads must be >= 1, got {loads}")

    def one(path):
        wall, m = _timed(lambda: _load_om2(path, threads))
        try:
            phases = getattr(m, "load_phases", None)
            if phases is None:
                raise RuntimeFailure(f"{path}: this om2gen's executor does not record load phases "
                                     "(Model.load_phases); update om2gen")
            return wall, [(str(name), float(sec)) for name, sec in phases]
        finally:
            m.close()

    for p in paths:
        one(p)
    records = {str(p): [] for p in paths}
    for i in range(loads):
        for p in (paths if i % 2 == 0 else paths[::-1]):
            records[str(p)].append(one(p))
    out = {"threads": threads, "loads": loads, "models": []}
    for p in paths:
        recs = records[str(p)]
        order = [name for name, _ in recs[0][1]]
        per_stage = {name: [] for name in order}
        for _, phases in recs:
            for name, sec in phases:
                per_stage.setdefault(name, []).append(sec)
        out["models"].append({
            "model": str(p), "label": Path(p).name, "format": model_format(p),
            "stages": [{"stage": name, "median_ms": statistics.median(v) * 1e3} for name, v in per_stage.items()],
            "total_ms": statistics.median([sum(sec for _, sec in ph) for _, ph in recs]) * 1e3,
            "wall_ms": statistics.median([w for w, _ in recs]) * 1e3,
        })
    return out


# ---- the command ------------------------------------------------------------------------------

def _int_at_least(low: int):
    def parse(text: str) -> int:
        import argparse
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"{text!r}: must be >= {low}")
        return v
    return parse


def add_parser(sub) -> None:
    """Registers `om2gen bench` on the CLI's subparsers."""
    b = sub.add_parser("bench", help="time loading and running a model, next to ONNX Runtime",
                       description="Load time, run latency (median, p90, min) and per-run overhead of a compiled "
                                   "model (.om2 or .om), next to ONNX Runtime with --onnx; --phases breaks "
                                   "loading into its stages.")
    b.add_argument("model", nargs="+", help="the .om2 archive or .om file (two with --phases: side by side)")
    b.add_argument("--onnx", help="the source .onnx: also time ONNX Runtime (CPU EP, same thread count)")
    b.add_argument("--threads", type=_int_at_least(1), help="worker threads for both engines (default: all cores)")
    b.add_argument("--runs", type=_int_at_least(1), default=50, help="timed runs per engine (default: 50)")
    b.add_argument("--warmup", type=_int_at_least(0), default=5, help="untimed runs per engine first (default: 5)")
    b.add_argument("--loads", type=_int_at_least(1), help="timed loads per engine (default: 10; with --phases 20)")
    b.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    b.add_argument("--input", action="append", type=parsing.input_file_arg, metavar="NAME=FILE.npy",
                   help="use this data for an input instead of random data (repeatable)")
    b.add_argument("--phases", action="store_true", help="break loading into stages (Model.load_phases)")
    b.add_argument("--compare", metavar="MODEL", help="with --phases: a second model (e.g. the .om of the same "
                                                      "model) shown side by side")
    b.add_argument("--switch", type=_gear_pair, metavar="I,J",
                   help="a model with gears: the two gears (indices into Model.gears) whose switch is timed "
                        "(default: the first two)")
    b.add_argument("--input-shape", action="append", type=parsing.shape_arg, metavar="NAME:DIMS[;NAME:DIMS]",
                   help="a dynamic-shape model: one run shape to time, in ATC's syntax (repeatable: one use per "
                        "shape; default: its largest)")
    b.add_argument("--no-openvino", action="store_true",
                   help="with --onnx: do not also time OpenVINO (measured when it is installed)")
    b.add_argument("--fresh", type=_int_at_least(0), default=3,
                   help="fresh processes per engine timing the first load and first run (default: 3; 0: none)")
    b.add_argument("--json", action="store_true", help="machine-readable output")
    b.set_defaults(func=cmd_bench)


def _gear_pair(text: str) -> tuple[int, int]:
    import argparse
    try:
        a, b = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected two gear indices, I,J (e.g. 0,3)") from None
    if a < 0 or b < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: gear indices are >= 0")
    return a, b


def _read_inputs(pairs) -> dict:
    feeds = {}
    for name, path in pairs or []:
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputError(f"--input {name}={path}: cannot read a .npy array ({exc})") from None
    return feeds


def cmd_bench(args) -> int:
    models = list(args.model) + ([args.compare] if args.compare else [])
    if args.phases:
        if len(models) > 2:
            raise InputError(f"--phases compares at most two models, got {len(models)}")
        result = measure_phases(models, args.loads or DEFAULT_PHASE_LOADS, args.threads)
        ort_ms = None
        if args.onnx:
            ort_ms = measure_loads(models[0], args.onnx, result["threads"], args.loads or DEFAULT_PHASE_LOADS,
                                   om2=False)["onnxruntime"]["median_ms"]
            result["onnxruntime_session_ms"] = ort_ms
        print(json.dumps(result, indent=1) if args.json else report.render_phases(result, ort_ms))
        return 0
    if len(models) != 1:
        raise InputError("bench takes one model; two (or --compare) only with --phases")
    result = measure(models[0], args.onnx, threads=args.threads, runs=args.runs, warmup=args.warmup,
                     loads=args.loads or 10, seed=args.seed, feeds=_read_inputs(args.input), switch=args.switch,
                     shapes=[parsing.merged([group], "--input-shape") for group in args.input_shape or []],
                     openvino=not args.no_openvino, fresh=args.fresh)
    print(json.dumps(result, indent=1) if args.json else report.render_text(result))
    sys.stdout.flush()
    return 0
