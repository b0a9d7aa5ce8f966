"""Shape-derived values: Shape, Size (constants), ConstantOfShape, Range, EyeLike."""
import numpy as np
import pytest
from helpers import check_model, check_op, make_model, rand
from onnx import TensorProto, helper, numpy_helper
from test_movement import check_ref, node_model

COVERS = {"Shape", "Size", "ConstantOfShape", "Range", "EyeLike"}

I64 = np.int64


@pytest.fixture
def no_folding(monkeypatch):
    """Nothing folds at compile time: ConstantOfShape and Range then run their own kernels (as a
    too-big-to-fold output would)."""
    monkeypatch.setattr("om2gen.passes.fold._MAX_FOLDED_BYTES", -1)


# --- Shape, Size -------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"end": -1}, {"start": -2, "end": 3}, {"start": -10, "end": 10}])
def test_shape(attrs, tmp_path):
    check_op("Shape", {"x": rand(2, 3, 4)}, attrs, opset=15, tmp_path=tmp_path)


@pytest.mark.parametrize("attrs", [{"start": 5}, {"start": 2, "end": 1}])
def test_shape_empty_range(attrs, tmp_path):
    """An empty slice of the shape is an empty constant (seen here through a Concat kernel)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], **attrs), helper.make_node("Concat", ["s", "n"], ["y"], axis=0)]
    feeds = {"x": rand(2, 3, 4), "n": np.array([7, 8], I64)}
    check_model(make_model(nodes, feeds, ["y"], opset=15), feeds, tmp_path)


def test_shape_opset1(tmp_path):
    check_op("Shape", {"x": rand(2, 3)}, opset=9, tmp_path=tmp_path)


def test_size(tmp_path):
    check_op("Size", {"x": rand(2, 3, 4)}, opset=13, tmp_path=tmp_path)


def test_shape_and_size_feed_kernels(tmp_path):
    """Shape -> Cast-free arithmetic on the dims, Size -> Mul: the values become constants that
    real kernels read."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1),
             helper.make_node("Add", ["s", "n"], ["y0"]),
             helper.make_node("Size", ["x"], ["z"]),
             helper.make_node("Mul", ["n", "z"], ["y1"])]
    feeds = {"x": rand(2, 3, 4), "n": np.array([10, 20], I64)}
    check_model(make_model(nodes, feeds, ["y0", "y1"], opset=15), feeds, tmp_path)


# --- ConstantOfShape ---------------------------------------------------------------------------

def _cos_model(value: np.ndarray | None, shape, x_dtype):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value, "value")}
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["c"], **attrs),
             helper.make_node("Add", ["x", "c"], ["y"])]
    return make_model(nodes, {"x": np.zeros(shape, x_dtype)}, ["y"], opset=17)


@pytest.mark.parametrize("value,dtype", [(None, np.float32), (np.array([2.5], np.float32), np.float32),
                                         (np.array([-3], I64), I64), (np.array([7], np.int32), np.int32)])
@pytest.mark.parametrize("fold", [True, False], ids=["folded", "kernel"])
def test_constant_of_shape(value, dtype, fold, request, tmp_path):
    if not fold:
        request.getfixturevalue("no_folding")
    x = (rand(3, 4) * 10).astype(dtype)
    check_model(_cos_model(value, (3, 4), dtype), {"x": x}, tmp_path)


@pytest.mark.parametrize("shape", [[2, 3], []], ids=["2x3", "scalar"])
def test_constant_of_shape_bool_into_and(shape, no_folding, tmp_path):
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"],
                              value=helper.make_tensor("v", TensorProto.BOOL, [1], [True])),
             helper.make_node("And", ["x", "c"], ["y"])]
    feeds = {"x": np.array([True, False, True])}
    model = make_model(nodes, feeds, ["y"], {"s": np.array(shape, I64)}, opset=17)
    check_model(model, feeds, tmp_path)


def test_constant_of_shape_is_the_graph_output(no_folding, tmp_path):
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["y"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [4.0]))]
    check_model(make_model(nodes, {}, ["y"], {"s": np.array([2, 3], I64)}, opset=17), {}, tmp_path)


# --- Range ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("start,limit,delta,dtype", [(0, 6, 1, I64), (10, 1, -3, np.int32), (1.5, 4.0, 0.25, np.float32),
                                                     (-2.0, 3.0, 0.7, np.float64), (5, 5, 1, I64)])
@pytest.mark.parametrize("fold", [True, False], ids=["folded", "kernel"])
def test_range_feeds_a_kernel(start, limit, delta, dtype, fold, request, tmp_path):
    if not fold:
        request.getfixturevalue("no_folding")
    n = max(int(np.ceil((limit - start) / delta)), 0)
    consts = {"a": np.array(start, dtype), "b": np.array(limit, dtype), "d": np.array(delta, dtype)}
    nodes = [helper.make_node("Range", ["a", "b", "d"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    feeds = {"x": np.ones((2, n), dtype)}
    check_model(make_model(nodes, feeds, ["y"], consts, opset=11), feeds, tmp_path)


def test_range_runtime_bounds_name_the_input(tmp_path):
    import om2gen
    from om2gen.errors import NeedsConstantError
    feeds = {"a": np.array(0, I64), "b": np.array(4, I64), "d": np.array(1, I64)}
    model = make_model([helper.make_node("Range", ["a", "b", "d"], ["y"])], feeds, ["y"], opset=11)
    with pytest.raises(NeedsConstantError) as e:
        om2gen.compile(model, tmp_path / "m.om2")
    assert e.value.value_name == "a"
    assert "Range" in str(e.value)


# --- EyeLike -------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,k,dtype", [((4, 4), 0, None), ((3, 5), 1, None), ((5, 3), -2, None),
                                           ((4, 6), 2, TensorProto.INT64), ((3, 3), 0, TensorProto.DOUBLE),
                                           ((2, 4), 9, None)])
def test_eye_like(shape, k, dtype, tmp_path):
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    check_op("EyeLike", {"x": rand(*shape)}, attrs, opset=9, tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT16, TensorProto.BOOL, TensorProto.INT32])
def test_eye_like_dtypes(dtype, tmp_path):
    x = rand(3, 4)
    check_ref(node_model("EyeLike", {"x": x}, {"k": -1, "dtype": dtype}, opset=9), {"x": x}, tmp_path)
