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


@pytest.mark.parametrize("suffix,snapshot", [("_tables.cpp", "sample_cnn_tables.cpp"),
                                             ("om2_load_and_run.cpp", "om2_load_and_run.cpp")])
def test_generated_cpp_matches_snapshot(tmp_path, suffix, snapshot):
    path = tmp_path / "s.om2"
    om2gen.compile(ROOT / "samples/cnn/model.onnx", path, input_shapes={"image": (1, 3, 32, 32)})
    with zipfile.ZipFile(path) as z:
        cpp = next(z.read(n).decode() for n in z.namelist() if n.endswith(suffix))
    if os.environ.get("OM2GEN_UPDATE_SNAPSHOTS") == "1":
        (SNAPSHOTS / snapshot).write_text(cpp)
    expected = (SNAPSHOTS / snapshot).read_text()
    if cpp != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), cpp.splitlines(True), "snapshot", "generated", n=2))
        raise AssertionError(f"generated C++ differs from tests/snapshots/{snapshot}; if intended, rerun with "
                             f"OM2GEN_UPDATE_SNAPSHOTS=1\n{diff[:6000]}")
