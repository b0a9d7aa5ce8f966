"""The suite's ResNet-50 (onnx's light model-zoo file, samples/real_models/catalog.py) with
seeded random weights in place of its ConstantOfShape fills. The light file fills every weight
with 0.02, so layers of one shape hold equal bytes and an archive stores them once
(lower/constants.py): the suite's file is 80 KB and its archive far smaller than a trained
ResNet-50's. This one has a trained model's size (25.5 M parameters, about 102 MB), for archive
size and load time (benchmarks/archive_size.py). Convolution weights are He-scaled and the
BatchNorm statistics near identity, so activations stay finite through the 50 layers."""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

WHAT = "ResNet-50 (onnx light model zoo) with seeded random weights: a trained model's size"


def build(seed: int = 0):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "samples" / "real_models"))
    import catalog
    model = onnx.load(str(catalog.fetch(catalog.BY_NAME["resnet50"])))
    g = model.graph
    rng = np.random.default_rng(seed)
    shapes = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    role = {}   # weight name -> how to draw it
    for n in g.node:
        if n.op_type == "BatchNormalization":
            role.update(zip(n.input[1:5], ("scale", "bias", "mean", "var")))
        elif n.op_type in ("Conv", "Gemm"):
            role[n.input[1]] = "weight"
            if len(n.input) > 2:
                role[n.input[2]] = "bias"
    fills = [n for n in g.node if n.op_type == "ConstantOfShape"]
    for n in fills:
        shape = tuple(int(d) for d in shapes[n.input[0]])
        kind = role.get(n.output[0], "bias")
        if kind == "weight":
            fan_in = int(np.prod(shape[1:]))
            arr = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        elif kind in ("scale", "var"):
            arr = rng.uniform(0.5, 1.5, shape)
        else:
            arr = rng.standard_normal(shape) * 0.05
        g.initializer.append(numpy_helper.from_array(arr.astype(np.float32), n.output[0]))
    for n in fills:
        g.node.remove(n)
    used = {i for n in g.node for i in n.input}
    for i in [i for i in g.initializer if i.name not in used]:
        g.initializer.remove(i)
    for vi in [vi for vi in g.input if vi.name not in used]:
        g.input.remove(vi)
    model.ir_version = max(model.ir_version, 4)   # initializers that are not graph inputs
    return model
