"""Short register tiles of the packed GEMM (om2_gemm_rows_for in om2/om2_gemm.h): a last panel of
5 to 8 valid rows runs the 8-row kernel on AVX-512 (1 and 2 to 4 rows have their own), in both
the direct product (output channels as rows) and the transposed one (output positions as rows,
small images), on every target this machine runs. And the transposed product over a batch of
small images (conv_gemm.c.j2 with RB > 1): rows are the positions of every image, register
tiles and SPMD tiles crossing image boundaries."""
import zipfile

import pytest
from helpers import check_model, make_model, rand
from onnx import helper

from om2gen import pipeline
from om2gen.toolchain import targets

COVERS: set = set()   # Conv is covered by test_conv.py

RUNNABLE = [name for name, t in targets.TARGETS.items() if not targets.missing_features(t.arch, t.isa_features)]

CASES = {
    # channels 16 + 5, 16 + 8, 16 + 6 (rows of the direct product); positions many
    "channels_21": dict(x=(1, 8, 12, 12), w=(21, 8, 3, 3), attrs={"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "channels_24_pointwise": dict(x=(1, 40, 9, 9), w=(24, 40, 1, 1), attrs={}),
    "channels_22_k_blocks": dict(x=(1, 300, 5, 6), w=(22, 300, 1, 1), attrs={}),
    # positions 5 and 8 (rows of the transposed product: small images, many channels)
    "stft_like": dict(x=(4, 1, 832), w=(40, 1, 256), attrs={"strides": [128]}),
    "positions_8": dict(x=(1, 32, 4, 2), w=(70, 32, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    "positions_6_bias_relu": dict(x=(2, 48, 2, 3), w=(90, 48, 1, 1), attrs={}),
}


@pytest.fixture(autouse=True)
def _no_winograd(monkeypatch):
    monkeypatch.setenv(pipeline.WINOGRAD_ENV, "0")


def check_conv_relu(c: dict, target: str, tmp_path) -> str:
    """Conv (+ bias) + Relu against ONNX Runtime; returns the source of the archive's kernels."""
    consts = {"w": rand(*c["w"], seed=2), "b": rand(c["w"][0], seed=3)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **c["attrs"]), helper.make_node("Relu", ["c"], ["y"])]
    inputs = {"x": rand(*c["x"], seed=1)}
    check_model(make_model(nodes, inputs, ["y"], consts), inputs, tmp_path, target=target, debug=True)
    with zipfile.ZipFile(tmp_path / "model.om2") as z:
        return "".join(z.read(n).decode() for n in z.namelist() if "/csrc/kernels/" in n)


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("case", sorted(CASES))
def test_short_panels(case, target, tmp_path):
    check_conv_relu(CASES[case], target, tmp_path)


BATCHED = {
    # silero's STFT: 4 images x 5 positions = 20 rows (a 16-row tile, then 4 rows from image 3 on)
    "stft_like": CASES["stft_like"],
    # 3 images x 9 positions with pads; 8 images x 12 positions over several row tiles (SPMD blocks)
    "pads_3_images": dict(x=(3, 16, 3, 3), w=(40, 16, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    "row_tiles_8_images": dict(x=(8, 64, 3, 4), w=(200, 64, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    # a strided 1-D kernel (im2col gathers: no column-phase planes over a batch)
    "strided_1d": dict(x=(4, 24, 9), w=(48, 24, 3), attrs={"strides": [2], "pads": [1, 1]}),
}


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("case", sorted(BATCHED))
def test_transposed_over_the_batch(case, target, tmp_path):
    assert "transposed over the batch" in check_conv_relu(BATCHED[case], target, tmp_path)


def test_split_suits_two_cores():
    """gemm_pack.split gives 1, 2 or a multiple of 4 tiles, never 3 (two cores would run 2 + 1), and
    splits a GEMM of at least MIN_MACS_PER_TILE multiply-adds in two."""
    from om2gen.ops import gemm_pack
    from om2gen.toolchain.blocking import BLOCKING
    bl = BLOCKING["x86_64-avx512"]
    for m, n, k in [(24, 3136, 96), (32, 784, 144), (64, 196, 192), (16, 12544, 32), (96, 196, 576), (8, 8, 8)]:
        t = gemm_pack.split(m, n, k, bl, a_packed_at_run_time=False, b_packed_at_run_time=True)
        tiles = t.tiles_m * t.tiles_n
        assert tiles in (1, 2) or tiles % gemm_pack.ENOUGH_TILES == 0, (m, n, k, t)
        if m * n * k >= gemm_pack.MIN_MACS_PER_TILE:
            assert tiles >= 2, (m, n, k, t)
