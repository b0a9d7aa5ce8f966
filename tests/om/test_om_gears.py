"""Gears in the classic OM (docs/om-format.md, *Gears*): the same gear model as an .om — GE's
Case and one subgraph per gear in MODEL_DEF — runs every gear like ONNX Runtime, reads back
into the GearTable the compiler made, converts to an equivalent .om2, and a corrupted gear
attribute is a clean ArchiveError."""
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_close, ort_run, refresh_om_digests

import om2gen
from om2gen.cli.convert import convert
from om2gen.formats.om import proto, reader, writer
from om2gen.formats.om.container import Partition, read_om, write_om
from om2gen.formats.om.layout import ModelPartitionType as PT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import gear_models  # noqa: E402

pytestmark = pytest.mark.needs_cc

# name: (model, compile options, per gear the feeds' shapes)
MODELS = {
    "batch": (gear_models.cnn_batch, {"input_shapes": {"x": (-1, 3, 16, 16)}, "dynamic_batch_size": "1,2,4"},
              [{"x": (b, 3, 16, 16)} for b in (1, 2, 4)]),
    "image": (gear_models.cnn_image, {"input_shapes": {"x": (1, 3, -1, -1)}, "dynamic_image_size": "16,16;24,32"},
              [{"x": (1, 3, 16, 16)}, {"x": (1, 3, 24, 32)}]),
    "dims": (gear_models.encoder, {"input_shapes": {"input_ids": (1, -1)}, "dynamic_dims": "8;16;32"},
             [{"input_ids": (1, s)} for s in (8, 16, 32)]),
}
META_KEYS = ("dynamic_type", "dynamic_batch_info", "user_designate_shape_order", "dynamic_output_shape",
             "dynamic_dims", "inputs", "outputs")


@pytest.fixture(scope="module")
def oms(tmp_path_factory):
    """Each model as .om, with the Program the compiler wrote it from."""
    d = tmp_path_factory.mktemp("om_gears")
    programs, original = {}, writer.write

    def keep(path, program, *args):
        programs[Path(path).stem] = program
        return original(path, program, *args)

    writer.write = keep
    try:
        paths = {name: om2gen.compile(make(), d / f"{name}.om", format="om", **opts)
                 for name, (make, opts, _) in MODELS.items()}
    finally:
        writer.write = original
    return {"paths": paths, "programs": programs, "dir": d}


def _feeds(shapes: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {n: (rng.integers(0, 50, s).astype(np.int64) if n == "input_ids" else
                rng.standard_normal(s).astype(np.float32)) for n, s in shapes.items()}


def _model_def(path):
    return proto.ModelDef.FromString(bytes(read_om(path).partition(PT.MODEL_DEF)))


@pytest.mark.parametrize("name", MODELS)
def test_every_gear_matches_onnx_runtime(oms, name):
    make, _, gears = MODELS[name]
    model = make()
    with om2gen.load(oms["paths"][name]) as m:
        assert m.format == "om" and m.gears == gears
        for i in [*range(len(gears)), 0]:   # back to gear 0: switching gears between runs
            feeds = _feeds(gears[i], i)
            got = m.run(feeds)
            for out, ref in zip([o.name for o in model.graph.output], ort_run(model, feeds)):
                assert_close(got[out], ref, f"{name} gear {i} {out}")


@pytest.mark.parametrize("name", MODELS)
def test_the_reader_gives_back_the_compilers_gear_table(oms, name):
    program = reader.read(read_om(oms["paths"][name]), name).program
    assert program.gears == oms["programs"][name].gears
    assert [d.name for d in program.inputs][-1] == "ascend_mbatch_shape_data"


def test_model_def_holds_the_case_its_subgraphs_and_ges_attributes(oms):
    md = _model_def(oms["paths"]["batch"])
    root, *subs = md.graph
    assert [g.name for g in subs] == ["Batch_0", "Batch_1", "Batch_2"]
    ops = {op.name: op for op in root.op}
    case = ops["ascend_mbatch_shape_case"]
    assert case.type == "Case" and list(case.subgraph_name) == ["Batch_0", "Batch_1", "Batch_2"]
    assert list(case.input) == ["ascend_mbatch_shape_mapindex:0", "x:0"]
    assert case.attr["_batch_num"].i == 3 and case.attr["mbatch_dynamic_type"].i == 1
    assert [list(case.attr[f"_pred_value_{i}"].list.i) for i in range(3)] == [[1], [2], [4]]
    assert [s.decode() for s in case.attr["user_designate_shape_order"].list.s] == ["x"]
    assert case.attr["mbatch-inserted-node"].b
    assert ops["ascend_mbatch_shape_mapindex"].type == "MapIndex"
    data, shape_data = ops["x"], ops["ascend_mbatch_shape_data"]
    assert list(data.output_desc[0].shape.dim) == [4, 3, 16, 16]   # the largest gear's
    assert list(data.attr["_mbatch_origin_input_dims"].list.i) == [-1, 3, 16, 16]
    assert shape_data.attr["index"].i == 1 and list(shape_data.output_desc[0].shape.dim) == [1]
    assert shape_data.attr["_is_multi_batch_shape_data"].b and shape_data.attr["_host_tensor"].b
    net = ops["NetOutput"]
    assert [s.decode() for s in net.attr["_dynamic_output_dims"].list.s] == ["0,0,1,10", "1,0,2,10", "2,0,4,10"]
    ids = [op.id for g in md.graph for op in g.op]
    assert ids == list(range(len(ids)))
    for i, (batch, sub) in enumerate(zip((1, 2, 4), subs)):
        label = f"Batch_{i}"
        assert all(op.attr["_batch_label"].s.decode() == label for op in sub.op)
        x = next(op for op in sub.op if op.type == "Data" and op.attr["_parent_node_index"].i == 1)
        assert x.name == f"x_ascend_mbatch_batch_{i}" and list(x.output_desc[0].shape.dim) == [batch, 3, 16, 16]
        sub_net, = [op for op in sub.op if op.type == "NetOutput"]
        assert [list(td.shape.dim) for td in sub_net.input_desc] == [[batch, 10]]
        types = [op.type for op in sub.op]
        assert "LabelSet" in types and ("LabelSwitchByIndex" in types) == (i == 0)   # as GE's CaseOpLabelMaker
    # every task's op is one of MODEL_DEF's ops, a gear's kernels in its subgraph
    by_id = {op.id: (g.name, op) for g in md.graph for op in g.op}
    mtd = proto.ModelTaskDef.FromString(bytes(read_om(oms["paths"]["batch"]).partition(PT.TASK_INFO)))
    kernel_graphs = {by_id[t.kernel.context.op_index][0] for t in mtd.task if t.HasField("kernel")}
    assert kernel_graphs == {"cnn_batch", "Batch_0", "Batch_1", "Batch_2"}


def test_inspect_lists_each_gear_and_each_subgraph(oms):
    from om2gen.formats.om.inspect import inspect_om, render_text
    info = inspect_om(oms["paths"]["image"])
    model, = info["models"]
    assert model["graphs"] == ["cnn_image", "Batch_0", "Batch_1"]
    assert model["gears"]["dynamic_type"] == "dynamic image size"
    assert model["gears"]["gears"][1] == {"inputs": {"x": [1, 3, 24, 32]},
                                          "outputs": {"y": [1, 8, 12, 16], "z": [1, 8]}}
    text = render_text(info)
    assert "gear 0 [16, 16]: x[1, 3, 16, 16] -> y[1, 8, 8, 8], z[1, 8]" in text and "graph Batch_1:" in text


def test_pad_to_gear_runs_a_smaller_batch_on_the_next_gear(oms):
    model = gear_models.cnn_batch()
    x = _feeds({"x": (3, 3, 16, 16)}, 7)
    with om2gen.load(oms["paths"]["batch"], pad_to_gear=True) as m:
        got = m.run(x)
        assert got["y"].shape == (3, 10)
        assert_close(got["y"], ort_run(model, x)[0], "y")


@pytest.mark.parametrize("name", MODELS)
def test_convert_gives_an_equivalent_om2(oms, tmp_path, name):
    make, opts, gears = MODELS[name]
    converted = convert(oms["paths"][name], tmp_path / f"{name}.om2")
    with om2gen.load(oms["paths"][name]) as a, om2gen.load(converted) as b:
        assert b.gears == a.gears and b.inputs == a.inputs
        for i, shapes in enumerate(gears):
            feeds = _feeds(shapes, 10 + i)
            x, y = a.run(feeds), b.run(feeds)
            assert all(np.array_equal(x[k], y[k]) for k in x), f"gear {i}"
    direct = om2gen.compile(make(), tmp_path / f"{name}_direct.om2", **opts)
    meta = [json.loads(zipfile.ZipFile(p).read("data/model_0/model_meta.json")) for p in (converted, direct)]
    assert {k: meta[0].get(k) for k in META_KEYS} == {k: meta[1].get(k) for k in META_KEYS}


# ---- corrupt gear attributes ------------------------------------------------------------------

def _case(md):
    return next(op for op in md.graph[0].op if op.type == "Case")


def _root_op(md, name):
    return next(op for op in md.graph[0].op if op.name == name)


def _pred_value_a_string(md):
    _case(md).attr["_pred_value_1"].CopyFrom(proto.AttrDef(s=b"2"))


def _batch_num_too_big(md):
    _case(md).attr["_batch_num"].i = 7


def _unknown_dynamic_type(md):
    _case(md).attr["mbatch_dynamic_type"].i = 9


def _two_gears_alike(md):
    _case(md).attr["_pred_value_2"].list.i[:] = [2]


def _order_names_no_input(md):
    _case(md).attr["user_designate_shape_order"].list.s[:] = [b"nobody"]


def _subgraph_renamed(md):
    md.graph[2].name = "Batch_7"


def _subgraph_dropped(md):
    del md.graph[3]


def _output_dims_garbage(md):
    _root_op(md, "NetOutput").attr["_dynamic_output_dims"].list.s[:] = [b"0,0,x"]


def _output_larger_than_its_buffer(md):
    _root_op(md, "NetOutput").attr["_dynamic_output_dims"].list.s[2] = b"2,0,400,10"


def _origin_dims_of_another_rank(md):
    _root_op(md, "x").attr["_mbatch_origin_input_dims"].list.i[:] = [-1, 3]


def _gear_input_shape_wrong(md):
    data = next(op for op in md.graph[1].op if op.type == "Data" and op.attr["_parent_node_index"].i == 1)
    data.output_desc[0].shape.dim[0] = 2


def _shape_data_too_long(md):
    _root_op(md, "ascend_mbatch_shape_data").output_desc[0].shape.dim[0] = 5


def _two_ops_one_id(md):
    md.graph[1].op[0].id = md.graph[0].op[0].id


@pytest.mark.parametrize("edit, match", [
    (_pred_value_a_string, r"_pred_value_1 is a string .*not a list of ints"),
    (_batch_num_too_big, "no _pred_value_3 attribute"),
    (_unknown_dynamic_type, "mbatch_dynamic_type 9"),
    (_two_gears_alike, "two gears have the same values"),
    (_order_names_no_input, "user_designate_shape_order"),
    (_subgraph_renamed, "one per gear"),
    (_subgraph_dropped, "one per gear"),
    (_output_dims_garbage, "_dynamic_output_dims"),
    (_output_larger_than_its_buffer, "larger than its buffer"),
    (_origin_dims_of_another_rank, "does not fit its shape"),
    (_gear_input_shape_wrong, "stands for input 'x'"),
    (_shape_data_too_long, "must be int32"),
    (_two_ops_one_id, "the same id"),
])
def test_a_corrupt_gear_attribute_is_an_archive_error(oms, tmp_path, edit, match):
    f = read_om(oms["paths"]["batch"])

    def edited(data):
        md = proto.ModelDef.FromString(bytes(data))
        edit(md)
        return md.SerializeToString(deterministic=True)

    parts = [Partition(p.type, edited(p.data) if p.type == PT.MODEL_DEF else p.data) for p in f.partitions]
    bad = tmp_path / "bad.om"
    write_om(bad, refresh_om_digests(parts), header=f.header)   # digests that match: the gear checks decide
    with pytest.raises(om2gen.ArchiveError, match=match):
        om2gen.load(bad)
    with pytest.raises(om2gen.ArchiveError, match=match):
        convert(bad, tmp_path / "bad.om2")
