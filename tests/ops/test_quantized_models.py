"""Models quantized by onnxruntime.quantization (quantize_static in QDQ and QOperator formats,
quantize_dynamic) against ONNX Runtime running the quantized model, which folds QDQ as om2gen
does (passes/qdq.py, passes/qdq_gemm.py). The CNN has Conv, Add, MaxPool, AveragePool,
LeakyRelu, Concat, Sigmoid, Mul and GlobalAveragePool; the attention block
(quantized_blocks.py) MatMuls, Softmax and a Gemm.

With uint8 activations ORT folds every QDQ group into its integer ops (QLinearConv, QLinearMatMul,
QGemm, QLinearAdd, ...), and so does om2gen: the outputs are equal. With the tool's default int8
activations ORT on x86 folds only where its int8 -> uint8 conversion leaves an op's input and
output types alike (passes/qdq_types.py): in the CNN, the GlobalAveragePool; the Convs run float
in both, whose sums ORT adds in another order, so an output may be one quantization step apart.
The attention block equals ORT with either type."""
import numpy as np
import onnx
import pytest
from helpers import compile_and_run, ort_run
from onnx import TensorProto, helper, numpy_helper
from quantized_blocks import BLOCK_SHAPE, attention_block

SHAPE = (1, 3, 16, 16)


def cnn(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)

    def w(*shape):
        return (rng.standard_normal(shape) * (2.0 / np.prod(shape[1:])) ** 0.5).astype(np.float32)
    inits = {"w1": w(8, 3, 3, 3), "b1": w(8) * 0.1, "w2": w(8, 8, 3, 3), "b2": w(8) * 0.1}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["a"]),
        helper.make_node("Conv", ["a", "w2", "b2"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["a", "b"], ["c"]),
        helper.make_node("MaxPool", ["c"], ["d"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["d"], ["e"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("LeakyRelu", ["d"], ["f"], alpha=0.1),
        helper.make_node("Concat", ["e", "f"], ["g"], axis=1),
        helper.make_node("Sigmoid", ["g"], ["h"]),
        helper.make_node("Mul", ["h", "g"], ["m"]),
        helper.make_node("GlobalAveragePool", ["m"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 16, 1, 1))],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


class _Calibration:
    def __init__(self, n=8, shape=SHAPE):
        rng = np.random.default_rng(1)
        self.batches = iter([{"x": rng.uniform(-1, 1, shape).astype(np.float32)} for _ in range(n)])

    def get_next(self):
        return next(self.batches, None)


def quantize(model, tmp_path, fmt, *, activations="QInt8", shape=SHAPE, **options):
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    src, dst = tmp_path / "float.onnx", tmp_path / f"{fmt}.onnx"
    onnx.save(model, src)
    quantize_static(str(src), str(dst), _Calibration(shape=shape), quant_format=getattr(QuantFormat, fmt),
                    activation_type=getattr(QuantType, activations), **options)
    return onnx.load(str(dst))


def _output_step(quant: onnx.ModelProto) -> float:
    """The scale of the quantized tensor the model's output is dequantized from."""
    inits = {i.name: numpy_helper.to_array(i) for i in quant.graph.initializer}
    last = next(n for n in quant.graph.node if quant.graph.output[0].name in n.output)
    return float(inits[last.input[1]])


def _compare(quant, tmp_path, seeds=range(3), steps=1, shape=SHAPE):
    step = _output_step(quant)
    worst = 0
    for seed in seeds:
        x = np.random.default_rng(10 + seed).uniform(-1, 1, shape).astype(np.float32)
        got, nodes = compile_and_run(quant, {"x": x}, tmp_path)
        ref = ort_run(quant, {"x": x})[0]
        worst = max(worst, int(np.round(np.abs(got["y"] - ref).max() / step)))
    assert worst <= steps, f"{worst} quantization steps from ORT"
    return nodes


@pytest.mark.parametrize("per_channel", [False, True])
def test_quantize_static_qdq_cnn_uint8_equals_onnxruntime(per_channel, tmp_path):
    """Every QDQ group folds (the Convs into QLinearConv, per-channel weights too): 5 seeds equal."""
    quant = quantize(cnn(), tmp_path, "QDQ", activations="QUInt8", per_channel=per_channel)
    nodes = _compare(quant, tmp_path, seeds=range(5), steps=0)
    types = [n["op_type"] for n in nodes]
    assert types.count("QLinearConv") == 2 and "Conv" not in types, types
    for folded in ("QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearGlobalAveragePool"):
        assert folded in types, types


def test_quantize_static_qdq_cnn_int8_folds_where_onnxruntime_does(tmp_path):
    """int8 activations: ORT (x86) folds the GlobalAveragePool only; the Convs run float in both."""
    quant = quantize(cnn(), tmp_path, "QDQ")
    ops = {n.op_type for n in quant.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    nodes = _compare(quant, tmp_path, seeds=range(5))
    types = [n["op_type"] for n in nodes]
    assert "QLinearGlobalAveragePool" in types and types.count("Conv") == 2 and "QLinearAdd" not in types, types


@pytest.mark.parametrize("activations,per_channel", [("QUInt8", False), ("QUInt8", True), ("QInt8", True)])
def test_quantize_static_qdq_attention_block_equals_onnxruntime(activations, per_channel, tmp_path):
    """uint8: the MatMuls fold into QLinearMatMul, the Gemm head into QGemm, the bias Adds (a DQ
    of a constant bias) into QLinearAdd, the Softmax into QLinearSoftmax. int8: where ORT's
    conversion leaves the types alike (the attention's two MatMuls and the head: the Q/K/V
    projections read one DQ three times, so their input stays int8 and they run float)."""
    quant = quantize(attention_block(), tmp_path, "QDQ", activations=activations, shape=BLOCK_SHAPE,
                     per_channel=per_channel)
    nodes = _compare(quant, tmp_path, steps=0, shape=BLOCK_SHAPE)
    types = [n["op_type"] for n in nodes]
    assert "QLinearSoftmax" in types and types.count("QGemm") == 1, types
    if activations == "QUInt8":
        assert types.count("QLinearMatMul") == 6 and "MatMul" not in types and types.count("QLinearAdd") == 4, types
    else:
        assert types.count("QLinearMatMul") == 3 and types.count("MatMul") == 3, types


def test_quantize_dynamic_attention_block_equals_onnxruntime(tmp_path):
    """quantize_dynamic: DynamicQuantizeLinear + MatMulInteger (ORT fuses them into
    DynamicQuantizeMatMul / MatMulIntegerToFloat with the same arithmetic)."""
    from onnxruntime.quantization import quantize_dynamic
    src, dst = tmp_path / "float.onnx", tmp_path / "dynamic.onnx"
    onnx.save(attention_block(), src)
    quantize_dynamic(str(src), str(dst))
    quant = onnx.load(str(dst))
    for seed in range(3):
        x = np.random.default_rng(10 + seed).standard_normal(BLOCK_SHAPE).astype(np.float32)
        got, nodes = compile_and_run(quant, {"x": x}, tmp_path)
        np.testing.assert_array_equal(got["y"], ort_run(quant, {"x": x})[0])
    assert "MatMulInteger" in {n["op_type"] for n in nodes}


def test_quantize_static_qoperator_elementwise_ops_match_onnxruntime(tmp_path):
    """QOperator format with the element-wise and pooling ops quantized (the Convs left float):
    the model holds QLinearAdd, QLinearMul, QLinearSigmoid,
    QLinearLeakyRelu, QLinearConcat, QLinearAveragePool and QLinearGlobalAveragePool."""
    ops = ["Add", "Mul", "Sigmoid", "LeakyRelu", "Concat", "AveragePool", "GlobalAveragePool", "MaxPool"]
    quant = quantize(cnn(), tmp_path, "QOperator", op_types_to_quantize=ops)
    present = {n.op_type for n in quant.graph.node}
    assert {"QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearConcat",
            "QLinearGlobalAveragePool"} <= present, present
    _compare(quant, tmp_path)
