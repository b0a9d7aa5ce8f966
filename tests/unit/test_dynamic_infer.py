"""Dynamic models in the frontend (issue 15): -1 dims and ranges lo~hi without a gear option
become symbols, every node's shapes are inferred as expressions of them, torch.onnx's shape
sub-graphs are computed on expressions, and what cannot take dynamic shapes is refused naming
every such node."""
import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from tests.helpers import without_dynamic_support

import om2gen
from om2gen.cli import parsing
from om2gen.errors import ShapeError, UnsupportedOpError
from om2gen.frontend import pins
from om2gen.frontend.onnx_import import import_onnx
from om2gen.ir import symbolic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import gear_models  # noqa: E402


def _shapes(graph):
    return {n: tuple(symbolic.text(d) for d in v.shape) for n, v in graph.values.items() if not v.is_const}


def test_ranges_and_minus_one_parse_in_both_spellings():
    assert pins.shapes({"x": ("1~16", 3, -1, "-1")})["x"] == (pins.DimRange(1, 16), 3, -1, -1)
    assert pins.shapes({"x": ["8~"]})["x"] == (pins.DimRange(8, None),)
    assert pins.shapes({"x": ["4~4", 2]})["x"] == (4, 2)          # a range of one value is that value
    assert parsing.shape_arg("x:1~16,3,-1,-1") == [("x", (pins.DimRange(1, 16), 3, -1, -1))]
    for bad in ({"x": ("16~1",)}, {"x": ("a~b",)}, {"x": ("-3~4",)}):
        with pytest.raises(ShapeError, match="range|dims"):
            pins.shapes(bad)


def test_a_multiple_of_m_is_lo_hi_percent_m_and_m_times_a_symbol():
    assert pins.shapes({"x": (1, 3, "32~960%32", "64~%64")})["x"] == \
        (1, 3, pins.DimRange(32, 960, 32), pins.DimRange(64, None, 64))
    assert parsing.shape_arg("x:1,3,32~960%32,32~960%32")[0][1][2] == pins.DimRange(32, 960, 32)
    assert str(pins.DimRange(32, 960, 32)) == "32~960%32" and pins.parse_dim("64~64%32") == 64
    for bad, match in (("33~960%32", r"multiples of 32 \(64~960%32\?\)"), ("64%32", "follows a range"),
                       ("32~64%0", "1 or more"), ("32~64%x", "not a number")):
        with pytest.raises(ShapeError, match=match):
            pins.shapes({"x": (bad,)})
    with pytest.raises(argparse.ArgumentTypeError, match="follows a range"):
        parsing.shape_arg("x:1,3,64%32,64")
    g = import_onnx(gear_models.cnn_image(), {"x": (1, 3, "32~96%32", "8~96")})
    h, w = g.values[g.inputs[0]].shape[2:]
    assert (symbolic.text(h), symbolic.text(w)) == ("32*H_div32", "W")
    assert (h // 32 * 2 == h // 16) and symbolic.bounds(h) == (32, 96)   # what the multiple decides


def test_a_cnn_with_dynamic_batch_and_one_with_dynamic_image_size():
    g = import_onnx(gear_models.cnn_batch(), {"x": ("1~16", 3, 16, 16)})
    s = _shapes(g)
    assert s["x"] == ("N", "3", "16", "16") and s["c2"] == ("N", "8", "8", "8") and s["y"] == ("N", "10")
    g = import_onnx(gear_models.cnn_image(), {"x": (1, 3, "16~512", "2~")})
    s = _shapes(g)
    assert s["c"] == ("1", "8", "H", "W") and s["y"] == ("1", "8", "H // 2", "W // 2") and s["z"] == ("1", "8")
    h = next(iter(symbolic.symbols(g.values["x"].shape[2])))
    w = next(iter(symbolic.symbols(g.values["x"].shape[3])))
    assert (h.lo, h.hi, w.lo, w.hi) == (16, 512, 2, None)
    with pytest.raises(UnsupportedOpError, match=r"pool \(MaxPool\): it asks 'W // 2 <= 0'"):
        import_onnx(gear_models.cnn_image(), {"x": (1, 3, "16~512", -1)})    # W = 1 pools to nothing


def test_torch_style_shape_subgraphs_are_computed_on_expressions():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, and Range over the sequence length:
    the Reshape targets are [1, S, 2, 8] and [1, S, 16], and no shape node is left."""
    g = import_onnx(gear_models.encoder(), {"input_ids": (1, "1~64")})
    s = _shapes(g)
    assert s["positions"] == ("S",) and s["q1"] == ("1", "S", "2", "8") and s["kh"] == ("1", "2", "8", "S")
    assert s["scores"] == ("1", "2", "S", "S") and s["ctx"] == ("1", "S", "16") and s["h"] == ("1", "S", "16")
    assert [d for d in g.values["split_shape"].dims.tolist()] == [1, g.values["q1"].shape[1], 2, 8]
    assert not {n.op_type for n in g.nodes} & {"Shape", "Concat", "Unsqueeze"}


def test_inputs_that_name_one_dim_share_its_symbol():
    m = _model([helper.make_node("Add", ["a", "b"], ["y"])],
               {"a": ["B", "S"], "b": ["B", "S"]}, ["B", "S"])
    g = import_onnx(m, {"a": ("1~8", "1~128"), "b": ("1~8", "1~128")})
    assert g.values["a"].shape == g.values["b"].shape == g.values["y"].shape
    with pytest.raises(ShapeError, match="give them one range"):
        import_onnx(m, {"a": ("1~8", "1~128"), "b": ("1~4", "1~128")})
    with pytest.raises(ShapeError, match=r"the range 8~128 at b dim 1 but 8~128%8 at a dim 1"):
        import_onnx(m, {"a": ("1~8", "8~128%8"), "b": ("1~8", "8~128")})


def _model(nodes, inputs: dict, out_dims, out_type=TensorProto.FLOAT, inits=()):
    return helper.make_model(helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in inputs.items()],
        [helper.make_tensor_value_info("y", out_type, out_dims)], list(inits)),
        opset_imports=[helper.make_opsetid("", 17)])


def test_nodes_without_dynamic_support_are_all_named():
    """QLinearSigmoid has no dynamic support: both are named, the node behind them is not."""
    m = _model([], {"x": ["N", 8]}, ["N", 8])
    m.graph.node.extend(without_dynamic_support(m, "x", "v", "same") + without_dynamic_support(m, "x", "h", "swap")
                        + [helper.make_node("Add", ["v", "h"], ["y"], name="after")])
    with pytest.raises(UnsupportedOpError) as info:
        import_onnx(m, {"x": (-1, 8)})
    text = str(info.value)
    assert "same (QLinearSigmoid)" in text and "swap (QLinearSigmoid)" in text and "after" not in text
    assert "N >= 1" in text


def test_a_question_only_the_run_answers_is_named():
    """[N, 4] + [4, 4] broadcasts only where N is 1 or 4: om2gen does not guess."""
    b = onnx.numpy_helper.from_array(np.ones((4, 4), np.float32), "b")
    m = _model([helper.make_node("Add", ["x", "b"], ["y"], name="add")], {"x": ["N", 4]}, [4, 4], inits=[b])
    with pytest.raises(UnsupportedOpError, match=r"add \(Add\)"):
        import_onnx(m, {"x": ("1~8", 4)})
    assert _shapes(import_onnx(m, {"x": (4, 4)}))["y"] == ("4", "4")      # pinned: as before


def test_an_unbounded_dim_is_refused_for_om2_and_gears_refuse_ranges(tmp_path):
    """An .om2 plans memory for the largest sizes: -1 (no upper bound) is refused, naming it."""
    m = _model([helper.make_node("Relu", ["x"], ["y"])], {"x": ["N", 8]}, ["N", 8])
    with pytest.raises(ShapeError, match=r"no upper bound \(N can be any size\).*range lo~hi"):
        om2gen.compile(m, tmp_path / "d.om2", input_shapes={"x": (-1, 8)})
    with pytest.raises(ShapeError, match="a range is for a model"):
        om2gen.compile(m, tmp_path / "g.om2", input_shapes={"x": ("1~4", 8)}, dynamic_batch_size=[1, 2])
    assert not list(tmp_path.iterdir())
