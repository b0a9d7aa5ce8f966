"""Activations (om2gen/ops/activations.py) against ONNX Runtime."""
import numpy as np
import pytest
from helpers import rand
from test_math import check, check_specials

COVERS = {"HardSigmoid", "HardSwish", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "Gelu", "Softplus", "Softsign",
          "Mish", "ThresholdedRelu", "Shrink"}

# (op, attrs, opset)
CASES = [
    ("HardSigmoid", {}, 17), ("HardSigmoid", {"alpha": 0.5, "beta": 0.6}, 17),
    ("HardSwish", {}, 17),
    ("LeakyRelu", {}, 17), ("LeakyRelu", {"alpha": 0.3}, 17), ("LeakyRelu", {"alpha": 0.1}, 7),
    ("Elu", {}, 17), ("Elu", {"alpha": 2.5}, 17),
    ("Selu", {}, 17), ("Selu", {"alpha": 2.0, "gamma": 3.0}, 17),
    ("Celu", {}, 17), ("Celu", {"alpha": 2.0}, 17), ("Celu", {"alpha": 0.5}, 12),
    ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20),
    ("Softplus", {}, 17), ("Softsign", {}, 17), ("Mish", {}, 18),
    ("ThresholdedRelu", {}, 17), ("ThresholdedRelu", {"alpha": 2.0}, 17),
    ("Shrink", {}, 17), ("Shrink", {"bias": 1.5, "lambd": 2.0}, 17),
]


def _id(case):
    op, attrs, opset = case
    return op + "".join(f"_{k}{v}" for k, v in attrs.items()) + f"_v{opset}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
@pytest.mark.parametrize("shape", [(), (2, 3, 17), (4, 50000)], ids=["scalar", "2x3x17", "4x50000"])
def test_activation_float32(case, shape, tmp_path):
    op, attrs, opset = case
    check(op, {"x": rand(*shape, seed=7, low=-6, high=6)}, attrs, opset=opset, tmp_path=tmp_path)


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_activation_special_values(case, tmp_path):
    op, attrs, opset = case
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 100.0, -100.0, 1e-30], np.float32)
    if op in ("Gelu", "HardSwish", "Mish"):
        x = x[3:]   # ORT's approximations disagree with the formula at Inf
    check_specials(op, {"x": x}, attrs, opset=opset, tmp_path=tmp_path, rtol=1e-5, atol=1e-30)


# dtypes ONNX Runtime has kernels for
OTHER_FLOATS = [("HardSigmoid", np.float16), ("HardSwish", np.float16), ("LeakyRelu", np.float16),
                ("LeakyRelu", np.float64), ("Elu", np.float16), ("Selu", np.float16), ("Softplus", np.float16),
                ("Softsign", np.float16), ("Mish", np.float16), ("Mish", np.float64), ("ThresholdedRelu", np.float16),
                ("Shrink", np.float16), ("Shrink", np.float64), ("Gelu", np.float16)]


@pytest.mark.parametrize("op,dtype", OTHER_FLOATS, ids=[f"{o}-{np.dtype(d).name}" for o, d in OTHER_FLOATS])
def test_activation_other_floats(op, dtype, tmp_path):
    opset = 20 if op == "Gelu" else 18
    check(op, {"x": rand(3, 41, seed=8, low=-5, high=5).astype(dtype)}, opset=opset, tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint8])
def test_shrink_int(dtype, tmp_path):
    x = np.array([-3, -2, -1, 0, 1, 2, 3, 5] if np.dtype(dtype).kind == "i" else [0, 1, 2, 3, 5, 200], dtype)
    check("Shrink", {"x": x}, {"lambd": 1.5, "bias": 1.0}, tmp_path=tmp_path)


@pytest.mark.parametrize("sx,ss", [((2, 3, 4), (1,)), ((2, 3, 4), (4,)), ((2, 3, 4, 5), (3, 1, 1)),
                                   ((2, 3, 4), (2, 3, 4)), ((), ())])
def test_prelu_broadcast(sx, ss, tmp_path):
    check("PRelu", {"x": rand(*sx, seed=1, low=-3, high=3)}, consts={"slope": rand(*ss, seed=2)},
          tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int64])
def test_prelu_dtypes(dtype, tmp_path):
    x = (rand(3, 4, seed=1, low=-9, high=9)).astype(dtype)
    s = (rand(4, seed=2, low=-3, high=3)).astype(dtype)
    check("PRelu", {"x": x, "slope": s}, tmp_path=tmp_path)


def test_prelu_runtime_slope_opset7(tmp_path):
    check("PRelu", {"x": rand(2, 5, low=-2, high=2), "slope": rand(5, seed=4)}, opset=7, tmp_path=tmp_path)


def test_prelu_slope_must_broadcast_to_x(tmp_path):
    import om2gen
    from test_math import node_model
    model = node_model("PRelu", {"x": rand(3), "slope": rand(2, 3)})
    with pytest.raises(om2gen.ShapeError, match="slope"):
        om2gen.compile(model, tmp_path / "m.om2")


def test_prelu_opset6_slope_per_channel(tmp_path):
    # PRelu-6 (as exported by old PyTorch): a 1-D slope of C values applies along axis 1
    from test_math import run
    x = rand(2, 3, 4, seed=1, low=-2, high=2)
    s = np.array([0.1, 0.2, 0.3], np.float32)
    got = run("PRelu", {"x": x, "slope": s}, opset=6, tmp_path=tmp_path)
    np.testing.assert_allclose(got, np.where(x < 0, x * s[:, None], x), rtol=1e-6)
