"""The ONNX conformance suite as om2gen runs it: which tests, known failures, one-case runner.

Node tests are taken for every operator om2gen supports (all ops of the test's model are
registered); the simple, pytorch-converted and pytorch-operator model tests are taken whole.
Known failures are data (known_failures.txt): `test_id | category | reason`.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from onnx import numpy_helper
from onnx.backend.test.loader import load_model_tests

from om2gen.ops import registry

HERE = Path(__file__).resolve().parent
KNOWN_FAILURES = HERE / "known_failures.txt"
MODEL_KINDS = ("simple", "pytorch-converted", "pytorch-operator")


def supported_ops() -> set[str]:
    return {t for (d, t) in registry.registered() if d == ""}


def node_cases():
    return load_model_tests(kind="node")


def op_types(case) -> set[str]:
    return {n.op_type for n in case.model.graph.node}


def supported_node_cases():
    ops = supported_ops()
    return [c for c in node_cases() if op_types(c) <= ops]


def model_cases():
    return [c for kind in MODEL_KINDS for c in load_model_tests(kind=kind)]


def known_failures() -> dict[str, tuple[str, str]]:
    """{test name (without _cpu): (category, reason)}."""
    out = {}
    for line in KNOWN_FAILURES.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, category, reason = (part.strip() for part in line.split("|", 2))
        out[name] = (category, reason)
    return out


def op_under_test(case, by_name: dict) -> str:
    """The operator a node test is about: its single node, or for an '_expanded' function test,
    the op of the test it expands."""
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    base = re.split(r"_expanded", case.name)[0]
    if base in by_name and len(by_name[base].model.graph.node) == 1:
        return by_name[base].model.graph.node[0].op_type
    return "(multi-op)"


def data_sets(case):
    """[(inputs, outputs)] as numpy arrays, for node tests (in memory) and model tests (on disk)."""
    if case.data_sets is not None:
        return [([_array(x) for x in ins], [_array(y) for y in outs]) for ins, outs in case.data_sets]
    sets = []
    for d in sorted(Path(case.model_dir).glob("test_data_set_*")):
        ins = [_load_pb(p) for p in sorted(d.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]))]
        outs = [_load_pb(p) for p in sorted(d.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))]
        sets.append((ins, outs))
    return sets


def _array(x):
    if isinstance(x, np.ndarray):
        return x
    try:
        return numpy_helper.to_array(x)
    except Exception:
        return x


def _load_pb(path: Path):
    import onnx
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(t)


def load_case_model(case):
    import onnx
    return case.model if case.model is not None else onnx.load(str(Path(case.model_dir) / "model.onnx"))


def run_case(case) -> tuple[str, str]:
    """Runs one conformance case through om2gen.backend: ("pass", "") or (category, reason)."""
    from onnx.backend.test.runner import Runner

    from om2gen.backend import Om2Backend
    from om2gen.errors import Om2Error

    try:
        rep = Om2Backend.prepare(load_case_model(case))
        try:
            for ins, outs in data_sets(case):
                Runner.assert_similar_outputs(outs, rep.run(ins), case.rtol, case.atol, None)
        finally:
            rep.close()
        return "pass", ""
    except Om2Error as exc:
        return categorize(exc)
    except AssertionError as exc:
        first = (str(exc).strip().splitlines() or ["outputs differ"])[0]
        return "mismatch", f"outputs differ from the reference: {first[:160]}"
    except Exception as exc:  # a crash in om2gen itself: always worth a look
        return "error", f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def categorize(exc) -> tuple[str, str]:
    from om2gen.errors import NeedsConstantError, UnsupportedOpError
    msg = str(exc).splitlines()[0]
    m = re.search(r"operator ([\w.]+) \(opset \d+\) is not supported", msg)
    if m:
        return "unsupported-op", f"{m.group(1)} is not supported yet"
    if "older than om2gen supports" in msg:
        return "old-opset", msg.split(": ", 1)[-1][:160]
    if isinstance(exc, NeedsConstantError):
        return "runtime-shape", msg.split(": ", 1)[-1][:160]
    if "data type" in msg or "dtype" in msg:
        return "unsupported-dtype", msg.split(": ", 1)[-1][:160]
    if "training" in msg:
        return "training-only", msg.split(": ", 1)[-1][:160]
    if isinstance(exc, UnsupportedOpError):
        return "unsupported-attr", msg.split(": ", 1)[-1][:160]
    return type(exc).__name__, msg[:160]


KNOWN_FAILURES_HEADER = """\
# ONNX conformance tests om2gen is known to fail: test name | category | reason.
# Read by tests/conformance/suite.py. A listed test that passes is reported as an unexpected
# success: regenerate with `python tests/conformance/report.py --update-known-failures`.
# Categories: unsupported-op, unsupported-dtype, unsupported-attr, runtime-shape (a shape,
# axes or bound given at run time: om2gen compiles static shapes), old-opset, training-only,
# mismatch (wrong numbers: a bug), error (an om2gen crash: a bug).
"""


def write_known_failures(failures: dict[str, tuple[str, str]]) -> None:
    lines = [f"{name} | {cat} | {reason}" for name, (cat, reason) in sorted(failures.items())]
    KNOWN_FAILURES.write_text(KNOWN_FAILURES_HEADER + "\n".join(lines) + ("\n" if lines else ""))
