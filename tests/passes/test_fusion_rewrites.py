"""The pattern rewrites before element-wise fusion: BatchNormalization folding, MatMul + Add as
Gemm, layer normalization in primitives as LayerNormalization."""
import numpy as np
import pytest
from fusion_check import check_fusion
from helpers import make_model, rand
from onnx import helper

F32 = np.float32


def bn_consts(c, seed=10, prefix="bn"):
    rng = np.random.default_rng(seed)
    return {f"{prefix}_scale": rng.uniform(0.5, 2, c).astype(F32), f"{prefix}_bias": rng.uniform(-1, 1, c).astype(F32),
            f"{prefix}_mean": rng.uniform(-1, 1, c).astype(F32), f"{prefix}_var": rng.uniform(0.2, 3, c).astype(F32)}


def bn(x, y, prefix="bn", name=None):
    return helper.make_node("BatchNormalization", [x] + [f"{prefix}_{k}" for k in ("scale", "bias", "mean", "var")],
                            [y], name=name or f"{prefix}_node", epsilon=1e-3)


@pytest.mark.parametrize("group,bias", [(1, True), (1, False), (2, True), (4, False)])
def test_conv_batchnorm_folds(group, bias, tmp_path):
    x = rand(1, 4, 9, 9, seed=1)
    consts = {"w": rand(8, 4 // group, 3, 3, seed=2), **bn_consts(8)}
    ins = ["x", "w"] + (["b"] if bias else [])
    if bias:
        consts["b"] = rand(8, seed=3)
    nodes = [helper.make_node("Conv", ins, ["c"], name="conv", group=group, pads=[1, 1, 1, 1]),
             bn("c", "n"), helper.make_node("Relu", ["n"], ["y"], name="relu")]
    model = make_model(nodes, {"x": x}, ["y"], consts)
    fused, plain = check_fusion(model, {"x": x}, tmp_path, exact=False)
    assert plain.op_types() == ["Conv", "BatchNormalization", "Relu"]
    assert fused.op_types() == ["FusedConv"]     # the Relu goes into the Conv's store too (passes/conv_act.py)
    assert fused.fused_from("FusedConv") == [["conv", "bn_node", "relu"]]


def test_conv_transpose_batchnorm_folds(tmp_path):
    x = rand(1, 4, 5, 5, seed=1)
    consts = {"w": rand(4, 3, 3, 3, seed=2), "b": rand(6, seed=3), **bn_consts(6)}
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["c"], group=2, strides=[2, 2]), bn("c", "y")]
    model = make_model(nodes, {"x": x}, ["y"], consts)
    fused, _ = check_fusion(model, {"x": x}, tmp_path, exact=False)
    assert fused.op_types() == ["ConvTranspose"]


@pytest.mark.parametrize("trans_b,c", [(0, None), (1, "vec"), (0, "mat")])
def test_gemm_and_matmul_batchnorm_fold(trans_b, c, tmp_path):
    a = rand(5, 6, seed=1)
    consts = {"w": rand(*((7, 6) if trans_b else (6, 7)), seed=2), **bn_consts(7)}
    ins = ["a", "w"]
    if c:
        consts["c"] = rand(7, seed=3) if c == "vec" else rand(5, 7, seed=3)
        ins.append("c")
    nodes = [helper.make_node("Gemm", ins, ["g"], transB=trans_b, alpha=0.5, beta=2.0), bn("g", "y")]
    model = make_model(nodes, {"a": a}, ["y"], consts)
    fused, _ = check_fusion(model, {"a": a}, tmp_path / "gemm", exact=False)
    assert fused.op_types() == ["Gemm"]
    nodes = [helper.make_node("MatMul", ["a", "w2"], ["g"]), bn("g", "y")]
    model = make_model(nodes, {"a": a}, ["y"], {"w2": rand(6, 7, seed=2), **bn_consts(7)})
    fused, _ = check_fusion(model, {"a": a}, tmp_path / "matmul", exact=False)
    assert fused.op_types() == ["Gemm"]


def test_batchnorm_does_not_fold_into_shared_or_output_producers(tmp_path):
    """A Conv whose output is also a graph output keeps its BatchNormalization (fused with the
    Relu after it instead); weights shared by two Convs are not changed for the other one."""
    x = rand(1, 3, 6, 6, seed=1)
    consts = {"w": rand(3, 3, 1, 1, seed=2), **bn_consts(3), **bn_consts(3, seed=11, prefix="bn2")}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c1"], name="conv1"),
             bn("c1", "n1"), helper.make_node("Relu", ["n1"], ["y1"]),
             helper.make_node("Conv", ["x", "w"], ["c2"], name="conv2"), bn("c2", "y2", prefix="bn2")]
    model = make_model(nodes, {"x": x}, ["c1", "y1", "y2"], consts)
    fused, _ = check_fusion(model, {"x": x}, tmp_path, exact=False)
    assert fused.op_types() == ["Conv", "FusedElementwise", "Conv"]


@pytest.mark.parametrize("addend", ["bias", "bias_first", "bias_3d", "residual", "residual_2d"])
def test_matmul_add_becomes_gemm(addend, tmp_path):
    rank3 = addend not in ("residual_2d",)
    a = rand(2, 5, 6, seed=1) if rank3 else rand(5, 6, seed=1)
    feeds = {"a": a}
    consts = {"w": rand(6, 7, seed=2)}
    if addend.startswith("bias"):
        consts["c"] = rand(1, 1, 7, seed=3) if addend == "bias_3d" else rand(7, seed=3)
    else:
        feeds["c"] = rand(*a.shape[:-1], 7, seed=3)
    ins = ["c", "m"] if addend == "bias_first" else ["m", "c"]
    nodes = [helper.make_node("MatMul", ["a", "w"], ["m"], name="mm"),
             helper.make_node("Add", ins, ["s"], name="add"), helper.make_node("Relu", ["s"], ["y"])]
    model = make_model(nodes, feeds, ["y"], consts)
    fused, plain = check_fusion(model, feeds, tmp_path, exact=False)
    assert plain.op_types() == ["MatMul", "Add", "Relu"]
    # the Relu goes into a 2-D Gemm's store (passes/gemm_act.py), not through the rank-3 product's view
    assert fused.op_types() == (["Gemm", "Relu"] if rank3 else ["FusedGemm"])
    assert fused.fused_from("Gemm" if rank3 else "FusedGemm")[0][:2] == ["mm", "add"]


def test_matmul_add_stays_when_the_product_is_read_elsewhere(tmp_path):
    a = rand(4, 6, seed=1)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["m"]), helper.make_node("Add", ["m", "c"], ["y"])]
    model = make_model(nodes, {"a": a}, ["y", "m"], {"w": rand(6, 3, seed=2), "c": rand(3, seed=3)})
    fused, _ = check_fusion(model, {"a": a}, tmp_path)
    assert fused.op_types() == ["MatMul", "Add"]


def layernorm_nodes(square="Pow", affine=2, two_subs=False):
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1], name="ln/mean"),
             helper.make_node("Sub", ["x", "m"], ["d"], name="ln/sub")]
    d2 = "d"
    if two_subs:
        nodes.append(helper.make_node("Sub", ["x", "m"], ["d2"], name="ln/sub2"))
        d2 = "d2"
    nodes.append(helper.make_node("Pow", [d2, "two"], ["sq"], name="ln/pow") if square == "Pow"
                 else helper.make_node("Mul", [d2, d2], ["sq"], name="ln/sq"))
    nodes += [helper.make_node("ReduceMean", ["sq"], ["v"], axes=[-1], name="ln/var"),
              helper.make_node("Add", ["v", "eps"], ["ve"], name="ln/add_eps"),
              helper.make_node("Sqrt", ["ve"], ["s"], name="ln/sqrt"),
              helper.make_node("Div", ["d", "s"], ["n" if affine else "y"], name="ln/div")]
    if affine >= 1:
        nodes.append(helper.make_node("Mul", ["gamma", "n"], ["g" if affine == 2 else "y"], name="ln/scale"))
    if affine == 2:
        nodes.append(helper.make_node("Add", ["g", "beta"], ["y"], name="ln/shift"))
    return nodes


@pytest.mark.parametrize("square,affine,two_subs", [("Pow", 2, False), ("Mul", 1, False), ("Pow", 0, True)])
def test_layernorm_pattern(square, affine, two_subs, tmp_path):
    x = rand(2, 7, 48, seed=1, low=-2, high=3)
    consts = {"two": np.array(2.0, F32), "eps": np.array(1e-5, F32), "gamma": rand(48, seed=2),
              "beta": rand(48, seed=3)}
    model = make_model(layernorm_nodes(square, affine, two_subs), {"x": x}, ["y"], consts, opset=13)
    fused, _ = check_fusion(model, {"x": x}, tmp_path, exact=False)
    assert fused.op_types() == ["LayerNormalization"]


def test_layernorm_pattern_with_a_shared_intermediate_is_left(tmp_path):
    x = rand(2, 16, seed=1)
    consts = {"two": np.array(2.0, F32), "eps": np.array(1e-5, F32), "gamma": rand(16, seed=2),
              "beta": rand(16, seed=3)}
    model = make_model(layernorm_nodes(), {"x": x}, ["y", "v"], consts, opset=13)
    fused, _ = check_fusion(model, {"x": x}, tmp_path)
    assert "LayerNormalization" not in fused.op_types()
