"""Models quantized by onnxruntime.quantization (static, QDQ and QOperator formats) against ONNX
Runtime running the quantized model. The CNN has Conv, Add, MaxPool, AveragePool, LeakyRelu,
Concat, Sigmoid, Mul and GlobalAveragePool. QDQ around the element-wise and pooling ops folds
into the QLinear ops (passes/qdq.py); the Convs run their float path (DequantizeLinear -> float
Conv -> QuantizeLinear: folding them into integer kernels is int8k's), which ORT computes as
QLinearConv, so outputs may differ by a quantization step where a Conv's rounding does."""
import numpy as np
import onnx
from helpers import compile_and_run, ort_run
from onnx import TensorProto, helper, numpy_helper

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
    def __init__(self, n=8):
        rng = np.random.default_rng(1)
        self.batches = iter([{"x": rng.uniform(-1, 1, SHAPE).astype(np.float32)} for _ in range(n)])

    def get_next(self):
        return next(self.batches, None)


def quantize(model, tmp_path, fmt, **options):
    from onnxruntime.quantization import QuantFormat, quantize_static
    src, dst = tmp_path / "float.onnx", tmp_path / f"{fmt}.onnx"
    onnx.save(model, src)
    quantize_static(str(src), str(dst), _Calibration(), quant_format=getattr(QuantFormat, fmt), **options)
    return onnx.load(str(dst))


def _output_step(quant: onnx.ModelProto) -> float:
    """The scale of the quantized tensor the model's output is dequantized from."""
    inits = {i.name: numpy_helper.to_array(i) for i in quant.graph.initializer}
    last = next(n for n in quant.graph.node if quant.graph.output[0].name in n.output)
    return float(inits[last.input[1]])


def _compare(quant, tmp_path, seeds=range(3), steps=1):
    step = _output_step(quant)
    worst = 0
    for seed in seeds:
        x = np.random.default_rng(10 + seed).uniform(-1, 1, SHAPE).astype(np.float32)
        got, nodes = compile_and_run(quant, {"x": x}, tmp_path)
        ref = ort_run(quant, {"x": x})[0]
        worst = max(worst, int(np.round(np.abs(got["y"] - ref).max() / step)))
    assert worst <= steps, f"{worst} quantization steps from ORT"
    return nodes


def test_quantize_static_qdq_cnn_matches_onnxruntime(tmp_path):
    quant = quantize(cnn(), tmp_path, "QDQ")
    ops = {n.op_type for n in quant.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    nodes = _compare(quant, tmp_path)
    types = [n["op_type"] for n in nodes]
    for folded in ("QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearGlobalAveragePool"):
        assert folded in types, types


def test_quantize_static_qoperator_elementwise_ops_match_onnxruntime(tmp_path):
    """QOperator format with the element-wise and pooling ops quantized (the Convs left float,
    their QLinearConv being int8k's): the model holds QLinearAdd, QLinearMul, QLinearSigmoid,
    QLinearLeakyRelu, QLinearConcat, QLinearAveragePool and QLinearGlobalAveragePool."""
    ops = ["Add", "Mul", "Sigmoid", "LeakyRelu", "Concat", "AveragePool", "GlobalAveragePool", "MaxPool"]
    quant = quantize(cnn(), tmp_path, "QOperator", op_types_to_quantize=ops)
    present = {n.op_type for n in quant.graph.node}
    assert {"QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearConcat",
            "QLinearGlobalAveragePool"} <= present, present
    _compare(quant, tmp_path)
