"""Conv (2-D) against ONNX Runtime: pads incl. auto_pad, strides, dilations, groups."""
import pytest
from helpers import check_op, rand

COVERS = {"Conv"}

CASES = {
    "basic_3x3": dict(x=(1, 3, 8, 8), w=(4, 3, 3, 3), attrs={}),
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
