"""TopK in a dynamic model (issue 15), beyond tests/e2e/test_dynamic_shapes.py's: ties (ONNX
Runtime's order, the smaller index first) along a dynamic axis, and a k the model takes from a
shape, as torch.onnx exports sort and argsort. One archive each, at several shapes against ONNX
Runtime."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.helpers import ort_run

import om2gen


def _model(nodes, inputs: dict, outputs: dict, inits=()):
    return helper.make_model(helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in inputs.items()],
        [helper.make_tensor_value_info(n, t, d) for n, (t, d) in outputs.items()], list(inits)),
        opset_imports=[helper.make_opsetid("", 11)])


def _run(m, shapes, feeds_at, sizes, tmp_path):
    """Values and indices equal to ONNX Runtime's at every size (TopK computes nothing: exact)."""
    om2gen.compile(m, tmp_path / "m.om2", input_shapes=shapes)
    rng = np.random.default_rng(12)
    names = [o.name for o in m.graph.output]
    with om2gen.load(tmp_path / "m.om2") as model:
        for size in sizes:
            feeds = feeds_at(rng, *size)
            got = model.run(feeds)
            for name, want in zip(names, ort_run(m, feeds)):
                assert np.array_equal(got[name], want), f"{name} at {size}"


@pytest.mark.parametrize("axis,largest", [(-1, 1), (1, 0)])
def test_topk_with_a_constant_k_over_dynamic_sizes(axis, largest, tmp_path):
    """k = 5 of x[N, L, 3] along L (the length and, for axis -1, the rows dynamic): the values and
    their indices, ties to the smaller index as ONNX Runtime."""
    k = numpy_helper.from_array(np.array([5 if axis == 1 else 2], np.int64), "k")
    m = _model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)],
               {"x": ["N", "L", 3]}, {"v": (TensorProto.FLOAT, None), "i": (TensorProto.INT64, None)}, [k])
    for o in m.graph.output:
        o.type.tensor_type.shape.SetInParent()
    _run(m, {"x": ("1~4", "5~40", 3)},
         lambda rng, n, ln: {"x": rng.integers(-4, 5, (n, ln, 3)).astype(np.float32)},   # many ties
         [(1, 5), (4, 40), (2, 17), (3, 5)], tmp_path)


def test_topk_whose_k_is_the_length_as_torch_exports_a_sort(tmp_path):
    """torch.sort / argsort along a dynamic axis export as TopK with k = Shape(x)[axis]: k is the
    run's, and each block's heap is planned for its largest value."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["k"], axis=0),
             helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=0)]
    m = _model(nodes, {"x": ["N", "L"]}, {"v": (TensorProto.FLOAT, ["N", "L"]), "i": (TensorProto.INT64, ["N", "L"])},
               [numpy_helper.from_array(np.array([1], np.int64), "one")])
    _run(m, {"x": ("1~4", "1~64")}, lambda rng, n, ln: {"x": rng.standard_normal((n, ln)).astype(np.float32)},
         [(1, 1), (4, 64), (3, 31), (2, 9)], tmp_path)
