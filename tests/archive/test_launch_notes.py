"""Launch notes (issue 12): every kernel binary declares the launches its model makes of it, and a
task table edited with every digest recomputed -- a tiling word, a block_dim, an address slot --
is refused at load, before capture, in both formats. Edited loads run in a child process, so a
hang or crash fails the test instead of the run."""
import re
import struct

import pytest
from archive.test_hostile_load import entries_of, load_in_child, name_of, write_archive
from helpers import refresh_om_digests

import om2gen
from om2gen.errors import AbiError
from om2gen.formats.om import kernel_store, proto
from om2gen.formats.om2 import layout
from om2gen.formats.om.container import Partition, read_om, write_om
from om2gen.formats.om.layout import ModelPartitionType as PT
from om2gen.toolchain import launch_note
from om2gen.toolchain.launch_note import Launch, LaunchNote

HANG_WORD = 268435457      # the tiling word that made a kernel loop for minutes (issue 12)
REFUSED = "RuntimeFailure .*the model is corrupt or was modified"


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    sample = layout.__file__.rsplit("/om2gen/", 1)[0] + "/samples/cnn/model.onnx"
    d = tmp_path_factory.mktemp("notes")
    shapes = {"image": (1, 3, 32, 32)}
    return {fmt: om2gen.compile(sample, d / f"cnn.{fmt}", input_shapes=shapes) for fmt in ("om2", "om")}


def test_note_round_trip_and_attach_is_deterministic(cnn):
    note = LaunchNote("K_0123456789ab", (0, 1, 1), (Launch(2, struct.pack("<2q", 7, -1), (64, 32, 16)),
                                                     Launch(4, b"", (8, 8, 0))))
    assert launch_note.decode_desc(launch_note.encode_desc(note)) == note
    with pytest.raises(AbiError):
        launch_note.decode_desc(launch_note.encode_desc(note)[:-9])
    kernel = next(b for n, b in entries_of(cnn["om2"]).items() if n.endswith(".o"))
    (genuine,) = launch_note.read(kernel)
    assert genuine.launches and len(genuine.launches[0].slot_bytes) == len(genuine.slot_flags)
    with pytest.raises(AbiError, match="already has"):
        launch_note.attach(kernel, genuine)


def test_every_kernel_declares_every_launch_of_its_tasks(cnn):
    om = read_om(cnn["om"])
    kernels = dict(kernel_store.load(om.partition(PT.TBE_KERNELS)))
    declared = {}
    for name, binary in kernels.items():
        (note,) = launch_note.read(binary)
        declared[note.entry] = {(x.block_dim, x.tiling) for x in note.launches}
    for td in proto.ModelTaskDef.FromString(bytes(om.partition(PT.TASK_INFO))).task:
        kd = td.kernel
        if td.type == 0 and kd.kernel_name:
            n = kd.context.args_count
            assert (kd.block_dim, bytes(kd.args)[8 * n:]) in declared[kd.kernel_name.removesuffix(".o")]


def _om_edit(src, dst, edit):
    f = read_om(src)
    parts = []
    for p in f.partitions:
        data = p.data
        if p.type == PT.TASK_INFO:
            mtd = proto.ModelTaskDef.FromString(bytes(data))
            edit(next(t for t in mtd.task if t.type == 0 and t.kernel.kernel_name).kernel)
            data = mtd.SerializeToString(deterministic=True)
        parts.append(Partition(p.type, data))
    write_om(dst, refresh_om_digests(parts), header=f.header)
    return dst


def _hang_word(kd):
    n = kd.context.args_count
    kd.args = bytes(kd.args)[:8 * n] + struct.pack("<q", HANG_WORD) + bytes(kd.args)[8 * n + 8:]


def _block_dim(kd):
    kd.block_dim += 1


@pytest.mark.parametrize("edit", [_hang_word, _block_dim])
def test_om_task_edited_with_digests_recomputed_is_refused(cnn, tmp_path, edit):
    out = load_in_child(_om_edit(cnn["om"], tmp_path / "bad.om", edit))
    assert re.search(REFUSED, out) and "was not built for block_dim" in out, out


def test_om_kernel_without_a_note_is_refused(cnn, tmp_path):
    """A kernel om2gen did not build (or built before launch notes) declares nothing: refused."""
    f = read_om(cnn["om"])
    kernels = kernel_store.load(f.partition(PT.TBE_KERNELS))
    name, binary = kernels[0]
    shnum, = struct.unpack_from("<H", binary, 0x3C)
    stripped = bytearray(binary)
    struct.pack_into("<H", stripped, 0x3C, shnum - 1)   # the note's section header is the last one
    kernels[0] = (name, bytes(stripped))
    parts = [Partition(p.type, kernel_store.build(kernels) if p.type == PT.TBE_KERNELS else p.data)
             for p in f.partitions]
    write_om(tmp_path / "bare.om", refresh_om_digests(parts), header=f.header)
    out = load_in_child(tmp_path / "bare.om")
    assert re.search(REFUSED, out) and "declares no launches" in out, out


def _library_with(entries, old: bytes, new: bytes):
    lib = name_of(entries, "_om2.so")
    data = entries[lib]
    assert data.count(old) == 1, "the edited table bytes must be unique in the library"
    return {**entries, lib: data.replace(old, new)}


def _first_tiling(entries) -> list[int]:
    """The first task's tiling words, as the tables source lists them."""
    cpp = entries[name_of(entries, "_tables.cpp")].decode()
    table = cpp[cpp.index("kTilingData[] = {"):]
    return [int(w) for w in re.findall(r"^\s+(-?\d+(?:, -?\d+)*),\s+/\*", table, re.M)[0].split(", ")]


def test_om2_tiling_edited_in_the_library_with_digests_recomputed_is_refused(cnn, tmp_path):
    entries = entries_of(cnn["om2"])
    words = _first_tiling(entries)
    old = struct.pack(f"<{len(words)}q", *words)
    new = struct.pack(f"<{len(words)}q", HANG_WORD, *words[1:])
    out = load_in_child(write_archive(tmp_path / "bad.om2", _library_with(entries, old, new)))
    assert re.search(REFUSED, out) and "was not built for block_dim" in out, out


def test_genuine_models_still_load(cnn):
    for path in cnn.values():
        assert load_in_child(path) == ""
