"""Pooling, BatchNormalization and Softmax against ONNX Runtime."""
import numpy as np
import pytest
from helpers import check_op, rand

COVERS = {"MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization", "Softmax"}

POOLS = {
    "k2s2": {"kernel_shape": [2, 2], "strides": [2, 2]},
    "k3s1p1": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
    "k3s2p1": {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    "ceil": {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    "asym_pads": {"kernel_shape": [2, 3], "pads": [0, 1, 1, 2], "strides": [1, 2]},
    "same_upper": {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    "same_lower": {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"},
}


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("case", sorted(POOLS))
def test_pool(op, case, tmp_path):
    check_op(op, {"x": rand(2, 3, 9, 11, seed=1)}, POOLS[case], tmp_path=tmp_path)


@pytest.mark.parametrize("case", ["k3s1p1", "k3s2p1", "asym_pads", "ceil"])
def test_average_pool_count_include_pad(case, tmp_path):
    check_op("AveragePool", {"x": rand(1, 2, 9, 11, seed=1)}, dict(POOLS[case], count_include_pad=1),
             tmp_path=tmp_path)


def test_maxpool_dilations(tmp_path):
    check_op("MaxPool", {"x": rand(1, 2, 12, 12)}, {"kernel_shape": [3, 3], "dilations": [2, 2]}, tmp_path=tmp_path)


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
