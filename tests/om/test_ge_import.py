"""The GE IR graph frontend: ge.proto.ModelDef (binary and text) → the same IR as ONNX.

Each GE graph is built with om2gen.formats.om.proto, compiled and run through om2gen, and compared with
an equivalent ONNX model (same weights) evaluated by ONNX Runtime.
"""
from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format
from helpers import assert_close, make_model, ort_run, rand
from onnx import helper

import om2gen
from om2gen.errors import ModelError, ShapeError, UnsupportedOpError
from om2gen.formats.om import proto
from om2gen.frontend.ge_import import import_ge, supported_ge_ops
from om2gen.ir import dtypes

# --- building GE graphs ------------------------------------------------------------------------

def _desc(dtype, shape, layout="NCHW"):
    d = proto.TensorDescriptor(dtype=dtypes.from_numpy(dtype).ge_proto, layout=layout)
    d.shape.dim.extend(int(x) for x in shape)
    return d


def _set_attr(a, value):
    if isinstance(value, bool):
        a.b = value
    elif isinstance(value, int):
        a.i = value
    elif isinstance(value, float):
        a.f = value
    elif isinstance(value, str):
        a.s = value.encode()
    elif isinstance(value, np.ndarray):
        a.t.desc.CopyFrom(_desc(value.dtype, value.shape, "ND"))
        a.t.data = np.ascontiguousarray(value).tobytes()
    elif isinstance(value, (list, tuple)):
        if all(isinstance(v, int) for v in value):
            a.list.i.extend(value)
            a.list.val_type = proto.AttrDef.ListValue.VT_LIST_INT
        else:
            a.list.f.extend(float(v) for v in value)
            a.list.val_type = proto.AttrDef.ListValue.VT_LIST_FLOAT
    else:
        raise TypeError(value)


class GE:
    """A tiny GE graph builder: add ops, get a ModelDef."""

    def __init__(self, name="ge_test"):
        self.model = proto.ModelDef(name=name, version=1)
        self.g = self.model.graph.add(name=name)

    def op(self, name, type_, inputs=(), **attrs):
        o = self.g.op.add(name=name, type=type_)
        o.input.extend(inputs)
        for k, v in attrs.items():
            _set_attr(o.attr[k], v)
        return o

    def data(self, name, shape, dtype=np.float32, index=0):
        o = self.op(name, "Data", index=index)
        o.output_desc.append(_desc(dtype, shape))
        return o

    def const(self, name, array):
        return self.op(name, "Const", value=np.asarray(array))

    def output(self, *inputs):
        return self.op("output", "NetOutput", list(inputs))


def _compile_run(src, tmp_path, feeds, **kw):
    out = tmp_path / "ge.om2"
    om2gen.compile(src, out, **kw)
    with om2gen.load(out) as m:
        return m.run(feeds), [o.name for o in m.outputs]


# --- the small CNN ------------------------------------------------------------------------------

def _cnn():
    rng = np.random.default_rng(1)
    w = rng.uniform(-0.5, 0.5, (4, 3, 3, 3)).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, (4,)).astype(np.float32)
    fc_w = rng.uniform(-0.5, 0.5, (64, 10)).astype(np.float32)
    fc_b = rng.uniform(-0.5, 0.5, (10,)).astype(np.float32)
    ge = GE("cnn")
    ge.data("image", (1, 3, 8, 8))
    ge.const("conv_w", w)
    ge.const("conv_b", b)
    ge.op("conv", "Conv2D", ["image:0", "conv_w:0", "conv_b:0"], strides=[1, 1, 1, 1], pads=[1, 1, 1, 1],
          dilations=[1, 1, 1, 1], groups=1, data_format="NCHW")
    ge.op("relu", "Relu", ["conv:0"])
    ge.op("pool", "MaxPool", ["relu:0"], ksize=[1, 1, 2, 2], strides=[1, 1, 2, 2], padding="VALID",
          data_format="NCHW")
    ge.const("shape", np.array([1, 64], np.int32))
    ge.op("reshape", "Reshape", ["pool:0", "shape:0", "^relu"])   # a control edge, ignored
    ge.const("fc_w", fc_w)
    ge.op("fc", "MatMulV2", ["reshape:0", "fc_w:0"], transpose_x1=False, transpose_x2=False)
    ge.const("fc_b", fc_b)
    ge.op("add", "Add", ["fc:0", "fc_b:0"])
    ge.op("softmax", "SoftmaxV2", ["add:0"], axes=[-1])
    ge.output("softmax:0")

    onnx_model = make_model([
        helper.make_node("Conv", ["image", "conv_w", "conv_b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p", "shape"], ["f"]),
        helper.make_node("MatMul", ["f", "fc_w"], ["m"]),
        helper.make_node("Add", ["m", "fc_b"], ["a"]),
        helper.make_node("Softmax", ["a"], ["y"], axis=-1),
    ], {"image": np.zeros((1, 3, 8, 8), np.float32)}, ["y"],
        {"conv_w": w, "conv_b": b, "shape": np.array([1, 64], np.int64), "fc_w": fc_w, "fc_b": fc_b})
    return ge.model, onnx_model


@pytest.mark.parametrize("encoding", ["binary", "text"])
def test_cnn_matches_onnxruntime(tmp_path, encoding):
    model, onnx_model = _cnn()
    if encoding == "binary":
        src = tmp_path / "cnn.pb"
        src.write_bytes(model.SerializeToString())
    else:
        src = tmp_path / "cnn.pbtxt"
        src.write_text(text_format.MessageToString(model))
    x = rand(1, 3, 8, 8, seed=3)
    got, names = _compile_run(src, tmp_path, {"image": x})
    assert names == ["softmax:0"]
    (ref,) = ort_run(onnx_model, {"image": x})
    assert_close(got["softmax:0"], ref, "softmax")


def test_import_graph_shapes_and_names():
    model, _ = _cnn()
    g = import_ge(model.SerializeToString())
    assert g.inputs == ["image"] and g.outputs == ["softmax:0"]
    assert g.values["image"].shape == (1, 3, 8, 8)
    assert g.values["softmax:0"].shape == (1, 10)
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu", "MaxPool", "Reshape", "Gemm", "Add", "Softmax"]


def test_content_detection_without_extension(tmp_path):
    """An unknown extension: ONNX is tried first, then the GE graph (binary and text)."""
    model, onnx_model = _cnn()
    x = rand(1, 3, 8, 8, seed=4)
    (ref,) = ort_run(onnx_model, {"image": x})
    for i, data in enumerate([model.SerializeToString(), text_format.MessageToString(model).encode()]):
        src = tmp_path / f"graph{i}.bin"
        src.write_bytes(data)
        got, _ = _compile_run(src, tmp_path, {"image": x})
        assert_close(got["softmax:0"], ref, f"encoding {i}")


def test_cli_compile_pb(tmp_path, capsys):
    from om2gen.cli.entry import main
    model, onnx_model = _cnn()
    src = tmp_path / "model.pb"
    src.write_bytes(model.SerializeToString())
    assert main(["compile", str(src), "-o", str(tmp_path / "x.om2"), "-q"]) == 0
    x = rand(1, 3, 8, 8, seed=5)
    np.save(tmp_path / "image.npy", x)
    assert main(["run", str(tmp_path / "x.om2"), "--input", f"image={tmp_path / 'image.npy'}",
                 "--output-dir", str(tmp_path / "out")]) == 0
    got = np.load(tmp_path / "out" / "softmax_0.npy")
    (ref,) = ort_run(onnx_model, {"image": x})
    assert_close(got, ref, "cli")


# --- an elementwise / layout graph ---------------------------------------------------------------

def test_elementwise_graph(tmp_path):
    rng = np.random.default_rng(2)
    c = rng.uniform(0.5, 1.5, (2, 4)).astype(np.float32)
    bn = [rng.uniform(0.5, 1.5, (3,)).astype(np.float32) for _ in range(4)]
    ge = GE("elementwise")
    ge.data("a", (2, 3, 2, 2), index=0)
    ge.data("b", (-1, 3, 2, 2), index=1)          # dynamic batch: pinned below
    ge.const("c", c)
    for name, arr in zip(["scale", "offset", "mean", "var"], bn):
        ge.const(name, arr)
    ge.op("bn", "BatchNorm", ["a:0", "scale:0", "offset:0", "mean:0", "var:0"], epsilon=1e-3, is_training=False)
    ge.op("sum", "AddV2", ["bn:0", "b:0"])
    ge.op("diff", "Sub", ["sum:0", "b:0"])
    ge.op("prod", "Mul", ["diff:0", "sum:0"])
    ge.op("r6", "Relu6", ["prod:0"])
    ge.op("sig", "Sigmoid", ["sum:0"])
    ge.op("th", "Tanh", ["diff:0"])
    ge.op("cat", "ConcatD", ["r6:0", "sig:0", "th:0"], concat_dim=1, N=3)
    ge.op("tr", "TransposeD", ["cat:0"], perm=[0, 2, 3, 1])
    ge.op("flat", "FlattenV2", ["tr:0"], axis=1, end_axis=2)
    ge.op("avg", "AvgPoolV2", ["cat:0"], ksize=[1, 1, 2, 2], strides=[1, 1, 1, 1], padding_mode="CALCULATED",
          pads=[0, 1, 0, 1], exclusive=True, data_format="NCHW")
    ge.op("flat2", "Flatten", ["avg:0"])
    ge.op("mm", "MatMulV2", ["c:0", "flat2:0"], transpose_x1=True, transpose_x2=False)   # [2,4]^T x [2,36]
    ge.op("div", "RealDiv", ["sig:0", "r6:0"])
    ge.op("cast", "Cast", ["div:0"], dst_type=dtypes.BY_NAME["float64"].acl)
    ge.op("id", "Identity", ["flat:0"])
    ge.output("id:0", "mm:0", "cast:0")

    onnx_model = make_model([
        helper.make_node("BatchNormalization", ["a", "scale", "offset", "mean", "var"], ["bn"], epsilon=1e-3),
        helper.make_node("Add", ["bn", "b"], ["sum"]),
        helper.make_node("Sub", ["sum", "b"], ["diff"]),
        helper.make_node("Mul", ["diff", "sum"], ["prod"]),
        helper.make_node("Clip", ["prod", "zero", "six"], ["r6"]),
        helper.make_node("Sigmoid", ["sum"], ["sig"]),
        helper.make_node("Tanh", ["diff"], ["th"]),
        helper.make_node("Concat", ["r6", "sig", "th"], ["cat"], axis=1),
        helper.make_node("Transpose", ["cat"], ["tr"], perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["tr", "flat_shape"], ["flat"]),
        helper.make_node("AveragePool", ["cat"], ["avg"], kernel_shape=[2, 2], pads=[0, 0, 1, 1]),
        helper.make_node("Flatten", ["avg"], ["flat2"]),
        helper.make_node("Gemm", ["c", "flat2"], ["mm"], transA=1),
        helper.make_node("Div", ["sig", "r6"], ["div"]),
        helper.make_node("Cast", ["div"], ["cast"], to=11),
    ], {"a": np.zeros((2, 3, 2, 2), np.float32), "b": np.zeros((2, 3, 2, 2), np.float32)},
        ["flat", "mm", "cast"],
        {"c": c, "scale": bn[0], "offset": bn[1], "mean": bn[2], "var": bn[3],
         "zero": np.array(0, np.float32), "six": np.array(6, np.float32),
         "flat_shape": np.array([2, 4, 9], np.int64)})
    feeds = {"a": rand(2, 3, 2, 2, seed=6, low=-3, high=3), "b": rand(2, 3, 2, 2, seed=7, low=-3, high=3)}
    ref = ort_run(onnx_model, feeds)
    got, names = _compile_run(ge.model, tmp_path, feeds, input_shapes={"b": (2, 3, 2, 2)})
    assert names == ["id:0", "mm:0", "cast:0"]
    for name, r in zip(names, ref):
        assert_close(got[name], r, name)


def test_batch_matmul_concat_pooling(tmp_path):
    ge = GE("more")
    ge.data("x", (2, 3, 4))
    ge.data("y", (2, 5, 3), index=1)
    ge.op("bmm", "BatchMatMulV2", ["x:0", "y:0"], adj_x1=True, adj_x2=True)     # [2,4,3]x[2,3,5] -> [2,4,5]
    ge.const("axis", np.array(1, np.int32))
    ge.op("cat", "ConcatV2", ["bmm:0", "bmm:0", "axis:0"], N=2)                # [2,8,5]
    ge.const("perm", np.array([1, 0, 2], np.int32))
    ge.op("tr", "Transpose", ["cat:0", "perm:0"])                             # [8,2,5]
    ge.const("shape4", np.array([1, 8, 2, 5], np.int64))
    ge.op("r4", "Reshape", ["tr:0", "shape4:0"])
    ge.op("mp", "MaxPoolV3", ["r4:0"], ksize=[1, 1, 2, 2], strides=[1, 1, 2, 2], padding_mode="CALCULATED",
          pads=[0, 0, 0, 0], ceil_mode=True, data_format="NCHW")             # [1,8,1,3]
    ge.op("cp", "Pooling", ["r4:0"], mode=1, window=[2, 2], stride=[1, 1], pad=[0, 0, 0, 0])   # [1,8,1,4]
    ge.op("sm", "Softmax", ["cp:0"], axes=[1])
    ge.output("mp:0", "sm:0")

    onnx_model = make_model([
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["xt", "yt"], ["bmm"]),
        helper.make_node("Concat", ["bmm", "bmm"], ["cat"], axis=1),
        helper.make_node("Transpose", ["cat"], ["tr"], perm=[1, 0, 2]),
        helper.make_node("Reshape", ["tr", "shape4"], ["r4"]),
        helper.make_node("MaxPool", ["r4"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        helper.make_node("AveragePool", ["r4"], ["cp"], kernel_shape=[2, 2], strides=[1, 1], ceil_mode=1),
        helper.make_node("Softmax", ["cp"], ["sm"], axis=1),
    ], {"x": np.zeros((2, 3, 4), np.float32), "y": np.zeros((2, 5, 3), np.float32)}, ["mp", "sm"],
        {"shape4": np.array([1, 8, 2, 5], np.int64)})
    feeds = {"x": rand(2, 3, 4, seed=8), "y": rand(2, 5, 3, seed=9)}
    ref = ort_run(onnx_model, feeds)
    got, names = _compile_run(ge.model, tmp_path, feeds)
    for name, r in zip(names, ref):
        assert_close(got[name], r, name)


# --- errors --------------------------------------------------------------------------------------

def test_unknown_op_type_names_op_and_supported_types():
    ge = GE()
    ge.data("x", (1, 4))
    ge.op("weird", "FancyOp", ["x:0"])
    ge.output("weird:0")
    with pytest.raises(UnsupportedOpError) as e:
        import_ge(ge.model)
    msg = str(e.value)
    assert "'weird'" in msg and "FancyOp" in msg and "Conv2D" in msg and "MatMulV2" in msg
    assert "Conv2D" in supported_ge_ops() and "NetOutput" in supported_ge_ops()


def test_data_without_shape_needs_a_pin(tmp_path):
    ge = GE()
    ge.op("x", "Data", index=0)                      # no output_desc at all
    ge.op("r", "Relu", ["x:0"])
    ge.output("r:0")
    with pytest.raises(ShapeError, match=r"'x'.*input_shapes=\{'x': "):
        import_ge(ge.model)
    g = import_ge(ge.model, {"x": (2, 3)})
    assert g.values["r:0"].shape == (2, 3)

    dyn = GE()
    dyn.data("x", (-1, 3))
    dyn.op("r", "Relu", ["x:0"])
    dyn.output("r:0")
    with pytest.raises(ShapeError, match="'x'.*dynamic dim 0"):
        om2gen.compile(dyn.model, tmp_path / "d.om2")
    with pytest.raises(ShapeError, match="nope"):
        import_ge(dyn.model, {"x": (1, 3), "nope": (1,)})


def test_dangling_edge_and_bad_index():
    ge = GE()
    ge.data("x", (1, 4))
    ge.op("r", "Relu", ["ghost:0"])
    ge.output("r:0")
    with pytest.raises(ModelError, match="'r'.*'ghost:0'.*dangling"):
        import_ge(ge.model)
    ge2 = GE()
    ge2.data("x", (1, 4))
    ge2.op("r", "Relu", ["x:3"])
    ge2.output("r:0")
    with pytest.raises(ModelError, match="no output 3"):
        import_ge(ge2.model)


def test_not_a_ge_graph(tmp_path):
    bad = tmp_path / "junk.pb"
    bad.write_bytes(b"\xff\xfe not a model")
    with pytest.raises(ModelError, match="not a GE IR graph"):
        import_ge(bad)
    with pytest.raises(ModelError):
        om2gen.compile(bad, tmp_path / "j.om2")


def test_conv_nhwc_rejected():
    ge = GE()
    ge.data("x", (1, 4, 4, 3))
    ge.const("w", np.zeros((2, 3, 1, 1), np.float32))
    ge.op("conv", "Conv2D", ["x:0", "w:0"], strides=[1, 1, 1, 1], pads=[0, 0, 0, 0], data_format="NHWC")
    ge.output("conv:0")
    with pytest.raises(UnsupportedOpError, match="NHWC"):
        import_ge(ge.model)


def test_frontend_option_and_onnx_named_pb(tmp_path):
    """frontend="ge"/"onnx" forces the reader; an ONNX model saved as .pb still compiles as ONNX."""
    import onnx
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": np.zeros((2, 3), np.float32)}, ["y"])
    onnx.save(m, tmp_path / "relu.pb")
    x = rand(2, 3, seed=10)
    got, names = _compile_run(tmp_path / "relu.pb", tmp_path, {"x": x})
    assert names == ["y"] and np.array_equal(got["y"], np.maximum(x, 0))
    with pytest.raises(ModelError, match="not a GE IR graph"):
        om2gen.compile(tmp_path / "relu.pb", tmp_path / "o.om2", frontend="ge")
    model, _ = _cnn()
    (tmp_path / "cnn.bin").write_bytes(model.SerializeToString())
    with pytest.raises(ModelError, match="not an ONNX model|no ONNX graph"):
        om2gen.compile(tmp_path / "cnn.bin", tmp_path / "o.om2", frontend="onnx")
    with pytest.raises(om2gen.Om2Error, match="unknown frontend"):
        om2gen.compile(tmp_path / "cnn.bin", tmp_path / "o.om2", frontend="tf")
