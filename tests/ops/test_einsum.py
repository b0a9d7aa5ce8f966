"""Einsum (one and two operands) against ONNX Runtime."""
import numpy as np
import pytest
import om2gen
from helpers import assert_close, check_op, rand
from onnx import TensorProto, helper

COVERS = {"Einsum"}

CASES = [
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 6)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 5), (2, 3, 5, 8)]),
    ("ij,jk->ik", [(4, 5), (5, 6)]),
    ("ij,kj->ik", [(4, 5), (6, 5)]),
    ("i,i->", [(7,)]*2),
    ("i,i", [(7,)]*2),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->ji", [(3, 4)]),
    ("bij->bji", [(2, 3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("ji", [(3, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 6)]),
    ("...ij,...jk->...ik", [(2, 1, 4, 5), (2, 3, 5, 6)]),
    ("...ij,jk", [(2, 4, 5), (5, 6)]),
    ("bsh,hd->bsd", [(2, 3, 8), (8, 4)]),
    ("bnd,bmd->bnm", [(2, 3, 4), (2, 5, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("...ii->...i", [(3, 5, 5)]),
    ("ij,ij->ij", [(3, 4)]*2),
    ("ij,j->i", [(3, 4), (4,)]),
    ("abc,cd->abd", [(2, 1, 3), (3, 4)]),
    ("b i j , b j k -> b i k", [(2, 3, 4), (2, 4, 5)]),
    ("->", [()]),
    (",->", [(), ()]),
    ("i,->i", [(5,), ()]),
    ("bqd,bkd->bqk", [(2, 64, 32), (2, 64, 32)]),
]


@pytest.mark.parametrize("equation,shapes", CASES, ids=[c[0].replace(" ", "") or "empty" for c in CASES])
def test_einsum(equation, shapes, tmp_path):
    inputs = {f"x{i}": rand(*s, seed=i + 1) for i, s in enumerate(shapes)}
    check_op("Einsum", inputs, {"equation": equation}, opset=12, tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
@pytest.mark.parametrize("equation,shapes", [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->i", [(3, 4)])])
def test_einsum_dtypes(dtype, equation, shapes, tmp_path):
    inputs = {f"x{i}": (rand(*s, seed=i + 1) * 10).astype(dtype) for i, s in enumerate(shapes)}
    check_op("Einsum", inputs, {"equation": equation}, opset=12, tmp_path=tmp_path)


def test_einsum_constant_operand(tmp_path):
    check_op("Einsum", {"x": rand(2, 3, 8)}, {"equation": "bsh,hd->bsd"}, consts={"w": rand(8, 4, seed=5)},
             tmp_path=tmp_path)


def test_einsum_multiblock(tmp_path):
    check_op("Einsum", {"q": rand(4, 8, 128, 64, seed=1), "k": rand(4, 8, 128, 64, seed=2)},
             {"equation": "bhqd,bhkd->bhqk"}, tmp_path=tmp_path)


def test_einsum_three_operands_rejected(tmp_path):
    from om2gen.errors import UnsupportedOpError
    with pytest.raises(UnsupportedOpError, match="one or two operands"):
        check_op("Einsum", {"a": rand(2, 3), "b": rand(3, 4), "c": rand(4, 5)}, {"equation": "ij,jk,kl->il"},
                 tmp_path=tmp_path)


@pytest.mark.parametrize("sa,sb", [((2, 1, 4, 5), (3, 5, 6)), ((4, 5), (2, 3, 5, 6))])
def test_einsum_ellipsis_of_different_ranks(sa, sb, tmp_path):
    """onnx's shape inference and ONNX Runtime both reject ellipses covering different ranks (numpy
    right-aligns and broadcasts them, as the spec describes), so numpy is the reference here."""
    a, b = rand(*sa, seed=1), rand(*sb, seed=2)
    out = np.einsum("...ij,...jk->...ik", a, b).shape
    graph = helper.make_graph(
        [helper.make_node("Einsum", ["a", "b"], ["y"], equation="...ij,...jk->...ik")], "einsum",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, sa),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, sb)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    model.ir_version = 8
    om2gen.compile(model, tmp_path / "model.om2")
    with om2gen.load(tmp_path / "model.om2") as m:
        got = m.run({"a": a, "b": b})["y"]
    assert_close(got, np.einsum("...ij,...jk->...ik", a, b), "y")
