"""Resize (opsets 10-19) and Upsample (7, 9) against ONNX Runtime, with constant scales/sizes/roi."""
import numpy as np
import pytest
from helpers import assert_close, check_op, make_model, rand
from onnx import helper
from onnx.reference import ReferenceEvaluator

import om2gen

COVERS = {"Resize", "Upsample"}


def resize(tmp_path, x, *, scales=None, sizes=None, roi=None, opset=19, **attrs):
    consts, names = {}, ["x", "", "", ""]
    if roi is not None:
        consts["roi"], names[1] = np.asarray(roi, np.float32), "roi"
    if scales is not None:
        consts["scales"], names[2] = np.asarray(scales, np.float32), "scales"
    if sizes is not None:
        consts["sizes"], names[3] = np.asarray(sizes, np.int64), "sizes"
    if opset < 13:  # roi and scales are not optional before opset 13: empty tensors mark them unused
        for i, name in ((1, "roi"), (2, "scales")):
            if names[i] == "":
                consts[name], names[i] = np.zeros(0, np.float32), name
    while names[-1] == "":
        names.pop()
    return check_op("Resize", {"x": x}, attrs, consts=consts, input_names=names, opset=opset, tmp_path=tmp_path)


X4 = rand(2, 3, 5, 7, seed=1)
ALIGN_CORNERS_SKIP = ("ONNX Runtime's align_corners divides by the integer output length, the ONNX reference "
                      "(and om2gen) by the real one, in_size * scale")


def fractional_length(scales, shape=X4.shape):
    return any(float(np.float32(s)) * n != int(float(np.float32(s)) * n) for s, n in zip(scales, shape))

# what exporters emit: (coordinate_transformation_mode, nearest_mode) for nearest
NEAREST = [("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"), ("pytorch_half_pixel", "round_prefer_ceil"),
           ("align_corners", "round_prefer_floor"), ("half_pixel", "ceil"), ("asymmetric", "round_prefer_ceil"),
           ("tf_half_pixel_for_nn", "round_prefer_ceil")]


@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 0.5, 0.6], [1, 1, 3, 1.5], [1, 2, 1, 0.4]])
@pytest.mark.parametrize("coord,nearest", NEAREST)
def test_nearest_scales(coord, nearest, scales, tmp_path):
    opset = 11 if coord == "tf_half_pixel_for_nn" else 19
    if coord == "align_corners" and fractional_length(scales):
        pytest.skip(ALIGN_CORNERS_SKIP)
    resize(tmp_path, X4, scales=scales, mode="nearest", coordinate_transformation_mode=coord, nearest_mode=nearest,
           opset=opset)


@pytest.mark.parametrize("sizes", [[2, 3, 10, 14], [2, 3, 3, 4], [1, 3, 7, 1]])
@pytest.mark.parametrize("coord,nearest", NEAREST[:5])
def test_nearest_sizes(coord, nearest, sizes, tmp_path):
    resize(tmp_path, X4, sizes=sizes, mode="nearest", coordinate_transformation_mode=coord, nearest_mode=nearest)


@pytest.mark.parametrize("coord", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                   "half_pixel_symmetric"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 0.5, 0.5], [1, 1, 1.7, 0.8]])
def test_linear_scales(coord, scales, tmp_path):
    if coord == "align_corners" and fractional_length(scales):
        pytest.skip(ALIGN_CORNERS_SKIP)
    resize(tmp_path, X4, scales=scales, mode="linear", coordinate_transformation_mode=coord)


@pytest.mark.parametrize("coord", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"])
@pytest.mark.parametrize("sizes", [[2, 3, 9, 13], [2, 3, 3, 4], [2, 3, 1, 1]])
def test_linear_sizes(coord, sizes, tmp_path):
    resize(tmp_path, X4, sizes=sizes, mode="linear", coordinate_transformation_mode=coord)


@pytest.mark.parametrize("shape,sizes", [((1, 2, 3, 4, 5), [1, 2, 5, 3, 8]), ((2, 3, 9), [2, 3, 4])])
def test_linear_trilinear_and_1d(shape, sizes, tmp_path):
    resize(tmp_path, rand(*shape), sizes=sizes, mode="linear", coordinate_transformation_mode="half_pixel")


@pytest.mark.parametrize("coord", ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 0.6, 0.6]])
@pytest.mark.parametrize("a,exclude", [(-0.75, 0), (-0.5, 1)])
def test_cubic(coord, scales, a, exclude, tmp_path):
    if coord == "align_corners" and fractional_length(scales):
        pytest.skip(ALIGN_CORNERS_SKIP)
    resize(tmp_path, X4, scales=scales, mode="cubic", coordinate_transformation_mode=coord, cubic_coeff_a=a,
           exclude_outside=exclude)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 0.6, 0.8], [1, 1, 1.5, 2.3]])
def test_align_corners_fractional_length_vs_reference(mode, scales, tmp_path):
    """Where ONNX Runtime departs from the ONNX reference (see ALIGN_CORNERS_SKIP), compare with the reference."""
    consts = {"roi": np.zeros(0, np.float32), "scales": np.asarray(scales, np.float32)}
    check_vs_reference(tmp_path, X4, consts, mode=mode, coordinate_transformation_mode="align_corners")


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("size", [4, 14])
def test_rank1_vs_reference(mode, size, tmp_path):
    """ONNX Runtime resizes 1-D tensors with nearest only."""
    consts = {"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32), "sizes": np.array([size], np.int64)}
    check_vs_reference(tmp_path, rand(9), consts, mode=mode)


def check_vs_reference(tmp_path, x, consts, **attrs):
    node = helper.make_node("Resize", ["x", *consts], ["y"], **attrs)
    model = make_model([node], {"x": x}, ["y"], consts, 19)
    om2gen.compile(model, tmp_path / "m.om2")
    with om2gen.load(tmp_path / "m.om2") as m:
        got = m.run({"x": x})["y"]
    assert_close(got, ReferenceEvaluator(model).run(None, {"x": x})[0], "y")


def test_cubic_pytorch_half_pixel_to_one(tmp_path):
    resize(tmp_path, X4, sizes=[2, 3, 1, 3], mode="cubic", coordinate_transformation_mode="pytorch_half_pixel")


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("sizes", [[1, 1, 4, 3], [1, 1, 7, 5], [1, 1, 12, 20]])
def test_antialias(mode, sizes, tmp_path):
    resize(tmp_path, rand(1, 1, 10, 11), sizes=sizes, mode=mode, antialias=1)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("roi,sizes", [([0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8], [2, 3, 3, 3]),
                                       ([0, 0, -0.3, 0.2, 1, 1, 1.2, 1.1], [2, 3, 6, 8]),
                                       ([0, 0, 0.8, 0.9, 1, 1, 0.2, 0.1], [2, 3, 4, 4])])
def test_tf_crop_and_resize(mode, roi, sizes, tmp_path):
    resize(tmp_path, X4, roi=roi, sizes=sizes, mode=mode, coordinate_transformation_mode="tf_crop_and_resize",
           extrapolation_value=-7.5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("axes,sizes", [([2, 3], [8, 4]), ([3, 2], [4, 8]), ([-1], [11])])
def test_axes(mode, axes, sizes, tmp_path):
    resize(tmp_path, X4, sizes=sizes, axes=axes, mode=mode)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
@pytest.mark.parametrize("sizes", [[9, 9], [3, 20]])
def test_keep_aspect_ratio_policy(policy, sizes, tmp_path):
    resize(tmp_path, X4, sizes=sizes, axes=[2, 3], mode="linear", keep_aspect_ratio_policy=policy)


@pytest.mark.parametrize("dtype", [np.uint8, np.int32])
def test_nearest_integers(dtype, tmp_path):
    x = np.random.default_rng(0).integers(0, 100, (1, 2, 4, 5)).astype(dtype)
    resize(tmp_path, x, scales=[1, 1, 2, 1.5], mode="nearest", coordinate_transformation_mode="asymmetric",
           nearest_mode="floor")


@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_older_opsets(opset, mode, tmp_path):
    resize(tmp_path, X4, scales=[1, 1, 2, 0.5], mode=mode, opset=opset)


def test_opset11_empty_scales_with_sizes(tmp_path):
    check_op("Resize", {"x": X4}, {"mode": "linear"}, opset=11, tmp_path=tmp_path,
             consts={"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
                     "sizes": np.array([2, 3, 9, 4], np.int64)})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 0.6], [1, 1, 1.5, 2.5]])
def test_resize10(mode, scales, tmp_path):
    check_op("Resize", {"x": X4}, {"mode": mode}, consts={"scales": np.asarray(scales, np.float32)}, opset=10,
             tmp_path=tmp_path)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample7(mode, tmp_path):
    check_op("Upsample", {"x": X4}, {"mode": mode, "scales": [1.0, 1.0, 2.0, 3.0]}, opset=7, tmp_path=tmp_path)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample9(mode, tmp_path):
    check_op("Upsample", {"x": X4}, {"mode": mode}, consts={"scales": np.array([1, 1, 2, 2.5], np.float32)},
             opset=9, tmp_path=tmp_path)


def test_runtime_scales_are_rejected(tmp_path):
    with pytest.raises(om2gen.ShapeError, match="scales"):
        check_op("Resize", {"x": X4, "scales": np.array([1, 1, 2, 2], np.float32)}, {"mode": "nearest"},
                 input_names=["x", "", "scales"], tmp_path=tmp_path)


def test_unknown_mode_is_rejected(tmp_path):
    with pytest.raises(om2gen.UnsupportedOpError, match="mode"):
        resize(tmp_path, X4, scales=[1, 1, 2, 2], mode="lanczos")
