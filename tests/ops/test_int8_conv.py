"""ConvInteger and QLinearConv against ONNX Runtime, bit for bit: per-tensor and per-channel
weights, groups incl. depthwise, pads, strides, dilations, pointwise; every x86 kernel."""
import numpy as np
import pytest
from helpers import ort_run
from onnx import TensorProto, helper
from test_int8_matmul import TARGETS, ints, model, run

COVERS = {"ConvInteger", "QLinearConv"}

# (x shape, w shape, attributes)
CASES = {
    "3x3_pad": ((1, 8, 11, 13), (20, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    "stride2_dilation": ((2, 5, 15, 14), (7, 5, 3, 3), {"strides": [2, 2], "dilations": [2, 1], "pads": [2, 0, 1, 1]}),
    "pointwise": ((1, 40, 9, 9), (36, 40, 1, 1), {}),
    "group": ((1, 12, 8, 8), (18, 4, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    "depthwise": ((1, 16, 10, 12), (16, 1, 3, 3), {"group": 16, "pads": [1, 1, 1, 1], "strides": [2, 1]}),
    "conv1d_same": ((1, 6, 30), (10, 6, 5), {"auto_pad": "SAME_UPPER"}),
    # wide rows: panels of positions inside the image (packed through the per-k offsets), K = 27
    "wide_rows": ((1, 3, 9, 40), (24, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    "wide_stride2": ((1, 4, 12, 50), (16, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "depthwise_wide_dilated": ((1, 8, 9, 41), (8, 1, 3, 3), {"group": 8, "pads": [2, 2, 2, 2], "dilations": [2, 2],
                                                             "strides": [1, 2]}),
    # depthwise, the tap pairs: an odd kernel row (a lone last tap), an even one, row and column
    # phases (strides 2 and 3), dilated rows, asymmetric pads, 1-D, two images
    "depthwise_5x5_s2": ((2, 6, 13, 11), (6, 1, 5, 5), {"group": 6, "pads": [2, 1, 2, 3], "strides": [2, 2]}),
    "depthwise_even_s3": ((1, 4, 14, 17), (4, 1, 4, 2), {"group": 4, "pads": [1, 0, 2, 1], "strides": [3, 3],
                                                         "dilations": [3, 1]}),
    "depthwise_1d": ((1, 5, 37), (5, 1, 7), {"group": 5, "pads": [3, 3], "dilations": [2]}),
    # planes larger than a band's budget: 3 bands (the last shorter), and 5 at stride 2
    "depthwise_bands": ((1, 3, 120, 300), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    "depthwise_bands_s2": ((1, 2, 250, 260), (2, 1, 3, 3), {"group": 2, "pads": [1, 1, 0, 0], "strides": [2, 2]}),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_conv_integer_exact(target, case, tmp_path):
    xs, wsh, attrs = CASES[case]
    rng = np.random.default_rng(7)
    x, w = ints(rng, np.uint8, xs), ints(rng, np.uint8 if case in ("group", "depthwise_even_s3") else np.int8, wsh)
    consts = {"w": w, "zx": np.uint8(77), "zw": np.array(5, w.dtype)}
    node = helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"], **attrs)
    m = model([node], {"x": x}, consts, {"y": (TensorProto.INT32, None)})
    ref = ort_run(m, {"x": x})[0]
    np.testing.assert_array_equal(run(m, {"x": x}, tmp_path, target)["y"], ref)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv_bit_exact(target, case, per_channel, tmp_path):
    xs, wsh, attrs = CASES[case]
    rng = np.random.default_rng(8)
    x, w = ints(rng, np.uint8, xs), ints(rng, np.int8, wsh)
    mch = wsh[0]
    n = mch if per_channel else 1
    shape = (n,) if per_channel else ()
    consts = {"sx": np.float32(0.05), "zx": np.uint8(100), "w": w,
              "sw": rng.uniform(0.002, 0.02, n).astype(np.float32).reshape(shape), "zw": np.zeros(shape, np.int8),
              # outputs of a std of a few hundred: both ends saturate
              "sy": np.float32(0.01 * np.sqrt(np.prod(wsh[1:]))), "zy": np.uint8(110), "b": rng.integers(-3000, 3000, mch).astype(np.int32)}
    node = helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], ["y"], **attrs)
    m = model([node], {"x": x}, consts, {"y": (TensorProto.UINT8, None)})
    ref = ort_run(m, {"x": x})[0]
    assert (ref == 0).any() and (ref == 255).any()      # saturation reached at both ends
    np.testing.assert_array_equal(run(m, {"x": x}, tmp_path, target)["y"], ref)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", ["wide_rows", "pointwise", "depthwise_wide_dilated", "depthwise_5x5_s2"])
def test_qlinear_conv_int8_input_bit_exact(target, case, tmp_path):
    """int8 activations (flipped to uint8 as the panels are packed) with int8 weights."""
    xs, wsh, attrs = CASES[case]
    rng = np.random.default_rng(9)
    x, w = ints(rng, np.int8, xs), ints(rng, np.int8, wsh)
    consts = {"sx": np.float32(0.05), "zx": np.int8(-20), "w": w, "sw": np.float32(0.01), "zw": np.int8(0),
              "sy": np.float32(0.01 * np.sqrt(np.prod(wsh[1:]))), "zy": np.int8(3),
              "b": rng.integers(-3000, 3000, wsh[0]).astype(np.int32)}
    node = helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], ["y"], **attrs)
    m = model([node], {"x": x}, consts, {"y": (TensorProto.INT8, None)})
    np.testing.assert_array_equal(run(m, {"x": x}, tmp_path, target)["y"], ort_run(m, {"x": x})[0])
