"""The single-Add model: z = x + y on float32[1, 128]. Its compute is negligible, so its run
latency is the per-run overhead of the Python run call (the issue's target figure)."""
from onnx import TensorProto

from .graph import Graph

WHAT = "one Add of two float32[1,128] inputs: run latency = per-run overhead"
SHAPE = (1, 128)


def build(seed: int = 0):
    g = Graph(seed)
    x = g.input("x", TensorProto.FLOAT, SHAPE)
    y = g.input("y", TensorProto.FLOAT, SHAPE)
    g.output(g.op("Add", [x, y]), "z", shape=SHAPE)
    return g.model("add", WHAT)
