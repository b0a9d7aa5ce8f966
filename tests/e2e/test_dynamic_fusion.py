"""Element-wise fusion of dynamic models (docs/dynamic-shapes.md): each group is decided on its
own, so a question the ranges do not decide drops one group, not the pass; one archive per model,
checked against ONNX Runtime at several sizes."""
import json
import zipfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from tests.helpers import assert_close, ort_run

import om2gen
from om2gen.formats.om2 import layout


def _model(nodes, inputs: dict, outputs: dict, inits=()):
    return helper.make_model(helper.make_graph(
        nodes, "dynfuse", [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in outputs.items()], list(inits)),
        opset_imports=[helper.make_opsetid("", 17)])


def _gated(rows: str):
    """A GELU of x[N, 3, 8] (five element-wise nodes), times a gate g = relu(w) + 1 of shape
    [1, 3, 1] (cheap, recomputed per element if the budget allows: N*24 - 3 extra evaluations),
    and a second output x * col (col[N, 3, 1] broadcast along the rows)."""
    c = {k: numpy_helper.from_array(np.array(v, np.float32), k) for k, v in
         (("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5))}
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["d"], name="gelu/div"),
             helper.make_node("Erf", ["d"], ["e"], name="gelu/erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="gelu/add"),
             helper.make_node("Mul", ["x", "a"], ["m"], name="gelu/mul"),
             helper.make_node("Mul", ["m", "half"], ["h"], name="gelu/mul_half"),
             helper.make_node("Relu", ["w"], ["rw"], name="gate/relu"),
             helper.make_node("Add", ["rw", "one"], ["g"], name="gate/add"),
             helper.make_node("Mul", ["h", "g"], ["y"], name="gated"),
             helper.make_node("Mul", ["x", "col"], ["z"], name="column")]
    return _model(nodes, {"x": [rows, 3, 8], "col": [rows, 3, 1], "w": [1, 3, 1]},
                  {"y": [rows, 3, 8], "z": [rows, 3, 8]}, c.values())


def _compile(model, path, hi: int):
    shapes = {"x": (f"1~{hi}", 3, 8), "col": (f"1~{hi}", 3, 1), "w": (1, 3, 1)}
    om2gen.compile(model, path, input_shapes=shapes, debug=True)
    with zipfile.ZipFile(path) as z:
        nodes = json.loads(z.read(layout.ge_model_json(0)))["nodes"]
        tasks = json.loads(z.read(layout.task_info_json(0)))["tasks"]
    return {n["name"]: n for n in nodes}, [t for t in tasks if t["type"] == "MODEL_TASK_KERNEL"]


def _check_against_ort(model, path, sizes):
    rng = np.random.default_rng(5)
    with om2gen.load(path) as m:
        for n in sizes:
            feeds = {"x": rng.standard_normal((n, 3, 8)).astype(np.float32),
                     "col": rng.standard_normal((n, 3, 1)).astype(np.float32),
                     "w": rng.standard_normal((1, 3, 1)).astype(np.float32)}
            for name, want in zip(("y", "z"), ort_run(model, feeds)):
                assert_close(m.run(feeds)[name], want, f"{name} at N={n}", 1e-5)


def test_a_dynamic_model_fuses_its_groups(tmp_path):
    """With N in 1~40 the gate's recomputation costs at most 40*24 - 3 evaluations (within the
    budget at every size): the GELU, the gate and the product are one kernel, x * col another."""
    model = _gated("N")
    nodes, tasks = _compile(model, tmp_path / "m.om2", 40)
    fused = [n for n in nodes.values() if n["op_type"] == "FusedElementwise"]
    assert sorted(len(n["fused_from"]) for n in fused) == [8]
    assert [t["op_type"] for t in tasks].count("FusedElementwise") == 1 and len(tasks) == 2
    _check_against_ort(model, tmp_path / "m.om2", (1, 40, 7, 23))


def test_an_undecidable_budget_drops_only_that_member(tmp_path):
    """With N in 1~4000 the ranges do not decide whether recomputing the gate stays within the
    budget (24*N - 3 <= 4096 holds only up to N = 170): the gate is left to its own kernel, and
    the GELU with the product is still fused, as before the whole pass was dropped."""
    model = _gated("N")
    nodes, tasks = _compile(model, tmp_path / "m.om2", 4000)
    fused = sorted(sorted(n["fused_from"]) for n in nodes.values() if n["op_type"] == "FusedElementwise")
    assert fused == [["gate/add", "gate/relu"],
                     ["gated", "gelu/add", "gelu/div", "gelu/erf", "gelu/mul", "gelu/mul_half"]]
    assert len(tasks) == 3      # unfused: 9 kernels
    _check_against_ort(model, tmp_path / "m.om2", (1, 4000, 171, 170, 9))
