"""Data-dependent output shapes in .om2 archives (docs/dynamic-shapes.md, "Data-dependent
shapes"): NonZero and NonMaxSuppression, whose output counts only the run knows. Each archive is
compiled once and run at several inputs, each run against ONNX Runtime; the counts 0 and the
largest included."""
import json
import zipfile

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.helpers import ort_run

import om2gen
from om2gen.errors import Om2Error
from om2gen.formats.om2 import layout

_TYPES = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.int32: TensorProto.INT32,
          np.bool_: TensorProto.BOOL, np.uint8: TensorProto.UINT8}


def _model(nodes, inputs: dict, outputs: dict, inits=(), opset=13):
    """inputs/outputs: {name: (numpy dtype, dims)}."""
    return helper.make_model(helper.make_graph(
        nodes, "datadep", [helper.make_tensor_value_info(n, _TYPES[t], d) for n, (t, d) in inputs.items()],
        [helper.make_tensor_value_info(n, _TYPES[t], d) for n, (t, d) in outputs.items()], list(inits)),
        opset_imports=[helper.make_opsetid("", opset)])


def _check(model, path, feeds_list, **compile_opts):
    """One archive, run at every feed, each result equal to ONNX Runtime's (dims and values)."""
    om2gen.compile(model, path, **compile_opts)
    with om2gen.load(path) as m:
        for feeds in feeds_list:
            got = m.run(feeds)
            want = ort_run(model, feeds)
            for (name, g), w in zip(got.items(), want):
                assert g.shape == w.shape, (name, g.shape, w.shape)
                np.testing.assert_array_equal(g, w, err_msg=name)
    return path


def _sparse(shape, density, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    return np.where(rng.random(shape) < density, x, 0).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_nonzero_alone_at_every_count(tmp_path, dtype):
    """All zeros (count 0), all non-zero (the planned maximum) and counts between, one archive;
    the input large enough that the kernels split it across blocks."""
    shape = (4, 3, 2900)
    m = _model([helper.make_node("NonZero", ["x"], ["y"])], {"x": (dtype, shape)}, {"y": (np.int64, [3, "n"])})
    feeds = [{"x": np.zeros(shape, dtype)}, {"x": np.ones(shape, dtype)}]
    feeds += [{"x": _sparse(shape, d, seed, dtype)} for seed, d in enumerate((0.001, 0.5, 0.97))]
    _check(m, tmp_path / "nz.om2", feeds)


def test_nonzero_of_a_scalar_and_of_one_dim(tmp_path):
    m = _model([helper.make_node("NonZero", ["s"], ["ys"]), helper.make_node("NonZero", ["v"], ["yv"])],
               {"s": (np.float32, []), "v": (np.int64, [7])}, {"ys": (np.int64, [1, "a"]), "yv": (np.int64, [1, "b"])})
    cases = ((0, np.zeros(7, np.int64)), (2.5, np.array([0, 3, 0, -1, 0, 0, 9])), (-1, np.arange(1, 8)))
    _check(m, tmp_path / "nz.om2", [{"s": np.array(s, np.float32), "v": v} for s, v in cases])


def test_nonzero_count_used_downstream(tmp_path):
    """x[x != 0] as exported models write it: NonZero -> Transpose -> GatherND (the count is the
    rows of the transpose and the length of the gather), and a Gather of a row of NonZero's output
    (the column indices of the non-zero elements), with an Add after it: kernels whose tiling is
    the run's count."""
    shape = (6, 50)
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idx"], ["vals"]),
             helper.make_node("Gather", ["nz", "one"], ["cols"], axis=0),
             helper.make_node("Add", ["vals", "vals"], ["twice"])]
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    m = _model(nodes, {"x": (np.float32, shape)},
               {"idx": (np.int64, ["n", 2]), "vals": (np.float32, ["n"]), "cols": (np.int64, ["n"]),
                "twice": (np.float32, ["n"])}, [one])
    feeds = [{"x": _sparse(shape, d, seed)} for seed, d in enumerate((0.0, 0.1, 1.0, 0.6))]
    _check(m, tmp_path / "nz.om2", feeds)


def test_a_dynamic_batch_meets_a_data_dependent_count(tmp_path):
    """The input's batch is a symbol of its range, the count one of 0~(its most): the count's
    bound comes from the batch's, and the GatherND after them reads both."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idx"], ["vals"])]
    m = _model(nodes, {"x": (np.float32, ["N", 5])}, {"idx": (np.int64, ["n", 2]), "vals": (np.float32, ["n"])})
    feeds = [{"x": _sparse((n, 5), d, n)} for n, d in ((1, 0.5), (8, 1.0), (3, 0.0), (8, 0.3), (5, 0.7))]
    path = _check(m, tmp_path / "nz.om2", feeds, input_shapes={"x": ("1~8", 5)})
    with zipfile.ZipFile(path) as z:
        d = json.loads(z.read(layout.model_meta(0)))["dynamic_shapes"]
    count, = [s for s in d["symbols"] if "producer" in s]
    assert count["range"] == [0, 40] and count["input"] == -1 and count["producer"]
    assert d["outputs"][1] == [count["name"]]


def test_a_data_dependent_model_is_refused_for_an_om(tmp_path):
    m = _model([helper.make_node("NonZero", ["x"], ["y"])], {"x": (np.float32, [4])}, {"y": (np.int64, [1, "n"])})
    with pytest.raises(Om2Error, match=r"data-dependent count.*compile it to \.om2"):
        om2gen.compile(m, tmp_path / "nz.om")
