"""Cast and CastLike (om2gen/ops/cast.py) against ONNX Runtime, bit-exact."""
import numpy as np
import pytest
from helpers import ort_run
from onnx import helper
from test_math import node_model, run

import om2gen

COVERS = {"Cast", "CastLike"}

DTYPES = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
          np.int64, np.uint64, np.bool_]


def _values(dtype) -> np.ndarray:
    """Values every target can hold exactly or by a defined rule (fractions, signs, extremes)."""
    d = np.dtype(dtype)
    if d == np.bool_:
        return np.array([True, False, True, True])
    if d.kind == "f":
        return np.array([0.0, -0.0, 0.4, 0.5, 1.5, 2.5, -0.6, -1.5, 3.99, 100.7, 127.0, -128.0, 65504.0, 200.9],
                        dtype)
    info = np.iinfo(d)
    return np.array([0, 1, 2, info.max, info.min, 100, 7, info.max // 3], dtype)


def _check_exact(model, feeds, tmp_path):
    path = tmp_path / "model.om2"
    om2gen.compile(model, path)
    with om2gen.load(path) as m:
        got = m.run(feeds)["out"]
    ref = ort_run(model, feeds)[0]
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("to", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("src", DTYPES, ids=lambda d: np.dtype(d).name)
def test_cast_every_pair(src, to, tmp_path):
    x = _values(src)
    if np.dtype(src).kind == "f" and np.dtype(to).kind in "iu":
        # only values in the target's range: out-of-range float -> int is undefined in C and in ORT
        info = np.iinfo(to)
        wide = x.astype(np.float64)
        x = x[(wide >= info.min) & (wide <= info.max)]
    to_onnx = helper.np_dtype_to_tensor_dtype(np.dtype(to))
    _check_exact(node_model("Cast", {"x": x}, {"to": to_onnx}), {"x": x}, tmp_path)


def test_float_to_float16_rounds_to_nearest_even(tmp_path):
    # every float16 boundary neighbourhood: ties, just-above/below ties, subnormals, overflow, NaN
    h = np.arange(0, 0x7c01, 7, dtype=np.uint16).view(np.float16).astype(np.float32)
    nxt = np.nextafter(h.astype(np.float16), np.float16(np.inf)).astype(np.float32)
    mid = (h + nxt) / 2
    x = np.concatenate([h, mid, np.nextafter(mid, np.float32(0)), np.nextafter(mid, np.float32(np.inf)),
                        [65519.996, 65520.0, 1e5, np.inf, np.nan, 2.0 ** -25, 2.0 ** -25 * 1.0001, 1e-30]])
    x = np.concatenate([x, -x]).astype(np.float32)
    got = run("Cast", {"x": x}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(np.float16))}, tmp_path=tmp_path)
    with np.errstate(over="ignore"):
        ref = x.astype(np.float16)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint16), ref[~nan].view(np.uint16))


def test_double_to_float16_rounds_once(tmp_path):
    # doubles just off a float16 tie, which a double -> float -> half conversion rounds twice
    h = np.arange(0x0400, 0x7bff, 97, dtype=np.uint16).view(np.float16).astype(np.float64)
    nxt = np.nextafter(h.astype(np.float16), np.float16(np.inf)).astype(np.float64)
    mid = (h + nxt) / 2
    x = np.concatenate([mid, mid * (1 + 2.0 ** -40), mid * (1 - 2.0 ** -40), [1e300, -1e300, np.inf, 5e-324]])
    got = run("Cast", {"x": x}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(np.float16))}, tmp_path=tmp_path)
    with np.errstate(over="ignore"):
        ref = x.astype(np.float16)
    np.testing.assert_array_equal(got.view(np.uint16), ref.view(np.uint16))


def test_float16_to_float_is_exact(tmp_path):
    x = np.arange(0, 1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got = run("Cast", {"x": x}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))}, tmp_path=tmp_path)
    ref = x.astype(np.float32)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), ref[~nan].view(np.uint32))


def test_float_to_bool_and_specials(tmp_path):
    x = np.array([np.nan, 0.0, -0.0, 1e-45, -np.inf], np.float32)
    _check_exact(node_model("Cast", {"x": x}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(np.bool_))}),
                 {"x": x}, tmp_path)


@pytest.mark.parametrize("opset", [6, 9, 13, 19, 21])
def test_cast_opsets(opset, tmp_path):
    if opset == 6:
        opset = 7   # ONNX Runtime starts at opset 7
    x = np.array([1.5, -2.7, 3.0], np.float32)
    _check_exact(node_model("Cast", {"x": x}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(np.int64))},
                            opset=opset), {"x": x}, tmp_path)


def test_cast_same_type_is_a_view(tmp_path):
    x = np.array([1.5, -2.7, 3.0], np.float32)
    _check_exact(node_model("Cast", {"x": x}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))}),
                 {"x": x}, tmp_path)


@pytest.mark.parametrize("src,to", [(np.float32, np.float16), (np.float16, np.float32), (np.int64, np.float32),
                                    (np.float32, np.int32), (np.float64, np.bool_)])
def test_castlike(src, to, tmp_path):
    x = _values(src)[:6]
    like = np.zeros((2, 2), to)
    _check_exact(node_model("CastLike", {"x": x, "like": like}, opset=15), {"x": x, "like": like}, tmp_path)


def test_castlike_opset19_constant_target(tmp_path):
    x = np.array([1.25, -7.5], np.float32)
    model = node_model("CastLike", {"x": x}, {"saturate": 1}, opset=19, consts={"like": np.zeros(3, np.int8)})
    _check_exact(model, {"x": x}, tmp_path)


def test_cast_to_unsupported_dtype_is_named(tmp_path):
    from onnx import TensorProto
    model = node_model("Cast", {"x": np.ones(3, np.float32)}, {"to": TensorProto.BFLOAT16})
    with pytest.raises(om2gen.UnsupportedOpError, match="BFLOAT16"):
        om2gen.compile(model, tmp_path / "m.om2")
