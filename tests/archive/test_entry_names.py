"""Entry names are safe relative names (formats/om2/layout.py): the writer never makes another kind,
and the reader refuses an archive that holds one (issue 11, section 3)."""
import hashlib
import json
import zipfile

import pytest
from onnx import TensorProto, helper

import om2gen
from om2gen.formats.om2 import layout, writer
from om2gen.formats.om2.reader import Archive

UNSAFE = ["/etc/passwd", "../evil.so", "data/../../evil.so", "data/./x.bin", "data\\evil.so", "data//x.bin",
          "data/x\x00.so", "data/", "", "C:/evil.so", "data/x\n.so", "d/" + "x" * 1100]
SAFE = ["manifest.json", "data/custom_ops/binaries_x86_64/Op_0123_CustomKernel.bin", "data/\u00fc.so", "data/a..b"]


@pytest.mark.parametrize("name", UNSAFE)
def test_unsafe_names_are_named(name):
    assert layout.unsafe_entry_name(name) is not None


@pytest.mark.parametrize("name", SAFE)
def test_safe_names_pass(name):
    assert layout.unsafe_entry_name(name) is None


@pytest.mark.parametrize("text", ["../../../Evil", "a/b", "a\\b", "x\x00y", "\u00dcn\u00efc\u00f8d\u00e9", "L" * 500,
                                  "..", ".", "", "lib\u00fc" + "x" * 200 + ".so"])
def test_safe_component_is_one_safe_component(text):
    c = layout.safe_component(text)
    assert layout.unsafe_entry_name(f"data/{c}") is None and "/" not in c and len(c) <= layout.MAX_COMPONENT
    assert c.isascii() and not c.startswith(".")
    assert layout.safe_component(text + "!") != c       # distinct texts stay distinct
    if text.endswith(".so"):
        assert c.endswith(".so")                        # the suffix decides how the entry is stored


def test_writer_refuses_an_unsafe_name(tmp_path):
    with pytest.raises(om2gen.CompileError, match="refusing to write"):
        writer.write(tmp_path / "x.om2", [writer.Entry("data/../evil.bin", b"x")])
    assert not list(tmp_path.iterdir())


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    path = tmp_path_factory.mktemp("a") / "m.om2"
    om2gen.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path, progress=False)
    return path


def with_entry(src, dst, name: str):
    """`src` plus an entry (listed in the manifest); a name with NUL is patched into the bytes,
    since zipfile cuts names at NUL when it writes."""
    written = name.replace("\x00", "N")
    with zipfile.ZipFile(src) as zin:
        entries = {i.filename: zin.read(i) for i in zin.infolist()}
    entries[written] = b"payload"
    manifest = json.loads(entries["manifest.json"])
    manifest["entries"].append({"name": name, "size": 7, "sha256": hashlib.sha256(b"payload").hexdigest()})
    entries["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(dst, "w") as zout:
        for n, data in entries.items():
            zout.writestr(n, data)
    if written != name:
        data = dst.read_bytes()
        assert data.count(written.encode()) == 2     # local header and central directory
        dst.write_bytes(data.replace(written.encode(), name.encode()))
    return dst


@pytest.mark.parametrize("name", ["/abs.so", "../evil.so", "data/../../evil.so", "data\\evil.so", "data//x.bin",
                                  "data/x\x00.so", "data/./x.bin"])
def test_reader_refuses_an_archive_with_an_unsafe_name(archive, tmp_path, name):
    bad = with_entry(archive, tmp_path / "bad.om2", name)
    with pytest.raises(om2gen.ArchiveError, match="is unsafe"):
        Archive(bad)
    with pytest.raises(om2gen.ArchiveError, match="is unsafe"):
        om2gen.load(bad)


def test_reader_takes_the_archive_with_a_safe_extra_name(archive, tmp_path):
    with Archive(with_entry(archive, tmp_path / "ok.om2", "data/extra.txt")) as a:
        assert "data/extra.txt" in a.names()
