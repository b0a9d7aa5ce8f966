"""Snapshot of the generated model C++ for the sample: codegen changes are reviewed, not accidental.

After an intended change, regenerate with: OM2GEN_UPDATE_SNAPSHOTS=1 python -m pytest tests/archive/test_snapshot.py
"""
import difflib
import os
import zipfile
from pathlib import Path

import om2gen

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "tests" / "snapshots" / "sample_cnn_om2.cpp"


def test_generated_cpp_matches_snapshot(tmp_path):
    path = tmp_path / "s.om2"
    om2gen.compile(ROOT / "samples/cnn/model.onnx", path, input_shapes={"image": (1, 3, 32, 32)})
    with zipfile.ZipFile(path) as z:
        cpp = next(z.read(n).decode() for n in z.namelist() if n.endswith("_om2.cpp"))
    if os.environ.get("OM2GEN_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(cpp)
    expected = SNAPSHOT.read_text()
    if cpp != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), cpp.splitlines(True), "snapshot", "generated", n=2))
        raise AssertionError("generated C++ differs from tests/snapshots/sample_cnn_om2.cpp; if intended, rerun with "
                             f"OM2GEN_UPDATE_SNAPSHOTS=1\n{diff[:6000]}")
