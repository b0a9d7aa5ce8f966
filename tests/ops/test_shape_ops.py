"""Views (Reshape, Flatten, Squeeze, Unsqueeze) and data movement (Transpose, Concat)."""
import numpy as np
import pytest
from helpers import check_op, rand

COVERS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Constant"}


@pytest.mark.parametrize("target", [[4, 6], [-1], [2, -1, 3], [0, 0, -1], [24, 1]])
def test_reshape(target, tmp_path):
    check_op("Reshape", {"x": rand(2, 3, 4)}, consts={"shape": np.array(target, np.int64)}, tmp_path=tmp_path)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1])
def test_flatten(axis, tmp_path):
    check_op("Flatten", {"x": rand(2, 3, 4, 5)}, {"axis": axis}, tmp_path=tmp_path)


def test_squeeze_unsqueeze(tmp_path):
    check_op("Squeeze", {"x": rand(1, 3, 1, 4)}, consts={"axes": np.array([0, 2], np.int64)}, tmp_path=tmp_path)
    (tmp_path / "u").mkdir()
    check_op("Unsqueeze", {"x": rand(3, 4)}, consts={"axes": np.array([0, -1], np.int64)}, tmp_path=tmp_path / "u")
    (tmp_path / "s11").mkdir()
    check_op("Squeeze", {"x": rand(1, 3, 1)}, {"axes": [0]}, opset=11, tmp_path=tmp_path / "s11")


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1], [1, 0, 2], [0, 1, 2]])
def test_transpose_3d(perm, tmp_path):
    attrs = {} if perm is None else {"perm": perm}
    check_op("Transpose", {"x": rand(3, 4, 5)}, attrs, tmp_path=tmp_path)


@pytest.mark.parametrize("perm", [[0, 2, 3, 1], [0, 3, 1, 2], [3, 2, 1, 0], [0, 2, 1, 3]])
def test_transpose_4d(perm, tmp_path):
    check_op("Transpose", {"x": rand(2, 3, 4, 5)}, {"perm": perm}, tmp_path=tmp_path)


def test_transpose_of_unit_dims_is_a_view(tmp_path):
    check_op("Transpose", {"x": rand(1, 5, 1, 3)}, {"perm": [2, 0, 1, 3]}, tmp_path=tmp_path)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_concat(axis, tmp_path):
    shapes = {0: [(1, 3, 4), (2, 3, 4)], 1: [(2, 1, 4), (2, 3, 4)], 2: [(2, 3, 1), (2, 3, 5)],
              -1: [(2, 3, 2), (2, 3, 3)]}[axis]
    inputs = {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)}
    check_op("Concat", inputs, {"axis": axis}, consts={"c": rand(*shapes[0], seed=9)}, tmp_path=tmp_path)


def test_constant_node_feeds_an_op(tmp_path):
    from onnx import helper, numpy_helper
    from helpers import check_model, make_model
    value = numpy_helper.from_array(rand(4, seed=3), "v")
    nodes = [helper.make_node("Constant", [], ["c"], value=value),
             helper.make_node("Add", ["x", "c"], ["y"])]
    check_model(make_model(nodes, {"x": rand(2, 4)}, ["y"]), {"x": rand(2, 4)}, tmp_path)


def test_folded_scalars_stay_scalars(tmp_path):
    """Constant folding must keep 0-d results 0-d (a rank decides If branches in real exports)."""
    from onnx import helper
    from helpers import check_model, make_model
    nodes = [helper.make_node("Squeeze", ["c", "axes"], ["s"]),
             helper.make_node("Shape", ["s"], ["rank_vec"]),
             helper.make_node("Size", ["rank_vec"], ["rank"]),
             helper.make_node("Add", ["x", "s"], ["y"])]
    model = make_model(nodes, {"x": rand(2, 3)}, ["y", "rank"],
                       {"c": np.array([5.0], np.float32), "axes": np.array([0], np.int64)})
    check_model(model, {"x": rand(2, 3)}, tmp_path)
