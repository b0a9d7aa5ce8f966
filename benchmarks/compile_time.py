"""Compile time: om2gen.compile with an empty kernel cache (cold) and with it filled (warm),
next to OpenVINO's convert_model + compile_model of the same .onnx, in one process, alternating
by round; medians. The issue's targets: cold <= 2x OpenVINO's, warm <= 1x.

    python benchmarks/compile_time.py [--models resnet50 mobilenet_v2 bert_base_4l] [--rounds 3]
                                      [--threads 2] [--json FILE]

Cold: a new, empty $OM2GEN_CACHE_DIR each round (kernels, the model library and the compiled
templates are built again; the kernel library and load-and-run objects come from those prebuilt
at install, om2gen/prebuild.py); cold, nothing prebuilt: the same with OM2GEN_NO_PREBUILT=1
(an install that could not prebuild them); warm: the first cache right after, so nothing is
compiled by the C compiler. The compiler side of om2gen and openvino are imported before anything is timed.
OpenVINO (an optional benchmark dependency: pip install openvino) compiles for its CPU plugin
with the latency hint, f32 and the same thread count, with no model cache; without it the
script measures om2gen alone and says so.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.suite import CASES  # noqa: E402

import om2gen  # noqa: E402
from om2gen.cli import bench  # noqa: E402
from om2gen.toolchain import compiler  # noqa: E402

DEFAULT_MODELS = ["resnet50", "mobilenet_v2", "bert_base_4l"]


def openvino():
    """The openvino module, or None when it is not installed."""
    try:
        import openvino as ov
    except ImportError:
        return None
    return ov


def openvino_compile_seconds(ov, onnx_path, threads: int) -> float:
    """convert_model + compile_model (CPU, latency hint, f32, `threads` threads, no cache)."""
    core = ov.Core()
    t0 = time.perf_counter()
    model = ov.convert_model(str(onnx_path))
    core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads,
                                      "INFERENCE_PRECISION_HINT": "f32"})
    return time.perf_counter() - t0


def om2gen_compile_seconds(case, out_dir: Path) -> dict:
    """{"cold_s", "warm_s", "cold_unprebuilt_s"}: the case compiled with a new, empty cache, then
    again with it warm, then with another empty cache and nothing prebuilt."""
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=out_dir))
    times = {}
    for label in ("cold_s", "warm_s", "cold_unprebuilt_s"):
        if label == "cold_unprebuilt_s":
            cache = Path(tempfile.mkdtemp(prefix="cache-", dir=out_dir))
        with compiler.cache_settings(cache, prebuilt=label != "cold_unprebuilt_s"):
            t0 = time.perf_counter()
            om2gen.compile(case.onnx(), out_dir / f"{case.name}-{label}.om2", input_shapes=case.input_shapes,
                           input_values=case.input_values)
            times[label] = time.perf_counter() - t0
    return times


def measure(names: list[str], rounds: int = 3, threads: int = 2, log=print) -> dict:
    """Per model: the medians of om2gen's cold and warm compiles and of OpenVINO's (None when
    it is not installed), in seconds, and the ratios the targets are stated in."""
    ov = openvino()
    om2gen.compile   # the compiler side imported before anything is timed
    rows = []
    with tempfile.TemporaryDirectory(prefix="om2gen-compile-time-") as tmp:
        for name in names:
            case = CASES[name]
            onnx_path = case.onnx()
            samples = {"cold_s": [], "warm_s": [], "cold_unprebuilt_s": [], "openvino_s": []}
            for r in range(rounds):
                steps = ["om2gen", "openvino"] if r % 2 == 0 else ["openvino", "om2gen"]
                for step in steps:
                    if step == "om2gen":
                        for k, v in om2gen_compile_seconds(case, Path(tmp)).items():
                            samples[k].append(v)
                    elif ov is not None:
                        samples["openvino_s"].append(openvino_compile_seconds(ov, onnx_path, threads))
            row = {"model": name, **{k: statistics.median(v) if v else None for k, v in samples.items()},
                   "rounds": rounds}
            ovs = row["openvino_s"]
            row["cold_vs_openvino"] = row["cold_s"] / ovs if ovs else None
            row["warm_vs_openvino"] = row["warm_s"] / ovs if ovs else None
            log(f"  {name}: cold {row['cold_s']:.2f} s ({row['cold_unprebuilt_s']:.2f} s nothing prebuilt), "
                f"warm {row['warm_s']:.2f} s"
                + (f", OpenVINO {ovs:.2f} s" if ovs else ""))
            rows.append(row)
    return {"machine": bench.machine_info(), "threads": threads, "rounds": rounds,
            "openvino": ov.__version__ if ov is not None else None, "rows": rows}


def render(report: dict) -> str:
    """The markdown table of `measure`'s report, with the targets met or not."""
    m = report["machine"]
    ov = report["openvino"]
    lines = [f"{m['cpu']}, {m['cores']} cores, {m['isa']}; om2gen {m['om2gen']}, "
             + (f"OpenVINO {ov}" if ov else "OpenVINO not installed (pip install openvino to compare)")
             + f"; median of {report['rounds']} rounds, {report['threads']} threads", "",
             "| model | om2gen cold | cold, nothing prebuilt | om2gen warm | OpenVINO convert + compile "
             "| cold / OpenVINO (<= 2) | warm / OpenVINO (<= 1) |", "|---|---:|---:|---:|---:|---:|---:|"]

    def x(v, limit):
        return "-" if v is None else f"{v:.2f} {'met' if v <= limit else 'NOT met'}"
    for r in report["rows"]:
        ovs = f"{r['openvino_s']:.2f} s" if r["openvino_s"] is not None else "-"
        lines.append(f"| {r['model']} | {r['cold_s']:.2f} s | {r['cold_unprebuilt_s']:.2f} s | {r['warm_s']:.2f} s "
                     f"| {ovs} | "
                     f"{x(r['cold_vs_openvino'], 2)} | {x(r['warm_vs_openvino'], 1)} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=DEFAULT_MODELS, choices=sorted(CASES))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", help="also write the report as JSON to this file")
    args = p.parse_args(argv)
    if openvino() is None:
        print("OpenVINO is not installed: measuring om2gen alone (pip install openvino to compare)", file=sys.stderr)
    report = measure(args.models, args.rounds, args.threads, lambda s: print(s, file=sys.stderr))
    print(render(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
