"""Snapshot of the generated model C++ for the sample: codegen changes are reviewed, not accidental.

After an intended change, regenerate with: OM2GEN_UPDATE_SNAPSHOTS=1 python -m pytest tests/archive/test_snapshot.py
"""
import difflib
import os
import zipfile
from pathlib import Path

import pytest

import om2gen

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "tests" / "snapshots"


# The kernels (and so their names in the tables) depend on the target's ISA: each target has its
# own tables snapshot, compiled for that target whatever CPU runs the test (nothing is run). The
# load-and-run code is the same for every target.
TARGETS = ["x86_64-avx2", "x86_64-avx512"]
CASES = [(t, "_tables.cpp", f"sample_cnn_tables.{t}.cpp") for t in TARGETS] + \
        [(t, "om2_load_and_run.cpp", "om2_load_and_run.cpp") for t in TARGETS]


@pytest.fixture(scope="module")
def sample_archives(tmp_path_factory):
    cache = {}

    def get(target):
        if target not in cache:
            path = tmp_path_factory.mktemp("snapshot") / f"s.{target}.om2"
            om2gen.compile(ROOT / "samples/cnn/model.onnx", path, input_shapes={"image": (1, 3, 32, 32)},
                           target=target)
            cache[target] = path
        return cache[target]
    return get


@pytest.mark.parametrize("target,suffix,snapshot", CASES, ids=[f"{t}-{s}" for t, _, s in CASES])
def test_generated_cpp_matches_snapshot(sample_archives, target, suffix, snapshot):
    with zipfile.ZipFile(sample_archives(target)) as z:
        cpp = next(z.read(n).decode() for n in z.namelist() if n.endswith(suffix))
    if os.environ.get("OM2GEN_UPDATE_SNAPSHOTS") == "1":
        (SNAPSHOTS / snapshot).write_text(cpp)
    expected = (SNAPSHOTS / snapshot).read_text()
    if cpp != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), cpp.splitlines(True), "snapshot", "generated", n=2))
        raise AssertionError(f"generated C++ for --target {target} differs from tests/snapshots/{snapshot}; if "
                             f"intended, rerun with OM2GEN_UPDATE_SNAPSHOTS=1\n{diff[:6000]}")
