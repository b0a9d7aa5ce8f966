"""Gemm / MatMul + Relu / Clip (passes/gemm_act.py): the activation goes into the GEMM kernel's
store, on the few-row path (om2/om2_gemv.h, in registers) and on the packed GEMM (over each
stored tile), after a bias that MatMul + Add became; never when something else reads the
product."""
import zipfile

import numpy as np
import pytest
from fusion_check import check_fusion
from helpers import make_model, rand
from onnx import helper

F32 = np.float32


def kernel_sources(compiled) -> str:
    with zipfile.ZipFile(compiled.path) as z:
        return "".join(z.read(n).decode() for n in z.namelist() if n.endswith(".c"))


def act_node(act: str, consts: dict, src: str = "p"):
    if act == "Relu":
        return helper.make_node("Relu", [src], ["y"], name="act")
    consts.update(lo=np.array(-0.5, F32), hi=np.array(0.75, F32))
    return helper.make_node("Clip", [src, "lo", "hi"], ["y"], name="act")


@pytest.mark.parametrize("act", ["Relu", "Clip"])
@pytest.mark.parametrize("rows,marker", [(1, "om2_gemv("), (9, "om2_clamp_run")])
def test_gemm_activation(act, rows, marker, tmp_path):
    x = rand(rows, 300, seed=1)
    consts = {"w": rand(70, 300, seed=2), "b": rand(70, seed=3)}
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["p"], name="gemm", transB=1, alpha=0.5),
             act_node(act, consts)]
    fused, plain = check_fusion(make_model(nodes, {"x": x}, ["y"], consts), {"x": x}, tmp_path)
    assert len(plain.op_types()) == 2 and fused.op_types() == ["FusedGemm"]
    assert fused.fused_from("FusedGemm") == [["gemm", "act"]]
    assert marker in kernel_sources(fused) and "clamped to" in kernel_sources(fused)


@pytest.mark.parametrize("b_const", [True, False])
def test_matmul_add_relu(b_const, tmp_path):
    """MatMul + Add becomes a Gemm first; the Relu then clamps after the bias. With B an input the
    packed GEMM packs it at run time and clamps its tiles."""
    x, w = rand(2, 64, seed=1), rand(64, 40, seed=2)
    feeds, consts = ({"x": x}, {"w": w}) if b_const else ({"x": x, "w": w}, {})
    consts["b"] = rand(40, seed=3)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["p"], name="add"),
             helper.make_node("Relu", ["p"], ["y"], name="act")]
    fused, _ = check_fusion(make_model(nodes, feeds, ["y"], consts), feeds, tmp_path)
    assert fused.op_types() == ["FusedGemm"]
    assert "om2_gemv(" in kernel_sources(fused) if b_const else "om2_clamp_run" in kernel_sources(fused)


def test_matmul_relu_few_rows(tmp_path):
    x = rand(3, 100, seed=1)
    consts = {"w": rand(100, 50, seed=2)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"], name="mm"), act_node("Clip", consts)]
    fused, _ = check_fusion(make_model(nodes, {"x": x}, ["y"], consts), {"x": x}, tmp_path)
    assert fused.op_types() == ["FusedMatMul"] and "om2_gemv(" in kernel_sources(fused)


def test_product_read_elsewhere_keeps_its_relu(tmp_path):
    x = rand(1, 30, seed=1)
    consts = {"w": rand(30, 20, seed=2)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"], name="mm"), act_node("Relu", consts)]
    fused, _ = check_fusion(make_model(nodes, {"x": x}, ["y", "p"], consts), {"x": x}, tmp_path)
    assert fused.op_types() == ["MatMul", "Relu"]
