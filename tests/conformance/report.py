"""Pass rates of om2gen on the ONNX backend conformance suite, by operator and overall.

    python tests/conformance/report.py [--jobs N] [--markdown] [--update-known-failures]

Runs every node test (of every operator, supported or not) and the simple, pytorch-converted
and pytorch-operator model tests through om2gen.backend, in parallel worker processes.
--update-known-failures rewrites known_failures.txt from the failures among the tests that
tests/conformance/test_onnx_backend.py runs.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite  # noqa: E402

_CASES = {}


def _init():
    warnings.filterwarnings("ignore")
    for c in suite.node_cases() + suite.model_cases():
        _CASES[c.name] = c


def _run(name: str):
    return name, suite.run_case(_CASES[name])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    p.add_argument("--update-known-failures", action="store_true")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    nodes = suite.node_cases()
    models = suite.model_cases()
    by_name = {c.name: c for c in nodes}
    supported = {c.name for c in suite.supported_node_cases()}
    with ProcessPoolExecutor(max_workers=args.jobs, initializer=_init) as pool:
        results = dict(pool.map(_run, [c.name for c in nodes + models], chunksize=4))

    per_op = defaultdict(Counter)
    for c in nodes:
        per_op[suite.op_under_test(c, by_name)][results[c.name][0] == "pass"] += 1
    node_pass = sum(results[c.name][0] == "pass" for c in nodes)
    sup_pass = sum(results[n][0] == "pass" for n in supported)
    print("## ONNX backend conformance (om2gen)\n")
    print(f"- node tests, all operators: {node_pass}/{len(nodes)} ({100 * node_pass / len(nodes):.1f}%)")
    print(f"- node tests of supported operators: {sup_pass}/{len(supported)} "
          f"({100 * sup_pass / max(len(supported), 1):.1f}%)")
    for kind in suite.MODEL_KINDS:
        ks = [c for c in models if c.kind == kind]
        ok = sum(results[c.name][0] == "pass" for c in ks)
        print(f"- {kind} model tests: {ok}/{len(ks)}")
    print("\n| operator | passed | node tests |\n|---|---:|---:|")
    for op in sorted(per_op):
        cnt = per_op[op]
        print(f"| {op} | {cnt[True]} | {cnt[True] + cnt[False]} |")
    categories = Counter(r[0] for r in results.values() if r[0] != "pass")
    print("\nfailures by category: " + ", ".join(f"{k} {v}" for k, v in categories.most_common()))
    bugs = {n: r for n, r in results.items() if r[0] in ("mismatch", "error")}
    for n, (cat, reason) in sorted(bugs.items()):
        print(f"  {cat}: {n}: {reason}", file=sys.stderr)

    if args.update_known_failures:
        run_by_pytest = supported | {c.name for c in models}
        suite.write_known_failures({n: r for n, r in results.items() if n in run_by_pytest and r[0] != "pass"})
        print(f"\nwrote {suite.KNOWN_FAILURES}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
