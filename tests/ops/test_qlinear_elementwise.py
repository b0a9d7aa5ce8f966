"""The com.microsoft quantized element-wise and pooling ops (ops/qlinear.py) against ONNX Runtime:
exactly equal (every scale pair drawn at random, every broadcast form ORT hands MLAS
differently)."""
import numpy as np
import onnx
import pytest
from helpers import compile_and_run, ort_run
from onnx import helper, numpy_helper

COVERS = {"QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearConcat", "QLinearAveragePool",
          "QLinearGlobalAveragePool"}
MS = "com.microsoft"


def _model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(
        nodes, "ql", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                      for n, a in inputs.items()],
        [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(next(iter(inputs.values())).dtype), None)
         for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    return model


def _q(rng, shape, dt):
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dt)


def _qparams(rng, dt, name):
    info = np.iinfo(dt)
    return {f"{name}_s": np.float32(rng.uniform(0.005, 0.2)),
            f"{name}_z": np.array(rng.integers(info.min // 2, info.max // 2 + 1), dt)}


def _check(model, feeds, tmp_path):
    tmp_path.mkdir(exist_ok=True)
    ref = ort_run(model, feeds)
    for o, r in zip(model.graph.output, ref):   # as an exporter would declare them
        o.CopyFrom(helper.make_tensor_value_info(o.name, helper.np_dtype_to_tensor_dtype(r.dtype), r.shape))
    got, _ = compile_and_run(model, feeds, tmp_path)
    for o, r in zip(model.graph.output, ref):
        g = got[o.name]
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_array_equal(g, r, err_msg=o.name)


SHAPES = [((2, 3, 8, 9), (2, 3, 8, 9)),   # both vary along the run
          ((2, 3, 8, 9), (1, 3, 1, 1)),   # B one value per run
          ((1, 3, 1, 1), (2, 3, 8, 9)),   # A one value per run
          ((2, 3, 8, 9), ()),             # B a scalar
          ((4, 1), (1, 37))]              # both broadcast


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dt", ["uint8", "int8"])
@pytest.mark.parametrize("shapes", SHAPES)
def test_qlinear_binary_equals_onnxruntime(op, dt, shapes, tmp_path):
    rng = np.random.default_rng(hash((op, dt, shapes)) % 2**32)
    a, b = _q(rng, shapes[0], dt), _q(rng, shapes[1], dt)
    for trial in range(3):
        inits = {**_qparams(rng, dt, "a"), **_qparams(rng, dt, "b"), **_qparams(rng, dt, "c")}
        node = helper.make_node(op, ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["c"], domain=MS)
        _check(_model([node], {"a": a, "b": b}, ["c"], inits), {"a": a, "b": b}, tmp_path / str(trial))


@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.13})])
@pytest.mark.parametrize("dt", ["uint8", "int8"])
def test_qlinear_lookup_ops_equal_onnxruntime(op, attrs, dt, tmp_path):
    rng = np.random.default_rng(11)
    x = table_of_all(dt)
    for trial in range(4):
        inits = {**_qparams(rng, dt, "x"), **_qparams(rng, dt, "y")}
        inits["x_s"] = np.float32(rng.uniform(0.01, 0.15))   # inputs spanning the function's range
        node = helper.make_node(op, ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain=MS, **attrs)
        _check(_model([node], {"x": x}, ["y"], inits), {"x": x}, tmp_path / str(trial))


def table_of_all(dt):
    """Every value of dt, in a 4-D tensor (as activations are)."""
    return np.arange(256, dtype=np.uint8).view(dt).reshape(1, 4, 8, 8).copy()


@pytest.mark.parametrize("dt", ["uint8", "int8"])
def test_qlinear_concat_requantizes_inputs_whose_parameters_differ(dt, tmp_path):
    rng = np.random.default_rng(5)
    xs = [_q(rng, (1, c, 4, 5), dt) for c in (2, 3, 1)]
    y = _qparams(rng, dt, "y")
    inits = {**y, **_qparams(rng, dt, "p0"), "p1_s": y["y_s"], "p1_z": y["y_z"], **_qparams(rng, dt, "p2")}
    ins = ["y_s", "y_z"] + [n for i in range(3) for n in (f"x{i}", f"p{i}_s", f"p{i}_z")]
    node = helper.make_node("QLinearConcat", ins, ["y"], domain=MS, axis=1)
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    _check(_model([node], feeds, ["y"], inits), feeds, tmp_path)


@pytest.mark.parametrize("dt", ["uint8", "int8"])
@pytest.mark.parametrize("shape", [(2, 5, 7, 7), (1, 16, 1, 1), (1, 3, 13)])
def test_qlinear_global_average_pool_equals_onnxruntime(dt, shape, tmp_path):
    rng = np.random.default_rng(9)
    x = _q(rng, shape, dt)
    for trial in range(3):
        inits = {**_qparams(rng, dt, "x"), **_qparams(rng, dt, "y")}
        node = helper.make_node("QLinearGlobalAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain=MS,
                                channels_last=0)
        _check(_model([node], {"x": x}, ["y"], inits), {"x": x}, tmp_path / str(trial))


@pytest.mark.parametrize("attrs", [{"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                                   {"kernel_shape": [2, 2], "count_include_pad": 1, "pads": [0, 0, 1, 1]}])
@pytest.mark.parametrize("dt", ["uint8", "int8"])
def test_qlinear_average_pool_equals_onnxruntime(attrs, dt, tmp_path):
    rng = np.random.default_rng(13)
    x = _q(rng, (1, 4, 9, 9), dt)
    for trial in range(3):
        inits = {**_qparams(rng, dt, "x"), **_qparams(rng, dt, "y")}
        node = helper.make_node("QLinearAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain=MS, **attrs)
        _check(_model([node], {"x": x}, ["y"], inits), {"x": x}, tmp_path / str(trial))


def test_qlinear_scales_must_be_constants(tmp_path):
    import om2gen
    a = np.zeros((2, 3), np.uint8)
    s = np.float32(0.1)
    node = helper.make_node("QLinearAdd", ["a", "s", "", "a", "s", "", "s"], ["c"], domain=MS)
    model = _model([node], {"a": a, "s": np.array(s)}, ["c"], {})
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("c", onnx.TensorProto.UINT8, (2, 3)))
    with pytest.raises(om2gen.errors.NeedsConstantError, match="A_scale"):
        om2gen.compile(model, tmp_path / "m.om2")
