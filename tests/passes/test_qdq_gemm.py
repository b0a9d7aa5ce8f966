"""passes/qdq_gemm.py: DequantizeLinear -> Conv / MatMul / Gemm [-> QuantizeLinear] folds into
QLinearConv, QLinearMatMul, MatMulIntegerToFloat or QGemm as ONNX Runtime's QDQ transformer does;
the results equal ORT's (which folds the same way), and an incomplete pattern stays float."""
import numpy as np
import onnx
import pytest
from helpers import compile_and_run, ort_run
from onnx import helper, numpy_helper

SX, ZX = np.float32(0.04), np.uint8(120)      # the input's parameters
SY, ZY = np.float32(0.09), np.uint8(110)      # the output's


def _model(op, x_shape, w, attrs=None, *, bias=None, w_scale=np.float32(0.02), w_axis=None, out=(SY, ZY),
           relu=False, second_input=None, quantize_output=True, act_type=np.uint8, extra_reader=False):
    """x -> Q -> DQ -> op(DQ(x), DQ(w int8) [, DQ(bias int32)]) [-> Relu] [-> Q -> DQ] -> y."""
    zx = np.asarray(ZX if act_type == np.uint8 else np.int8(-8), act_type)
    zy = np.asarray(out[1] if act_type == np.uint8 else np.int8(5), act_type)
    wq = np.asarray(w, np.int8)
    ws = np.asarray(w_scale, np.float32)
    inits = {"sx": SX, "zx": zx, "sy": out[0], "zy": zy, "wq": wq, "ws": ws, "wz": np.zeros(ws.shape, np.int8)}
    dq_w = helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"], **({"axis": w_axis} if w_axis is not None
                                                                                else {}))
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xf"]), dq_w]
    ins = ["xf", "wf"]
    if second_input is not None:   # the second operand an activation too (a MatMul of two activations)
        ins = ["xf", "x2f"]
        nodes = nodes[:2] + [helper.make_node("QuantizeLinear", ["x2", "sx", "zx"], ["x2q"]),
                             helper.make_node("DequantizeLinear", ["x2q", "sx", "zx"], ["x2f"])]
    if bias is not None:
        if bias.dtype == np.int32:
            inits.update(bq=bias, bs=np.asarray(SX * ws, np.float32), bz=np.zeros(ws.shape, np.int32))
            nodes.append(helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bf"], axis=0))
            ins.append("bf")
        else:
            inits["bf_float"] = bias
            ins.append("bf_float")
    nodes.append(helper.make_node(op, ins, ["t"], **(attrs or {})))
    last = "t"
    if relu:
        nodes.append(helper.make_node("Relu", ["t"], ["tr"]))
        last = "tr"
    outputs = ["y"]
    if quantize_output:
        nodes += [helper.make_node("QuantizeLinear", [last, "sy", "zy"], ["tq"]),
                  helper.make_node("DequantizeLinear", ["tq", "sy", "zy"], ["y"])]
    else:
        nodes.append(helper.make_node("Identity", [last], ["y"]))
    if extra_reader:   # the quantized input read by a second DequantizeLinear that is an output
        nodes.append(helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x_again"]))
        outputs.append("x_again")
    inputs = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)]
    if second_input is not None:
        inputs.append(helper.make_tensor_value_info("x2", onnx.TensorProto.FLOAT, second_input))
    graph = helper.make_graph(nodes, "qdq_gemm", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _run(model, tmp_path, shapes, **options):
    rng = np.random.default_rng(0)
    feeds = {n: rng.uniform(-4, 4, s).astype(np.float32) for n, s in shapes.items()}
    got, nodes = compile_and_run(model, feeds, tmp_path, **options)
    ref = ort_run(model, feeds)
    return got, ref, [n["op_type"] for n in nodes]


RNG = np.random.default_rng(5)
W_CONV = RNG.integers(-127, 128, (6, 4, 3, 3))
W_MAT = RNG.integers(-127, 128, (24, 10))
BIAS = RNG.integers(-3000, 3000, 6).astype(np.int32)


@pytest.mark.parametrize("per_channel", [False, True])
def test_conv_becomes_qlinearconv(per_channel, tmp_path):
    scale = np.linspace(0.01, 0.03, 6).astype(np.float32) if per_channel else np.float32(0.02)
    model = _model("Conv", (1, 4, 9, 9), W_CONV, {"pads": [1, 1, 1, 1]}, bias=BIAS, w_scale=scale,
                   w_axis=0 if per_channel else None)
    got, ref, types = _run(model, tmp_path, {"x": (1, 4, 9, 9)})
    np.testing.assert_array_equal(got["y"], ref[0])
    assert "QLinearConv" in types and "Conv" not in types, types


def test_relu_made_redundant_by_the_quantize_is_dropped(tmp_path):
    """Q with zero point 0 (uint8) clips at 0 already: ORT drops the Relu, and so does om2gen."""
    model = _model("Conv", (1, 4, 9, 9), W_CONV, {"pads": [1, 1, 1, 1]}, bias=BIAS, out=(SY, np.uint8(0)), relu=True)
    got, ref, types = _run(model, tmp_path, {"x": (1, 4, 9, 9)})
    np.testing.assert_array_equal(got["y"], ref[0])
    assert "QLinearConv" in types and "Relu" not in types and "Clip" not in types, types


def test_relu_the_quantize_does_not_cover_keeps_the_float_path(tmp_path):
    model = _model("Conv", (1, 4, 9, 9), W_CONV, {"pads": [1, 1, 1, 1]}, bias=BIAS, relu=True)
    got, ref, types = _run(model, tmp_path, {"x": (1, 4, 9, 9)})
    assert "QLinearConv" not in types, types
    assert np.abs(got["y"] - ref[0]).max() <= SY * 1.001   # float Conv in both: within one step


def test_matmul_of_two_activations_becomes_qlinearmatmul(tmp_path):
    model = _model("MatMul", (2, 5, 24), W_MAT, second_input=(2, 24, 7))
    got, ref, types = _run(model, tmp_path, {"x": (2, 5, 24), "x2": (2, 24, 7)})
    np.testing.assert_array_equal(got["y"], ref[0])
    assert "QLinearMatMul" in types and "MatMul" not in types, types


@pytest.mark.parametrize("per_channel", [False, True])
def test_matmul_with_a_quantized_weight_and_float_output_becomes_matmulintegertofloat(per_channel, tmp_path):
    scale = np.linspace(0.01, 0.03, 10).astype(np.float32) if per_channel else np.float32(0.02)
    model = _model("MatMul", (3, 24), W_MAT, w_scale=scale, w_axis=1 if per_channel else None, quantize_output=False)
    got, ref, types = _run(model, tmp_path, {"x": (3, 24)})
    np.testing.assert_array_equal(got["y"], ref[0])
    assert "MatMulIntegerToFloat" in types and "MatMul" not in types, types


@pytest.mark.parametrize("quantize_output", [True, False])
def test_gemm_becomes_qgemm(quantize_output, tmp_path):
    w = RNG.integers(-127, 128, (10, 24))
    bias = RNG.integers(-3000, 3000, 10).astype(np.int32)
    model = _model("Gemm", (3, 24), w, {"transB": 1}, bias=bias, w_scale=np.full(10, 0.02, np.float32), w_axis=0,
                   quantize_output=quantize_output)
    got, ref, types = _run(model, tmp_path, {"x": (3, 24)})
    if quantize_output:
        np.testing.assert_array_equal(got["y"], ref[0])
    else:   # float output: the int32 C is added scaled, as a float bias; ORT adds it in its own order
        np.testing.assert_allclose(got["y"], ref[0], rtol=1e-6, atol=1e-6)
    assert "QGemm" in types and "Gemm" not in types, types


def test_conv_with_a_float_bias_keeps_the_float_path(tmp_path):
    """A bias that is no DequantizeLinear's: ORT's selector wants every input dequantized."""
    model = _model("Conv", (1, 4, 9, 9), W_CONV, {"pads": [1, 1, 1, 1]}, bias=np.linspace(-1, 1, 6, dtype=np.float32))
    got, ref, types = _run(model, tmp_path, {"x": (1, 4, 9, 9)})
    assert "Conv" in types and "QLinearConv" not in types, types
    assert np.abs(got["y"] - ref[0]).max() <= SY * 1.001


def test_int8_activation_orts_conversion_leaves_int8_stays_float(tmp_path):
    """int8 activations on x86: the input's Q is read twice (so ORT keeps it int8), the output's
    once (made uint8): the types differ, ORT runs the Conv float, and so does om2gen."""
    model = _model("Conv", (1, 4, 9, 9), W_CONV, {"pads": [1, 1, 1, 1]}, bias=BIAS, act_type=np.int8,
                   extra_reader=True)
    got, ref, types = _run(model, tmp_path, {"x": (1, 4, 9, 9)})
    assert "QLinearConv" not in types, types
    assert np.abs(got["y"] - ref[0]).max() <= SY * 1.001


def test_int8_activations_orts_conversion_makes_uint8_fold(tmp_path):
    model = _model("Conv", (1, 4, 9, 9), W_CONV, {"pads": [1, 1, 1, 1]}, bias=BIAS, act_type=np.int8)
    got, ref, types = _run(model, tmp_path, {"x": (1, 4, 9, 9)})
    np.testing.assert_array_equal(got["y"], ref[0])
    assert "QLinearConv" in types, types


def test_fusion_off_keeps_the_float_conv(tmp_path):
    model = _model("Conv", (1, 4, 9, 9), W_CONV, {"pads": [1, 1, 1, 1]}, bias=BIAS)
    got, ref, types = _run(model, tmp_path, {"x": (1, 4, 9, 9)}, fusion="off")
    assert "QLinearConv" not in types and "Conv" in types, types


def test_relu_read_by_a_float_op_keeps_the_float_path(tmp_path):
    """Conv -> Relu -> (no QuantizeLinear): ORT's group wants the Q after the Relu; no fold."""
    model = _model("Conv", (1, 4, 9, 9), W_CONV, {"pads": [1, 1, 1, 1]}, bias=BIAS, relu=True, quantize_output=False)
    got, ref, types = _run(model, tmp_path, {"x": (1, 4, 9, 9)})
    assert "QLinearConv" not in types and "FusedConv" in types, types   # (Conv + Relu, float)
    np.testing.assert_allclose(got["y"], ref[0], rtol=1e-5, atol=1e-4)
