"""The uint8 form that gives ORT's exact int8 answer where its int8 products saturate
(tests/ort_exact.py): forced on any CPU, it equals the exact integer product."""
import numpy as np
import ort_exact
import pytest
from helpers import _ort_run
from onnx import TensorProto, helper
from test_int8_matmul import ints, model


@pytest.mark.parametrize("a_type", [np.uint8, np.int8])
@pytest.mark.parametrize("zero_points", [True, False])
def test_the_uint8_form_is_exact(a_type, zero_points, monkeypatch):
    monkeypatch.setattr(ort_exact, "ORT_INT8_EXACT", False)
    rng = np.random.default_rng(1)
    a, b = ints(rng, a_type, (2, 37, 70)), ints(rng, np.int8, (70, 45))
    za, zb = (np.array(7, a_type), rng.integers(-20, 20, 45).astype(np.int8)) if zero_points else (0, 0)
    names, consts = ["a", "b"], {"b": b}
    if zero_points:
        names, consts = names + ["za", "zb"], {**consts, "za": za, "zb": zb}
    m = model([helper.make_node("MatMulInteger", names, ["y"])], {"a": a}, consts,
              {"y": (TensorProto.INT32, (2, 37, 45))})
    exact = (a.astype(np.int64) - np.int64(za)) @ (b.astype(np.int64) - np.asarray(zb, np.int64))
    assert ort_exact._shifted(m) is not None
    np.testing.assert_array_equal(ort_exact.run_exact(m, {"a": a}, _ort_run)[0], exact)


def test_int8_outputs_come_back_as_int8(monkeypatch):
    monkeypatch.setattr(ort_exact, "ORT_INT8_EXACT", False)
    x = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
    consts = {"s": np.float32(0.5), "z": np.int8(-3), "s2": np.float32(0.25), "z2": np.int8(4)}
    m = model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["f"]),
               helper.make_node("QuantizeLinear", ["f", "s2", "z2"], ["y"])],
              {"x": x}, consts, {"y": (TensorProto.INT8, (16, 16))})
    y = ort_exact.run_exact(m, {"x": x}, _ort_run)[0]
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, np.clip(np.rint((x.astype(np.float32) + 3) * 2) + 4, -128, 127))
