"""Peak memory while running: om2gen vs ONNX Runtime, each in a fresh process.

A child process imports both engines (so the baseline is the same), records its peak resident
set (VmHWM), loads one engine's model, runs it a few times and records the peak again; the
difference is what loading and running that model cost in memory at its highest. The two
engines never share a process, so neither sees the other's pages.

    python benchmarks/peak_memory.py model.om2 model.onnx [--threads 2] [--runs 5]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = r"""
import json, sys
import numpy as np, onnxruntime as ort, om2gen

def hwm_kb():   # VmHWM: this process's peak resident set (unlike ru_maxrss, not inherited over fork+exec)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
engine, model, onnx_path, threads, runs, feeds_path = sys.argv[1:7]
threads, runs = int(threads), int(runs)
feeds = dict(np.load(feeds_path))
base = hwm_kb()
if engine == "om2gen":
    m = om2gen.load(model, threads=threads)
    for _ in range(runs):
        m.run(feeds)
else:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    s = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    for _ in range(runs):
        s.run(None, feeds)
peak = hwm_kb()
print(json.dumps({"base_mb": base / 1024, "peak_mb": peak / 1024, "delta_mb": (peak - base) / 1024}))
"""


def measure(model, onnx_path, threads: int = 2, runs: int = 5, feeds: dict | None = None) -> dict:
    """{engine: {base_mb, peak_mb, delta_mb}} for "om2gen" and "onnxruntime", and their ratio.
    feeds: the inputs (default: seeded random ones for the model's inputs)."""
    import numpy as np

    import om2gen
    from om2gen.cli import bench
    if feeds is None:
        with om2gen.load(model) as m:
            feeds = bench.random_feeds(m.inputs)
    out = {}
    with tempfile.TemporaryDirectory(prefix="om2gen-peak-") as tmp:
        feeds_path = str(Path(tmp) / "feeds.npz")
        np.savez(feeds_path, **feeds)
        for engine in ("om2gen", "onnxruntime"):
            proc = subprocess.run([sys.executable, "-c", _CHILD, engine, str(model), str(onnx_path), str(threads),
                                   str(runs), feeds_path], capture_output=True, text=True, timeout=900)
            if proc.returncode != 0:
                raise RuntimeError(f"{engine} child failed: {proc.stderr.strip()[-400:]}")
            out[engine] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["ratio"] = out["om2gen"]["delta_mb"] / max(out["onnxruntime"]["delta_mb"], 1e-9)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="the .om2 (or .om) file")
    p.add_argument("onnx", help="the .onnx it was compiled from")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args(argv)
    r = measure(Path(args.model), Path(args.onnx), args.threads, args.runs)
    for engine in ("om2gen", "onnxruntime"):
        e = r[engine]
        print(f"{engine:12s} peak {e['peak_mb']:8.1f} MB  (+{e['delta_mb']:.1f} MB over the {e['base_mb']:.1f} MB baseline)")
    print(f"ratio om2gen / ORT (increase over baseline): {r['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
