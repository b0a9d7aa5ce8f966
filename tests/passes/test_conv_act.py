"""Conv + Relu / Clip: the activation goes into the Conv kernel's store on every Conv path (packed
GEMM, transposed GEMM, Winograd, depthwise, the direct fallback), never when something else reads
the Conv's output."""
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


def conv_act_model(x, w, act, *, group=1, pads=(1, 1, 1, 1), strides=(1, 1), opset=17, bias=True):
    consts = {"w": w}
    ins = ["x", "w"]
    if bias:
        consts["b"] = rand(w.shape[0], seed=5)
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["c"], name="conv", group=group, pads=list(pads), strides=list(strides))]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"], name="act"))
    elif opset < 11:
        nodes.append(helper.make_node("Clip", ["c"], ["y"], name="act", min=0.0, max=6.0))
    else:
        consts.update(lo=np.array(0.0, F32), hi=np.array(6.0, F32))
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"], name="act"))
    return make_model(nodes, {"x": x}, ["y"], consts, opset=opset)


def check_fused(model, x, tmp_path, marker=None):
    fused, plain = check_fusion(model, {"x": x}, tmp_path)
    assert len(plain.op_types()) == 2
    assert fused.op_types() == ["FusedConv"]
    assert fused.fused_from("FusedConv") == [["conv", "act"]]
    if marker:
        assert marker in kernel_sources(fused)
    return fused


@pytest.mark.parametrize("act", ["Relu", "Clip"])
@pytest.mark.parametrize("shape", [(1, 8, 20, 20), (1, 16, 3, 3)])   # GEMM, transposed GEMM (tiny image)
def test_conv_gemm_activation(act, shape, tmp_path):
    x = rand(*shape, seed=1, low=-3, high=3)
    w = rand(24, shape[1], 3, 3, seed=2)
    model = conv_act_model(x, w, act, strides=(2, 2))
    check_fused(model, x * 3, tmp_path, "om2_clamp_run")


def test_conv_clip_opset6_attributes(tmp_path):
    x = rand(1, 4, 9, 9, seed=1, low=-5, high=5)
    model = conv_act_model(x, rand(8, 4, 1, 1, seed=2), "Clip", pads=(0, 0, 0, 0), opset=10)
    check_fused(model, x, tmp_path, "om2_clamp_run")


@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
def test_depthwise_conv_clip(strides, tmp_path):
    x = rand(1, 16, 14, 14, seed=1, low=-4, high=4)
    model = conv_act_model(x, rand(16, 1, 3, 3, seed=2, low=-2, high=2), "Clip", group=16, strides=strides)
    check_fused(model, x, tmp_path, "the fused activation")


def test_direct_fallback_conv_relu(tmp_path):
    """A depthwise 3-D convolution takes the direct kernel (conv2d.c.j2)."""
    x = rand(1, 4, 5, 6, 6, seed=1)
    consts = {"w": rand(4, 1, 3, 3, 3, seed=2)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", group=4, pads=[1] * 6),
             helper.make_node("Relu", ["c"], ["y"], name="act")]
    model = make_model(nodes, {"x": x}, ["y"], consts)
    check_fused(model, x, tmp_path, "the fused activation")


@pytest.mark.parametrize("tile", ["2", "4"])
def test_winograd_conv_relu(tile, tmp_path, monkeypatch):
    monkeypatch.setenv("OM2GEN_WINOGRAD", tile)
    x = rand(1, 16, 12, 12, seed=1)
    model = conv_act_model(x, rand(32, 16, 3, 3, seed=2), "Relu")
    check_fused(model, x, tmp_path, "#define OM2_WINO_ACT")


def test_conv_read_twice_is_not_fused(tmp_path):
    x = rand(1, 4, 9, 9, seed=1)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="act"),
             helper.make_node("Add", ["r", "c"], ["y"], name="add")]
    model = make_model(nodes, {"x": x}, ["y"], {"w": rand(8, 4, 3, 3, seed=2)})
    fused, plain = check_fusion(model, {"x": x}, tmp_path)
    assert "Conv" in fused.op_types() and "om2_clamp_run" not in kernel_sources(fused)
    assert "FusedConv" not in fused.op_types()
    assert len(fused.op_types()) == 2      # Relu + Add fuse element-wise, the Conv stays alone


def test_clip_with_run_time_bound_is_not_fused(tmp_path):
    x = rand(1, 4, 9, 9, seed=1)
    hi = np.array(0.5, F32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c", "", "hi"], ["y"], name="act")]
    model = make_model(nodes, {"x": x, "hi": hi}, ["y"], {"w": rand(8, 4, 3, 3, seed=2)})
    fused, _ = check_fusion(model, {"x": x, "hi": hi}, tmp_path)
    assert fused.op_types() == ["Conv", "Clip"]
