"""An MLP with seeded weights: float32[1, 784] -> Gemm 1024 + Relu -> Gemm 1024 + Relu -> Gemm 10
(batch 1, so each Gemm is a matrix-vector product bound by reading its weights)."""
import numpy as np
from onnx import TensorProto

from .graph import Graph

WHAT = "MLP 784-1024-1024-10 (Gemm + Relu), batch 1, seeded weights"
SIZES = (784, 1024, 1024, 10)


def build(seed: int = 1):
    g = Graph(seed)
    x = g.input("x", TensorProto.FLOAT, (1, SIZES[0]))
    for i, (k, n) in enumerate(zip(SIZES, SIZES[1:])):
        w = g.normal("w", (n, k), np.sqrt(2.0 / k))
        b = g.normal("b", (n,), 0.01)
        x = g.op("Gemm", [x, w, b], transB=1)
        if i < len(SIZES) - 2:
            x = g.op("Relu", [x])
    g.output(x, "logits", shape=(1, SIZES[-1]))
    return g.model("mlp", WHAT)
