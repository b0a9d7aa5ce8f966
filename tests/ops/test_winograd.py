"""Winograd F(2x2,3x3) and F(4x4,3x3) for 3x3 stride-1 convolutions (om2/om2_winograd.h,
om2gen/ops/winograd.py): the exact transforms, the per-shape choice, and kernels on every target
this machine runs against ONNX Runtime — edge tiles (outputs not a multiple of the tile), tile
blocks spanning tile rows, several tile blocks and output-channel ranges, asymmetric and large
padding, batches, with and without bias."""
import zipfile
from fractions import Fraction

import numpy as np
import pytest
from helpers import assert_close, check_model, make_model, ort_run, rand
from onnx import helper

import om2gen
from om2gen import pipeline
from om2gen.errors import CompileError
from om2gen.ops import winograd
from om2gen.toolchain import targets
from om2gen.toolchain.blocking import BLOCKING

COVERS: set = set()   # Conv is covered by test_conv.py

RUNNABLE = [name for name, t in targets.TARGETS.items() if not targets.missing_features(t.arch, t.isa_features)]


def _conv(x, w, attrs, tmp_path, target, bias=True, seed=1):
    consts = {"w": rand(*w, seed=seed + 1)}
    if bias:
        consts["b"] = rand(w[0], seed=seed + 2)
    node = helper.make_node("Conv", ["x"] + list(consts), ["y"], **attrs)
    inputs = {"x": rand(*x, seed=seed)}
    model = make_model([node], inputs, ["y"], consts)
    check_model(model, inputs, tmp_path, target=target)
    return model


CASES = {
    # outputs not a multiple of the tile in either dim; tiles of a block span tile rows
    "edges": dict(x=(1, 5, 13, 11), w=(7, 5, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    # no padding, then asymmetric and larger-than-kernel padding (whole padding rows and columns)
    "valid": dict(x=(1, 3, 9, 10), w=(4, 3, 3, 3), attrs={}),
    "asym_pads": dict(x=(1, 6, 10, 7), w=(5, 6, 3, 3), attrs={"pads": [0, 2, 3, 1]}),
    "big_pads": dict(x=(1, 2, 4, 5), w=(3, 2, 3, 3), attrs={"pads": [3, 4, 2, 3]}),
    # one-row and one-column outputs
    "thin": dict(x=(1, 4, 3, 20), w=(6, 4, 3, 3), attrs={}),
    # several tile blocks (the transformed input budget), output channels past a register panel
    "blocks": dict(x=(1, 70, 30, 29), w=(37, 70, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    # few tiles: output channels split into ranges; batch of two
    "k_ranges": dict(x=(2, 24, 7, 7), w=(300, 24, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    "same_upper": dict(x=(1, 3, 10, 9), w=(4, 3, 3, 3), attrs={"auto_pad": "SAME_UPPER"}),
}


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("case", sorted(CASES))
def test_winograd_conv(case, target, m, tmp_path, monkeypatch):
    monkeypatch.setenv(pipeline.WINOGRAD_ENV, str(m))
    c = CASES[case]
    _conv(c["x"], c["w"], c["attrs"], tmp_path, target)
    assert _uses_winograd(tmp_path / "model.om2", m)



@pytest.mark.parametrize("m", [2, 4])
def test_winograd_over_a_dynamic_batch(m, tmp_path, monkeypatch):
    """A dynamic model whose batch alone varies keeps Winograd (ops/winograd.py): the tile plan is the
    image's, the batch a tiling field; one archive at several batches, edge tiles included."""
    monkeypatch.setenv(pipeline.WINOGRAD_ENV, str(m))
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])
    consts = {"w": rand(12, 10, 3, 3, seed=2), "b": rand(12, seed=3)}
    model = make_model([node], {"x": rand(1, 10, 13, 11)}, ["y"], consts)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    om2gen.compile(model, tmp_path / "model.om2", input_shapes={"x": ("1~6", 10, 13, 11)})
    assert _uses_winograd(tmp_path / "model.om2", m)
    with om2gen.load(tmp_path / "model.om2") as loaded:
        for n in (1, 6, 3, 2):
            x = rand(n, 10, 13, 11, seed=n)
            assert_close(loaded.run({"x": x})["y"], ort_run(model, {"x": x})[0], f"batch {n}")

@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("pads,c,k", [([1, 1, 1, 1], 10, 12), ([0, 2, 3, 1], 6, 37), ([1, 1, 1, 1], 70, 300)])
def test_winograd_over_a_dynamic_image_size(m, pads, c, k, tmp_path, monkeypatch):
    """With H and W dynamic, Winograd keeps the largest image's tile block and channel split
    (winograd.over_range), the tile counts the run's, and a workspace for every size in range:
    one archive from 3x3 (one tile) to 40x40, one-tile-wide and one-tile-high images, batches."""
    monkeypatch.setenv(pipeline.WINOGRAD_ENV, str(m))
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=pads)
    model = make_model([node], {"x": rand(1, c, 13, 11)}, ["y"], {"w": rand(k, c, 3, 3, seed=2), "b": rand(k, seed=3)})
    for axis, name in ((0, "N"), (2, "H"), (3, "W")):
        model.graph.input[0].type.tensor_type.shape.dim[axis].dim_param = name
    om2gen.compile(model, tmp_path / "model.om2", input_shapes={"x": ("1~2", c, "3~40", "3~40")})
    assert _uses_winograd(tmp_path / "model.om2", m)
    with om2gen.load(tmp_path / "model.om2") as loaded:
        for n, h, w in ((1, 3, 3), (2, 40, 40), (1, 13, 11), (2, 3, 40), (1, 40, 3), (1, 17, 29)):
            x = rand(n, c, h, w, seed=h)
            assert_close(loaded.run({"x": x})["y"], ort_run(model, {"x": x})[0], f"{n}x{c}x{h}x{w}")


def _uses_winograd(archive, m) -> bool:
    with zipfile.ZipFile(archive) as z:
        sources = [z.read(n).decode() for n in z.namelist() if n.endswith(".c") and "/kernels/" in n]
    return any(f"#define OM2_WINO_M {m}" in s for s in sources)


@pytest.mark.parametrize("m", [2, 4])
def test_winograd_no_bias_wide_channels(m, tmp_path, monkeypatch):
    """512 input channels: the long sums where F(4,3)'s error is largest."""
    monkeypatch.setenv(pipeline.WINOGRAD_ENV, str(m))
    _conv((1, 512, 6, 9), (20, 512, 3, 3), {"pads": [1, 1, 1, 1]}, tmp_path, None, bias=False)


def _correlate(d, g):
    return [sum(g[k] * d[i + k] for k in range(3)) for i in range(len(d) - 2)]


@pytest.mark.parametrize("m", [2, 4])
def test_transforms_are_exact(m):
    """A^T [(G g) . (B^T d)] is the correlation of d with g, in exact arithmetic."""
    bt, gm, at = winograd.matrices(m)
    rng = np.random.default_rng(0)
    for _ in range(5):
        d = [Fraction(int(v)) for v in rng.integers(-9, 10, m + 2)]
        g = [Fraction(int(v)) for v in rng.integers(-9, 10, 3)]
        u = [sum(r[k] * g[k] for k in range(3)) for r in gm]
        v = [sum(r[j] * d[j] for j in range(m + 2)) for r in bt]
        y = [sum(r[j] * u[j] * v[j] for j in range(m + 2)) for r in at]
        assert y == _correlate(d, g)


def test_transform_code_uses_every_nonzero_coefficient():
    code = winograd.transform_code(2)
    assert code["bt"][0] == "om2_v_sub(d[2], d[0])"
    assert all("d[5]" in e for e in winograd.transform_code(4)["bt"][5:])


def _geom(c, m, h, w=None, n=1, stride=1, group=1, dil=1):
    w = w or h
    return dict(N=n, C=c, M=m, G=group, CG=c // group, MG=m // group, D=1, H=h, W=w, KD=1, KH=3, KW=3, OD=1,
                OH=h, OW=w, SD=1, SH=stride, SW=stride, DD=1, DH=dil, DW=dil, PF=0, PT=1, PL=1)


def test_choice_per_shape():
    bl = BLOCKING["x86_64-avx512"]
    # ResNet-50's 3x3 stride-1 layers all pay
    for c, h in ((64, 56), (128, 28), (256, 14), (512, 7)):
        assert winograd.choose(_geom(c, c, h), bl) is not None, (c, h)
    assert winograd.choose(_geom(64, 64, 56), bl).m == 4
    # a 7 x 7 image has 4 tiles of 4 x 4: F(2,3)'s 16 fill a vector of lanes
    assert winograd.choose(_geom(512, 512, 7), bl).m == 2
    # a 1 x 1 image: one tile in a vector of lanes; the GEMM does better
    assert winograd.choose(_geom(512, 512, 1), bl) is None
    # F(4,3) only up to MAX_CHANNELS_F4 input channels
    wide = winograd.choose(_geom(2048, 256, 28), bl)
    assert wide is None or wide.m == 2
    assert winograd.choose(_geom(64, 64, 56), bl, forced=0) is None
    assert winograd.choose(_geom(8, 8, 5), bl, forced=4).m == 4


def test_applicable_only_to_plain_3x3():
    assert winograd.applicable(_geom(8, 8, 9), True)
    assert not winograd.applicable(_geom(8, 8, 9), False)          # weights are an input
    assert not winograd.applicable(_geom(8, 8, 9, stride=2), True)
    assert not winograd.applicable(_geom(8, 8, 9, group=2), True)
    assert not winograd.applicable(_geom(8, 8, 9, dil=2), True)


def test_plan_fits_budget_and_splits_channels():
    bl = BLOCKING["x86_64-avx512"]
    p = winograd.plan(_geom(64, 64, 56), 4, bl)
    assert p.tile_block % bl.nr == 0 and p.tile_blocks * p.tile_block >= p.tiles
    assert 36 * p.tile_block * 64 <= max(winograd.V_L2_SHARE * bl.l2_bytes / 4, 36 * bl.nr * 64)
    small = winograd.plan(_geom(512, 512, 7), 2, bl)
    assert small.tile_blocks == 1 and small.k_ranges > 1 and small.k_range % bl.mr == 0


def test_bad_setting_is_a_typed_error(monkeypatch):
    monkeypatch.setenv(pipeline.WINOGRAD_ENV, "3")
    with pytest.raises(CompileError, match="OM2GEN_WINOGRAD"):
        pipeline.winograd_setting(None)
    with pytest.raises(CompileError, match="winograd"):
        pipeline.winograd_setting(3)


@pytest.mark.parametrize("m", [2, 4])
def test_winograd_deep_chain_keeps_accuracy(m, tmp_path, monkeypatch):
    """Eight 3x3 Conv + Relu layers with He-initialised weights (256 channels, as in ResNet's third
    stage): the transforms' rounding must not build up past the project's tolerance."""
    monkeypatch.setenv(pipeline.WINOGRAD_ENV, str(m))
    rng = np.random.default_rng(7)
    c, nodes, consts, prev = 256, [], {}, "x"
    for i in range(8):
        consts[f"w{i}"] = (rng.standard_normal((c, c, 3, 3)) * np.sqrt(2.0 / (9 * c))).astype(np.float32)
        consts[f"b{i}"] = (rng.standard_normal(c) * 0.1).astype(np.float32)
        nodes += [helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        prev = f"r{i}"
    inputs = {"x": rng.standard_normal((1, c, 14, 14)).astype(np.float32)}
    check_model(make_model(nodes, inputs, [prev], consts), inputs, tmp_path)
