"""MobileNetV2 (Sandler et al. 2018; width 1.0, 224 x 224, 1000 classes) built here with seeded
weights, in the layout of the ONNX model zoo's export: Conv + BatchNormalization (+ Clip 0..6 as
ReLU6), inverted residual blocks with depthwise 3 x 3 convolutions, GlobalAveragePool, Gemm.

SYNTHETIC WEIGHTS: no pinned MobileNetV2 .onnx ships in a package we may use (onnx's light
models have none), so this is the architecture with random weights; its shapes, operator mix
and FLOPs are those of the real model (about 0.3 GMAC), its outputs mean nothing."""
import numpy as np
from onnx import TensorProto

from .graph import Graph

WHAT = "MobileNetV2 1.0 224x224, architecture of the model zoo export, SYNTHETIC seeded weights"
# (expansion t, output channels c, repeats n, first stride s), from the paper's Table 2
BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
          (6, 320, 1, 1))


def _conv_bn(g: Graph, x: str, c_in: int, c_out: int, k: int, stride: int = 1, group: int = 1,
             relu6: bool = True, gamma=(0.8, 1.2)) -> str:
    fan_in = c_in // group * k * k
    w = g.normal("conv_w", (c_out, c_in // group, k, k), np.sqrt(2.0 / fan_in))
    y = g.op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)
    scale = g.const("bn_scale", g.rng.uniform(*gamma, c_out).astype(np.float32))
    bias = g.const("bn_bias", g.rng.uniform(-0.1, 0.1, c_out).astype(np.float32))
    mean = g.const("bn_mean", g.rng.uniform(-0.1, 0.1, c_out).astype(np.float32))
    var = g.const("bn_var", g.rng.uniform(0.5, 1.5, c_out).astype(np.float32))
    y = g.op("BatchNormalization", [y, scale, bias, mean, var], epsilon=1e-5)
    if relu6:
        y = g.op("Clip", [y, g.zero, g.six])
    return y


def build(seed: int = 2):
    g = Graph(seed)
    g.zero = g.const("clip_min", np.array(0.0, np.float32))
    g.six = g.const("clip_max", np.array(6.0, np.float32))
    x = g.input("input", TensorProto.FLOAT, (1, 3, 224, 224))
    y, c_in = _conv_bn(g, x, 3, 32, 3, stride=2), 32
    for t, c, n, s in BLOCKS:
        for i in range(n):
            stride, hidden = (s if i == 0 else 1), c_in * t
            h = y if t == 1 else _conv_bn(g, y, c_in, hidden, 1)
            h = _conv_bn(g, h, hidden, hidden, 3, stride=stride, group=hidden)
            h = _conv_bn(g, h, hidden, c, 1, relu6=False, gamma=(0.2, 0.5))  # linear bottleneck
            y = g.op("Add", [y, h]) if stride == 1 and c_in == c else h
            c_in = c
    y = _conv_bn(g, y, c_in, 1280, 1)
    y = g.op("Flatten", [g.op("GlobalAveragePool", [y])], axis=1)
    w = g.normal("fc_w", (1000, 1280), np.sqrt(1.0 / 1280))
    b = g.normal("fc_b", (1000,), 0.01)
    g.output(g.op("Gemm", [y, w, b], transB=1), "output", shape=(1, 1000))
    return g.model("mobilenet_v2", __doc__)
