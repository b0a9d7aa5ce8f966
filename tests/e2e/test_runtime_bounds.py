"""Slice and Range whose bounds are run-time values (docs/dynamic-shapes.md, "Data-dependent
shapes"): the length is a count the kernel writes at run time, planned at the most the shapes
allow. Paddle's exports write `x[:, i:i+1] = v` in a Loop and `x[:, :n]` after one this way
(SLANet, tests/real_models/test_real_slanet.py). Each archive is compiled once and run at several
bounds against ONNX Runtime: lengths 0, 1 and more, negative bounds, bounds clamped at both ends.
Every test runs in both formats: an .om2 replays, a classic .om runs the RT2 way (its inputs and
outputs static in the loop tests: the host op library in SO_BINS says it runs so)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.ops.test_data_dependent import _check, _model

import om2gen
from om2gen.errors import NeedsConstantError

pytestmark = pytest.mark.parametrize("fmt", ["om2", "om"])


def _const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype), name)


# (start, end) pairs: whole, one, empty at a point, reversed, negative, far out of range both ways
_BOUNDS = [(0, 7), (2, 3), (3, 3), (5, 2), (-3, 100), (-100, 2), (6, -100), (-1, -8), (1 << 62, -(1 << 62)),
           (-(1 << 62), 1 << 62)]


@pytest.mark.parametrize("step", [1, 2, -1, -3])
def test_slice_by_run_time_bounds(tmp_path, step, fmt):
    """x[:, s:e:step] with s and e fed at run time, and a Relu after it whose size is the count."""
    nodes = [helper.make_node("Slice", ["x", "s", "e", "ax", "st"], ["y"]), helper.make_node("Relu", ["y"], ["z"])]
    m = _model(nodes, {"x": (np.float32, [2, 7, 5]), "s": (np.int64, [1]), "e": (np.int64, [1])},
               {"y": (np.float32, [2, "n", 5]), "z": (np.float32, [2, "n", 5])},
               [_const("ax", [1]), _const("st", [step])])
    x = np.random.default_rng(0).standard_normal((2, 7, 5)).astype(np.float32)
    feeds = [{"x": x, "s": np.array([s], np.int64), "e": np.array([e], np.int64)} for s, e in _BOUNDS]
    _check(m, tmp_path / f"slice.{fmt}", feeds)


def test_slice_with_one_bound_known_and_int32_bounds(tmp_path, fmt):
    """x[:n] (the start a constant, the end an int32 at run time, as slanet-plus cuts its outputs
    to the loop's step count) on the first axis, and a Neg of what is left."""
    nodes = [helper.make_node("Slice", ["x", "zero", "n"], ["y"]), helper.make_node("Neg", ["y"], ["p"])]
    m = _model(nodes, {"x": (np.float32, [9, 6]), "n": (np.int32, [1])}, {"p": (np.float32, ["k", 6])},
               [_const("zero", [0], np.int32)])
    x = np.random.default_rng(1).standard_normal((9, 6)).astype(np.float32)
    _check(m, tmp_path / f"slice.{fmt}", [{"x": x, "n": np.array([n], np.int32)} for n in (0, 1, 4, 9, 50, -2)])


def test_slice_by_a_loop_counter_inside_a_loop(tmp_path, fmt):
    """Paddle's x[:, c:c+1] in a Loop with c a carried counter (not the iteration number) that
    starts where the caller says and steps by 2: the slice is one row, then none once c runs
    past the end (or before it, from a negative start); the row (or zeros after it, when it is
    empty) is added to a carried value. The count is written every iteration and read by the
    Concat's tiling after it."""
    body = helper.make_graph(
        [helper.make_node("Add", ["c", "one"], ["c1"]),
         helper.make_node("Slice", ["x", "c", "c1", "ax"], ["row"]),
         helper.make_node("Concat", ["row", "zeros"], ["padded"], axis=1),
         helper.make_node("Slice", ["padded", "zero", "one", "ax"], ["first"]),
         helper.make_node("Squeeze", ["first", "ax"], ["red"]),
         helper.make_node("Add", ["acc", "red"], ["acc_out"]),
         helper.make_node("Add", ["c", "two"], ["c_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("c", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("acc", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("c_out", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [3, 4])],
        [_const("one", [1]), _const("two", [2]), _const("ax", [1]), _const("zero", [0]),
         numpy_helper.from_array(np.zeros((3, 1, 4), np.float32), "zeros")])
    loop = helper.make_node("Loop", ["trips", "", "c0", "acc0"], ["c_end", "acc_end"], body=body)
    m = _model([loop], {"x": (np.float32, [3, 5, 4]), "c0": (np.int64, [1])},
               {"c_end": (np.int64, [1]), "acc_end": (np.float32, [3, 4])},
               [_const("trips", 6), numpy_helper.from_array(np.zeros((3, 4), np.float32), "acc0")])
    x = np.random.default_rng(2).standard_normal((3, 5, 4)).astype(np.float32)
    _check(m, tmp_path / f"loop.{fmt}", [{"x": x, "c0": np.array([c], np.int64)} for c in (0, 1, -3, -20, 4, 30)])


def test_slice_of_two_axes_by_run_time_bounds_is_refused(tmp_path, fmt):
    m = _model([helper.make_node("Slice", ["x", "s", "e"], ["y"])],
               {"x": (np.float32, [4, 4]), "s": (np.int64, [2]), "e": (np.int64, [2])},
               {"y": (np.float32, ["a", "b"])})
    with pytest.raises(NeedsConstantError, match=r"one axis by run-time bounds.*input_values=\{.s.: V\}"):
        om2gen.compile(m, tmp_path / f"x.{fmt}")


def _clamped_range(delta: int):
    """Range(Min(Max(s, -4), 10), Min(s + 5, 10), delta) with s fed at run time: the bounds the
    Min/Max give (ops/value_bounds.py) plan it at 14, and a Mul after it reads its count."""
    nodes = [helper.make_node("Max", ["s", "lo"], ["s1"]), helper.make_node("Min", ["s1", "hi"], ["start"]),
             helper.make_node("Add", ["s", "five"], ["l0"]), helper.make_node("Min", ["l0", "hi"], ["limit"]),
             helper.make_node("Range", ["start", "limit", "d"], ["r"]), helper.make_node("Mul", ["r", "r"], ["y"])]
    return _model(nodes, {"s": (np.int64, [])}, {"r": (np.int64, ["n"]), "y": (np.int64, ["n"])},
                  [_const("lo", -4), _const("hi", 10), _const("five", 5), _const("d", delta)])


@pytest.mark.parametrize("delta", [1, 2])
def test_range_by_run_time_bounds(tmp_path, delta, fmt):
    m = _clamped_range(delta)
    _check(m, tmp_path / f"range.{fmt}", [{"s": np.array(s, np.int64)} for s in (-100, -4, 0, 3, 7, 9, 10, 50)])
    with om2gen.load(tmp_path / f"range.{fmt}") as loaded:
        assert loaded.outputs[0].max_shape == (-(-14 // delta),)


def test_an_unbounded_run_time_range_is_refused(tmp_path, fmt):
    """With delta < 0 the least limit counts, and nothing bounds s + 5 from below."""
    with pytest.raises(om2gen.ShapeError, match="nothing bounds the least limit"):
        om2gen.compile(_clamped_range(-1), tmp_path / f"x.{fmt}")


def test_range_from_a_loop_counter_inside_a_loop(tmp_path, fmt):
    """SLANet's pattern: Range(c, Min(5, c + 1), 1) with c a carried counter from 0 (bounded by
    the trip count, ops/value_bounds.py), its count 1 then 0 once c passes 5, padded to one
    element and added into a carried value; and a Range from iteration_num (0 ~ M - 1)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["c", "one"], ["c1"]), helper.make_node("Min", ["c1", "five"], ["lim"]),
         helper.make_node("Range", ["c", "lim", "one"], ["r"]),
         helper.make_node("Concat", ["r", "minus"], ["padded"], axis=0),
         helper.make_node("Gather", ["padded", "zero1"], ["first"]),
         helper.make_node("Add", ["acc", "first"], ["acc1"]),
         helper.make_node("Range", ["zero", "i", "one"], ["ri"]),
         helper.make_node("Concat", ["ri", "minus"], ["ri_padded"], axis=0),
         helper.make_node("ReduceSum", ["ri_padded"], ["ri_sum"], keepdims=1),
         helper.make_node("Add", ["acc1", "ri_sum"], ["acc_out"]),
         helper.make_node("Add", ["c", "one"], ["c_out"]), helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("c", TensorProto.INT64, []),
         helper.make_tensor_value_info("acc", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("c_out", TensorProto.INT64, []),
         helper.make_tensor_value_info("acc_out", TensorProto.INT64, [1])],
        [_const("one", 1), _const("five", 5), _const("zero", 0), _const("minus", [-1]), _const("zero1", [0])])
    loop = helper.make_node("Loop", ["trips", "go", "c0", "acc0"], ["c_end", "acc_end"], body=body)
    m = _model([loop], {"trips": (np.int64, []), "go": (np.bool_, [])},
               {"c_end": (np.int64, []), "acc_end": (np.int64, [1])},
               [_const("c0", 0), _const("acc0", [0]), _const("trips_most", 9)])
    # M is fed at run time but bounded: Min(trips, 9)
    m.graph.node.insert(0, helper.make_node("Min", ["trips", "trips_most"], ["trips9"]))
    m.graph.node[1].input[0] = "trips9"
    _check(m, tmp_path / f"loop.{fmt}",
           [{"trips": np.array(t, np.int64), "go": np.array(True)} for t in (0, 1, 3, 7, 20)])


def test_a_loop_whose_trip_count_is_bounded_only_below(tmp_path, fmt):
    """M = Max(t, 1): its bounds are (1, inf), so the carried counter has none; the loop still runs."""
    body = helper.make_graph(
        [helper.make_node("Add", ["c", "one"], ["c_out"]), helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("c", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("c_out", TensorProto.INT64, [])], [_const("one", 1)])
    nodes = [helper.make_node("Max", ["t", "one"], ["m"]),
             helper.make_node("Loop", ["m", "", "c0"], ["c_end"], body=body)]
    m = _model(nodes, {"t": (np.int64, [])}, {"c_end": (np.int64, [])}, [_const("one", 1), _const("c0", 0)])
    _check(m, tmp_path / f"loop.{fmt}", [{"t": np.array(t, np.int64)} for t in (-3, 1, 5)])
