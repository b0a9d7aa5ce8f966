"""Load time of small models, first and repeated: om2gen.load against ONNX Runtime's session
creation, in one process, the engines alternating; medians.

    python benchmarks/bench_load_small.py [--models 24] [--threads 2] [--collect]

`om2gen bench` loads one model again and again, and a process that loads the same bytes again
reuses what the first load verified and mapped (formats/om2/reader.py, runtime/libraries.py). This
also measures the other case: each of --models single-Add models (of different widths, so
different bytes and a different library each) loaded for the first time in the process, against
ORT's first session of each .onnx. --collect runs gc.collect() before every timed load of both
engines (cold caches, as after the collection `om2gen bench` makes after each ORT session).
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

import onnx
from onnx import TensorProto, helper

import om2gen
from om2gen.cli.bench import ort_session


def _add_model(width: int) -> onnx.ModelProto:
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, width]) for n in ("x", "y", "z")]
    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], f"add{width}", io[:2], io[2:])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _timed(make, collect: bool) -> float:
    if collect:
        gc.collect()
    t = time.perf_counter()
    obj = make()
    elapsed = time.perf_counter() - t
    if hasattr(obj, "close"):
        obj.close()
    return elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=int, default=24)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--collect", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pairs = []
        for width in range(8, 8 + args.models + 1):   # one extra: the untimed first load of each engine
            onnx_path, om2_path = Path(tmp, f"add{width}.onnx"), Path(tmp, f"add{width}.om2")
            onnx.save(_add_model(width), onnx_path)
            om2gen.compile(onnx_path, om2_path)
            pairs.append((str(onnx_path), om2_path))
        warm_onnx, warm_om2 = pairs.pop()
        _timed(lambda: ort_session(warm_onnx, args.threads), False)   # imports, one-time set-up
        _timed(lambda: om2gen.load(warm_om2, threads=args.threads), False)
        first = {"om2gen": [], "ORT": []}
        again = {"om2gen": [], "ORT": []}
        for i, (onnx_path, om2_path) in enumerate(pairs):
            loads = [("om2gen", lambda: om2gen.load(om2_path, threads=args.threads)),
                     ("ORT", lambda: ort_session(onnx_path, args.threads))]
            for engine, make in loads if i % 2 == 0 else loads[::-1]:
                first[engine].append(_timed(make, args.collect))
            for engine, make in loads if i % 2 else loads[::-1]:
                again[engine].append(_timed(make, args.collect))
    print(f"{args.models} single-Add models, {args.threads} thread(s), gc.collect() before each load: "
          f"{'yes' if args.collect else 'no'}; medians in ms")
    print(f"{'':28} {'om2gen':>8} {'ORT':>8} {'ratio':>6}")
    for label, times in (("first load of each model", first), ("the same model again", again)):
        om, ort = (statistics.median(times[e]) * 1e3 for e in ("om2gen", "ORT"))
        print(f"{label:28} {om:8.3f} {ort:8.3f} {om / ort:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
