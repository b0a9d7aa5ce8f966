"""A process that only loads and runs models never imports the compiler side: `import om2gen`
(which brings the executor, as `import onnxruntime` brings ORT's) and om2gen.load of an .om2 stay
clear of onnx, protobuf, jinja2 and pyelftools (issue 16: that import was most of a fresh
process's load time); om2gen.compile imports the compiler on first use."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import make_model, rand
from onnx import helper

import om2gen

ROOT = Path(__file__).resolve().parents[2]
COMPILER_SIDE = ("onnx", "google.protobuf", "jinja2", "elftools", "ml_dtypes", "om2gen.pipeline",
                 "om2gen.frontend", "om2gen.lower", "om2gen.codegen", "om2gen.formats.om.proto")

_SCRIPT = """
import json, sys
import numpy as np
import om2gen
after_import = sorted(sys.modules)
with om2gen.load(sys.argv[1]) as m:
    z = m.run({"x": np.full((1, 4), 2, np.float32), "y": np.full((1, 4), 3, np.float32)})["z"]
print(json.dumps({"import": after_import, "load": sorted(sys.modules), "z": z.tolist()}))
"""


def _fresh(path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(path)], capture_output=True, text=True, env=env,
                         timeout=120, check=True)
    return json.loads(out.stdout)


def _loaded(modules, prefixes) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_load_and_run_import_no_compiler(tmp_path):
    path = tmp_path / "add.om2"
    om2gen.compile(make_model([helper.make_node("Add", ["x", "y"], ["z"])], {"x": rand(1, 4), "y": rand(1, 4)},
                              ["z"]), path)
    seen = _fresh(path)
    assert seen["z"] == [[5.0] * 4]
    assert "om2gen.runtime.model" in seen["import"]   # the executor: load itself imports nothing more
    assert _loaded(seen["load"], COMPILER_SIDE) == []
    assert set(seen["load"]) - set(seen["import"]) <= {"om2gen.formats.om2._schema_code", "decimal", "_decimal"}


def test_compile_is_still_an_attribute():
    from om2gen import compile as imported
    assert om2gen.compile is imported and imported.__module__ == "om2gen.pipeline"
    assert "compile" in om2gen.__all__
