"""Dynamic shapes through the ops of real models (issue 15): each op's infer() on a one-node (or
few-node) model whose input dims are symbols, the symbolic output shapes checked; where the
answer depends on the run, the node is refused with the question it asked."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from om2gen.errors import UnsupportedOpError
from om2gen.frontend.onnx_import import import_onnx
from om2gen.ir import symbolic

F, BOOL = TensorProto.FLOAT, TensorProto.BOOL


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

