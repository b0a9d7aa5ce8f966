"""Conv (1-D, 2-D, 3-D) against ONNX Runtime: pads incl. auto_pad, strides, dilations, groups."""
import pytest
from helpers import check_op, rand

import om2gen

COVERS = {"Conv"}

CASES = {
    "basic_3x3": dict(x=(1, 3, 8, 8), w=(4, 3, 3, 3), attrs={}),
    # H x 1 "column" images (1-D convs exported as 2-D, e.g. Magika): lowered with H innermost
    "column": dict(x=(1, 8, 40, 1), w=(6, 4, 5, 1), attrs={"pads": [2, 0, 1, 0], "strides": [2, 1],
                                                            "dilations": [2, 1], "group": 2}),
    "column_plain": dict(x=(2, 3, 17, 1), w=(4, 3, 3, 1), attrs={}),
    "pads": dict(x=(2, 3, 9, 7), w=(5, 3, 3, 3), attrs={"pads": [1, 2, 0, 1]}),
    "stride2": dict(x=(1, 4, 11, 10), w=(6, 4, 3, 3), attrs={"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "dilation": dict(x=(1, 2, 12, 12), w=(3, 2, 3, 3), attrs={"dilations": [2, 3], "pads": [2, 2, 2, 2]}),
    "group2": dict(x=(1, 4, 6, 6), w=(6, 2, 3, 3), attrs={"group": 2, "pads": [1, 1, 1, 1]}),
    "depthwise": dict(x=(1, 8, 10, 10), w=(8, 1, 3, 3), attrs={"group": 8, "pads": [1, 1, 1, 1]}),
    "same_upper": dict(x=(1, 3, 10, 9), w=(4, 3, 3, 3), attrs={"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "same_lower": dict(x=(1, 3, 10, 9), w=(4, 3, 4, 4), attrs={"auto_pad": "SAME_LOWER"}),
    "valid": dict(x=(1, 3, 10, 9), w=(4, 3, 3, 2), attrs={"auto_pad": "VALID"}),
    "pointwise": dict(x=(1, 16, 7, 7), w=(32, 16, 1, 1), attrs={}),
    "kernel_7x7_s2": dict(x=(1, 3, 32, 32), w=(8, 3, 7, 7), attrs={"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    "rect_kernel": dict(x=(1, 2, 9, 9), w=(2, 2, 1, 5), attrs={"pads": [0, 2, 0, 2]}),
    # 1-D
    "1d_basic": dict(x=(2, 3, 20), w=(4, 3, 5), attrs={}),
    "1d_pads_stride_dil": dict(x=(1, 4, 31), w=(6, 4, 3), attrs={"pads": [2, 1], "strides": [2], "dilations": [3]}),
    "1d_groups_same": dict(x=(1, 6, 17), w=(9, 2, 4), attrs={"group": 3, "auto_pad": "SAME_UPPER"}),
    "1d_wide_kernel": dict(x=(1, 2, 80), w=(3, 2, 25), attrs={"pads": [12, 12]}),   # table-driven columns
    "1d_wide_kernel_s3": dict(x=(1, 2, 80), w=(3, 2, 19), attrs={"pads": [4, 7], "strides": [3], "dilations": [2]}),
    # 3-D
    "3d_basic": dict(x=(1, 2, 5, 6, 7), w=(3, 2, 3, 3, 3), attrs={}),
    "3d_pads_strides": dict(x=(2, 3, 7, 6, 8), w=(4, 3, 3, 2, 3),
                            attrs={"pads": [1, 0, 2, 1, 1, 0], "strides": [2, 1, 3]}),
    "3d_dilations_groups": dict(x=(1, 4, 8, 7, 9), w=(6, 2, 2, 3, 2),
                                attrs={"dilations": [2, 1, 3], "group": 2, "pads": [1, 1, 1, 1, 1, 1]}),
    "3d_same_lower": dict(x=(1, 2, 5, 6, 7), w=(2, 2, 2, 3, 4), attrs={"auto_pad": "SAME_LOWER", "strides": [2, 2, 1]}),
}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_conv(case, bias, tmp_path):
    c = CASES[case]
    consts = {"w": rand(*c["w"], seed=2)}
    if bias:
        consts["b"] = rand(c["w"][0], seed=3)
    check_op("Conv", {"x": rand(*c["x"], seed=1)}, c["attrs"], consts=consts, tmp_path=tmp_path)


def test_conv_weight_as_input(tmp_path):
    check_op("Conv", {"x": rand(1, 3, 6, 6), "w": rand(2, 3, 3, 3, seed=4)}, {"pads": [1, 1, 1, 1]},
             tmp_path=tmp_path)


def test_conv_opset1(tmp_path):
    check_op("Conv", {"x": rand(1, 2, 7, 7)}, {"pads": [1, 1, 1, 1]}, consts={"w": rand(3, 2, 3, 3, seed=2)},
             opset=1, tmp_path=tmp_path)


def test_conv_4d_spatial_is_rejected(tmp_path):
    with pytest.raises(om2gen.UnsupportedOpError, match="1-D, 2-D and 3-D"):
        check_op("Conv", {"x": rand(1, 1, 3, 3, 3, 3)}, consts={"w": rand(1, 1, 2, 2, 2, 2)}, tmp_path=tmp_path)
