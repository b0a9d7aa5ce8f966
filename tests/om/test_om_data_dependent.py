"""Data-dependent counts in a classic .om, run the RT2 way (docs/dynamic-shapes.md, "The classic
.om: the RT2 path"): the executor launches up to the op that writes a count (NonZero,
NonMaxSuppression), waits, reads the count back, and runs InferShape and Tiling of the ops after
it at the count. Each .om is compiled once (the models of tests/ops/test_data_dependent.py) and
run at several inputs, each run against ONNX Runtime, the counts 0 and the largest included."""
import numpy as np
from onnx import helper, numpy_helper
from tests.helpers import ort_run
from tests.ops.test_data_dependent import NMS_BATCH_SHAPES, _boxes
from tests.ops.test_data_dependent import _check as check_against_ort
from tests.ops.test_data_dependent import (_model, _nms, _scores, _sparse, nms_dynamic_batch, nms_then_gathers,
                                           nonzero_downstream)

import om2gen
import om2gen.acl as acl
from om2gen.acl import constants as C


def _check(model, path, feeds_list, **compile_opts):
    """One .om, run at every feed against ONNX Runtime (tests/ops/test_data_dependent.py); it is
    run the RT2 way. Its RT2 counters after one more run of every feed: the arena is planned at
    the counts' bounds, so for one input shape it is allocated once."""
    check_against_ort(model, path, feeds_list, **compile_opts)
    with om2gen.load(path) as m:
        assert m.rt2_stats is not None, "not run the RT2 way"
        for feeds in feeds_list:
            m.run(feeds)
        return m.rt2_stats


def test_nonzero_alone_at_every_count(tmp_path):
    """All zeros (count 0), all non-zero (the bound) and counts between; large enough for several blocks."""
    shape = (4, 3, 2900)
    m = _model([helper.make_node("NonZero", ["x"], ["y"])], {"x": (np.float32, shape)}, {"y": (np.int64, [3, "n"])})
    feeds = [{"x": np.zeros(shape, np.float32)}, {"x": np.ones(shape, np.float32)}]
    feeds += [{"x": _sparse(shape, d, seed)} for seed, d in enumerate((0.001, 0.5, 0.97))]
    stats = _check(m, tmp_path / "nz.om", feeds)
    assert stats["runs"] == len(feeds) and stats["arena_grows"] == 1


def test_nonzero_transpose_gathernd(tmp_path):
    """x[x != 0]: the Transpose, GatherND, Gather and Add after the count tile at the count."""
    m, feeds = nonzero_downstream()
    _check(m, tmp_path / "nz.om", feeds)


def test_nms_score_thresholds(tmp_path):
    """Thresholds from none selected to the most each class keeps, one .om."""
    b, c, n = 3, 4, 120
    m = _nms({"boxes": (np.float32, [b, n, 4]), "scores": (np.float32, [b, c, n]), "score_thr": (np.float32, [1])},
             {"selected": (np.int64, ["k", 3])},
             {"max_out": np.array([7], np.int64), "iou": np.array([0.45], np.float32)}, {"center_point_box": 0})
    rng = np.random.default_rng(0)
    feeds = [{"boxes": _boxes(rng, b, n, 0), "scores": _scores(rng, b, c, n, ties=thr == 0.5),
              "score_thr": np.array([thr], np.float32)} for thr in (0.0, 0.5, 0.97, 1.0, -1.0)]
    _check(m, tmp_path / "nms.om", feeds)


def test_nms_then_gather_of_the_selected_scores(tmp_path):
    """The selected rows gather their scores and their boxes, and a Mul after; counts 0 too."""
    m, feeds = nms_then_gathers()
    _check(m, tmp_path / "nms.om", feeds)


def test_a_dynamic_batch_meets_a_count(tmp_path):
    """NonZero over [N, 5], N in 1~8: the count's bound (40) is the batch's most, the GatherND
    after reads both; batches up and down, counts 0 to all."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idx"], ["vals"])]
    m = _model(nodes, {"x": (np.float32, ["N", 5])}, {"idx": (np.int64, ["n", 2]), "vals": (np.float32, ["n"])})
    feeds = [{"x": _sparse((n, 5), d, n)} for n, d in ((1, 0.5), (8, 1.0), (3, 0.0), (8, 0.3), (5, 0.7))]
    _check(m, tmp_path / "nz.om", feeds, input_shapes={"x": ("1~8", 5)})


def test_nms_with_a_dynamic_batch(tmp_path):
    m, feeds = nms_dynamic_batch()
    _check(m, tmp_path / "nms.om", feeds, input_shapes=NMS_BATCH_SHAPES)


def test_a_count_after_a_count(tmp_path):
    """Two syncs in one run: the positive ones among x's non-zero values (a NonZero over the
    GatherND the first count sizes), then a Gather of them; the second count's bound is the first's."""
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    flat = numpy_helper.from_array(np.array([-1], np.int64), "flat")
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idx"], ["vals"]), helper.make_node("Greater", ["vals", "zero"], ["pos"]),
             helper.make_node("NonZero", ["pos"], ["pnz"]), helper.make_node("Reshape", ["pnz", "flat"], ["which"]),
             helper.make_node("Gather", ["vals", "which"], ["positive"], axis=0)]
    m = _model(nodes, {"x": (np.float32, [7, 9])}, {"vals": (np.float32, ["n"]), "positive": (np.float32, ["p"])},
               [zero, flat])
    x = _sparse((7, 9), 0.6, 3)
    _check(m, tmp_path / "two.om", [{"x": x}, {"x": np.zeros((7, 9), np.float32)}, {"x": -np.abs(x)},
                                    {"x": np.abs(x) + 1}, {"x": _sparse((7, 9), 0.2, 4)}])


def test_acl_reads_the_counts_dims_back(tmp_path):
    """Through ACL: output buffers at the count's bound (NonZero over [N, 5], N in 1~8: 40 rows),
    aclmdlGetDatasetTensorDesc gives each run's count, the first bytes hold the rows."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0])]
    m = _model(nodes, {"x": (np.float32, ["N", 5])}, {"idx": (np.int64, ["n", 2])})
    path = tmp_path / "nz.om"
    om2gen.compile(m, path, input_shapes={"x": ("1~8", 5)})
    assert acl.init() in (C.ACL_SUCCESS, C.ACL_ERROR_REPEAT_INITIALIZE)
    model_id, ret = acl.mdl.load_from_file(str(path))
    assert ret == C.ACL_SUCCESS, acl.get_recent_err_msg()
    out_np = np.empty((40, 2), np.int64)
    handles = [acl.create_data_buffer(acl.util.numpy_to_ptr(out_np), out_np.nbytes)]
    try:
        outs = acl.mdl.create_dataset()
        acl.mdl.add_dataset_buffer(outs, handles[0])
        for n, density in ((8, 1.0), (3, 0.4), (5, 0.0), (8, 0.5)):
            x = _sparse((n, 5), density, n)
            ins = acl.mdl.create_dataset()
            handles.append(acl.create_data_buffer(acl.util.numpy_to_ptr(x), x.nbytes))
            acl.mdl.add_dataset_buffer(ins, handles[-1])
            desc = acl.create_tensor_desc(0, list(x.shape), C.ACL_FORMAT_ND)   # 0: ACL_FLOAT
            assert acl.mdl.set_dataset_tensor_desc(ins, desc, 0) == C.ACL_SUCCESS
            acl.destroy_tensor_desc(desc)
            assert acl.mdl.execute(model_id, ins, outs) == C.ACL_SUCCESS, acl.get_recent_err_msg()
            want, = ort_run(m, {"x": x})
            desc = acl.mdl.get_dataset_tensor_desc(outs, 0)
            dims = [acl.get_tensor_desc_dim_v2(desc, k)[0] for k in range(acl.get_tensor_desc_num_dims(desc))]
            assert dims == list(want.shape)
            np.testing.assert_array_equal(out_np.reshape(-1)[:want.size].reshape(dims), want)
            acl.mdl.destroy_dataset(ins)
    finally:
        for h in handles:
            acl.destroy_data_buffer(h)
        acl.mdl.unload(model_id)
