"""QuantizeLinear and DequantizeLinear against ONNX Runtime, bit for bit: every opset that changed
them, per tensor and per axis, with and without a zero point, each integer type ORT runs, and
the edge values (ties that round to even, NaN, infinities, values beyond the type's range)."""
import numpy as np
import onnx
import pytest
from helpers import compile_and_run, ort_run
from onnx import helper, numpy_helper

import om2gen
from om2gen.errors import UnsupportedOpError

COVERS = {"QuantizeLinear", "DequantizeLinear"}

RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535)}
SHAPE = (2, 3, 4, 5)


def _model(nodes, inputs, outputs, inits, opset):
    graph = helper.make_graph(
        nodes, "q", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                     for n, a in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _params(dt, axis, per_axis, seed=1):
    rng = np.random.default_rng(seed)
    shape = (SHAPE[axis],) if per_axis else ()
    scale = rng.uniform(0.01, 0.3, shape).astype(np.float32)
    lo, hi = RANGES[dt]
    zp = rng.integers(lo // 4, hi // 4 + 1, shape).astype(dt)
    return scale, zp


def _edge_input(seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(SHAPE) * 20).astype(np.float32)
    x.flat[:8] = [np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0, 1e-30]
    return x


def _ort_unoptimized(model, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _run(model, feeds, tmp_path):
    got, _ = compile_and_run(model, feeds, tmp_path)
    return got, ort_run(model, feeds)


CASES = [  # opset, dtype, axis attribute (None: absent), per-axis scale, zero point given
    (10, "uint8", None, False, True),
    (10, "int8", None, False, True),
    (10, "uint8", None, False, False),
    (13, "int8", 1, True, True),
    (13, "uint8", -1, True, True),
    (13, "uint8", 0, False, False),
    (19, "uint8", 2, True, True),
    (21, "int16", 1, True, True),
    (21, "uint16", 0, True, True),
    (21, "int8", 3, True, False),
]


@pytest.mark.parametrize("opset,dt,axis,per_axis,with_zp", CASES)
def test_quantize_dequantize_match_onnxruntime_bit_for_bit(opset, dt, axis, per_axis, with_zp, tmp_path):
    a = axis if axis is not None else 1
    scale, zp = _params(dt, a, per_axis)
    inits = {"s": scale, **({"z": zp} if with_zp else {})}
    attrs = {} if axis is None else {"axis": axis}
    if not with_zp and dt != "uint8":
        attrs["output_dtype"] = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    q_in = ["x", "s"] + (["z"] if with_zp else [])
    nodes = [helper.make_node("QuantizeLinear", q_in, ["q"], **attrs),
             helper.make_node("DequantizeLinear", ["q"] + q_in[1:], ["y"],
                              **{k: v for k, v in attrs.items() if k != "output_dtype"})]
    model = _model(nodes, {"x": _edge_input()}, ["q", "y"], inits, opset)
    got, ref = _run(model, {"x": _edge_input()}, tmp_path)
    assert got["q"].dtype == ref[0].dtype == np.dtype(dt)
    np.testing.assert_array_equal(got["q"], ref[0])
    np.testing.assert_array_equal(got["y"], ref[1])


def test_quantize_rounds_half_to_even_and_saturates(tmp_path):
    """x / scale lands exactly on .5 (scale 1): ties go to the even integer; beyond the range
    the result saturates, and NaN gives the type's lowest value less nothing (zero point 0)."""
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, 300, -300, np.nan, 3.49999976],
                 np.float32)
    model = _model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])], {"x": x}, ["q"],
                   {"s": np.float32(1.0), "z": np.int8(0)}, 13)
    got, ref = _run(model, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got["q"], ref[0])
    assert got["q"][:8].tolist() == [0, 2, 2, 0, -2, -2, 126, 127]


@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "uint16", "int32"])
def test_dequantize_every_input_type(dt, tmp_path):
    rng = np.random.default_rng(3)
    info = np.iinfo(dt)
    x = rng.integers(info.min, info.max, SHAPE, endpoint=True, dtype=np.int64).astype(dt)
    x.flat[:2] = [info.min, info.max]
    zp = np.array(0 if dt == "int32" else rng.integers(info.min // 2, info.max // 2), dt)
    model = _model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])], {"x": x}, ["y"],
                   {"s": np.float32(0.0371), "z": zp}, 21)
    got, ref = _run(model, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got["y"], ref[0])


def test_constant_weight_dequantize_folds_to_floats(tmp_path):
    """A weight's DequantizeLinear (int8, per output channel, as quantize_static writes it) is
    evaluated at compile time: the compiled graph has no DequantizeLinear and the MatMul reads the
    floats. ORT's optimiser turns DequantizeLinear + MatMul into an integer MatMul that quantizes x
    on the fly (other numbers: that fusion is int8k's to match), so the reference is ORT with its
    graph optimisations off, which computes the model as ONNX defines it."""
    rng = np.random.default_rng(4)
    w = rng.integers(-127, 128, (8, 6)).astype(np.int8)
    ws = rng.uniform(0.001, 0.02, 6).astype(np.float32)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    nodes = [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=1),
             helper.make_node("MatMul", ["x", "wf"], ["y"])]
    model = _model(nodes, {"x": x}, ["y"], {"w": w, "ws": ws, "wz": np.zeros(6, np.int8)}, 13)
    got, ops = compile_and_run(model, {"x": x}, tmp_path)
    assert "DequantizeLinear" not in {n["op_type"] for n in ops}
    np.testing.assert_allclose(got["y"], _ort_unoptimized(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_blocked_quantization_is_refused_with_a_clear_error(tmp_path):
    x = np.zeros((2, 4), np.float32)
    model = _model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=2)], {"x": x},
                   ["q"], {"s": np.ones((2, 2), np.float32), "z": np.zeros((2, 2), np.uint8)}, 21)
    with pytest.raises(UnsupportedOpError, match="block_size 2"):
        om2gen.compile(model, tmp_path / "m.om2")

