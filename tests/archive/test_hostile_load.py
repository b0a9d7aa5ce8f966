"""Loading damaged or hostile model files (issue 12): typed errors, never a crash, and a loaded
model that no longer depends on its file.

Cases that could crash the process (a truncated ELF with a matching digest) run in a child
process, so a crash is a failure here instead of the end of the test run.
"""
import json
import os
import subprocess
import sys
import threading
import zipfile
import zlib

import numpy as np
import onnx
import pytest
from helpers import make_model, rand, refresh_digests, refresh_om_digests
from onnx import helper

import om2gen
from om2gen.formats.om import kernel_store
from om2gen.formats.om2 import layout
from om2gen.formats.om.container import read_om, write_om
from om2gen.formats.om.layout import ModelPartitionType as PT
from om2gen.native import lib

FEEDS = {"x": rand(4, 16, seed=1)}


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """A two-layer MLP (constants, several kernels) as .om2 and .om, with its reference output."""
    d = tmp_path_factory.mktemp("hostile")
    w1, w2 = rand(16, 32, seed=2), rand(32, 8, seed=3)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    model = make_model(nodes, FEEDS, ["y"], {"w1": w1, "w2": w2})
    onnx.save(model, d / "mlp.onnx")
    paths = {fmt: om2gen.compile(d / "mlp.onnx", d / f"mlp.{fmt}", format=fmt) for fmt in ("om2", "om")}
    return {**paths, "ref": np.maximum(FEEDS["x"] @ w1, 0) @ w2, "dir": d}


def entries_of(path):
    with zipfile.ZipFile(path) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def write_archive(path, entries, *, fix_digests=True):
    """An OM2 archive of `entries` (manifest first as om2gen writes it), digests refreshed."""
    if fix_digests:
        entries = dict(entries)
        entries[layout.MANIFEST] = json.dumps(refresh_digests(json.loads(entries[layout.MANIFEST]), entries)).encode()
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


def name_of(entries, suffix):
    return next(n for n in entries if n.endswith(suffix))


def run_child(code: str, timeout=120):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"child exited with {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def load_in_child(path) -> str:
    """Loads and closes `path` in a child process; its output names the Om2Error, if any (a crash
    fails run_child)."""
    return run_child(f"""
import om2gen
try:
    om2gen.load({str(path)!r}).close()
except om2gen.Om2Error as exc:
    print(type(exc).__name__, exc)
""")


# ---- the loaded model does not depend on its file ----

@pytest.mark.parametrize("fmt", ["om2", "om"])
@pytest.mark.parametrize("change", ["overwrite", "truncate", "delete"])
def test_a_loaded_model_survives_changes_to_its_file(mlp, tmp_path, fmt, change):
    path = tmp_path / f"m.{fmt}"
    path.write_bytes(mlp[fmt].read_bytes())
    with om2gen.load(path) as m:
        before = m.run(FEEDS)["y"]
        if change == "overwrite":   # in place, same size: a shared mapping would see these bytes
            with open(path, "r+b") as f:
                f.write(bytes(len(path.read_bytes())))
        elif change == "truncate":  # a shared mapping would raise SIGBUS past the new end
            os.truncate(path, 100)
        else:
            path.unlink()
        after = m.run(FEEDS)["y"]
    np.testing.assert_allclose(before, mlp["ref"], rtol=1e-5, atol=1e-5)
    assert np.array_equal(before, after)


def test_the_callers_buffer_may_change_after_loading(mlp):
    data = bytearray(mlp["om2"].read_bytes())
    with om2gen.load(data) as m:
        data[:] = bytes(len(data))
        np.testing.assert_allclose(m.run(FEEDS)["y"], mlp["ref"], rtol=1e-5, atol=1e-5)


# ---- every entry the load uses is verified ----

def test_a_constants_byte_flip_is_refused(mlp, tmp_path):
    e = entries_of(mlp["om2"])
    blob = bytearray(e[layout.constants_blob(0)])
    blob[len(blob) // 3] ^= 0x40
    e[layout.constants_blob(0)] = bytes(blob)
    with pytest.raises(om2gen.ArchiveError, match="constants_0' does not match its blake3 digest"):
        om2gen.load(write_archive(tmp_path / "c.om2", e, fix_digests=False))


def test_a_short_constants_blob_with_a_consistent_manifest_is_refused(mlp, tmp_path):
    """64 bytes of constants, the manifest's size and digests made to agree: the model library was
    built for more, and must not read past the blob."""
    e = entries_of(mlp["om2"])
    e[layout.constants_blob(0)] = e[layout.constants_blob(0)][:64]
    with pytest.raises(om2gen.ArchiveError, match="the constants blob has 64 bytes, .* says"):
        om2gen.load(write_archive(tmp_path / "c.om2", e))


def test_model_meta_is_verified(mlp, tmp_path):
    e = entries_of(mlp["om2"])
    meta_name = layout.model_meta(0)
    meta = json.loads(e[meta_name])
    meta["outputs"][0]["shape"] = [4, 1024]
    meta["outputs"][0]["size"] = 4 * 1024 * 4
    e[meta_name] = json.dumps(meta).encode()
    with pytest.raises(om2gen.ArchiveError, match="model_meta.json' (does not match its blake3|has .* bytes)"):
        om2gen.load(write_archive(tmp_path / "m.om2", e, fix_digests=False))


def test_model_meta_sizes_must_agree_with_shapes(mlp, tmp_path):
    e = entries_of(mlp["om2"])
    meta = json.loads(e[layout.model_meta(0)])
    meta["outputs"][0]["shape"] = [4, 1024]
    e[layout.model_meta(0)] = json.dumps(meta).encode()
    with pytest.raises(om2gen.ArchiveError, match="do not agree"):
        om2gen.load(write_archive(tmp_path / "m.om2", e))


@pytest.mark.parametrize("edit, needle", [
    (lambda m: m.update(target=0), "target must be object"),
    (lambda m: m["entries"][0].update(name=[]), r"entries\[0\] needs a string name"),
    (lambda m: m.update(models="x"), "models must be array"),
    (lambda m: m["models"].__setitem__(0, 5), r"models\[0\] must be object"),
    (lambda m: m.update(abi_version=-1), "abi_version must be bigger than or equal to 0"),
    (lambda m: m["target"].update(isa_features=[1]), r"target.isa_features\[0\] must be string"),
])
def test_manifest_of_wrong_types_is_an_archive_error(mlp, tmp_path, edit, needle):
    e = entries_of(mlp["om2"])
    m = json.loads(e[layout.MANIFEST])
    edit(m)
    e[layout.MANIFEST] = json.dumps(m).encode()
    with pytest.raises(om2gen.ArchiveError, match=needle):
        om2gen.load(write_archive(tmp_path / "m.om2", e, fix_digests=False))


def test_a_deeply_nested_manifest_is_an_archive_error(mlp, tmp_path):
    e = entries_of(mlp["om2"])
    e[layout.MANIFEST] = b"[" * 5000 + b"]" * 5000
    with pytest.raises(om2gen.ArchiveError, match="nests too deeply"):
        om2gen.load(write_archive(tmp_path / "m.om2", e, fix_digests=False))


def _with_bomb(mlp, tmp_path, declared: int):
    """The MLP archive plus a DEFLATED entry of 64 MiB of zeros whose ZIP headers declare
    `declared` bytes."""
    import struct
    e = entries_of(mlp["om2"])
    path = write_archive(tmp_path / "bomb.om2", e)
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("data/model_0/debug/bomb.txt", bytes(64 << 20), compress_type=zipfile.ZIP_DEFLATED)
    data = bytearray(path.read_bytes())
    info = zipfile.ZipFile(path).getinfo("data/model_0/debug/bomb.txt")
    struct.pack_into("<I", data, info.header_offset + 22, declared)     # local header: uncompressed size
    central = data.rindex(b"PK\x01\x02")                               # the last central record is the bomb's
    struct.pack_into("<I", data, central + 24, declared)
    path.write_bytes(bytes(data))
    return path


def test_a_deflated_entry_inflates_no_further_than_its_declared_size(mlp, tmp_path):
    from om2gen.formats.om2.reader import Archive
    with Archive(_with_bomb(mlp, tmp_path, 1000)) as a:
        with pytest.raises(om2gen.ArchiveError, match="bomb.txt' is corrupt .*does not match its size and CRC-32"):
            a.read("data/model_0/debug/bomb.txt")


def test_a_deflated_entry_declaring_a_huge_size_is_refused_before_inflating(mlp, tmp_path):
    from om2gen.formats.om2.reader import MAX_INFLATED, Archive
    with Archive(_with_bomb(mlp, tmp_path, MAX_INFLATED + 1)) as a:
        with pytest.raises(om2gen.ArchiveError, match="more than om2gen reads"):
            a.read("data/model_0/debug/bomb.txt")


def test_code_and_constants_must_be_stored(mlp, tmp_path):
    e = entries_of(mlp["om2"])
    path = tmp_path / "deflated.om2"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in e.items():
            z.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED if name.endswith(".o") else zipfile.ZIP_STORED)
    with pytest.raises(om2gen.ArchiveError, match="is compressed; om2gen writes it STORED"):
        om2gen.load(path)


# ---- code is checked before the loader sees it ----

def test_a_truncated_elf_with_a_matching_digest_is_refused_without_a_signal(mlp, tmp_path):
    e = entries_of(mlp["om2"])
    lib_name = name_of(e, "_om2.so")
    kernel = next(n for n in e if n.endswith(".o"))
    for name, cut in ((lib_name, 0.5), (kernel, 0.6)):
        bad = dict(e)
        bad[name] = e[name][:int(len(e[name]) * cut)]
        path = write_archive(tmp_path / f"cut_{cut}.om2", bad)
        out = load_in_child(path)
        assert "ArchiveError" in out or "RuntimeFailure" in out, out
        assert "runs past the" in out or "outside the file" in out or "lie outside" in out, out


# ---- the process-wide kernel store is keyed by content ----

def _tampered_kernel(data: bytes) -> bytes:
    """The same kernel with one byte of its .comment section changed: it still runs, but its
    bytes differ from the genuine one (a stand-in for a kernel someone replaced)."""
    at = data.index(b"GCC: ")
    return data[:at] + b"gcc: " + data[at + 5:]


def _tampered(mlp, fmt, tmp_path):
    if fmt == "om2":
        e = entries_of(mlp["om2"])
        kernel = next(n for n in e if n.endswith(".o"))
        e[kernel] = _tampered_kernel(e[kernel])
        return write_archive(tmp_path / "tampered.om2", e)
    om = read_om(mlp["om"].read_bytes())
    parts = []
    for p in om.partitions:
        if p.type == PT.TBE_KERNELS:
            ks = kernel_store.load(p.data)
            ks[0] = (ks[0][0], _tampered_kernel(bytes(ks[0][1])))
            p = type(p)(p.type, kernel_store.build(ks))
        parts.append(p)
    path = tmp_path / "tampered.om"
    path.write_bytes(write_om(None, refresh_om_digests(parts), header=om.header))
    return path


@pytest.mark.parametrize("first", ["om2", "om"])
@pytest.mark.parametrize("second", ["om2", "om"])
def test_a_kernel_with_a_loaded_kernels_name_but_other_bytes_is_not_shared(mlp, tmp_path, first, second):
    before = lib.om2x_bin_store_size()
    with om2gen.load(_tampered(mlp, first, tmp_path)) as bad:
        shared = lib.om2x_bin_store_size()
        with om2gen.load(mlp[second]) as good:
            # every genuine kernel is its own entry except the ones whose bytes equal the tampered
            # model's (all but the tampered one)
            assert lib.om2x_bin_store_size() == shared + 1
            np.testing.assert_allclose(good.run(FEEDS)["y"], mlp["ref"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(bad.run(FEEDS)["y"], mlp["ref"], rtol=1e-5, atol=1e-5)
    assert lib.om2x_bin_store_size() == before


# ---- run() and close() from several threads ----

@pytest.mark.parametrize("fmt", ["om2", "om"])
def test_run_racing_close_is_a_typed_error_or_a_result(mlp, fmt):
    for _ in range(20):
        m = om2gen.load(mlp[fmt])
        outcomes, start = [], threading.Barrier(3)

        def runner():
            start.wait()
            for _ in range(50):
                try:
                    outcomes.append(m.run(FEEDS)["y"])
                except om2gen.ModelClosedError:
                    outcomes.append("closed")

        threads = [threading.Thread(target=runner) for _ in range(2)]
        for t in threads:
            t.start()
        start.wait()
        m.close()
        for t in threads:
            t.join()
        results = [o for o in outcomes if not isinstance(o, str)]
        assert all(np.array_equal(r, results[0]) for r in results)
        with pytest.raises(om2gen.ModelClosedError):
            m.run(FEEDS)


@pytest.mark.parametrize("fmt", ["om2", "om"])
def test_close_from_two_threads_at_once_unloads_once(mlp, fmt):
    before = lib.om2x_bin_store_size()
    for _ in range(30):
        m = om2gen.load(mlp[fmt])
        start = threading.Barrier(2)

        def closer():
            start.wait()
            m.close()

        threads = [threading.Thread(target=closer) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert lib.om2x_bin_store_size() == before


def test_execute_raw_after_close_is_a_typed_error(mlp):
    m = om2gen.load(mlp["om2"])
    m.close()
    with pytest.raises(om2gen.ModelClosedError):
        m.execute_raw([0], [0])


def test_the_schema_validators_are_generated_from_the_schemas(mlp):
    """_schema_code.py is what fastjsonschema generates from schema.py: the same text when the
    installed fastjsonschema is the one that generated it, the same verdicts on real and broken
    documents always (a newer fastjsonschema may word its code differently)."""
    import re
    from pathlib import Path

    import fastjsonschema

    from om2gen.formats.om2 import _schema_code, schema
    checked_in = (Path(schema.__file__).parent / "_schema_code.py").read_text()
    if re.search(r'^VERSION = "([^"]+)"', checked_in, re.M)[1] == fastjsonschema.VERSION:
        assert checked_in == schema.generated_code(), \
            "regenerate: python -m om2gen.formats.om2.schema > om2gen/formats/om2/_schema_code.py"
    e = entries_of(mlp["om2"])
    docs = {"manifest": json.loads(e[layout.MANIFEST]), "meta": json.loads(e[layout.model_meta(0)])}
    for name, doc in docs.items():
        reference = fastjsonschema.compile(schema.SCHEMAS[name])
        broken = [doc, {**doc, "target": 0}, {**doc, "inputs": "x"}, {**doc, "models": [3]}, [], {}]
        for d in broken:
            def verdict(check):
                try:
                    check(d)
                    return None
                except (fastjsonschema.JsonSchemaValueException, _schema_code.JsonSchemaValueException) as exc:
                    return exc.message
            assert verdict(getattr(_schema_code, f"validate_{name}")) == verdict(reference), (name, d)


# ---- cases the load fuzzer (tools/fuzz_load.py) found ----

def test_a_huge_integer_in_the_manifest_is_an_archive_error(mlp, tmp_path):
    e = entries_of(mlp["om2"])
    e[layout.MANIFEST] = e[layout.MANIFEST].replace(b'"model_num": 1', b'"model_num": ' + b"9" * 5000)
    with pytest.raises(om2gen.ArchiveError, match="not valid JSON for om2gen"):
        om2gen.load(write_archive(tmp_path / "m.om2", e, fix_digests=False))


def _dynamic_entry_offset(data: bytes, tag: str) -> int:
    """The file offset of the value of dynamic entry `tag` (e.g. "DT_RELASZ")."""
    import io

    from elftools.elf.elffile import ELFFile
    elf = ELFFile(io.BytesIO(data))
    dyn = elf.get_section_by_name(".dynamic")
    for i, t in enumerate(dyn.iter_tags()):
        if t.entry.d_tag == tag:
            return dyn["sh_offset"] + i * 16 + 8
    raise AssertionError(f"no {tag}")


@pytest.mark.parametrize("tag, value", [("DT_RELASZ", 1), ("DT_RELACOUNT", 1 << 20), ("DT_RELAENT", 7), ("DT_INIT", 0),
                                        ("DT_NEEDED", 1 << 40),
                                        # fuzz cases om2-612 and om2-1728: the all-ones address
                                        ("DT_RELA", (1 << 64) - 1), ("DT_JMPREL", (1 << 64) - 1),
                                        # the symbol lookup's tables, walked by ld.so without bounds
                                        ("DT_GNU_HASH", 0), ("DT_GNU_HASH", 0x41), ("DT_VERDEF", 0),
                                        ("DT_VERDEFNUM", 1 << 20), ("DT_VERNEED", 0), ("DT_VERNEEDNUM", 1 << 20),
                                        ("DT_SYMTAB", 0), ("DT_VERSYM", 0)])
def test_inconsistent_relocation_tables_are_refused_before_dlopen(mlp, tmp_path, tag, value):
    import struct
    e = entries_of(mlp["om2"])
    lib_name = name_of(e, "_om2.so")
    data = bytearray(e[lib_name])
    struct.pack_into("<Q", data, _dynamic_entry_offset(bytes(data), tag), value)
    e[lib_name] = bytes(data)
    path = write_archive(tmp_path / f"{tag}.om2", e)
    out = load_in_child(path)
    assert "ArchiveError" in out and "refusing a shared object" in out, out


def test_execute_raw_with_arrays_or_generators_is_an_input_error(mlp):
    with om2gen.load(mlp["om2"]) as m:
        x, y = FEEDS["x"], np.empty((4, 8), np.float32)
        with pytest.raises(om2gen.InputError, match="not a buffer address"):
            m.execute_raw([x], [y])
        with pytest.raises(om2gen.InputError, match="two sequences"):
            m.execute_raw(5, [y.ctypes.data])
        with pytest.raises(om2gen.InputError, match="two sequences"):
            m.execute_raw((a for a in [x.ctypes.data]), [y.ctypes.data])
        m.execute_raw((x.ctypes.data,), [y.ctypes.data])
        np.testing.assert_allclose(y, mlp["ref"], rtol=1e-5, atol=1e-5)


def test_odd_paths_are_archive_errors_not_hangs(tmp_path):
    with pytest.raises(om2gen.ArchiveError, match="NUL"):
        om2gen.load(str(tmp_path / "a\0b.om2"))
    fifo = tmp_path / "pipe.om2"
    os.mkfifo(fifo)
    with pytest.raises(om2gen.ArchiveError, match="not a regular file"):
        om2gen.load(fifo)
    with pytest.raises(om2gen.ArchiveError, match="not a regular file"):
        om2gen.load(tmp_path)


def test_an_om_model_def_edit_fails_its_digest(mlp, tmp_path):
    from om2gen.formats.om import proto
    om = read_om(mlp["om"].read_bytes())
    parts = []
    for p in om.partitions:
        if p.type == PT.MODEL_DEF:
            md = proto.ModelDef.FromString(bytes(p.data))
            net = next(op for op in md.graph[0].op if op.type == "NetOutput")
            net.input_desc[0].shape.dim[:] = [32]
            p = type(p)(p.type, md.SerializeToString(deterministic=True))
        parts.append(p)
    path = tmp_path / "md.om"
    path.write_bytes(write_om(None, parts, header=om.header))
    with pytest.raises(om2gen.ArchiveError, match="partition MODEL_DEF does not match the blake3 digest"):
        om2gen.load(path)


def test_an_om_digest_attr_renamed_by_one_byte_is_refused(mlp, tmp_path):
    """Fuzz case om-7224 (seed 2): one of eight flipped bytes made `_om2gen_partition_blake3`
    `[om2gen_partition_blake3`; with no digests recorded the loader skipped the check, and the
    flips in WEIGHTS_DATA and TBE_KERNELS ran (a wrong result). The digests are required now."""
    from om2gen.formats.om import integrity
    data = bytearray(mlp["om"].read_bytes())
    data[data.index(integrity.PARTITION_BLAKE3.encode())] = ord("[")
    weights = read_om(bytes(data)).partition(PT.WEIGHTS_DATA)
    data[data.index(bytes(weights[:64])) + 100] ^= 0x40   # a weight changed, as the other flips did
    path = tmp_path / "renamed.om"
    path.write_bytes(bytes(data))
    with pytest.raises(om2gen.ArchiveError, match=f"MODEL_DEF records no partition digests .attr "
                                                  f"{integrity.PARTITION_BLAKE3}."):
        om2gen.load(path)


def test_a_relro_range_past_the_data_segment_is_refused(mlp, tmp_path):
    import io
    import struct

    from elftools.elf.elffile import ELFFile
    e = entries_of(mlp["om2"])
    lib_name = name_of(e, "_om2.so")
    data = bytearray(e[lib_name])
    elf = ELFFile(io.BytesIO(bytes(data)))
    index = next(i for i, seg in enumerate(elf.iter_segments()) if seg["p_type"] == "PT_GNU_RELRO")
    struct.pack_into("<Q", data, elf["e_phoff"] + index * 56 + 40, 0xA771)   # p_memsz
    e[lib_name] = bytes(data)
    path = write_archive(tmp_path / "relro.om2", e)
    out = load_in_child(path)
    assert "RELRO range lies outside its data segment" in out, out


def test_code_outside_an_executable_segment_is_refused(mlp, tmp_path):
    """Fuzz case om2-241: the code segment's flags edited (R+X to W+0x8), digests recomputed."""
    import io
    import struct

    from elftools.elf.elffile import ELFFile
    e = entries_of(mlp["om2"])
    lib_name = name_of(e, "_om2.so")
    data = bytearray(e[lib_name])
    elf = ELFFile(io.BytesIO(bytes(data)))
    index = next(i for i, seg in enumerate(elf.iter_segments()) if seg["p_type"] == "PT_LOAD" and seg["p_flags"] & 1)
    struct.pack_into("<I", data, elf["e_phoff"] + index * 56 + 4, 0xA)   # p_flags
    e[lib_name] = bytes(data)
    out = load_in_child(write_archive(tmp_path / "flags.om2", e))
    assert "ArchiveError" in out and "outside its executable segments" in out, out


_PHDR_FIELDS = {"p_offset": 8, "p_vaddr": 16, "p_filesz": 32, "p_memsz": 40, "p_align": 48}


def _with_segment_field(data: bytes, p_type: str, field: str, value: int, which: int = 0) -> bytes:
    """`data` with `field` of its `which`-th program header of type `p_type` set to `value`."""
    import io
    import struct

    from elftools.elf.elffile import ELFFile
    elf = ELFFile(io.BytesIO(data))
    index = [i for i, seg in enumerate(elf.iter_segments()) if seg["p_type"] == p_type][which]
    out = bytearray(data)
    struct.pack_into("<Q", out, elf["e_phoff"] + index * 56 + _PHDR_FIELDS[field], value)
    return bytes(out)


def _library_edit_in_child(mlp, tmp_path, edit) -> str:
    """Loads, in a child, the MLP with its model library replaced by edit(library bytes)."""
    e = entries_of(mlp["om2"])
    lib_name = name_of(e, "_om2.so")
    e[lib_name] = edit(e[lib_name])
    return load_in_child(write_archive(tmp_path / "edited.om2", e))


@pytest.mark.parametrize("tag, value, needle", [
    # fuzz cases om2-858 and om2-8268 (seed 4): ld.so called the ELF header's bytes
    ("DT_INIT_ARRAY", 0, "its DT_INIT_ARRAY (8 bytes at 0x0) is not whole aligned slots of a writable segment"),
    ("DT_INIT_ARRAY", 1, "its DT_INIT_ARRAY (8 bytes at 0x1) is not whole aligned slots"),
    ("DT_FINI_ARRAY", 0, "its DT_FINI_ARRAY (8 bytes at 0x0) is not whole aligned slots"),
    ("DT_INIT_ARRAYSZ", 12, "its DT_INIT_ARRAY (12 bytes at"),
    # a slot past the array's relocations: ld.so would call the link-time bytes there
    ("DT_INIT_ARRAYSZ", 16, "slot 1 of its DT_INIT_ARRAY has no relocation to its code|a constructor or destructor "
                            "slot points outside its code")])
def test_every_constructor_slot_must_be_relocated_into_the_code(mlp, tmp_path, tag, value, needle):
    import struct

    def edit(data):
        data = bytearray(data)
        struct.pack_into("<Q", data, _dynamic_entry_offset(bytes(data), tag), value)
        return bytes(data)
    out = _library_edit_in_child(mlp, tmp_path, edit)
    assert "ArchiveError" in out and any(n in out for n in needle.split("|")), out


def test_a_preinit_array_is_checked_as_the_others(mlp, tmp_path):
    """The constructor array retagged DT_PREINIT_ARRAY (ld.so runs only an executable's, but
    the check does not rely on that) and moved to the ELF header."""
    import struct

    def edit(data):
        data = bytearray(data)
        at, size_at = (_dynamic_entry_offset(bytes(data), t) for t in ("DT_INIT_ARRAY", "DT_INIT_ARRAYSZ"))
        struct.pack_into("<qQ", data, at - 8, 32, 0)   # DT_PREINIT_ARRAY
        struct.pack_into("<q", data, size_at - 8, 33)  # DT_PREINIT_ARRAYSZ
        return bytes(data)
    out = _library_edit_in_child(mlp, tmp_path, edit)
    assert "ArchiveError" in out and "its DT_PREINIT_ARRAY (8 bytes at 0x0) is not whole aligned slots" in out, out


@pytest.mark.parametrize("tag", ["DT_INIT_ARRAYSZ", "DT_FINI_ARRAYSZ", "DT_RELASZ", "DT_PLTRELSZ"])
def test_a_table_without_its_size_entry_is_refused(mlp, tmp_path, tag):
    """ld.so reads the size entry of every table it has the address of, without looking for it."""
    import struct

    def edit(data):
        data = bytearray(data)
        struct.pack_into("<q", data, _dynamic_entry_offset(bytes(data), tag) - 8, 21)   # DT_DEBUG, which it ignores
        return bytes(data)
    out = _library_edit_in_child(mlp, tmp_path, edit)
    assert "ArchiveError" in out and f"entry but no {tag}" in out, out


@pytest.mark.parametrize("field, value", [("p_vaddr", (1 << 64) - 1),   # fuzz case om2-5943 (seed 4)
                                          ("p_vaddr", 0x8000), ("p_offset", 0), ("p_filesz", 56)])
def test_a_program_header_table_header_that_is_not_the_table_is_refused(mlp, tmp_path, field, value):
    """ld.so reads the program headers at PT_PHDR's p_vaddr when there is one."""
    out = _library_edit_in_child(mlp, tmp_path, lambda data: _with_segment_field(data, "PT_PHDR", field, value))
    assert "ArchiveError" in out and "its PT_PHDR" in out, out


@pytest.mark.parametrize("p_type, field, value, needle", [
    # ld.so reads the dynamic entries at p_vaddr, which must be the bytes checked at p_offset
    ("PT_DYNAMIC", "p_vaddr", 0x40, "its dynamic section (0x40 in memory) is not its file bytes"),
    ("PT_DYNAMIC", "p_vaddr", (1 << 64) - 8, "is not its file bytes"),
    # each thread's TLS block: p_filesz bytes copied from p_vaddr, the rest of p_memsz zeroed
    ("PT_TLS", "p_filesz", 0xffffffff, "its PT_TLS"),
    ("PT_TLS", "p_memsz", 1 << 40, "its PT_TLS"),
    ("PT_TLS", "p_align", 3, "its PT_TLS"),
    ("PT_TLS", "p_vaddr", (1 << 64) - 1, "its PT_TLS"),
    # read in memory by dl_iterate_phdr's users: the unwinder of every C++ exception
    ("PT_GNU_EH_FRAME", "p_vaddr", (1 << 64) - 1, "its PT_GNU_EH_FRAME"),
    ("PT_NOTE", "p_vaddr", 0x7fff0000, "its PT_NOTE"),
    ("PT_GNU_RELRO", "p_vaddr", 0x40, "its RELRO range lies outside its data segment")])
def test_a_program_header_describing_other_memory_than_its_bytes_is_refused(mlp, tmp_path, p_type, field, value,
                                                                            needle):
    out = _library_edit_in_child(mlp, tmp_path, lambda data: _with_segment_field(data, p_type, field, value))
    assert "ArchiveError" in out and needle in out, out


@pytest.mark.parametrize("field, change, needle", [
    ("p_vaddr", lambda v: v & 0xfff, "overlaps or precedes the one before it"),   # the data mapped over the code
    ("p_memsz", lambda v: 1 << 30, "runs past the"),                             # 1 GiB of bss
    ("p_vaddr", lambda v: v + (2 << 30), "its segments span")])
def test_segments_out_of_order_or_of_huge_bss_are_refused(mlp, tmp_path, field, change, needle):
    """The data segment moved or grown; its p_vaddr stays congruent to its p_offset."""
    import io

    from elftools.elf.elffile import ELFFile

    def edit(data):
        rw = [s for s in ELFFile(io.BytesIO(data)).iter_segments() if s["p_type"] == "PT_LOAD"][1]
        return _with_segment_field(data, "PT_LOAD", field, change(rw[field]), which=1)
    out = _library_edit_in_child(mlp, tmp_path, edit)
    assert "ArchiveError" in out and needle in out, out


def _kernel_edit(mlp, tmp_path, edit):
    e = entries_of(mlp["om2"])
    kernel = next(n for n in e if n.endswith(".o"))
    e[kernel] = edit(e[kernel])
    return write_archive(tmp_path / "kernel.om2", e)


def test_a_kernel_segment_of_4_gib_is_refused(mlp, tmp_path):
    """Fuzz case om2-9696 (seed 4): a kernel's code segment of 4 GiB in memory, over its data
    segment; the dynamic loader, which the light loader left it to, crashed."""
    path = _kernel_edit(mlp, tmp_path, lambda data: _with_segment_field(data, "PT_LOAD", "p_memsz", 0xffffffff))
    out = load_in_child(path)
    assert "RuntimeFailure" in out and "refusing a kernel binary" in out and "runs past the" in out, out


def test_a_kernel_the_light_loader_cannot_map_is_a_runtime_failure(mlp, tmp_path):
    """A kernel with 200 MiB of bss (within the check's bounds) in a process that cannot map that
    much more: an error naming the failed mmap, not a retry through the dynamic loader."""
    import io

    from elftools.elf.elffile import ELFFile

    def edit(data):
        rw = [s for s in ELFFile(io.BytesIO(data)).iter_segments() if s["p_type"] == "PT_LOAD"][-1]
        return _with_segment_field(data, "PT_LOAD", "p_memsz", rw["p_filesz"] + (200 << 20), which=-1)
    path = _kernel_edit(mlp, tmp_path, edit)
    out = run_child(f"""
import resource
import om2gen
with open("/proc/self/statm") as f:
    vm = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (vm + (120 << 20), resource.RLIM_INFINITY))
try:
    om2gen.load({str(path)!r}).close()
except om2gen.Om2Error as exc:
    print(type(exc).__name__, exc)
""")
    assert "RuntimeFailure" in out and "cannot map a kernel binary" in out and "mmap of its" in out, out


@pytest.mark.parametrize("name", ["\u0000", "manifest.json", "data/kernels_x86_64"])
def test_a_kernel_list_naming_other_entries_is_an_archive_error(mlp, tmp_path, name):
    e = entries_of(mlp["om2"])
    meta = json.loads(e[layout.model_meta(0)])
    meta["kernels"][0] = name
    e[layout.model_meta(0)] = json.dumps(meta).encode()
    with pytest.raises(om2gen.ArchiveError, match="kernel entry .* is not data/kernels_"):
        om2gen.load(write_archive(tmp_path / "k.om2", e))

