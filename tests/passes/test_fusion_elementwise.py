"""Element-wise fusion (om2gen/passes/fuse_elementwise.py): fewer tasks, the same bits as the
unfused kernels, the same results as ONNX Runtime."""
import numpy as np
import pytest
from fusion_check import check_fusion, compile_run
from helpers import make_model, rand
from onnx import TensorProto, helper

import om2gen

F32 = np.float32


def scalars(**values):
    return {k: np.array(v, F32) for k, v in values.items()}


def gelu_nodes(x="x", y="y"):
    return [
        helper.make_node("Div", [x, "sqrt2"], ["d"], name="gelu/div"),
        helper.make_node("Erf", ["d"], ["e"], name="gelu/erf"),
        helper.make_node("Add", ["e", "one"], ["a"], name="gelu/add"),
        helper.make_node("Mul", [x, "a"], ["m"], name="gelu/mul"),
        helper.make_node("Mul", ["m", "half"], [y], name="gelu/mul_half"),
    ]


def test_gelu_chain_is_one_task(tmp_path):
    x = rand(2, 16, 40, low=-3, high=3)
    model = make_model(gelu_nodes(), {"x": x}, ["y"], scalars(sqrt2=1.4142135, one=1.0, half=0.5))
    fused, plain = check_fusion(model, {"x": x}, tmp_path)
    assert plain.op_types() == ["Div", "Erf", "Add", "Mul", "Mul"]
    assert fused.op_types() == ["FusedElementwise"]
    # the fused node names every node it covers, its task every op type
    assert fused.fused_from("FusedElementwise") == [["gelu/div", "gelu/erf", "gelu/add", "gelu/mul", "gelu/mul_half"]]
    assert fused.tasks[0]["label"] == "k000_Fused_Div_Erf_Add_Mul_Mul" and fused.tasks[0]["attrs"] == ""
    assert fused.tasks[0]["op_name"] == "gelu/mul_half::fused5"


def test_broadcast_dag_with_intermediate_outputs(tmp_path):
    """Operands of four different broadcast shapes; an intermediate is a graph output too."""
    feeds = {"a": rand(2, 1, 4, 6, seed=1), "b": rand(3, 1, 1, seed=2), "c": rand(6, seed=3),
             "d": rand(2, 3, 4, 6, seed=4)}
    nodes = [
        helper.make_node("Add", ["a", "b"], ["ab"]),           # [2,3,4,6]
        helper.make_node("Mul", ["ab", "c"], ["abc"]),         # graph output
        helper.make_node("Sub", ["abc", "d"], ["t"]),
        helper.make_node("Max", ["t", "bias"], ["u"]),         # constant broadcast tensor
        helper.make_node("Tanh", ["u"], ["y"]),
    ]
    model = make_model(nodes, feeds, ["y", "abc"], {"bias": rand(4, 1, seed=5)})
    fused, plain = check_fusion(model, feeds, tmp_path)
    assert len(plain.tasks) == 5 and fused.op_types() == ["FusedElementwise"]


def test_intermediate_read_by_another_kernel_is_written_once(tmp_path):
    """s = a + b feeds Softmax and the chain after it; the chain also reads the Softmax, so s
    cannot join the chain's group (that would make a cycle): it is written by its own group."""
    feeds = {"a": rand(4, 10, seed=1), "b": rand(4, 10, seed=2)}
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("Relu", ["s"], ["r"]),
        helper.make_node("Softmax", ["r"], ["p"], axis=-1),
        helper.make_node("Mul", ["s", "p"], ["m"]),
        helper.make_node("Sigmoid", ["m"], ["y"]),
    ]
    model = make_model(nodes, feeds, ["y"])
    fused, plain = check_fusion(model, feeds, tmp_path)
    assert fused.op_types() == ["FusedElementwise", "Softmax", "FusedElementwise"]


def test_shared_intermediate_is_written_for_a_later_group(tmp_path):
    """x - mean feeds both the variance branch (through a ReduceMean) and the normalisation."""
    feeds = {"x": rand(3, 32, seed=1)}
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]),
        helper.make_node("Sub", ["x", "m"], ["d"]),
        helper.make_node("Mul", ["d", "d"], ["sq"]),
        helper.make_node("Exp", ["sq"], ["e"]),   # not a layer norm: the pass leaves it to fusion
        helper.make_node("ReduceMean", ["e"], ["v"], axes=[-1]),
        helper.make_node("Add", ["v", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["s"]),
        helper.make_node("Div", ["d", "s"], ["y"]),
    ]
    model = make_model(nodes, feeds, ["y"], scalars(eps=1e-5), opset=13)
    fused, plain = check_fusion(model, feeds, tmp_path)
    assert fused.op_types() == ["ReduceMean", "FusedElementwise", "ReduceMean", "FusedElementwise"]


def test_cheap_small_producer_is_recomputed_expensive_one_is_not(tmp_path):
    """[1,C,1,1] gates of a squeeze-excitation block: HardSigmoid joins the Mul (recomputed per
    element), Sigmoid (a transcendental) stays a kernel of its own."""
    feeds = {"x": rand(1, 8, 6, 6, seed=1), "g": rand(1, 8, 1, 1, seed=2, low=-4, high=4)}
    for gate, n_tasks in (("HardSigmoid", 1), ("Sigmoid", 2)):
        nodes = [helper.make_node(gate, ["g"], ["h"]), helper.make_node("Mul", ["x", "h"], ["y"])]
        model = make_model(nodes, feeds, ["y"])
        fused, _ = check_fusion(model, feeds, tmp_path / gate)
        assert len(fused.tasks) == n_tasks, (gate, fused.op_types())


@pytest.mark.parametrize("case", ["transpose", "slice", "expand", "gather", "reshape_transpose"])
def test_data_movement_is_read_in_place(case, tmp_path):
    x = rand(2, 3, 4, 5, seed=1)
    shape = lambda *d: np.array(d, np.int64)  # noqa: E731
    consts = {"k": rand(1, seed=2)}
    if case == "transpose":
        moves = [helper.make_node("Transpose", ["x"], ["v"], perm=[0, 3, 1, 2])]
    elif case == "slice":
        moves = [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["v"])]
        consts.update(st=shape(3, 1), en=shape(0, 5), ax=shape(2, 3), sp=shape(-1, 2))
    elif case == "expand":
        moves = [helper.make_node("Expand", ["x", "sh"], ["v"])]
        consts.update(sh=shape(3, 2, 3, 4, 5))
    elif case == "gather":
        moves = [helper.make_node("Gather", ["x", "idx"], ["v"], axis=1)]
        consts.update(idx=np.array(2, np.int64))
    else:
        moves = [helper.make_node("Reshape", ["x", "sh"], ["r"]),
                 helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0, 2]),
                 helper.make_node("Reshape", ["t", "sh2"], ["v"])]
        consts.update(sh=shape(6, 4, 5), sh2=shape(4, 2, 3, 5))
    nodes = moves + [helper.make_node("Mul", ["v", "k"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], consts)
    fused, plain = check_fusion(model, {"x": x}, tmp_path)
    assert fused.op_types() == ["FusedElementwise"], fused.op_types()
    assert len(plain.tasks) == 3
    (covered,) = fused.fused_from("FusedElementwise")
    # every node but an alias (a Reshape) is named as imported: op type and index
    assert {f"{n.op_type}_{i}" for i, n in enumerate(nodes) if n.op_type != "Reshape"} <= set(covered)


def test_movement_read_by_a_kernel_too_is_kept(tmp_path):
    x = rand(4, 6, seed=1)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Softmax", ["t"], ["p"], axis=-1),
             helper.make_node("Mul", ["t", "p"], ["m"]),
             helper.make_node("Abs", ["m"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"])
    fused, _ = check_fusion(model, {"x": x}, tmp_path)
    assert fused.op_types() == ["Transpose", "Softmax", "FusedElementwise"]


def test_attention_key_path_is_read_in_place(tmp_path):
    """BERT's key path: Gather of one head block, Reshape, Transpose, Reshape, Transpose again
    (K^T), scaled: the second Transpose permutes an already transposed view."""
    x = rand(3, 8, 1, 6, seed=1)
    shape = lambda *d: np.array(d, np.int64)  # noqa: E731
    nodes = [helper.make_node("Gather", ["x", "idx"], ["g"], axis=0),
             helper.make_node("Reshape", ["g", "s1"], ["r1"]),
             helper.make_node("Transpose", ["r1"], ["t1"], perm=[1, 0, 2]),
             helper.make_node("Reshape", ["t1", "s2"], ["r2"]),
             helper.make_node("Transpose", ["r2"], ["t2"], perm=[0, 1, 3, 2]),
             helper.make_node("Mul", ["t2", "scale"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], {"idx": np.array(1, np.int64), "s1": shape(8, 2, 3),
                                                "s2": shape(1, 2, 8, 3), "scale": np.array(0.5, F32)})
    fused, plain = check_fusion(model, {"x": x}, tmp_path)
    assert fused.op_types() == ["FusedElementwise"] and plain.op_types() == ["Gather", "Transpose", "Transpose", "Mul"]


@pytest.mark.parametrize("kind", ["int64", "float16", "bool"])
def test_other_dtypes(kind, tmp_path):
    if kind == "int64":
        feeds = {"a": np.arange(-12, 12, dtype=np.int64).reshape(2, 12), "b": np.arange(1, 13, dtype=np.int64)}
        nodes = [helper.make_node("Mul", ["a", "b"], ["m"]), helper.make_node("Div", ["m", "three"], ["d"]),
                 helper.make_node("Sub", ["d", "b"], ["y"])]
        consts = {"three": np.array(3, np.int64)}
    elif kind == "float16":
        feeds = {"a": rand(3, 7, seed=1)}
        nodes = [helper.make_node("Cast", ["a"], ["h"], to=TensorProto.FLOAT16),
                 helper.make_node("Abs", ["h"], ["ah"]), helper.make_node("Neg", ["ah"], ["nh"]),
                 helper.make_node("Cast", ["nh"], ["y"], to=TensorProto.FLOAT)]
        consts = {}
    else:
        feeds = {"a": rand(3, 7, seed=1), "b": rand(3, 7, seed=2)}
        nodes = [helper.make_node("Greater", ["a", "b"], ["g"]), helper.make_node("Not", ["g"], ["ng"]),
                 helper.make_node("Where", ["ng", "a", "b"], ["w"]),
                 helper.make_node("Cast", ["ng"], ["y2"], to=TensorProto.INT32),
                 helper.make_node("Add", ["w", "a"], ["y"])]
        consts = {}
    outs = ["y", "y2"] if kind == "bool" else ["y"]
    model = make_model(nodes, feeds, outs, consts)
    # ONNX Runtime drops the float16 round trip (its Cast elimination); om2gen rounds, as the spec says
    fused, plain = check_fusion(model, feeds, tmp_path, tol=1e-3 if kind == "float16" else 1e-4)
    assert fused.op_types() == ["FusedElementwise"] and len(plain.tasks) == len(nodes)


def test_if_regions_are_not_crossed(tmp_path):
    """A chain before an If with a run-time condition, chains inside its branches and after it."""
    x = rand(2, 3, seed=1)

    def branch(name, op):
        out = helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [2, 3])
        nodes = [helper.make_node(op, ["u", "u"], [f"{name}_a"]), helper.make_node("Relu", [f"{name}_a"], [f"{name}_b"]),
                 helper.make_node("Neg", [f"{name}_b"], [f"{name}_out"])]
        return helper.make_graph(nodes, name, [], [out])

    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["s", "x"], ["u"]),
             helper.make_node("ReduceSum", ["u"], ["total"], keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["z"], then_branch=branch("then", "Add"),
                              else_branch=branch("else", "Mul")),
             helper.make_node("Add", ["z", "u"], ["w"]), helper.make_node("Tanh", ["w"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], scalars(zero=0.0), opset=13)
    for sign in (1, -1):
        fused, plain = check_fusion(model, {"x": x * sign}, tmp_path / str(sign))
    kernels = [t["op_type"] for t in fused.tasks if t["kernel"]]
    # Sigmoid+Mul | ReduceSum | Greater, branch index | then: Add+Relu+Neg, copy | else: the same | Add+Tanh
    assert kernels == ["FusedElementwise", "ReduceSum", "Greater", "If", "FusedElementwise", "If",
                       "FusedElementwise", "If", "FusedElementwise"], kernels
    assert len(plain.tasks) - len(fused.tasks) == 1 + 2 + 2 + 1


def test_same_model_same_bytes(tmp_path):
    x = rand(2, 16, 40)
    model = make_model(gelu_nodes(), {"x": x}, ["y"], scalars(sqrt2=1.4142135, one=1.0, half=0.5))
    a = compile_run(model, {"x": x}, tmp_path / "a").path
    b = compile_run(model, {"x": x}, tmp_path / "b").path
    assert a.read_bytes() == b.read_bytes()


def test_the_internal_operator_cannot_appear_in_a_model(tmp_path):
    node = helper.make_node("FusedElementwise", ["x"], ["y"], domain="om2gen")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("om2gen", 1)])
    with pytest.raises(om2gen.UnsupportedOpError, match="fused operator"):
        om2gen.compile(model, tmp_path / "m.om2")
    assert not (tmp_path / "m.om2").exists()


def test_member_read_only_for_its_dtype_is_dropped(tmp_path):
    """CastLike reads only the dtype of its second input: the chain computing that input is dead."""
    x = rand(3, 4, seed=1)
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Neg", ["sq"], ["like"]),
             helper.make_node("Div", ["x", "two"], ["h"]), helper.make_node("CastLike", ["h", "like"], ["c"]),
             helper.make_node("Add", ["c", "x"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], scalars(two=2.0))
    fused, _ = check_fusion(model, {"x": x}, tmp_path)
    assert fused.op_types() == ["FusedElementwise"]


def test_views_that_keep_elements_in_place_do_not_split_a_chain(tmp_path):
    """Identity, a Reshape adding a unit dim and an Expand along a broadcast dim read each element
    where broadcasting would: the producer stays in the group, computed once per element."""
    feeds = {"x": rand(4, 8, seed=1), "z": rand(2, 4, 8, seed=2)}
    nodes = [helper.make_node("Add", ["x", "one"], ["a"], name="add"),
             helper.make_node("Identity", ["a"], ["i"], name="id"),
             helper.make_node("Reshape", ["i", "shape"], ["r"], name="reshape"),
             helper.make_node("Expand", ["r", "to"], ["e"], name="expand"),
             helper.make_node("Mul", ["e", "z"], ["y"], name="mul")]
    model = make_model(nodes, feeds, ["y"], {"one": np.array(1.0, F32), "shape": np.array([1, 4, 8], np.int64),
                                             "to": np.array([2, 4, 8], np.int64)})
    fused, plain = check_fusion(model, feeds, tmp_path)
    assert fused.op_types() == ["FusedElementwise"] and plain.op_types() == ["Add", "Expand", "Mul"]
    assert fused.fused_from("FusedElementwise") == [["add", "id", "reshape", "expand", "mul"]]


@pytest.mark.parametrize("qtype", [TensorProto.UINT8, TensorProto.INT8])
def test_dequantize_batchnorm_quantize_is_one_task(qtype, tmp_path):
    """A float BatchNormalization left between a DequantizeLinear and a QuantizeLinear (a QDQ
    model whose Conv and BN were not folded: MobileNetV2 through quantize_static) runs as one
    kernel, bit for bit the three kernels' arithmetic (and ORT's: saturation and ties included)."""
    dt = np.uint8 if qtype == TensorProto.UINT8 else np.int8
    info = np.iinfo(dt)
    assert helper.np_dtype_to_tensor_dtype(np.dtype(dt)) == qtype
    rng = np.random.default_rng(3)
    x = rng.integers(info.min, int(info.max) + 1, (1, 6, 9, 11)).astype(dt)
    c = 6
    consts = {"sx": np.array(0.05, F32), "zx": np.array(7, dt), "sy": np.array(0.03, F32),
              "zy": np.array(-3 if dt is np.int8 else 130, dt), "g": rng.uniform(0.5, 2, c).astype(F32), "b": rng.uniform(-1, 1, c).astype(F32),
              "m": rng.uniform(-1, 1, c).astype(F32), "v": rng.uniform(0.1, 2, c).astype(F32)}
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xf"], name="dq"),
             helper.make_node("BatchNormalization", ["xf", "g", "b", "m", "v"], ["bn"], name="bn"),
             helper.make_node("QuantizeLinear", ["bn", "sy", "zy"], ["y"], name="q")]
    model = make_model(nodes, {"x": x}, ["y"], consts)
    fused, plain = check_fusion(model, {"x": x}, tmp_path)
    assert plain.op_types() == ["DequantizeLinear", "BatchNormalization", "QuantizeLinear"]
    assert fused.op_types() == ["FusedElementwise"] and fused.fused_from("FusedElementwise") == [["dq", "bn", "q"]]
