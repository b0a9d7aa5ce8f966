"""Models with a dynamic dim, for the gear tests: made as exporters make them (symbolic dims, and
torch.onnx's Shape/Gather/Concat feeding a Reshape)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(nodes, inputs, outputs, inits, name):
    graph = helper.make_graph(nodes, name, inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _w(rng, *shape, scale=0.2):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def cnn_batch() -> onnx.ModelProto:
    """x[N,3,16,16] -> conv, relu, conv, pool, flatten, gemm -> y[N,10]."""
    rng = np.random.default_rng(1)
    inits = {"w1": _w(rng, 8, 3, 3, 3), "b1": _w(rng, 8), "w2": _w(rng, 8, 8, 3, 3), "b2": _w(rng, 8),
             "fc": _w(rng, 10, 8), "fb": _w(rng, 10)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv2"),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1, name="fc")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits, "cnn_batch")


def cnn_image() -> onnx.ModelProto:
    """x[1,3,H,W] -> conv, relu, maxpool -> y[1,8,H/2,W/2] and the pooled mean z[1,8]."""
    rng = np.random.default_rng(2)
    inits = {"w": _w(rng, 8, 3, 3, 3), "b": _w(rng, 8)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
             helper.make_node("ReduceMean", ["y"], ["z"], axes=[2, 3], keepdims=0, name="mean")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, "H2", "W2"]),
                   helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8])], inits, "cnn_image")


def encoder(hidden: int = 16, heads: int = 2, vocab: int = 50, max_len: int = 64) -> onnx.ModelProto:
    """A BERT-style encoder layer over input_ids[1,S] (int64), as torch.onnx exports it: the
    positions from Shape/Gather/Range, the head split by a Reshape whose shape is a Concat of
    Shape/Gather values and constants. Outputs h[1,S,hidden]."""
    rng = np.random.default_rng(3)
    d = hidden // heads
    inits = {"tok": _w(rng, vocab, hidden), "pos": _w(rng, max_len, hidden),
             "wq": _w(rng, hidden, hidden), "wk": _w(rng, hidden, hidden), "wv": _w(rng, hidden, hidden),
             "wo": _w(rng, hidden, hidden), "g": (1 + _w(rng, hidden)).astype(np.float32), "beta": _w(rng, hidden),
             "i0": np.array(0, np.int64), "i1": np.array(1, np.int64), "one": np.array(1, np.int64),
             "heads": np.array([heads], np.int64), "dh": np.array([d], np.int64), "hid": np.array([hidden], np.int64),
             "scale": np.array(1 / np.sqrt(d), np.float32), "ax0": np.array([0], np.int64)}
    n = helper.make_node
    nodes = [
        n("Shape", ["input_ids"], ["shape"], name="shape"),
        n("Gather", ["shape", "i0"], ["b"], axis=0, name="get_batch"),
        n("Gather", ["shape", "i1"], ["s"], axis=0, name="get_seq"),
        n("Range", ["i0", "s", "one"], ["positions"], name="range"),
        n("Gather", ["tok", "input_ids"], ["te"], axis=0, name="tok_embed"),
        n("Gather", ["pos", "positions"], ["pe"], axis=0, name="pos_embed"),
        n("Add", ["te", "pe"], ["x"], name="embed_add"),
        n("Unsqueeze", ["b", "ax0"], ["b1"], name="unsq_b"),
        n("Unsqueeze", ["s", "ax0"], ["s1"], name="unsq_s"),
        n("Concat", ["b1", "s1", "heads", "dh"], ["split_shape"], axis=0, name="split_shape"),
        n("Concat", ["b1", "s1", "hid"], ["merge_shape"], axis=0, name="merge_shape"),
    ]
    for t in "qkv":
        nodes += [n("MatMul", ["x", f"w{t}"], [f"{t}0"], name=f"proj_{t}"),
                  n("Reshape", [f"{t}0", "split_shape"], [f"{t}1"], name=f"split_{t}"),
                  n("Transpose", [f"{t}1"], [f"{t}h"], perm=[0, 2, 3, 1] if t == "k" else [0, 2, 1, 3],
                    name=f"heads_{t}")]
    nodes += [
        n("MatMul", ["qh", "kh"], ["scores0"], name="scores"),
        n("Mul", ["scores0", "scale"], ["scores"], name="scale"),
        n("Softmax", ["scores"], ["probs"], axis=-1, name="softmax"),
        n("MatMul", ["probs", "vh"], ["ctx0"], name="context"),
        n("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3], name="merge_heads"),
        n("Reshape", ["ctx1", "merge_shape"], ["ctx"], name="merge"),
        n("MatMul", ["ctx", "wo"], ["attn"], name="out_proj"),
        n("Add", ["attn", "x"], ["res"], name="residual"),
        n("LayerNormalization", ["res", "g", "beta"], ["h"], axis=-1, epsilon=1e-5, name="ln"),
    ]
    return _model(nodes, [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "S"])],
                  [helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, "S", hidden])], inits, "encoder")
