"""Loop against ONNX Runtime: a real loop in the captured task list (a run-time trip count, a
condition the body computes), scan outputs with a compile-time trip count, an RNN-style body,
loops and Ifs inside each other, zero iterations, the unrolled case and the refusals; as .om2
archives and as classic .om files."""
import json
import zipfile

import numpy as np
import onnx
import pytest
from helpers import assert_close, ort_run, rand
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import om2gen
from om2gen.formats.om2 import layout

COVERS = {"Loop"}
FORMATS = ["om2", "om"]
mk = helper.make_node


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def counter_inputs(*carried, i="i", c="c_in"):
    """The body's first two inputs (iteration_num, cond) and its carried inputs [(name, elem, shape)]."""
    return [vi(i, T.INT64, []), vi(c, T.BOOL, [])] + [vi(*x) for x in carried]


def model(nodes, inputs, outputs, initializers=None, opset=17):
    """inputs/outputs: [(name, elem, shape)]; initializers: {name: array}."""
    g = helper.make_graph(nodes, "loop_test", [vi(*x) for x in inputs], [vi(*x) for x in outputs],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def compiled(m, tmp_path, fmt, **opts):
    path = tmp_path / f"model.{fmt}"
    om2gen.compile(m, path, **opts)
    return path


def check_runs(m, feeds_list, tmp_path, fmt, **opts):
    """Compiles once, runs every feed dict, compares every output with ONNX Runtime; returns the
    launch count of each run."""
    from om2gen.native import lib
    launches = []
    with om2gen.load(compiled(m, tmp_path, fmt, **opts)) as loaded:
        for feeds in feeds_list:
            before = lib.om2rtGetLaunchCount()
            got = loaded.run(feeds)
            launches.append(lib.om2rtGetLaunchCount() - before)
            for out, ref in zip(m.graph.output, ort_run(m, feeds)):
                assert_close(got[out.name], ref, f"{out.name} {feeds}")
    return launches


def task_kinds(m, tmp_path, **opts):
    path = tmp_path / "debug.om2"
    om2gen.compile(m, path, debug=True, **opts)
    with zipfile.ZipFile(path) as z:
        return [(t["type"], t["label"]) for t in json.loads(z.read(layout.task_info_json(0)))["tasks"]]


def rnn_body():
    """h = tanh(h @ W + x_t @ U + b), x_t = x[iteration_num] (Gather by the iteration number);
    the scan value is h."""
    nodes = [mk("Identity", ["c_in"], ["c_out"]),
             mk("Gather", ["x", "i"], ["x_t"], axis=0),
             mk("MatMul", ["h_in", "W"], ["hw"]), mk("MatMul", ["x_t", "U"], ["xu"]),
             mk("Add", ["hw", "xu"], ["s"]), mk("Add", ["s", "b"], ["sb"]), mk("Tanh", ["sb"], ["h_out"]),
             mk("Identity", ["h_out"], ["h_row"])]
    return helper.make_graph(nodes, "rnn_step", counter_inputs(("h_in", T.FLOAT, [1, 8])),
                             [vi("c_out", T.BOOL, []), vi("h_out", T.FLOAT, [1, 8]), vi("h_row", T.FLOAT, [1, 8])])


def rnn_weights():
    return {"W": rand(8, 8, seed=1, low=-0.5, high=0.5), "U": rand(4, 8, seed=2, low=-0.5, high=0.5),
            "b": rand(8, seed=3, low=-0.1, high=0.1)}


@pytest.mark.parametrize("fmt", FORMATS)
def test_constant_trip_count_with_scan_outputs(fmt, tmp_path):
    """M = 6 and cond = true are initializers: the scan outputs are [6, 1, 8] and [6]; the
    body (MatMul + Add + Tanh, an RNN step over the rows of x) runs in a real loop."""
    body = rnn_body()
    body.output.append(vi("i_row", T.INT64, []))
    body.node.append(mk("Identity", ["i"], ["i_row"]))
    nodes = [mk("Loop", ["M", "cond", "h0"], ["h", "hs", "its"], body=body, name="rnn")]
    m = model(nodes, [("x", T.FLOAT, [6, 1, 4]), ("h0", T.FLOAT, [1, 8])],
              [("h", T.FLOAT, [1, 8]), ("hs", T.FLOAT, [6, 1, 8]), ("its", T.INT64, [6])],
              {"M": np.array(6, np.int64), "cond": np.array(True), **rnn_weights()})
    check_runs(m, [{"x": rand(6, 1, 4, seed=s), "h0": rand(1, 8, seed=s + 9)} for s in range(2)], tmp_path, fmt)
    kinds = task_kinds(m, tmp_path)
    switches = [label for kind, label in kinds if kind == "MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX"]
    assert len(switches) == 2 and switches[1].endswith("_next"), kinds   # the loop's entry and its back edge
    assert sum("Tanh" in label for _, label in kinds) == 1, kinds       # the body once, not unrolled


@pytest.mark.parametrize("fmt", FORMATS)
def test_run_time_trip_count_from_an_input(fmt, tmp_path):
    """y = y * 0.5 + x + iteration_num, M times, M a model input: one compiled body, replayed M
    times (the launches grow by the same count per iteration)."""
    body = helper.make_graph(
        [mk("Identity", ["c_in"], ["c_out"]), mk("Cast", ["i"], ["fi"], to=T.FLOAT),
         mk("Mul", ["y_in", "half"], ["h"]), mk("Add", ["h", "x"], ["hx"]), mk("Add", ["hx", "fi"], ["y_out"])],
        "body", counter_inputs(("y_in", T.FLOAT, [2, 3])), [vi("c_out", T.BOOL, []), vi("y_out", T.FLOAT, [2, 3])])
    nodes = [mk("Loop", ["M", "", "y0"], ["y"], body=body, name="loop")]
    m = model(nodes, [("x", T.FLOAT, [2, 3]), ("y0", T.FLOAT, [2, 3]), ("M", T.INT64, [])],
              [("y", T.FLOAT, [2, 3])], {"half": np.array(0.5, np.float32)})
    trips = [0, 1, 2, 7, 3]
    launches = check_runs(m, [{"x": rand(2, 3, seed=t), "y0": rand(2, 3, seed=t + 1), "M": np.array(t, np.int64)}
                              for t in trips], tmp_path, fmt)
    per = (launches[2] - launches[1])
    assert per > 0 and all(n == launches[0] + t * per for n, t in zip(launches, trips)), launches


def while_model(cond_input=True):
    """A while loop: x = x * 1.5 + 0.25 and n = n + 1 while max(x) < limit (the body computes the
    condition); M absent."""
    body = helper.make_graph(
        [mk("Mul", ["x_in", "k"], ["xk"]), mk("Add", ["xk", "q"], ["x_out"]), mk("Add", ["n_in", "one"], ["n_out"]),
         mk("ReduceMax", ["x_out"], ["top"], keepdims=0), mk("Less", ["top", "limit"], ["c_out"])],
        "while_body", counter_inputs(("x_in", T.FLOAT, [4]), ("n_in", T.INT64, [])),
        [vi("c_out", T.BOOL, []), vi("x_out", T.FLOAT, [4]), vi("n_out", T.INT64, [])])
    nodes = [mk("Loop", ["", "go", "x0", "zero"], ["x", "n"], body=body, name="while")]
    return model(nodes, [("x0", T.FLOAT, [4]), ("limit", T.FLOAT, []), ("go", T.BOOL, [])],
                 [("x", T.FLOAT, [4]), ("n", T.INT64, [])],
                 {"k": np.array(1.5, np.float32), "q": np.array(0.25, np.float32), "one": np.array(1, np.int64),
                  "zero": np.array(0, np.int64)})


@pytest.mark.parametrize("fmt", FORMATS)
def test_run_time_condition_computed_in_the_body(fmt, tmp_path):
    """Stops when a value exceeds a threshold: 0, 1 and many iterations by the inputs, and not at all
    when cond starts false."""
    m = while_model()
    feeds = [{"x0": np.array([1, 2, 3, 4], np.float32), "limit": np.array(lim, np.float32), "go": np.array(go)}
             for lim, go in ((100.0, True), (9.0, True), (3.0, True), (1e6, True), (100.0, False))]
    check_runs(m, feeds, tmp_path, fmt)
    assert [int(ort_run(m, f)[1]) for f in feeds] == [8, 2, 1, 31, 0]   # the cases do take different paths


def test_values_living_across_a_loop_keep_their_memory_for_all_of_it(tmp_path):
    """iteration_num, the body's cond input and the loop's index are written before the loop and
    read in it: the memory plan keeps each live from before the body's label to its switch back,
    so no value of the body reuses their bytes. (The carried input is the output's buffer: the
    Loop's output is a view of it.)"""
    body = rnn_body()
    del body.output[2]
    m = model([mk("Loop", ["M", "", "h0"], ["h"], body=body, name="rnn")],
              [("x", T.FLOAT, [5, 1, 4]), ("h0", T.FLOAT, [1, 8]), ("M", T.INT64, [])], [("h", T.FLOAT, [1, 8])],
              rnn_weights())
    om2gen.compile(m, tmp_path / "rnn.om2", debug=True)
    with zipfile.ZipFile(tmp_path / "rnn.om2") as z:
        plan = json.loads(z.read(layout.memory_plan_json(0)))
        labels = [t["label"] for t in json.loads(z.read(layout.task_info_json(0)))["tasks"]]
    body_start = next(i for i, x in enumerate(labels) if x.endswith("LabelSet_body"))
    back = next(i for i, x in enumerate(labels) if x.endswith("LabelSwitchByIndex_next"))
    buffers = {b["name"]: b for b in plan["buffers"]}
    across = ("rnn/body/i", "rnn/body/c_in", "rnn:loop_index")
    for name in across:
        assert buffers[name]["first_task"] < body_start and buffers[name]["last_task"] >= back, buffers[name]
    inside = [b for b in plan["buffers"] if body_start < b["first_task"] and b["last_task"] < back]
    assert inside   # the body's own values: live within one iteration
    assert {v["name"]: v["place"]["kind"] for v in plan["views"]}["h"] == "OUTPUT"
    for b in inside:
        for a in across:
            o = buffers[a]
            assert b["end"] <= o["offset"] or o["end"] <= b["offset"], (a, b)


def test_an_outer_value_the_body_reads_first_keeps_its_bytes_for_every_iteration(tmp_path):
    """z (computed before the loop) is read only by the body's first MatMul; a later value of
    the body of its size could take its bytes, and the next iteration would read them."""
    body = helper.make_graph(
        [mk("Identity", ["c_in"], ["c_out"]), mk("MatMul", ["z", "W"], ["a"]), mk("MatMul", ["y_in", "W"], ["b"]),
         mk("Add", ["a", "b"], ["y_out"])],
        "body", counter_inputs(("y_in", T.FLOAT, [4, 16])), [vi("c_out", T.BOOL, []), vi("y_out", T.FLOAT, [4, 16])])
    nodes = [mk("Neg", ["x"], ["z"]), mk("Loop", ["M", "", "x"], ["y"], body=body, name="loop"),
             mk("Relu", ["y"], ["r"])]
    m = model(nodes, [("x", T.FLOAT, [4, 16]), ("M", T.INT64, [])], [("r", T.FLOAT, [4, 16])],
              {"W": rand(16, 16, seed=5, low=-0.3, high=0.3)})
    check_runs(m, [{"x": rand(4, 16, seed=1), "M": np.array(t, np.int64)} for t in (3, 1)], tmp_path, "om2",
               fusion="off")


@pytest.mark.parametrize("fmt", FORMATS)
def test_rnn_step_with_a_run_time_trip_count(fmt, tmp_path):
    """MatMul + Add + Tanh per step over the first M rows of x: the carried state only."""
    body = rnn_body()
    del body.output[2]
    nodes = [mk("Loop", ["M", "", "h0"], ["h"], body=body, name="rnn")]
    m = model(nodes, [("x", T.FLOAT, [5, 1, 4]), ("h0", T.FLOAT, [1, 8]), ("M", T.INT64, [])],
              [("h", T.FLOAT, [1, 8])], rnn_weights())
    check_runs(m, [{"x": rand(5, 1, 4, seed=t), "h0": rand(1, 8, seed=t), "M": np.array(t, np.int64)}
                   for t in (5, 0, 3)], tmp_path, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_if_inside_a_loop_body(fmt, tmp_path):
    """Each iteration picks a branch by the parity of iteration_num: the If's switch jumps forward
    inside the loop's body, the loop's switch back to its start."""
    def branch(name, op):
        return helper.make_graph([mk(op, ["y_in", "x"], [f"{name}_o"])], name, [], [vi(f"{name}_o", T.FLOAT, [3])])
    body = helper.make_graph(
        [mk("Identity", ["c_in"], ["c_out"]), mk("Mod", ["i", "two"], ["r"]), mk("Equal", ["r", "zero"], ["even"]),
         mk("If", ["even"], ["y_out"], then_branch=branch("add", "Add"), else_branch=branch("mul", "Mul"))],
        "body", counter_inputs(("y_in", T.FLOAT, [3])), [vi("c_out", T.BOOL, []), vi("y_out", T.FLOAT, [3])])
    nodes = [mk("Loop", ["M", "", "y0"], ["y"], body=body, name="loop")]
    m = model(nodes, [("x", T.FLOAT, [3]), ("y0", T.FLOAT, [3]), ("M", T.INT64, [])], [("y", T.FLOAT, [3])],
              {"two": np.array(2, np.int64), "zero": np.array(0, np.int64)})
    check_runs(m, [{"x": rand(3, seed=t, low=0.5, high=1.5), "y0": rand(3, seed=t), "M": np.array(t, np.int64)}
                   for t in (5, 0, 1, 4)], tmp_path, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_loop_inside_an_if_branch(fmt, tmp_path):
    """A run-time If whose then branch is a while loop and whose else branch is one Neg."""
    loop = mk("Loop", ["", "go", "x0", "zero"], ["t_x", "t_n"], body=while_model().graph.node[0].attribute[0].g,
              name="inner_while")
    then = helper.make_graph([loop], "then", [], [vi("t_x", T.FLOAT, [4])])
    other = helper.make_graph([mk("Neg", ["x0"], ["e_x"])], "else", [], [vi("e_x", T.FLOAT, [4])])
    nodes = [mk("If", ["flag"], ["y"], then_branch=then, else_branch=other, name="if")]
    m = model(nodes, [("x0", T.FLOAT, [4]), ("limit", T.FLOAT, []), ("go", T.BOOL, []), ("flag", T.BOOL, [])],
              [("y", T.FLOAT, [4])], {"k": np.array(1.5, np.float32), "q": np.array(0.25, np.float32),
                                      "one": np.array(1, np.int64), "zero": np.array(0, np.int64)})
    x0 = np.array([1, 2, 3, 4], np.float32)
    check_runs(m, [{"x0": x0, "limit": np.array(lim, np.float32), "go": np.array(True), "flag": np.array(flag)}
                   for lim, flag in ((100.0, True), (100.0, False), (3.0, True))], tmp_path, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_nested_loops_and_a_swap_of_carried_values(fmt, tmp_path):
    """An inner loop (run-time count) inside an outer one; the outer body swaps its two carried
    values (a parallel assignment: each must read the other's old value) and carries
    iteration_num out as a third."""
    inner = helper.make_graph(
        [mk("Identity", ["ci"], ["co"]), mk("Add", ["z_in", "a_in"], ["z_out"])],
        "inner", counter_inputs(("z_in", T.FLOAT, [3]), i="j", c="ci"),
        [vi("co", T.BOOL, []), vi("z_out", T.FLOAT, [3])])
    outer = helper.make_graph(
        [mk("Identity", ["c_in"], ["c_out"]), mk("Loop", ["K", "", "b_in"], ["inner_z"], body=inner, name="inner"),
         mk("Identity", ["i"], ["last_i"])],
        "outer", counter_inputs(("a_in", T.FLOAT, [3]), ("b_in", T.FLOAT, [3]), ("n_in", T.INT64, [])),
        [vi("c_out", T.BOOL, []), vi("inner_z", T.FLOAT, [3]), vi("a_in", T.FLOAT, [3]), vi("last_i", T.INT64, [])])
    nodes = [mk("Loop", ["M", "", "a0", "b0", "n0"], ["a", "b", "n"], body=outer, name="outer")]
    m = model(nodes, [("a0", T.FLOAT, [3]), ("b0", T.FLOAT, [3]), ("M", T.INT64, []), ("K", T.INT64, [])],
              [("a", T.FLOAT, [3]), ("b", T.FLOAT, [3]), ("n", T.INT64, [])], {"n0": np.array(-1, np.int64)})
    check_runs(m, [{"a0": rand(3, seed=1), "b0": rand(3, seed=2), "M": np.array(mm, np.int64),
                    "K": np.array(kk, np.int64)} for mm, kk in ((3, 2), (4, 0), (0, 3), (1, 1))], tmp_path, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_zero_iterations(fmt, tmp_path):
    """M = 0 at compile time: the scan output is [0, 3] and the carried values keep their initial
    values; at run time (M = 0, or cond false) likewise."""
    body = helper.make_graph(
        [mk("Identity", ["c_in"], ["c_out"]), mk("Add", ["y_in", "x"], ["y_out"]), mk("Identity", ["y_out"], ["row"])],
        "body", counter_inputs(("y_in", T.FLOAT, [3])),
        [vi("c_out", T.BOOL, []), vi("y_out", T.FLOAT, [3]), vi("row", T.FLOAT, [3])])
    nodes = [mk("Loop", ["M", "", "y0"], ["y", "rows"], body=body, name="loop"), mk("Relu", ["y"], ["r"])]
    m = model(nodes, [("x", T.FLOAT, [3]), ("y0", T.FLOAT, [3])], [("r", T.FLOAT, [3]), ("rows", T.FLOAT, [0, 3])],
              {"M": np.array(0, np.int64)})
    check_runs(m, [{"x": rand(3), "y0": rand(3, seed=4)}], tmp_path, fmt)
    (tmp_path / "rt").mkdir()
    body2 = helper.make_graph(list(body.node), "body2", counter_inputs(("y_in", T.FLOAT, [3])),
                              [vi("c_out", T.BOOL, []), vi("y_out", T.FLOAT, [3])])
    nodes = [mk("Loop", ["M", "go", "y0"], ["y"], body=body2, name="loop")]
    m = model(nodes, [("x", T.FLOAT, [3]), ("y0", T.FLOAT, [3]), ("M", T.INT64, []), ("go", T.BOOL, [])],
              [("y", T.FLOAT, [3])])
    check_runs(m, [{"x": rand(3), "y0": rand(3, seed=4), "M": np.array(mm, np.int64), "go": np.array(go)}
                   for mm, go in ((0, True), (3, False), (-2, True), (2, True))], tmp_path / "rt", fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_loop_in_a_gear_model(fmt, tmp_path):
    """Each gear has its own loop (its body reads and writes that gear's values); in a .om each
    gear's Loop has its body subgraph beside the gear's."""
    body = helper.make_graph(
        [mk("Identity", ["c_in"], ["c_out"]), mk("Mul", ["y_in", "x"], ["y_out"])],
        "body", counter_inputs(("y_in", T.FLOAT, [None, 3])),
        [vi("c_out", T.BOOL, []), vi("y_out", T.FLOAT, [None, 3])])
    m = model([mk("Loop", ["M", "", "x"], ["y"], body=body, name="loop")],
              [("x", T.FLOAT, ["b", 3]), ("M", T.INT64, [])], [("y", T.FLOAT, ["b", 3])])
    check_runs(m, [{"x": rand(b, 3, seed=b), "M": np.array(b + 1, np.int64)} for b in (1, 4, 2)], tmp_path, fmt,
               input_shapes={"x": (-1, 3)}, dynamic_batch_size=[1, 2, 4])


def slice_by_iteration_model(trips_input: bool, opset: int = 17):
    """ONNX's own test_loop11: the body Slices a constant by iteration_num, so its shapes need the
    iteration number at compile time."""
    x = np.array([1, 2, 3, 4, 5], np.float32)

    def unsqueeze(src, out):
        return mk("Unsqueeze", [src], [out], axes=[0]) if opset < 13 else mk("Unsqueeze", [src, "axes"], [out])
    body = helper.make_graph(
        [mk("Identity", ["c_in"], ["c_out"]), mk("Add", ["i", "one"], ["end"]),
         unsqueeze("i", "start1"), unsqueeze("end", "end1"),
         mk("Slice", ["x", "start1", "end1"], ["piece"]), mk("Add", ["y_in", "piece"], ["y_out"]),
         mk("Identity", ["y_out"], ["row"])],
        "body", counter_inputs(("y_in", T.FLOAT, [1])),
        [vi("c_out", T.BOOL, []), vi("y_out", T.FLOAT, [1]), vi("row", T.FLOAT, [1])])
    nodes = [mk("Loop", ["M", "cond", "y0"], ["y", "rows"], body=body, name="loop11")]
    inits = {"x": x, "one": np.array(1, np.int64), "axes": np.array([0], np.int64), "cond": np.array(True)}
    inputs = [("y0", T.FLOAT, [1])]
    if trips_input:
        inputs.append(("M", T.INT64, []))
    else:
        inits["M"] = np.array(5, np.int64)
    return model(nodes, inputs, [("y", T.FLOAT, [1]), ("rows", T.FLOAT, [5, 1])], inits, opset)


@pytest.mark.parametrize("opset", [11, 13, 16])
def test_opsets(opset, tmp_path):
    """Loop-11, -13 and -16 differ only in the types they allow (sequences, optionals): the RNN
    with scan outputs and the unrolled loop at each (opset 11: Unsqueeze's axes an attribute)."""
    body = rnn_body()
    nodes = [mk("Loop", ["M", "cond", "h0"], ["h", "hs"], body=body, name="rnn")]
    m = model(nodes, [("x", T.FLOAT, [3, 1, 4]), ("h0", T.FLOAT, [1, 8])],
              [("h", T.FLOAT, [1, 8]), ("hs", T.FLOAT, [3, 1, 8])],
              {"M": np.array(3, np.int64), "cond": np.array(True), **rnn_weights()}, opset)
    check_runs(m, [{"x": rand(3, 1, 4), "h0": rand(1, 8, seed=7)}], tmp_path, "om2")
    (tmp_path / "unrolled").mkdir()
    check_runs(slice_by_iteration_model(False, opset), [{"y0": np.array([-2], np.float32)}], tmp_path / "unrolled",
               "om2")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_body_needing_its_iteration_number_at_compile_time_is_unrolled(fmt, tmp_path):
    """The real loop cannot be compiled (the Slice's bounds are the iteration number), so with the
    trip count known the loop is unrolled: no label task, five Slices."""
    m = slice_by_iteration_model(trips_input=False)
    check_runs(m, [{"y0": np.array([-2], np.float32)}], tmp_path, fmt)
    kinds = task_kinds(m, tmp_path)
    assert not any("LABEL" in kind for kind, _ in kinds), kinds


def test_an_unrollable_body_with_a_run_time_trip_count_names_the_input_to_freeze(tmp_path):
    with pytest.raises(om2gen.ShapeError) as info:
        om2gen.compile(slice_by_iteration_model(trips_input=True), tmp_path / "x.om2")
    msg = str(info.value)
    assert info.value.value_name == "M" and "loop11" in msg and "input_values={'M': V}" in msg, msg
    assert "iteration number" in msg and "Slice" in msg, msg


def test_a_while_loop_without_cond_ignores_the_body_cond_as_the_spec_says(tmp_path):
    """Loop(M, "", ...): a for loop, and the body's cond output is ignored (the spec's `cond =
    ...; // ignored`); ONNX Runtime stops on it instead, so the reference here is the spec's."""
    body = helper.make_graph(
        [mk("Less", ["i", "two"], ["c_out"]), mk("Add", ["n_in", "one"], ["n_out"])],
        "body", counter_inputs(("n_in", T.INT64, [])), [vi("c_out", T.BOOL, []), vi("n_out", T.INT64, [])])
    m = model([mk("Loop", ["M", "", "zero"], ["n"], body=body)], [("M", T.INT64, [])], [("n", T.INT64, [])],
              {"two": np.array(2, np.int64), "one": np.array(1, np.int64), "zero": np.array(0, np.int64)})
    with om2gen.load(compiled(m, tmp_path, "om2")) as loaded:
        assert int(loaded.run({"M": np.array(6, np.int64)})["n"]) == 6
    assert int(ort_run(m, {"M": np.array(6, np.int64)})[0]) == 3   # ONNX Runtime's reading: stops at i = 2


# --- refusals ----------------------------------------------------------------------------------

def scan_model(m_input: bool, cond_computed: bool):
    body = helper.make_graph(
        [mk("Add", ["y_in", "x"], ["y_out"]), mk("Identity", ["y_out"], ["row"]),
         mk("ReduceSum", ["y_out"], ["s"], keepdims=0), mk("Less", ["s", "ten"], ["c_out"]) if cond_computed
         else mk("Identity", ["c_in"], ["c_out"])],
        "body", counter_inputs(("y_in", T.FLOAT, [3])),
        [vi("c_out", T.BOOL, []), vi("y_out", T.FLOAT, [3]), vi("row", T.FLOAT, [3])])
    inits = {"ten": np.array(10, np.float32), "cond": np.array(True)}
    inputs = [("x", T.FLOAT, [3])]
    if m_input:
        inputs.append(("M", T.INT64, []))
    else:
        inits["M"] = np.array(4, np.int64)
    return model([mk("Loop", ["M", "cond", "x"], ["y", "rows"], body=body, name="scanner")], inputs,
                 [("y", T.FLOAT, [3]), ("rows", T.FLOAT, [None, 3])], inits)


def test_scan_outputs_with_a_run_time_trip_count_are_refused(tmp_path):
    with pytest.raises(om2gen.ShapeError) as info:
        om2gen.compile(scan_model(m_input=True, cond_computed=False), tmp_path / "x.om2")
    msg = str(info.value)
    assert info.value.value_name == "M" and "'scanner' (Loop)" in msg and "'row'" in msg, msg
    assert "M must be a constant" in msg and "input_values={'M': V}" in msg, msg
    # frozen, the trip count is known and the scan output is [4, 3]
    x = rand(3)
    om2gen.compile(scan_model(m_input=True, cond_computed=False), tmp_path / "f.om2", input_values={"M": 4})
    with om2gen.load(tmp_path / "f.om2") as loaded:
        got = loaded.run({"x": x})
    for name, ref in zip(["y", "rows"], ort_run(scan_model(m_input=True, cond_computed=False),
                                                {"x": x, "M": np.array(4, np.int64)})):
        assert_close(got[name], ref, name)


def test_scan_outputs_of_a_while_loop_have_a_data_dependent_row_count(tmp_path):
    """Its cond computed, its M a constant: the scan rows are a count in 0~M that the run decides
    (docs/dynamic-shapes.md, "Data-dependent shapes"); one archive, several inputs."""
    m = scan_model(m_input=False, cond_computed=True)
    om2gen.compile(m, tmp_path / "x.om2")
    with om2gen.load(tmp_path / "x.om2") as loaded:
        for scale in (5.0, 1.0, 0.4, 0.01):
            x = np.full(3, scale, np.float32)
            got = loaded.run({"x": x})
            for name, ref in zip(["y", "rows"], ort_run(m, {"x": x})):
                assert got[name].shape == ref.shape, (scale, name)
                assert_close(got[name], ref, name)


def test_a_carried_value_changing_shape_is_refused(tmp_path):
    body = helper.make_graph(
        [mk("Identity", ["c_in"], ["c_out"]), mk("Concat", ["y_in", "y_in"], ["y_out"], axis=0)],
        "body", counter_inputs(("y_in", T.FLOAT, [2])), [vi("c_out", T.BOOL, []), vi("y_out", T.FLOAT, [None])])
    m = model([mk("Loop", ["M", "", "y0"], ["y"], body=body, name="grow")], [("y0", T.FLOAT, [2]), ("M", T.INT64, [])],
              [("y", T.FLOAT, [None])])
    with pytest.raises(om2gen.UnsupportedOpError, match=r"'grow' \(Loop\).*'y_in' starts as float32\[2\].*float32\[4\]"
                       r".*dynamic shapes"):
        om2gen.compile(m, tmp_path / "x.om2")


def test_sequence_loop_values_and_endless_loops_are_refused(tmp_path):
    seq = helper.make_graph(
        [mk("Identity", ["c_in"], ["c_out"]), mk("Identity", ["s_in"], ["s_out"])], "body",
        [vi("i", T.INT64, []), vi("c_in", T.BOOL, []), helper.make_tensor_sequence_value_info("s_in", T.FLOAT, None)],
        [vi("c_out", T.BOOL, []), helper.make_tensor_sequence_value_info("s_out", T.FLOAT, None)])
    m = model([mk("Loop", ["M", "", "y0"], ["s"], body=seq, name="seq")], [("y0", T.FLOAT, [2]), ("M", T.INT64, [])],
              [("s", T.FLOAT, [2])])
    with pytest.raises(om2gen.UnsupportedOpError, match=r"'seq' \(Loop\): body value 's_in' is a sequence"):
        om2gen.compile(m, tmp_path / "seq.om2")
    body = helper.make_graph([mk("Identity", ["c_in"], ["c_out"]), mk("Neg", ["y_in"], ["y_out"])], "body",
                             counter_inputs(("y_in", T.FLOAT, [2])),
                             [vi("c_out", T.BOOL, []), vi("y_out", T.FLOAT, [2])])
    endless = model([mk("Loop", ["", "yes", "y0"], ["y"], body=body, name="forever")], [("y0", T.FLOAT, [2])],
                    [("y", T.FLOAT, [2])], {"yes": np.array(True)})
    with pytest.raises(om2gen.UnsupportedOpError, match=r"'forever' \(Loop\).*never ends"):
        om2gen.compile(endless, tmp_path / "forever.om2")


def test_cond_in_that_the_body_never_reads_keeps_its_bytes(tmp_path):
    """LoopNext writes the body's cond input each iteration even when no body node reads it: its
    bytes stay its own across the loop, not shared with a body value (acc_out's first element
    used to gain the bool's 1 in its low bit)."""
    m = scan_model(m_input=False, cond_computed=True)
    body = m.graph.node[0].attribute[0].g      # without its scan value
    del body.output[2], body.node[1], m.graph.node[0].output[1], m.graph.output[1]
    x = np.full(3, 0.5, np.float32)     # M ends it with cond still true: the last LoopNext writes a 1
    om2gen.compile(m, tmp_path / "x.om2")
    with om2gen.load(tmp_path / "x.om2") as loaded:
        got = loaded.run({"x": x})["y"]
    np.testing.assert_array_equal(got, ort_run(m, {"x": x})[0])


@pytest.mark.parametrize("fmt", FORMATS)
def test_carried_values_the_body_passes_through_are_read_from_outside(fmt, tmp_path):
    """paddle2onnx's form (SLANet's decoder): every weight is a carried value the body returns
    unchanged. W (a constant) is read from outside the loop, so its Transpose folds at compile
    time; v (a model input) too, read by an If inside the body; both final values are the
    initial ones (also at zero iterations), and h is an ordinary carried value."""
    then_g = helper.make_graph([mk("Add", ["hn", "v_in"], ["t"])], "then", [], [vi("t", T.FLOAT, [1, 8])])
    else_g = helper.make_graph([mk("Sub", ["hn", "v_in"], ["e"])], "else", [], [vi("e", T.FLOAT, [1, 8])])
    body = helper.make_graph(
        [mk("Identity", ["c_in"], ["c_out"]), mk("Transpose", ["W_in"], ["Wt"], perm=[1, 0]),
         mk("MatMul", ["h_in", "Wt"], ["hw"]), mk("Tanh", ["hw"], ["hn"]),
         mk("Greater", ["i", "one"], ["late"]), mk("If", ["late"], ["h_out"], then_branch=then_g, else_branch=else_g)],
        "body", counter_inputs(("h_in", T.FLOAT, [1, 8]), ("W_in", T.FLOAT, [8, 8]), ("v_in", T.FLOAT, [1, 8])),
        [vi("c_out", T.BOOL, []), vi("h_out", T.FLOAT, [1, 8]), vi("W_in", T.FLOAT, [8, 8]),
         vi("v_in", T.FLOAT, [1, 8])])
    nodes = [mk("Loop", ["M", "", "h0", "W", "v"], ["h", "W_final", "v_final"], body=body, name="decoder"),
             mk("Relu", ["W_final"], ["w_relu"])]
    m = model(nodes, [("h0", T.FLOAT, [1, 8]), ("v", T.FLOAT, [1, 8]), ("M", T.INT64, [])],
              [("h", T.FLOAT, [1, 8]), ("w_relu", T.FLOAT, [8, 8]), ("v_final", T.FLOAT, [1, 8])],
              {"W": rand(8, 8, seed=1, low=-0.5, high=0.5), "one": np.array(1, np.int64)})
    check_runs(m, [{"h0": rand(1, 8, seed=s), "v": rand(1, 8, seed=s + 5), "M": np.array(t, np.int64)}
                   for s, t in ((1, 4), (2, 0), (3, 1))], tmp_path, fmt)
    labels = [label for _, label in task_kinds(m, tmp_path)]
    assert not any("Transpose" in label for label in labels), labels
    # copies: h in and back, each If branch's result, the two final values (Identities after the loop); carried,
    # W and v would add two in and two back
    assert sum(label.endswith("_Copy") for label in labels) == 6, labels
