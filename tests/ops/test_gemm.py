"""Gemm and MatMul against ONNX Runtime."""
import pytest
from helpers import check_op, rand

COVERS = {"Gemm", "MatMul"}


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("b_const", [False, True])
def test_gemm_transposes(trans_a, trans_b, b_const, tmp_path):
    m, k, n = 5, 7, 6
    a = rand(*((k, m) if trans_a else (m, k)), seed=1)
    b = rand(*((n, k) if trans_b else (k, n)), seed=2)
    c = rand(n, seed=3)
    inputs = {"a": a}
    consts = {"c": c}
    if b_const:
        consts = {"b": b, "c": c}
    else:
        inputs["b"] = b
    check_op("Gemm", inputs, {"transA": trans_a, "transB": trans_b}, consts=consts,
             input_names=["a", "b", "c"], tmp_path=tmp_path)


@pytest.mark.parametrize("c_shape", [(), (1,), (6,), (5, 1), (5, 6)])
def test_gemm_alpha_beta_bias_broadcast(c_shape, tmp_path):
    check_op("Gemm", {"a": rand(5, 7)}, {"alpha": 0.5, "beta": 2.0},
             consts={"b": rand(7, 6, seed=2), "c": rand(*c_shape, seed=3)}, tmp_path=tmp_path)


def test_gemm_without_bias(tmp_path):
    check_op("Gemm", {"a": rand(3, 64)}, {"transB": 1}, consts={"b": rand(128, 64, seed=2)}, tmp_path=tmp_path)


@pytest.mark.parametrize("sa,sb", [
    ((4, 8), (8, 3)),
    ((8,), (8, 3)),
    ((4, 8), (8,)),
    ((2, 4, 8), (8, 3)),
    ((2, 4, 8), (2, 8, 3)),
    ((3, 1, 4, 8), (2, 8, 5)),
    ((1, 128, 256), (256, 512)),
])
def test_matmul(sa, sb, tmp_path):
    check_op("MatMul", {"a": rand(*sa, seed=1), "b": rand(*sb, seed=2)}, tmp_path=tmp_path)


def test_matmul_const_weight(tmp_path):
    check_op("MatMul", {"a": rand(2, 10, 16)}, consts={"w": rand(16, 4, seed=9)}, tmp_path=tmp_path)
