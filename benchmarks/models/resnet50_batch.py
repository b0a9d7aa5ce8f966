"""The suite's ResNet-50 (onnx's light model-zoo file, samples/real_models/catalog.py) with a
batch dim: the input gpu_0/data_0 and the outputs take a symbolic batch N, and the Reshape in
front of the classifier, whose shape the zoo export fixed to [1, 2048], reshapes to [-1, 2048].
Nothing else changes (weights are the light model's ConstantOfShape fills), so a batch-1 compile
is the suite's ResNet-50. For gears of the batch (benchmarks/bench_gears.py)."""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

WHAT = "ResNet-50 (onnx light model zoo) with a symbolic batch dim N: for gears of the batch"
BATCH_DIM = "N"


def build(seed: int = 0):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "samples" / "real_models"))
    import catalog
    model = onnx.load(str(catalog.fetch(catalog.BY_NAME["resnet50"])))
    g = model.graph
    reshapes = [n for n in g.node if n.op_type == "Reshape"]
    assert len(reshapes) == 1, f"expected the classifier's one Reshape, found {len(reshapes)}"
    shape_name = reshapes[0].input[1]
    init = next(i for i in g.initializer if i.name == shape_name)
    assert numpy_helper.to_array(init).tolist() == [1, 2048], numpy_helper.to_array(init)
    init.CopyFrom(numpy_helper.from_array(np.array([-1, 2048], np.int64), shape_name))
    for vi in [*g.input, *g.output]:
        dims = vi.type.tensor_type.shape.dim
        if vi.name not in {i.name for i in g.initializer} and dims and dims[0].dim_value == 1:
            dims[0].Clear()
            dims[0].dim_param = BATCH_DIM
    del g.value_info[:]   # intermediate shapes said batch 1
    return model
