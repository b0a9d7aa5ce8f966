"""Element-wise ops with broadcasting, against ONNX Runtime."""
import numpy as np
import pytest
from helpers import check_op, rand

COVERS = {"Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Clip", "Identity", "Dropout"}

BROADCAST_CASES = [
    ((2, 3, 4), (2, 3, 4)),
    ((2, 3, 4), (4,)),
    ((2, 3, 4), (3, 1)),
    ((1, 3, 1, 5), (2, 1, 4, 1)),
    ((5,), ()),
    ((), ()),
    ((64, 1024), (1024,)),
    ((3, 1, 70000), (1, 2, 1)),
]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("sa,sb", BROADCAST_CASES, ids=lambda s: "x".join(map(str, s)) or "scalar")
def test_binary_broadcast(op, sa, sb, tmp_path):
    a = rand(*sa, seed=1)
    b = rand(*sb, seed=2, low=0.5, high=2.0)
    check_op(op, {"a": a, "b": b}, tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["Add", "Mul", "Sub"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_binary_int(op, dtype, tmp_path):
    a = (rand(3, 4, seed=3) * 100).astype(dtype)
    b = (rand(4, seed=4) * 100).astype(dtype)
    check_op(op, {"a": a, "b": b}, tmp_path=tmp_path)


def test_binary_constant_operand(tmp_path):
    check_op("Mul", {"a": rand(2, 8)}, consts={"w": rand(8, seed=5)}, tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh"])
@pytest.mark.parametrize("shape", [(7,), (2, 3, 5, 5), (100000,)])
def test_unary(op, shape, tmp_path):
    check_op(op, {"x": rand(*shape, seed=6, low=-8, high=8)}, tmp_path=tmp_path)


def test_clip_inputs(tmp_path):
    check_op("Clip", {"x": rand(4, 9, low=-10, high=10)},
             consts={"lo": np.array(-1.5, np.float32), "hi": np.array(2.0, np.float32)}, tmp_path=tmp_path)


def test_clip_only_max(tmp_path):
    check_op("Clip", {"x": rand(4, 9, low=-10, high=10)}, consts={"hi": np.array(6.0, np.float32)},
             input_names=["x", "", "hi"], tmp_path=tmp_path)


def test_clip_opset6_attributes(tmp_path):
    check_op("Clip", {"x": rand(30, low=-10, high=10)}, {"min": -2.0, "max": 3.0}, opset=6, tmp_path=tmp_path)


def test_identity_and_dropout(tmp_path):
    check_op("Identity", {"x": rand(3, 4)}, tmp_path=tmp_path)
    (tmp_path / "d").mkdir()
    check_op("Dropout", {"x": rand(3, 4)}, tmp_path=tmp_path / "d")
