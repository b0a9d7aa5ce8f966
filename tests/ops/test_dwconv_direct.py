"""The direct AVX-512 depthwise kernel (templates/kernels/dwconv_direct.c.j2): column strides 1
and 2, sliding along the rows or (where a tap's column offset is too far for that) with masked
loads, the padding as lane masks (left, right, top, bottom, asymmetric, wider than the kernel
reach), planes narrower than a vector and wider than several, row remainders of the 4-row unroll,
row chunks (several work items per plane), dilations, batches, bias and the fused Clip/Relu;
the fallbacks it leaves to dwconv.c.j2 (column stride 3, kernels wider than 7); and float MaxPool,
which runs the same kernel without weights (-inf padding, NaN propagation)."""
import zipfile

import numpy as np
import pytest
from helpers import check_model, make_model, rand
from onnx import helper

import om2gen

from om2gen.ops import conv
from om2gen.toolchain import targets

COVERS: set = set()   # Conv is covered by test_conv.py

AVX512 = "x86_64-avx512"
pytestmark = pytest.mark.skipif(bool(targets.missing_features("x86_64", targets.TARGETS[AVX512].isa_features)),
                                reason="this machine cannot run AVX-512 code")

CASES = {
    # MobileNetV2's shapes: small planes (one vector per row), stride 2 with pads 1
    "s1_7x7": dict(x=(1, 32, 7, 7), w=(32, 1, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    "s1_14x14": dict(x=(1, 48, 14, 14), w=(48, 1, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    "s2_14_to_7": dict(x=(1, 16, 14, 14), w=(16, 1, 3, 3), attrs={"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "s2_56_to_28": dict(x=(1, 8, 56, 56), w=(8, 1, 3, 3), attrs={"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    # several vectors per row with a partial last one, several row chunks per plane
    "s1_wide_chunks": dict(x=(1, 3, 70, 150), w=(3, 1, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    "s2_wide_chunks": dict(x=(1, 3, 90, 133), w=(3, 1, 3, 3), attrs={"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    # asymmetric and large pads (columns entirely outside the image), no pads, odd left pad at stride 2
    "asym_pads": dict(x=(2, 5, 11, 19), w=(5, 1, 3, 3), attrs={"pads": [0, 2, 2, 1]}),
    "no_pads": dict(x=(1, 4, 9, 21), w=(4, 1, 3, 3), attrs={}),
    "s2_odd_pad": dict(x=(2, 8, 21, 37), w=(8, 1, 3, 3), attrs={"strides": [2, 2], "pads": [2, 3, 1, 0]}),
    "pad_wider_than_image": dict(x=(1, 3, 3, 2), w=(3, 1, 3, 3), attrs={"pads": [3, 2, 3, 2]}),
    # 5x5 and 1x7 kernels, dilation, row stride 3 with column stride 1, 1-D
    "k5_s2": dict(x=(1, 6, 29, 31), w=(6, 1, 5, 5), attrs={"strides": [2, 2], "pads": [2, 2, 2, 2]}),
    "k1x7": dict(x=(1, 4, 8, 40), w=(4, 1, 1, 7), attrs={"pads": [0, 3, 0, 3]}),
    "dilated": dict(x=(1, 5, 12, 13), w=(5, 1, 3, 3), attrs={"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    "sh3_sw1": dict(x=(1, 3, 20, 17), w=(3, 1, 3, 3), attrs={"strides": [3, 1], "pads": [1, 1, 1, 1]}),
    "1d_s2": dict(x=(1, 6, 40), w=(6, 1, 5), attrs={"pads": [2, 1], "strides": [2]}),
    # tap column offsets too far to slide: masked loads (stride 1: a left pad of 17); stride 2
    # without a left pad (taps shifted forward into the next 32 columns) slides
    "masked_s1_far_pad": dict(x=(1, 3, 6, 5), w=(3, 1, 3, 3), attrs={"pads": [1, 17, 1, 0]}),
    "masked_s2_far_pad": dict(x=(1, 3, 6, 9), w=(3, 1, 3, 3), attrs={"strides": [2, 2], "pads": [1, 33, 1, 0]}),
    "s2_no_left_pad": dict(x=(1, 4, 15, 36), w=(4, 1, 3, 3), attrs={"strides": [2, 2], "pads": [0, 0, 1, 1]}),
    # row counts 1, 2, 3, 5, 6 (remainders of the 4-row unroll)
    "rows_1": dict(x=(1, 2, 1, 20), w=(2, 1, 1, 3), attrs={"pads": [0, 1, 0, 1]}),
    "rows_3": dict(x=(1, 2, 3, 20), w=(2, 1, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    "rows_5": dict(x=(1, 2, 5, 20), w=(2, 1, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    "rows_6": dict(x=(1, 2, 6, 17), w=(2, 1, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
}


def _run(c, tmp_path, bias=True, act=None) -> str:
    """Checks one depthwise Conv (plus an optional activation) against ONNX Runtime; returns the
    source of the archive's kernels."""
    channels = c["x"][1]
    consts = {"w": rand(*c["w"], seed=2)}
    if bias:
        consts["b"] = rand(c["w"][0], seed=3)
    nodes = [helper.make_node("Conv", ["x"] + list(consts), ["c" if act else "y"], group=channels, **c["attrs"])]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    elif act == "Clip":
        consts.update(lo=np.float32(0.0), hi=np.float32(0.5))
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    inputs = {"x": rand(*c["x"], seed=1)}
    check_model(make_model(nodes, inputs, ["y"], consts), inputs, tmp_path, target=AVX512, debug=True)
    with zipfile.ZipFile(tmp_path / "model.om2") as z:
        return "".join(z.read(n).decode() for n in z.namelist() if "/csrc/kernels/" in n)


MASKED = {"masked_s1_far_pad", "masked_s2_far_pad"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_direct_depthwise(case, tmp_path):
    variant = "masked loads" if case in MASKED else "sliding"
    assert f"Conv (depthwise, direct, {variant})" in _run(CASES[case], tmp_path)


@pytest.mark.parametrize("act", ["Relu", "Clip"])
@pytest.mark.parametrize("case", ["s1_14x14", "s2_odd_pad"])
def test_direct_depthwise_activation_no_bias(case, act, tmp_path):
    source = _run(CASES[case], tmp_path, bias=False, act=act)
    assert "the fused activation" in source and "Bias" not in source


@pytest.mark.parametrize("c", [
    dict(x=(1, 3, 10, 30), w=(3, 1, 3, 3), attrs={"strides": [3, 3], "pads": [1, 1, 1, 1]}),
    dict(x=(1, 3, 5, 40), w=(3, 1, 1, conv.DIRECT_DEPTHWISE_MAX_KW + 2), attrs={"pads": [0, 4, 0, 4]}),
], ids=["column_stride_3", "wide_kernel"])
def test_plane_copy_kernel_where_direct_does_not_apply(c, tmp_path):
    source = _run(c, tmp_path)
    assert "Conv (depthwise)" in source and "direct" not in source


POOL_CASES = {
    # ResNet's stem pool (sliding, stride 2), all-negative input: padding must be -inf, not 0
    "resnet_stem_negative": dict(x=(1, 4, 20, 22), attrs={"kernel_shape": [3, 3], "strides": [2, 2],
                                                           "pads": [1, 1, 1, 1]}, negative=True),
    # no pads at stride 2 (a tap two columns on: masked loads), ceil_mode (a last window past the end)
    "s2_no_pads_ceil": dict(x=(2, 3, 15, 17), attrs={"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
                            negative=True),
    "s1_same": dict(x=(1, 5, 9, 33), attrs={"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),
    "dilated_1d": dict(x=(1, 3, 40), attrs={"kernel_shape": [3], "dilations": [2], "pads": [2, 1]}),
}


def _pool_source(tmp_path) -> str:
    with zipfile.ZipFile(tmp_path / "model.om2") as z:
        return "".join(z.read(n).decode() for n in z.namelist() if "/csrc/kernels/" in n)


@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_direct_maxpool(case, tmp_path):
    c = POOL_CASES[case]
    x = rand(*c["x"], seed=1, low=-3.0, high=-0.5) if c.get("negative") else rand(*c["x"], seed=1)
    model = make_model([helper.make_node("MaxPool", ["x"], ["y"], **c["attrs"])], {"x": x}, ["y"])
    check_model(model, {"x": x}, tmp_path, target=AVX512, debug=True)
    assert "MaxPool (direct" in _pool_source(tmp_path)


@pytest.mark.parametrize("stride,pad", [(2, 1), (1, 2), (2, 0)])   # sliding at both strides, masked loads
def test_direct_maxpool_nan(stride, pad, tmp_path):
    """A NaN in a window gives NaN (numpy's max, as the scalar kernel; ONNX Runtime's MaxPool
    differs here, so the reference is numpy): at a border column, in the interior, on the last row."""
    k = 3 if pad < 2 else 5
    x = rand(1, 2, 13, 35, seed=3)
    x[0, 0, 4, 0] = x[0, 0, 5, 17] = x[0, 1, 12, 34] = x[0, 1, 7, 7] = np.nan
    model = make_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[k, k], strides=[stride, stride],
                                         pads=[pad] * 4)], {"x": x}, ["y"])
    om2gen.compile(model, tmp_path / "model.om2", target=AVX512, debug=True)
    assert "MaxPool (direct" in _pool_source(tmp_path)
    with om2gen.load(tmp_path / "model.om2") as m:
        got = m.run({"x": x})["y"]
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    ref = np.lib.stride_tricks.sliding_window_view(padded, (k, k), axis=(2, 3))[:, :, ::stride, ::stride].max(axis=(4, 5))
    assert np.isnan(ref).any() and not np.isnan(ref).all()
    np.testing.assert_array_equal(got, ref)
