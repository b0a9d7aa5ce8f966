"""The integer and quantized matrix products against ONNX Runtime: integer outputs exactly equal
(incl. the edge values 0, 255, -128 and saturation), float outputs within ORT's tolerance, on
each x86 kernel (AVX-512 with VNNI, AVX2, portable C) where this machine runs it."""
import numpy as np
import onnx
import pytest
from helpers import ort_run
from onnx import TensorProto, helper, numpy_helper

import om2gen
from om2gen.toolchain import targets

COVERS = {"MatMulInteger", "QLinearMatMul", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QGemm",
          "DynamicQuantizeLinear"}
TARGETS = [t for t in ("x86_64-avx512", "x86_64-avx2", "x86_64")
           if not targets.missing_features(targets.TARGETS[t].arch, targets.TARGETS[t].isa_features)]
MS = "com.microsoft"


def ints(rng, dtype, shape, edges=True):
    """Random values of a byte type, the first ones its extremes and 0 (what saturates first)."""
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, shape).astype(dtype)
    if edges:
        flat = a.reshape(-1)
        flat[:4] = [info.min, info.max, 0, info.max]
    return a


def model(nodes, inputs: dict, consts: dict, outputs: dict, ms=False):
    """inputs/consts: {name: array}; outputs: {name: (onnx type, shape)}; a shape None: onnx infers it."""
    g = helper.make_graph(
        nodes, "t",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, t, s) if s is not None else helper.make_empty_tensor_value_info(n)
         for n, (t, s) in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(MS, 1)] if ms else [])
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 8
    if any(s is None for _, s in outputs.values()):
        inferred = onnx.shape_inference.infer_shapes(m)
        m.graph.ClearField("output")
        m.graph.output.extend(inferred.graph.output)
    return m


def run(m, feeds, tmp_path, target):
    om2gen.compile(m, tmp_path / "m.om2", target=target)
    with om2gen.load(tmp_path / "m.om2") as loaded:
        return loaded.run(feeds)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("types", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8), (np.int8, np.uint8)])
@pytest.mark.parametrize("b_const", [True, False])
def test_matmul_integer_exact(target, types, b_const, tmp_path):
    rng = np.random.default_rng(1)
    a, b = ints(rng, types[0], (2, 37, 70)), ints(rng, types[1], (70, 45))
    za, zb = np.array(rng.integers(0, 50), types[0]), rng.integers(0, 20, 45).astype(types[1])
    node = helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])
    inputs, consts = {"a": a}, {"za": za, "zb": zb}
    (consts if b_const else inputs)["b"] = b
    m = model([node], inputs, consts, {"y": (TensorProto.INT32, (2, 37, 45))})
    np.testing.assert_array_equal(run(m, inputs, tmp_path, target)["y"], ort_run(m, inputs)[0])


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_integer_batched_inputs_without_zero_points(target, tmp_path):
    rng = np.random.default_rng(2)
    a, b = ints(rng, np.uint8, (3, 20, 33)), ints(rng, np.uint8, (3, 33, 17))
    m = model([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], {"a": a, "b": b}, {},
              {"y": (TensorProto.INT32, (3, 20, 17))})
    feeds = {"a": a, "b": b}
    np.testing.assert_array_equal(run(m, feeds, tmp_path, target)["y"], ort_run(m, feeds)[0])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("ytype", [np.uint8, np.int8])
@pytest.mark.parametrize("per_column", [False, True])
def test_qlinear_matmul_bit_exact(target, ytype, per_column, tmp_path):
    rng = np.random.default_rng(3)
    a, b = ints(rng, ytype, (50, 64)), ints(rng, np.int8, (64, 40))   # (ORT: a and y of one type)
    n = 40 if per_column else 1
    consts = {"sa": np.float32(0.02), "za": np.array(130 if ytype == np.uint8 else 2, ytype), "b": b,
              "sb": rng.uniform(0.001, 0.01, n).astype(np.float32).reshape(-1 if per_column else ()),
              "zb": np.zeros(n, np.int8).reshape(-1 if per_column else ()),
              # a y_scale small enough that many outputs saturate
              "sy": np.float32(0.02), "zy": np.array(120 if ytype == np.uint8 else -5, ytype)}
    node = helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])
    m = model([node], {"a": a}, consts, {"y": (helper.np_dtype_to_tensor_dtype(np.dtype(ytype)), (50, 40))})
    got, ref = run(m, {"a": a}, tmp_path, target)["y"], ort_run(m, {"a": a})[0]
    assert (ref == np.iinfo(ytype).max).any() and (ref == np.iinfo(ytype).min).any()
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("target", TARGETS[:1])
def test_dynamic_quantize_linear_exact(target, tmp_path):
    rng = np.random.default_rng(4)
    x = rng.normal(0, 3, (64, 300)).astype(np.float32)
    x[0, :3] = [0.0, -7.5, 12.25]
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    m = model([node], {"x": x}, {}, {"y": (TensorProto.UINT8, x.shape), "s": (TensorProto.FLOAT, ()),
                                     "z": (TensorProto.UINT8, ())})
    got, ref = run(m, {"x": x}, tmp_path, target), ort_run(m, {"x": x})
    for name, r in zip("ysz", ref):
        np.testing.assert_array_equal(got[name], r, err_msg=name)


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_integer_to_float_and_dynamic_quantize_matmul(target, tmp_path):
    rng = np.random.default_rng(5)
    x = rng.normal(0, 1, (2, 24, 96)).astype(np.float32)
    b = ints(rng, np.int8, (96, 80), edges=False)
    consts = {"b": b, "sb": rng.uniform(0.001, 0.02, 80).astype(np.float32), "zb": np.zeros(80, np.int8),
              "bias": rng.normal(0, 1, 80).astype(np.float32)}
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
             helper.make_node("MatMulIntegerToFloat", ["q", "b", "s", "sb", "z", "zb", "bias"], ["y1"], domain=MS),
             helper.make_node("DynamicQuantizeMatMul", ["x", "b", "sb", "zb", "bias"], ["y2"], domain=MS)]
    m = model(nodes, {"x": x}, consts, {"y1": (TensorProto.FLOAT, (2, 24, 80)), "y2": (TensorProto.FLOAT, (2, 24, 80))},
              ms=True)
    got, ref = run(m, {"x": x}, tmp_path, target), ort_run(m, {"x": x})
    for name, r in zip(("y1", "y2"), ref):
        np.testing.assert_allclose(got[name], r, rtol=1e-5, atol=1e-5 * np.abs(r).max(), err_msg=name)


@pytest.mark.parametrize("target", TARGETS[:2])
@pytest.mark.parametrize("quantized_out", [True, False])
def test_qgemm(target, quantized_out, tmp_path):
    rng = np.random.default_rng(6)
    a, b = ints(rng, np.uint8, (30, 48)), ints(rng, np.int8, (36, 48))
    consts = {"sa": np.float32(0.03), "za": np.uint8(120), "b": b, "sb": np.float32(0.004), "zb": np.int8(0),
              "c": rng.integers(-2000, 2000, 36).astype(np.int32)}
    names = ["a", "sa", "za", "b", "sb", "zb", "c"]
    if quantized_out:
        consts.update(sy=np.float32(0.2), zy=np.uint8(128))
        names += ["sy", "zy"]
    node = helper.make_node("QGemm", names, ["y"], domain=MS, transB=1, **({} if quantized_out else {"alpha": 0.5}))
    m = model([node], {"a": a}, consts, {"y": (TensorProto.UINT8 if quantized_out else TensorProto.FLOAT, (30, 36))},
              ms=True)
    got, ref = run(m, {"a": a}, tmp_path, target)["y"], ort_run(m, {"a": a})[0]
    if quantized_out:
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_a_float_zero_point_is_a_clear_error(tmp_path):
    a = np.zeros((4, 4), np.uint8)
    node = helper.make_node("MatMulInteger", ["a", "b", "za"], ["y"])
    m = model([node], {"a": a}, {"b": np.zeros((4, 4), np.int8), "za": np.zeros(4, np.uint8)},
              {"y": (TensorProto.INT32, (4, 4))})
    with pytest.raises(om2gen.UnsupportedOpError, match="one zero point for A"):
        om2gen.compile(m, tmp_path / "m.om2")
