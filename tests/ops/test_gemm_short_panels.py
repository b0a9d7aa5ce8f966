"""Short register tiles of the packed GEMM (om2_gemm_rows_for in om2/om2_gemm.h): a last panel of
5 to 8 valid rows runs the 8-row kernel on AVX-512 (1 and 2 to 4 rows have their own), in both
the direct product (output channels as rows) and the transposed one (output positions as rows,
small images), on every target this machine runs."""
import pytest
from helpers import check_model, make_model, rand
from onnx import helper

from om2gen.ops import conv
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
    monkeypatch.setenv(conv.WINOGRAD_ENV, "0")


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("case", sorted(CASES))
def test_short_panels(case, target, tmp_path):
    c = CASES[case]
    consts = {"w": rand(*c["w"], seed=2), "b": rand(c["w"][0], seed=3)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **c["attrs"]), helper.make_node("Relu", ["c"], ["y"])]
    inputs = {"x": rand(*c["x"], seed=1)}
    check_model(make_model(nodes, inputs, ["y"], consts), inputs, tmp_path, target=target)
