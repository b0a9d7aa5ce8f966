"""Dynamic shapes through the ops of real models (issue 15): each op's infer() on a one-node (or
few-node) model whose input dims are symbols, the symbolic output shapes checked; where the
answer depends on the run, the node is refused with the question it asked. Then the real models
(samples/real_models/catalog.py) with their real dynamic dims: every node infers, and every
inferred shape, evaluated at a sample size, is the shape a static import at that size gives."""
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.helpers import without_dynamic_support

from om2gen.errors import UnsupportedOpError
from om2gen.frontend import dynamic_dims
from om2gen.frontend.onnx_import import import_onnx
from om2gen.ir import symbolic
from om2gen.passes import deconv_d2s, gemm_bias

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "samples" / "real_models"))
import catalog  # noqa: E402

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
INT64_MAX = np.iinfo(np.int64).max


def _model(nodes, inputs: dict, outputs, inits: dict | None = None, opset: int = 17):
    """inputs: {name: (elem type, dims)}; outputs: names (their type left to inference, and the
    shape: om2gen reads only an output's declared type)."""
    graph = helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info(n, t, d) for n, (t, d) in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, []) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _infer(model, shapes, values=None) -> dict:
    """{value: dims as text} of every computed value, after importing with `shapes`."""
    g = import_onnx(model, shapes, values)
    return {n: tuple(symbolic.text(d) for d in v.shape) for n, v in g.values.items() if not v.is_const}


def _one(op, ins, inputs, shapes, inits=None, opset=17, outputs=("y",), **attrs):
    return _infer(_model([helper.make_node(op, ins, list(outputs), name="n", **attrs)], inputs, list(outputs),
                         inits, opset), shapes)


def _refused(model, shapes) -> str:
    with pytest.raises(UnsupportedOpError) as info:
        import_onnx(model, shapes)
    return str(info.value)


X4 = {"x": (F, ["N", 3, "H", "W"])}
S4 = {"x": ("1~8", 3, "8~64", "8~64")}


# --- element-wise: the shape of the input, or the broadcast of the inputs -------------------------

@pytest.mark.parametrize("op,attrs,opset", [
    ("Sqrt", {}, 17), ("Erf", {}, 17), ("Exp", {}, 17), ("Neg", {}, 17), ("Reciprocal", {}, 17),
    ("HardSigmoid", {"alpha": 0.2}, 17), ("HardSwish", {}, 17), ("LeakyRelu", {"alpha": 0.1}, 17),
    ("Elu", {}, 17), ("Softplus", {}, 17), ("Mish", {}, 18), ("Gelu", {"approximate": "tanh"}, 20),
    ("Clip", {"min": 0.0, "max": 6.0}, 6), ("Shrink", {}, 17), ("IsNaN", {}, 17), ("Softmax", {}, 17),
    ("LogSoftmax", {"axis": 1}, 17), ("LpNormalization", {"axis": 1}, 17), ("CumSum", {}, 17),
    ("MeanVarianceNormalization", {}, 17)])
def test_unary_ops_keep_the_dynamic_shape(op, attrs, opset):
    ins = ["x", "axis"] if op == "CumSum" else ["x"]
    inits = {"axis": np.array(3, np.int64)} if op == "CumSum" else None
    out = _one(op, ins, X4, S4, inits=inits, opset=opset, **attrs)
    assert out["y"] == ("N", "3", "H", "W")


def test_binary_and_variadic_ops_broadcast_dynamic_dims():
    inputs = {"x": (F, ["N", 1, "S"]), "b": (F, ["N", 4, 1])}
    shapes = {"x": ("1~8", 1, "1~64"), "b": ("1~8", 4, 1)}
    for op in ("Pow", "Mod", "Max", "Sum", "Min", "Mean"):
        attrs = {"fmod": 1} if op == "Mod" else {}
        assert _one(op, ["x", "b"], inputs, shapes, **attrs)["y"] == ("N", "4", "S"), op
    for op in ("Equal", "Less", "Greater", "LessOrEqual"):
        assert _one(op, ["x", "b"], inputs, shapes)["y"] == ("N", "4", "S"), op
    m = _model([helper.make_node("Pow", ["x", "e"], ["y"])], {"x": (F, ["N", "S"])}, ["y"],
               {"e": np.float32(2.0)})
    assert _infer(m, {"x": (-1, "2~")})["y"] == ("N", "S")


def test_logic_where_cast_and_prelu():
    inputs = {"c": (BOOL, ["N", 1, "S"]), "x": (F, ["N", 4, 1]), "z": (F, [1])}
    shapes = {"c": ("1~8", 1, "1~64"), "x": ("1~8", 4, 1), "z": (1,)}
    assert _one("Where", ["c", "x", "z"], inputs, shapes)["y"] == ("N", "4", "S")
    assert _one("Not", ["c"], inputs, shapes)["y"] == ("N", "1", "S")
    assert _one("Xor", ["c", "c"], inputs, shapes)["y"] == ("N", "1", "S")
    assert _one("Cast", ["c"], inputs, shapes, to=F)["y"] == ("N", "1", "S")
    assert _one("CastLike", ["c", "x"], inputs, shapes)["y"] == ("N", "1", "S")
    assert _one("PRelu", ["x", "slope"], inputs, shapes, inits={"slope": np.ones((4, 1), np.float32)})["y"] == \
        ("N", "4", "1")


def test_a_broadcast_only_the_run_decides_is_refused():
    """[N] against [4]: only N = 1 or N = 4 broadcast, so Where names itself and the question."""
    m = _model([helper.make_node("Where", ["c", "x", "z"], ["y"], name="pick")],
               {"c": (BOOL, ["N"]), "x": (F, [4]), "z": (F, [4])}, ["y"])
    assert "pick (Where): it asks 'N == 4'" in _refused(m, {"c": ("1~8",), "x": (4,), "z": (4,)})


# --- normalisation, pools, convolutions ---------------------------------------------------------

def test_batch_instance_and_group_normalization():
    c3 = {k: np.ones(3, np.float32) for k in ("s", "b", "m", "v")}
    assert _one("BatchNormalization", ["x", "s", "b", "m", "v"], X4, S4, inits=c3)["y"] == ("N", "3", "H", "W")
    assert _one("InstanceNormalization", ["x", "s", "b"], X4, S4, inits=c3)["y"] == ("N", "3", "H", "W")
    g = {"s": np.ones(3, np.float32), "b": np.zeros(3, np.float32)}
    assert _one("GroupNormalization", ["x", "s", "b"], X4, S4, inits=g, opset=21, num_groups=3)["y"] == \
        ("N", "3", "H", "W")


def test_pools_floor_and_ceil_mode():
    assert _one("AveragePool", ["x"], X4, S4, kernel_shape=[3, 2], strides=[3, 2])["y"] == \
        ("N", "3", "H // 3", "W // 2")                  # (H - 3) // 3 + 1
    # ceil_mode: ceil((H - 2) / 2) + 1 windows, none starting past the input: ceil(H / 2)
    assert _one("AveragePool", ["x"], X4, S4, kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)["y"] == \
        ("N", "3", "(H - 1) // 2 + 1", "(W - 1) // 2 + 1")
    assert _one("MaxPool", ["x"], X4, S4, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)["y"] \
        == ("N", "3", "H // 2 + 1", "W // 2 + 1")
    assert _one("MaxPool", ["x"], X4, S4, kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")["y"] == \
        ("N", "3", "(H + 1) // 2", "(W + 1) // 2")
    assert _one("LpPool", ["x"], X4, S4, kernel_shape=[2, 2])["y"] == ("N", "3", "H - 1", "W - 1")
    assert _one("GlobalMaxPool", ["x"], X4, S4)["y"] == ("N", "3", "1", "1")


def test_a_pool_may_be_empty_for_small_sizes():
    """A 3-wide window over W >= 1: W = 1 or 2 gives no output, which only the run knows."""
    m = _model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], name="pool")], X4, ["y"])
    assert "pool (MaxPool): it asks 'W - 2 <= 0'" in _refused(m, {"x": (1, 3, 8, -1)})


def test_conv_same_padding_and_conv_transpose():
    w = {"w": np.ones((4, 3, 3, 3), np.float32)}
    assert _one("Conv", ["x", "w"], X4, S4, inits=w, strides=[2, 2], auto_pad="SAME_UPPER")["y"] == \
        ("N", "4", "(H + 1) // 2", "(W + 1) // 2")
    wt = {"w": np.ones((3, 5, 2, 2), np.float32)}
    assert _one("ConvTranspose", ["x", "w"], X4, S4, inits=wt, strides=[2, 2])["y"] == ("N", "5", "2*H", "2*W")
    wt = {"w": np.ones((3, 5, 4, 4), np.float32)}
    assert _one("ConvTranspose", ["x", "w"], X4, S4, inits=wt, strides=[2, 2], pads=[1, 1, 1, 1],
                output_padding=[1, 0])["y"] == ("N", "5", "2*H + 1", "2*W")
    assert _one("ConvTranspose", ["x", "w"], X4, S4, inits=wt, strides=[2, 2], auto_pad="SAME_UPPER")["y"] == \
        ("N", "5", "2*H", "2*W")


# --- movement: Slice, Split, Pad, Expand, Tile, DepthToSpace -------------------------------------

def _slice(shapes, starts, ends, axes, steps=None, dims=("N", "S", 8)):
    inits = {"st": np.array(starts, np.int64), "en": np.array(ends, np.int64), "ax": np.array(axes, np.int64)}
    ins = ["x", "st", "en", "ax"]
    if steps is not None:
        inits["sp"] = np.array(steps, np.int64)
        ins.append("sp")
    return _one("Slice", ins, {"x": (F, list(dims))}, {"x": shapes}, inits=inits)["y"]


def test_slice_clamps_symbolically():
    s = ("1~8", "1~64", 8)
    assert _slice(s, [1], [INT64_MAX], [1]) == ("N", "S - 1", "8")
    assert _slice(s, [0], [INT64_MAX], [1], [2]) == ("N", "(S + 1) // 2", "8")
    assert _slice(s, [-1], [-INT64_MAX], [1], [-1]) == ("N", "S", "8")      # x[:, ::-1]: silero's reflection
    assert _slice(("1~8", "2~64", 8), [-2], [INT64_MAX], [1]) == ("N", "2", "8")
    # S may be 1: the last two are min(S, 2), here as S less the start max(0, S - 2)
    assert _slice(s, [-2], [INT64_MAX], [1]) == ("N", "max(0, -max(0, S - 2) + S)", "8")
    assert _slice(s, [0, 2], [3, 5], [0, 2]) == ("min(3, N)", "S", "3")
    # an unbounded dim: an INT64_MAX end still means the end (not min(S, INT64_MAX))
    assert _slice((-1, -1, 8), [1], [INT64_MAX], [1]) == ("N", "S - 1", "8")


def test_slice_ends_computed_from_the_input_shapes():
    """torch's position_ids[:, :input_ids.size(1)]: the end is S, through Shape and Gather; a
    table of 128 positions gives S where S <= 128, and min(128, S) where it may be longer."""
    nodes = [helper.make_node("Shape", ["ids"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["len"], axis=0),
             helper.make_node("Unsqueeze", ["len", "zero"], ["end"]),
             helper.make_node("Slice", ["table", "zero", "end", "axis"], ["y"])]
    inits = {"one": np.array(1, np.int64), "zero": np.array([0], np.int64), "axis": np.array([1], np.int64),
             "table": np.ones((1, 128, 16), np.float32)}
    m = _model(nodes, {"ids": (I64, ["B", "S"])}, ["y"], inits)
    assert _infer(m, {"ids": ("1~8", "1~128")})["y"] == ("1", "S", "16")
    assert _infer(m, {"ids": ("1~8", "1~512")})["y"] == ("1", "min(128, S)", "16")


def test_split_and_its_run_time_question():
    inputs = {"x": (F, ["N", 6, "S"])}
    shapes = {"x": ("1~8", 6, "1~64")}
    out = _one("Split", ["x", "sizes"], inputs, shapes, inits={"sizes": np.array([2, 4], np.int64)},
               outputs=("a", "b"), axis=1)
    assert out["a"] == ("N", "2", "S") and out["b"] == ("N", "4", "S")
    out = _one("Split", ["x"], inputs, shapes, opset=18, outputs=("a", "b", "c"), axis=1, num_outputs=3)
    assert out["a"] == out["c"] == ("N", "2", "S")
    m = _model([helper.make_node("Split", ["x"], ["a", "b"], axis=2, name="halves")], inputs, ["a", "b"])
    assert "halves (Split)" in _refused(m, shapes)     # S splits in two equal parts only where it is even


def test_pad_with_constant_and_computed_pads():
    out = _one("Pad", ["x", "pads"], {"x": (F, ["N", 3, "L"])}, {"x": ("1~8", 3, "1~64")},
               inits={"pads": np.array([0, 0, 64, 0, 0, 64], np.int64)}, mode="reflect")
    assert out["y"] == ("N", "3", "L + 128")
    # pad L up to 64: the end pad 64 - L is computed from the shape, and the output is 64 long
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "two", "three"], ["len"]),
             helper.make_node("Sub", ["full", "len"], ["rest"]),
             helper.make_node("Concat", ["zeros", "rest"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads"], ["y"])]
    inits = {"two": np.array([2], np.int64), "three": np.array([3], np.int64), "full": np.array([64], np.int64),
             "zeros": np.zeros(5, np.int64)}
    m = _model(nodes, {"x": (F, ["N", 3, "L"])}, ["y"], inits)
    assert _infer(m, {"x": ("1~8", 3, "1~64")})["y"] == ("N", "3", "64")


def test_expand_tile_and_constant_of_shape_from_the_input_shapes():
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Expand", ["b", "shape"], ["e"]),
             helper.make_node("ConstantOfShape", ["shape"], ["z"]),
             helper.make_node("Tile", ["x", "reps"], ["t"]),
             helper.make_node("Slice", ["shape", "zero", "one"], ["n"]),
             helper.make_node("Concat", ["n", "ones"], ["reps2"], axis=0),
             helper.make_node("Tile", ["b", "reps2"], ["u"])]
    inits = {"b": np.ones((1, 1, 8), np.float32), "reps": np.array([1, 2, 3], np.int64),
             "zero": np.array([0], np.int64), "one": np.array([1], np.int64), "ones": np.ones(2, np.int64)}
    out = _infer(_model(nodes, {"x": (F, ["N", "S", 8])}, ["e", "z", "t", "u"], inits), {"x": ("1~8", "1~64", 8)})
    assert out["e"] == ("N", "S", "8") and out["z"] == ("N", "S", "8")
    assert out["t"] == ("N", "2*S", "24") and out["u"] == ("N", "1", "8")


def test_depth_to_space_and_space_to_depth():
    x = {"x": (F, ["N", 16, "H", "W"])}
    s = {"x": ("1~8", 16, "8~64", "8~64")}
    assert _one("DepthToSpace", ["x"], x, s, blocksize=2)["y"] == ("N", "4", "2*H", "2*W")
    m = _model([helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, name="s2d")], x, ["y"])
    assert "s2d (SpaceToDepth)" in _refused(m, s)         # H and W must be even


def test_resize_by_scales_and_by_sizes_from_the_input_shapes():
    roi = np.array([], np.float32)
    out = _one("Resize", ["x", "roi", "scales"], X4, S4, inits={"roi": roi, "scales": np.array([1, 1, 2, 2], np.float32)},
               mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    assert out["y"] == ("N", "3", "2*H", "2*W")
    out = _one("Resize", ["x", "roi", "scales"], X4, S4,
               inits={"roi": roi, "scales": np.array([1, 1, 0.5, 0.25], np.float32)}, mode="linear")
    assert out["y"] == ("N", "3", "H // 2", "W // 4")
    # F.interpolate(x, size=y.shape[2:]): the sizes are y's dims
    nodes = [helper.make_node("Shape", ["x"], ["xs"]), helper.make_node("Shape", ["y0"], ["ys"]),
             helper.make_node("Slice", ["xs", "zero", "two"], ["nc"]),
             helper.make_node("Slice", ["ys", "two", "four"], ["hw"]),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear")]
    inits = {"zero": np.array([0], np.int64), "two": np.array([2], np.int64), "four": np.array([4], np.int64)}
    m = _model(nodes, {**X4, "y0": (F, [1, 1, "H2", "W2"])}, ["y"], inits)
    assert _infer(m, {**S4, "y0": (1, 1, "8~128", "8~128")})["y"] == ("N", "3", "H2", "W2")


# --- recurrent, reductions, generators ---------------------------------------------------------

def test_lstm_and_gru_over_a_dynamic_sequence_and_batch():
    h = 4
    inputs = {"x": (F, ["T", "B", 3])}
    shapes = {"x": ("1~100", "1~8", 3)}
    w = {"w": np.ones((1, 4 * h, 3), np.float32), "r": np.ones((1, 4 * h, h), np.float32)}
    out = _one("LSTM", ["x", "w", "r"], inputs, shapes, inits=w, outputs=("y", "yh", "yc"), hidden_size=h)
    assert out["y"] == ("T", "1", "B", "4") and out["yh"] == out["yc"] == ("1", "B", "4")
    w = {"w": np.ones((2, 3 * h, 3), np.float32), "r": np.ones((2, 3 * h, h), np.float32)}
    out = _one("GRU", ["x", "w", "r"], inputs, shapes, inits=w, outputs=("y", "yh"), hidden_size=h,
               direction="bidirectional")
    assert out["y"] == ("T", "2", "B", "4") and out["yh"] == ("2", "B", "4")


def test_reductions_and_arg_reductions():
    x = {"x": (F, ["N", "S", 8])}
    s = {"x": ("1~8", "1~64", 8)}
    assert _one("ReduceMean", ["x"], x, s, axes=[-1])["y"] == ("N", "S", "1")
    assert _one("ReduceMean", ["x", "axes"], x, s, opset=18, inits={"axes": np.array([1], np.int64)},
                keepdims=0)["y"] == ("N", "8")
    assert _one("ReduceSum", ["x"], x, s, keepdims=0)["y"] == ()
    assert _one("ArgMax", ["x"], x, s, axis=1, keepdims=0)["y"] == ("N", "8")


def test_eye_like_and_trilu():
    x = {"x": (F, ["S", "S"])}
    assert _one("EyeLike", ["x"], x, {"x": ("1~64", "1~64")})["y"] == ("S", "S")
    assert _one("Trilu", ["x"], x, {"x": ("1~64", "1~64")})["y"] == ("S", "S")


def test_shape_and_size_of_computed_dims_are_constants():
    """torch's expand(): ConstantOfShape(Shape(shape)) -- Shape of a tensor known as dims is a
    constant, so the ones it makes fold, and Expand gets [N, S, 8] back through Where."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Shape", ["shape"], ["rank"]),
             helper.make_node("ConstantOfShape", ["rank"], ["ones"], value=numpy_helper.from_array(np.ones(1, np.int64))),
             helper.make_node("Mul", ["ones", "minus"], ["neg"]),
             helper.make_node("Equal", ["shape", "neg"], ["is_neg"]),
             helper.make_node("Where", ["is_neg", "ones", "shape"], ["target"]),
             helper.make_node("Size", ["shape"], ["count"]),
             helper.make_node("Expand", ["b", "target"], ["y"])]
    m = _model(nodes, {"x": (F, ["N", "S", 8])}, ["y", "count"],
               {"minus": np.array(-1, np.int64), "b": np.ones((1, 1, 8), np.float32)})
    g = import_onnx(m, {"x": ("1~8", "1~64", 8)})
    assert [symbolic.text(d) for d in g.values["y"].shape] == ["N", "S", "8"]
    assert g.values["count"].is_const and int(g.values["count"].const) == 3
    assert [n.op_type for n in g.nodes] == ["Expand"]


def test_a_branch_node_without_dynamic_support_is_named_not_the_if():
    """An If chosen at run time infers both branches; QLinearSigmoid in one has no dynamic
    support: it is named, and the If and what reads it are skipped, not blamed."""
    probe = onnx.ModelProto()
    then = helper.make_graph(without_dynamic_support(probe, "x", "tv", "swap"), "then", [],
                             [helper.make_tensor_value_info("tv", F, None)])
    other = helper.make_graph([helper.make_node("Slice", ["x", "s0", "s2", "s1"], ["ev"], name="head")], "else", [],
                              [helper.make_tensor_value_info("ev", F, None)],
                              [numpy_helper.from_array(np.array([v], np.int64), f"s{v}") for v in (0, 1, 2)])
    nodes = [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["picked"], then_branch=then, else_branch=other, name="branch"),
             helper.make_node("Relu", ["picked"], ["y"], name="after")]
    m = _model(nodes, {"x": (F, ["N", 8])}, ["y"], {"zero": np.array(0, np.float32)})
    m.opset_import.extend(probe.opset_import)
    m.graph.initializer.extend(probe.graph.initializer)
    text = _refused(m, {"x": ("1~8", 8)})
    assert "swap (QLinearSigmoid)" in text and "branch (If)" not in text and "after" not in text


# --- graph rewrites on a dynamic graph ----------------------------------------------------------

def test_matmul_add_becomes_a_gemm_over_dynamic_rows():
    """passes/gemm_bias.py: [N, S, 16] x [16, 8] + b views A as N*S rows; the views' shapes,
    dynamic, are values known as dims rather than constants."""
    m = _model([helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "b"], ["y"])],
               {"x": (F, ["N", "S", 16])}, ["y"], {"w": np.ones((16, 8), np.float32), "b": np.ones(8, np.float32)})
    g = import_onnx(m, {"x": ("1~8", "1~64", 16)})
    assert gemm_bias.run(g) == 1
    g.verify("gemm_bias")
    assert [n.op_type for n in g.nodes] == ["Reshape", "Gemm", "Reshape"]
    rows, gemm, back = g.nodes
    assert g.values[rows.inputs[1]].dims.tolist() == [g.values["x"].shape[0] * g.values["x"].shape[1], 16]
    assert [symbolic.text(d) for d in g.values[gemm.outputs[0]].shape] == ["N*S", "8"]
    assert [symbolic.text(d) for d in g.values["y"].shape] == ["N", "S", "8"]
    assert g.values[back.inputs[1]].dims is not None and not g.values[back.inputs[1]].is_const


def test_a_tiling_conv_transpose_becomes_conv_and_depth_to_space_at_dynamic_sizes():
    """passes/deconv_d2s.py on PP-OCR's 2x upsampling: its new values keep the dynamic dims."""
    m = _model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
               X4, ["y"], {"w": np.ones((3, 5, 2, 2), np.float32)})
    g = import_onnx(m, S4)
    assert deconv_d2s.run(g) == 1
    g.verify("deconv_d2s")
    conv, d2s = g.nodes
    assert (conv.op_type, d2s.op_type) == ("Conv", "DepthToSpace")
    assert [symbolic.text(d) for d in g.values[conv.outputs[0]].shape] == ["N", "20", "H", "W"]
    assert [symbolic.text(d) for d in g.values["y"].shape] == ["N", "5", "2*H", "2*W"]


# --- the real models ----------------------------------------------------------------------------

def _agrees_with_static(model_path, dynamic: dict, sample: dict, static_shapes: dict, values=None) -> dict:
    """Imports the model with `dynamic` shapes (every node must infer) and with `static_shapes`;
    every computed value's dynamic shape, at the symbol values `sample`, is its static shape.
    Returns {graph output: dims as text}."""
    g = import_onnx(str(model_path), dynamic, values)
    s = import_onnx(str(model_path), static_shapes, values)
    dynamic = 0
    for name, v in g.values.items():
        if v.is_const or name not in s.values:
            continue
        at = tuple(symbolic.evaluate(d, sample) for d in v.shape)
        assert at == s.values[name].shape, f"{name}: {v.shape} at {sample} is {at}, static {s.values[name].shape}"
        dynamic += not v.is_static
    assert dynamic > 10
    return {o: tuple(symbolic.text(d) for d in g.values[o].shape) for o in g.outputs}


def _path(name):
    return catalog.fetch(catalog.BY_NAME[name])


def _sym(text: str) -> str:
    return dynamic_dims.c_name(text)


@pytest.mark.slow
def test_ppocr_v4_rec_infers_at_any_width_and_batch():
    n, w = _sym("p2o.DynamicDimension.0"), _sym("p2o.DynamicDimension.1")
    out = _agrees_with_static(_path("ppocr_v4_rec"), {"x": ("1~8", 3, 48, "16~2048")}, {n: 2, w: 320},
                              {"x": (2, 3, 48, 320)})
    assert out == {"softmax_11.tmp_0": (n, f"(({w} - 1) // 2 // 2 - 1) // 2 + 1", "6625")}


@pytest.mark.slow
def test_ppocr_v4_det_infers_at_any_batch():
    n = _sym("p2o.DynamicDimension.0")
    out = _agrees_with_static(_path("ppocr_v4_det"), {"x": ("1~8", 3, 320, 320)}, {n: 3}, {"x": (3, 3, 320, 320)})
    assert out == {"sigmoid_0.tmp_0": (n, "1", "320", "320")}


@pytest.mark.slow
def test_ppocr_v4_det_needs_sizes_that_divide_by_32():
    """The FPN adds the 2x-upsampled 1/32 map to the 1/16 map; their sizes agree only where H
    (and W) divides by 32 (H = 33: 4 rows against 3, in ONNX Runtime too). A lo~hi range cannot
    say that, so the Add is refused with the question -- the only node refused. A multiple of 32
    (`32~2048%32`: the dim is 32 * k) says it, and every node infers."""
    text = _refused(onnx.load(str(_path("ppocr_v4_det"))), {"x": (1, 3, "32~2048", "32~2048")})
    assert "and 1 node(s) cannot take them: p2o.Add.248 (Add): it asks" in text
    h, w = _sym("p2o.DynamicDimension.1") + "_div32", _sym("p2o.DynamicDimension.2") + "_div32"
    out = _agrees_with_static(_path("ppocr_v4_det"), {"x": (1, 3, "32~2048%32", "32~2048%32")}, {h: 10, w: 7},
                              {"x": (1, 3, 320, 224)})
    assert out == {"sigmoid_0.tmp_0": ("1", "1", f"32*{h}", f"32*{w}")}


@pytest.mark.slow
def test_silero_vad_infers_over_the_chunk_lengths_of_one_frame():
    """Silero VAD v6 squeezes its encoder's time axis where it has one frame (an If on that
    length): 192~703 samples at 16 kHz, 96~351 at 8 kHz. Over a range reaching two frames the
    If is chosen at run time and its squeeze branch cannot take the longer sizes: named."""
    path = _path("silero_vad")
    out = _agrees_with_static(path, {"input": (1, "192~703"), "state": (2, 1, 128)}, {"input_1": 512},
                              {"input": (1, 512), "state": (2, 1, 128)}, {"sr": 16000})
    assert out == {"output": ("1", "1"), "stateN": ("2", "1", "128")}
    out = _agrees_with_static(path, {"input": (1, "96~351"), "state": (2, 1, 128)}, {"input_1": 256},
                              {"input": (1, 256), "state": (2, 1, 128)}, {"sr": 8000})
    assert out == {"output": ("1", "1"), "stateN": ("2", "1", "128")}
    with pytest.raises(UnsupportedOpError, match=r"decoder/Squeeze \(Squeeze\): it asks '\(input_1 - 192\) // 128 "
                                                 r"// 2 // 2 \+ 1 == 1'"):
        import_onnx(str(path), {"input": (1, "192~4096"), "state": (2, 1, 128)}, {"sr": 16000})


@pytest.mark.slow
def test_silero_vad_sequence_form_infers_at_any_sequence_length():
    out = _agrees_with_static(_path("silero_vad_lstm"), {"input": ("1~64", 576)}, {"sequence_length": 5},
                              {"input": (5, 576)})
    assert out == {"speech_probs": ("sequence_length",), "hn": ("1", "1", "128"), "cn": ("1", "1", "128")}


def test_bert_infers_at_any_batch_and_sequence():
    """bert_tiny (torch.onnx's dynamo export of nn.TransformerEncoder) infers with both of its
    named axes dynamic: the attention's views are Reshapes to expressions of batch and sequence."""
    shapes = {k: ("1~8", "1~128") for k in ("input_ids", "attention_mask", "token_type_ids")}
    static = {k: (3, 77) for k in shapes}
    out = _agrees_with_static(_path("bert_tiny"), shapes, {"batch": 3, "sequence": 77}, static)
    assert out == {"last_hidden_state": ("batch", "sequence", "128"), "pooler_output": ("batch", "128")}
