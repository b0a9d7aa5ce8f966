"""om2gen.FusedGemm and om2gen.FusedMatMul, what passes/gemm_act.py makes of Gemm / MatMul + Relu /
Clip (tests/passes has the fusion's conditions): against ONNX Runtime, com.microsoft.FusedGemm for
the Relu (ORT's FusedMatMul is another operator: the unfused model is the reference there)."""
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

COVERS = {"FusedGemm", "FusedMatMul"}
F32 = np.float32


def ort_fused_gemm(a, b, c, **attrs):
    node = helper.make_node("FusedGemm", ["a", "b", "c"], ["y"], domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "ref", [helper.make_tensor_value_info("a", 1, a.shape)],
                              [helper.make_empty_tensor_value_info("y")],
                              [numpy_helper.from_array(b, "b"), numpy_helper.from_array(c, "c")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return ort_run(model, {"a": a})[0]


def act_node(activation, x, consts, lo=-0.5, hi=0.25):
    if activation == "Relu":
        return helper.make_node("Relu", [x], ["y"], name="act")
    consts.update(lo=np.array(lo, F32), hi=np.array(hi, F32))
    return helper.make_node("Clip", [x, "lo", "hi"], ["y"], name="act")


@pytest.mark.parametrize("rows", [2, 40])     # the few-row GEMV path, the packed GEMM
def test_gemm_relu_matches_onnxruntimes_fused_gemm(rows, tmp_path):
    a, b, c = rand(rows, 24, seed=1), rand(16, 24, seed=2), rand(16, seed=3)
    attrs = {"transB": 1, "alpha": 0.5, "beta": 2.0}
    nodes = [helper.make_node("Gemm", ["a", "b", "c"], ["g"], name="gemm", **attrs), act_node("Relu", "g", {})]
    got, graph = compile_and_run(make_model(nodes, {"a": a}, ["y"], {"b": b, "c": c}), {"a": a}, tmp_path)
    assert [(n["op_type"], n["domain"], n["fused_from"]) for n in graph] == [("FusedGemm", "om2gen", ["gemm", "act"])]
    assert graph[0]["attrs"] == attrs | {"activation": "Relu"}
    assert_close(got["y"], ort_fused_gemm(a, b, c, activation="Relu", **attrs), "y")


def test_gemm_clip(tmp_path):
    a, b, c = rand(9, 20, seed=1), rand(20, 12, seed=2), rand(12, seed=3)
    consts = {"b": b, "c": c}
    nodes = [helper.make_node("Gemm", ["a", "b", "c"], ["g"], name="gemm"), act_node("Clip", "g", consts)]
    model = make_model(nodes, {"a": a}, ["y"], consts)
    got, graph = compile_and_run(model, {"a": a}, tmp_path)
    assert graph[0]["attrs"] == {"activation": "Clip", "activation_params": [-0.5, 0.25]}
    assert_close(got["y"], ort_run(model, {"a": a})[0], "y")


def test_gemm_before_opset_7_leaves_broadcast_behind(tmp_path):
    """broadcast=1 only let C be [N]; FusedGemm has Gemm-7's attributes, and C broadcasts there.
    (ONNX Runtime has no Gemm-6 kernel: numpy is the reference.)"""
    a, b, c = rand(6, 10, seed=1), rand(10, 7, seed=2), rand(7, seed=3)
    nodes = [helper.make_node("Gemm", ["a", "b", "c"], ["g"], name="gemm", broadcast=1),
             helper.make_node("Relu", ["g"], ["y"], name="act")]
    model = make_model(nodes, {"a": a}, ["y"], {"b": b, "c": c}, opset=6)
    got, graph = compile_and_run(model, {"a": a}, tmp_path)
    assert [(n["op_type"], n["attrs"]) for n in graph] == [("FusedGemm", {"activation": "Relu"})]
    assert_close(got["y"], np.maximum(a @ b + c, 0), "y")


@pytest.mark.parametrize("activation", ["Relu", "Clip"])
def test_batched_matmul_activation(activation, tmp_path):
    """A MatMul the Add-to-Gemm rewrite leaves alone (run-time operands, a batch) takes the
    activation as FusedMatMul."""
    feeds = {"a": rand(3, 5, 8, seed=1), "b": rand(3, 8, 6, seed=2)}
    consts = {}
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"], name="mm"), act_node(activation, "m", consts)]
    model = make_model(nodes, feeds, ["y"], consts)
    got, graph = compile_and_run(model, feeds, tmp_path)
    assert [(n["op_type"], n["fused_from"]) for n in graph] == [("FusedMatMul", ["mm", "act"])]
    assert_close(got["y"], ort_run(model, feeds)[0], "y")


def test_fused_matmul_infers_and_lowers_as_matmul():
    node = Node("mm", "FusedMatMul", ["a", "b"], ["y"], {"activation": "Relu"}, "om2gen", 1)
    op = registry.lookup(node)
    ins = [Value("a", FLOAT32, (2, 4, 3)), Value("b", FLOAT32, (3, 5))]
    (y,) = op.infer(node, ins)
    assert y.shape == (2, 4, 5)
    call = op.lower(node, ins, [Value("y", FLOAT32, y.shape)], LowerContext(targets.default_target(), GENERATOR))
    assert call.name == "MatMul" and call.params["act"]["lo"] == "0.0f"
    assert call.params["summary"].startswith("MatMul as packed GEMM")   # the source MatMul + Relu had


def test_fused_gemm_checks_its_activation_and_its_flags():
    ins = [Value("a", FLOAT32, (2, 3)), Value("b", FLOAT32, (3, 4))]
    bad = Node("g", "FusedGemm", ["a", "b"], ["y"], {"activation": "Clip", "activation_params": [0.0, 1]},
               "om2gen", 1)
    with pytest.raises(om2gen.CompileError, match="not one om2gen fuses"):
        registry.lookup(bad).infer(bad, ins)
    flag = Node("g", "FusedGemm", ["a", "b"], ["y"], {"transA": 2, "activation": "Relu"}, "om2gen", 1)
    with pytest.raises(om2gen.ModelError, match="transA"):
        registry.lookup(flag)
