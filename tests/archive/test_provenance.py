"""Every constant of an archive traces back to the model (issue 13): constants_config.json and
the debug graph name the initializers it comes from and the transforms that made it."""
import json
import zipfile
from pathlib import Path

import onnx
import pytest

import om2gen

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cnn" / "model.onnx"


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("provenance") / "cnn.om2"
    om2gen.compile(SAMPLE, path, input_shapes={"image": (1, 3, 32, 32)}, debug=True, target="x86_64-avx2")
    return zipfile.ZipFile(path)


def test_every_constant_names_initializers_of_the_model(archive):
    initializers = {i.name for i in onnx.load(str(SAMPLE)).graph.initializer}
    consts = json.loads(archive.read("data/constants/model_0_constants_config.json"))["consts"]
    assert consts
    for name, c in consts.items():
        assert c["sources"] and set(c["sources"]) <= initializers, (name, c["sources"])
        assert bool(c["transforms"]) == (name not in initializers), (name, c["transforms"])


def test_a_folded_batch_norm_names_its_statistics_and_the_packing(archive):
    consts = json.loads(archive.read("data/constants/model_0_constants_config.json"))["consts"]
    weights = consts["conv1.packed_input1"]
    assert weights["sources"][0] == "conv1_w" and {"bn_mean", "bn_var"} <= set(weights["sources"])
    assert weights["transforms"][0] == "BatchNormalization 'bn1' folded into the weight of Conv 'conv1'"
    assert len(weights["transforms"]) == 2   # then laid out for its kernel


def test_the_debug_graph_lists_the_same(archive):
    consts = json.loads(archive.read("data/constants/model_0_constants_config.json"))["consts"]
    graph = json.loads(archive.read("data/model_0/debug/ge_model.json"))
    listed = {c["name"]: c for c in graph["constants"]}
    assert listed.keys() == consts.keys()
    for name, c in consts.items():
        assert (listed[name]["sources"], listed[name]["transforms"]) == (c["sources"], c["transforms"])
