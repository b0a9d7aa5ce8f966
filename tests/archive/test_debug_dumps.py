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

