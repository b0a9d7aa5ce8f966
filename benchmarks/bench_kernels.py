"""Compute-kernel benchmark: Conv / MatMul / Gemm shapes from ResNet-50, MobileNetV2 and a BERT-base
encoder as single-node models, om2gen next to ONNX Runtime in the same process, and whole real models.

    python benchmarks/bench_kernels.py [--threads N] [--runs K] [-k SUBSTR ...] [--target T]
    python benchmarks/bench_kernels.py --models resnet50 squeezenet ... [--threads N] [--runs K]

Runs alternate between om2gen and ORT in blocks, over several rounds (the machine is shared and
noisy); the table shows median milliseconds, achieved GFLOP/s and the ratio om2gen / ORT (below 1:
om2gen is faster). With --threads above 1, both runtimes' worker pools share this process and the
cores: after ORT has run, its spinning workers keep om2gen's pool from scaling (ResNet-50 at 2
threads: 54 ms alone in a process, near the 1-thread time next to ORT), so take multi-thread
figures from separate processes.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import om2gen

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 5


def conv(name, x, w, strides=1, pads=0, group=1):
    return dict(name=name, op="Conv", x=x, w=w, attrs={"strides": [strides] * 2, "pads": [pads] * 4, "group": group},
                bias=True)


def matmul(name, a, b, const_b=True):
    return dict(name=name, op="MatMul", x=a, w=b, attrs={}, bias=False, const_b=const_b)


def gemm(name, m, k, n):
    return dict(name=name, op="Gemm", x=(m, k), w=(n, k), attrs={"transB": 1}, bias=True)


CASES = [
    # ResNet-50 (batch 1, 224x224)
    conv("r50_conv1_7x7s2", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3),
    conv("r50_l1_1x1_64_64", (1, 64, 56, 56), (64, 64, 1, 1)),
    conv("r50_l1_3x3_64", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    conv("r50_l1_1x1_64_256", (1, 64, 56, 56), (256, 64, 1, 1)),
    conv("r50_l2_1x1s2_256_128", (1, 256, 56, 56), (128, 256, 1, 1), 2),
    conv("r50_l2_3x3_128", (1, 128, 28, 28), (128, 128, 3, 3), 1, 1),
    conv("r50_l3_3x3_256", (1, 256, 14, 14), (256, 256, 3, 3), 1, 1),
    conv("r50_l3_1x1_1024_256", (1, 1024, 14, 14), (256, 1024, 1, 1)),
    conv("r50_l4_3x3_512", (1, 512, 7, 7), (512, 512, 3, 3), 1, 1),
    conv("r50_l4_1x1_512_2048", (1, 512, 7, 7), (2048, 512, 1, 1)),
    gemm("r50_fc", 1, 2048, 1000),
    # MobileNetV2
    conv("mnv2_dw3x3_32_112", (1, 32, 112, 112), (32, 1, 3, 3), 1, 1, 32),
    conv("mnv2_dw3x3s2_144_56", (1, 144, 56, 56), (144, 1, 3, 3), 2, 1, 144),
    conv("mnv2_dw3x3_576_14", (1, 576, 14, 14), (576, 1, 3, 3), 1, 1, 576),
    conv("mnv2_1x1_96_576_14", (1, 96, 14, 14), (576, 96, 1, 1)),
    # BERT-base encoder, sequence 128
    matmul("bert_qkv_128x768x768", (1, 128, 768), (768, 768)),
    matmul("bert_ffn1_128x768x3072", (1, 128, 768), (768, 3072)),
    matmul("bert_ffn2_128x3072x768", (1, 128, 3072), (3072, 768)),
    matmul("bert_scores_12x128x64x128", (1, 12, 128, 64), (1, 12, 64, 128), const_b=False),
    matmul("bert_context_12x128x128x64", (1, 12, 128, 128), (1, 12, 128, 64), const_b=False),
]


def flops(case, out_shape) -> float:
    if case["op"] == "Conv":
        w = case["w"]
        return 2.0 * np.prod(out_shape) * np.prod(w[1:])
    if case["op"] == "Gemm":
        return 2.0 * case["x"][0] * case["x"][1] * case["w"][0]
    return 2.0 * np.prod(out_shape) * case["x"][-1]


def build(case) -> tuple[onnx.ModelProto, dict]:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, case["x"]).astype(np.float32)
    w = (rng.uniform(-1, 1, case["w"]) / np.sqrt(np.prod(case["w"][1:]))).astype(np.float32)
    inputs = {"x": x}
    inits = {}
    if case.get("const_b", True):
        inits["w"] = w
    else:
        inputs["w"] = w
    names = ["x", "w"]
    if case["bias"]:
        n_out = case["w"][0]
        inits["b"] = rng.uniform(-1, 1, (n_out,)).astype(np.float32)
        names.append("b")
    node = helper.make_node(case["op"], names, ["y"], **case["attrs"])
    graph = helper.make_graph(
        [node], case["name"],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in inputs.items()],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model)
    model.graph.ClearField("output")
    model.graph.output.extend(inferred.graph.output)
    return model, inputs


def ort_session(model: onnx.ModelProto, threads: int):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def compare(model: onnx.ModelProto, feeds: dict, path: Path, threads: int, runs: int, target, input_shapes=None,
            input_values=None, ref_feeds=None):
    """(om2gen median ms, ORT median ms, max abs difference, compile seconds). ref_feeds: ORT's feeds
    when they differ (inputs frozen at compile time are fed to ORT)."""
    ref_feeds = feeds if ref_feeds is None else ref_feeds
    t0 = time.perf_counter()
    om2gen.compile(model, path, target=target, input_shapes=input_shapes or {}, input_values=input_values or {})
    compile_s = time.perf_counter() - t0
    sess = ort_session(model, threads)
    with om2gen.load(path, threads=threads) as m:
        got = m.run(feeds)
        ref = sess.run(None, ref_feeds)
        err = max(float(np.max(np.abs(got[o.name].astype(np.float64) - r))) if r.size else 0.0
                  for o, r in zip(model.graph.output, ref) if r.dtype.kind == "f")
        for _ in range(3):
            m.run(feeds)
            sess.run(None, ref_feeds)
        # Blocks of runs, alternating between the two in rounds: paired against the machine's noise,
        # yet neither runs while the other's idle worker threads still spin (ORT's workers spin for a
        # while after each run and would take the cores om2gen's pool needs).
        om2_t, ort_t = [], []
        deadline = time.perf_counter() + 30.0
        per_round = max(1, runs // ROUNDS)
        for _ in range(ROUNDS):
            om2_t += [timed(lambda: m.run(feeds)) for _ in range(per_round)]
            ort_t += [timed(lambda: sess.run(None, ref_feeds)) for _ in range(per_round)]
            if time.perf_counter() > deadline:
                break
    return statistics.median(om2_t), statistics.median(ort_t), err, compile_s


def run_cases(args, tmp: Path) -> None:
    print(f"threads {args.threads}, target {args.target or 'default'}; median ms, runs in alternating blocks")
    print(f"{'case':30}{'GFLOP':>8}{'om2 ms':>10}{'ORT ms':>10}{'om2 GF/s':>10}{'ORT GF/s':>10}{'ratio':>8}"
          f"{'max err':>10}")
    ratios = []
    for case in CASES:
        if args.k and not any(s in case["name"] for s in args.k):
            continue
        model, feeds = build(case)
        out_shape = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
        gf = flops(case, out_shape) / 1e9
        om2_ms, ort_ms, err, _ = compare(model, feeds, tmp / f"{case['name']}.om2", args.threads, args.runs,
                                         args.target)
        ratios.append(om2_ms / ort_ms)
        print(f"{case['name']:30}{gf:8.3f}{om2_ms:10.3f}{ort_ms:10.3f}{gf / om2_ms * 1e3:10.1f}"
              f"{gf / ort_ms * 1e3:10.1f}{om2_ms / ort_ms:8.2f}{err:10.2e}", flush=True)
    if ratios:
        print(f"geometric mean ratio om2gen / ORT: {float(np.exp(np.mean(np.log(ratios)))):.2f}")


def run_models(args, tmp: Path) -> None:
    sys.path.insert(0, str(ROOT / "samples" / "real_models"))
    import catalog
    print(f"threads {args.threads}, target {args.target or 'default'}; median ms, runs in alternating blocks")
    print(f"{'model':20}{'om2 ms':>10}{'ORT ms':>10}{'ratio':>8}{'max err':>10}{'compile s':>11}")
    for name in args.models:
        spec = catalog.BY_NAME[name]
        path = catalog.fetch(spec)
        model = onnx.load(str(path))
        feeds = catalog.inputs_for(spec)
        ref_feeds = dict(feeds)
        for k, v in spec.input_values.items():
            declared = next(i for i in model.graph.input if i.name == k)
            ref_feeds[k] = np.array(v, dtype=helper.tensor_dtype_to_np_dtype(declared.type.tensor_type.elem_type))
        om2_ms, ort_ms, err, compile_s = compare(model, feeds, tmp / f"{name}.om2", args.threads, args.runs,
                                                 args.target, spec.input_shapes, spec.input_values, ref_feeds)
        print(f"{name:20}{om2_ms:10.3f}{ort_ms:10.3f}{om2_ms / ort_ms:8.2f}{err:10.2e}{compile_s:11.2f}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("-k", action="append", help="only cases whose name contains this (repeatable)")
    p.add_argument("--target", default=None, help="om2gen target (default: this machine's best)")
    p.add_argument("--models", nargs="*", help="real models from samples/real_models/catalog.py instead of kernels")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="om2gen-bench-") as tmp:
        if args.models:
            run_models(args, Path(tmp))
        else:
            run_cases(args, Path(tmp))


if __name__ == "__main__":
    main()
