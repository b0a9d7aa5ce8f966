"""The packed GEMM behind Conv, MatMul and Gemm (om2/om2_gemm.h, om2gen/ops/gemm_pack.py): every
target this machine runs, edge tiles (M, N not multiples of the register tile), K blocking,
multi-tile SPMD splits, run-time packing of either operand, grouped and 3-D convolutions, the
transposed product for small images; the few-row product over constant weights (om2/om2_gemv.h);
and the depthwise kernel (dwconv.c.j2)."""
import zipfile

import numpy as np
import pytest
from helpers import check_model, make_model, rand
from onnx import helper

from om2gen import pipeline
from om2gen.ops import gemm_pack
from om2gen.toolchain import targets
from om2gen.toolchain.blocking import BLOCKING

COVERS: set = set()   # Conv, MatMul and Gemm are covered by test_conv.py / test_gemm.py

RUNNABLE = [name for name, t in targets.TARGETS.items() if not targets.missing_features(t.arch, t.isa_features)]


@pytest.fixture(autouse=True)
def _no_winograd(monkeypatch):
    """3x3 stride-1 cases here test the GEMM, not Winograd (tests/ops/test_winograd.py)."""
    monkeypatch.setenv(pipeline.WINOGRAD_ENV, "0")


def run_node(op_type, inputs: dict, consts: dict, attrs: dict, tmp_path, target, order=None):
    node = helper.make_node(op_type, order or list(inputs) + list(consts), ["y"], **attrs)
    model = make_model([node], inputs, ["y"], consts)
    check_model(model, inputs, tmp_path, target=target)


CONV_CASES = {
    # M, N = OH*OW and K = C*KH*KW off the register tile; K > KC (256) so C accumulates over k blocks
    "edges_kblocks": dict(x=(2, 37, 9, 11), w=(21, 37, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    # several column tiles (SPMD blocks), stride 2 im2col
    "column_tiles": dict(x=(1, 32, 80, 80), w=(40, 32, 3, 3), attrs={"strides": [2, 2], "pads": [1, 0, 1, 2]}),
    # several row tiles over a short image: each packs the same columns
    "row_tiles": dict(x=(1, 256, 7, 7), w=(300, 256, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    "pointwise_groups": dict(x=(1, 12, 10, 10), w=(18, 4, 1, 1), attrs={"group": 3}),
    # pointwise: B read in place (rows P apart), only the last partial panel packed; k blocks
    "pointwise_in_place": dict(x=(2, 300, 9, 15), w=(40, 300, 1, 1), attrs={}),
    "dilated_3d": dict(x=(1, 3, 6, 7, 8), w=(5, 3, 2, 3, 2), attrs={"dilations": [2, 1, 2], "pads": [1, 1, 0, 0, 1, 1]}),
    # strided kernels im2col from column-phase planes: stride 3 (no vector split), stride 2 x 1,
    # dilated stride 2 (one phase read), and a small image (transposed product, planes for A)
    "planes_s3": dict(x=(1, 8, 20, 23), w=(10, 8, 3, 3), attrs={"strides": [3, 3], "pads": [1, 2, 0, 1]}),
    "planes_s2x1": dict(x=(2, 5, 17, 31), w=(7, 5, 3, 3), attrs={"strides": [1, 2], "pads": [1, 1, 1, 1]}),
    "planes_dilated": dict(x=(1, 6, 25, 40), w=(9, 6, 3, 3), attrs={"strides": [2, 2], "dilations": [2, 2],
                                                                   "pads": [2, 3, 2, 1]}),
    "planes_transposed": dict(x=(1, 160, 14, 14), w=(200, 160, 3, 3), attrs={"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "planes_7x7_s2": dict(x=(1, 3, 61, 50), w=(16, 3, 7, 7), attrs={"strides": [2, 2], "pads": [3, 3, 3, 3]}),
}


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_gemm(case, target, tmp_path):
    c = CONV_CASES[case]
    consts = {"w": rand(*c["w"], seed=2), "b": rand(c["w"][0], seed=3)}
    run_node("Conv", {"x": rand(*c["x"], seed=1)}, consts, c["attrs"], tmp_path, target)


DEPTHWISE_CASES = {
    "s2_asym_pads": dict(x=(1, 24, 17, 15), w=(24, 1, 3, 3), attrs={"strides": [2, 2], "pads": [0, 1, 2, 1]}),
    "dilated_5x5": dict(x=(2, 5, 12, 13), w=(5, 1, 5, 5), attrs={"dilations": [2, 2], "pads": [4, 3, 4, 4]}),
    # narrower than the kernel: no interior column, every column is a border one
    "no_interior": dict(x=(1, 3, 6, 2), w=(3, 1, 3, 3), attrs={"pads": [3, 2, 3, 2]}),
    "1d": dict(x=(1, 6, 40), w=(6, 1, 7), attrs={"pads": [3, 2], "strides": [3]}),
    # a plane in several row chunks (work items), each with its halo rows
    "row_chunks": dict(x=(1, 4, 40, 150), w=(4, 1, 3, 3), attrs={"pads": [1, 1, 1, 1]}),
    # stride 2 with an odd left pad (even input columns land in phase 1), stride 3 with dilation
    "s2_odd_pad": dict(x=(2, 8, 21, 37), w=(8, 1, 3, 3), attrs={"strides": [2, 2], "pads": [2, 3, 1, 0]}),
    "s3_dilated": dict(x=(1, 5, 19, 23), w=(5, 1, 3, 3), attrs={"strides": [3, 3], "dilations": [2, 2],
                                                                "pads": [2, 2, 2, 2]}),
    # taps 16 columns or more apart: loads, not lane shifts
    "wide_kernel": dict(x=(1, 3, 5, 70), w=(3, 1, 1, 21), attrs={"pads": [0, 10, 0, 10]}),
    # the right of the input never read (columns past the last tap)
    "unread_columns": dict(x=(1, 2, 9, 30), w=(2, 1, 3, 3), attrs={"strides": [4, 4]}),
}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", sorted(DEPTHWISE_CASES))
def test_depthwise(case, bias, tmp_path):
    c = DEPTHWISE_CASES[case]
    consts = {"w": rand(*c["w"], seed=2)}
    if bias:
        consts["b"] = rand(c["w"][0], seed=3)
    run_node("Conv", {"x": rand(*c["x"], seed=1)}, consts, dict(c["attrs"], group=c["x"][1]), tmp_path, None)


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("case", ["s2_odd_pad", "row_chunks", "wide_kernel"])
def test_depthwise_targets(case, target, tmp_path):
    """The AVX-512 lane shifts and phase split, and the portable loops."""
    c = DEPTHWISE_CASES[case]
    consts = {"w": rand(*c["w"], seed=2), "b": rand(c["w"][0], seed=3)}
    run_node("Conv", {"x": rand(*c["x"], seed=1)}, consts, dict(c["attrs"], group=c["x"][1]), tmp_path, target)


def test_depthwise_weights_as_input(tmp_path):
    run_node("Conv", {"x": rand(1, 6, 12, 11), "w": rand(6, 1, 3, 3, seed=4)}, {},
             {"group": 6, "pads": [1, 0, 1, 2], "strides": [2, 1]}, tmp_path, None)


@pytest.mark.parametrize("target", RUNNABLE)
def test_conv_gemm_transposed_small_image(target, tmp_path):
    """7 x 7 output (49 positions: a padded vector would waste a third), K blocked, column tiles."""
    consts = {"w": rand(200, 160, 3, 3, seed=2), "b": rand(200, seed=3)}
    run_node("Conv", {"x": rand(1, 160, 7, 7, seed=1)}, consts, {"pads": [1, 1, 1, 1]}, tmp_path, target)


@pytest.mark.parametrize("target", RUNNABLE)
def test_conv_gemm_weights_as_input(target, tmp_path):
    run_node("Conv", {"x": rand(1, 6, 9, 9), "w": rand(10, 3, 3, 3, seed=4)}, {}, {"group": 2, "pads": [1, 1, 1, 1]},
             tmp_path, target)


MATMUL_CASES = {
    "gemv": ((1, 300), (300, 37), True),
    "tall_a_mc_blocks": ((600, 40), (40, 20), True),     # A packed at run time in MC-row blocks
    "edges_kblocks": ((19, 700), (700, 45), True),
    "tiles_dynamic": ((2, 200, 64), (2, 64, 300), False),
    "dynamic_b_kblocks": ((3, 17, 270), (270, 45), False),
    "batch_broadcast_const": ((3, 1, 5, 20), (2, 20, 9), True),
}


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("case", sorted(MATMUL_CASES))
def test_matmul_gemm(case, target, tmp_path):
    sa, sb, b_const = MATMUL_CASES[case]
    a, b = rand(*sa, seed=1), rand(*sb, seed=2)
    if b_const:
        run_node("MatMul", {"a": a}, {"b": b}, {}, tmp_path, target)
    else:
        run_node("MatMul", {"a": a, "b": b}, {}, {}, tmp_path, target)


@pytest.mark.parametrize("target", RUNNABLE)
def test_gemm_const_a_transposed(target, tmp_path):
    """A constant (packed at compile time, transposed), B an input, alpha/beta epilogue."""
    run_node("Gemm", {"b": rand(33, 18, seed=2)}, {"a": rand(33, 21, seed=1), "c": rand(21, 1, seed=3)},
             {"transA": 1, "alpha": 0.5, "beta": -1.5}, tmp_path, target, order=["a", "b", "c"])


# (inputs, constants, attributes, input order, whether the kernel is om2/om2_gemv.h's)
GEMV_CASES = {
    # the MLP's layer: transB, bias over N; odd K > KC, N off the panel width; 63 panels in column tiles
    "row_bias_many_tiles": ({"a": (1, 517)}, {"b": (1000, 517), "c": (1000,)}, {"transB": 1}, None, True),
    "k_short_n_short": ({"a": (1, 3)}, {"b": (3, 5), "c": (1, 5)}, {}, None, True),
    "no_bias": ({"a": (1, 300)}, {"b": (300, 37)}, {}, None, True),
    # few rows: each row's own bias, alpha and beta
    "rows3_full_bias": ({"a": (3, 301)}, {"b": (301, 70), "c": (3, 70)}, {"alpha": 0.5, "beta": -1.5}, None, True),
    "rows2_column_bias": ({"a": (2, 64)}, {"b": (40, 64), "c": (2, 1)}, {"transB": 1, "alpha": 2.0}, None, True),
    "rows4_scalar_bias_trans_a": ({"a": (260, 4)}, {"b": (260, 33), "c": ()}, {"transA": 1, "beta": 0.25}, None, True),
    "beta_zero": ({"a": (1, 20)}, {"b": (20, 17), "c": (17,)}, {"beta": 0.0}, None, True),
    # past the few-row limit, and B an input: the packed GEMM
    "rows5": ({"a": (5, 300)}, {"b": (300, 37), "c": (37,)}, {}, None, False),
    "b_input": ({"a": (1, 300), "b": (300, 37)}, {"c": (37,)}, {}, ["a", "b", "c"], False),
}


def _kernel_sources(archive) -> str:
    with zipfile.ZipFile(archive) as z:
        return "".join(z.read(n).decode() for n in z.namelist() if "/csrc/kernels/" in n)


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("case", sorted(GEMV_CASES))
def test_gemm_few_rows(case, target, tmp_path):
    inputs, consts, attrs, order, gemv = GEMV_CASES[case]
    run_node("Gemm", {n: rand(*s, seed=i + 1) for i, (n, s) in enumerate(inputs.items())},
             {n: rand(*s, seed=i + 5) for i, (n, s) in enumerate(consts.items())}, attrs, tmp_path, target,
             order=order)
    assert ("om2_gemv(" in _kernel_sources(tmp_path / "model.om2")) == gemv


MATMUL_GEMV_CASES = {
    "row": ((1, 270), (270, 50), True),
    "vector": ((270,), (270, 50), True),
    # batch dims over a 2-D weight: the rows of every batch matrix are one product's (3 rows, then 6)
    "batch_rows": ((3, 1, 130), (130, 20), True),
    "batch_rows_over_limit": ((2, 3, 130), (130, 20), False),
    # a weight per batch matrix: one product per batch matrix, each over its own panels
    "batch_weights": ((2, 1, 40), (2, 40, 33), True),
    "batch_broadcast_rows": ((2, 1, 1, 40), (3, 40, 33), True),
}


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("case", sorted(MATMUL_GEMV_CASES))
def test_matmul_few_rows(case, target, tmp_path):
    sa, sb, gemv = MATMUL_GEMV_CASES[case]
    run_node("MatMul", {"a": rand(*sa, seed=1)}, {"b": rand(*sb, seed=2)}, {}, tmp_path, target)
    assert ("om2_gemv(" in _kernel_sources(tmp_path / "model.om2")) == gemv


def test_split_gemv_balances_cores():
    bl = BLOCKING["x86_64-avx512"]
    # the MLP's 1024 x 1024 layer: 64 panels in column tiles that 2 and 4 cores share evenly
    t = gemm_pack.split_gemv(1, 1024, 1024, bl)
    assert (t.tiles_m, t.tile_m) == (1, 1) and t.tiles_n % gemm_pack.ENOUGH_TILES == 0
    assert t.tile_n % bl.nr == 0 and t.tiles_n * t.tile_n >= 1024 > (t.tiles_n - 1) * t.tile_n
    # too little to stream for a split: one tile; batch items count towards the tiles
    assert gemm_pack.split_gemv(1, 10, 1024, bl).tiles_n == 1
    assert gemm_pack.split_gemv(2, 64, 64, bl, items=8).tiles_n == 1
    assert gemm_pack.split_gemv(1, 1000, 2048, bl).tiles_n == gemm_pack.MAX_TILES


def test_pack_layouts():
    a = np.arange(5 * 3, dtype=np.float32).reshape(5, 3)
    pa = gemm_pack.pack_a(a, 4)                 # [panels, K, MR]
    assert pa.shape == (2, 3, 4)
    assert pa[1, 2, 0] == a[4, 2] and pa[1, 2, 1] == 0.0
    b = np.arange(3 * 5, dtype=np.float32).reshape(3, 5)
    pb = gemm_pack.pack_b(b, 4)                 # [panels, K, NR]
    assert pb.shape == (2, 3, 4)
    assert pb[1, 2, 0] == b[2, 4] and pb[1, 2, 3] == 0.0


def test_split_keeps_repacking_tiles_large():
    bl = BLOCKING["x86_64-avx512"]
    # conv: constant weights (A), image packed per tile (B): columns split, rows stay whole
    wide = gemm_pack.split(64, 3136, 576, bl, a_packed_at_run_time=False, b_packed_at_run_time=True)
    assert wide.tiles_m == 1 and wide.tiles_n > 1 and wide.tile_n % bl.nr == 0
    tall = gemm_pack.split(512, 49, 4608, bl, a_packed_at_run_time=False, b_packed_at_run_time=True)
    assert tall.tile_m >= gemm_pack.MIN_TILE and tall.tile_m % bl.mr == 0
    # matmul: activations (A) packed per tile, constant weights (B): column tiles stay large
    mm = gemm_pack.split(128, 768, 768, bl, a_packed_at_run_time=True, b_packed_at_run_time=False)
    assert mm.tile_n >= gemm_pack.MIN_TILE or mm.tiles_n == 1
    assert gemm_pack.split(4, 4, 4, bl, a_packed_at_run_time=True, b_packed_at_run_time=True) == \
        gemm_pack.Tiles(16, 16, 1, 1)
