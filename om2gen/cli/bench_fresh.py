"""Load in a fresh process: what a CLI call, a new server replica or a serverless worker pays
before its first result (issue 16). Each sample is a new Python process (this interpreter and
environment) that imports the engine, then times loading the model and then its first run; the
engines alternate by process, one untimed process each goes first (the file and the engine's
libraries in the page cache, as on a server that has run before), and the figures are medians.

om2gen: `import om2gen` (numpy and the executor; the compiler is imported only by
om2gen.compile), then om2gen.load, then Model.run. ONNX Runtime: `import onnxruntime`, then an
InferenceSession as bench.ort_session makes it, then session.run. Both get the same inputs,
read from an .npz after the load is timed.

benchmarks/bench_load.py and benchmarks/suite.py call `measure_fresh` directly.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..errors import RuntimeFailure

FIGURES = ("import", "load", "first_run", "load_first_run")

_OM2GEN = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import om2gen
t1 = time.perf_counter()
m = om2gen.load(sys.argv[1], threads=int(sys.argv[3]))
t2 = time.perf_counter()
feeds = dict(np.load(sys.argv[2]))
t3 = time.perf_counter()
m.run(feeds)
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "first_run": t4 - t3}))
"""

_ORT = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import onnxruntime as ort
t1 = time.perf_counter()
opts = ort.SessionOptions()
opts.intra_op_num_threads = int(sys.argv[3])
opts.log_severity_level = 3
s = ort.InferenceSession(sys.argv[1], opts, providers=["CPUExecutionProvider"])
t2 = time.perf_counter()
feeds = dict(np.load(sys.argv[2]))
t3 = time.perf_counter()
s.run(None, feeds)
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "first_run": t4 - t3}))
"""


def _env() -> dict:
    """This environment, with the om2gen this process runs first on the path (a checkout that is
    not installed loads the same code in the child)."""
    here = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": here + (os.pathsep + path if path else "")}


def _one(script: str, model, feeds_file, threads: int, what: str) -> dict:
    try:
        proc = subprocess.run([sys.executable, "-c", script, str(model), str(feeds_file), str(threads)],
                              capture_output=True, text=True, env=_env(), timeout=600)
    except subprocess.TimeoutExpired:
        raise RuntimeFailure(f"a fresh process loading {model} with {what} did not finish in 600 s") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeFailure(f"a fresh process loading {model} with {what} failed (exit {proc.returncode}): "
                             + " | ".join(tail))
    t = json.loads(proc.stdout.strip().splitlines()[-1])
    t["load_first_run"] = t["load"] + t["first_run"]
    return t


def measure_fresh(model_path, feeds: dict, threads: int, processes: int = 3, onnx_path=None,
                  ort_feeds: dict | None = None) -> dict:
    """Medians over `processes` fresh processes per engine, in ms: {engine: {figure_ms: ...,
    "n": processes}} with the FIGURES import, load, first_run and load_first_run (the sum in
    each process); ONNX Runtime too when onnx_path is given (fed ort_feeds, default feeds)."""
    with tempfile.TemporaryDirectory(prefix="om2gen-bench-fresh-") as tmp:
        engines = {"om2gen": (_OM2GEN, model_path, Path(tmp) / "om2gen.npz", feeds)}
        if onnx_path is not None:
            engines["onnxruntime"] = (_ORT, onnx_path, Path(tmp) / "ort.npz", feeds if ort_feeds is None else ort_feeds)
        for _, _, npz, f in engines.values():
            np.savez(npz, **f)
        for name, (script, model, npz, _) in engines.items():   # untimed: the page cache
            _one(script, model, npz, threads, name)
        samples = {name: [] for name in engines}
        for i in range(processes):
            for name in (list(engines) if i % 2 == 0 else list(engines)[::-1]):
                script, model, npz, _ = engines[name]
                samples[name].append(_one(script, model, npz, threads, name))
    return {name: {**{f"{k}_ms": statistics.median(s[k] for s in runs) * 1e3 for k in FIGURES}, "n": len(runs)}
            for name, runs in samples.items()}
