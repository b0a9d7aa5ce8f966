"""Where a model's run time goes: every kernel task of a compiled model timed on its own.

    python benchmarks/profile_tasks.py MODEL.onnx|REAL_MODEL_NAME [--runs K] [--top N] [--no-fusion]

Compiles the model with --debug (for its task list), loads every kernel binary with dlopen, lays
out inputs (random), constants (the archive's blob), outputs and the workspace as the model
would, then runs the tasks in order, each one K times over all its blocks in this thread, and
prints the median time per task and per op type. Control and custom-op tasks are skipped. One
thread, no runtime around the kernels: a profile of the kernels, not a run of the model.
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import json
import os
import statistics
import struct
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "samples" / "real_models"))

import om2gen  # noqa: E402
from om2gen import pipeline  # noqa: E402
from om2gen.formats.om2 import layout  # noqa: E402
from om2gen.ir import dtypes  # noqa: E402

ALIGN = 64


def _buffer(nbytes: int) -> np.ndarray:
    raw = np.zeros(nbytes + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start:start + nbytes]


def compile_debug(source: str, out: Path, fused: bool) -> tuple[Path, dict]:
    """(archive, feeds) of an .onnx file or a real-model name (samples/real_models/catalog.py)."""
    os.environ[pipeline.FUSION_ENV] = "1" if fused else "0"
    if Path(source).is_file():
        om2gen.compile(source, out, debug=True)
        return out, {}
    import catalog
    m = catalog.BY_NAME[source]
    om2gen.compile(catalog.fetch(m), out, input_shapes=m.input_shapes, input_values=m.input_values, debug=True)
    return out, catalog.inputs_for(m)


def profile(archive: Path, feeds: dict, runs: int) -> list[dict]:
    with zipfile.ZipFile(archive) as z:
        tasks = json.loads(z.read(layout.task_info_json(0)))["tasks"]
        meta = json.loads(z.read(layout.model_meta(0)))
        blob = z.read(layout.constants_blob(0))
        bins = {n.rsplit("/", 1)[1]: z.read(n) for n in z.namelist() if "/kernels_" in n and n.endswith(".o")}
    rng = np.random.default_rng(0)
    inputs = []
    for t in meta["inputs"]:
        arr = feeds.get(t["name"])
        if arr is None:
            arr = rng.standard_normal(t["shape"]).astype(dtypes.BY_NAME[t["dtype"]].np)
        buf = _buffer(max(1, arr.nbytes))
        buf[:arr.nbytes] = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
        inputs.append(buf)
    outputs = [_buffer(max(1, t["size"])) for t in meta["outputs"]]
    consts = _buffer(max(1, len(blob)))
    consts[:len(blob)] = np.frombuffer(blob, np.uint8)
    work = _buffer(max(1, meta["work_size"]))
    bases = {"INPUT": [b.ctypes.data for b in inputs], "OUTPUT": [b.ctypes.data for b in outputs],
             "CONSTANT": [consts.ctypes.data], "WORKSPACE": [work.ctypes.data]}
    entry_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32)
    results = []
    with tempfile.TemporaryDirectory(prefix="om2gen-profile-") as tmp:
        libs, keep = {}, []
        for t in tasks:
            if not t["kernel"] or f"{t['kernel']}.o" not in bins:   # (a dynamic model's tiling kernels: skipped)
                continue
            if t["kernel"] not in libs:
                path = Path(tmp) / f"{t['kernel']}.so"
                path.write_bytes(bins[f"{t['kernel']}.o"])
                lib = ctypes.CDLL(str(path))
                keep.append(lib)
                libs[t["kernel"]] = entry_type((t["kernel"], lib))
            args = b"".join((bases[a["kind"]][a["index"]] + a["offset"]).to_bytes(8, "little") for a in t["args"])
            args += struct.pack(f"<{len(t['tiling'])}q", *(word for _, word in t["tiling"]))
            buf = ctypes.create_string_buffer(args, len(args))
            fn, blocks = libs[t["kernel"]], t["block_dim"]
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                for b in range(blocks):
                    fn(buf, b, blocks)
                times.append(time.perf_counter() - t0)
            results.append({"label": t["label"], "op_name": t["op_name"], "op_type": t["op_type"],
                            "kernel": t["kernel"], "ms": statistics.median(times) * 1e3, "blocks": blocks,
                            "shapes": _shapes(t), "gflop": _gflop(t)})
    return results


def _dims(desc: str) -> list[int]:
    """[1, 64, 56, 56] of "name: float32[1,64,56,56] (const)"."""
    inner = desc.rsplit("[", 1)[1].split("]")[0]
    # (a data-dependent dim is named by its count: 0)
    return [int(d) if d.strip().lstrip("-").isdigit() else 0 for d in inner.split(",") if d.strip()] if inner else []


def _shapes(task: dict) -> str:
    """input -> output shapes, and the kernel size of a Conv."""
    text = "x".join(map(str, _dims(task["inputs"][0]))) + " -> " + "x".join(map(str, _dims(task["outputs"][0])))
    attrs = task.get("attrs", "")
    for key in ("kernel_shape", "strides"):
        if f"{key}=" in attrs:
            text += f" {key[0]}" + attrs.split(f"{key}=", 1)[1].split("]")[0].strip("[").replace(", ", "x")
    return text


def _gflop(task: dict) -> float:
    """Multiply-adds x 2 of a Conv or FusedConv (from its input/output shapes and kernel), else 0."""
    if task["op_type"] not in ("Conv", "FusedConv") or "kernel_shape=" not in task.get("attrs", ""):
        return 0.0
    kernel = [int(v) for v in task["attrs"].split("kernel_shape=", 1)[1].split("]")[0].strip("[").split(",")]
    group = int(task["attrs"].split("group=", 1)[1].split()[0]) if "group=" in task["attrs"] else 1
    x, y = _dims(task["inputs"][0]), _dims(task["outputs"][0])
    taps = 1
    for k in kernel:
        taps *= k
    outs = 1
    for d in y:
        outs *= d
    return 2.0 * outs * taps * x[1] // group / 1e9


def report(results: list[dict], top: int) -> str:
    total = sum(r["ms"] for r in results)
    lines = [f"{len(results)} kernel tasks, {total:.3f} ms in all (one thread, kernels only)", "",
             "by op type:"]
    by_type = collections.defaultdict(lambda: [0.0, 0])
    for r in results:
        by_type[r["op_type"]][0] += r["ms"]
        by_type[r["op_type"]][1] += 1
    for op, (ms, n) in sorted(by_type.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"  {op:28} {n:4} tasks {ms:9.3f} ms {100 * ms / total:5.1f}%")
    lines += ["", f"top {top} tasks:"]
    for r in sorted(results, key=lambda r: -r["ms"])[:top]:
        rate = f"{r['gflop'] / r['ms'] * 1e3:6.1f} GF/s" if r["gflop"] else " " * 11
        lines.append(f"  {r['ms']:8.3f} ms {rate}  {r['label']:24} {r['kernel'][:24]:24} {r['blocks']:3} blk  "
                     f"{r['shapes']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="an .onnx file or a real-model name of samples/real_models/catalog.py")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-fusion", action="store_true", help="compile with OM2GEN_FUSION=0")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="om2gen-profile-") as tmp:
        archive, feeds = compile_debug(args.model, Path(tmp) / "m.om2", not args.no_fusion)
        print(report(profile(archive, feeds, args.runs), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
