"""LogSoftmax, Hardmax, LpNormalization, Layer/Instance/Group normalization and MVN against ONNX Runtime."""
import numpy as np
import onnx
import pytest
from helpers import check_model, check_op, make_model, rand
from onnx import TensorProto, helper, numpy_helper

import om2gen

COVERS = {"LogSoftmax", "Hardmax", "LpNormalization", "LayerNormalization", "InstanceNormalization",
          "GroupNormalization", "MeanVarianceNormalization"}


@pytest.mark.parametrize("op", ["LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
def test_softmax_family(op, opset, axis, tmp_path):
    check_op(op, {"x": rand(2, 3, 5, low=-5, high=5)}, {"axis": axis}, opset=opset, tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_family_default_axis(op, opset, tmp_path):
    check_op(op, {"x": rand(2, 3, 4, seed=2)}, opset=opset, tmp_path=tmp_path)


@pytest.mark.parametrize("shape,axis", [((4, 3000), -1), ((3000, 40), 0), ((2, 700, 300), 1)],
                         ids=["long_rows", "wide_inner", "middle"])
def test_log_softmax_large(shape, axis, tmp_path):
    check_op("LogSoftmax", {"x": rand(*shape, seed=3, low=-100, high=100)}, {"axis": axis}, opset=13,
             tmp_path=tmp_path)


def test_hardmax_ties_pick_first(tmp_path):
    x = np.round(rand(6, 9, seed=4) * 2).astype(np.float32)
    check_op("Hardmax", {"x": x}, {"axis": 1}, opset=13, tmp_path=tmp_path)
    (tmp_path / "a0").mkdir()
    check_op("Hardmax", {"x": x}, {"axis": 0}, opset=13, tmp_path=tmp_path / "a0")


def test_log_softmax_float64(tmp_path):
    check_op("LogSoftmax", {"x": rand(3, 7, seed=5, dtype=np.float64)}, opset=13, tmp_path=tmp_path)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_lp_normalization(p, axis, tmp_path):
    x = rand(3, 4, 5, seed=6)
    x[1, 2] = 0.0   # a zero vector along the last axis
    check_op("LpNormalization", {"x": x}, {"p": p, "axis": axis}, tmp_path=tmp_path)


LAYER_CASES = {
    "last": ((2, 3, 8), -1),
    "two_dims": ((2, 3, 8), 1),
    "all": ((2, 3, 8), 0),
    "long_rows": ((4, 4099), -1),
    "many_rows": ((512, 64), 1),
}


@pytest.mark.parametrize("case", sorted(LAYER_CASES))
@pytest.mark.parametrize("bias", [True, False])
def test_layer_normalization(case, bias, tmp_path):
    shape, axis = LAYER_CASES[case]
    norm = shape[axis:]
    consts = {"scale": rand(*norm, seed=7), **({"b": rand(*norm, seed=8)} if bias else {})}
    check_op("LayerNormalization", {"x": rand(*shape, seed=9, low=-2, high=4)}, {"axis": axis, "epsilon": 1e-3},
             consts=consts, tmp_path=tmp_path)


def test_layer_normalization_runtime_scale_and_stats(tmp_path):
    x, scale, b = rand(3, 4, 6, seed=10), rand(6, seed=11), rand(6, seed=12)
    node = helper.make_node("LayerNormalization", ["x", "scale", "b"], ["y", "mean", "invstd"], axis=-1)
    model = make_model([node], {"x": x, "scale": scale, "b": b}, ["y", "mean", "invstd"])
    check_model(model, {"x": x, "scale": scale, "b": b}, tmp_path)


def test_layer_normalization_only_invstd(tmp_path):
    x = rand(3, 4, 6, seed=13)
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y", "", "invstd"], axis=1)
    model = make_model([node], {"x": x}, ["y", "invstd"], {"scale": rand(4, 6, seed=14)})
    check_model(model, {"x": x}, tmp_path)


def test_layer_normalization_broadcast_scale(tmp_path):
    # a scale that broadcasts over part of the normalized dims (constant: expanded at compile time)
    check_op("LayerNormalization", {"x": rand(2, 3, 4, 5, seed=15)}, {"axis": 1},
             consts={"scale": rand(3, 1, 5, seed=16), "b": np.array([0.5], np.float32)}, tmp_path=tmp_path)


def test_layer_normalization_large_mean(tmp_path):
    # an offset far larger than the spread: the two-pass variance keeps the precision
    check_op("LayerNormalization", {"x": rand(8, 1000, seed=17, low=999.0, high=1001.0)},
             consts={"scale": rand(1000, seed=18)}, tmp_path=tmp_path)


@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (1, 4, 7), (3, 2, 2, 3, 4), (2, 5, 1)])
def test_instance_normalization(shape, tmp_path):
    c = shape[1]
    check_op("InstanceNormalization", {"x": rand(*shape, seed=19, low=-3, high=5)}, {"epsilon": 1e-4},
             consts={"s": rand(c, seed=20), "b": rand(c, seed=21)}, tmp_path=tmp_path)


def test_instance_normalization_runtime_scale(tmp_path):
    x, s, b = rand(2, 3, 10, seed=22), rand(3, seed=23), rand(3, seed=24)
    check_op("InstanceNormalization", {"x": x, "s": s, "b": b}, tmp_path=tmp_path)


def typed_model(op, x, attrs, consts, opset):
    """A one-node float model with the output typed by hand: onnx's shape inference leaves the
    outputs of function ops (GroupNormalization, MeanVarianceNormalization) untyped."""
    node = helper.make_node(op, ["x", *consts], ["y"], **attrs)
    graph = helper.make_graph([node], "test", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 4), 3), ((1, 8, 9), 2), ((3, 4, 2, 2), 4), ((2, 4, 3), 1)])
def test_group_normalization(shape, groups, tmp_path):
    x = rand(*shape, seed=25, low=-2, high=3)
    model = typed_model("GroupNormalization", x, {"num_groups": groups, "epsilon": 1e-4},
                        {"s": rand(shape[1], seed=26), "b": rand(shape[1], seed=27)}, 21)
    check_model(model, {"x": x}, tmp_path)


def test_group_normalization_opset18_per_group_affine():
    # onnx's checker rejects GroupNormalization-18 models (deprecated), and so does om2gen's frontend;
    # the op still lowers with the opset-18 meaning: one scale/bias per group.
    from om2gen.ir import dtypes
    from om2gen.ir.graph import Node, Value
    from om2gen.ops import registry
    node = Node("gn", "GroupNormalization", ["x", "s", "b"], ["y"], {"num_groups": 3}, opset=18)
    op = registry.lookup(node)
    assert op.since == 18
    x = Value("x", dtypes.FLOAT32, (2, 6, 5))
    per_group = [Value(n, dtypes.FLOAT32, (3,)) for n in ("s", "b")]
    y = op.infer(node, [x, *per_group])[0]
    y.name = "y"
    params = op.lower(node, [x, *per_group], [y], None).params
    assert (params["row_mod"], params["row_mul"], params["nseg"], params["seg"], params["seg_mul"]) == (3, 1, 2, 5, 0)
    with pytest.raises(om2gen.ShapeError):
        op.infer(node, [x] + [Value(n, dtypes.FLOAT32, (6,)) for n in ("s", "b")])


@pytest.mark.parametrize("axes", [None, [0, 2, 3], [1], [2, 3], [0, 1, 2, 3], [0, 1]],
                         ids=["default", "nhw", "c", "hw", "all", "nc"])
@pytest.mark.parametrize("opset", [9, 13])
def test_mean_variance_normalization(axes, opset, tmp_path):
    x = rand(2, 3, 4, 5, seed=28, low=-1, high=3)
    model = typed_model("MeanVarianceNormalization", x, {} if axes is None else {"axes": axes}, {}, opset)
    check_model(model, {"x": x}, tmp_path)
