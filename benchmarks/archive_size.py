"""Archive size against the ONNX file (issue 16's target: <= 1.1x) for the benchmark suite's
models (benchmarks/suite.py) and ResNet-50 with seeded weights (benchmarks/models/
resnet50_seeded.py): each is compiled to an .om2 and an .om with the suite's shapes and the
given options, and one markdown table row printed per model.

    python benchmarks/archive_size.py [--models NAME ...] [--winograd auto|off|2|4]
                                      [--winograd-weights auto|stored|load] [--keep DIR]

Columns: the ONNX file, the .om2 and its constants blob, the .om, and the ratios. Nothing is
run, only compiled (warm kernel cache: a few seconds a model; ResNet-50 and BERT-base take
longest).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import suite  # noqa: E402

import om2gen  # noqa: E402
from om2gen.cli import sizes  # noqa: E402

TARGET = 1.1
CASES = {**suite.CASES, "resnet50_seeded": suite._built("resnet50_seeded")}


def measure(case: suite.Case, out: Path, options: dict) -> dict:
    onnx_path = case.onnx()
    row = {"model": case.name, "onnx": sizes.onnx_bytes(onnx_path)}
    for fmt in ("om2", "om"):
        # (a classic .om has no load tasks: it stores Winograd's transformed weights whatever the option)
        given = {k: v for k, v in options.items() if fmt == "om2" or k != "winograd_weights"}
        path = om2gen.compile(onnx_path, out / f"{case.name}.{fmt}", input_shapes=case.input_shapes,
                              input_values=case.input_values, **given)
        row[fmt] = sizes.archive_sizes(path)
    return row


def render(rows: list[dict]) -> str:
    lines = ["| model | ONNX MB | .om2 MB | of it constants MB | .om MB | .om2 / ONNX | .om / ONNX | <= 1.1x |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | | | | | | | failed: {r['error']} |")
            continue
        a, b = r["om2"]["bytes"] / r["onnx"], r["om"]["bytes"] / r["onnx"]
        lines.append(f"| {r['model']} | {r['onnx'] / sizes.MB:.2f} | {r['om2']['bytes'] / sizes.MB:.2f} | "
                     f"{r['om2']['constants_bytes'] / sizes.MB:.2f} | {r['om']['bytes'] / sizes.MB:.2f} | "
                     f"{a:.2f} | {b:.2f} | {'yes' if max(a, b) <= TARGET else 'no'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", choices=sorted(CASES), help="only these models (default: all)")
    p.add_argument("--winograd", choices=("auto", "off", "2", "4"), help="compile option winograd= (default: "
                   "om2gen's own choice)")
    p.add_argument("--winograd-weights", choices=("auto", "stored", "load"),
                   help="compile option winograd_weights= of the .om2 (default: auto, the cost model per layer)")
    p.add_argument("--keep", type=Path, help="write the archives into this directory (default: a temporary one)")
    args = p.parse_args(argv)
    options = {"winograd": args.winograd} if args.winograd else {}
    if args.winograd_weights:
        options["winograd_weights"] = args.winograd_weights
    rows = []
    with tempfile.TemporaryDirectory(prefix="om2gen-size-") as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        for name in args.models or list(CASES):
            try:
                rows.append(measure(CASES[name], out, options))
            except Exception as exc:   # one model failing still reports the others
                traceback.print_exc()
                rows.append({"model": name, "error": f"{type(exc).__name__}: {exc}"[:200]})
            print(render(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
