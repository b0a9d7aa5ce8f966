"""Assumptions of a dynamic model's compile (ir/symbolic.py assuming / assume_equal): two dims
the ranges do not relate, taken equal where they meet in a broadcast, for guard_check.so to check
at run time (docs/dynamic-shapes.md, "Assumptions and guards"); what stays refused."""
import zipfile

import pytest
from onnx import TensorProto, helper

import om2gen
from om2gen.errors import UnsupportedOpError
from om2gen.formats.om2 import layout
from om2gen.ir import symbolic


def test_two_symbols_are_taken_equal_only_while_assuming():
    s, t = symbolic.sym("S", 1, 64), symbolic.sym("T", 1, 64)
    with pytest.raises(symbolic.Undecidable):
        s == t
    assert not symbolic.assume_equal(s, t, "add")      # no assuming() block: nothing is taken
    with symbolic.assuming() as made:
        assert symbolic.assume_equal(s, t, "add") and symbolic.assume_equal(t, s, "mul")
        assert s == t and t == s                          # (== answers for the pair taken)
        assert [(a.node, a.text()) for a in made] == [("add", "S == T")]   # once, by the first node
        with pytest.raises(symbolic.Undecidable):
            2 * s == 2 * t                                # only the pair itself
    with pytest.raises(symbolic.Undecidable):
        s == t


def test_what_is_not_two_symbols_of_overlapping_ranges_is_not_assumed():
    s, n = symbolic.sym("S", 1, 64), symbolic.sym("N", 1, 16)
    with symbolic.assuming() as made:
        assert not symbolic.assume_equal(s, s + 1, "a")           # an expression, not a symbol
        assert not symbolic.assume_equal(n, symbolic.sym("M", 20, 30), "b")   # disjoint ranges
        assert not symbolic.assume_equal(s, 4, "c")                # a number
        assert not made
    assert (n == symbolic.sym("M", 20, 30)) is False                # (decided: the ranges are apart)


def _model(a, b):
    return helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "m"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, a),
         helper.make_tensor_value_info("m", TensorProto.FLOAT, b)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, a)]), opset_imports=[helper.make_opsetid("", 17)])


def test_a_dim_against_a_number_is_still_refused(tmp_path):
    """[N, 8] + [4, 8]: N against 4 is no assumption om2gen makes (only N = 1 or 4 would run)."""
    with pytest.raises(UnsupportedOpError, match=r"add \(Add\): it asks"):
        om2gen.compile(_model(["N", 8], [4, 8]), tmp_path / "m.om2", input_shapes={"x": ("1~8", 8)})


def test_a_static_compile_packs_no_kautofuse(tmp_path):
    """A static model makes no assumption and gets no om2gen autofuse library or guard."""
    om2gen.compile(_model([2, 5], [2, 5]), tmp_path / "s.om2")
    with zipfile.ZipFile(tmp_path / "s.om2") as z:
        assert layout.SO_STORE not in z.namelist()
        tables = [n for n in z.namelist() if n.endswith("_tables.cpp")]
        assert tables and b"GuardCheck" not in z.read(tables[0])
