"""OneHot and ScatterND against ONNX Runtime (onnx.reference where ORT has no kernel, the spec's
text where the two runtimes differ from it)."""
import json
import zipfile

import numpy as np
import pytest
from helpers import assert_close, check_model, check_op, make_model, ort_run, rand
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from test_movement import check_ref, node_model

import om2gen
from om2gen.errors import NeedsConstantError, ShapeError, UnsupportedOpError
from om2gen.formats.om2 import layout

COVERS = {"OneHot", "ScatterND"}

I64, I32, F32 = np.int64, np.int32, np.float32


def block_dims(path, kernel_prefix: str) -> list[int]:
    """The block_dim of each task of a compiled archive whose kernel is `kernel_prefix`_<digest>."""
    with zipfile.ZipFile(path) as z:
        tasks = json.loads(z.read(layout.task_info_json(0)))["tasks"]
    return [t["block_dim"] for t in tasks if (t["kernel"] or "").startswith(kernel_prefix + "_")]


def run_om2(model, feeds, tmp_path, **opts) -> dict:
    path = tmp_path / "model.om2"
    om2gen.compile(model, path, **opts)
    with om2gen.load(path) as m:
        return m.run(feeds)


def typed_model(op_type, feeds, consts, order, out_dtype, opset, name, **attrs):
    """A one-node model whose output's type is declared (shape inference cannot give the type of
    a malformed node's output, and the checker then refuses the model before om2gen sees it)."""
    node = helper.make_node(op_type, order, ["y"], name=name, **attrs)
    graph = helper.make_graph(
        [node], "t",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(out_dtype)), ["n"])],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (consts or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


# --- OneHot ------------------------------------------------------------------------------------

def onehot(indices, depth, axis=-1, *, opset=11, values=np.array([-2.0, 5.0], F32), depth_dtype=I64, tmp_path):
    """One OneHot node, the depth a constant; compared with ONNX Runtime."""
    return check_op("OneHot", {"i": indices, "v": values}, {"axis": axis}, consts={"d": np.array(depth, depth_dtype)},
                    input_names=["i", "d", "v"], opset=opset, tmp_path=tmp_path)


# in [-4, 4) and out of it (4, 7, -5, -9): those give all-off rows
MIXED = np.array([[1, -1, 3, -4], [0, 7, -5, 2], [4, 3, -9, -2]], I64)


@pytest.mark.parametrize("axis", [-1, 0, 1, 2, -2, -3])
def test_onehot_axes(axis, tmp_path):
    onehot(MIXED, 4, axis, tmp_path=tmp_path)


@pytest.mark.parametrize("shape,axis", [((5,), 0), ((1,), -1), ((2, 3, 4), 1), ((2, 3, 4), 3), ((2, 1, 3, 2), -3)])
def test_onehot_ranks(shape, axis, tmp_path):
    idx = np.random.default_rng(1).integers(-7, 7, shape).astype(I64)
    onehot(idx, 6, axis, tmp_path=tmp_path)


@pytest.mark.parametrize("idtype,vdtype,ddtype", [(I32, F32, I32), (I32, F32, F32), (I64, I64, I64),
                                                  (I64, I32, F32), (I64, F32, F32)],
                         ids=["i32-f32-i32", "i32-f32-f32", "i64-i64-i64", "i64-i32-f32", "i64-f32-f32"])
def test_onehot_dtypes(idtype, vdtype, ddtype, tmp_path):
    """The (indices, values, depth) dtype combinations ONNX Runtime has kernels for."""
    onehot(MIXED.astype(idtype), 4, 1, values=np.array([3, -7], vdtype), depth_dtype=ddtype, tmp_path=tmp_path)


def test_onehot_float_indices_truncate(tmp_path):
    """Float indices are cast to int64 (toward zero), as the spec says and ORT does; NaN, the
    infinities and huge values are all-off rows (never converted)."""
    idx = np.array([1.5, -0.5, -1.0, -3.9, -4.0, -4.5, -5.0, 3.99, 4.0, np.nan, np.inf, -np.inf, 1e30, -1e30], F32)
    got = onehot(idx, 4, values=np.array([0.0, 1.0], F32), depth_dtype=F32, tmp_path=tmp_path)["y0"]
    on = [1, 0, 3, 1, 0, 0, None, 3, None, None, None, None, None, None]
    np.testing.assert_array_equal(got, np.array([np.eye(4)[j] if j is not None else np.zeros(4) for j in on], F32))


@pytest.mark.parametrize("idtype,vdtype", [(np.uint8, F32), (np.int8, np.float64), (np.uint64, I32),
                                           (np.float64, np.int64), (np.int16, np.float16)],
                         ids=["u8-f32", "i8-f64", "u64-i32", "f64-i64", "i16-f16"])
def test_onehot_other_dtypes(idtype, vdtype, tmp_path):
    """Dtypes ONNX Runtime has no OneHot kernel for, against onnx.reference (on integral indices,
    where the reference agrees with the spec's cast)."""
    idx = np.array([[0, 3, 2], [1, 9, 255]], np.int64)
    if np.issubdtype(idtype, np.signedinteger) or np.issubdtype(idtype, np.floating):
        idx[1, 2] = -2
    feeds = {"i": idx.astype(idtype), "v": np.array([0, 1], vdtype)}
    model = node_model("OneHot", feeds, {"axis": 0}, consts={"d": np.array(4, I64)}, opset=11, order=["i", "d", "v"])
    check_ref(model, feeds, tmp_path)


def test_onehot_uint64_huge_index_is_off_bool_values(tmp_path):
    """2**64 - 1 would be -1 as an int64: it is out of range, not the last position. Bool values
    (onnx.reference cannot subtract them, ORT has no kernel): against the spec's result."""
    feeds = {"i": np.array([2**64 - 1, 1, 2], np.uint64), "v": np.array([True, False])}
    model = node_model("OneHot", feeds, consts={"d": np.array(3, I64)}, opset=11, order=["i", "d", "v"])
    got = run_om2(model, feeds, tmp_path)["y0"]
    np.testing.assert_array_equal(got, np.array([[1, 1, 1], [1, 0, 1], [1, 1, 0]], np.bool_))


def test_onehot9_negative_indices_are_off(tmp_path):
    """OneHot-9: an index outside [0, depth) gives an all-off row (the spec; ONNX Runtime and
    onnx.reference wrap negative ones as OneHot-11 does). OneHot-11 wraps them."""
    idx = np.array([[2, -1], [0, -3]], I64)
    feeds = {"i": idx, "v": np.array([0.0, 1.0], F32)}
    spec9 = np.zeros((2, 2, 3), F32)
    spec9[0, 0, 2] = spec9[1, 0, 0] = 1.0
    model9 = node_model("OneHot", feeds, consts={"d": np.array(3, I64)}, opset=9, order=["i", "d", "v"])
    np.testing.assert_array_equal(run_om2(model9, feeds, tmp_path)["y0"], spec9)
    onehot(idx, 3, opset=11, values=feeds["v"], tmp_path=tmp_path)   # the same indices wrap at 11


def test_onehot9_float_indices(tmp_path):
    onehot(np.array([[1.0, 2.7], [-0.5, 3.0]], F32), 3, 0, opset=9, values=np.array([1.0, 2.0], F32),
           depth_dtype=F32, tmp_path=tmp_path)


def test_onehot_depth_of_shape_one_and_float(tmp_path):
    """depth [3.7] (rank 1, float): cast to int64, 3."""
    onehot(MIXED, [3.7], 1, depth_dtype=F32, tmp_path=tmp_path)


@pytest.mark.parametrize("shape,axis", [((8192,), -1), ((16, 512), 1)])
def test_onehot_large_runs_on_several_blocks(shape, axis, tmp_path):
    idx = np.random.default_rng(2).integers(-40, 40, shape).astype(I64)
    feeds = {"i": idx, "v": np.array([0.5, -1.0], F32)}
    model = make_model([helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=axis)], feeds, ["y"],
                       {"d": np.array(37, I64)}, opset=11)
    path = tmp_path / "model.om2"
    om2gen.compile(model, path, debug=True)
    with om2gen.load(path) as m:
        assert_close(m.run(feeds)["y"], ort_run(model, feeds)[0], "y")
    assert block_dims(path, "OneHot")[0] > 1


def test_onehot_result_feeds_a_kernel(tmp_path):
    nodes = [helper.make_node("OneHot", ["i", "d", "v"], ["t"], axis=1), helper.make_node("Relu", ["t"], ["y"])]
    feeds = {"i": np.array([[1, 0], [2, -1]], I64), "v": np.array([-1.0, 2.0], F32)}
    check_model(make_model(nodes, feeds, ["y"], {"d": np.array(3, I64)}, opset=13), feeds, tmp_path)


def test_onehot_runtime_depth_needs_a_constant(tmp_path):
    feeds = {"i": np.array([1, 0, 2], I64), "depth": np.array(3, I64), "v": np.array([0.0, 1.0], F32)}
    model = make_model([helper.make_node("OneHot", ["i", "depth", "v"], ["y"], name="hot")], feeds, ["y"], opset=11)
    with pytest.raises(NeedsConstantError) as e:
        om2gen.compile(model, tmp_path / "m.om2")
    assert e.value.value_name == "depth"
    assert "'hot'" in str(e.value) and "OneHot" in str(e.value) and "input_values=" in str(e.value)
    # what the message says to do works
    rest = {k: v for k, v in feeds.items() if k != "depth"}
    got = run_om2(model, rest, tmp_path, input_values={"depth": feeds["depth"]})
    assert_close(got["y"], ort_run(model, feeds)[0], "y")


@pytest.mark.parametrize("depth,values,what", [
    (0, np.array([0.0, 1.0], F32), "at least 1"), (-2, np.array([0.0, 1.0], F32), "at least 1"),
    ([3, 4], np.array([0.0, 1.0], F32), "one value"), (3, np.array([0.0, 1.0, 2.0], F32), "two elements"),
    (3, np.array([[0.0, 1.0]], F32), "two elements")])
def test_onehot_bad_depth_or_values(depth, values, what, tmp_path):
    feeds = {"i": np.array([1, 0], I64), "v": values}
    model = typed_model("OneHot", feeds, {"d": np.array(depth, I64)}, ["i", "d", "v"], F32, 11, "hot")
    with pytest.raises(ShapeError, match=what) as e:
        om2gen.compile(model, tmp_path / "m.om2")
    assert "'hot'" in str(e.value)


def test_onehot_float16_indices_are_refused(tmp_path):
    feeds = {"i": np.array([1, 0], np.float16), "v": np.array([0.0, 1.0], F32)}
    model = typed_model("OneHot", feeds, {"d": np.array(3, I64)}, ["i", "d", "v"], F32, 11, "hot")
    with pytest.raises(UnsupportedOpError, match="float16"):
        om2gen.compile(model, tmp_path / "m.om2")


def test_onehot_axis_out_of_range(tmp_path):
    feeds = {"i": np.array([1, 0], I64), "v": np.array([0.0, 1.0], F32)}
    model = typed_model("OneHot", feeds, {"d": np.array(3, I64)}, ["i", "d", "v"], F32, 11, "hot", axis=2)
    with pytest.raises(ShapeError, match="axis 2"):
        om2gen.compile(model, tmp_path / "m.om2")


# --- ScatterND ---------------------------------------------------------------------------------

def distinct_tuples(n: int, dims, seed=0, negative=True) -> np.ndarray:
    """n index tuples without repeats into `dims`; with `negative`, every other component counts
    from the end."""
    rng = np.random.default_rng(seed)
    flat = rng.permutation(int(np.prod(dims)))[:n]
    tuples = np.stack(np.unravel_index(flat, dims), -1).astype(I64)
    if negative:
        tuples[::2] -= np.array(dims, I64)
    return tuples


def repeated_tuples(shape, dims, seed=0) -> np.ndarray:
    """Index tuples of `shape` (the last dim: len(dims)) with repeats and negative components."""
    rng = np.random.default_rng(seed)
    tuples = np.zeros(shape, I64)
    for c, d in enumerate(dims):
        tuples[..., c] = rng.integers(-d, d, shape[:-1])
    return tuples


# (data shape, indices shape): tuples of 1, 2, all components; batched indices; an empty tuple
SHAPES = [((4, 4, 4), (2, 1)), ((4, 4, 4), (3, 2)), ((4, 5, 6), (7, 3)), ((2, 3, 4, 5), (2, 2, 2)),
          ((6,), (3, 1)), ((5, 3), (1, 0))]


@pytest.mark.parametrize("dshape,ishape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_scatternd(dshape, ishape, tmp_path):
    k = ishape[-1]
    idx = distinct_tuples(int(np.prod(ishape[:-1])), dshape[:k]).reshape(ishape) if k else np.zeros(ishape, I64)
    feeds = {"x": rand(*dshape), "i": idx, "u": rand(*ishape[:-1], *dshape[k:], seed=3)}
    check_op("ScatterND", feeds, opset=13, tmp_path=tmp_path)


@pytest.mark.parametrize("dshape,ishape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatternd_reductions_with_repeats(dshape, ishape, reduction, tmp_path):
    k = ishape[-1]
    idx = repeated_tuples(ishape, dshape[:k], seed=k)
    feeds = {"x": rand(*dshape), "i": idx, "u": rand(*ishape[:-1], *dshape[k:], seed=3)}
    check_op("ScatterND", feeds, {"reduction": reduction}, opset=18, tmp_path=tmp_path)


@pytest.mark.parametrize("reduction", ["none", "add", "mul"])
def test_scatternd_opset16(reduction, tmp_path):
    feeds = {"x": rand(5, 3), "i": np.array([[4], [-1], [0]], I64), "u": rand(3, 3, seed=1)}
    check_op("ScatterND", feeds, {"reduction": reduction}, opset=16, tmp_path=tmp_path)


def test_scatternd_opset11(tmp_path):
    feeds = {"x": rand(3, 4), "i": np.array([[2, 1], [0, -1]], I64), "u": rand(2, seed=1)}
    check_op("ScatterND", feeds, opset=11, tmp_path=tmp_path)


def test_scatternd_repeats_without_reduction_last_wins(tmp_path):
    """ONNX leaves repeats undefined; ONNX Runtime (and onnx.reference) apply updates in order."""
    feeds = {"x": rand(4, 3), "i": np.array([[1], [1], [-3], [2], [1]], I64), "u": rand(5, 3, seed=4)}
    got = check_op("ScatterND", feeds, opset=18, tmp_path=tmp_path)
    np.testing.assert_array_equal(got["y0"][1], feeds["u"][4])


@pytest.mark.parametrize("dtype,reduction", [(I64, "add"), (I64, "none"), (I32, "mul"), (I32, "max"),
                                             (np.float64, "min"), (np.float64, "none")],
                         ids=lambda v: getattr(v, "__name__", v))
def test_scatternd_dtypes(dtype, reduction, tmp_path):
    rng = np.random.default_rng(5)
    x = rng.integers(-9, 9, (4, 3, 2)).astype(dtype)
    u = rng.integers(-9, 9, (3, 2)).astype(dtype)
    idx = np.array([[1, 2], [-3, 0], [1, 2]] if reduction != "none" else [[1, 2], [-3, 0], [0, 1]], I64)
    check_op("ScatterND", {"x": x, "i": idx, "u": u}, {"reduction": reduction}, opset=18, tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [np.bool_, np.float16, np.uint8], ids=lambda d: np.dtype(d).name)
def test_scatternd_other_dtypes(dtype, tmp_path):
    from test_movement import any_dtype
    feeds = {"x": any_dtype(dtype, 3, 4), "i": np.array([[2], [0]], I64), "u": any_dtype(dtype, 2, 4, seed=1)}
    check_ref(node_model("ScatterND", feeds, opset=18), feeds, tmp_path)


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatternd_int32_indices(reduction, tmp_path):
    """ONNX Runtime takes int64 indices only: the same indices as int32 must give its int64 result."""
    feeds = {"x": rand(4, 5), "i": np.array([[3, -1], [0, 2], [-4, 4]], I64), "u": rand(3, seed=2)}
    model = make_model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)], feeds, ["y"],
                       opset=18)
    want = ort_run(model, feeds)[0]
    feeds32 = dict(feeds, i=feeds["i"].astype(I32))
    model32 = node_model("ScatterND", feeds32, {"reduction": reduction}, opset=18)
    assert_close(run_om2(model32, feeds32, tmp_path)["y0"], want, "y")


def test_scatternd_constant_indices(tmp_path):
    """An in-place update at known positions (a cache write in a decoder): indices are a constant."""
    check_op("ScatterND", {"x": rand(2, 6, 4), "u": rand(2, 2, 4, seed=1)},
             consts={"i": np.array([[[0, 5], [0, -6]], [[1, 3], [-1, 4]]], I64)}, input_names=["x", "i", "u"],
             opset=16, tmp_path=tmp_path)


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatternd_runtime_indices_out_of_range_are_skipped(reduction, tmp_path):
    """ONNX Runtime fails on such an index; om2gen skips the tuple (as ScatterElements skips an
    index), writing nothing outside the output."""
    x = rand(3, 4)
    # out of range: 5, -5, -6 (flat offsets 9, 3 and 6 inside the output, were they not checked), 3, -4
    idx = np.array([[1, 5], [2, -1], [1, -5], [3, 0], [2, -6], [-4, 1], [0, 1], [-1, -4]], I64)
    u = rand(8, seed=2)
    feeds = {"x": x, "i": idx, "u": u}
    want = x.copy()
    for (r, c), v in zip(idx, u):
        if -3 <= r < 3 and -4 <= c < 4:
            want[r, c] = {"none": v, "add": want[r, c] + v, "max": max(want[r, c], v)}[reduction]
    model = node_model("ScatterND", feeds, {"reduction": reduction}, opset=18)
    assert_close(run_om2(model, feeds, tmp_path)["y0"], want, "y")


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatternd_large_runs_on_several_blocks(reduction, tmp_path):
    """Blocks split every slice: repeated tuples still apply in order, whatever the block count.
    Against onnx.reference: ONNX Runtime's reductions race on repeated indices at this size (its
    max is sometimes wrong)."""
    idx = np.array([[3], [0], [3], [-5], [7], [3], [1], [0], [3], [-1], [2], [3]], I64)
    feeds = {"x": rand(8, 32768), "i": idx, "u": rand(12, 32768, seed=1, low=0.5, high=1.5)}
    if reduction == "none":
        feeds["i"] = distinct_tuples(8, (8,), seed=2).reshape(8, 1)
        feeds["u"] = feeds["u"][:8]
    model = make_model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)], feeds, ["y"],
                       opset=18)
    path = tmp_path / "model.om2"
    om2gen.compile(model, path, debug=True)
    with om2gen.load(path) as m:
        assert_close(m.run(feeds)["y"], ReferenceEvaluator(model).run(None, feeds)[0], "y")
    assert block_dims(path, "ScatterND")[0] > 1


def test_scatternd_result_feeds_a_kernel(tmp_path):
    nodes = [helper.make_node("ScatterND", ["x", "i", "u"], ["t"], reduction="add"),
             helper.make_node("Relu", ["t"], ["y"])]
    feeds = {"x": rand(3, 4), "i": np.array([[2], [0], [2]], I64), "u": rand(3, 4, seed=3)}
    check_model(make_model(nodes, feeds, ["y"], opset=16), feeds, tmp_path)


def _scatternd_model(feeds, consts=None, opset=18, **attrs):
    return typed_model("ScatterND", feeds, consts, ["x", "i", "u"], feeds["x"].dtype, opset, name="snd", **attrs)


@pytest.mark.parametrize("feeds,consts,opset,attrs,error,what", [
    ({"x": rand(3, 4), "u": rand(1)}, {"i": np.array([[3, 0]], I64)}, 18, {}, ShapeError,
     "hold 3, out of range for dim 0"),
    ({"x": rand(3, 4), "u": rand(1)}, {"i": np.array([[0, -5]], I64)}, 18, {}, ShapeError,
     "hold -5, out of range for dim 1"),
    ({"x": rand(3, 4), "i": np.array([[0]], I64), "u": rand(1, 3)}, {}, 18, {}, ShapeError, "updates"),
    ({"x": rand(3, 4), "i": np.array([[0]], I64), "u": rand(1, 4).astype(np.float64)}, {}, 18, {}, ShapeError,
     "updates"),
    ({"x": rand(3, 4), "i": np.array([[0, 1, 2]], I64), "u": rand(1)}, {}, 18, {}, ShapeError, "rank"),
    ({"x": rand(3, 4), "i": np.array([[0.0]], F32), "u": rand(1, 4)}, {}, 18, {}, UnsupportedOpError, "int64"),
    ({"x": rand(3, 4), "i": np.array([[0]], I64), "u": rand(1, 4)}, {}, 16, {"reduction": "max"},
     UnsupportedOpError, "opset 16"),
    ({"x": np.ones((3, 4), np.bool_), "i": np.array([[0]], I64), "u": np.ones((1, 4), np.bool_)}, {}, 18,
     {"reduction": "add"}, UnsupportedOpError, "bool"),
], ids=["const-index-high", "const-index-low", "updates-shape", "updates-dtype", "tuple-too-long", "float-indices",
        "max-before-18", "add-on-bool"])
def test_scatternd_errors(feeds, consts, opset, attrs, error, what, tmp_path):
    with pytest.raises(error, match=what) as e:
        om2gen.compile(_scatternd_model(feeds, consts, opset, **attrs), tmp_path / "m.om2")
    assert "'snd'" in str(e.value)
