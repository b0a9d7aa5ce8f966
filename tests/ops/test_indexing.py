"""Indexing by run-time tensors: Gather, GatherElements, GatherND, ScatterElements, Scatter."""
import numpy as np
import pytest
from helpers import check_model, check_op, make_model, rand
from onnx import helper
from test_movement import any_dtype, check_ref, node_model

COVERS = {"Gather", "GatherElements", "GatherND", "ScatterElements", "Scatter"}

I64 = np.int64


def indices(shape, n, seed=0, dtype=I64):
    """Indices in [-n, n): negative ones count from the end."""
    return np.random.default_rng(seed).integers(-n, n, shape).astype(dtype)


# --- Gather ------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis,ishape", [(0, (3,)), (1, (2, 3)), (-1, (4,)), (2, ()), (0, (5, 1, 2)), (1, (0,))])
@pytest.mark.parametrize("idtype", [np.int64, np.int32], ids=["i64", "i32"])
def test_gather(axis, ishape, idtype, tmp_path):
    x = rand(4, 5, 6)
    idx = indices(ishape, x.shape[axis], seed=len(ishape), dtype=idtype)
    check_op("Gather", {"x": x, "i": idx}, {"axis": axis}, opset=13, tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.int64, np.bool_, np.float64], ids=lambda d: np.dtype(d).name)
def test_gather_dtypes(dtype, tmp_path):
    x = any_dtype(dtype, 5, 3)
    feeds = {"x": x, "i": np.array([[4, -1], [0, 2]], I64)}
    check_model(node_model("Gather", feeds, {"axis": 0}, opset=13), feeds, tmp_path)


@pytest.mark.parametrize("index", [np.array(2, I64), np.array([-1], I64)])
def test_gather_constant_index_is_a_slice(index, tmp_path):
    check_op("Gather", {"x": rand(3, 4, 5)}, {"axis": 1}, consts={"i": index}, opset=13, tmp_path=tmp_path)


def test_gather_constant_indices_runtime_data(tmp_path):
    """An embedding lookup: constant table, run-time indices."""
    feeds = {"i": np.array([[1, 0, 7], [3, 3, -2]], I64)}
    check_op("Gather", feeds, consts={"table": rand(8, 16)}, input_names=["table", "i"], opset=13,
             tmp_path=tmp_path)


def test_gather_opset1(tmp_path):
    check_op("Gather", {"x": rand(4, 3), "i": np.array([3, 0, 1], I64)}, {"axis": 0}, opset=9, tmp_path=tmp_path)


# --- GatherElements ----------------------------------------------------------------------------

@pytest.mark.parametrize("axis,dshape,ishape", [(0, (3, 4), (5, 4)), (1, (3, 4), (3, 2)), (-1, (2, 3, 4), (2, 3, 6)),
                                                (1, (2, 3, 4), (2, 5, 4)), (0, (4, 5), (2, 3)), (0, (7,), (3,))])
def test_gather_elements(axis, dshape, ishape, tmp_path):
    x = rand(*dshape)
    idx = indices(ishape, dshape[axis])
    check_op("GatherElements", {"x": x, "i": idx}, {"axis": axis}, opset=13, tmp_path=tmp_path)


def test_gather_elements_int32_indices_int64_data(tmp_path):
    x = np.arange(12, dtype=I64).reshape(3, 4)
    check_op("GatherElements", {"x": x, "i": indices((3, 4), 3, dtype=np.int32)}, {"axis": 0}, opset=13,
             tmp_path=tmp_path)


# --- GatherND ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dshape,ishape,b", [((2, 2), (2, 2), 0), ((2, 2), (2, 1), 0), ((2, 2, 2), (2, 2), 0),
                                             ((2, 2, 2), (2, 1, 2), 0), ((2, 2, 2), (2, 1), 1),
                                             ((3, 4, 5, 6), (3, 4, 2, 1), 2), ((3, 4, 5), (2, 3), 0)])
def test_gather_nd(dshape, ishape, b, tmp_path):
    x = rand(*dshape)
    m = ishape[-1]
    rng = np.random.default_rng(1)
    idx = np.stack([rng.integers(-dshape[b + k], dshape[b + k], ishape[:-1]) for k in range(m)], -1).astype(I64)
    check_op("GatherND", {"x": x, "i": idx}, {"batch_dims": b}, opset=13, tmp_path=tmp_path)


def test_gather_nd_int32_data(tmp_path):
    x = np.arange(8, dtype=np.int32).reshape(2, 2, 2)
    check_op("GatherND", {"x": x, "i": np.array([[1], [0]], I64)}, {"batch_dims": 1}, opset=13, tmp_path=tmp_path)


# --- ScatterElements, Scatter --------------------------------------------------------------------

def _unique_indices(shape, n, axis, seed=0):
    """Indices without repeats along `axis` (ORT leaves the order of repeats unspecified)."""
    rng = np.random.default_rng(seed)
    moved = list(shape)
    moved.append(moved.pop(axis))
    flat = np.stack([rng.permutation(n)[:moved[-1]] for _ in range(int(np.prod(moved[:-1])))])
    return np.moveaxis(flat.reshape(moved), -1, axis).astype(I64)


@pytest.mark.parametrize("axis,dshape,ishape", [(0, (4, 3), (2, 3)), (1, (4, 3), (4, 2)), (-1, (2, 3, 5), (2, 2, 3)),
                                                (1, (2, 3, 5), (1, 2, 4))])
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements(axis, dshape, ishape, reduction, tmp_path):
    n = dshape[axis]
    idx = _unique_indices(ishape, n, axis) if reduction == "none" else indices(ishape, n, seed=2)
    if reduction == "none":
        idx = np.where(idx % 2 == 1, idx - n, idx)   # some negative
    feeds = {"x": rand(*dshape), "i": idx, "u": rand(*ishape, seed=5)}
    check_op("ScatterElements", feeds, {"axis": axis, "reduction": reduction}, opset=18, tmp_path=tmp_path)


def test_scatter_elements_duplicates_last_wins(tmp_path):
    feeds = {"x": rand(1, 5), "i": np.array([[1, 1, 3]], I64), "u": np.array([[1.0, 2.0, 3.0]], np.float32)}
    model = node_model("ScatterElements", feeds, {"axis": 1}, opset=18)
    check_ref(model, feeds, tmp_path)


def test_scatter_elements_int64_add(tmp_path):
    feeds = {"x": np.arange(12, dtype=I64).reshape(3, 4), "i": np.array([[0, 2], [2, 2]], I64),
             "u": np.array([[10, 20], [30, 40]], I64)}
    check_op("ScatterElements", feeds, {"axis": 0, "reduction": "add"}, opset=16, tmp_path=tmp_path)


def test_scatter_opset10(tmp_path):
    feeds = {"x": np.zeros((3, 3), np.float32), "i": np.array([[1, 0, 2], [0, 2, 1]], I64), "u": rand(2, 3)}
    check_op("Scatter", feeds, {"axis": 0}, opset=10, tmp_path=tmp_path)


def test_scatter_result_feeds_a_kernel(tmp_path):
    nodes = [helper.make_node("ScatterElements", ["x", "i", "u"], ["t"], axis=1),
             helper.make_node("Relu", ["t"], ["y"])]
    feeds = {"x": rand(3, 4), "i": np.array([[3], [0], [-1]], I64), "u": rand(3, 1, seed=3)}
    check_model(make_model(nodes, feeds, ["y"], opset=13), feeds, tmp_path)
