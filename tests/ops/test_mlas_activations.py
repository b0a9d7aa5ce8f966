"""Sigmoid and Tanh compute MLAS's rational approximations (om2/om2_vmath.h), so they equal ONNX
Runtime's bit for bit: a quantized model quantizes its activations dynamically, and one ulp of a
Sigmoid moved ddddocr_old's output by 0.12 through the integer layers after it. The AVX-512
kernel (this machine's best), the AVX2 one and the fused form (Swish: x * Sigmoid(x)) are
checked, and the recurrent ops' gates, which use the same functions, stay within float rounding
of ORT (their products sum in another order)."""
import numpy as np
import pytest
from helpers import compile_and_run, make_model, ort_run
from onnx import helper

from om2gen.toolchain import targets


def _values() -> np.ndarray:
    rng = np.random.default_rng(3)
    special = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1e-45, 8.99, 9.0, 9.01, -9.01,
               17.844, 17.89684, 17.99, 18.0, 18.01, -18.01, 88.0, -104.0, 3.4e38, -3.4e38]
    return np.concatenate([np.array(special, np.float32), (rng.standard_normal(100_000) * 6).astype(np.float32),
                           rng.uniform(-25, 25, 100_000).astype(np.float32)]).reshape(1, -1)


# the portable x86_64 target has no fused multiply-add: it computes MLAS's generic (SSE2) kernel,
# a multiply and an add per step, while ORT here runs the FMA3 one
TARGETS = [t for t in ("x86_64-avx512", "x86_64-avx2", "x86_64")
           if not targets.missing_features(targets.TARGETS[t].arch, targets.TARGETS[t].isa_features)]


@pytest.mark.parametrize("target", TARGETS)
def test_sigmoid_tanh_and_swish_equal_onnxruntime(target, tmp_path):
    x = _values()
    model = make_model([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Tanh", ["x"], ["t"]),
                        helper.make_node("Sigmoid", ["x"], ["s2"]), helper.make_node("Mul", ["x", "s2"], ["swish"])],
                       {"x": x}, ["s", "t", "swish"])
    got, _ = compile_and_run(model, {"x": x}, tmp_path, target=target)
    for name, ref in zip(["s", "t", "swish"], ort_run(model, {"x": x})):
        if target == "x86_64" or name == "swish":
            # x86_64 has no FMA: MLAS's generic kernel's arithmetic, an absolute error of 4.2e-7 on the
            # logistic and tanh (times |x| in x * Sigmoid(x)). And ORT fuses x * Sigmoid(x) into its
            # QuickGelu kernel, which gives 1.0 where its Sigmoid gives 1.0000001 (x near 17.9)
            bound = 5e-7 * (np.maximum(1.0, np.abs(x)) if name == "swish" else 1.0)
            diff = np.abs(got[name].astype(np.float64) - ref)
            same = (got[name] == ref) | (np.isnan(got[name]) & np.isnan(ref))
            assert np.all(same | (diff <= bound)), f"{name} on {target}"
        else:
            np.testing.assert_array_equal(got[name], ref, err_msg=f"{name} on {target}")


@pytest.mark.parametrize("op, gates", [("LSTM", 4), ("GRU", 3), ("RNN", 1)])
def test_recurrent_gates_within_float_rounding(op, gates, tmp_path):
    rng = np.random.default_rng(5)
    t, b, i, h = 7, 2, 16, 32
    x = rng.standard_normal((t, b, i)).astype(np.float32)
    inits = {"W": (rng.standard_normal((2, gates * h, i)) * 0.3).astype(np.float32),
             "R": (rng.standard_normal((2, gates * h, h)) * 0.3).astype(np.float32),
             "B": (rng.standard_normal((2, 2 * gates * h)) * 0.1).astype(np.float32)}
    model = make_model([helper.make_node(op, ["x", "W", "R", "B"], ["Y", "Yh"], hidden_size=h,
                                         direction="bidirectional")], {"x": x}, ["Y", "Yh"], inits)
    got, _ = compile_and_run(model, {"x": x}, tmp_path)
    for name, ref in zip(["Y", "Yh"], ort_run(model, {"x": x})):
        np.testing.assert_allclose(got[name], ref, rtol=0, atol=2e-6, err_msg=f"{op} {name}")
