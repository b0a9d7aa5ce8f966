"""Data movement: Slice, Split, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, Trilu."""
import numpy as np
import onnx
import pytest
from helpers import assert_close, check_model, check_op, rand
from onnx import helper, numpy_helper

import om2gen

COVERS = {"Slice", "Split", "Expand", "Tile", "Pad", "DepthToSpace", "SpaceToDepth", "Trilu"}

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min
I64 = np.int64


def i64(*v):
    return np.array(v, I64)


def node_model(op_type, inputs: dict, attrs=None, *, consts=None, n_outputs=1, opset=17, order=None):
    """A one-node model with inputs of any dtype (helpers.make_model covers the common ones)."""
    consts = consts or {}
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, order or (list(inputs) + list(consts)), outs, name="n", **(attrs or {}))
    graph = helper.make_graph(
        [node], "t",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    inferred = onnx.shape_inference.infer_shapes(model)
    model.graph.ClearField("output")
    model.graph.output.extend(inferred.graph.output)
    return model


def check_ref(model, feeds, tmp_path):
    """Compiles and runs `model`; compares with onnx's reference implementation (for what ONNX
    Runtime does not implement)."""
    from onnx.reference import ReferenceEvaluator
    path = tmp_path / "model.om2"
    om2gen.compile(model, path)
    with om2gen.load(path) as m:
        got = m.run(feeds)
    ref = ReferenceEvaluator(model).run(None, feeds)
    for o, r in zip(model.graph.output, ref):
        assert_close(got[o.name], np.asarray(r), o.name)


def any_dtype(dtype, *shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.uniform(-4, 4, shape).astype(dtype)


DTYPES = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64, np.bool_]


# --- Slice -------------------------------------------------------------------------------------

SLICES = {
    "basic": (i64(1, 0), i64(3, 4), i64(0, 1), i64(1, 2)),
    "negative_steps": (i64(-1, 4), i64(INT64_MIN, 0), i64(1, 2), i64(-1, -2)),
    "reverse_all": (i64(-1), i64(INT64_MIN), i64(0), i64(-1)),
    "negative_axes": (i64(1, -2), i64(-1, INT64_MAX), i64(-1, -2), None),
    "default_axes": (i64(0, 1, 2), i64(2, 3, 5), None, None),
    "ends_out_of_bounds": (i64(1), i64(1000), i64(1), i64(3)),
    "start_clamped_neg_step": (i64(100), i64(-100), i64(2), i64(-3)),
    "empty": (i64(10), i64(1000), i64(1), i64(1)),
    "inner_only": (i64(2), i64(4), i64(2), None),
}


@pytest.mark.parametrize("case", list(SLICES))
def test_slice(case, tmp_path):
    starts, ends, axes, steps = SLICES[case]
    consts = {"starts": starts, "ends": ends}
    if axes is not None:
        consts["axes"] = axes
    if steps is not None:
        if axes is None:
            consts["axes"] = np.arange(len(starts), dtype=I64)
        consts["steps"] = steps
    check_op("Slice", {"x": rand(4, 5, 6)}, consts=consts, opset=13, tmp_path=tmp_path)


def test_slice_opset1_attributes(tmp_path):
    check_op("Slice", {"x": rand(4, 5, 6)}, {"starts": [1, -3], "ends": [3, 100], "axes": [0, 2]}, opset=9,
             tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_slice_dtypes(dtype, tmp_path):
    x = any_dtype(dtype, 6, 7)
    model = node_model("Slice", {"x": x}, consts={"s": i64(5, 1), "e": i64(0, 7), "a": i64(0, 1), "st": i64(-2, 2)},
                       opset=13)
    check_model(model, {"x": x}, tmp_path)


def test_slice_feeds_a_kernel(tmp_path):
    from helpers import make_model
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    model = make_model(nodes, {"x": rand(3, 8)}, ["y"], {"s": i64(2), "e": i64(6), "a": i64(1)}, opset=13)
    check_model(model, {"x": rand(3, 8)}, tmp_path)


def test_slice_big_rows_split_into_chunks(tmp_path):
    check_op("Slice", {"x": rand(2, 70000)}, consts={"s": i64(1, 3), "e": i64(2, 69999)}, opset=13,
             tmp_path=tmp_path)


# --- Split -------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis,split", [(0, [2, 4]), (1, [1, 1, 3]), (-1, [2, 2, 3]), (1, [0, 5]), (2, None)])
def test_split13(axis, split, tmp_path):
    x = rand(6, 5, 8) if split is None else rand(6, 5, 7)
    if split is None:
        check_op("Split", {"x": x}, {"axis": axis}, n_outputs=2, opset=13, tmp_path=tmp_path)
    else:
        check_op("Split", {"x": x}, {"axis": axis}, consts={"split": np.array(split, I64)}, n_outputs=len(split),
                 opset=13, tmp_path=tmp_path)


@pytest.mark.parametrize("n,dim", [(3, 7), (4, 8), (2, 5)])
def test_split18_num_outputs(n, dim, tmp_path):
    check_op("Split", {"x": rand(3, dim)}, {"axis": 1, "num_outputs": n}, n_outputs=n, opset=18, tmp_path=tmp_path)


def test_split18_uneven_with_an_empty_part(tmp_path):
    x = rand(3, 2)
    check_ref(node_model("Split", {"x": x}, {"axis": 1, "num_outputs": 3}, n_outputs=3, opset=18), {"x": x}, tmp_path)


def test_split11_attribute(tmp_path):
    check_op("Split", {"x": rand(4, 6)}, {"axis": -1, "split": [1, 2, 3]}, n_outputs=3, opset=11,
             tmp_path=tmp_path)


def test_split_single_output_is_a_view(tmp_path):
    from helpers import make_model
    nodes = [helper.make_node("Split", ["x"], ["t"], axis=0), helper.make_node("Relu", ["t"], ["y"])]
    check_model(make_model(nodes, {"x": rand(3, 4)}, ["y"], opset=13), {"x": rand(3, 4)}, tmp_path)


# --- Expand, Tile ------------------------------------------------------------------------------

@pytest.mark.parametrize("xshape,shape", [((3, 1), (2, 3, 4)), ((1,), (4, 5)), ((3, 4), (1, 1)),
                                          ((2, 1, 5), (2, 3, 1)), ((3, 4), (3, 4)), ((4, 1, 1), (4, 6, 7))])
def test_expand(xshape, shape, tmp_path):
    check_op("Expand", {"x": rand(*xshape)}, consts={"shape": np.array(shape, I64)}, opset=13, tmp_path=tmp_path)


def test_expand_int64_and_bool(tmp_path):
    check_op("Expand", {"x": np.array([[1], [2]], I64)}, consts={"shape": i64(2, 3)}, opset=13, tmp_path=tmp_path)
    (tmp_path / "b").mkdir()
    check_op("Expand", {"x": np.array([True, False, True])}, consts={"shape": i64(2, 3)}, opset=13,
             tmp_path=tmp_path / "b")


@pytest.mark.parametrize("xshape,reps", [((2, 3), (2, 3)), ((4,), (3,)), ((2, 3, 4), (2, 1, 2)),
                                         ((2, 3), (1, 1)), ((2, 3), (0, 2)), ((1, 5), (4, 1))])
def test_tile(xshape, reps, tmp_path):
    check_op("Tile", {"x": rand(*xshape)}, consts={"r": np.array(reps, I64)}, opset=13, tmp_path=tmp_path)


# --- Pad ---------------------------------------------------------------------------------------

PADS = {
    "constant_2d": ("constant", (3, 4), [1, 2, 2, 0]),
    "constant_crop": ("constant", (5, 6), [-1, 2, 1, -3]),
    "reflect_big": ("reflect", (4, 5), [3, 2, 2, 4]),
    "edge": ("edge", (3, 4), [2, 3, 1, 2]),
    "wrap": ("wrap", (3, 4), [2, 3, 1, 2]),
    "nchw_hw": ("reflect", (2, 3, 4, 5), [0, 0, 2, 1, 0, 0, 1, 3]),
    "outer_only": ("constant", (3, 4, 5), [1, 0, 0, 2, 0, 0]),
    "inner_only": ("edge", (3, 4, 5), [0, 0, 2, 0, 0, 1]),
}


@pytest.mark.parametrize("case", list(PADS))
def test_pad(case, tmp_path):
    mode, shape, pads = PADS[case]
    consts = {"pads": np.array(pads, I64)}
    if mode == "constant":
        consts["value"] = np.array(1.5, np.float32)
    model = node_model("Pad", {"x": rand(*shape)}, {"mode": mode}, consts=consts, opset=19)
    if mode == "wrap":
        check_ref(model, {"x": rand(*shape)}, tmp_path)
    else:
        check_model(model, {"x": rand(*shape)}, tmp_path)


def test_pad_reflect_wider_than_input(tmp_path):
    """Pads longer than the dim reflect again (numpy's rule, which onnx's reference follows)."""
    model = node_model("Pad", {"x": rand(2, 3)}, {"mode": "reflect"}, consts={"pads": i64(0, 5, 0, 4)}, opset=19)
    check_ref(model, {"x": rand(2, 3)}, tmp_path)


def test_pad_runtime_constant_value(tmp_path):
    feeds = {"x": rand(3, 4), "v": np.array(-7.25, np.float32)}
    check_op("Pad", feeds, consts={"pads": i64(1, 1, 2, 2)}, input_names=["x", "pads", "v"], opset=13,
             tmp_path=tmp_path)


def test_pad_axes(tmp_path):
    check_op("Pad", {"x": rand(2, 3, 4)}, consts={"pads": i64(1, 2, 3, 0), "v": np.array(2.0, np.float32),
                                                 "axes": i64(-1, 0)}, opset=18, tmp_path=tmp_path)


def test_pad_opset2_attributes(tmp_path):
    check_op("Pad", {"x": rand(1, 2, 3, 3)}, {"pads": [0, 0, 1, 1, 0, 0, 1, 1], "mode": "constant", "value": 3.0},
             opset=10, tmp_path=tmp_path)
    (tmp_path / "e").mkdir()
    check_op("Pad", {"x": rand(3, 3)}, {"pads": [1, 2, 2, 1], "mode": "edge"}, opset=10, tmp_path=tmp_path / "e")


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_, np.float64, np.float16],
                         ids=lambda d: np.dtype(d).name)
def test_pad_dtypes(dtype, tmp_path):
    x = any_dtype(dtype, 3, 4)
    consts = {"pads": i64(1, 0, 2, 1), "v": np.array(1, dtype)}
    model = node_model("Pad", {"x": x}, consts=consts, opset=13)
    check_model(model, {"x": x}, tmp_path)


def test_pad_crop_only_ignores_the_value(tmp_path):
    feeds = {"x": rand(4, 5), "v": np.array(3.0, np.float32)}
    check_model(node_model("Pad", feeds, consts={"p": i64(-1, 0, 0, -2)}, order=["x", "p", "v"], opset=13), feeds,
                tmp_path)


def test_pad_feeds_a_kernel(tmp_path):
    from helpers import make_model
    nodes = [helper.make_node("Pad", ["x", "p"], ["t"], mode="reflect"), helper.make_node("Relu", ["t"], ["y"])]
    model = make_model(nodes, {"x": rand(2, 5, 5)}, ["y"], {"p": i64(0, 2, 2, 0, 2, 2)}, opset=13)
    check_model(model, {"x": rand(2, 5, 5)}, tmp_path)


# --- DepthToSpace, SpaceToDepth ---------------------------------------------------------------

@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("b", [2, 3])
def test_depth_to_space(mode, b, tmp_path):
    check_op("DepthToSpace", {"x": rand(2, 2 * b * b, 3, 4)}, {"blocksize": b, "mode": mode}, opset=13,
             tmp_path=tmp_path)


@pytest.mark.parametrize("b", [2, 3])
def test_space_to_depth(b, tmp_path):
    check_op("SpaceToDepth", {"x": rand(2, 3, 2 * b, 3 * b)}, {"blocksize": b}, opset=13, tmp_path=tmp_path)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_28_modes(mode, tmp_path):
    x = rand(1, 2, 4, 6)
    check_ref(node_model("SpaceToDepth", {"x": x}, {"blocksize": 2, "mode": mode}, opset=28), {"x": x}, tmp_path)


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.float16], ids=lambda d: np.dtype(d).name)
def test_depth_to_space_dtypes(dtype, tmp_path):
    x = np.arange(2 * 8 * 2 * 3).astype(dtype).reshape(2, 8, 2, 3)
    check_ref(node_model("DepthToSpace", {"x": x}, {"blocksize": 2, "mode": "CRD"}, opset=13), {"x": x}, tmp_path)


# --- Trilu -------------------------------------------------------------------------------------

@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("shape,k", [((4, 5), None), ((5, 3), 1), ((2, 4, 4), -2), ((3, 6), 7), ((3, 6), -5)])
def test_trilu(upper, shape, k, tmp_path):
    consts = {} if k is None else {"k": np.array(k, I64)}
    check_op("Trilu", {"x": rand(*shape)}, {"upper": upper}, consts=consts, opset=14, tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [np.float16, np.bool_, np.int8], ids=lambda d: np.dtype(d).name)
def test_trilu_dtypes(dtype, tmp_path):
    x = any_dtype(dtype, 2, 3, 4)
    check_ref(node_model("Trilu", {"x": x}, {"upper": 1}, opset=14), {"x": x}, tmp_path)


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_trilu_runtime_k(k, tmp_path):
    feeds = {"x": np.arange(20, dtype=I64).reshape(4, 5), "k": np.array(k, I64)}
    check_op("Trilu", feeds, {"upper": 0}, opset=14, tmp_path=tmp_path)
