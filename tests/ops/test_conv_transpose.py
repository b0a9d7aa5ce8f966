"""ConvTranspose (1-D, 2-D, 3-D) against ONNX Runtime: strides, pads, output_padding, output_shape,
dilations, group, auto_pad."""
import pytest
from helpers import check_op, rand

COVERS = {"ConvTranspose"}

# x shape, w shape (C x M/group x kernel), attributes
CASES = {
    "basic": ((1, 2, 5, 5), (2, 3, 3, 3), {}),
    "stride2": ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2]}),
    "stride3x2_pads": ((2, 2, 4, 3), (2, 2, 3, 4), {"strides": [3, 2], "pads": [1, 2, 0, 1]}),
    "output_padding": ((1, 2, 4, 4), (2, 2, 3, 3), {"strides": [2, 3], "output_padding": [1, 2]}),
    "dilations": ((1, 2, 5, 4), (2, 2, 3, 2), {"dilations": [2, 3], "strides": [1, 2]}),
    "group2": ((1, 4, 5, 5), (4, 3, 3, 3), {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "depthwise": ((1, 6, 5, 4), (6, 1, 4, 4), {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "output_shape_bigger": ((1, 1, 3, 3), (1, 2, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
    "output_shape_smaller": ((1, 2, 4, 4), (2, 1, 3, 3), {"strides": [2, 2], "output_shape": [8, 7]}),
    "output_shape_same_upper": ((1, 2, 4, 4), (2, 1, 3, 3),
                                {"strides": [2, 2], "output_shape": [8, 7], "auto_pad": "SAME_UPPER"}),
    "same_upper": ((1, 2, 3, 4), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "same_lower": ((1, 2, 3, 4), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    "same_lower_4x4": ((1, 2, 3, 4), (2, 2, 4, 4), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    "valid": ((1, 2, 3, 4), (2, 2, 3, 2), {"strides": [2, 1], "auto_pad": "VALID"}),
    "kernel_1x1_stride2": ((1, 3, 4, 4), (3, 2, 1, 1), {"strides": [2, 2]}),
    # 1-D
    "1d": ((2, 3, 7), (3, 2, 3), {"strides": [2], "pads": [1, 0]}),
    "1d_wide_kernel": ((1, 2, 9), (2, 2, 21), {"strides": [3], "pads": [5, 4], "dilations": [2]}),  # table-driven
    "1d_output_padding_group": ((1, 4, 6), (4, 1, 4), {"strides": [3], "output_padding": [2], "group": 2}),
    # 3-D
    "3d": ((1, 2, 3, 4, 3), (2, 2, 3, 3, 2), {"strides": [2, 1, 2]}),
    "3d_pads_dil_group": ((1, 4, 3, 3, 4), (4, 1, 2, 3, 2),
                          {"strides": [2, 2, 1], "pads": [1, 0, 1, 0, 1, 0], "dilations": [2, 1, 2], "group": 2}),
    "3d_output_shape": ((1, 1, 2, 3, 3), (1, 2, 3, 3, 3), {"strides": [2, 2, 2], "output_shape": [6, 7, 8]}),
}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_conv_transpose(case, bias, tmp_path):
    xs, ws, attrs = CASES[case]
    consts = {"w": rand(*ws, seed=2)}
    if bias:
        consts["b"] = rand(ws[1] * attrs.get("group", 1), seed=3)
    check_op("ConvTranspose", {"x": rand(*xs, seed=1)}, attrs, consts=consts, tmp_path=tmp_path)


def test_conv_transpose_weight_as_input(tmp_path):
    check_op("ConvTranspose", {"x": rand(1, 3, 5, 5), "w": rand(3, 2, 3, 3, seed=4)}, {"strides": [2, 2]},
             tmp_path=tmp_path)


def test_conv_transpose_opset1(tmp_path):
    check_op("ConvTranspose", {"x": rand(1, 2, 4, 4)}, {"strides": [2, 2]}, consts={"w": rand(2, 2, 3, 3, seed=2)},
             opset=1, tmp_path=tmp_path)
