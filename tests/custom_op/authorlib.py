"""Builds tests/custom_op/author_ops.cpp (GatedMul, Thrower, Plain under hostile op types) into a
custom-op library, with the flags `om2gen config` gives an operator author, and small models
that use its operators."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from om2gen.codegen.literals import c_string

HERE = Path(__file__).resolve().parent
DOMAIN = "om2.author"
# Op types that must not become paths, names or code when they reach the archive and the model source.
EVIL_OP_TYPES = ["../../../Evil", "a/b\\c", "..", "Ünïcødé_Op", "L" * 300, "x*/y\n#error injected", "C:\\Evil"]


def build(out_dir: Path) -> Path:
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ is not installed")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "evil_op_types.h").write_text(
        "#define EVIL_OP_TYPES " + ", ".join(c_string(t) for t in EVIL_OP_TYPES) + "\n")
    library = out_dir / "libom2_author_ops.so"
    flags = subprocess.run(["om2gen", "config", "--cxxflags", "--ldflags"], capture_output=True, text=True,
                           check=True).stdout.split()
    cmd = [cxx, *flags, "-O1", f"-I{out_dir}", str(HERE / "author_ops.cpp"), "-o", str(library)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stderr}"
    return library


def model(op_type: str, outputs=("y",), node_name: str = "node", attrs=None, inputs=("x",)) -> onnx.ModelProto:
    """inputs -> op_type -> outputs (an empty name omits that output); every present output goes
    through a Relu (so that a task replays the value Execute wrote at capture) to z<i>."""
    shape = [2, 4]
    nodes = [helper.make_node(op_type, list(inputs), list(outputs), name=node_name, domain=DOMAIN, **(attrs or {}))]
    graph_outputs = []
    for i, name in enumerate(outputs):
        if name:
            nodes.append(helper.make_node("Relu", [name], [f"z{i}"], name=f"relu{i}"))
            graph_outputs.append(helper.make_tensor_value_info(f"z{i}", TensorProto.FLOAT, shape))
    graph = helper.make_graph(nodes, "author", [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
                                                for n in inputs], graph_outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
