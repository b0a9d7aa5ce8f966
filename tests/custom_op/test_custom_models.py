"""Models with custom operators: compile with the sample library, archive with the seed's naming,
load in the seed's order, run, and fail clearly on bad input."""
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import assert_close, refresh_digests
from onnx import helper

import om2gen
from om2gen.native import lib

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "custom_op"
sys.path.insert(0, str(SAMPLE))


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    out = tmp_path_factory.mktemp("custom_op")
    subprocess.run([sys.executable, str(SAMPLE / "build.py"), "--out", str(out)], check=True, timeout=600)
    subprocess.run([sys.executable, str(SAMPLE / "model.py"), "--out", str(out)], check=True, timeout=600)
    libs = sorted(out.glob("*.so"))
    models = sorted(out.glob("*.onnx"))
    assert libs and models
    return {"lib": libs[0], "model": models[0], "dir": out}


@pytest.fixture(scope="module")
def archive(sample, tmp_path_factory):
    path = tmp_path_factory.mktemp("a") / "custom.om2"
    om2gen.compile(sample["model"], path, custom_op_libs=[sample["lib"]])
    return path


def feeds_for(model_path):
    proto = onnx.load(str(model_path))
    rng = np.random.default_rng(0)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in proto.graph.input}


def test_compiles_runs_and_matches_the_reference(sample, archive):
    import model as sample_model
    feeds = feeds_for(sample["model"])
    with om2gen.load(archive) as m:
        got = m.run(feeds)
        again = m.run(feeds)
    ref = sample_model.reference(**feeds)
    for name, r in ref.items():
        assert_close(got[name], r.astype(np.float32), name)
        assert np.array_equal(got[name], again[name])


def test_archive_uses_the_seed_naming_and_lists_digests(sample, archive):
    data = sample["lib"].read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    with zipfile.ZipFile(archive) as z:
        names = z.namelist()
        manifest = json.loads(z.read("manifest.json"))
    lib_entry = f"data/custom_ops/shared_libs/{len(data)}_{digest[:16]}_{sample['lib'].name}"
    assert lib_entry in names
    bins = [n for n in names if n.startswith("data/custom_ops/binaries_")]
    assert bins and all(n.endswith("_CustomKernel.bin") for n in bins)
    assert {n.rsplit("/", 1)[1].split("_")[0] for n in bins} == {"AddCustom", "ScaleShift"}
    listed = {e["name"]: e for e in manifest["entries"]}
    assert listed[lib_entry]["sha256"] == digest
    assert all(n in listed for n in bins)


def test_execute_runs_once_at_capture_never_at_replay(archive):
    before = lib.om2x_custom_launch_count()
    with om2gen.load(archive) as m:
        at_load = lib.om2x_custom_launch_count() - before
        feeds = {t.name: np.zeros(t.shape, np.float32) for t in m.inputs}
        launches = lib.om2rtGetLaunchCount()
        m.run(feeds)
        m.run(feeds)
        assert lib.om2x_custom_launch_count() - before == at_load   # no Execute at run time
        assert lib.om2rtGetLaunchCount() > launches                 # but its recorded kernels replayed
    assert at_load == 2  # one Execute per custom node (AddCustom, ScaleShift)


def test_two_models_share_the_resident_library(sample, archive, tmp_path):
    other = tmp_path / "other.om2"
    om2gen.compile(sample["model"], other, custom_op_libs=[sample["lib"]])
    feeds = feeds_for(sample["model"])
    with om2gen.load(archive) as a, om2gen.load(other) as b:
        assert all(np.array_equal(a.run(feeds)[k], v) for k, v in b.run(feeds).items())
    with om2gen.load(archive) as a:  # the library stays resident after unload and is reused
        a.run(feeds)


def test_custom_op_libs_from_the_environment(sample, tmp_path, monkeypatch):
    monkeypatch.setenv("OM2GEN_CUSTOM_OP_PATH", str(sample["lib"].parent))
    om2gen.compile(sample["model"], tmp_path / "env.om2")
    assert (tmp_path / "env.om2").is_file()


def test_unknown_op_type_names_node_and_the_custom_ops(sample, tmp_path):
    graph = helper.make_graph([helper.make_node("MulCustom", ["x"], ["y"], name="mystery", domain="om2.sample")],
                              "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("om2.sample", 1)])
    with pytest.raises(om2gen.UnsupportedOpError, match="mystery.*MulCustom.*AddCustom"):
        om2gen.compile(model, tmp_path / "x.om2", custom_op_libs=[sample["lib"]])


def test_library_for_another_architecture(sample, tmp_path):
    data = bytearray(sample["lib"].read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # e_machine = EM_AARCH64
    foreign = tmp_path / "libforeign.so"
    foreign.write_bytes(bytes(data))
    with pytest.raises(om2gen.CompileError, match="libforeign.so.*EM_AARCH64.*EM_X86_64"):
        om2gen.compile(sample["model"], tmp_path / "x.om2", custom_op_libs=[foreign])


def rewrite(src, dst, edit):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        entries = {}
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info))
            if data is not None:
                entries[info.filename] = data
        manifest = json.loads(entries["manifest.json"])
        refresh_digests(manifest, entries)
        entries["manifest.json"] = json.dumps(manifest).encode()
        for name, data in entries.items():
            zout.writestr(name, data)
    return dst


def test_corrupt_custom_kernel_bin(archive, tmp_path):
    def corrupt(name, data):
        return b"\x00garbage" + data[8:] if name.endswith("_CustomKernel.bin") else data
    with pytest.raises(om2gen.RuntimeFailure, match="could not restore .*_CustomKernel.bin"):
        om2gen.load(rewrite(archive, tmp_path / "corrupt.om2", corrupt))


def test_missing_library_entry(archive, tmp_path):
    def drop(name, data):
        return None if "/shared_libs/" in name else data
    with pytest.raises(om2gen.ArchiveError, match="shared_libs"):
        om2gen.load(rewrite(archive, tmp_path / "nolib.om2", drop))
