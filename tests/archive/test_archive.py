"""The archive: layout, determinism, alignment, digests, and rebuilding from the shipped sources."""
import hashlib
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

import om2gen
from om2gen.formats.om2 import layout
from om2gen.resources import include_dir, runtime_abi_dir
from om2gen.toolchain import launch_note

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cnn" / "model.onnx"
SHAPES = {"image": (1, 3, 32, 32)}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("a") / "s.om2"
    om2gen.compile(SAMPLE, path, input_shapes=SHAPES, debug=True)
    return path


def test_layout(archive):
    with zipfile.ZipFile(archive) as z:
        names = z.namelist()
        manifest = json.loads(z.read("manifest.json"))
    assert names[0] == "manifest.json"
    assert names[1:] == sorted(names[1:])
    meta = "data/model_0/model_meta.json"
    assert meta in names
    assert any(n.startswith("data/model_0/runtime/lib") and n.endswith("_om2.so") for n in names)
    assert any(n.startswith("data/model_0/runtime/csrc/") and n.endswith("_tables.cpp") for n in names)
    assert "data/model_0/runtime/csrc/om2_load_and_run.cpp" in names
    kernels = [n for n in names if n.startswith("data/kernels_")]
    sources = [n for n in names if n.startswith("data/model_0/runtime/csrc/kernels/")]
    assert kernels and len(kernels) == len(sources)
    assert {"data/constants/model_0_constants_config.json", "data/constants/constants_0",
            "data/model_0/debug/ge_model.json", "data/model_0/debug/task_info.json"} <= set(names)
    listed = {e["name"] for e in manifest["entries"]}
    assert listed == set(names) - {"manifest.json"}
    for key in ("format", "format_version", "generator", "abi_version", "target", "models", "entries"):
        assert key in manifest
    assert manifest["target"]["isa_features"]


def test_entries_have_correct_digests_and_sizes(archive):
    with zipfile.ZipFile(archive) as z:
        manifest = json.loads(z.read("manifest.json"))
        for e in manifest["entries"]:
            data = z.read(e["name"])
            assert len(data) == e["size"], e["name"]
            assert hashlib.sha256(data).hexdigest() == e["sha256"], e["name"]


def test_mapped_entries_are_stored_and_aligned(archive):
    raw = archive.read_bytes()
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            if layout.is_mapped(info.filename):
                assert info.compress_type == zipfile.ZIP_STORED, info.filename
                off = info.header_offset
                n, e = int.from_bytes(raw[off + 26:off + 28], "little"), int.from_bytes(raw[off + 28:off + 30], "little")
                assert (off + 30 + n + e) % layout.ALIGNMENT == 0, info.filename
            if info.filename.endswith((".cpp", ".c")):
                assert info.compress_type == zipfile.ZIP_DEFLATED
            assert info.date_time == layout.FIXED_DATE


def test_same_model_gives_identical_bytes(tmp_path, archive):
    again = tmp_path / "again.om2"
    om2gen.compile(SAMPLE, again, input_shapes=SHAPES, debug=True)
    assert again.read_bytes() == archive.read_bytes()


@pytest.mark.slow
def test_identical_bytes_with_a_cold_kernel_cache(tmp_path, archive, fresh_cache):
    cold = tmp_path / "cold.om2"
    om2gen.compile(SAMPLE, cold, input_shapes=SHAPES, debug=True, jobs=1)
    assert cold.read_bytes() == archive.read_bytes()


def test_constants_config_matches_blob(archive):
    with zipfile.ZipFile(archive) as z:
        cfg = json.loads(z.read("data/constants/model_0_constants_config.json"))
        blob = z.read("data/constants/constants_0")
    assert cfg["internal_weight_size"] == len(blob)
    for name, c in cfg["consts"].items():
        assert c["offset"] % layout.ALIGNMENT == 0
        assert c["offset"] + c["size"] <= len(blob), name


def test_generated_source_reads_as_ascend_code(archive):
    with zipfile.ZipFile(archive) as z:
        cpp = "".join(z.read(n).decode() for n in z.namelist() if n.endswith(".cpp"))
    for needle in ("aclmdlRIBuildBegin", "aclmdlRIBindStream", "aclmdlRIEndTask", "aclmdlRIBuildEnd",
                   "aclrtBinaryLoadFromData", "aclrtBinaryGetFunction", "aclmdlRIExecute",
                   "GertModelLoad", "GertModelRun", "GertModelRunAsync", "GertModelUnload",
                   'node "conv1" (FusedConv)', "float32[1,3,32,32]", "kOpDefs", "kArgSlots"):
        assert needle in cpp, needle
    assert "/tmp" not in cpp and "/root" not in cpp  # no host paths
    # the model library holds no kernel code
    assert "OM2_KERNEL(" not in cpp


@pytest.mark.parametrize("kind", ["model", "kernel", "kernel linking the kernel library"])
def test_rebuild_from_shipped_sources_gives_the_same_binary(tmp_path, archive, kind):
    csrc = "data/model_0/runtime/csrc/"
    with zipfile.ZipFile(archive) as z:
        cmds = json.loads(z.read(csrc + "build_commands.json"))
        names = z.namelist()
        if kind == "model":
            sources = {s: z.read(csrc + s) for s in cmds["model_library"]["sources"]}
            commands = cmds["model_library"]["commands"]
            binary = z.read(next(n for n in names if n.endswith("_om2.so")))
        else:
            library = cmds.get("kernel_library", {})
            linking = sorted(e for e, c in cmds["kernels"].items() if any(o in c for o in library))
            plain = sorted(e for e, c in cmds["kernels"].items() if not any(o in c for o in library))
            assert linking and plain   # the sample CNN has both kinds
            entry = linking[0] if kind.endswith("library") else plain[0]
            command = cmds["kernels"][entry]
            sources = {f"{entry}.c": z.read(f"{csrc}kernels/{entry}.c")}
            commands = [command]
            for obj, recipe in library.items():   # the objects it links, compiled first
                if obj in command:
                    name = recipe["source"].rsplit("/", 1)[1]
                    assert recipe["source"] == f"<om2gen>/runtime_abi/src/kernel_lib/{name}"
                    sources[name] = (runtime_abi_dir() / "src" / "kernel_lib" / name).read_bytes()
                    commands.insert(0, recipe["command"])
            binary = z.read(next(n for n in names if n.endswith(f"/{entry}.o")))
    for name, text in sources.items():
        (tmp_path / name).write_bytes(text)
    for command in commands:
        real = [shutil.which(command[0]) or command[0]] + [
            str(include_dir()) if a == "<om2gen>/runtime_abi/include" else a for a in command[1:]]
        subprocess.run(real, cwd=tmp_path, check=True, timeout=300)
    rebuilt = (tmp_path / "out.so").read_bytes()
    if kind != "model":   # om2gen attaches the launch note after the compiler (toolchain/launch_note.py)
        (note,) = launch_note.read(binary)
        rebuilt = launch_note.attach(rebuilt, note)
    assert rebuilt == binary
