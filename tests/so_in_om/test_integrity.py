"""Integrity at load (om2gen/formats/om2/integrity.py): the size and hash in entry names are checked against
the bytes (a renamed entry, or bytes replaced with the manifest digest recomputed but not the
name, is an ArchiveError naming the entry), and a classic .om's SO_BINS items against the sha256
MODEL_DEF records for each, before any is loaded. A packed library's ELF check runs once per
digest per process."""
from __future__ import annotations

import hashlib
import json
import zipfile

import numpy as np
import pytest
from helpers import refresh_om_digests
from sobuild import archive_bytes, archive_json, model, rewrite_archive, twin_so

import om2gen
from om2gen.cli.convert import convert
from om2gen.errors import AbiError, ArchiveError
from om2gen.formats import op_so_store
from om2gen.formats.om import integrity, proto
from om2gen.formats.om2 import layout
from om2gen.formats.om.container import Partition, read_om, write_om
from om2gen.formats.om.layout import ModelPartitionType as PT
from om2gen.so_in_om import custom_libraries, elf_checks
from om2gen.so_in_om import loading as so_loader

pytestmark = pytest.mark.needs_cc
META = "data/model_0/model_meta.json"
X = np.zeros((2, 8), np.float32)


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """A model with the custom op Twin (4.0) in both formats, and another build of its library (5.0)."""
    d = tmp_path_factory.mktemp("integrity")
    lib = twin_so(d / "libtwin.so", 4.0)
    other = twin_so(d / "other" / "libtwin.so", 5.0)
    onnx_path = model(d / "m.onnx", ops=("Relu",), twin=True)
    compiled = {fmt: om2gen.compile(onnx_path, d / f"m.{fmt}", custom_op_libs=[lib], format=fmt) for fmt in ("om2", "om")}
    return {"lib": lib, "other": other.read_bytes(), **compiled}


def _renamed(path, dst, old: str, new: str, data: bytes | None = None):
    """`path` with entry `old` renamed to `new` wherever the archive names it (model_meta, manifest,
    and the store item for a library), optionally with other bytes; digests refreshed."""
    old_base, new_base = old.rsplit("/", 1)[1], new.rsplit("/", 1)[1]
    with zipfile.ZipFile(path) as z:
        entries = {i.filename: z.read(i) for i in z.infolist()}
    entries[new] = data if data is not None else entries.pop(old)
    entries[META] = entries[META].replace(old.encode(), new.encode())
    if layout.SO_STORE in entries:
        entries[layout.SO_STORE] = op_so_store.build(
            op_so_store.OpSoBin(new_base, b.vendor, b.bin_type, data or b.data) if b.name == old_base else b
            for b in op_so_store.load(entries[layout.SO_STORE]))
    manifest = json.loads(entries["manifest.json"])
    for e in manifest["entries"]:
        e["name"] = new if e["name"] == old else e["name"]
    entries["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(dst, "w") as z:
        for name, content in entries.items():
            z.writestr(name, content)
    return rewrite_archive(dst, dst, lambda name, content: content)   # sizes and digests refreshed


def _library_entry(archive) -> str:
    (name,) = archive_json(archive, META)["custom_ops"]["shared_libs"]
    return name


def test_intact_archive_loads_and_names_match_the_bytes(twin):
    name = _library_entry(twin["om2"])
    size, digest, original = layout.split_library_name(name.rsplit("/", 1)[1])
    assert (size, original) == (len(twin["lib"].read_bytes()), "libtwin.so")
    with om2gen.load(twin["om2"]) as m:
        assert np.all(m.run({"x": X})["z"] == 4.0)


def test_renamed_library_entry_is_refused(twin, tmp_path):
    old = _library_entry(twin["om2"])
    size, digest, original = layout.split_library_name(old.rsplit("/", 1)[1])
    for i, new_name in enumerate([f"{size}_{'0' * 16}_{original}", f"{size + 1}_{digest}_{original}",
                                  f"renamed_{original}"]):
        new = layout.custom_op_library(new_name)
        broken = _renamed(twin["om2"], tmp_path / f"renamed{i}.om2", old, new)
        with pytest.raises(ArchiveError, match=f"entry '{new}'"):
            om2gen.load(broken)


def test_replaced_library_bytes_with_recomputed_digest_are_refused(twin, tmp_path):
    """The other build, under the original name, in the entry and in the store: the manifest
    digest and the store agree, only the name tells."""
    old = _library_entry(twin["om2"])
    broken = _renamed(twin["om2"], tmp_path / "replaced.om2", old, old, data=twin["other"])
    assert archive_bytes(broken, old) == twin["other"]
    with pytest.raises(ArchiveError, match=f"entry '{old}'.*its name says sha256 .*, its bytes hash to"):
        om2gen.load(broken)


def test_renamed_store_item_is_refused(twin, tmp_path):
    """The entry intact, the store's kCustomOp item renamed: the store's name is checked too."""
    def edit(name, content):
        if name == layout.SO_STORE:
            (b,) = op_so_store.load(content)
            return op_so_store.build([op_so_store.OpSoBin("1_" + "0" * 16 + "_libtwin.so", b.vendor, b.bin_type, b.data)])
        return content
    with pytest.raises(ArchiveError, match="packed kCustomOp vendors/customize/1_0000000000000000_libtwin.so: its "
                                           "name says 1 bytes"):
        om2gen.load(rewrite_archive(twin["om2"], tmp_path / "store.om2", edit))


@pytest.mark.parametrize("new", ["Relu_renamed.o", "Relu_0123456789AB.o", "Relu_0123456789ab.o.so",
                                 "extra/Relu_0123456789ab.o"])
def test_renamed_kernel_entry_is_refused(twin, tmp_path, new):
    """A kernel's hash digests its specialisation, not its bytes: its form and directory are checked."""
    old = next(k for k in archive_json(twin["om2"], META)["kernels"] if "/Relu_" in k)
    new = old.rsplit("/", 1)[0] + "/" + new
    broken = _renamed(twin["om2"], tmp_path / "kernel.om2", old, new)
    with pytest.raises(ArchiveError, match=f"kernel entry '{new}'"):
        om2gen.load(broken)


def test_kernel_in_another_architecture_directory_is_refused(twin, tmp_path):
    old = archive_json(twin["om2"], META)["kernels"][0]
    new = layout.kernel_binary("aarch64", old.rsplit("/", 1)[1])
    with pytest.raises(ArchiveError, match=f"kernel entry '{new}' is not data/kernels_"):
        om2gen.load(_renamed(twin["om2"], tmp_path / "arch.om2", old, new))


# --- classic .om: SO_BINS digests in MODEL_DEF -------------------------------------------------

def _om_edit(path, dst, bins=None, attrs=None, so_name=None):
    """`path` with other SO_BINS items, MODEL_DEF attrs changed by attrs(attr map), and custom tasks
    naming so_name (old, new)."""
    om = read_om(path)
    md = proto.ModelDef.FromString(om.partition(PT.MODEL_DEF))
    tasks = proto.ModelTaskDef.FromString(om.partition(PT.TASK_INFO))
    if attrs:
        attrs(md.attr)
    for t in tasks.task if so_name else ():
        if t.kernel.so_name == so_name[0]:
            t.kernel.so_name = so_name[1]
    new = {PT.MODEL_DEF: md.SerializeToString(deterministic=True), PT.TASK_INFO: tasks.SerializeToString()}
    if bins is not None:
        new[PT.SO_BINS] = op_so_store.build(bins)
    write_om(dst, refresh_om_digests([Partition(p.type, new.get(p.type, p.data)) for p in om.partitions]), header=om.header)
    return dst


def _om_bins(path) -> list:
    return op_so_store.load(read_om(path).partition(PT.SO_BINS))


def test_om_records_the_sha256_of_each_so_bins_item(twin):
    md = proto.ModelDef.FromString(read_om(twin["om"]).partition(PT.MODEL_DEF))
    recorded = [d.decode() for d in md.attr[integrity.SO_BINS_SHA256].list.s]
    assert recorded == [hashlib.sha256(b.data).hexdigest() for b in _om_bins(twin["om"])]
    with om2gen.load(twin["om"]) as m:
        assert np.all(m.run({"x": X})["z"] == 4.0)


def test_om_so_bins_item_replaced_is_refused_before_it_is_loaded(twin, tmp_path):
    (b,) = _om_bins(twin["om"])
    bad = _om_edit(twin["om"], tmp_path / "replaced.om", bins=[op_so_store.OpSoBin(b.name, b.vendor, b.bin_type,
                                                                                twin["other"])])
    pattern = (f"SO_BINS item 0 .kCustomOp vendors/customize/{b.name}. does not match the sha256 MODEL_DEF records "
               f"for it .{integrity.SO_BINS_SHA256}.; .*recompile the model")
    with pytest.raises(ArchiveError, match=pattern):
        om2gen.load(bad)
    assert hashlib.sha256(twin["other"]).hexdigest() not in custom_libraries._loaded   # never dlopen'ed
    with pytest.raises(ArchiveError, match=pattern):
        convert(bad, tmp_path / "replaced.om2")
    assert not (tmp_path / "replaced.om2").exists()


@pytest.mark.parametrize("value", [["0" * 64, "0" * 64], 7])
def test_om_with_a_malformed_digest_list_is_refused(twin, tmp_path, value):
    def attrs(a):
        if isinstance(value, list):
            a[integrity.SO_BINS_SHA256].list.s[:] = [v.encode() for v in value]
        else:
            a[integrity.SO_BINS_SHA256].CopyFrom(proto.AttrDef(i=value))
    bad = _om_edit(twin["om"], tmp_path / "malformed.om", attrs=attrs)
    held = "2 digests" if isinstance(value, list) else "not a list of strings"
    with pytest.raises(ArchiveError, match=f"attr {integrity.SO_BINS_SHA256} holds {held} for 1 SO_BINS items"):
        om2gen.load(bad)


def test_om_without_so_bins_digests_is_refused(twin, tmp_path):
    """No digests recorded (an OM of before this check, or the attr's name damaged: fuzz case
    om-7224 did that to the partition digests): refused, not loaded unchecked."""
    def drop(a):
        del a[integrity.SO_BINS_SHA256]
    old = _om_edit(twin["om"], tmp_path / "old.om", attrs=drop)
    with pytest.raises(ArchiveError, match=f"MODEL_DEF records no digests of its 1 SO_BINS items .attr "
                                           f"{integrity.SO_BINS_SHA256}."):
        om2gen.load(old)


def test_om_so_bins_item_renamed_is_refused(twin, tmp_path):
    """The bytes intact (their digest matches), the name changed where the tasks refer to it too."""
    (b,) = _om_bins(twin["om"])
    size, digest, original = layout.split_library_name(b.name)
    new = f"{size}_{'f' * 16}_{original}"
    bad = _om_edit(twin["om"], tmp_path / "renamed.om", bins=[op_so_store.OpSoBin(new, b.vendor, b.bin_type, b.data)],
                   so_name=(b.name, new))
    with pytest.raises(ArchiveError, match=f"packed kCustomOp vendors/customize/{new}: its name says sha256 f{{16}}"):
        om2gen.load(bad)


# --- a packed library is ELF-checked once per digest per process ----------------------------------

def test_a_library_is_elf_checked_once_per_digest(twin, monkeypatch):
    """pyelftools costs 20-60 ms a library: loading the same bytes again (either format) does not
    check them again; other bytes are checked before they are loaded, and a failed check is not
    remembered."""
    calls = []
    real = elf_checks.check

    def counting(data, *args, **kwargs):
        calls.append(hashlib.sha256(bytes(data)).hexdigest())
        return real(data, *args, **kwargs)
    monkeypatch.setattr(so_loader, "_CHECKED", {})
    monkeypatch.setattr(elf_checks, "check", counting)
    for fmt in ("om2", "om", "om2"):
        with om2gen.load(twin[fmt]) as m:
            assert np.all(m.run({"x": X})["z"] == 4.0)
    assert calls == [hashlib.sha256(twin["lib"].read_bytes()).hexdigest()]

    (b,) = _om_bins(twin["om"])
    foreign = b.data[:18] + (183).to_bytes(2, "little") + b.data[20:]    # e_machine EM_AARCH64
    bad = op_so_store.OpSoBin(b.name, b.vendor, b.bin_type, foreign)
    for _ in range(2):
        with pytest.raises(AbiError, match="built for EM_AARCH64"):
            so_loader.load_packed([bad], "m.om")
    assert calls[1:] == [hashlib.sha256(foreign).hexdigest()] * 2
