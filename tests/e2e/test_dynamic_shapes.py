"""Dynamic models as .om2 archives (issue 15, docs/dynamic-shapes.md): one archive, captured once
at load, run at any shape in its ranges, each run against ONNX Runtime."""
import json
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.e2e import gear_models
from tests.helpers import ort_run, without_dynamic_support

import om2gen
from om2gen.errors import InputError
from om2gen.formats import op_so_store
from om2gen.formats.om2 import layout
from om2gen.formats.op_so_store import SoBinType


def _model(nodes, inputs: dict, outputs: dict, inits=()):
    return helper.make_model(helper.make_graph(
        nodes, "dyn", [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in outputs.items()], list(inits)),
        opset_imports=[helper.make_opsetid("", 17)])


def _elementwise():
    """relu(x) + b, times x, and x * column (a [N, 1] input broadcast along the rows)."""
    b = numpy_helper.from_array(np.linspace(-1, 1, 24, dtype=np.float32).reshape(3, 8), "b")
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "b"], ["s"]),
             helper.make_node("Mul", ["s", "x"], ["y"]), helper.make_node("Mul", ["x", "col"], ["z"])]
    return _model(nodes, {"x": ["N", 3, 8], "col": ["N", 3, 1]}, {"y": ["N", 3, 8], "z": ["N", 3, 8]}, [b])


@pytest.fixture(scope="module")
def elementwise(tmp_path_factory):
    m = _elementwise()
    path = tmp_path_factory.mktemp("dyn") / "ew.om2"
    om2gen.compile(m, path, input_shapes={"x": ("1~40", 3, 8), "col": ("1~40", 3, 1)})
    return m, path


def test_one_archive_runs_every_size_in_its_range(elementwise):
    m, path = elementwise
    rng = np.random.default_rng(0)
    with om2gen.load(path) as model:
        assert [t.shape for t in model.inputs] == [(-1, 3, 8), (-1, 3, 1)]
        assert [t.max_shape for t in model.outputs] == [(40, 3, 8), (40, 3, 8)]
        for n in (1, 7, 40, 2, 40, 13):     # sizes in any order, the largest twice
            x = rng.standard_normal((n, 3, 8)).astype(np.float32)
            col = rng.standard_normal((n, 3, 1)).astype(np.float32)
            got = model.run({"x": x, "col": col})
            want = ort_run(m, {"x": x, "col": col})
            for g, w in zip(got.values(), want):
                assert g.shape == w.shape
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_shapes_outside_the_model_are_input_errors(elementwise):
    _, path = elementwise
    with om2gen.load(path) as model:
        ok = {"x": np.zeros((4, 3, 8), np.float32), "col": np.zeros((4, 3, 1), np.float32)}
        for feeds, match in ((dict(ok, x=np.zeros((41, 3, 8), np.float32)), r"dim 0 \(N\) must be in 1~40"),
                             (dict(ok, x=np.zeros((4, 3, 9), np.float32)), r"dim 2 must be 8"),
                             (dict(ok, col=np.zeros((5, 3, 1), np.float32)), r"which input 'x' sets to 4"),
                             (dict(ok, x=np.zeros((4, 3), np.float32)), r"takes rank 3")):
            with pytest.raises(InputError, match=match):
                model.run(feeds)
        assert model.run(ok)["y"].shape == (4, 3, 8)    # the model still runs after refusals


def test_the_archive_holds_its_device_tiling_library_as_op_master_device(elementwise):
    """The seed's rule: PREPROCESS_KERNEL tasks name the library, which is packed as
    kOpMasterDevice (flag 0x4000); model_meta has GE's -1 dims and shape_range."""
    _, path = elementwise
    with zipfile.ZipFile(path) as z:
        meta = json.loads(z.read(layout.model_meta(0)))
        bins = op_so_store.load(z.read(layout.SO_STORE))
        assert meta["so_bins"]["so_in_om_flag"] & 0x4000
        lib = meta["dynamic_shapes"]["tiling_library"]
        # (and the autofuse library of its fused node: tests/e2e/test_dynamic_fusion.py)
        assert [(b.name, b.bin_type) for b in bins][:1] == [(lib, SoBinType.kOpMasterDevice)]
        assert not any(lib in k for k in meta["kernels"])
        source = z.read(layout.csrc_dir(0) + "op_master_device.c").decode()
        assert "symbols[0] = N: dim 0 of input x (1~40)" in source and "OM2_KERNEL(tiling_k" in source
        x = meta["inputs"][0]
        assert x["shape"] == [-1, 3, 8] and x["shape_range"] == [[1, 40], [3, 3], [8, 8]]
        assert meta["dynamic_shapes"]["outputs"] == [["N", "3", "8"], ["N", "3", "8"]]


def test_inspect_shows_the_dynamic_dims(elementwise, capsys):
    from om2gen.cli.entry import main
    assert main(["inspect", str(elementwise[1])]) == 0
    out = capsys.readouterr().out
    assert "input  x: float32[-1, 3, 8] = [N, 3, 8]" in out and "dynamic dim N: 1~40 (input 0 dim 0)" in out
    assert "kOpMasterDevice" in out and "tiling_k" in out


def test_the_same_model_compiles_to_the_same_bytes(tmp_path):
    m = _elementwise()
    for name in ("a.om2", "b.om2"):
        om2gen.compile(m, tmp_path / name, input_shapes={"x": ("1~40", 3, 8), "col": ("1~40", 3, 1)})
    assert (tmp_path / "a.om2").read_bytes() == (tmp_path / "b.om2").read_bytes()


def test_a_node_without_a_shape_generic_kernel_is_named(tmp_path):
    """QLinearSigmoid has no dynamic support: the compile names it, and writes nothing."""
    m = _model([], {"x": ["N", 8]}, {"y": ["N", 8]})
    m.graph.node.extend(without_dynamic_support(m, "x", "y", "swap"))
    with pytest.raises(om2gen.Om2Error, match=r"swap \(QLinearSigmoid\)"):
        om2gen.compile(m, tmp_path / "t.om2", input_shapes={"x": ("1~8", 8)})
    assert not list(tmp_path.iterdir())


def test_the_model_loads_from_bytes(elementwise):
    _, path = elementwise
    with om2gen.load(path.read_bytes()) as model:
        x = np.ones((3, 3, 8), np.float32)
        assert model.run({"x": x, "col": x[..., :1]})["z"].shape == (3, 3, 8)


def _image_cnn():
    """conv (3x3, pad 1), relu, 2x2 max pool over x[1, 3, H, W]: both image dims dynamic."""
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.2).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(8) * 0.2).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    return _model(nodes, {"x": [1, 3, "H", "W"]}, {"y": [1, 8, "H2", "W2"]}, [w, b])


MODELS = {
    # name: (model, input_shapes, feeds at size n)
    "cnn_batch": (lambda: gear_models.cnn_batch(), {"x": ("1~16", 3, 16, 16)},
                  lambda rng, n: {"x": rng.standard_normal((n, 3, 16, 16)).astype(np.float32)}),
    "cnn_image": (_image_cnn, {"x": (1, 3, "8~96", "8~96")},
                  lambda rng, n: {"x": rng.standard_normal((1, 3, 8 + 5 * n, 96 - 5 * n)).astype(np.float32)}),
    "cnn_image_mean": (lambda: gear_models.cnn_image(), {"x": (1, 3, "8~96", "8~96")},   # + ReduceMean over H, W
                       lambda rng, n: {"x": rng.standard_normal((1, 3, 8 + 5 * n, 96 - 5 * n)).astype(np.float32)}),
    "encoder": (lambda: gear_models.encoder(), {"input_ids": (1, "1~64")},
                lambda rng, n: {"input_ids": rng.integers(0, 50, (1, 4 * n)).astype(np.int64)}),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_at_several_shapes_match_onnx_runtime(name, tmp_path):
    """A CNN with a dynamic batch, one with a dynamic image size (conv's positions, the pool's
    output size), and a BERT-style encoder layer as torch.onnx exports it (Shape/Gather/Concat
    into Reshape, Range positions) with a dynamic sequence length: one archive each."""
    build, shapes, feeds = MODELS[name]
    m = build()
    om2gen.compile(m, tmp_path / "m.om2", input_shapes=shapes)
    rng = np.random.default_rng(7)
    with om2gen.load(tmp_path / "m.om2") as model:
        for n in (1, 16, 3, 9, 16):
            f = feeds(rng, n)
            for got, want in zip(model.run(f).values(), ort_run(m, f)):
                assert got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{name} at size {n}")


@pytest.mark.slow
def test_bert_base_with_a_dynamic_sequence_matches_onnx_runtime(tmp_path):
    """The benchmark suite's BERT-base encoder (4 layers, 768 wide) with the sequence dynamic, as
    torch.onnx exports a dynamic axis (positions sliced to the input's length, heads reshaped to
    [0, -1, 12, 64]): one archive, four sequence lengths including 1 and the range's end."""
    from benchmarks import models
    path = models.path("bert_base_4l_seq")
    om2gen.compile(path, tmp_path / "bert.om2", input_shapes={"input_ids": (1, "1~256"), "attention_mask": (1, "1~256")})
    m = onnx.load(str(path))
    rng = np.random.default_rng(3)
    with om2gen.load(tmp_path / "bert.om2") as model:
        for s in (7, 256, 1, 100):
            mask = np.ones((1, s), np.int64)
            mask[0, s // 2:] = 0 if s > 1 else 1
            feeds = {"input_ids": rng.integers(0, 1000, (1, s)).astype(np.int64), "attention_mask": mask}
            for got, want in zip(model.run(feeds).values(), ort_run(m, feeds)):
                assert got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"sequence {s}")


def test_concat_along_and_beside_a_dynamic_axis(tmp_path):
    """Concat of x[N, S, 4], z[N, 3, 4] and x along axis 1: every offset and length the run's."""
    m = _model([helper.make_node("Concat", ["x", "z", "x"], ["y"], axis=1)], {"x": ["N", "S", 4], "z": ["N", 3, 4]},
               {"y": ["N", "T", 4]})
    om2gen.compile(m, tmp_path / "cat.om2", input_shapes={"x": ("1~4", "1~9", 4), "z": ("1~4", 3, 4)})
    rng = np.random.default_rng(5)
    with om2gen.load(tmp_path / "cat.om2") as model:
        for n, s in ((1, 1), (4, 9), (2, 5)):
            feeds = {"x": rng.standard_normal((n, s, 4)).astype(np.float32),
                     "z": rng.standard_normal((n, 3, 4)).astype(np.float32)}
            got, = model.run(feeds).values()
            assert np.array_equal(got, ort_run(m, feeds)[0])


def _one_node(node, inputs: dict, outputs: list, inits=(), opset=17, int64_outputs=(), int64_inputs=(), shared=False):
    """shared: every input's dim i is the one symbol d<i> (else each input's own)."""
    m = _model([node], {n: [f"d{i}" if shared else f"{n}{i}" for i in range(rank)] for n, rank in inputs.items()}, {},
               inits)
    m.opset_import[0].version = opset
    for vi in m.graph.input:
        if vi.name in int64_inputs:
            vi.type.tensor_type.elem_type = TensorProto.INT64
    for name in outputs:
        vi = helper.make_tensor_value_info(name, TensorProto.INT64 if name in int64_outputs else TensorProto.FLOAT, None)
        vi.type.tensor_type.shape.SetInParent()   # rank unknown: om2gen infers it
        m.graph.output.append(vi)
    return m


def _const(values, name: str):
    return numpy_helper.from_array(np.asarray(values), name)


def _rows(rng, n):
    return {"x": rng.standard_normal((n % 4 + 1, 4, 3 * n)).astype(np.float32)}


_SINGLE = {
    "split": (lambda: _one_node(helper.make_node("Split", ["x", "sp"], ["a", "b"], axis=2), {"x": 3}, ["a", "b"],
                                [numpy_helper.from_array(np.array([2, 6], np.int64), "sp")]),
              {"x": ("1~4", "1~9", 8)}, lambda rng, n: {"x": rng.standard_normal((n % 4 + 1, n, 8)).astype(np.float32)}),
    "instance_norm": (lambda: _one_node(helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"]), {"x": 3}, ["y"],
                                        [numpy_helper.from_array(np.linspace(0.5, 2, 3, dtype=np.float32), "s"),
                                         numpy_helper.from_array(np.linspace(-1, 1, 3, dtype=np.float32), "b")]),
                      {"x": ("1~4", 3, "3~32")}, lambda rng, n: {"x": rng.standard_normal((n % 4 + 1, 3, 3 * n)).astype(
                          np.float32)}),
    "pad_reflect": (lambda: _one_node(helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect"), {"x": 3}, ["y"],
                                      [numpy_helper.from_array(np.array([0, 1, 3, 0, 1, 2], np.int64), "p")]),
                    {"x": ("1~4", 3, "4~40")}, lambda rng, n: {"x": rng.standard_normal((n % 4 + 1, 3, 4 * n)).astype(
                        np.float32)}),
    "group_norm": (lambda: _one_node(helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2),
                                     {"x": 3}, ["y"], [_const(np.linspace(0.5, 2, 4, dtype=np.float32), "s"),
                                                       _const(np.linspace(-1, 1, 4, dtype=np.float32), "b")], opset=21),
                   {"x": ("1~4", 4, "1~40")}, _rows),
    "batch_norm": (lambda: _one_node(helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"]), {"x": 3},
                                     ["y"], [_const(np.linspace(0.5, 2, 4, dtype=np.float32), "s"),
                                             _const(np.linspace(-1, 1, 4, dtype=np.float32), "b"),
                                             _const(np.linspace(-1, 1, 4, dtype=np.float32), "m"),
                                             _const(np.linspace(0.5, 1, 4, dtype=np.float32), "v")]),
                   {"x": ("1~4", 4, "1~40")}, _rows),
    "top_k": (lambda: _one_node(helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1), {"x": 3}, ["v", "i"],
                                [_const(np.array([3], np.int64), "k")], int64_outputs={"i"}),
              {"x": ("1~4", 4, "3~40")}, _rows),
    "top_k_smallest_over_the_batch": (
        lambda: _one_node(helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=0, largest=0), {"x": 3}, ["v", "i"],
                          [_const(np.array([1], np.int64), "k")], int64_outputs={"i"}),
        {"x": ("1~4", 4, "3~40")}, _rows),
}


def _along(op: str, outputs=("y",), int64_outputs=(), inits=(), inputs=("x",), **attrs):
    """One node over x[N, 4, L] (N in 1~4, L in 3~40)."""
    return (lambda: _one_node(helper.make_node(op, list(inputs), list(outputs), **attrs), {"x": 3}, list(outputs),
                              list(inits), int64_outputs=set(int64_outputs)),
            {"x": ("1~4", 4, "3~40")}, _rows)


def _image(rng, n):
    return {"x": rng.standard_normal((n % 4 + 1, 8, n % 9 + 1, 9 - n % 9)).astype(np.float32)}


def _same_shape(*names, index=None):
    def feeds(rng, n):
        shape = (n % 4 + 1, 4, 3 * n)
        out = {k: rng.standard_normal(shape).astype(np.float32) for k in names}
        if index is not None:
            out[index] = np.stack([rng.permutation(shape[2]) for _ in range(shape[0] * 4)]).reshape(shape).astype(np.int64)
            out[index][..., ::2] -= shape[2]      # negative indices count from the end
        return out
    return feeds


def _scatter_nd():
    m = _model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")],
               {"x": ["N", 4, "L"], "i": ["N", 2], "u": ["N", "L"]}, {"y": ["N", 4, "L"]})
    m.opset_import[0].version = 18
    m.graph.input[1].type.tensor_type.elem_type = TensorProto.INT64
    return m


def _scatter_nd_feeds(rng, n):
    b, length = n % 4 + 1, 3 * n
    pairs = np.stack([rng.integers(-b, b, b), rng.integers(-4, 4, b)], axis=1).astype(np.int64)
    return {"x": rng.standard_normal((b, 4, length)).astype(np.float32), "i": pairs,
            "u": rng.standard_normal((b, length)).astype(np.float32)}


_SINGLE.update({
    "gather_elements": (lambda: _one_node(helper.make_node("GatherElements", ["x", "i"], ["y"], axis=2), {"x": 3, "i": 3},
                                          ["y"], int64_inputs={"i"}, shared=True),
                        {"x": ("1~4", 4, "3~40"), "i": ("1~4", 4, "3~40")}, _same_shape("x", index="i")),
    "scatter_elements_add": (
        lambda: _one_node(helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=2, reduction="add"),
                          {"x": 3, "i": 3, "u": 3}, ["y"], opset=18, int64_inputs={"i"}, shared=True),
        {k: ("1~4", 4, "3~40") for k in "xiu"}, _same_shape("x", "u", index="i")),
    # an axis walked with the inner positions dynamic (axis 1) or the length dynamic (the last)
    "cumsum_reverse_exclusive": _along("CumSum", inits=[_const(np.array(1, np.int64), "a")], inputs=("x", "a"),
                                       reverse=1, exclusive=1),
    "cumsum_last": _along("CumSum", inits=[_const(np.array(2, np.int64), "a")], inputs=("x", "a")),
    "argmin_axis1": _along("ArgMin", int64_outputs={"y"}, axis=1, keepdims=0),
    "argmax_last": _along("ArgMax", int64_outputs={"y"}, axis=2),
    "log_softmax_axis1": _along("LogSoftmax", axis=1),
    "hardmax_last": _along("Hardmax", axis=-1),
    "lp_norm_batch": _along("LpNormalization", axis=0, p=1),
    "trilu": _along("Trilu"),
    "depth_to_space": (lambda: _one_node(helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2), {"x": 4}, ["y"]),
                       {"x": ("1~4", 8, "1~9", "1~9")}, _image),
    "conv_transpose": (lambda: _one_node(helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2]), {"x": 4},
                                         ["y"], [_const(np.linspace(-1, 1, 96, dtype=np.float32).reshape(8, 3, 2, 2), "w")]),
                       {"x": ("1~4", 8, "1~9", "1~9")}, _image),
    # rows of x[N, 4, L] replaced by index pairs (i, j) over the dynamic batch, updates [N, L]
    "scatter_nd_add": (_scatter_nd, {"x": ("1~4", 4, "3~40"), "i": ("1~4", 2), "u": ("1~4", "3~40")},
                       _scatter_nd_feeds),
    # over the batch and the image (the default axes 0, 2, 3), and over the channels alone
    "mvn": (lambda: _one_node(helper.make_node("MeanVarianceNormalization", ["x"], ["y"]), {"x": 4}, ["y"]),
            {"x": ("1~4", 8, "1~9", "1~9")}, _image),
    "mvn_channels": (lambda: _one_node(helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[1]), {"x": 4},
                                       ["y"]), {"x": ("1~4", 8, "1~9", "1~9")}, _image),
})


@pytest.mark.parametrize("name", sorted(_SINGLE))
def test_single_ops_at_several_shapes(name, tmp_path):
    """Split of a dynamic tensor, InstanceNormalization and GroupNormalization over a dynamic length
    (their means divide by the run's count), BatchNormalization left unfused, Pad in reflect mode over
    a dynamic axis (the source index computed), TopK along a dynamic axis and across a dynamic batch;
    the ops that walk one axis (CumSum, ArgMin/ArgMax, LogSoftmax, Hardmax, LpNormalization), Trilu,
    DepthToSpace and ConvTranspose (as GEMM then DepthToSpace), GatherElements and ScatterElements,
    MeanVarianceNormalization, ScatterND (index pairs over a dynamic batch, repeated ones adding
    up), with both the axis and the rest dynamic."""
    build, shapes, feeds = _SINGLE[name]
    m = build()
    om2gen.compile(m, tmp_path / "m.om2", input_shapes=shapes)
    rng = np.random.default_rng(11)
    with om2gen.load(tmp_path / "m.om2") as model:
        for n in (1, 5, 9, 2):
            f = feeds(rng, n)
            for got, want in zip(model.run(f).values(), ort_run(m, f)):
                assert got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{name} at {n}")


_EINSUM = {
    # equation: (input dims by name, input_shapes, feeds at size n)
    "bhqd,bhkd->bhqk": ({"q": ["B", 2, "S", 8], "k": ["B", 2, "S", 8]}, {"q": ("1~3", 2, "1~33", 8),
                                                                          "k": ("1~3", 2, "1~33", 8)},
                        lambda rng, n: {x: rng.standard_normal((n % 3 + 1, 2, 4 * n, 8)).astype(np.float32)
                                        for x in "qk"}),
    "bij,bjk->bik": ({"a": ["B", "I", 6], "b": ["B", 6, "K"]}, {"a": ("1~4", "1~9", 6), "b": ("1~4", 6, "1~9")},
                     lambda rng, n: {"a": rng.standard_normal((n % 4 + 1, n, 6)).astype(np.float32),
                                     "b": rng.standard_normal((n % 4 + 1, 6, 10 - n)).astype(np.float32)}),
    "...ij->...ji": ({"x": ["B", "T", 5]}, {"x": ("1~4", "1~9", 5)},
                     lambda rng, n: {"x": rng.standard_normal((n % 4 + 1, n, 5)).astype(np.float32)}),
}


@pytest.mark.parametrize("equation", sorted(_EINSUM))
def test_einsum_over_dynamic_dims(equation, tmp_path):
    """Attention scores over a dynamic batch and sequence, a batched matmul whose outer dims are
    dynamic, and an ellipsis transpose: the contraction's sizes and strides are tiling fields.
    In both formats."""
    dims, shapes, feeds = _EINSUM[equation]
    m = _model([helper.make_node("Einsum", list(dims), ["y"], equation=equation)], dims, {})
    m.graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, None))
    m.graph.output[0].type.tensor_type.shape.SetInParent()   # rank unknown: om2gen infers it
    for fmt in ("om2", "om"):
        om2gen.compile(m, tmp_path / f"m.{fmt}", input_shapes=shapes)
        rng = np.random.default_rng(3)
        with om2gen.load(tmp_path / f"m.{fmt}") as model:
            for n in (1, 8, 3, 5):
                f = feeds(rng, n)
                got, want = model.run(f)["y"], ort_run(m, f)[0]
                assert got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{equation} ({fmt}) at {n}")
