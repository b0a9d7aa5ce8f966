"""TopK against ONNX Runtime: attribute and input k, largest/smallest, ties, NaN, dtypes."""
import numpy as np
import pytest
from helpers import check_op, make_model, ort_run, rand
from onnx import helper

import om2gen

COVERS = {"TopK"}

CASES = {
    "last_axis": ((3, 10), -1, 4),
    "axis0": ((9, 4, 3), 0, 3),
    "middle_axis": ((2, 12, 5), 1, 5),
    "k_equals_len": ((4, 7), 1, 7),
    "k1": ((5, 300), 1, 1),
    "long_rows": ((2, 5000), 1, 100),
    "vector": ((64,), 0, 10),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("largest", [1, 0])
def test_topk(case, largest, tmp_path):
    shape, axis, k = CASES[case]
    check_op("TopK", {"x": rand(*shape, seed=1)}, {"axis": axis, "largest": largest},
             consts={"k": np.array([k], np.int64)}, n_outputs=2, opset=11, tmp_path=tmp_path)


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_ties_smaller_index_first(largest, tmp_path):
    x = np.round(rand(4, 40, seed=2) * 2).astype(np.float32)
    check_op("TopK", {"x": x}, {"largest": largest}, consts={"k": np.array([15], np.int64)}, n_outputs=2,
             opset=11, tmp_path=tmp_path)


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_nan(largest, tmp_path):
    # ORT ranks NaN above every number; helpers.assert_close cannot measure NaN values, so compare here
    x = rand(3, 12, seed=3)
    x[0, 4] = x[1, 0] = x[1, 7] = np.nan
    k = {"k": np.array([4], np.int64)}
    model = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=largest)], {"x": x}, ["v", "i"],
                       k, opset=11)
    om2gen.compile(model, tmp_path / "model.om2")
    with om2gen.load(tmp_path / "model.om2") as m:
        got = m.run({"x": x})
    ref_v, ref_i = ort_run(model, {"x": x})
    np.testing.assert_array_equal(got["i"], ref_i)
    np.testing.assert_allclose(got["v"], ref_v, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64])
def test_topk_dtypes(dtype, tmp_path):
    x = (rand(3, 20, seed=4) * 50).astype(dtype)
    check_op("TopK", {"x": x}, {"axis": 1}, consts={"k": np.array([6], np.int64)}, n_outputs=2, opset=11,
             tmp_path=tmp_path)


def test_topk_opset1_attribute(tmp_path):
    check_op("TopK", {"x": rand(4, 9, seed=5)}, {"k": 3}, n_outputs=2, opset=9, tmp_path=tmp_path)


def test_topk_opset10_input(tmp_path):
    check_op("TopK", {"x": rand(4, 9, seed=6)}, {"axis": 0}, consts={"k": np.array([2], np.int64)},
             n_outputs=2, opset=10, tmp_path=tmp_path)


def test_topk_unsorted_is_a_valid_order(tmp_path):
    # sorted=0 leaves the order to the implementation (om2gen's is sorted): compare as sets
    x = rand(3, 30, seed=7)
    model = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], sorted=0)], {"x": x}, ["v", "i"],
                       {"k": np.array([5], np.int64)}, opset=11)
    om2gen.compile(model, tmp_path / "model.om2")
    with om2gen.load(tmp_path / "model.om2") as m:
        got = m.run({"x": x})
    ref_v, ref_i = ort_run(model, {"x": x})
    np.testing.assert_array_equal(np.sort(got["i"], axis=1), np.sort(ref_i, axis=1))
    np.testing.assert_array_equal(np.take_along_axis(x, got["i"], axis=1), got["v"])
