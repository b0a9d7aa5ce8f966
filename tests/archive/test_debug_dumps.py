"""The debug dumps and the generated tables agree with the program they describe (issue 13)."""
import json
import zipfile

import pytest

from om2gen.codegen.kernels import tiling_fields
from om2gen.formats.om2 import layout


@pytest.fixture(scope="module")
def entries(sample_cnn_debug):
    with zipfile.ZipFile(sample_cnn_debug) as z:
        return {n: z.read(n) for n in z.namelist()}


def _json(entries, name):
    return json.loads(entries[name])


def _tables(entries) -> str:
    return next(v.decode() for n, v in entries.items() if n.endswith("_tables.cpp"))


def test_task_tiling_is_named_after_the_kernels_tiling_data(entries):
    tasks = _json(entries, layout.task_info_json(0))["tasks"]
    assert tasks
    for t in tasks:
        source = entries[layout.kernel_source(0, t["kernel"])].decode()
        assert [n for n, _ in t["tiling"]] == tiling_fields(source), t["label"]
        assert 8 * (len(t["args"]) + len(t["tiling"])) == t["args_size"]


def test_tables_print_each_tiling_word_with_its_name(entries):
    tables = _tables(entries).split("kTilingData[] = {", 1)[1].split("\n    0,  /* end", 1)[0]
    for t in _json(entries, layout.task_info_json(0))["tasks"]:
        shown = " ".join(f"{n}={v}" for n, v in t["tiling"])
        section = tables.split(f"/* {t['label']} */\n", 1)[1].split("\n    /* ", 1)[0]
        names = " ".join(line.split("/* ", 1)[1].removesuffix(" */") for line in section.splitlines())
        assert names == shown, (t["label"], names)


def test_task_labels_name_the_fused_ops(entries):
    labels = [t["label"] for t in _json(entries, layout.task_info_json(0))["tasks"]]
    assert labels[0] == "k000_Conv_BatchNormalization_Relu"      # conv1 + bn1 + relu1
    assert "k000_Conv_BatchNormalization_Relu: node \"conv1\"" in _tables(entries)


def test_debug_graph_lists_what_each_fused_node_covers(entries):
    nodes = {n["name"]: n for n in _json(entries, layout.ge_model_json(0))["nodes"]}
    assert nodes["conv1"]["fused_from"] == ["conv1", "bn1", "relu1"]
    assert nodes["pool1"]["fused_from"] == []                         # nothing fused into it
    assert all("nodes" not in n["attrs"] for n in nodes.values())      # metadata, not an attribute


def test_memory_plan_is_consistent_with_the_program(entries):
    plan = _json(entries, layout.memory_plan_json(0))
    tasks = _json(entries, layout.task_info_json(0))["tasks"]
    buffers = plan["buffers"]
    assert buffers and plan["work_size"] == _json(entries, layout.task_info_json(0))["work_size"]
    for b in buffers:   # inside the workspace, aligned, alive from its writer to its last reader
        assert 0 <= b["offset"] and b["offset"] + b["size"] <= plan["work_size"] and b["end"] == b["offset"] + b["size"]
        assert b["offset"] % plan["alignment"] == 0 and b["first_task"] <= b["last_task"] < len(tasks)
        assert b["written_by"] == tasks[b["first_task"]]["label"]
    for i, a in enumerate(buffers):   # no two buffers alive at the same time share a byte
        for b in buffers[i + 1:]:
            live = a["first_task"] <= b["last_task"] and b["first_task"] <= a["last_task"]
            assert not (live and a["offset"] < b["end"] and b["offset"] < a["end"]), (a, b)
    assert plan["largest"] == max(buffers, key=lambda b: b["size"])["name"]
    # every workspace address a task uses is one of the plan's buffers or views
    places = {(b["offset"]) for b in buffers} | {v["place"]["offset"] for v in plan["views"]
                                                if v["place"] and v["place"]["kind"] == "WORKSPACE"}
    for t in tasks:
        for a in t["args"]:
            assert a["kind"] != "WORKSPACE" or a["offset"] in places, (t["label"], a)


def test_memory_plan_views_name_their_producer(entries):
    plan = _json(entries, layout.memory_plan_json(0))
    names = {b["name"] for b in plan["buffers"]}
    flatten = next(v for v in plan["views"] if v["name"] == "f")       # the sample's Flatten output
    assert flatten["made_by"] == "flatten" and flatten["view_of"] == flatten["alias_of"] == "g" and "g" in names
    g = next(b for b in plan["buffers"] if b["name"] == "g")
    assert flatten["place"] == {"kind": "WORKSPACE", "index": 0, "offset": g["offset"]}


def test_memory_plan_is_listed_in_the_manifest(entries):
    manifest = json.loads(entries[layout.MANIFEST])
    assert layout.memory_plan_json(0) in {e["name"] for e in manifest["entries"]}
