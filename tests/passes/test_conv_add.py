"""Conv + Add (passes/conv_add.py): the residual Add of a pointwise Conv goes into the Conv
kernel's store, with the Relu after it (conv_act), on the packed GEMM and the transposed one,
the Conv on either side of the Add, as Add or two-input Sum, with the residual computed after
the Conv; and stays a task of its own where it must (broadcasting, another reader of the Conv's
output, a 3x3 or grouped or strided Conv). Results equal the unfused model's bit for bit."""
import numpy as np
import pytest
from fusion_check import check_fusion
from helpers import make_model, rand
from onnx import helper

F32 = np.float32


def block(x_shape, *, conv_side=0, op="Add", relu=True, bias=True, late_residual=False, w_shape=None,
          conv_attrs=None, residual_shape=None, extra_reader=False):
    """x -> Conv(1x1) -> Add(., r) [-> Relu]; r is the input x itself (same shape) or, with
    late_residual, a second Conv of x placed after the Add's Conv in the node order."""
    c = x_shape[1]
    w_shape = w_shape or (c, c, 1, 1)
    consts = {"w": rand(*w_shape, seed=2)}
    ins = ["x", "w"]
    if bias:
        consts["b"] = rand(w_shape[0], seed=3)
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["c"], name="conv", **(conv_attrs or {}))]
    residual = "x"
    if late_residual:
        consts["w2"] = rand(c, c, 1, 1, seed=4)
        nodes.append(helper.make_node("Conv", ["x", "w2"], ["r"], name="shortcut"))
        residual = "r"
    elif residual_shape is not None:
        consts["rc"] = rand(*residual_shape, seed=6)
        residual = "rc"
    pair = ["c", residual] if conv_side == 0 else [residual, "c"]
    nodes.append(helper.make_node(op, pair, ["s"], name="add"))
    outputs = ["y"]
    if relu:
        nodes.append(helper.make_node("Relu", ["s"], ["y"], name="relu"))
    else:
        nodes[-1].output[0] = "y"
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["c"], ["n"], name="neg"))
        outputs.append("n")
    return make_model(nodes, {"x": rand(*x_shape, seed=1, low=-2, high=2)}, outputs, consts), \
        {"x": rand(*x_shape, seed=1, low=-2, high=2)}


@pytest.mark.parametrize("conv_side", [0, 1])
@pytest.mark.parametrize("op", ["Add", "Sum"])
@pytest.mark.parametrize("x_shape", [(1, 24, 14, 14), (2, 40, 3, 2)])   # packed GEMM, transposed (tiny image)
def test_residual_add_fuses(x_shape, op, conv_side, tmp_path):
    model, feeds = block(x_shape, conv_side=conv_side, op=op)
    fused, plain = check_fusion(model, feeds, tmp_path)
    assert plain.op_types() == ["Conv", op, "Relu"]
    assert fused.op_types() == ["FusedConv"]
    assert fused.fused_from("FusedConv") == [["conv", "add", "relu"]]


@pytest.mark.parametrize("bias", [True, False])
def test_residual_computed_after_the_conv(bias, tmp_path):
    model, feeds = block((1, 16, 6, 7), late_residual=True, relu=False, bias=bias)
    fused, _ = check_fusion(model, feeds, tmp_path)
    assert fused.op_types() == ["Conv", "FusedConv"]       # the residual's Conv, then the one adding it


@pytest.mark.parametrize("case", ["broadcast", "second_reader", "3x3", "grouped", "strided"])
def test_residual_add_stays_a_task(case, tmp_path):
    kwargs = {
        "broadcast": dict(residual_shape=(1, 16, 1, 1)),
        "second_reader": dict(extra_reader=True),
        "3x3": dict(w_shape=(16, 16, 3, 3), conv_attrs={"pads": [1, 1, 1, 1]}),
        "grouped": dict(w_shape=(16, 8, 1, 1), conv_attrs={"group": 2}),
        "strided": dict(residual_shape=(1, 16, 3, 4), conv_attrs={"strides": [2, 2]}),
    }[case]
    model, feeds = block((1, 16, 6, 7), **kwargs)
    fused, _ = check_fusion(model, feeds, tmp_path)
    assert any(t in ("Add", "FusedElementwise") for t in fused.op_types())
