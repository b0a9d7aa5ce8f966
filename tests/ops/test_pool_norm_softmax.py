"""Pooling, BatchNormalization and Softmax against ONNX Runtime."""
import numpy as np
import pytest
from onnx import helper

import om2gen
from helpers import check_op, make_model, rand

COVERS = {"MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "BatchNormalization", "Softmax"}

POOLS = {
    "k2s2": {"kernel_shape": [2, 2], "strides": [2, 2]},
    "k3s1p1": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
    "k3s2p1": {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    "ceil": {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    "asym_pads": {"kernel_shape": [2, 3], "pads": [0, 1, 1, 2], "strides": [1, 2]},
    "same_upper": {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    "same_lower": {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"},
    "valid": {"kernel_shape": [3, 2], "strides": [2, 3], "auto_pad": "VALID"},
}

# (input shape, attributes) for 1-D and 3-D windows
POOLS_ND = {
    "1d": ((2, 3, 17), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    "1d_ceil": ((1, 2, 16), {"kernel_shape": [4], "strides": [3], "ceil_mode": 1}),
    "1d_same_upper": ((1, 2, 15), {"kernel_shape": [4], "strides": [2], "auto_pad": "SAME_UPPER"}),
    "3d": ((1, 2, 6, 7, 8), {"kernel_shape": [2, 3, 2], "strides": [2, 2, 1]}),
    "3d_pads_ceil": ((2, 2, 7, 6, 9), {"kernel_shape": [3, 2, 3], "strides": [2, 2, 2], "pads": [1, 0, 1, 1, 1, 0],
                                       "ceil_mode": 1}),
}

# dilated windows (AveragePool needs opset 19 for them)
DILATED = {
    "2d": ((1, 2, 12, 11), {"kernel_shape": [3, 3], "dilations": [2, 2]}),
    "2d_pads_strides": ((1, 2, 12, 11), {"kernel_shape": [2, 3], "dilations": [3, 2], "strides": [2, 1],
                                         "pads": [1, 1, 1, 2]}),
    "2d_ceil": ((1, 1, 10, 10), {"kernel_shape": [3, 2], "dilations": [2, 3], "strides": [2, 2], "ceil_mode": 1,
                                 "pads": [1, 1, 1, 1]}),
    "1d": ((1, 3, 20), {"kernel_shape": [3], "dilations": [3], "pads": [2, 2]}),
    "3d": ((1, 1, 8, 9, 7), {"kernel_shape": [2, 2, 2], "dilations": [2, 3, 1], "strides": [1, 2, 2]}),
}


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("case", sorted(POOLS))
def test_pool(op, case, tmp_path):
    opset = 18 if op == "LpPool" else 17
    check_op(op, {"x": rand(2, 3, 9, 11, seed=1)}, POOLS[case], opset=opset, tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("case", sorted(POOLS_ND))
def test_pool_1d_3d(op, case, tmp_path):
    shape, attrs = POOLS_ND[case]
    check_op(op, {"x": rand(*shape, seed=1)}, attrs, opset=18, tmp_path=tmp_path)


@pytest.mark.parametrize("case", ["k3s1p1", "k3s2p1", "asym_pads", "ceil"])
def test_average_pool_count_include_pad(case, tmp_path):
    check_op("AveragePool", {"x": rand(1, 2, 9, 11, seed=1)}, dict(POOLS[case], count_include_pad=1),
             tmp_path=tmp_path)


def test_average_pool_count_include_pad_3d(tmp_path):
    shape, attrs = POOLS_ND["3d_pads_ceil"]
    check_op("AveragePool", {"x": rand(*shape, seed=1)}, dict(attrs, count_include_pad=1), tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("case", sorted(DILATED))
def test_pool_dilations(op, case, tmp_path):
    shape, attrs = DILATED[case]
    check_op(op, {"x": rand(*shape, seed=1)}, attrs, opset=19, tmp_path=tmp_path)


@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool_dilations_count_include_pad(include_pad, tmp_path):
    shape, attrs = DILATED["2d_pads_strides"]
    check_op("AveragePool", {"x": rand(*shape, seed=1)}, dict(attrs, count_include_pad=include_pad), opset=19,
             tmp_path=tmp_path)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool_p(p, tmp_path):
    check_op("LpPool", {"x": rand(1, 2, 8, 9, seed=1)}, {"kernel_shape": [3, 2], "p": p, "pads": [1, 0, 1, 1]},
             tmp_path=tmp_path)


INDEXED = {
    "2d": ((2, 3, 9, 11), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "2d_dilations_ceil": ((1, 2, 10, 9), {"kernel_shape": [2, 2], "dilations": [2, 3], "strides": [2, 2],
                                          "ceil_mode": 1}),
    "1d": ((2, 2, 13), {"kernel_shape": [3], "strides": [2], "pads": [1, 0]}),
    "3d": ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [2, 2, 2], "pads": [0, 1, 0, 1, 1, 1]}),
}


# (input shape, attributes) around MaxPool's unchecked interior-column loop: borders on either side,
# odd widths, ceil_mode, asymmetric pads, strides 1 and 2, kernels 2 and 3, rows with no interior
FAST_MAX = {
    "k3s2p1_odd": ((1, 3, 13, 15), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "k3s2_ceil": ((1, 2, 11, 13), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    "k3s2p1_ceil": ((1, 2, 12, 14), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                     "ceil_mode": 1}),
    "k2s2_odd": ((1, 2, 9, 17), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    "k2s1_pads": ((1, 2, 6, 19), {"kernel_shape": [2, 2], "pads": [1, 0, 0, 1]}),
    "k3s1p1": ((2, 2, 7, 21), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    "k3s1_asym": ((1, 2, 8, 10), {"kernel_shape": [3, 2], "pads": [0, 1, 2, 0]}),
    "k3s2_wide_pads": ((1, 2, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [2, 2, 2, 2]}),
    "no_interior": ((1, 2, 5, 3), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 2, 1, 2]}),
    "width_eq_kernel": ((1, 2, 6, 3), {"kernel_shape": [3, 3], "strides": [2, 1]}),
}


@pytest.mark.parametrize("case", sorted(FAST_MAX))
def test_maxpool_interior_columns(case, tmp_path):
    shape, attrs = FAST_MAX[case]
    check_op("MaxPool", {"x": rand(*shape, seed=2)}, attrs, tmp_path=tmp_path)


def test_maxpool_nan_propagates(tmp_path):
    """A NaN in a window gives NaN, in the border columns and the interior alike (numpy's max; ONNX
    Runtime's MaxPool differs here, so the reference is numpy)."""
    x = rand(1, 2, 11, 13, seed=3)
    x[0, 0, 4, 0] = x[0, 0, 5, 6] = x[0, 1, 0, 12] = x[0, 1, 7, 7] = np.nan
    model = make_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                                         pads=[1, 1, 1, 1])], {"x": x}, ["y"])
    om2gen.compile(model, tmp_path / "model.om2")
    with om2gen.load(tmp_path / "model.om2") as m:
        got = m.run({"x": x})["y"]
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    ref = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))[:, :, ::2, ::2].max(axis=(4, 5))
    assert np.isnan(ref).any() and not np.isnan(ref).all()
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("case", sorted(INDEXED))
def test_maxpool_indices(case, storage_order, tmp_path):
    shape, attrs = INDEXED[case]
    check_op("MaxPool", {"x": rand(*shape, seed=1)}, dict(attrs, storage_order=storage_order), n_outputs=2,
             tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [np.uint8, np.float64])
def test_maxpool_dtypes(dtype, tmp_path):
    x = np.random.default_rng(0).integers(0, 255, (1, 3, 8, 9)).astype(dtype)
    check_op("MaxPool", {"x": x}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
             n_outputs=2, tmp_path=tmp_path)


@pytest.mark.parametrize("op,opset", [("MaxPool", 1), ("MaxPool", 8), ("AveragePool", 7),
                                      ("AveragePool", 10), ("LpPool", 2), ("LpPool", 11)])
def test_pool_old_opsets(op, opset, tmp_path):
    check_op(op, {"x": rand(1, 2, 7, 8, seed=1)}, {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1]}, opset=opset,
             tmp_path=tmp_path)


@pytest.mark.parametrize("shape", [(1, 8, 7, 7), (2, 3, 5, 1), (1, 4, 1, 1)])
def test_global_average_pool(shape, tmp_path):
    check_op("GlobalAveragePool", {"x": rand(*shape, seed=1)}, tmp_path=tmp_path)


@pytest.mark.parametrize("shape", [(2, 4, 5, 5), (3, 4), (1, 4, 6)])
def test_batchnorm(shape, tmp_path):
    c = shape[1]
    rng = np.random.default_rng(0)
    consts = {"s": rand(c, seed=1), "b": rand(c, seed=2), "m": rand(c, seed=3),
              "v": rng.uniform(0.1, 2.0, c).astype(np.float32)}
    check_op("BatchNormalization", {"x": rand(*shape)}, {"epsilon": 1e-3}, consts=consts, tmp_path=tmp_path)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
def test_softmax(opset, axis, tmp_path):
    check_op("Softmax", {"x": rand(2, 3, 5, low=-5, high=5)}, {"axis": axis}, opset=opset, tmp_path=tmp_path)


def test_softmax_default_axis_opset11(tmp_path):
    check_op("Softmax", {"x": rand(2, 3, 4)}, opset=11, tmp_path=tmp_path)


def test_softmax_large_values(tmp_path):
    check_op("Softmax", {"x": rand(4, 1000, low=-100, high=100)}, tmp_path=tmp_path)
