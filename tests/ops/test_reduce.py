"""Reductions, GlobalMaxPool/GlobalLpPool, ArgMax/ArgMin and CumSum against ONNX Runtime."""
import numpy as np
import pytest
from helpers import check_op, make_model, ort_run, rand
from onnx import helper

import om2gen

REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
COVERS = set(REDUCE_OPS) | {"GlobalMaxPool", "GlobalLpPool", "ArgMax", "ArgMin", "CumSum"}

# (shape, axes or None for "all", keepdims)
AXES_CASES = {
    "last": ((2, 3, 5), [-1], 1),
    "first": ((4, 3, 5), [0], 0),
    "middle": ((2, 7, 5), [1], 1),
    "two_contiguous": ((2, 3, 4, 5), [2, 3], 0),
    "non_contiguous": ((2, 3, 4, 5), [0, 2], 1),
    "outer_and_inner": ((3, 4, 5, 6), [0, 3], 0),
    "negative_mixed": ((2, 3, 4, 5), [-3, -1], 1),
    "all_default": ((3, 4, 5), None, 1),
    "all_no_keepdims": ((3, 4, 5), None, 0),
    "size1_axis": ((3, 1, 5), [1], 0),
    "vector": ((37,), [0], 0),
    "wide_inner": ((3, 2000), [0], 1),
}


def check_with_infinities(op, inputs, attrs, consts, opset, tmp_path):
    """check_op for results that hold infinities (helpers.assert_close measures |got - ref|, NaN for inf)."""
    node = helper.make_node(op, list(inputs) + list(consts), ["y0"], **attrs)
    model = make_model([node], inputs, ["y0"], consts, opset)
    om2gen.compile(model, tmp_path / "model.om2")
    with om2gen.load(tmp_path / "model.om2") as m:
        got = m.run(inputs)["y0"]
    ref = ort_run(model, inputs)[0]
    assert got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def _input(op, shape, seed=1):
    if op == "ReduceProd":
        return rand(*shape, seed=seed, low=0.8, high=1.2)
    if op == "ReduceLogSum":
        return rand(*shape, seed=seed, low=0.1, high=2.0)
    return rand(*shape, seed=seed, low=-3.0, high=3.0)


@pytest.mark.parametrize("case", sorted(AXES_CASES))
@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_axes_input(op, case, tmp_path):
    shape, axes, keepdims = AXES_CASES[case]
    consts = {} if axes is None else {"axes": np.array(axes, np.int64)}
    check_op(op, {"x": _input(op, shape)}, {"keepdims": keepdims}, consts=consts, opset=18, tmp_path=tmp_path)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("case", ["middle", "non_contiguous", "all_default"])
def test_reduce_axes_attribute(op, case, tmp_path):
    shape, axes, keepdims = AXES_CASES[case]
    attrs = {"keepdims": keepdims}
    if axes is not None:
        attrs["axes"] = axes
    check_op(op, {"x": _input(op, shape)}, attrs, opset=11 if op != "ReduceSum" else 12, tmp_path=tmp_path)


def test_reduce_sum_opset13_axes_input(tmp_path):
    check_op("ReduceSum", {"x": rand(2, 3, 4)}, {"keepdims": 0}, consts={"axes": np.array([0, 2], np.int64)},
             opset=13, tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"])
def test_reduce_noop_with_empty_axes(op, tmp_path):
    check_op(op, {"x": rand(3, 4)}, {"noop_with_empty_axes": 1}, consts={"axes": np.array([], np.int64)},
             opset=18 if op != "ReduceSum" else 13, tmp_path=tmp_path)


def test_reduce_empty_axes_means_all(tmp_path):
    check_op("ReduceMean", {"x": rand(3, 4)}, {"keepdims": 0}, consts={"axes": np.array([], np.int64)},
             opset=18, tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceL2", "ReduceLogSumExp"])
@pytest.mark.parametrize("shape,axes", [((1 << 20,), [0]), ((64, 40000), [1]), ((30000, 48), [0]),
                                        ((100, 300, 20), [0, 2])], ids=["1M", "rows", "cols", "outer_inner"])
def test_reduce_large_accuracy(op, shape, axes, tmp_path):
    # an offset mean makes naive float32 accumulation drift well past the tolerance
    x = rand(*shape, seed=3, low=0.0, high=2.0)
    check_op(op, {"x": x}, {"keepdims": 0}, consts={"axes": np.array(axes, np.int64)}, opset=18,
             tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_reduce_int(op, dtype, tmp_path):
    x = (rand(3, 4, 5, seed=4) * (3 if op == "ReduceProd" else 1000)).astype(dtype)
    check_op(op, {"x": x}, {"keepdims": 0}, consts={"axes": np.array([0, 2], np.int64)},
             opset=18, tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_uint8_and_bool(op, tmp_path):
    check_op(op, {"x": (rand(4, 6, seed=5, low=0, high=255)).astype(np.uint8)}, {"keepdims": 1},
             consts={"axes": np.array([1], np.int64)}, opset=18, tmp_path=tmp_path)
    (tmp_path / "b").mkdir()
    check_op(op, {"x": rand(4, 6, seed=6) > 0.5}, {"keepdims": 0}, consts={"axes": np.array([0], np.int64)},
             opset=20, tmp_path=tmp_path / "b")


def test_reduce_float64(tmp_path):
    check_op("ReduceLogSumExp", {"x": rand(5, 7, dtype=np.float64)}, {"keepdims": 0},
             consts={"axes": np.array([1], np.int64)}, opset=18, tmp_path=tmp_path)


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_empty_set(op, tmp_path):
    check_with_infinities(op, {"x": np.zeros((2, 0, 4), np.float32)}, {"keepdims": 1},
                          {"axes": np.array([1], np.int64)}, 18, tmp_path)


def test_reduce_logsumexp_large_values(tmp_path):
    x = rand(4, 50, seed=7, low=-1000, high=1000)
    x[1] = -np.inf
    check_with_infinities("ReduceLogSumExp", {"x": x}, {"keepdims": 0}, {"axes": np.array([1], np.int64)}, 18,
                          tmp_path)


def test_reduce_scalar_input(tmp_path):
    check_op("ReduceL2", {"x": np.array(-2.5, np.float32)}, {"keepdims": 0}, opset=18, tmp_path=tmp_path)


@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (1, 8, 4, 4, 3), (2, 4, 9)])
def test_global_max_pool(shape, tmp_path):
    check_op("GlobalMaxPool", {"x": rand(*shape, seed=8)}, tmp_path=tmp_path)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lp_pool(p, tmp_path):
    check_op("GlobalLpPool", {"x": rand(2, 3, 5, 6, seed=9)}, {"p": p}, tmp_path=tmp_path)


ARG_CASES = {
    "axis0": ((4, 5, 6), 0, 1),
    "axis1_nokeep": ((4, 5, 6), 1, 0),
    "last": ((4, 5, 6), -1, 1),
    "wide_inner": ((7, 1000), 0, 0),
    "vector": ((50,), 0, 0),
}


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("case", sorted(ARG_CASES))
@pytest.mark.parametrize("last", [0, 1])
def test_arg_reduce(op, case, last, tmp_path):
    shape, axis, keepdims = ARG_CASES[case]
    # few distinct values: ties exercise select_last_index
    x = np.round(rand(*shape, seed=10) * 3).astype(np.float32)
    check_op(op, {"x": x}, {"axis": axis, "keepdims": keepdims, "select_last_index": last}, opset=13,
             tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_reduce_int_opset11(op, tmp_path):
    x = (rand(3, 8, seed=11) * 5).astype(np.int64)
    check_op(op, {"x": x}, {"axis": 1}, opset=11, tmp_path=tmp_path)


CUMSUM_CASES = {
    "1d": ((10,), 0),
    "2d_axis0": ((6, 7), 0),
    "2d_axis1": ((6, 7), 1),
    "3d_negative": ((3, 4, 5), -2),
    "long_rows": ((4, 5000), 1),
    "wide_inner": ((50, 600), 0),
}


@pytest.mark.parametrize("case", sorted(CUMSUM_CASES))
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum(case, exclusive, reverse, tmp_path):
    shape, axis = CUMSUM_CASES[case]
    check_op("CumSum", {"x": rand(*shape, seed=12)}, {"exclusive": exclusive, "reverse": reverse},
             consts={"axis": np.array(axis, np.int64)}, opset=14, tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_cumsum_int(dtype, tmp_path):
    x = (rand(4, 9, seed=13) * 100).astype(dtype)
    check_op("CumSum", {"x": x}, {"reverse": 1}, consts={"axis": np.array([1], np.int32)}, opset=14,
             tmp_path=tmp_path)
