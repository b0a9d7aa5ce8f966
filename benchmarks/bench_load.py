"""Load time of large models: om2gen.load of the .om2 (and .om) against ONNX Runtime's session
creation, in one process, alternating, gc.collect() before each; medians.

    python benchmarks/bench_load.py [--models resnet50 bert_base_4l] [--loads 15] [--threads 2]

Archives are compiled once and cached like the suite's (benchmarks/suite.py `compiled`).
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.suite import CASES, _code_digest, compiled  # noqa: E402

import om2gen  # noqa: E402
from om2gen.cli.bench import ort_session  # noqa: E402


def _timed(make) -> float:
    gc.collect()
    t = time.perf_counter()
    obj = make()
    elapsed = time.perf_counter() - t
    obj.close() if hasattr(obj, "close") else None
    del obj
    return elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["resnet50", "bert_base_4l"], choices=sorted(CASES))
    p.add_argument("--loads", type=int, default=15)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    code = _code_digest()
    print(f"{'model':16} {'file':>10} {'om2gen .om2':>12} {'om2gen .om':>11} {'ORT session':>12} {'.om2/ORT':>9}")
    for name in args.models:
        case = CASES[name]
        om2, om = compiled(case, "om2", code, print), compiled(case, "om", code, print)
        times = {"om2": [], "om": [], "ort": []}
        for i in range(args.loads + 2):
            times["ort"].append(_timed(lambda: ort_session(str(case.onnx()), args.threads)))
            times["om2"].append(_timed(lambda: om2gen.load(om2, threads=args.threads)))
            times["om"].append(_timed(lambda: om2gen.load(om, threads=args.threads)))
        med = {k: statistics.median(v[2:]) * 1e3 for k, v in times.items()}
        print(f"{name:16} {om2.stat().st_size / 1e6:8.0f}MB {med['om2']:10.1f}ms {med['om']:9.1f}ms "
              f"{med['ort']:10.1f}ms {med['om2'] / med['ort']:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
