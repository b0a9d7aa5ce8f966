"""Element-wise math (om2gen/ops/math.py) against ONNX Runtime, numpy where ORT has no kernel."""
import math

import numpy as np
import onnx
import pytest
from helpers import check_model, ort_run, rand
from onnx import helper, numpy_helper

import om2gen

COVERS = {"Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Pow", "Erf", "Floor", "Ceil", "Round", "Sign",
          "Min", "Max", "Sum", "Mean", "Mod", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
          "Asinh", "Acosh", "Atanh"}


def node_model(op, inputs: dict, attrs=None, *, opset=17, consts=None, n_inputs=None):
    """One node over graph inputs of any dtype (helpers.make_model knows only a few)."""
    consts = consts or {}
    names = list(inputs) + list(consts)
    node = helper.make_node(op, names, ["out"], name=f"{op.lower()}_node", **(attrs or {}))
    graph = helper.make_graph(
        [node], "test",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [helper.make_empty_tensor_value_info("out")],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model)
    model.graph.ClearField("output")
    model.graph.output.extend(inferred.graph.output)
    return model


def check(op, inputs, attrs=None, *, tmp_path, opset=17, tol=None, consts=None):
    dtypes = {a.dtype for a in inputs.values()}
    tol = tol or (2e-3 if np.dtype(np.float16) in dtypes else 1e-4)
    return check_model(node_model(op, inputs, attrs, opset=opset, consts=consts), inputs, tmp_path, tol)


def check_specials(op, inputs, attrs=None, *, tmp_path, opset=17, rtol=1e-6, atol=0.0):
    """Like check(), for inputs with Inf/NaN (helpers.assert_close cannot compare infinities)."""
    model = node_model(op, inputs, attrs, opset=opset)
    got = run(op, inputs, attrs, tmp_path=tmp_path, opset=opset)
    ref = ort_run(model, inputs)[0]
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
    return got


def run(op, inputs, attrs=None, *, tmp_path, opset=17):
    """om2gen's result alone, for cases ONNX Runtime does not implement."""
    path = tmp_path / "model.om2"
    om2gen.compile(node_model(op, inputs, attrs, opset=opset), path)
    with om2gen.load(path) as m:
        return m.run(inputs)["out"]


# op -> input range where the function is defined
FLOAT_UNARY = {
    "Abs": (-5, 5), "Neg": (-5, 5), "Exp": (-10, 10), "Log": (0.01, 50), "Sqrt": (0, 50),
    "Reciprocal": (0.1, 5), "Erf": (-3, 3), "Floor": (-5, 5), "Ceil": (-5, 5), "Round": (-5, 5),
    "Sign": (-2, 2), "Sin": (-7, 7), "Cos": (-7, 7), "Tan": (-1.5, 1.5), "Asin": (-1, 1), "Acos": (-1, 1),
    "Atan": (-9, 9), "Sinh": (-5, 5), "Cosh": (-5, 5), "Asinh": (-9, 9), "Acosh": (1, 9), "Atanh": (-0.99, 0.99),
}


@pytest.mark.parametrize("op", sorted(FLOAT_UNARY))
@pytest.mark.parametrize("shape", [(), (7,), (3, 70000)], ids=["scalar", "7", "3x70000"])
def test_unary_float32(op, shape, tmp_path):
    lo, hi = FLOAT_UNARY[op]
    check(op, {"x": rand(*shape, seed=3, low=lo, high=hi)}, tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round",
                                "Sign", "Sin", "Cos", "Erf", "Sinh", "Acosh"])
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_unary_other_floats(op, dtype, tmp_path):
    lo, hi = FLOAT_UNARY[op]
    x = rand(5, 33, seed=4, low=lo, high=hi).astype(dtype)
    if dtype == np.float64 and op in ("Erf", "Sinh", "Acosh"):   # ONNX Runtime has no float64 kernel
        ref = np.vectorize(getattr(math, op.lower()))(x)
        np.testing.assert_allclose(run(op, {"x": x}, tmp_path=tmp_path), ref, rtol=1e-14)
    else:
        check(op, {"x": x}, tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["Abs", "Neg", "Exp", "Log", "Sqrt", "Floor", "Ceil", "Round", "Sign", "Sin",
                                "Reciprocal"])
def test_unary_special_values(op, tmp_path):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 3e38, -3e38], np.float32)
    check_specials(op, {"x": x}, tmp_path=tmp_path)


def test_round_half_to_even(tmp_path):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 1e8 + 1, 2.4, -2.6], np.float32)
    check("Round", {"x": x}, tmp_path=tmp_path)
    (tmp_path / "f64").mkdir()
    check("Round", {"x": x.astype(np.float64)}, tmp_path=tmp_path / "f64")


@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_unary_signed(op, dtype, tmp_path):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, -5, -1, 0, 1, 7, info.max], dtype)
    check(op, {"x": x}, tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["Abs", "Sign"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
def test_unary_unsigned(op, dtype, tmp_path):
    x = np.array([0, 1, 5, np.iinfo(dtype).max], dtype)
    check(op, {"x": x}, tmp_path=tmp_path)


def test_unary_old_opsets(tmp_path):
    check("Abs", {"x": rand(4, 5, seed=1)}, opset=7, tmp_path=tmp_path)
    (tmp_path / "b").mkdir()
    check("Sin", {"x": rand(4, 5, seed=1)}, opset=7, tmp_path=tmp_path / "b")


def test_unsupported_dtype_is_named(tmp_path):
    with pytest.raises(om2gen.UnsupportedOpError, match="Exp.*int32"):
        om2gen.compile(node_model("Exp", {"x": np.zeros(3, np.int32)}), tmp_path / "m.om2")


# --- Pow -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("xt,et", [(np.float32, np.float32), (np.float32, np.int64), (np.float32, np.int32),
                                   (np.int64, np.int64), (np.int32, np.int32), (np.int64, np.float32),
                                   (np.int32, np.float32), (np.float64, np.float64), (np.float16, np.float16),
                                   (np.float32, np.float64)])
def test_pow_types(xt, et, tmp_path):
    x = np.array([[1, 2, 3, -2, 0.5, 4], [2, -3, 1, 5, 7, 0]])
    e = np.array([2, 3, 0, 3, -1, 0.5]) if np.dtype(et).kind == "f" else np.array([2, 3, 0, 3, 1, 1])
    if np.dtype(xt).kind != "f":
        x = np.abs(x).astype(np.int64) + 1
    check("Pow", {"x": x.astype(xt), "e": e.astype(et)}, tmp_path=tmp_path)


@pytest.mark.parametrize("sx,se", [((2, 3, 4), ()), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (6,))])
def test_pow_broadcast(sx, se, tmp_path):
    check("Pow", {"x": rand(*sx, seed=1, low=0.1, high=3), "e": rand(*se, seed=2, low=-2, high=2)},
          tmp_path=tmp_path)


def test_pow_opset7(tmp_path):
    check("Pow", {"x": rand(3, 4, low=0.5, high=2), "e": rand(4, seed=2)}, opset=7, tmp_path=tmp_path)


# --- Mod -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64])
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_int(dtype, fmod, tmp_path):
    signed = np.dtype(dtype).kind == "i"
    a = np.array([[-7, 7, -7, 7, 0, 13], [5, -5, 100, -100, 3, -128]])
    b = np.array([3, -3, -3, 3, 7, -1] if signed else [3, 3, 5, 7, 2, 1])
    if not signed:
        a = np.abs(a)
    a = a.astype(dtype)
    b = b.astype(dtype)
    if signed:
        a[1, 5] = np.iinfo(dtype).min
    check("Mod", {"a": a, "b": b}, {"fmod": fmod}, tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_mod_float_fmod1(dtype, tmp_path):
    a = rand(4, 6, seed=1, low=-10, high=10).astype(dtype)
    b = rand(6, seed=2, low=-3, high=3).astype(dtype)
    check("Mod", {"a": a, "b": b}, {"fmod": 1}, tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_mod_float_fmod0_against_numpy(dtype, tmp_path):
    # ONNX Runtime rejects fmod=0 on floats before opset 28; the spec's result is numpy's mod
    a = np.array([0, -0.0, 0, -0.0, -3, 3, -1, 1, np.inf, -np.inf, 1, 1, np.nan, 1, -4.3, 7.2, 5, -7.2], dtype)
    b = np.array([-2, 2, 2, -2, np.inf, np.inf, -np.inf, -np.inf, 2, 2, 0, -0.0, 2, np.nan, 2.1, -3.4, 8, 3.4],
                 dtype)
    got = run("Mod", {"a": a, "b": b}, {"fmod": 0}, tmp_path=tmp_path)
    with np.errstate(all="ignore"):
        ref = np.mod(a, b)
    ref[np.isinf(b) & np.isfinite(a) & (a != 0) & (np.sign(a) != np.sign(b))] = b[
        np.isinf(b) & np.isfinite(a) & (a != 0) & (np.sign(a) != np.sign(b))]
    np.testing.assert_allclose(got, ref, rtol=1e-3)
    assert np.array_equal(np.signbit(got[:4]), np.signbit(b[:4]))


def test_mod_int_zero_divisor_gives_zero(tmp_path):
    got = run("Mod", {"a": np.array([5, -5, 3], np.int32), "b": np.array([0, 0, 2], np.int32)}, tmp_path=tmp_path)
    np.testing.assert_array_equal(got, [0, 0, 1])


def test_mod_broadcast(tmp_path):
    check("Mod", {"a": (rand(2, 3, 4, seed=5) * 50).astype(np.int64), "b": np.array([3, -7, 5, 11], np.int64)},
          tmp_path=tmp_path)


# --- Min / Max / Sum / Mean ----------------------------------------------------------------------

VARIADIC_SHAPES = [
    [(3, 4)],
    [(3, 4), (3, 4)],
    [(2, 3, 4), (4,), (3, 1)],
    [(5,), (), (2, 1), (1, 5), (2, 5)],
    [(64, 1024), (1024,)],
]


@pytest.mark.parametrize("op", ["Min", "Max", "Sum", "Mean"])
@pytest.mark.parametrize("shapes", VARIADIC_SHAPES, ids=lambda s: "_".join("x".join(map(str, x)) or "s" for x in s))
def test_variadic_broadcast(op, shapes, tmp_path):
    inputs = {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)}
    check(op, inputs, tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["Min", "Max"])
def test_minmax_nan_and_signed_zero(op, tmp_path):
    a = np.array([1, np.nan, 3, np.nan, -0.0, 0.0, np.inf, -np.inf], np.float32)
    b = np.array([np.nan, 2, 1, np.nan, 0.0, -0.0, 1, 1], np.float32)
    got = check_specials(op, {"a": a, "b": b}, tmp_path=tmp_path)
    assert np.array_equal(np.signbit(got[4:6]), np.signbit(a[4:6]))   # ties keep the first operand
    (tmp_path / "3").mkdir()
    check_specials(op, {"a": a, "b": b, "c": np.array([5], np.float32)}, tmp_path=tmp_path / "3")


@pytest.mark.parametrize("op", ["Min", "Max"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32, np.uint64,
                                   np.float16, np.float64])
def test_minmax_dtypes(op, dtype, tmp_path):
    x = (rand(3, 5, seed=1, low=0 if np.dtype(dtype).kind == "u" else -100, high=100)).astype(dtype)
    y = (rand(5, seed=2, low=0 if np.dtype(dtype).kind == "u" else -100, high=100)).astype(dtype)
    z = (rand(3, 1, seed=3, low=0 if np.dtype(dtype).kind == "u" else -100, high=100)).astype(dtype)
    check(op, {"x": x, "y": y, "z": z}, tmp_path=tmp_path)


@pytest.mark.parametrize("op", ["Sum", "Mean"])
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_sum_mean_dtypes(op, dtype, tmp_path):
    inputs = {"x": rand(3, 5, seed=1).astype(dtype), "y": rand(5, seed=2).astype(dtype)}
    if op == "Sum":
        check(op, inputs, tmp_path=tmp_path)
    else:  # ONNX Runtime has Mean for float32 only
        got = run(op, inputs, tmp_path=tmp_path)
        ref = ((inputs["x"].astype(np.float64) + inputs["y"]) / 2).astype(dtype)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, ref, rtol=1e-3 if dtype == np.float16 else 1e-12)


@pytest.mark.parametrize("op", ["Min", "Max", "Sum", "Mean"])
def test_variadic_opset6_same_shapes(op, tmp_path):
    check(op, {"a": rand(2, 3, seed=1), "b": rand(2, 3, seed=2)}, opset=7, tmp_path=tmp_path)


def test_variadic_many_inputs(tmp_path):
    inputs = {f"x{i}": rand(4, 6, seed=i) for i in range(9)}
    check("Max", inputs, tmp_path=tmp_path)
