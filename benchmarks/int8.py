"""int8 models made with ONNX Runtime's quantization tool, compiled by om2gen, against ORT running
the same quantized model (which applies the same QDQ fusions), as one markdown table.

    python benchmarks/int8.py [--models NAME ...] [--threads 1 2] [--runs K] [--max-seconds S]

Models (the suite's seeded builders, benchmarks/models):
- bert_dynamic: quantize_dynamic of the BERT-4 encoder (bert_base_4l): DynamicQuantizeLinear and
  MatMulInteger with uint8 activations, int8 weights;
- mobilenet_v2_qdq, resnet50_qdq: quantize_static in QDQ format (the tool's defaults: int8
  activations and weights, per tensor) with a few seeded random calibration batches.

The quantized models and their .om2 archives are cached under $OM2GEN_CACHE_DIR (or /tmp), named
by a digest of what made them (for an archive: om2gen's sources, templates and runtime headers).
Times are om2gen bench's (om2gen/cli/bench.py measure: om2gen and ORT in alternating rounds,
OpenVINO off); max |diff| is the largest difference of any output between om2gen and ORT on one
seeded input.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from benchmarks import models  # noqa: E402
from benchmarks.models import bert_base  # noqa: E402

import om2gen  # noqa: E402
from om2gen.cli import bench  # noqa: E402
from om2gen.version import __version__  # noqa: E402

CALIBRATION_BATCHES = 4
# name -> (float model, how it is quantized)
MODELS = {"bert_dynamic": ("bert_base_4l", "dynamic"), "mobilenet_v2_qdq": ("mobilenet_v2", "static"),
          "resnet50_qdq": ("resnet50_seeded", "static")}


def cache() -> Path:
    out = Path(os.environ.get("OM2GEN_CACHE_DIR") or "/tmp") / "om2gen-int8-bench"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


class _Calibration:
    """Seeded random batches of the model's (one) float input: the tool's CalibrationDataReader."""

    def __init__(self, model: onnx.ModelProto, n: int):
        x = model.graph.input[0]
        shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
        rng = np.random.default_rng(7)
        self.batches = iter([{x.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(n)])

    def get_next(self):
        return next(self.batches, None)


def quantized(name: str) -> Path:
    """The quantized .onnx (made once)."""
    from onnxruntime import __version__ as ort_version
    from onnxruntime.quantization import QuantFormat, quantize_dynamic, quantize_static
    base, how = MODELS[name]
    src = models.path(base)
    out = cache() / f"{name}-{_digest(src.name, how, CALIBRATION_BATCHES, ort_version)}.onnx"
    if out.is_file():
        return out
    partial = out.with_name(f"{out.stem}.{os.getpid()}.tmp.onnx")
    if how == "dynamic":
        quantize_dynamic(str(src), str(partial))
    else:
        quantize_static(str(src), str(partial), _Calibration(onnx.load(str(src)), CALIBRATION_BATCHES),
                        quant_format=QuantFormat.QDQ)
    os.replace(partial, out)
    return out


def _compiler_digest() -> str:
    """What om2gen's output depends on: its sources, kernel templates and runtime headers."""
    files = sorted(p for d in ("om2gen", "templates", "runtime_abi/include") for p in (ROOT / d).rglob("*")
                   if p.is_file() and p.suffix in (".py", ".j2", ".h", ".c", ".cpp"))
    return _digest(__version__, *(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes() for f in files))


def compiled(onnx_path: Path) -> Path:
    """The model's .om2 (compiled once per om2gen source and quantized model)."""
    out = onnx_path.with_name(f"{onnx_path.stem}-{_digest(onnx_path.read_bytes(), _compiler_digest())}.om2")
    if not out.is_file():
        partial = out.with_name(f"{out.stem}.{os.getpid()}.tmp.om2")
        om2gen.compile(str(onnx_path), partial)
        os.replace(partial, out)
    return out


def feeds_for(name: str, om2: Path) -> dict:
    if MODELS[name][0].startswith("bert"):
        return bert_base.make_inputs(np.random.default_rng(0))
    with om2gen.load(om2) as m:
        return bench.random_feeds(m.inputs, seed=0)


def max_diff(om2: Path, onnx_path: Path, feeds: dict) -> float:
    with om2gen.load(om2) as m:
        got = m.run(feeds)
    session = bench.ort_session(onnx_path, 1)
    ref = session.run(None, feeds)
    return max(float(np.abs(got[o.name].astype(np.float64) - r).max()) for o, r in zip(session.get_outputs(), ref))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    rows = []
    for name in args.models:
        src = quantized(name)
        om2 = compiled(src)
        feeds = feeds_for(name, om2)
        diff = max_diff(om2, src, feeds)
        for threads in args.threads:
            r = bench.measure(om2, src, threads=threads, runs=args.runs, loads=1, feeds=feeds,
                              max_seconds=args.max_seconds, openvino=False, fresh=0)
            ort_ms = r["run"]["onnxruntime"]["median_ms"]
            rows.append(f"| {name} | {threads} | {ort_ms:.2f} | {r['run']['om2gen']['median_ms']:.2f} | "
                        f"{r['ratio']['run_median']:.2f}x | {diff:.3g} |")
            print(rows[-1], file=sys.stderr, flush=True)
    print(f"\nCPU: {bench.machine_info()['cpu']}\n")
    print("| model | threads | ORT ms | om2gen ms | om2gen/ORT | max abs diff vs ORT |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
