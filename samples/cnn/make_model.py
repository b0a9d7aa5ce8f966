"""Builds samples/cnn/model.onnx: a small image classifier with seeded weights.

Conv(3→16, 3x3) → BatchNorm → Relu → MaxPool → depthwise Conv(3x3, stride 2, auto_pad SAME)
→ Conv 1x1(16→32) → Clip(0,6) → GlobalAveragePool → Flatten → Gemm(32→10) → Softmax.
Rerun to regenerate (the same seed gives the same file).
"""
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(20261129)


def w(name, *shape, scale=0.2):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


inits = [
    w("conv1_w", 16, 3, 3, 3), w("conv1_b", 16),
    numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype(np.float32), "bn_scale"),
    w("bn_bias", 16), w("bn_mean", 16),
    numpy_helper.from_array(rng.uniform(0.5, 2.0, 16).astype(np.float32), "bn_var"),
    w("dw_w", 16, 1, 3, 3, scale=0.3),
    w("pw_w", 32, 16, 1, 1), w("pw_b", 32),
    w("fc_w", 10, 32), w("fc_b", 10),
]
nodes = [
    helper.make_node("Conv", ["image", "conv1_w", "conv1_b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    helper.make_node("BatchNormalization", ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["b1"], name="bn1"),
    helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
    helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Conv", ["p1", "dw_w"], ["d1"], name="dwconv", group=16, strides=[2, 2], auto_pad="SAME_UPPER",
                     kernel_shape=[3, 3]),
    helper.make_node("Conv", ["d1", "pw_w", "pw_b"], ["c2"], name="pwconv"),
    helper.make_node("Clip", ["c2", "clip_min", "clip_max"], ["r2"], name="relu6"),
    helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
    helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
    helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
    helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
]
inits += [numpy_helper.from_array(np.array(0.0, np.float32), "clip_min"),
          numpy_helper.from_array(np.array(6.0, np.float32), "clip_max")]
graph = helper.make_graph(nodes, "sample_cnn",
                          [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
                          [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="om2gen-samples")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, Path(__file__).with_name("model.onnx"))
