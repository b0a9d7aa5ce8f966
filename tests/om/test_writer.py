"""Classic OM output (om2gen.formats.om.writer): compile → .om, read back, compare with the OM2 archive."""
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import om2gen
from om2gen.formats import op_so_store
from om2gen.formats.om import kernel_store, proto, reader
from om2gen.formats.om2 import layout as om2_layout
from om2gen.formats.om.container import read_om
from om2gen.formats.om.layout import ORIGINAL_OP_NAMES
from om2gen.formats.om.layout import ModelPartitionType as PT
from om2gen.ir.tasks import ModelTaskType

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cnn" / "model.onnx"
CUSTOM = ROOT / "samples" / "custom_op"
SHAPES = {"image": (1, 3, 32, 32)}


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    d = tmp_path_factory.mktemp("om")
    om = om2gen.compile(SAMPLE, d / "model.om", input_shapes=SHAPES, format="om")
    om2 = om2gen.compile(SAMPLE, d / "model.om2", input_shapes=SHAPES, debug=True)
    return {"om": om, "om2": om2, "dir": d}


def _model_def(f):
    md = proto.ModelDef()
    md.ParseFromString(f.partition(PT.MODEL_DEF))
    return md


def _task_def(f):
    t = proto.ModelTaskDef()
    t.ParseFromString(f.partition(PT.TASK_INFO))
    return t


def test_om_file_validates_and_has_the_partitions(cnn):
    data = cnn["om"].read_bytes()
    assert data[:4] == b"IMOD"
    f = read_om(data)
    assert f.header.model_num == 1 and f.header.is_unknow_model == 0
    assert f.header.model_name == "sample_cnn"
    assert [p.type for p in f.partitions] == [PT.MODEL_INOUT_INFO, PT.MODEL_DEF, PT.WEIGHTS_DATA, PT.TBE_KERNELS,
                                             PT.TASK_INFO]


def test_model_def_holds_the_graph_and_loader_attrs(cnn):
    f = read_om(cnn["om"])
    md = _model_def(f)
    assert len(md.graph) == 1
    g = md.graph[0]
    types = [op.type for op in g.op]
    assert types[0] == "Data" and types[-1] == "NetOutput"
    assert {"Conv", "Gemm", "Softmax", "Const"} <= set(types)
    assert [op.id for op in g.op] == list(range(len(g.op)))
    data = g.op[0]
    assert data.name == "image" and list(data.output_desc[0].shape.dim) == [1, 3, 32, 32]
    assert data.output_desc[0].dtype == proto.DataType.Value("DT_FLOAT") == 1
    conv = next(op for op in g.op if op.name == "conv1")
    assert conv.input[0] == "image:0" and conv.attr["_kernelname"].s
    net = g.op[-1]
    assert list(net.input) == ["softmax:0"] and list(g.output) == ["softmax:0"]
    attrs = md.attr
    for key in ("memory_size", "weight_size", "stream_num", "event_num", "label_num", "task_gen_base_addr",
                "task_gen_weight_addr", "zero_copy_memory_size"):
        assert key in attrs, key
    assert attrs["weight_size"].i == len(f.partition(PT.WEIGHTS_DATA))
    assert attrs["stream_num"].i == 1
    assert list(attrs["om_info_list"].list.i) == [len(f.partition(PT.WEIGHTS_DATA)),
                                                 len(f.partition(PT.TBE_KERNELS)), 0,
                                                 len(f.partition(PT.TASK_INFO)), 0]
    assert "so_in_om_flag" not in attrs


def test_fused_ops_name_the_ops_they_compute_as_ge_does(cnn):
    """A fused node's fused_from is GE's _datadump_original_op_names; reading the OM gives it back."""
    f = read_om(cnn["om"])
    ops = {op.name: op for op in _model_def(f).graph[0].op}
    conv = ops["conv1"]
    assert conv.type == "FusedConv" and conv.attr["_onnx_domain"].s == b"om2gen"
    assert list(conv.attr[ORIGINAL_OP_NAMES].list.s) == [b"conv1", b"bn1", b"relu1"]
    assert ORIGINAL_OP_NAMES not in ops["pool1"].attr and "nodes" not in conv.attr
    nodes = {n["name"]: n for n in reader.read(f, "model.om").program.graph_json["nodes"]}
    assert nodes["conv1"]["fused_from"] == ["conv1", "bn1", "relu1"] and nodes["pool1"]["fused_from"] == []
    assert nodes["conv1"]["attrs"] == {"activation": "Relu", "pads": [1, 1, 1, 1]}


def test_tasks_match_the_om2_task_list(cnn):
    f = read_om(cnn["om"])
    mtd = _task_def(f)
    with zipfile.ZipFile(cnn["om2"]) as z:
        om2_tasks = json.loads(z.read(om2_layout.task_info_json(0)))["tasks"]
    assert len(mtd.task) == len(om2_tasks) > 0
    assert [t.type for t in mtd.task] == [t["type_id"] for t in om2_tasks]
    ops = _model_def(f).graph[0].op
    for t, ref in zip(mtd.task, om2_tasks):
        assert t.type == ModelTaskType.MODEL_TASK_KERNEL
        k = t.kernel
        assert k.kernel_name == ref["kernel"]
        assert k.block_dim == ref["block_dim"]
        assert k.args_size == len(k.args) == ref["args_size"]
        assert k.context.args_format == ref["args_format"]
        assert ops[k.context.op_index].name == ref["op_name"]
    base = _model_def(f).attr["task_gen_base_addr"].i
    memory = _model_def(f).attr["memory_size"].i
    first = int.from_bytes(mtd.task[0].kernel.args[:8], "little")
    assert base <= first < base + memory   # input slot: a logical feature-map address


def test_tbe_kernels_are_the_om2_kernel_binaries(cnn):
    f = read_om(cnn["om"])
    kernels = dict(kernel_store.load(f.partition(PT.TBE_KERNELS)))
    with zipfile.ZipFile(cnn["om2"]) as z:
        meta = json.loads(z.read(om2_layout.model_meta(0)))
        om2_bins = {n.rsplit("/", 1)[1][:-2]: z.read(n) for n in meta["kernels"]}
    assert kernels == om2_bins
    assert all(b[:4] == b"\x7fELF" for b in kernels.values())


def test_same_model_twice_gives_identical_bytes(cnn):
    again = om2gen.compile(SAMPLE, cnn["dir"] / "again.om", input_shapes=SHAPES, format="om")
    assert again.read_bytes() == cnn["om"].read_bytes()


def test_kernel_store_round_trip_and_errors():
    data = kernel_store.build([("b", b"\x01\x02"), ("a", b"\x03")])
    assert data[:4] == (0x5D776EFD).to_bytes(4, "little")
    assert kernel_store.load(data) == [("a", b"\x03"), ("b", b"\x01\x02")]
    with pytest.raises(om2gen.ArchiveError):
        kernel_store.load(data[:-1])
    with pytest.raises(om2gen.ArchiveError):
        kernel_store.load(b"\0" * 12)


def test_cli_compile_and_inspect(cnn, tmp_path):
    out = tmp_path / "cli.om"
    r = subprocess.run([sys.executable, "-m", "om2gen", "compile", str(SAMPLE), "-o", str(out), "--format", "om",
                        "--input-shape", "image:1,3,32,32", "-q"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == cnn["om"].read_bytes()
    r = subprocess.run([sys.executable, "-m", "om2gen", "inspect", str(out), "--json"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["format"] == "om" and info["header"]["magic"] == 0x444F4D49
    m = info["models"][0]
    assert [p["type"] for p in m["partitions"]] == ["MODEL_INOUT_INFO", "MODEL_DEF", "WEIGHTS_DATA", "TBE_KERNELS",
                                                 "TASK_INFO"]
    data = out.read_bytes()
    for p in m["partitions"]:
        assert p["offset"] + p["size"] <= len(data)
    assert m["partitions"][-1]["offset"] + m["partitions"][-1]["size"] == len(data)
    with zipfile.ZipFile(cnn["om2"]) as z:
        om2_tasks = json.loads(z.read(om2_layout.task_info_json(0)))["tasks"]
    assert len(m["tasks"]) == len(om2_tasks) > 0 and all(t["kernel"] and t["block_dim"] >= 1 for t in m["tasks"])
    assert len(m["kernels"]) == len({t["kernel"] for t in m["tasks"]})
    r = subprocess.run([sys.executable, "-m", "om2gen", "inspect", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "TBE_KERNELS" in r.stdout and "MODEL_TASK_KERNEL" in r.stdout
    # OM2 archives still inspect as before
    r = subprocess.run([sys.executable, "-m", "om2gen", "inspect", str(cnn["om2"]), "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "manifest" in json.loads(r.stdout)


def test_unknown_format_is_an_error(tmp_path):
    with pytest.raises(om2gen.Om2Error, match="format"):
        om2gen.compile(SAMPLE, tmp_path / "x.om", input_shapes=SHAPES, format="om3")


@pytest.fixture(scope="module")
def custom(tmp_path_factory):
    out = tmp_path_factory.mktemp("custom_op")
    subprocess.run([sys.executable, str(CUSTOM / "build.py"), "--out", str(out)], check=True, timeout=600)
    subprocess.run([sys.executable, str(CUSTOM / "model.py"), "--out", str(out)], check=True, timeout=600)
    lib, model = sorted(out.glob("*.so"))[0], sorted(out.glob("*.onnx"))[0]
    om = om2gen.compile(model, out / "custom.om", custom_op_libs=[lib], format="om")
    return {"lib": lib, "model": model, "om": om, "dir": out}


def test_custom_op_model_packs_so_bins_and_custom_ops(custom):
    f = read_om(custom["om"])
    types = [p.type for p in f.partitions]
    assert types[:4] == [PT.SO_BINS, PT.CUSTOM_OPS, PT.MODEL_INOUT_INFO, PT.MODEL_DEF] and PT.TASK_INFO in types
    bins = op_so_store.load(f.partition(PT.SO_BINS))
    assert len(bins) == 1 and bins[0].bin_type == op_so_store.SoBinType.kCustomOp
    assert bins[0].data == custom["lib"].read_bytes()
    md = _model_def(f)
    assert md.attr["so_in_om_flag"].i == 0x1000
    assert md.attr["om_info_list"].list.i[4] == len(f.partition(PT.SO_BINS))
    items = op_so_store.load_custom_ops(f.partition(PT.CUSTOM_OPS))
    mtd = _task_def(f)
    custom_tasks = [t for t in mtd.task if t.type == ModelTaskType.MODEL_TASK_CUSTOM_KERNEL]
    assert len(items) == len(custom_tasks) > 0
    assert {i.op_type for i in items} == {"AddCustom", "ScaleShift"}
    assert [t.kernel.kernel_name for t in custom_tasks] == [i.op_type for i in items]
    assert all(t.kernel.so_name.endswith(custom["lib"].name) for t in custom_tasks)
    again = om2gen.compile(custom["model"], custom["dir"] / "again.om", custom_op_libs=[custom["lib"]], format="om")
    assert again.read_bytes() == custom["om"].read_bytes()


def test_custom_op_om_inspects(custom):
    r = subprocess.run([sys.executable, "-m", "om2gen", "inspect", str(custom["om"]), "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)["models"][0]
    assert m["so_in_om_flag"] == 0x1000 and m["so_in_om_types"] == ["kCustomOp"]
    assert [b["type"] for b in m["so_bins"]] == ["kCustomOp"]
    assert {c["op_type"] for c in m["custom_ops"]} == {"AddCustom", "ScaleShift"}
    r = subprocess.run([sys.executable, "-m", "om2gen", "inspect", str(custom["om"])], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "SO_BINS (so_in_om_flag 0x1000: kCustomOp)" in r.stdout


def test_runtime_if_gives_ge_label_tasks(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "ops"))
    from test_control import runtime_if_model
    om = om2gen.compile(runtime_if_model(), tmp_path / "if.om", format="om")
    om2 = om2gen.compile(runtime_if_model(), tmp_path / "if.om2", debug=True)
    with zipfile.ZipFile(om2) as z:
        om2_tasks = json.loads(z.read(om2_layout.task_info_json(0)))["tasks"]
    f = read_om(om)
    mtd, md = _task_def(f), _model_def(f)
    assert [t.type for t in mtd.task] == [t["type_id"] for t in om2_tasks]
    ops = md.graph[0].op
    sets = [t for t in mtd.task if t.type == ModelTaskType.MODEL_TASK_LABEL_SET]
    assert len(sets) == 3 and all(t.HasField("label_set") for t in sets)
    assert sorted(t.label_set.label_id for t in sets) == list(range(md.attr["label_num"].i))
    switch = next(t for t in mtd.task if t.type == ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX)
    sw_op = ops[switch.label_switch_by_index.op_index]
    assert sw_op.type == "LabelSwitchByIndex"
    assert len(sw_op.attr["_label_switch_list"].list.i) == switch.label_switch_by_index.label_max == 2
    assert len(sw_op.input_i) == 1
    goto = next(t for t in mtd.task if t.type == ModelTaskType.MODEL_TASK_STREAM_LABEL_GOTO)
    assert ops[goto.label_goto_ex.op_index].type == "LabelGotoEx"
    assert goto.label_goto_ex.label_id < md.attr["label_num"].i
    r = subprocess.run([sys.executable, "-m", "om2gen", "inspect", str(om)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "MODEL_TASK_LABEL_SET" in r.stdout, r.stderr


def test_archive_reader_explains_a_classic_om_file(cnn):
    from om2gen.formats.om2.reader import Archive
    with pytest.raises(om2gen.ArchiveError, match="classic OM file.*om2gen.load.*decide by content"):
        Archive(cnn["om"])


def test_compiled_om_round_trips_to_identical_bytes(cnn, custom):
    for path in (cnn["om"], custom["om"]):
        data = path.read_bytes()
        assert read_om(data).write() == data
        assert read_om(data, copy=False).write() == data
