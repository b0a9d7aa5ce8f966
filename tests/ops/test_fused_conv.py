"""om2gen.FusedConv, what passes/conv_add.py and conv_act.py make of Conv [+ Add] + Relu / Clip
(tests/passes has the fusions' conditions): against ONNX Runtime's com.microsoft.FusedConv."""
import math

import numpy as np
import pytest
from helpers import assert_close, compile_and_run, make_model, ort_run, rand
from onnx import helper, numpy_helper

import om2gen
from om2gen.ir.dtypes import FLOAT32
from om2gen.ir.graph import Node, Value
from om2gen.ir.program import LowerContext
from om2gen.ops import registry
from om2gen.toolchain import targets
from om2gen.version import GENERATOR

COVERS = {"FusedConv"}
F32 = np.float32


def ort_fused_conv(x, w, b, z, activation, params):
    """ONNX Runtime's com.microsoft.FusedConv on the same operands: the reference."""
    names = ["x", "w", "b"] + (["z"] if z is not None else [])
    attrs = {"activation": activation} | ({"activation_params": params} if params else {})
    node = helper.make_node("FusedConv", names, ["y"], domain="com.microsoft", **attrs)
    inputs = [helper.make_tensor_value_info("x", 1, x.shape)] + \
        ([helper.make_tensor_value_info("z", 1, z.shape)] if z is not None else [])
    graph = helper.make_graph([node], "ref", inputs, [helper.make_empty_tensor_value_info("y")],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    feeds = {"x": x} | ({"z": z} if z is not None else {})
    return ort_run(model, feeds)[0]


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("activation,params", [("Relu", []), ("Clip", [-0.25, 0.5])])
def test_matches_onnxruntimes_fused_conv(activation, params, residual, tmp_path):
    """The compiled graph holds one FusedConv with the Add and the activation in it, and computes
    what com.microsoft.FusedConv computes."""
    x, w, b = rand(1, 8, 6, 7, seed=1), rand(12, 8, 1, 1, seed=2), rand(12, seed=3)
    z = rand(1, 12, 6, 7, seed=4) if residual else None
    consts = {"w": w, "b": b}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv")]
    if residual:
        nodes.append(helper.make_node("Add", ["c", "z"], ["s"], name="add"))
    last = nodes[-1].output[0]
    if activation == "Relu":
        nodes.append(helper.make_node("Relu", [last], ["y"], name="act"))
    else:
        consts.update(lo=np.array(params[0], F32), hi=np.array(params[1], F32))
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["y"], name="act"))
    feeds = {"x": x} | ({"z": z} if residual else {})
    got, graph = compile_and_run(make_model(nodes, feeds, ["y"], consts), feeds, tmp_path)
    (fused,) = [n for n in graph if n["op_type"] == "FusedConv"]
    assert len(graph) == 1 and fused["domain"] == "om2gen" and fused["name"] == "conv"
    assert fused["fused_from"] == [n.name for n in nodes]
    assert fused["attrs"] == {"activation": activation} | ({"activation_params": params} if params else {})
    assert [i["name"] for i in fused["inputs"]][3:] == (["z"] if residual else [])
    assert_close(got["y"], ort_fused_conv(x, w, b, z, activation, params), "y")


def _node(attrs, inputs=("x", "w", "b", "z")):
    return Node("c", "FusedConv", list(inputs), ["y"], {"pads": [1, 1, 1, 1]} | attrs, "om2gen", 1)


def _values(z_shape=(1, 8, 5, 5)):
    return [Value("x", FLOAT32, (1, 4, 5, 5)), Value("w", FLOAT32, (8, 4, 3, 3), rand(8, 4, 3, 3)),
            Value("b", FLOAT32, (8,), rand(8)), Value("z", FLOAT32, z_shape)]


def test_lowering_adds_the_residual_and_clamps():
    node = _node({"activation": "Clip", "activation_params": [0.0, math.inf]})
    op = registry.lookup(node)
    ins = _values()
    (y,) = op.infer(node, ins)
    assert (y.dtype, y.shape) == (FLOAT32, (1, 8, 5, 5))
    call = op.lower(node, ins, [Value("y", FLOAT32, y.shape)], LowerContext(targets.default_target(), GENERATOR))
    assert call.template == "kernels/conv_gemm.c.j2" and call.name == "Conv"      # the kernel is Conv's
    assert call.inputs[3] == "z" and call.params["residual_slot"] == 3
    assert call.params["act"] == {"lo": "0.0f", "hi": "INFINITY", "desc": "clamped to [0.0, inf]"}


def test_without_a_residual_or_activation_it_lowers_as_conv():
    node = _node({}, inputs=("x", "w", "b"))
    ctx = LowerContext(targets.default_target(), GENERATOR, winograd=0)
    call = registry.lookup(node).lower(node, _values()[:3], [Value("y", FLOAT32, (1, 8, 5, 5))], ctx)
    assert call.params["act"] is None and call.params["residual_slot"] is None and len(call.inputs) == 3


def test_a_residual_of_another_shape_is_refused():
    node = _node({"activation": "Relu"})
    with pytest.raises(om2gen.ShapeError, match="the residual Z 'z' is float32\\[1,8,1,1\\]"):
        registry.lookup(node).infer(node, _values(z_shape=(1, 8, 1, 1)))


@pytest.mark.parametrize("attrs,match", [
    ({"activation": "Tanh"}, "activation 'Tanh'"),
    ({"activation": "Clip", "activation_params": [0.0]}, "activation_params \\[0.0\\]"),
    ({"activation": "Relu", "activation_params": [1.0]}, "activation 'Relu'"),
])
def test_activations_it_does_not_apply_are_refused(attrs, match):
    node = _node(attrs)
    with pytest.raises(om2gen.CompileError, match=match):
        registry.lookup(node).infer(node, _values())


def test_attributes_it_does_not_declare_are_refused():
    """Fused ops have a schema: what a pass left on the node and the op ignores is a bug, said so."""
    with pytest.raises(om2gen.CompileError, match="has attributes \\['nodes'\\] that FusedConv does not declare"):
        registry.lookup(_node({"activation": "Relu", "nodes": ["c", "r"]}))
