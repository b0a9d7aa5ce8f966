"""com.microsoft QLinearSoftmax (ops/qlinear_softmax.py) against ONNX Runtime's kernel: ORT's
table of exp values, its float row sum and its rounding give equal bytes; and the QDQ form
DequantizeLinear -> Softmax -> QuantizeLinear folds into it (passes/qdq.py) as ORT folds it."""
import numpy as np
import pytest
from helpers import compile_and_run, ort_run
from onnx import TensorProto, helper, numpy_helper

COVERS = {"QLinearSoftmax"}

CASES = [("uint8", 0.05, 3, 1 / 256, 0, 64), ("uint8", 0.11, 130, 1 / 255, 7, 77),
         ("int8", 0.03, -5, 1 / 256, -128, 50), ("int8", 0.2, 10, 0.003, -100, 400)]


def _model(dt, sx, zx, sy, zy, shape, op="QLinearSoftmax", opset=13):
    t = TensorProto.UINT8 if dt == "uint8" else TensorProto.INT8
    inits = [numpy_helper.from_array(np.array(sx, np.float32), "sx"), numpy_helper.from_array(np.array(zx, dt), "zx"),
             numpy_helper.from_array(np.array(sy, np.float32), "sy"), numpy_helper.from_array(np.array(zy, dt), "zy")]
    node = helper.make_node("QLinearSoftmax", ["x", "sx", "zx", "sy", "zy"], ["y"], domain="com.microsoft", axis=-1,
                            opset=opset)
    graph = helper.make_graph([node], "qsm", [helper.make_tensor_value_info("x", t, shape)],
                              [helper.make_tensor_value_info("y", t, shape)], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


@pytest.mark.parametrize("dt,sx,zx,sy,zy,length", CASES)
def test_qlinear_softmax_equals_onnxruntime(dt, sx, zx, sy, zy, length, tmp_path):
    shape = (2, 3, length)
    lo, hi = (0, 256) if dt == "uint8" else (-128, 128)
    x = np.random.default_rng(length).integers(lo, hi, shape).astype(dt)
    model = _model(dt, sx, zx, sy, zy, shape)
    got, nodes = compile_and_run(model, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got["y"], ort_run(model, {"x": x})[0])
    assert [n["op_type"] for n in nodes] == ["QLinearSoftmax"]


@pytest.mark.parametrize("dt,zy", [("uint8", 100), ("int8", -128), ("int8", -100)])
def test_a_row_with_one_value_saturates_as_onnxruntime(dt, zy, tmp_path):
    """exp of the maximum is the whole sum: rint(floor(1 / y_scale)) = 256 plus the zero point
    is past the type's top, which ORT saturates."""
    x = np.full((1, 2, 8), 0 if dt == "uint8" else -128, dt)
    x[0, 0, 3] = 255 if dt == "uint8" else 127
    x[0, 1, :] = np.arange(8, dtype=dt) * 3
    model = _model(dt, 0.5, 0, 1 / 256, zy, (1, 2, 8))
    got, _ = compile_and_run(model, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got["y"], ort_run(model, {"x": x})[0])


@pytest.mark.parametrize("dt", ["uint8", "int8"])
def test_qdq_softmax_folds_into_qlinear_softmax(dt, tmp_path):
    z = np.array(120 if dt == "uint8" else -8, dt)
    zo = np.array(0 if dt == "uint8" else -128, dt)
    inits = {"s": np.float32(0.07), "z": z, "so": np.float32(1 / 256), "zo": zo}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xf"]),
             helper.make_node("Softmax", ["xf"], ["p"], axis=-1),
             helper.make_node("QuantizeLinear", ["p", "so", "zo"], ["pq"]),
             helper.make_node("DequantizeLinear", ["pq", "so", "zo"], ["y"])]
    graph = helper.make_graph(nodes, "qdq_softmax", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (4, 37))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (4, 37))],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = np.random.default_rng(1).uniform(-8, 8, (4, 37)).astype(np.float32)
    got, nodes = compile_and_run(model, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got["y"], ort_run(model, {"x": x})[0])
    assert "QLinearSoftmax" in [n["op_type"] for n in nodes]
