"""Dynamic models as classic .om files, run the RT2 way (issue 15, docs/dynamic-shapes.md): one
.om each, its host op library (kSpaceRegistry) giving every op's InferShape and Tiling per run,
its tensors placed in an arena that grows only at a new maximum; each run against ONNX Runtime."""
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.e2e import gear_models
from tests.e2e.test_dynamic_shapes import MODELS, _elementwise
from tests.helpers import ort_run

import om2gen
import om2gen.acl as acl
from om2gen.acl import constants as C
from om2gen.errors import InputError, ShapeError
from om2gen.formats.om import dynamic_shapes, inout_info, reader
from om2gen.formats.om.container import read_om
from om2gen.formats.om.layout import ModelPartitionType as PT
from om2gen.formats.op_so_store import SoBinType
from om2gen.native import lib

EW_SHAPES = {"x": ("1~40", 3, 8), "col": ("1~40", 3, 1)}


def _lstm():
    """An ONNX LSTM over x[S, 2, 5], its sequence length dynamic: Y and Y_h."""
    rng = np.random.default_rng(3)
    hidden, size = 6, 5
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("W", (1, 4 * hidden, size)), ("R", (1, 4 * hidden, hidden)), ("B", (1, 8 * hidden)))]
    node = helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "yh"], hidden_size=hidden)
    graph = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["S", 2, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["S", 1, 2, hidden]),
                               helper.make_tensor_value_info("yh", TensorProto.FLOAT, [1, 2, hidden])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


OM_MODELS = {
    **{name: MODELS[name] for name in ("cnn_batch", "cnn_image", "encoder")},
    "lstm": (_lstm, {"x": ("1~64", 2, 5)}, lambda rng, n: {"x": rng.standard_normal((4 * n, 2, 5)).astype(np.float32)}),
}


def _check(model, m, feeds, what):
    for got, want in zip(model.run(feeds).values(), ort_run(m, feeds)):
        assert got.shape == want.shape, what
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=what)


def _with_intermediates():
    """y = softmax(relu(x) * col over the last axis) + x, x[N, 3, 8], col[N, 3, 1]: the product and
    the softmax are tensors of the arena (element-wise fusion leaves the Softmax apart)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "col"], ["p"]),
             helper.make_node("Softmax", ["p"], ["s"], axis=2), helper.make_node("Add", ["s", "x"], ["y"])]
    graph = helper.make_graph(nodes, "arena", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8]),
                                               helper.make_tensor_value_info("col", TensorProto.FLOAT, ["N", 3, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def elementwise(tmp_path_factory):
    m = _elementwise()
    path = tmp_path_factory.mktemp("om_dyn") / "ew.om"
    om2gen.compile(m, path, input_shapes=EW_SHAPES)
    return m, path


@pytest.mark.parametrize("name", sorted(OM_MODELS))
def test_models_at_several_shapes_match_onnx_runtime(name, tmp_path):
    """A CNN with a dynamic batch, one with dynamic H and W, the BERT-style encoder layer with a
    dynamic sequence and an LSTM over a dynamic sequence: one .om each. The arena grows exactly at
    the runs that need more than any before, and is reused by the others."""
    build, shapes, feeds = OM_MODELS[name]
    m = build()
    om2gen.compile(m, tmp_path / "m.om", input_shapes=shapes)
    rng = np.random.default_rng(7)
    with om2gen.load(tmp_path / "m.om") as model:
        assert -1 in model.inputs[0].shape
        before = model.rt2_stats
        for n in (1, 3, 16, 9, 2, 16):
            _check(model, m, feeds(rng, n), f"{name} at size {n}")
            now = model.rt2_stats
            grew = now["plan_bytes"] > before["arena_bytes"]
            assert now["arena_grows"] == before["arena_grows"] + grew, f"{name} at size {n}"
            assert now["arena_bytes"] == (now["plan_bytes"] if grew else before["arena_bytes"])
            before = now
        assert now["runs"] == 6 and now["arena_grows"] < 6


def test_the_arena_grows_at_a_new_maximum_and_is_reused(tmp_path):
    m = _with_intermediates()
    path = tmp_path / "arena.om"
    om2gen.compile(m, path, input_shapes=EW_SHAPES)
    rng = np.random.default_rng(0)

    def feeds(n):
        return {"x": rng.standard_normal((n, 3, 8)).astype(np.float32),
                "col": rng.standard_normal((n, 3, 1)).astype(np.float32)}
    with om2gen.load(path) as model:
        _check(model, m, feeds(4), "4")
        first = model.rt2_stats
        _check(model, m, feeds(30), "30")            # larger than any before: the arena grows
        grown = model.rt2_stats
        assert grown["arena_grows"] == first["arena_grows"] + 1 and grown["arena_bytes"] > first["arena_bytes"]
        live = lib.om2rtGetLiveAllocationCount()
        for n in (2, 30, 11):                        # then smaller and equal: reused, nothing allocated
            _check(model, m, feeds(n), str(n))
        assert lib.om2rtGetLiveAllocationCount() == live
        after = model.rt2_stats
        assert (after["arena_grows"], after["arena_bytes"]) == (grown["arena_grows"], grown["arena_bytes"])
        assert after["plan_bytes"] < after["arena_bytes"]     # the last run (11) used part of it


def test_shapes_outside_the_model_are_input_errors(elementwise):
    _, path = elementwise
    with om2gen.load(path) as model:
        assert [t.max_shape for t in model.inputs + model.outputs] == [(40, 3, 8), (40, 3, 1), (40, 3, 8), (40, 3, 8)]
        ok = {"x": np.zeros((4, 3, 8), np.float32), "col": np.zeros((4, 3, 1), np.float32)}
        for feeds, match in ((dict(ok, x=np.zeros((41, 3, 8), np.float32)), r"'x'.*dim 0 \(N\) must be in 1~40"),
                             (dict(ok, x=np.zeros((4, 3, 9), np.float32)), r"'x'.*dim 2 must be 8"),
                             (dict(ok, col=np.zeros((5, 3, 1), np.float32)), r"tensor col has dim 0 = 5.* 4"),
                             (dict(ok, x=np.zeros((4, 3), np.float32)), r"takes rank 3")):
            with pytest.raises(InputError, match=match):
                model.run(feeds)
        assert model.run(ok)["y"].shape == (4, 3, 8)    # the model still runs after refusals


def test_an_unbounded_dim_runs_in_an_om_and_is_refused_for_an_om2(tmp_path):
    """-1 without a range: any size, the arena grows to it; an .om2 (planned for the largest
    sizes) still refuses it. A CNN's GEMMs over an unbounded batch keep the tile planned for
    symbolic.PLANNING_SIZE and take as many as the run needs."""
    m = _with_intermediates()
    shapes = {"x": (-1, 3, 8), "col": (-1, 3, 1)}
    om2gen.compile(m, tmp_path / "u.om", input_shapes=shapes)
    rng = np.random.default_rng(1)
    with om2gen.load(tmp_path / "u.om") as model:
        assert model.inputs[0].shape == (-1, 3, 8) and model.inputs[0].max_shape is None
        assert model.inputs[0].nbytes == 0 == model.outputs[0].nbytes    # each run's shapes decide
        for n in (3, 5000, 7):
            _check(model, m, {"x": rng.standard_normal((n, 3, 8)).astype(np.float32),
                              "col": rng.standard_normal((n, 3, 1)).astype(np.float32)}, f"size {n}")
        assert model.rt2_stats["arena_bytes"] >= 5000 * 3 * 8 * 4
    with pytest.raises(ShapeError, match="no upper bound"):
        om2gen.compile(m, tmp_path / "u.om2", input_shapes=shapes)
    cnn = gear_models.cnn_batch()
    om2gen.compile(cnn, tmp_path / "cnn.om", input_shapes={"x": (-1, 3, 16, 16)})
    with om2gen.load(tmp_path / "cnn.om") as model:
        for n in (2, 300, 1):
            _check(model, cnn, {"x": rng.standard_normal((n, 3, 16, 16)).astype(np.float32)}, f"batch {n}")


def test_so_bins_hold_the_host_op_library_as_space_registry(elementwise):
    """The seed's rule: a dynamic-shape model packs its host op library as kSpaceRegistry
    (so_in_om_flag 0x8000), named for the host OS and CPU, vendor om2gen; no PREPROCESS_KERNEL
    task, so no device tiling library. MODEL_DEF keeps -1 dims with GE's shape_range, and the
    header says is_unknow_model."""
    _, path = elementwise
    om = read_om(path.read_bytes())
    parsed = reader.read(om, str(path))
    assert om.header.is_unknow_model == 1
    assert [b.bin_type for b in parsed.so_bins] == [SoBinType.kSpaceRegistry]
    b = parsed.so_bins[0]
    assert b.vendor == "vendors/om2gen" and b.name.startswith("libom2_op_host_") and b.name.endswith(
        "_linux_x86_64.so")
    assert parsed.model_def.attr["so_in_om_flag"].i == 0x8000
    assert {t.task_type.name for t in parsed.program.tasks} == {"MODEL_TASK_KERNEL"}
    assert [d.shape for d in parsed.program.inputs] == [(-1, 3, 8), (-1, 3, 1)]
    ins, outs = dynamic_shapes.ranges(parsed.model_def.graph[0])
    assert ins == {0: [(1, 40), (3, 3), (8, 8)], 1: [(1, 40), (3, 3), (1, 1)]} and outs[0] == [(1, 40), (3, 3), (8, 8)]
    inout = inout_info.parse(next(p.data for p in om.partitions if p.type == PT.MODEL_INOUT_INFO))
    assert [t.shape_range for t in inout.inputs] == [((1, 40), (3, 3), (8, 8)), ((1, 40), (3, 3), (1, 1))]


def test_inspect_shows_the_host_op_library_and_the_ranges(elementwise):
    _, path = elementwise
    out = subprocess.run([sys.executable, "-m", "om2gen", "inspect", str(path)], capture_output=True, text=True,
                         check=True).stdout
    assert "so_in_om_flag 0x8000: kSpaceRegistry" in out
    assert "vendors/om2gen/libom2_op_host_" in out and "_linux_x86_64.so" in out
    assert "input  x: float32[-1, 3, 8] range [1~40, 3, 8]" in out


def test_acl_sets_input_shapes_and_reads_output_shapes(elementwise):
    """aclmdlSetDatasetTensorDesc gives each run's input shapes, aclmdlGetDatasetTensorDesc reads
    the outputs' shapes back; an input without one is refused."""
    m, path = elementwise
    assert acl.init() in (C.ACL_SUCCESS, C.ACL_ERROR_REPEAT_INITIALIZE)
    model_id, ret = acl.mdl.load_from_file(str(path))
    assert ret == C.ACL_SUCCESS, acl.get_recent_err_msg()
    rng = np.random.default_rng(2)
    outs_np = [np.empty((40, 3, 8), np.float32) for _ in range(2)]
    handles = []
    try:
        outs = acl.mdl.create_dataset()
        for a in outs_np:
            handles.append(acl.create_data_buffer(acl.util.numpy_to_ptr(a), a.nbytes))
            acl.mdl.add_dataset_buffer(outs, handles[-1])
        for n in (6, 40, 3):
            feeds = {"x": rng.standard_normal((n, 3, 8)).astype(np.float32),
                     "col": rng.standard_normal((n, 3, 1)).astype(np.float32)}
            ins = acl.mdl.create_dataset()
            for i, a in enumerate(feeds.values()):
                handles.append(acl.create_data_buffer(acl.util.numpy_to_ptr(a), a.nbytes))
                acl.mdl.add_dataset_buffer(ins, handles[-1])
                desc = acl.create_tensor_desc(0, list(a.shape), C.ACL_FORMAT_ND)   # 0: ACL_FLOAT
                assert acl.mdl.set_dataset_tensor_desc(ins, desc, i) == C.ACL_SUCCESS
                acl.destroy_tensor_desc(desc)
            assert acl.mdl.execute(model_id, ins, outs) == C.ACL_SUCCESS, acl.get_recent_err_msg()
            for j, want in enumerate(ort_run(m, feeds)):
                desc = acl.mdl.get_dataset_tensor_desc(outs, j)
                dims = [acl.get_tensor_desc_dim_v2(desc, k)[0] for k in range(acl.get_tensor_desc_num_dims(desc))]
                assert dims == list(want.shape)
                got = outs_np[j].reshape(-1)[:want.size].reshape(dims)
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
            acl.mdl.destroy_dataset(ins)
        bare = acl.mdl.create_dataset()
        for a in feeds.values():
            handles.append(acl.create_data_buffer(acl.util.numpy_to_ptr(a), a.nbytes))
            acl.mdl.add_dataset_buffer(bare, handles[-1])
        assert acl.mdl.execute(model_id, bare, outs) == C.ACL_ERROR_INVALID_PARAM
        assert "set_dataset_tensor_desc" in acl.get_recent_err_msg()
    finally:
        for h in handles:
            acl.destroy_data_buffer(h)
        acl.mdl.unload(model_id)


def test_the_om_loads_from_bytes_and_compiles_to_the_same_bytes(elementwise, tmp_path):
    m, path = elementwise
    om2gen.compile(m, tmp_path / "again.om", input_shapes=EW_SHAPES)
    assert (tmp_path / "again.om").read_bytes() == path.read_bytes()
    with om2gen.load(path.read_bytes()) as model:
        x = np.ones((3, 3, 8), np.float32)
        assert model.run({"x": x, "col": x[..., :1]})["z"].shape == (3, 3, 8)


def test_a_host_op_library_of_another_version_is_refused():
    """The loader checks the table's version (OM2_OP_HOST_VERSION) before reading anything else."""
    from om2gen.errors import AbiError
    from om2gen.native import ffi
    from om2gen.runtime import rt2

    table = ffi.new("Om2OpHostTable *", {"version": lib.OM2_OP_HOST_VERSION + 1})
    get = ffi.callback("Om2OpHostGetTableFunc", lambda: table)

    class Library:
        name = "libom2_op_host_0_linux_x86_64.so"

        def symbol(self, name):
            return int(ffi.cast("uintptr_t", get)) if name == "Om2OpHostGetTable" else 0
    with pytest.raises(AbiError, match=f"table version {lib.OM2_OP_HOST_VERSION + 1}, this executor runs version "
                                       f"{lib.OM2_OP_HOST_VERSION}"):
        rt2.host_table(Library(), "m.om")
    table.version = lib.OM2_OP_HOST_VERSION
    assert rt2.host_table(Library(), "m.om").version == lib.OM2_OP_HOST_VERSION


def test_convert_refuses_a_dynamic_om(elementwise, tmp_path):
    from om2gen.cli.convert import convert
    _, path = elementwise
    with pytest.raises(om2gen.Om2Error, match="dynamic-shape OM"):
        convert(path, tmp_path / "ew.om2")
    assert not list(tmp_path.iterdir())


def test_a_host_op_library_is_checked_against_task_info(elementwise, tmp_path):
    """Another model's host op library does not fit this model's TASK_INFO: refused at load, naming
    the first disagreement, before anything runs."""
    from om2gen.errors import ArchiveError
    from om2gen.runtime import rt2
    from om2gen.so_in_om import loading

    _, path = elementwise
    om2gen.compile(_lstm(), tmp_path / "lstm.om", input_shapes={"x": ("1~8", 2, 5)})
    ours = reader.read(read_om(path.read_bytes()), "ew.om")
    theirs = reader.read(read_om((tmp_path / "lstm.om").read_bytes()), "lstm.om")
    sos = loading.load_packed(theirs.so_bins, "lstm.om")
    try:
        table = rt2.host_table(sos.op_host[0], "lstm.om")
        with pytest.raises(ArchiveError, match="inconsistent"):
            rt2.check_tasks(table, ours.program, "ew.om")
        rt2.check_tasks(table, theirs.program, "lstm.om")    # its own model's tasks fit
    finally:
        sos.close()


def test_om2gen_bench_runs_a_dynamic_om_at_its_largest_shape(elementwise, tmp_path, capsys):
    """om2gen bench feeds a dynamic input its largest shape; an unbounded one needs --input."""
    from om2gen.cli.entry import main
    _, path = elementwise
    run = ["--runs", "3", "--warmup", "1", "--loads", "2", "--threads", "1"]
    assert main(["bench", str(path), *run]) == 0
    assert "x[40,3,8], col[40,3,1]" in capsys.readouterr().out
    om2gen.compile(_elementwise(), tmp_path / "u.om", input_shapes={"x": (-1, 3, 8), "col": (-1, 3, 1)})
    assert main(["bench", str(tmp_path / "u.om"), *run]) != 0
    assert "unbounded dim: pass --input x=FILE.npy" in capsys.readouterr().err


def test_a_multiple_of_dim_binds_its_symbol_and_refuses_other_sizes(tmp_path):
    """lo~hi%m: the host op library's symbol counts the m's (the input dim / m), and a size m does
    not divide is an InputError, as for an .om2."""
    m = _elementwise()
    om2gen.compile(m, tmp_path / "m.om", input_shapes={"x": ("8~40%8", 3, 8), "col": ("8~40%8", 3, 1)})
    rng = np.random.default_rng(4)
    with om2gen.load(tmp_path / "m.om") as model:
        for n in (16, 40, 8):
            _check(model, m, {"x": rng.standard_normal((n, 3, 8)).astype(np.float32),
                              "col": rng.standard_normal((n, 3, 1)).astype(np.float32)}, f"size {n}")
        with pytest.raises(InputError, match="multiple of 8"):
            model.run({"x": np.zeros((12, 3, 8), np.float32), "col": np.zeros((12, 3, 1), np.float32)})
