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


def runtime_if_model():
    """y = If(flag, then: x + [1,2,3], else: x * 2); z = Relu(y); the condition is an input."""
    nodes = [helper.make_node("If", ["flag"], ["y"], then_branch=branch("t", "Add", [1, 2, 3]),
                              else_branch=branch("e", "Mul", [2, 2, 2])),
             helper.make_node("Relu", ["y"], ["z"])]
    return make_model(nodes, {"x": rand(2, 3), "flag": np.array(True)}, ["y", "z"])


def test_if_with_a_runtime_condition_chooses_at_replay(tmp_path):
    from om2gen.native import lib
    model = runtime_if_model()
    om2gen.compile(model, tmp_path / "if.om2")
    x = rand(2, 3, low=-3, high=3)
    with om2gen.load(tmp_path / "if.om2") as m:
        assert {t.name for t in m.inputs} == {"x", "flag"}
        for flag in (True, False, True):
            feeds = {"x": x, "flag": np.array(flag)}
            before = lib.om2rtGetLaunchCount()
            got = m.run(feeds)
            launched = lib.om2rtGetLaunchCount() - before
            for name, ref in zip(["y", "z"], ort_run(model, feeds)):
                assert_close(got[name], ref, f"{name} flag={flag}")
            # branch index + one branch (its op and the output copy) + Relu: the other branch never ran
            assert launched == 4, launched


def test_runtime_if_tasks_are_the_label_family(tmp_path):
    import json
    import zipfile
    om2gen.compile(runtime_if_model(), tmp_path / "if.om2", debug=True)
    with zipfile.ZipFile(tmp_path / "if.om2") as z:
        tasks = json.loads(z.read("data/model_0/debug/task_info.json"))["tasks"]
    kinds = [t["type"] for t in tasks]
    assert "MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX" in kinds and "MODEL_TASK_STREAM_LABEL_GOTO" in kinds
    assert kinds.count("MODEL_TASK_LABEL_SET") == 3


def test_runtime_if_nested_with_outer_values_and_constant_outputs(tmp_path):
    const_branch = helper.make_graph(
        [helper.make_node("Constant", [], ["o"], value=helper.make_tensor("c", TensorProto.FLOAT, [2, 3], [7] * 6))],
        "const_branch", [], [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2, 3])])
    passthrough = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "pass", [],
                                    [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2, 3])])
    inner = helper.make_graph(
        [helper.make_node("If", ["f2"], ["t"], then_branch=const_branch, else_branch=passthrough),
         helper.make_node("Mul", ["t", "w"], ["o"])],
        "inner", [], [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2, 3])])
    nodes = [helper.make_node("Sigmoid", ["x"], ["w"]),
             helper.make_node("If", ["f1"], ["y"], then_branch=inner, else_branch=branch("e", "Sub", [1, 1, 1]))]
    model = make_model(nodes, {"x": rand(2, 3), "f1": np.array(True), "f2": np.array(True)}, ["y"])
    om2gen.compile(model, tmp_path / "n.om2")
    x = rand(2, 3, seed=3)
    with om2gen.load(tmp_path / "n.om2") as m:
        for f1 in (True, False):
            for f2 in (True, False):
                feeds = {"x": x, "f1": np.array(f1), "f2": np.array(f2)}
                assert_close(m.run(feeds)["y"], ort_run(model, feeds)[0], f"f1={f1} f2={f2}")


def test_if_branches_with_different_shapes_are_refused(tmp_path):
    other = helper.make_graph([helper.make_node("Flatten", ["x"], ["o"], axis=0)], "flat", [],
                              [helper.make_tensor_value_info("o", TensorProto.FLOAT, [1, 6])])
    nodes = [helper.make_node("If", ["flag"], ["y"], then_branch=branch("t", "Add", [1, 2, 3]), else_branch=other)]
    model = make_model(nodes, {"x": rand(2, 3), "flag": np.array(True)}, ["y"])
    with pytest.raises(om2gen.UnsupportedOpError, match="one static shape per output"):
        om2gen.compile(model, tmp_path / "bad.om2")


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


def reshape_branch(tag, shape, const, nested_then, nested_else):
    """Reshape x to `shape`, add a constant, then an If on the result's rank (2?) that folds on
    this branch's own shapes."""
    def sub(name, nodes):
        return helper.make_graph(nodes, f"{tag}_{name}", [], [helper.make_tensor_value_info(f"{tag}_{name}_o",
                                                                                           TensorProto.FLOAT, None)])
    k = onnx.numpy_helper.from_array(const, f"{tag}_k")
    nodes = [
        helper.make_node("Constant", [], [f"{tag}_shape"], value=onnx.numpy_helper.from_array(
            np.array(shape, np.int64), f"{tag}_shape_v")),
        helper.make_node("Reshape", ["x", f"{tag}_shape"], [f"{tag}_r"]),
        helper.make_node("Constant", [], [f"{tag}_kc"], value=k),
        helper.make_node("Add", [f"{tag}_r", f"{tag}_kc"], [f"{tag}_b"]),
        helper.make_node("Shape", [f"{tag}_b"], [f"{tag}_s"]),
        helper.make_node("Size", [f"{tag}_s"], [f"{tag}_rank"]),
        helper.make_node("Constant", [], [f"{tag}_two"], value=onnx.numpy_helper.from_array(np.array(2, np.int64))),
        helper.make_node("Equal", [f"{tag}_rank", f"{tag}_two"], [f"{tag}_is2d"]),
        helper.make_node("If", [f"{tag}_is2d"], [f"{tag}_o"],
                         then_branch=sub("flat", nested_then(f"{tag}_b", f"{tag}_flat_o")),
                         else_branch=sub("perm", nested_else(f"{tag}_b", f"{tag}_perm_o"))),
    ]
    return helper.make_graph(nodes, tag, [], [helper.make_tensor_value_info(f"{tag}_o", TensorProto.FLOAT, [12])])


def test_runtime_if_branches_are_inferred_from_their_own_shapes(tmp_path):
    """Each branch of a run-time If reshapes x to another rank, and a nested If folds on that
    branch's own rank (as Silero VAD's do): each branch takes another nested alternative, and a
    wrong choice gives other numbers. The then branch's constant holds the bytes '*\\', which once
    ended the C comment describing the node in the generated tables (as Silero's weights did)."""
    flat = np.array([12], np.int64)

    def flatten(src, out):
        return [helper.make_node("Constant", [], [out + "_n"], value=onnx.numpy_helper.from_array(flat)),
                helper.make_node("Reshape", [src, out + "_n"], [out])]

    def transpose_flatten(src, out):
        return [helper.make_node("Transpose", [src], [out + "_t"]), *flatten(out + "_t", out)]

    odd = np.frombuffer(b"\x00*\\@" * 4, np.float32).copy()   # 3.44 each; raw bytes hold "*\"
    then = reshape_branch("t", [3, 4], odd, flatten, transpose_flatten)
    other = reshape_branch("e", [2, 3, 2], np.array([1, -1], np.float32), flatten, transpose_flatten)
    model = make_model([helper.make_node("If", ["flag"], ["y"], then_branch=then, else_branch=other)],
                       {"x": rand(2, 6), "flag": np.array(True)}, ["y"])
    om2gen.compile(model, tmp_path / "ranks.om2")
    x = rand(2, 6, seed=5)
    with om2gen.load(tmp_path / "ranks.om2") as m:
        for flag in (True, False):
            feeds = {"x": x, "flag": np.array(flag)}
            assert_close(m.run(feeds)["y"], ort_run(model, feeds)[0], f"flag={flag}")


def test_runtime_if_branch_invalid_for_the_shapes_names_the_deciding_input(tmp_path):
    """A branch these shapes make invalid (ONNX Runtime fails there too when it is taken): the
    error names the If, the branch, the input that decides it and both ways out."""
    bad = helper.make_graph([helper.make_node("Transpose", ["x"], ["o"], perm=[2, 0, 1])], "bad", [],
                            [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2, 3])])
    nodes = [helper.make_node("Greater", ["sr", "limit"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=branch("t", "Add", [1, 2, 3]), else_branch=bad)]
    model = make_model(nodes, {"x": rand(2, 3), "sr": np.array(16000, np.int64)}, ["y"],
                       {"limit": np.array(8000, np.int64)})
    with pytest.raises(om2gen.ShapeError) as info:
        om2gen.compile(model, tmp_path / "bad.om2")
    msg = str(info.value)
    assert info.value.value_name == "sr"
    assert "the else branch cannot run with these input shapes" in msg and "Transpose" in msg, msg
    assert "input_values={'sr': V}" in msg and "input_shapes=" in msg and "--input" not in msg, msg
