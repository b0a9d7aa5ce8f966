"""passes/qdq.py: DequantizeLinear -> op -> QuantizeLinear around element-wise and pooling ops
folds into the QLinear op or the op on integers, as ONNX Runtime's QDQ transformer does; the
results equal ORT's (which fuses the same way) exactly, and an incomplete pattern stays float."""
import numpy as np
import onnx
import pytest
from helpers import compile_and_run, ort_run
from onnx import helper, numpy_helper

from om2gen.passes import pointwise

S1, Z1 = np.float32(0.05), np.uint8(120)    # the activations' parameters


@pytest.fixture(autouse=True)
def _quantize_ops_not_fused(monkeypatch):
    """What passes/qdq.py makes, seen node by node: the element-wise fusion after it would merge
    the QuantizeLinear/DequantizeLinear left around (and an integer Clip or Transpose) into one
    kernel (tests/passes/test_fuse_elementwise.py checks that)."""
    monkeypatch.setattr(pointwise, "FAMILIES", pointwise.FAMILIES - {"om2gen.ops.quantize"})
S2, Z2 = np.float32(0.031), np.uint8(97)


def _qdq_model(op, attrs=None, *, out_params=(S1, Z1), second=None, extra_inputs=(), extra_inits=None, opset=17,
               batch=1):
    """x (float) -> Q -> DQ -> op(..., [DQ of a second quantized input]) -> Q -> DQ -> y."""
    inits = {"s1": S1, "z1": Z1, "so": out_params[0], "zo": out_params[1], **(extra_inits or {})}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s1", "z1"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s1", "z1"], ["xf"])]
    data = ["xf"]
    if second is not None:
        inits.update({"s2": second[0], "z2": second[1]})
        nodes += [helper.make_node("QuantizeLinear", ["x2", "s2", "z2"], ["x2q"]),
                  helper.make_node("DequantizeLinear", ["x2q", "s2", "z2"], ["x2f"])]
        data.append("x2f")
    nodes += [helper.make_node(op, data + list(extra_inputs), ["t"], **(attrs or {})),
              helper.make_node("QuantizeLinear", ["t", "so", "zo"], ["tq"]),
              helper.make_node("DequantizeLinear", ["tq", "so", "zo"], ["y"])]
    shape = (batch, 4, 6, 6)
    ins = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)]
    if second is not None:
        ins.append(helper.make_tensor_value_info("x2", onnx.TensorProto.FLOAT, shape))
    graph = helper.make_graph(nodes, "qdq", ins, [helper.make_empty_tensor_value_info("y")],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _feeds(second):
    rng = np.random.default_rng(0)
    feeds = {"x": rng.uniform(-6, 6, (1, 4, 6, 6)).astype(np.float32)}
    if second:
        feeds["x2"] = rng.uniform(-3, 3, (1, 4, 6, 6)).astype(np.float32)
    return feeds


def _check(model, feeds, tmp_path, expect):
    got, nodes = compile_and_run(model, feeds, tmp_path)
    np.testing.assert_array_equal(got["y"], ort_run(model, feeds)[0])
    types = [n["op_type"] for n in nodes]
    assert expect in types, types
    return types


CASES = [
    ("Add", {}, "QLinearAdd", (S2, Z2), (np.float32(0.07), np.uint8(128))),
    ("Mul", {}, "QLinearMul", (S2, Z2), (np.float32(0.2), np.uint8(100))),
    ("Sigmoid", {}, "QLinearSigmoid", None, (np.float32(1 / 256), np.uint8(0))),
    ("LeakyRelu", {"alpha": 0.2}, "QLinearLeakyRelu", None, (np.float32(0.04), np.uint8(100))),
    ("GlobalAveragePool", {}, "QLinearGlobalAveragePool", None, (np.float32(0.02), np.uint8(110))),
]


@pytest.mark.parametrize("op,attrs,fused,second,out", CASES)
def test_qdq_around_an_op_becomes_its_qlinear_op(op, attrs, fused, second, out, tmp_path):
    model = _qdq_model(op, attrs, out_params=out, second=second)
    _check(model, _feeds(second is not None), tmp_path, fused)


@pytest.mark.parametrize("op,attrs,extra,inits", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (), None),
    ("Transpose", {"perm": [0, 2, 3, 1]}, (), None),
    ("Reshape", {}, ("shape",), {"shape": np.array([1, 4, 36], np.int64)}),
    ("Relu", {}, (), None),
])
def test_qdq_with_equal_parameters_runs_the_op_on_integers(op, attrs, extra, inits, tmp_path):
    model = _qdq_model(op, attrs, extra_inputs=extra, extra_inits=inits)
    types = _check(model, _feeds(False), tmp_path, "Clip" if op == "Relu" else op)
    assert types.count("DequantizeLinear") == 1, types   # the model's output is dequantized, nothing else is


def test_concat_of_inputs_with_the_output_parameters_runs_on_integers(tmp_path):
    model = _qdq_model("Concat", {"axis": 1}, second=(S1, Z1))
    got, nodes = compile_and_run(model, _feeds(True), tmp_path)
    np.testing.assert_array_equal(got["y"], ort_run(model, _feeds(True))[0])
    concat = [n for n in nodes if n["op_type"] == "Concat"]
    assert len(concat) == 1 and len([n for n in nodes if n["op_type"] == "DequantizeLinear"]) == 1


def test_incomplete_pattern_keeps_the_float_path(tmp_path):
    """MaxPool between different parameters: no integer MaxPool (the requantization needs the
    float round trip), and the result still equals ORT's."""
    model = _qdq_model("MaxPool", {"kernel_shape": [2, 2]}, out_params=(S2, Z2))
    got, nodes = compile_and_run(model, _feeds(False), tmp_path)
    np.testing.assert_array_equal(got["y"], ort_run(model, _feeds(False))[0])
    assert any(n["op_type"] == "MaxPool" and "DequantizeLinear" not in n.get("fused_from", ()) for n in nodes)
    assert sum(n["op_type"] == "QuantizeLinear" for n in nodes) == 2


def test_fusion_off_leaves_qdq_as_it_is(tmp_path):
    model = _qdq_model("Add", out_params=(S2, Z2), second=(S2, Z2))
    got, nodes = compile_and_run(model, _feeds(True), tmp_path, fusion="off")
    assert "QLinearAdd" not in {n["op_type"] for n in nodes}
    np.testing.assert_array_equal(got["y"], ort_run(model, _feeds(True))[0])


def test_dynamic_model_keeps_qdq_on_the_float_path(tmp_path):
    """A model with dynamic dims: the QLinear ops take static shapes only, so the pass leaves the
    pattern to QuantizeLinear/DequantizeLinear (which run at any size), and each run equals ORT."""
    import om2gen
    model = _qdq_model("Add", out_params=(S2, Z2), second=(S2, Z2), batch="N")
    path = tmp_path / "dyn.om2"
    om2gen.compile(model, path, input_shapes={"x": ("1~4", 4, 6, 6), "x2": ("1~4", 4, 6, 6)})
    rng = np.random.default_rng(2)
    with om2gen.load(path) as m:
        for n in (3, 1):
            feeds = {k: rng.uniform(-4, 4, (n, 4, 6, 6)).astype(np.float32) for k in ("x", "x2")}
            np.testing.assert_array_equal(m.run(feeds)["y"], ort_run(model, feeds)[0])
