"""Data-dependent output shapes in .om2 archives (docs/dynamic-shapes.md, "Data-dependent
shapes"): NonZero, NonMaxSuppression and a while-loop's scan rows, whose counts only the run
knows. Each archive is compiled once and run at several inputs, each run against ONNX Runtime;
the counts 0 and the largest included."""
import json
import zipfile

import numpy as np
import pytest
from helpers import ort_run
from onnx import TensorProto, helper, numpy_helper

import om2gen
from om2gen.cli.inspect import inspect_archive, render_text
from om2gen.errors import UnsupportedOpError
from om2gen.formats.om2 import layout

COVERS = {"NonZero", "NonMaxSuppression"}

_TYPES = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.int32: TensorProto.INT32,
          np.bool_: TensorProto.BOOL, np.uint8: TensorProto.UINT8}


def _model(nodes, inputs: dict, outputs: dict, inits=(), opset=13):
    """inputs/outputs: {name: (numpy dtype, dims)}."""
    return helper.make_model(helper.make_graph(
        nodes, "datadep", [helper.make_tensor_value_info(n, _TYPES[t], d) for n, (t, d) in inputs.items()],
        [helper.make_tensor_value_info(n, _TYPES[t], d) for n, (t, d) in outputs.items()], list(inits)),
        opset_imports=[helper.make_opsetid("", opset)])


def _check(model, path, feeds_list, **compile_opts):
    """One archive, run at every feed, each result ONNX Runtime's: the dims and the indices
    exactly, floats to rounding."""
    om2gen.compile(model, path, **compile_opts)
    with om2gen.load(path) as m:
        for feeds in feeds_list:
            got = m.run(feeds)
            want = ort_run(model, feeds)
            for (name, g), w in zip(got.items(), want):
                assert g.shape == w.shape, (name, g.shape, w.shape)
                if g.dtype.kind == "f":
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=name)
                else:
                    np.testing.assert_array_equal(g, w, err_msg=name)
    return path


def _sparse(shape, density, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    return np.where(rng.random(shape) < density, x, 0).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_nonzero_alone_at_every_count(tmp_path, dtype):
    """All zeros (count 0), all non-zero (the planned maximum) and counts between, one archive;
    the input large enough that the kernels split it across blocks."""
    shape = (4, 3, 2900)
    m = _model([helper.make_node("NonZero", ["x"], ["y"])], {"x": (dtype, shape)}, {"y": (np.int64, [3, "n"])})
    feeds = [{"x": np.zeros(shape, dtype)}, {"x": np.ones(shape, dtype)}]
    feeds += [{"x": _sparse(shape, d, seed, dtype)} for seed, d in enumerate((0.001, 0.5, 0.97))]
    _check(m, tmp_path / "nz.om2", feeds)


def test_nonzero_of_a_scalar_and_of_one_dim(tmp_path):
    m = _model([helper.make_node("NonZero", ["s"], ["ys"]), helper.make_node("NonZero", ["v"], ["yv"])],
               {"s": (np.float32, []), "v": (np.int64, [7])}, {"ys": (np.int64, [1, "a"]), "yv": (np.int64, [1, "b"])})
    cases = ((0, np.zeros(7, np.int64)), (2.5, np.array([0, 3, 0, -1, 0, 0, 9])), (-1, np.arange(1, 8)))
    _check(m, tmp_path / "nz.om2", [{"s": np.array(s, np.float32), "v": v} for s, v in cases])


def nonzero_downstream():
    """x[x != 0] as exported models write it: NonZero -> Transpose -> GatherND (the count is the
    rows of the transpose and the length of the gather), and a Gather of a row of NonZero's output
    (the column indices of the non-zero elements), with an Add after it: kernels whose tiling is
    the run's count. The model and its feeds."""
    shape = (6, 50)
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idx"], ["vals"]),
             helper.make_node("Gather", ["nz", "one"], ["cols"], axis=0),
             helper.make_node("Add", ["vals", "vals"], ["twice"])]
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    m = _model(nodes, {"x": (np.float32, shape)},
               {"idx": (np.int64, ["n", 2]), "vals": (np.float32, ["n"]), "cols": (np.int64, ["n"]),
                "twice": (np.float32, ["n"])}, [one])
    return m, [{"x": _sparse(shape, d, seed)} for seed, d in enumerate((0.0, 0.1, 1.0, 0.6))]


def test_nonzero_count_used_downstream(tmp_path):
    m, feeds = nonzero_downstream()
    _check(m, tmp_path / "nz.om2", feeds)


def test_a_masks_indices_squeezed_gather_its_values(tmp_path):
    """torch's x[x > t]: Greater -> NonZero -> Squeeze (a view of [1, count]) -> Gather, then an
    Unsqueeze and a Softmax over the count; a threshold none passes (count 0) and one all do."""
    ax = numpy_helper.from_array(np.array([0], np.int64), "ax")
    nodes = [helper.make_node("Greater", ["x", "thr"], ["mask"]), helper.make_node("NonZero", ["mask"], ["nz"]),
             helper.make_node("Squeeze", ["nz", "ax"], ["idx"]),
             helper.make_node("Gather", ["x", "idx"], ["vals"], axis=0),
             helper.make_node("Unsqueeze", ["vals", "ax"], ["row"]), helper.make_node("Softmax", ["row"], ["sm"], axis=1)]
    m = _model(nodes, {"x": (np.float32, [100]), "thr": (np.float32, [])},
               {"idx": (np.int64, ["n"]), "sm": (np.float32, [1, "n"])}, [ax])
    rng = np.random.default_rng(0)
    _check(m, tmp_path / "mask.om2", [{"x": rng.standard_normal(100).astype(np.float32), "thr": np.array(t, np.float32)}
                                      for t in (0.0, 1.5, 9.0, -9.0)])


def test_a_dynamic_batch_meets_a_data_dependent_count(tmp_path):
    """The input's batch is a symbol of its range, the count one of 0~(its most): the count's
    bound comes from the batch's, and the GatherND after them reads both."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idx"], ["vals"])]
    m = _model(nodes, {"x": (np.float32, ["N", 5])}, {"idx": (np.int64, ["n", 2]), "vals": (np.float32, ["n"])})
    feeds = [{"x": _sparse((n, 5), d, n)} for n, d in ((1, 0.5), (8, 1.0), (3, 0.0), (8, 0.3), (5, 0.7))]
    path = _check(m, tmp_path / "nz.om2", feeds, input_shapes={"x": ("1~8", 5)})
    with zipfile.ZipFile(path) as z:
        d = json.loads(z.read(layout.model_meta(0)))["dynamic_shapes"]
    count, = [s for s in d["symbols"] if "producer" in s]
    assert count["range"] == [0, 40] and count["input"] == -1 and count["producer"]
    assert d["outputs"][1] == [count["name"]]
    text = render_text(inspect_archive(path))
    assert f"dynamic dim {count['name']}: 0~40 (the count node {count['producer']} writes)" in text, text


def _boxes(rng, batches, n, center_point_box):
    """Boxes crowded into a small field, so that many overlap; corners in either order."""
    corner = rng.random((batches, n, 2)).astype(np.float32) * 10
    size = (rng.random((batches, n, 2)) * 4 + 0.2).astype(np.float32)
    if center_point_box:
        return np.concatenate([corner, size], axis=2)
    other = corner + size
    flip = rng.random((batches, n, 1)) < 0.3
    return np.concatenate([np.where(flip, other, corner), np.where(flip, corner, other)], axis=2)[..., [1, 0, 3, 2]]


def _scores(rng, batches, classes, n, ties=False):
    if ties:    # few distinct values: equal scores are taken by the smaller box index first
        return (rng.integers(0, 5, (batches, classes, n)) / 4).astype(np.float32)
    return rng.random((batches, classes, n)).astype(np.float32)


def _nms(inputs, outputs, consts, attrs, extra=(), opset=11):
    """NonMaxSuppression over (boxes, scores, max_output_boxes_per_class, iou_threshold,
    score_threshold): each optional one a constant (consts), a model input (inputs) or omitted."""
    names = ["boxes", "scores", "max_out", "iou", "score_thr"]
    while names[-1] not in inputs and names[-1] not in consts:
        names.pop()
    given = [n if n in inputs or n in consts else "" for n in names]
    inits = [numpy_helper.from_array(v, n) for n, v in consts.items()]
    return _model([helper.make_node("NonMaxSuppression", given, ["selected"], **attrs), *extra], inputs,
                  outputs, inits, opset=opset)


@pytest.mark.parametrize("center_point_box", [0, 1])
def test_nms_score_thresholds_at_run_time(tmp_path, center_point_box):
    """The score threshold a run-time input: every count from none selected to the most a class
    keeps; several batches and classes, enough boxes for several blocks."""
    b, c, n = 3, 4, 120
    m = _nms({"boxes": (np.float32, [b, n, 4]), "scores": (np.float32, [b, c, n]), "score_thr": (np.float32, [1])},
             {"selected": (np.int64, ["k", 3])},
             {"max_out": np.array([7], np.int64), "iou": np.array([0.45], np.float32)},
             {"center_point_box": center_point_box})
    rng = np.random.default_rng(center_point_box)
    feeds = [{"boxes": _boxes(rng, b, n, center_point_box), "scores": _scores(rng, b, c, n, ties=thr == 0.5),
              "score_thr": np.array([thr], np.float32)} for thr in (0.0, 0.5, 0.97, 0.999, 1.0, -1.0)]
    _check(m, tmp_path / "nms.om2", feeds)


def test_nms_every_parameter_at_run_time(tmp_path):
    """max_output_boxes_per_class and iou_threshold run-time inputs too (the count's bound is then
    every box of every class), including a max of 0 and a negative one (none kept)."""
    b, c, n = 2, 3, 40
    m = _nms({"boxes": (np.float32, [b, n, 4]), "scores": (np.float32, [b, c, n]), "max_out": (np.int64, [1]),
              "iou": (np.float32, [1]), "score_thr": (np.float32, [1])}, {"selected": (np.int64, ["k", 3])}, {}, {})
    rng = np.random.default_rng(3)
    feeds = []
    for most, iou, thr in ((10, 0.5, 0.2), (0, 0.5, 0.0), (100, 0.0, 0.0), (100, 1.0, 0.3), (-3, 0.5, 0.0), (2, 0.3, 0.9)):
        feeds.append({"boxes": _boxes(rng, b, n, 0), "scores": _scores(rng, b, c, n),
                      "max_out": np.array([most], np.int64), "iou": np.array([iou], np.float32),
                      "score_thr": np.array([thr], np.float32)})
    _check(m, tmp_path / "nms.om2", feeds)


def test_nms_with_constants_and_without_a_score_threshold(tmp_path):
    """Opset 10, every parameter constant, no score threshold (every box a candidate), ties."""
    b, c, n = 2, 2, 30
    m = _nms({"boxes": (np.float32, [b, n, 4]), "scores": (np.float32, [b, c, n])}, {"selected": (np.int64, ["k", 3])},
             {"max_out": np.array(50, np.int64), "iou": np.array(0.3, np.float32)}, {}, opset=10)
    rng = np.random.default_rng(4)
    _check(m, tmp_path / "nms.om2", [{"boxes": _boxes(rng, b, n, 0), "scores": _scores(rng, b, c, n, ties=t)}
                                     for t in (False, True, False)])


def test_nms_without_max_output_selects_nothing(tmp_path):
    """max_output_boxes_per_class omitted is 0 (ONNX): the count is the int 0, no kernel runs."""
    m = _nms({"boxes": (np.float32, [1, 5, 4]), "scores": (np.float32, [1, 1, 5])}, {"selected": (np.int64, ["k", 3])},
             {}, {})
    rng = np.random.default_rng(5)
    _check(m, tmp_path / "nms.om2", [{"boxes": _boxes(rng, 1, 5, 0), "scores": _scores(rng, 1, 1, 5)}])


def nms_then_gathers():
    """A detector's postprocess: the selected (batch, class, box) rows gather their scores
    (GatherND) and their boxes' coordinates (Gather of the box column, then of the boxes). The
    model and its feeds."""
    b, c, n = 2, 3, 60
    two = numpy_helper.from_array(np.array(2, np.int64), "two")
    extra = [helper.make_node("GatherND", ["scores", "selected"], ["picked"]),
             helper.make_node("Gather", ["selected", "two"], ["box_index"], axis=1),
             helper.make_node("Gather", ["flat_boxes", "box_index"], ["picked_boxes"], axis=0),
             helper.make_node("Mul", ["picked", "picked"], ["squared"])]
    m = _nms({"boxes": (np.float32, [b, n, 4]), "scores": (np.float32, [b, c, n]), "score_thr": (np.float32, [1]),
              "flat_boxes": (np.float32, [n, 4])},
             {"selected": (np.int64, ["k", 3]), "picked": (np.float32, ["k"]), "picked_boxes": (np.float32, ["k", 4]),
              "squared": (np.float32, ["k"])},
             {"max_out": np.array([5], np.int64), "iou": np.array([0.5], np.float32)}, {}, extra=extra)
    m.graph.initializer.append(two)
    rng = np.random.default_rng(6)
    feeds = []
    for thr in (0.1, 0.8, 1.0, 0.5):
        boxes = _boxes(rng, b, n, 0)
        feeds.append({"boxes": boxes, "scores": _scores(rng, b, c, n), "score_thr": np.array([thr], np.float32),
                      "flat_boxes": boxes[0]})
    return m, feeds


def test_nms_then_the_scores_of_the_selected_boxes(tmp_path):
    m, feeds = nms_then_gathers()
    _check(m, tmp_path / "nms.om2", feeds)


NMS_BATCH_SHAPES = {"boxes": ("1~4", 25, 4), "scores": ("1~4", 3, 25)}


def nms_dynamic_batch():
    """The batch a symbol in 1~4 (NMS_BATCH_SHAPES), the count one in 0~4*3*6: the model and
    feeds at every batch."""
    m = _nms({"boxes": (np.float32, ["N", 25, 4]), "scores": (np.float32, ["N", 3, 25]),
              "score_thr": (np.float32, [1])}, {"selected": (np.int64, ["k", 3])},
             {"max_out": np.array([6], np.int64), "iou": np.array([0.4], np.float32)}, {"center_point_box": 1})
    rng = np.random.default_rng(7)
    return m, [{"boxes": _boxes(rng, nb, 25, 1), "scores": _scores(rng, nb, 3, 25),
                "score_thr": np.array([t], np.float32)} for nb, t in ((1, 0.2), (4, 0.0), (2, 1.0), (4, 0.6), (3, 0.3))]


def test_nms_with_a_dynamic_batch(tmp_path):
    m, feeds = nms_dynamic_batch()
    _check(m, tmp_path / "nms.om2", feeds, input_shapes=NMS_BATCH_SHAPES)


def test_an_op_whose_lowering_needs_more_than_a_count_is_refused_by_name(tmp_path):
    """A reduction over what may be no elements is named at lowering, with advice that fits a
    count rather than input ranges; an Einsum over the count (a transpose) runs."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Cast", ["nz"], ["f"], to=1)]
    m = _model(nodes + [helper.make_node("ReduceMax", ["f"], ["y"], axes=[1], keepdims=0)],
               {"x": (np.float32, [4, 4])}, {"y": (np.float32, [2])}, opset=13)
    with pytest.raises(UnsupportedOpError,
                       match=r"ReduceMax_2 \(ReduceMax\): its lowering asks .*count only the run knows"):
        om2gen.compile(m, tmp_path / "m.om2")
    m = _model(nodes + [helper.make_node("Einsum", ["f"], ["y"], equation="ij->ji")], {"x": (np.float32, [4, 4])},
               {"y": (np.float32, ["n", 2])}, opset=13)
    _check(m, tmp_path / "e.om2", [{"x": _sparse((4, 4), d, 3)} for d in (0.0, 0.4, 1.0)])


def _while_loop(m_input: bool = False):
    """acc += x while sum(acc) < limit, at most 10 times (M), each iteration's acc a scan row; the
    scan output then doubled and summed per row (kernels after it whose sizes are the rows)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"]),
         helper.make_node("Identity", ["acc_out"], ["row"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("row", TensorProto.FLOAT, [3])])
    nodes = [helper.make_node("Loop", ["M", "go", "acc0"], ["acc", "rows"], body=body),
             helper.make_node("Add", ["rows", "rows"], ["twice"]),
             helper.make_node("ReduceSum", ["twice", "axis1"], ["per_row"], keepdims=0)]
    inits = [numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    inputs = {"acc0": (np.float32, [3]), "x": (np.float32, [3]), "limit": (np.float32, []), "go": (np.bool_, [])}
    if m_input:
        inputs["M"] = (np.int64, [])
    else:
        inits.append(numpy_helper.from_array(np.array(10, np.int64), "M"))
    return _model(nodes, inputs, {"acc": (np.float32, [3]), "rows": (np.float32, ["n", 3]),
                                  "per_row": (np.float32, ["n"])}, inits)


def test_loop_scan_rows_decided_by_its_condition(tmp_path):
    """ONNX Loop with a run-time condition and a constant M: its scan output's rows are a count
    in 0~M that the loop's control steps write: none (cond false from the start: the kernels after
    the loop run over 0 rows), one (the body runs before its cond is tested), some, and M (the
    bound)."""
    m = _while_loop()
    feeds = [{"acc0": np.zeros(3, np.float32), "x": np.ones(3, np.float32), "limit": np.array(t, np.float32),
              "go": np.array(go)} for t, go in ((0.0, True), (7.5, True), (100.0, False), (100.0, True), (14.9, True))]
    _check(m, tmp_path / "loop.om2", feeds)


def test_loop_scan_rows_with_a_run_time_m_bounded_by_a_min(tmp_path):
    """M fed at run time as Min(M_in, 6): the scan rows are a count in 0~6 the control kernels
    write, whether M or the condition ends the loop."""
    m = _while_loop(m_input=True)
    m.graph.node.insert(0, helper.make_node("Min", ["M", "six"], ["M6"]))
    m.graph.node[1].input[0] = "M6"
    m.graph.initializer.append(numpy_helper.from_array(np.array(6, np.int64), "six"))
    feeds = [{"acc0": np.zeros(3, np.float32), "x": np.ones(3, np.float32), "limit": np.array(t, np.float32),
              "go": np.array(True), "M": np.array(k, np.int64)} for t, k in ((100.0, 3), (100.0, 50), (7.5, 50),
                                                                            (100.0, 0), (0.0, 4), (100.0, -2))]
    for fmt in ("om2", "om"):
        _check(m, tmp_path / f"loop.{fmt}", feeds)


def test_loop_scan_rows_with_a_run_time_m_are_refused(tmp_path):
    with pytest.raises(UnsupportedOpError, match="M must be a constant or bounded .*, and this Loop's is computed at "
                                                 "run time, with nothing bounding it"):
        om2gen.compile(_while_loop(m_input=True), tmp_path / "loop.om2")


def test_a_count_in_a_gear_model_is_refused(tmp_path):
    """Gears compile a static graph per shape; a count asks for a range instead."""
    m = _model([helper.make_node("NonZero", ["x"], ["y"])], {"x": (np.float32, ["N", 5])}, {"y": (np.int64, [2, "n"])})
    with pytest.raises(UnsupportedOpError, match=r"NonZero_0' \(NonZero\).*a range lo~hi instead of gears"):
        om2gen.compile(m, tmp_path / "g.om2", input_shapes={"x": (-1, 5)}, dynamic_batch_size=[1, 4])
