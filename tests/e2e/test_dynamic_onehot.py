"""OneHot in dynamic models (ops/onehot.py, docs/dynamic-shapes.md), each archive in both formats
against ONNX Runtime: indices of a dynamic shape, a depth computed from the input shapes, and a
depth the run decides (a data-dependent count: the kernel reads the depth and writes its dim),
bounded by a Min against a constant; an unbounded run-time depth is refused by name."""
import numpy as np
import pytest
from onnx import helper, numpy_helper
from tests.ops.test_data_dependent import _check, _model

import om2gen
from om2gen.errors import NeedsConstantError

pytestmark = pytest.mark.parametrize("fmt", ["om2", "om"])
VALUES = numpy_helper.from_array(np.array([-1.5, 2.0], np.float32), "values")


def test_dynamic_indices_along_each_axis(tmp_path, fmt):
    """indices[N, 5] with a constant depth 7 along axis -1 (a row per index) and axis 1 (rows of
    5), negative and out-of-range indices included; then a ReduceSum over the depth."""
    nodes = [helper.make_node("OneHot", ["i", "depth", "values"], ["last"]),
             helper.make_node("OneHot", ["i", "depth", "values"], ["mid"], axis=1),
             helper.make_node("ReduceSum", ["mid", "axes"], ["sum"], keepdims=0)]
    inits = [VALUES, numpy_helper.from_array(np.array([7], np.int64), "depth"),
             numpy_helper.from_array(np.array([1], np.int64), "axes")]
    m = _model(nodes, {"i": (np.int64, ["N", 5])},
               {"last": (np.float32, ["N", 5, 7]), "mid": (np.float32, ["N", 7, 5]), "sum": (np.float32, ["N", 5])},
               inits, opset=13)
    rng = np.random.default_rng(0)
    feeds = [{"i": rng.integers(-9, 9, (n, 5)).astype(np.int64)} for n in (1, 12, 3, 12)]
    _check(m, tmp_path / f"oh.{fmt}", feeds, input_shapes={"i": ("1~12", 5)})


def test_a_depth_from_the_input_shapes(tmp_path, fmt):
    """OneHot(labels, Shape(x)[1]): the depth is x's dynamic class count C."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]), helper.make_node("Gather", ["shape", "one"], ["depth"]),
             helper.make_node("OneHot", ["labels", "depth", "values"], ["hot"]),
             helper.make_node("Add", ["hot", "x"], ["y"])]
    inits = [VALUES, numpy_helper.from_array(np.array([1], np.int64), "one")]
    m = _model(nodes, {"x": (np.float32, [4, "C"]), "labels": (np.int64, [4])}, {"y": (np.float32, [4, "C"])},
               inits, opset=13)
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.standard_normal((4, c)).astype(np.float32),
              "labels": rng.integers(-c, c, 4).astype(np.int64)} for c in (1, 9, 3, 16)]
    _check(m, tmp_path / f"oh.{fmt}", feeds, input_shapes={"x": (4, "1~16")})


def test_a_depth_the_run_decides(tmp_path, fmt):
    """depth = Min(d, 10) fed at run time (an int64, or a float as the spec allows): the output's
    depth dim is a count, 1 to the bound, and the Relu after it runs over it."""
    for dtype in (np.int64, np.float32):
        nodes = [helper.make_node("Min", ["d", "most"], ["depth"]),
                 helper.make_node("OneHot", ["i", "depth", "values"], ["hot"], axis=0),
                 helper.make_node("Relu", ["hot"], ["y"])]
        inits = [VALUES, numpy_helper.from_array(np.array([10], dtype), "most")]
        m = _model(nodes, {"i": (np.int64, [3, 2]), "d": (dtype, [1])}, {"y": (np.float32, ["k", 3, 2])}, inits,
                   opset=13)
        i = np.array([[0, 4], [-1, 9]], np.int64).repeat([2, 1], axis=0)[:3]
        feeds = [{"i": i, "d": np.array([d], dtype)} for d in (1, 10, 4, 30, 5.7 if dtype == np.float32 else 6)]
        _check(m, tmp_path / f"oh_{dtype.__name__}.{fmt}", feeds)


def test_an_unbounded_run_time_depth_is_refused(tmp_path, fmt):
    m = _model([helper.make_node("OneHot", ["i", "d", "values"], ["y"])], {"i": (np.int64, [3]), "d": (np.int64, [1])},
               {"y": (np.float32, [3, "k"])}, [VALUES], opset=13)
    with pytest.raises(NeedsConstantError, match=r"OneHot.*depth \('d'\) is a run-time value and nothing bounds it"):
        om2gen.compile(m, tmp_path / f"oh.{fmt}")
