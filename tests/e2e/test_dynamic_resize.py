"""Resize in a dynamic model (ops/resize_dynamic.py, issue 15): one archive per model, its
Resizes at several input sizes against ONNX Runtime -- nearest, linear and cubic, up and down,
every coordinate mode, scales as constants and sizes taken from another input's shape -- and the
"multiple of" dim (`lo~hi%m`) that an FPN's upsample-and-add needs."""
import json
import zipfile

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.helpers import assert_close, ort_run

import om2gen
from om2gen.cli import entry
from om2gen.errors import ArchiveError, InputError, ShapeError
from om2gen.formats.om2 import layout
from om2gen.runtime import dynamic


def _resize(name, mode, coord, *, scales=None, sizes=None, roi=None, **attrs):
    """A Resize of x into `name`, with its constants (sizes: the name of the model's computed
    sizes, or a constant)."""
    consts, ins = [], ["x", "", "", ""]
    if roi is not None:
        consts.append(numpy_helper.from_array(np.asarray(roi, np.float32), f"{name}_roi"))
        ins[1] = f"{name}_roi"
    if scales is not None:
        consts.append(numpy_helper.from_array(np.asarray(scales, np.float32), f"{name}_scales"))
        ins[2] = f"{name}_scales"
    if isinstance(sizes, list):
        consts.append(numpy_helper.from_array(np.asarray(sizes, np.int64), f"{name}_sizes"))
        ins[3] = f"{name}_sizes"
    elif sizes is not None:
        ins[3] = sizes
    while not ins[-1]:
        ins.pop()
    return helper.make_node("Resize", ins, [name], mode=mode, coordinate_transformation_mode=coord, **attrs), consts


# name: (mode, coordinate_transformation_mode, how the output size is given, attributes)
RESIZES = {
    "nearest_up_asymmetric_floor": ("nearest", "asymmetric", dict(scales=[1, 1, 2, 2], nearest_mode="floor")),
    "nearest_down_half_pixel": ("nearest", "half_pixel", dict(scales=[1, 1, 0.5, 0.6], nearest_mode="round_prefer_floor")),
    "nearest_pytorch_ceil": ("nearest", "pytorch_half_pixel", dict(scales=[1, 1, 3, 1.5], nearest_mode="round_prefer_ceil")),
    "nearest_align_corners": ("nearest", "align_corners", dict(scales=[1, 1, 2, 1], nearest_mode="round_prefer_floor")),
    "nearest_half_pixel_ceil_sizes": ("nearest", "half_pixel", dict(sizes="sizes", nearest_mode="ceil")),
    "linear_up_half_pixel": ("linear", "half_pixel", dict(scales=[1, 1, 2, 2])),
    "linear_down_pytorch": ("linear", "pytorch_half_pixel", dict(scales=[1, 1, 0.5, 0.75])),
    "linear_align_corners_sizes": ("linear", "align_corners", dict(sizes="sizes")),
    "linear_asymmetric_sizes": ("linear", "asymmetric", dict(sizes="sizes")),
    "linear_half_pixel_symmetric": ("linear", "half_pixel_symmetric", dict(scales=[1, 1, 1.7, 0.8])),
    "linear_antialias_down": ("linear", "half_pixel", dict(scales=[1, 1, 0.5, 0.4], antialias=1)),
    "linear_tf_crop": ("linear", "tf_crop_and_resize", dict(sizes="sizes", roi=[0, 0, -0.3, 0.2, 1, 1, 1.2, 1.1],
                                                            extrapolation_value=-7.5)),
    "cubic_up_half_pixel": ("cubic", "half_pixel", dict(scales=[1, 1, 2, 2])),
    "cubic_down_exclude": ("cubic", "pytorch_half_pixel", dict(scales=[1, 1, 0.6, 0.6], cubic_coeff_a=-0.5,
                                                               exclude_outside=1)),
    "cubic_align_corners_sizes": ("cubic", "align_corners", dict(sizes="sizes")),
    "linear_to_a_fixed_size": ("linear", "pytorch_half_pixel", dict(sizes=[9, 16], axes=[2, 3])),
}


def _model():
    """x[N, 2, H, W] resized every way of RESIZES; "sizes" is x's N, C and ref's H2, W2 (the
    torch.onnx export of F.interpolate(x, size=ref.shape[2:]))."""
    nodes = [helper.make_node("Shape", ["ref"], ["ref_shape"]),
             helper.make_node("Slice", ["ref_shape", "two", "four"], ["hw"]),
             helper.make_node("Shape", ["x"], ["x_shape"]),
             helper.make_node("Slice", ["x_shape", "zero", "two"], ["nc"]),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0)]
    inits = [numpy_helper.from_array(np.array([v], np.int64), name) for v, name in ((0, "zero"), (2, "two"), (4, "four"))]
    for name, (mode, coord, how) in RESIZES.items():
        node, consts = _resize(name, mode, coord, **how)
        nodes.append(node)
        inits += consts
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, "H", "W"])
    ref = helper.make_tensor_value_info("ref", TensorProto.FLOAT, [1, 1, "H2", "W2"])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [f"{n}_n", 2, f"{n}_h", f"{n}_w"]) for n in RESIZES]
    return helper.make_model(helper.make_graph(nodes, "resize", [x, ref], outs, inits),
                             opset_imports=[helper.make_opsetid("", 19)])


def test_every_resize_at_several_sizes_matches_onnxruntime(tmp_path):
    m = _model()
    om2gen.compile(m, tmp_path / "r.om2", input_shapes={"x": ("1~2", 2, "3~40", "3~40"), "ref": (1, 1, "1~48", "1~48")})
    rng = np.random.default_rng(4)
    with om2gen.load(tmp_path / "r.om2") as model:
        for (n, h, w), (h2, w2) in (((1, 10, 20), (7, 31)), ((2, 40, 3), (48, 1)), ((1, 5, 7), (12, 3)),
                                    ((2, 40, 40), (1, 48)), ((1, 10, 20), (20, 40))):
            feeds = {"x": rng.standard_normal((n, 2, h, w)).astype(np.float32),
                     "ref": np.zeros((1, 1, h2, w2), np.float32)}
            got = model.run(feeds)
            for name, want in zip(RESIZES, ort_run(m, feeds)):
                assert_close(got[name], want, f"{name} of {n}x2x{h}x{w} (ref {h2}x{w2})")


def test_antialias_at_a_scale_only_the_run_gives_is_refused_naming_the_node(tmp_path):
    """Antialias taps span 1/scale source pixels: with sizes from a shape their count is the run's."""
    nodes = [helper.make_node("Shape", ["ref"], ["sizes"]),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", antialias=1, name="aa")]
    m = helper.make_model(helper.make_graph(
        nodes, "aa", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, f"{n}h", f"{n}w"]) for n in ("x", "ref")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, "A", "B"])]), opset_imports=[helper.make_opsetid("", 19)])
    with pytest.raises(om2gen.Om2Error, match=r"aa \(Resize\): its lowering asks 'the antialias footprint of axis 2"):
        om2gen.compile(m, tmp_path / "aa.om2", input_shapes={"x": (1, 1, "4~40", "4~40"), "ref": (1, 1, "4~40", "4~40")})
    assert not list(tmp_path.iterdir())


def _fpn():
    """The FPN step of a detector: x + upsample2x(maxpool2x2(x)); the Add holds only where H and W
    are even, which a plain range cannot say."""
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Resize", ["p", "", "scales"], ["u"], mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
             helper.make_node("Add", ["x", "u"], ["y"], name="fpn_add")]
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    return helper.make_model(helper.make_graph(
        nodes, "fpn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, "H", "W"])], [scales]),
        opset_imports=[helper.make_opsetid("", 19)])


def test_a_range_cannot_say_even_a_multiple_can(tmp_path, capsys):
    with pytest.raises(om2gen.Om2Error, match=r"fpn_add \(Add\): it asks"):
        om2gen.compile(_fpn(), tmp_path / "a.om2", input_shapes={"x": (1, 3, "4~32", "4~32")})
    m = _fpn()
    om2gen.compile(m, tmp_path / "f.om2", input_shapes={"x": (1, 3, "4~32%2", "4~32%4")})
    rng = np.random.default_rng(6)
    with om2gen.load(tmp_path / "f.om2") as model:
        assert model.inputs[0].shape == (1, 3, -1, -1) and model.inputs[0].max_shape == (1, 3, 32, 32)
        for h, w in ((4, 4), (32, 8), (18, 32), (6, 12)):
            x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
            assert_close(model.run({"x": x})["y"], ort_run(m, {"x": x})[0], f"{h}x{w}")
        for shape, match in (((1, 3, 7, 8), r"dim 2 \(2\*H_div2\) must be 4~32, a multiple of 2.* 7 is not"),
                             ((1, 3, 8, 10), r"dim 3 \(4\*W_div4\) must be 4~32, a multiple of 4.* 10 is not"),
                             ((1, 3, 34, 8), r"dim 2 \(2\*H_div2\) must be in 4~32, a multiple of 2, the range")):
            with pytest.raises(InputError, match=match):
                model.run({"x": np.zeros(shape, np.float32)})
        # the model library's own check (BindSymbols), for callers that bypass the Python one: its
        # ACL_ERROR_INVALID_PARAM is an InputError too
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(dynamic.Dynamic, "check", lambda *args: None)
            with pytest.raises(InputError, match=r"input 0 \(x\) has dim 3 = 10, not a size the model was "
                                                     r"compiled for \(W_div4: 4~32, a multiple of 4\)"):
                model.run({"x": np.zeros((1, 3, 8, 10), np.float32)})
        assert model.run({"x": np.ones((1, 3, 8, 8), np.float32)})["y"].shape == (1, 3, 8, 8)
    with zipfile.ZipFile(tmp_path / "f.om2") as z:
        meta = json.loads(z.read(layout.model_meta(0)))
    assert meta["inputs"][0]["shape_range"] == [[1, 1], [3, 3], [4, 32], [4, 32]]     # GE's [lo, hi]
    assert [(s["name"], s["range"], s["multiple"]) for s in meta["dynamic_shapes"]["symbols"]] == \
        [("H_div2", [2, 16], 2), ("W_div4", [1, 8], 4)]
    assert meta["dynamic_shapes"]["inputs"] == [["1", "3", "2*H_div2", "4*W_div4"]]
    assert entry.main(["inspect", str(tmp_path / "f.om2")]) == 0
    assert "dynamic dim W_div4: 1~8 (input 0 dim 3 = 4 * W_div4, a multiple of 4)" in capsys.readouterr().out


def test_a_multiple_is_spelled_lo_hi_percent_m(tmp_path):
    with pytest.raises(ShapeError, match=r"bounds must be multiples of 32 \(64~960%32\?\)"):
        om2gen.compile(_fpn(), tmp_path / "b.om2", input_shapes={"x": (1, 3, "33~960%32", "32~960%32")})
    with pytest.raises(ShapeError, match="'%m' follows a range"):
        om2gen.compile(_fpn(), tmp_path / "b.om2", input_shapes={"x": (1, 3, "64%32", 64)})
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_the_upsampling_conv_transpose_over_dynamic_sizes(mode, tmp_path):
    """PaddleOCR's 2x2 stride-2 ConvTranspose (compiled as Conv + DepthToSpace, passes/deconv_d2s.py)
    and a DepthToSpace of its own: the rows' sizes from the tiling data."""
    rng = np.random.default_rng(8)
    w = numpy_helper.from_array((rng.standard_normal((8, 4, 2, 2)) * 0.3).astype(np.float32), "w")
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["up"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("DepthToSpace", ["x"], ["d2s"], blocksize=2, mode=mode)]
    m = helper.make_model(helper.make_graph(
        nodes, "d2s", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, "H", "W"])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", c, "H2", "W2"]) for n, c in (("up", 4), ("d2s", 2))],
        [w]), opset_imports=[helper.make_opsetid("", 13)])
    om2gen.compile(m, tmp_path / "d.om2", input_shapes={"x": ("1~2", 8, "1~24", "1~24")})
    with om2gen.load(tmp_path / "d.om2") as model:
        for n, h, wd in ((1, 5, 7), (2, 24, 1), (1, 1, 24), (2, 12, 9)):
            x = rng.standard_normal((n, 8, h, wd)).astype(np.float32)
            for name, want in zip(("up", "d2s"), ort_run(m, {"x": x})):
                assert_close(model.run({"x": x})[name], want, f"{name} at {n}x{h}x{wd}")


def test_an_archive_whose_multiple_is_not_positive_is_corrupt():
    meta = {"inputs": [{"shape": [1, -1]}], "dynamic_shapes": {
        "symbols": [{"name": "S_div8", "range": [1, 4], "input": 0, "axis": 1, "multiple": 0}],
        "inputs": [["1", "8*S_div8"]], "outputs": [], "tiling_library": "t.so"}}
    with pytest.raises(ArchiveError, match="symbol S_div8 has the multiple 0"):
        dynamic.from_meta(meta, "m.om2")
    meta["dynamic_shapes"]["symbols"][0]["multiple"] = 8
    assert dynamic.from_meta(meta, "m.om2").symbols[0].rule() == "8~32, a multiple of 8"
    del meta["dynamic_shapes"]["symbols"][0]["multiple"]          # an archive from before multiples: 1
    assert dynamic.from_meta(meta, "m.om2").symbols[0].rule() == "1~4"
