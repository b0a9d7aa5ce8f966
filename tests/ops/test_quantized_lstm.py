"""com.microsoft.DynamicQuantizeLSTM (ops/quantized_lstm.py) as onnxruntime.quantization's
quantize_dynamic makes it from an LSTM, against ONNX Runtime running the quantized model: the
same dynamic quantization of X and of each step's hidden state and the same integer products,
so the outputs agree within float rounding (the gates' float sums run in another order)."""
import numpy as np
import onnx
import pytest
from helpers import compile_and_run, ort_run
from onnx import TensorProto, helper, numpy_helper

from om2gen.toolchain import targets

COVERS = {"DynamicQuantizeLSTM"}


def _lstm(seq, batch, size, hidden, direction, with_states, rng):
    d = 2 if direction == "bidirectional" else 1
    inits = {"W": rng.uniform(-0.5, 0.5, (d, 4 * hidden, size)).astype(np.float32),
             "R": rng.uniform(-0.5, 0.5, (d, 4 * hidden, hidden)).astype(np.float32),
             "B": rng.uniform(-0.2, 0.2, (d, 8 * hidden)).astype(np.float32)}
    ins = ["X", "W", "R", "B"]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, (seq, batch, size))]
    if with_states:
        ins += ["", "h0", "c0"]
        inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, (d, batch, hidden)) for n in ("h0", "c0")]
    node = helper.make_node("LSTM", ins, ["Y", "Y_h", "Y_c"], hidden_size=hidden, direction=direction)
    graph = helper.make_graph([node], "lstm", inputs, [helper.make_empty_tensor_value_info(n) for n in ("Y", "Y_h", "Y_c")],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model), d


def quantize_dynamic(model, tmp_path):
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic as qd
    src, dst = tmp_path / "float.onnx", tmp_path / "quant.onnx"
    onnx.save(model, src)
    qd(str(src), str(dst), weight_type=QuantType.QInt8)
    return onnx.load(str(dst))


# the products take two k at a time, 16 (AVX-512) or 8 (AVX2) columns a vector: odd sizes and
# hidden sizes leave a k alone and a column tail
@pytest.mark.parametrize("direction,with_states,target,size,hidden", [
    ("forward", False, None, 12, 16), ("reverse", True, None, 12, 16), ("bidirectional", True, None, 12, 16),
    ("bidirectional", True, None, 13, 5), ("forward", True, "x86_64-avx2", 13, 5),
    ("forward", False, "x86_64", 12, 16)])
def test_quantize_dynamic_lstm_matches_onnxruntime(direction, with_states, target, size, hidden, tmp_path):
    if target and targets.missing_features(targets.TARGETS[target].arch, targets.TARGETS[target].isa_features):
        pytest.skip(f"this machine cannot run {target}")
    rng = np.random.default_rng(3)
    seq, batch = 7, 2
    model, d = _lstm(seq, batch, size, hidden, direction, with_states, rng)
    quant = quantize_dynamic(model, tmp_path)
    assert [n.op_type for n in quant.graph.node] == ["DynamicQuantizeLSTM"]
    feeds = {"X": rng.standard_normal((seq, batch, size)).astype(np.float32)}
    if with_states:
        feeds["h0"] = rng.uniform(-0.5, 0.5, (d, batch, hidden)).astype(np.float32)
        feeds["c0"] = rng.uniform(-0.5, 0.5, (d, batch, hidden)).astype(np.float32)
    got, _ = compile_and_run(quant, feeds, tmp_path, **({"target": target} if target else {}))
    ref = ort_run(quant, feeds)
    float_ref = ort_run(model, feeds)
    for name, r, f in zip(("Y", "Y_h", "Y_c"), ref, float_ref):
        err = np.abs(got[name] - r).max()
        assert err <= 2e-5 * max(1.0, np.abs(r).max()), (name, err)
        # the quantized arithmetic, not the float one: ORT's quantized model differs from the float
        # model by far more than om2gen differs from it
        assert np.abs(r - f).max() > 50 * err, name
