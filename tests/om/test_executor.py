"""The classic-OM executor: an .om loads GE's way and runs like the OM2 archive of the same model;
om2gen.load decides the format by content, takes paths or bytes, and rejects corrupt files
with typed errors."""
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from helpers import refresh_om_digests

import om2gen
from om2gen.formats.om import proto
from om2gen.formats.om.container import Partition, read_om, write_om
from om2gen.formats.om.layout import ModelPartitionType as PT
from om2gen.native import lib

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cnn" / "model.onnx"
CUSTOM = ROOT / "samples" / "custom_op"
SHAPES = {"image": (1, 3, 32, 32)}


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    d = tmp_path_factory.mktemp("omx")
    return {"om": om2gen.compile(SAMPLE, d / "model.om", input_shapes=SHAPES, format="om"),
            "om2": om2gen.compile(SAMPLE, d / "model.om2", input_shapes=SHAPES), "dir": d}


def _image():
    return {"image": np.random.default_rng(1).standard_normal(SHAPES["image"]).astype(np.float32)}


def test_om_runs_like_om2_and_onnx_runtime(cnn):
    feeds = _image()
    ref = ort.InferenceSession(str(SAMPLE)).run(None, feeds)
    with om2gen.load(cnn["om"]) as om, om2gen.load(cnn["om2"]) as om2:
        assert om.format == "om" and om2.format == "om2"
        assert om.inputs == om2.inputs and om.outputs == om2.outputs
        a, b = om.run(feeds), om2.run(feeds)
        before = lib.om2rtGetLaunchCount()
        again = om.run(feeds)
        assert lib.om2rtGetLaunchCount() > before   # a replay of the captured tasks
    for name in a:
        assert np.array_equal(a[name], b[name]) and np.array_equal(a[name], again[name])
    np.testing.assert_allclose(list(a.values())[0], ref[0], rtol=1e-5, atol=1e-6)


def test_format_is_decided_by_content_not_extension(cnn):
    swapped_om = cnn["dir"] / "really_an_om.om2"
    swapped_om2 = cnn["dir"] / "really_an_om2.om"
    shutil.copy(cnn["om"], swapped_om)
    shutil.copy(cnn["om2"], swapped_om2)
    with om2gen.load(swapped_om) as a, om2gen.load(swapped_om2) as b:
        assert (a.format, b.format) == ("om", "om2")


def test_load_from_memory_both_formats(cnn):
    feeds = _image()
    with om2gen.load(cnn["om"]) as ref_model:
        ref = ref_model.run(feeds)
    for path in (cnn["om"], cnn["om2"]):
        data = path.read_bytes()
        with om2gen.load(data) as m:
            out = m.run(feeds)
        assert all(np.array_equal(out[k], ref[k]) for k in ref)


def test_load_phases_follow_ge_for_om_and_the_seed_for_om2(cnn):
    with om2gen.load(cnn["om"]) as om, om2gen.load(cnn["om2"]) as om2:
        om_stages = [name for name, _ in om.load_phases]
        om2_stages = [name for name, _ in om2.load_phases]
        assert all(t >= 0 for _, t in om.load_phases + om2.load_phases)
    native = ["allocate runtime resources", "register kernels", "create custom ops", "build the args table",
              "capture tasks"]
    assert om_stages[:5] == ["read the file", "parse the partition table", "parse ModelDef", "check partition digests",
                             "parse TaskDefs"]
    assert "place weights" in om_stages and "build the model tables" in om_stages
    assert om2_stages[:2] == ["read the file", "open the archive"] and "load the model library" in om2_stages
    for stages in (om_stages, om2_stages):
        assert [s for s in stages if s in native] == native


def test_execute_raw_on_caller_buffers(cnn):
    feeds = _image()
    with om2gen.load(cnn["om"]) as m:
        ref = m.run(feeds)
        out = np.empty(m.outputs[0].shape, m.outputs[0].dtype)
        m.execute_raw([feeds["image"].ctypes.data], [out.ctypes.data])
        assert np.array_equal(out, ref[m.outputs[0].name])
        with pytest.raises(om2gen.InputError, match="1 inputs and 1 outputs"):
            m.execute_raw([], [out.ctypes.data])


def test_runtime_if_runs_from_an_om(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "ops"))
    from test_control import runtime_if_model
    model = runtime_if_model()
    om = om2gen.compile(model, tmp_path / "if.om", format="om")
    sess = ort.InferenceSession(model.SerializeToString())
    with om2gen.load(om) as m:
        rng = np.random.default_rng(3)
        for cond in (True, False):
            feeds = {}
            for t in m.inputs:
                feeds[t.name] = (np.array(cond, dtype=t.dtype).reshape(t.shape) if t.dtype == np.bool_
                                 else rng.standard_normal(t.shape).astype(t.dtype))
            got = m.run(feeds)
            ref = sess.run(None, feeds)
            for (name, g), r in zip(got.items(), ref):
                np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6, err_msg=f"{name} cond={cond}")


@pytest.mark.slow
def test_custom_op_om_loads_its_libraries_from_so_bins(tmp_path):
    subprocess.run([sys.executable, str(CUSTOM / "build.py"), "--out", str(tmp_path)], check=True, timeout=600)
    subprocess.run([sys.executable, str(CUSTOM / "model.py"), "--out", str(tmp_path)], check=True, timeout=600)
    so, model = sorted(tmp_path.glob("*.so"))[0], sorted(tmp_path.glob("*.onnx"))[0]
    om = om2gen.compile(model, tmp_path / "c.om", custom_op_libs=[so], format="om")
    om2 = om2gen.compile(model, tmp_path / "c.om2", custom_op_libs=[so])
    rng = np.random.default_rng(0)
    with om2gen.load(om) as a, om2gen.load(om2) as b:
        feeds = {t.name: rng.standard_normal(t.shape).astype(t.dtype) for t in a.inputs}
        x, y = a.run(feeds), b.run(feeds)
    assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)


# ---- corrupt and foreign files ------------------------------------------------------------

def _rewrite(src: Path, dst: Path, ptype, edit, *, digests: bool = True) -> Path:
    f = read_om(src)
    parts = [Partition(p.type, edit(p.data) if p.type == ptype else p.data) for p in f.partitions]
    write_om(dst, refresh_om_digests(parts) if digests else parts, header=f.header)
    return dst


def _edit_tasks(edit):
    def apply(data):
        mtd = proto.ModelTaskDef.FromString(bytes(data))
        edit(mtd)
        return mtd.SerializeToString(deterministic=True)
    return apply


def _edit_model_def(edit):
    def apply(data):
        md = proto.ModelDef.FromString(bytes(data))
        edit(md)
        return md.SerializeToString(deterministic=True)
    return apply


def _first_kernel_task(mtd):
    return next(t for t in mtd.task if t.HasField("kernel") and t.kernel.kernel_name)


def _point_first_slot_far_away(mtd):
    kd = _first_kernel_task(mtd).kernel
    kd.args = struct.pack("<Q", 0xDEAD_0000_0000) + bytes(kd.args)[8:]


def _rename_kernel(mtd):
    _first_kernel_task(mtd).kernel.kernel_name = "NoSuchKernel_000"


def _unknown_task_type(mtd):
    mtd.task[0].type = 7   # MODEL_TASK_STREAM_SWITCH


def _short_args(mtd):
    kd = _first_kernel_task(mtd).kernel
    kd.args = bytes(kd.args)[:4]


def _bad_op_index(mtd):
    _first_kernel_task(mtd).kernel.context.op_index = 9999


def _fewer_slots(mtd):
    """args_count lowered to 1: the other addresses would be read as tiling words."""
    _first_kernel_task(mtd).kernel.context.args_count = 1


@pytest.mark.parametrize("edit, match", [
    (_point_first_slot_far_away, "address 0xdead00000000.*corrupt"),
    (_rename_kernel, "NoSuchKernel_000.*TBE_KERNELS does not hold"),
    (_unknown_task_type, "MODEL_TASK_STREAM_SWITCH task"),
    (_short_args, "args hold 4 bytes"),
    (_bad_op_index, "refers to op 9999"),
    (_fewer_slots, r"args_format .* describes \d+ address slots, args_count says 1"),
])
def test_corrupt_task_info_is_a_typed_error(cnn, tmp_path, edit, match):
    bad = _rewrite(cnn["om"], tmp_path / "bad.om", PT.TASK_INFO, _edit_tasks(edit))
    with pytest.raises(om2gen.ArchiveError, match=match):
        om2gen.load(bad)


def test_an_edited_partition_fails_its_digest(cnn, tmp_path):
    bad = _rewrite(cnn["om"], tmp_path / "bad.om", PT.TASK_INFO, _edit_tasks(_short_args), digests=False)
    with pytest.raises(om2gen.ArchiveError, match="partition TASK_INFO does not match the blake3 digest"):
        om2gen.load(bad)
    bad = _rewrite(cnn["om"], tmp_path / "w.om", PT.WEIGHTS_DATA, lambda d: bytes(d)[:-1] + b"\x01", digests=False)
    with pytest.raises(om2gen.ArchiveError, match="partition WEIGHTS_DATA does not match"):
        om2gen.load(bad)


def test_a_lost_last_task_is_refused_not_run(cnn, tmp_path):
    bad = _rewrite(cnn["om"], tmp_path / "bad.om", PT.TASK_INFO, _edit_tasks(lambda mtd: mtd.task.pop()))
    with pytest.raises(om2gen.ArchiveError, match="no task writes model output 0"):
        om2gen.load(bad)


def test_garbage_task_info_and_model_def(cnn, tmp_path):
    bad = _rewrite(cnn["om"], tmp_path / "t.om", PT.TASK_INFO, lambda d: b"\xff\xff\xff\xff" + bytes(d))
    with pytest.raises(om2gen.ArchiveError, match="TASK_INFO partition is not a valid domi.ModelTaskDef"):
        om2gen.load(bad)
    bad = _rewrite(cnn["om"], tmp_path / "m.om", PT.MODEL_DEF, lambda d: b"\x07" * 16)
    with pytest.raises(om2gen.ArchiveError, match="MODEL_DEF partition is not a valid ge.proto.ModelDef"):
        om2gen.load(bad)


def test_model_def_without_loader_attrs_or_for_another_soc(cnn, tmp_path):
    def drop_base(md):
        del md.attr["task_gen_base_addr"]
    bad = _rewrite(cnn["om"], tmp_path / "a.om", PT.MODEL_DEF, _edit_model_def(drop_base))
    with pytest.raises(om2gen.ArchiveError, match="task_gen_base_addr"):
        om2gen.load(bad)

    def ascend(md):
        md.attr["soc_version"].s = b"Ascend910B1"
    bad = _rewrite(cnn["om"], tmp_path / "b.om", PT.MODEL_DEF, _edit_model_def(ascend))
    with pytest.raises(om2gen.ArchiveError, match="soc_version 'Ascend910B1'.*not an om2gen target"):
        om2gen.load(bad)


def test_om_for_another_cpu_fails_clearly(cnn, tmp_path):
    def aarch64(md):
        md.attr["soc_version"].s = b"aarch64"
    bad = _rewrite(cnn["om"], tmp_path / "arm.om", PT.MODEL_DEF, _edit_model_def(aarch64))
    with pytest.raises(om2gen.AbiError, match="target aarch64.*recompile with --target"):
        om2gen.load(bad)


@pytest.mark.parametrize("cut", [0, 3, 100, 300, -1])
def test_truncated_om_is_a_typed_error(cnn, tmp_path, cut):
    data = cnn["om"].read_bytes()
    bad = tmp_path / "cut.om"
    bad.write_bytes(data[:cut] if cut >= 0 else data[:cut] + b"")
    with pytest.raises(om2gen.ArchiveError):
        om2gen.load(bad)


def test_foreign_file_names_both_formats(tmp_path):
    f = tmp_path / "x.bin"
    f.write_bytes(b"\x7fELF" + bytes(60))
    with pytest.raises(om2gen.ArchiveError, match="neither an OM2 archive.*nor a classic OM file"):
        om2gen.load(f)
    with pytest.raises(om2gen.ArchiveError, match="neither"):
        om2gen.load(b"hello world")


# ---- crafted files whose structure is valid but whose addresses or controls are not ------------

def _kernel_op(md, mtd):
    task = _first_kernel_task(mtd)
    return task, md.graph[0].op[task.kernel.context.op_index]


def _output_slot(kd):
    roles = [r for r in kd.context.args_format.replace("{t}", "").strip("{}").split("}{") if r]
    return roles.index("o")


def _set_slot(kd, k, addr):
    args = bytearray(kd.args)
    args[8 * k:8 * k + 8] = struct.pack("<Q", addr)
    kd.args = bytes(args)


def _om_with(src, dst, edit_md=None, edit_tasks=None):
    f = read_om(src)
    md = proto.ModelDef.FromString(bytes(f.partition(PT.MODEL_DEF)))
    mtd = proto.ModelTaskDef.FromString(bytes(f.partition(PT.TASK_INFO)))
    if edit_md:
        edit_md(md, mtd)
    if edit_tasks:
        edit_tasks(md, mtd)
    new = {PT.MODEL_DEF: md.SerializeToString(deterministic=True),
           PT.TASK_INFO: mtd.SerializeToString(deterministic=True)}
    write_om(dst, refresh_om_digests([Partition(p.type, new.get(p.type, p.data)) for p in f.partitions]), header=f.header)
    return dst


def test_a_kernel_writing_into_the_weights_is_refused(cnn, tmp_path):
    def edit(md, mtd):
        task, _ = _kernel_op(md, mtd)
        _set_slot(task.kernel, _output_slot(task.kernel), md.attr["task_gen_weight_addr"].i + 64)
    with pytest.raises(om2gen.ArchiveError, match="writes to .* inside the weights.*read-only"):
        om2gen.load(_om_with(cnn["om"], tmp_path / "w.om", edit_tasks=edit))


def test_a_tensor_running_past_its_memory_is_refused(cnn, tmp_path):
    def edit(md, mtd):
        task, op = _kernel_op(md, mtd)
        inputs = [o for o in md.graph[0].op if o.type == "Data"]
        scratch_end = inputs[0].output_i[0]
        _set_slot(task.kernel, _output_slot(task.kernel), scratch_end - 16)
    with pytest.raises(om2gen.ArchiveError, match="run past the end of"):
        om2gen.load(_om_with(cnn["om"], tmp_path / "p.om", edit_tasks=edit))


def test_overlapping_inputs_and_outputs_are_refused(cnn, tmp_path):
    def edit(md, mtd):
        ops = md.graph[0].op
        data = next(o for o in ops if o.type == "Data")
        net = next(o for o in ops if o.type == "NetOutput")
        net.input_i[0] = data.output_i[0]
    with pytest.raises(om2gen.ArchiveError, match="overlaps"):
        om2gen.load(_om_with(cnn["om"], tmp_path / "o.om", edit_md=edit))


@pytest.mark.parametrize("edit, match", [
    (lambda md, mtd: md.attr["label_num"].__setattr__("i", 10 ** 7), "label_num 10000000"),
    (lambda md, mtd: md.attr["memory_size"].__setattr__("s", b"big"), "'memory_size' is a s, not an int"),
    (lambda md, mtd: _first_kernel_task(mtd).kernel.__setattr__("block_dim", 0xFFFFFFFF), "block_dim 4294967295"),
    (lambda md, mtd: _first_kernel_task(mtd).kernel.__setattr__(
        "args", bytes(_first_kernel_task(mtd).kernel.args) + b"\0\0\0"), "args hold|tiling bytes"),
    (lambda md, mtd: next(o for o in md.graph[0].op if o.type == "Data").output_desc[0].shape.dim.extend(
        [1 << 32, 1 << 32]), "outside the feature-map memory"),
    (lambda md, mtd: next(o for o in md.graph[0].op if o.type == "Data").output_desc[0].shape.dim.extend(
        [1 << 62]), "too large for any memory"),
])
def test_out_of_range_fields_are_typed_errors(cnn, tmp_path, edit, match):
    with pytest.raises(om2gen.ArchiveError, match=match):
        om2gen.load(_om_with(cnn["om"], tmp_path / "f.om", edit_md=edit))


def test_a_backward_jump_is_refused(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "ops"))
    from test_control import runtime_if_model
    om = om2gen.compile(runtime_if_model(), tmp_path / "if.om", format="om")

    def loop(md, mtd):
        goto = next(t for t in mtd.task if t.type == 24)   # MODEL_TASK_STREAM_LABEL_GOTO
        first_set = next(t for t in mtd.task if t.type == 9)
        goto.label_goto_ex.label_id = first_set.label_set.label_id
    with pytest.raises(om2gen.ArchiveError, match="jumps back to label"):
        om2gen.load(_om_with(om, tmp_path / "loop.om", edit_tasks=loop))


def _loop_om(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "ops"))
    from test_loop import while_model
    return om2gen.compile(while_model(), tmp_path / "while.om", format="om")


def test_a_loop_back_edge_outside_its_body_is_refused(tmp_path):
    """A loop's switch back to its body runs: moved to the root graph (its task now names the entry
    switch's op), the same backward jump is no Loop's back edge any more."""
    om = _loop_om(tmp_path)
    with om2gen.load(om) as m:
        assert int(m.run({"x0": np.ones(4, np.float32), "limit": np.array(5, np.float32),
                          "go": np.array(True)})["n"]) == 4

    def outside(md, mtd):
        switches = [t for t in mtd.task if t.type == 23]   # MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX
        assert len(switches) == 2
        switches[1].label_switch_by_index.op_index = switches[0].label_switch_by_index.op_index
    with pytest.raises(om2gen.ArchiveError, match="jumps back to label .* only as the back edge of a Loop"):
        om2gen.load(_om_with(om, tmp_path / "out.om", edit_tasks=outside))


@pytest.mark.parametrize("names, match", [([], r"names the subgraphs \[\]"), (["nowhere"], "names the subgraphs"),
                                          (["while/body", "while/body"], "names the subgraphs")])
def test_a_loop_naming_no_body_of_its_own_is_refused(tmp_path, names, match):
    def edit(md, mtd):
        loop = next(o for o in md.graph[0].op if o.type == "Loop")
        del loop.subgraph_name[:]
        loop.subgraph_name.extend(names)
    with pytest.raises(om2gen.ArchiveError, match=match):
        om2gen.load(_om_with(_loop_om(tmp_path), tmp_path / "bad.om", edit_md=edit))


def test_one_model_run_from_many_threads(cnn):
    import threading
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal(SHAPES["image"]).astype(np.float32) for _ in range(4)]
    for path in (cnn["om"], cnn["om2"]):
        with om2gen.load(path) as m:
            refs = [m.run({"image": x})["probs"] for x in xs]
            wrong = []

            def worker(k):
                for _ in range(50):
                    if not np.array_equal(m.run({"image": xs[k]})["probs"], refs[k]):
                        wrong.append(k)
            threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not wrong, f"{path.name}: {len(wrong)} wrong results"


def test_load_takes_any_bytes_like_object(cnn):
    data = cnn["om"].read_bytes()
    for source in (bytearray(data), np.frombuffer(data, np.uint8), memoryview(data)):
        with om2gen.load(source) as m:
            assert m.format == "om"
    with pytest.raises(om2gen.InputError, match="file path or the model's bytes"):
        om2gen.load(12345)
