"""Compile time, load time and run latency of a model next to ONNX Runtime, in one process.

    python benchmarks/bench_sample.py [model.onnx --input-shape NAME:D0,D1,...] [--runs 200] [--threads N]

Reports medians (the machine is shared and noisy) and the om2gen / ORT ratios.
"""
import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import om2gen

ROOT = Path(__file__).resolve().parents[1]


def median_ms(fn, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model", nargs="?", default=str(ROOT / "samples/cnn/model.onnx"))
    p.add_argument("--input-shape", action="append", default=None)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--loads", type=int, default=20)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    args = p.parse_args()
    shapes = {"image": (1, 3, 32, 32)} if args.input_shape is None else {
        s.rsplit(":", 1)[0]: tuple(int(d) for d in s.rsplit(":", 1)[1].split(",")) for s in args.input_shape}

    tmp = Path(tempfile.mkdtemp(prefix="om2gen-bench-"))
    os.environ["OM2GEN_CACHE_DIR"] = str(tmp / "cache")
    t0 = time.perf_counter()
    om2gen.compile(args.model, tmp / "cold.om2", input_shapes=shapes)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    om2gen.compile(args.model, tmp / "m.om2", input_shapes=shapes)
    warm = time.perf_counter() - t0

    proto = onnx.load(args.model)
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    data = proto.SerializeToString()
    ort_load, _ = median_ms(lambda: ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]), args.loads)
    om2_load, _ = median_ms(lambda: om2gen.load(tmp / "m.om2", threads=args.threads).close(), args.loads)

    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    model = om2gen.load(tmp / "m.om2", threads=args.threads)
    for _ in range(10):
        sess.run(None, feeds)
        model.run(feeds)
    ort_run, ort_min = median_ms(lambda: sess.run(None, feeds), args.runs)
    om2_run, om2_min = median_ms(lambda: model.run(feeds), args.runs)
    model.close()

    print(f"model {args.model} ({', '.join(f'{k}{list(v)}' for k, v in shapes.items())}), threads {args.threads}")
    print(f"compile: {cold:.2f} s with an empty kernel cache, {warm:.2f} s warm")
    print(f"{'':24}{'om2gen':>12}{'ORT':>12}{'ratio':>8}")
    print(f"{'load (median ms)':24}{om2_load:12.3f}{ort_load:12.3f}{om2_load / ort_load:8.2f}")
    print(f"{'run (median ms)':24}{om2_run:12.4f}{ort_run:12.4f}{om2_run / ort_run:8.2f}")
    print(f"{'run (min ms)':24}{om2_min:12.4f}{ort_min:12.4f}{om2_min / ort_min:8.2f}")


if __name__ == "__main__":
    main()
