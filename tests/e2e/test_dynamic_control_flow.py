"""If and Loop in dynamic-shape models (issue 15, docs/dynamic-shapes.md), from one archive each in
both formats: the .om2 replays its captured switches (LABEL_SWITCH_BY_INDEX reading the branch
index a kernel wrote); the classic .om runs them the RT2 way, its executor waiting at each switch
to read that index. Every run against ONNX Runtime, at several shapes and trip counts."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.helpers import ort_run

import om2gen

F = TensorProto.FLOAT
HIDDEN = 16


def _weights(rng, name: str, shape) -> object:
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)


def _rnn_loop():
    """h_t = tanh(x[t] @ Wx + h_{t-1} @ Wh) over x[S, N, 8], as a scripted torch loop exports it:
    the trip count is Shape(x)[0] (the run's sequence length), x[t] a Gather at the iteration
    number, the hidden state carried, and the loop stops early once every |h| is below `stop`
    (a run-time condition)."""
    rng = np.random.default_rng(1)
    body = helper.make_graph(
        [helper.make_node("Gather", ["x", "t"], ["xt"], axis=0),
         helper.make_node("MatMul", ["xt", "Wx"], ["a"]), helper.make_node("MatMul", ["h_in", "Wh"], ["b"]),
         helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Tanh", ["s"], ["h_out"]),
         helper.make_node("Abs", ["h_out"], ["mag"]),
         helper.make_node("ReduceMax", ["mag"], ["top"], keepdims=0),
         helper.make_node("Greater", ["top", "stop"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("t", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("h_in", F, ["N", HIDDEN])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", F, ["N", HIDDEN])])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["steps"], axis=0),
             helper.make_node("Loop", ["steps", "go", "h0"], ["h"], body=body),
             helper.make_node("Relu", ["h"], ["y"])]
    inits = [_weights(rng, "Wx", (8, HIDDEN)), _weights(rng, "Wh", (HIDDEN, HIDDEN)),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(True), "go")]
    graph = helper.make_graph(nodes, "rnn_loop", [helper.make_tensor_value_info("x", F, ["S", "N", 8]),
                                                  helper.make_tensor_value_info("h0", F, ["N", HIDDEN]),
                                                  helper.make_tensor_value_info("stop", F, [])],
                              [helper.make_tensor_value_info("y", F, ["N", HIDDEN])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _rnn_feeds(rng, seq: int, batch: int, stop: float) -> dict:
    return {"x": rng.standard_normal((seq, batch, 8)).astype(np.float32),
            "h0": rng.standard_normal((batch, HIDDEN)).astype(np.float32), "stop": np.array(stop, np.float32)}


def _scan_loop():
    """A Loop of a constant 4 steps over x[N, 8] whose scan output stacks each step's state
    ([4, N, 16]), then summed over the steps: a dynamic batch through a body and a scan."""
    rng = np.random.default_rng(2)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "W"], ["m"]), helper.make_node("Sigmoid", ["m"], ["h_out"]),
         helper.make_node("Identity", ["h_out"], ["row"]), helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("h_in", F, ["N", HIDDEN])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", F, ["N", HIDDEN]),
         helper.make_tensor_value_info("row", F, ["N", HIDDEN])])
    nodes = [helper.make_node("MatMul", ["x", "W0"], ["h0"]),
             helper.make_node("Loop", ["M", "go", "h0"], ["h", "rows"], body=body),
             helper.make_node("ReduceSum", ["rows", "axis0"], ["total"], keepdims=0),
             helper.make_node("Add", ["total", "h"], ["y"])]
    inits = [_weights(rng, "W0", (8, HIDDEN)), _weights(rng, "W", (HIDDEN, HIDDEN)),
             numpy_helper.from_array(np.array(4, np.int64), "M"), numpy_helper.from_array(np.array(True), "go"),
             numpy_helper.from_array(np.array([0], np.int64), "axis0")]
    graph = helper.make_graph(nodes, "scan_loop", [helper.make_tensor_value_info("x", F, ["N", 8])],
                              [helper.make_tensor_value_info("y", F, ["N", HIDDEN]),
                               helper.make_tensor_value_info("rows", F, [4, "N", HIDDEN])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _branches():
    """y = If(sum(x) > 0) then softmax(x @ W1) else relu(x) @ W2 + 1, over x[N, S, 8]: the
    branch the data picks, each over the run's shapes."""
    rng = np.random.default_rng(3)
    then = helper.make_graph([helper.make_node("MatMul", ["x", "W1"], ["m1"]),
                              helper.make_node("Softmax", ["m1"], ["t"], axis=-1)],
                             "then", [], [helper.make_tensor_value_info("t", F, ["N", "S", HIDDEN])])
    other = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["r", "W2"], ["m2"]),
                               helper.make_node("Add", ["m2", "one"], ["e"])],
                              "else", [], [helper.make_tensor_value_info("e", F, ["N", "S", HIDDEN])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=other),
             helper.make_node("Mul", ["b", "x_scale"], ["y"])]
    inits = [_weights(rng, "W1", (8, HIDDEN)), _weights(rng, "W2", (8, HIDDEN)),
             numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array(1, np.float32), "one"),
             numpy_helper.from_array(np.array(2, np.float32), "x_scale")]
    graph = helper.make_graph(nodes, "branches", [helper.make_tensor_value_info("x", F, ["N", "S", 8])],
                              [helper.make_tensor_value_info("y", F, ["N", "S", HIDDEN])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _branch_feeds(rng, n: int, s: int, sign: float) -> dict:
    return {"x": (np.abs(rng.standard_normal((n, s, 8))) * sign + rng.standard_normal((n, s, 8)) * 0.1)
            .astype(np.float32)}


CASES = {
    # name: (model, input_shapes, feeds: (rng) -> list of feeds)
    "rnn_loop": (_rnn_loop, {"x": ("1~12", "1~6", 8), "h0": ("1~6", HIDDEN), "stop": ()},
                 lambda rng: [_rnn_feeds(rng, s, n, stop) for s, n, stop in
                              ((1, 1, 0.0), (12, 6, 0.0), (5, 3, 0.0), (12, 2, 0.97), (7, 6, 2.0), (3, 4, 0.0))]),
    "scan_loop": (_scan_loop, {"x": ("1~32", 8)},
                  lambda rng: [{"x": rng.standard_normal((n, 8)).astype(np.float32)} for n in (1, 32, 7, 19)]),
    "branches": (_branches, {"x": ("1~4", "1~64", 8)},
                 lambda rng: [_branch_feeds(rng, n, s, sign) for n, s, sign in
                              ((1, 1, 1.0), (4, 64, -1.0), (2, 17, 1.0), (3, 40, -1.0), (4, 64, 1.0))]),
}


def _same(got: dict, want: list, what: str) -> None:
    for g, w in zip(got.values(), want):
        assert g.shape == w.shape, what
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=what)


@pytest.mark.parametrize("fmt", ["om2", "om"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_control_flow_at_several_shapes_matches_onnx_runtime(name, fmt, tmp_path):
    build, shapes, feeds = CASES[name]
    m = build()
    path = tmp_path / f"m.{fmt}"
    om2gen.compile(m, path, input_shapes=shapes)
    with om2gen.load(path) as model:
        assert (model.rt2_stats is not None) == (fmt == "om"), "an .om runs the RT2 way, an .om2 replays"
        for k, f in enumerate(feeds(np.random.default_rng(5))):
            _same(model.run(f), ort_run(m, f), f"{name} ({fmt}) run {k} at {[v.shape for v in f.values()]}")


def test_a_loop_with_a_count_runs_from_an_om(tmp_path):
    """The while-loop of tests/ops/test_data_dependent.py as a classic .om: its scan rows are a
    count the loop's control kernels write; the RT2 executor reads it back at each of them and
    tiles the kernels after the loop at the rows the run made (none, one, some, the bound)."""
    from tests.ops.test_data_dependent import _while_loop
    m = _while_loop()
    om2gen.compile(m, tmp_path / "loop.om")
    with om2gen.load(tmp_path / "loop.om") as model:
        for t, go in ((0.0, True), (7.5, True), (100.0, False), (100.0, True), (14.9, True)):
            f = {"acc0": np.zeros(3, np.float32), "x": np.ones(3, np.float32), "limit": np.array(t, np.float32),
                 "go": np.array(go)}
            _same(model.run(f), ort_run(m, f), f"limit {t}, go {go}")
        assert model.rt2_stats["runs"] == 5
