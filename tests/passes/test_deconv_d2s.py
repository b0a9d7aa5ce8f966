"""ConvTranspose with kernel = stride as a pointwise Conv + DepthToSpace (passes/deconv_d2s.py):
with and without bias, blocks 2 and 3, batches, with the BatchNormalization and Relu that
follow in PP-OCR's upsampling head; and the ConvTransposes that must stay (overlapping windows,
pads, output padding, groups, non-square, weights given at run time). And the interleaving
DepthToSpace kernel (depth_to_space.c.j2) in both modes."""
import numpy as np
import pytest
from fusion_check import check_fusion
from helpers import make_model, rand
from onnx import helper

F32 = np.float32


def deconv(x_shape, w_shape, attrs=None, *, bias=True, bn_relu=False, const_w=True):
    consts = {"b": rand(w_shape[1] * (attrs or {}).get("group", 1), seed=3)} if bias else {}
    inputs = {"x": rand(*x_shape, seed=1)}
    if const_w:
        consts["w"] = rand(*w_shape, seed=2)
    else:
        inputs["w"] = rand(*w_shape, seed=2)
    ins = ["x", "w"] + (["b"] if bias else [])
    nodes = [helper.make_node("ConvTranspose", ins, ["t"], name="up", **(attrs or {}))]
    out = "t"
    if bn_relu:
        m = w_shape[1]
        rng = np.random.default_rng(7)
        consts.update(s=rng.uniform(0.5, 2, m).astype(F32), o=rng.uniform(-1, 1, m).astype(F32),
                      mu=rng.uniform(-1, 1, m).astype(F32), var=rng.uniform(0.2, 2, m).astype(F32))
        nodes += [helper.make_node("BatchNormalization", ["t", "s", "o", "mu", "var"], ["n"]),
                  helper.make_node("Relu", ["n"], ["y"])]
        out = "y"
    return make_model(nodes, inputs, [out], consts), inputs


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape,w_shape,s", [((1, 24, 10, 12), (24, 24, 2, 2), 2), ((2, 8, 5, 7), (8, 3, 3, 3), 3),
                                                ((1, 24, 16, 16), (24, 1, 2, 2), 2)])
def test_upsampling_deconv_becomes_conv_and_depth_to_space(x_shape, w_shape, s, bias, tmp_path):
    model, feeds = deconv(x_shape, w_shape, {"strides": [s, s], "kernel_shape": [s, s]}, bias=bias)
    fused, plain = check_fusion(model, feeds, tmp_path, exact=False)
    assert plain.op_types() == ["ConvTranspose"]
    assert fused.op_types() == ["Conv", "DepthToSpace"]


def test_with_batchnorm_and_relu(tmp_path):
    model, feeds = deconv((1, 16, 8, 8), (16, 16, 2, 2), {"strides": [2, 2]}, bn_relu=True)
    fused, _ = check_fusion(model, feeds, tmp_path, exact=False)
    assert fused.op_types()[:2] == ["Conv", "DepthToSpace"]


@pytest.mark.parametrize("case", ["overlap", "pads", "output_padding", "groups", "non_square", "runtime_weights"])
def test_other_deconvs_stay(case, tmp_path):
    w_shape, attrs, const_w = (8, 4, 2, 2), {"strides": [2, 2]}, True
    if case == "overlap":
        w_shape = (8, 4, 3, 3)
    elif case == "pads":
        attrs["pads"] = [1, 1, 1, 1]
    elif case == "output_padding":
        attrs["output_padding"] = [1, 1]
    elif case == "groups":
        attrs["group"] = 2
        w_shape = (8, 2, 2, 2)
    elif case == "non_square":
        w_shape, attrs = (8, 4, 2, 3), {"strides": [2, 3]}
    else:
        const_w = False
    model, feeds = deconv((1, 8, 6, 7), w_shape, attrs, const_w=const_w)
    fused, _ = check_fusion(model, feeds, tmp_path, exact=False)
    assert fused.op_types() == ["ConvTranspose"]


@pytest.mark.parametrize("mode", ["CRD", "DCR"])
@pytest.mark.parametrize("b", [2, 3, 4, 5])
def test_depth_to_space_kernels(mode, b, tmp_path):
    x = rand(2, 3 * b * b, 5, 7, seed=4)
    model = make_model([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=b, mode=mode)], {"x": x}, ["y"])
    fused, _ = check_fusion(model, {"x": x}, tmp_path)
    assert fused.op_types() == ["DepthToSpace"]
