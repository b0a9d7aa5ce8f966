"""If with a condition known at compile time (a constant, or an input frozen with input_values)."""
import numpy as np
import onnx
import pytest
from helpers import assert_close, make_model, ort_run, rand
from onnx import TensorProto, helper

import om2gen

COVERS = {"If"}


def branch(name, op, const):
    c = helper.make_tensor(f"{name}_c", TensorProto.FLOAT, [3], const)
    return helper.make_graph(
        [helper.make_node("Constant", [], [f"{name}_k"], value=c), helper.make_node(op, ["x", f"{name}_k"], ["out"])],
        name, [], [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])])


def if_model():
    nodes = [
        helper.make_node("Greater", ["sr", "limit"], ["cond"]),
        helper.make_node("If", ["cond"], ["y"], then_branch=branch("then", "Add", [1, 2, 3]),
                         else_branch=branch("else", "Mul", [2, 2, 2])),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    return make_model(nodes, {"x": rand(2, 3), "sr": np.array(16000, np.int64)}, ["z"],
                      {"limit": np.array(8000, np.int64)})


@pytest.mark.parametrize("sr", [16000, 8000])
def test_if_folds_with_a_frozen_input(sr, tmp_path):
    model = if_model()
    x = rand(2, 3, low=-3, high=3)
    om2gen.compile(model, tmp_path / "if.om2", input_values={"sr": sr})
    with om2gen.load(tmp_path / "if.om2") as m:
        assert [t.name for t in m.inputs] == ["x"]
        got = m.run({"x": x})["z"]
    assert_close(got, ort_run(model, {"x": x, "sr": np.array(sr, np.int64)})[0])


def test_if_with_a_runtime_condition_names_what_to_freeze(tmp_path):
    nodes = [helper.make_node("If", ["flag"], ["y"], then_branch=branch("t", "Add", [1, 2, 3]),
                              else_branch=branch("e", "Mul", [2, 2, 2]))]
    model = make_model(nodes, {"x": rand(2, 3), "flag": np.array(True)}, ["y"])
    with pytest.raises(om2gen.UnsupportedOpError, match="'flag'.*--input-value"):
        om2gen.compile(model, tmp_path / "if.om2")


def test_nested_if_and_outer_scope_values(tmp_path):
    inner = helper.make_graph([helper.make_node("Sub", ["x", "x"], ["o"])], "inner", [],
                              [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2, 3])])
    outer_then = helper.make_graph(
        [helper.make_node("If", ["flag2"], ["t"], then_branch=inner, else_branch=branch("e2", "Add", [5, 5, 5])),
         helper.make_node("Add", ["t", "x"], ["o"])],
        "outer_then", [], [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2, 3])])
    nodes = [helper.make_node("If", ["flag"], ["y"], then_branch=outer_then,
                              else_branch=branch("e1", "Mul", [3, 3, 3]))]
    model = make_model(nodes, {"x": rand(2, 3), "flag": np.array(True), "flag2": np.array(False)}, ["y"])
    x = rand(2, 3)
    om2gen.compile(model, tmp_path / "n.om2", input_values={"flag": True, "flag2": False})
    with om2gen.load(tmp_path / "n.om2") as m:
        got = m.run({"x": x})["y"]
    ref = ort_run(model, {"x": x, "flag": np.array(True), "flag2": np.array(False)})[0]
    assert_close(got, ref)
