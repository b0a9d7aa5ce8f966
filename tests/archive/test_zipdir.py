"""The strict ZIP directory reader (om2gen/formats/om2/zipdir.py) against files zipfile writes."""
import io
import struct
import warnings
import zipfile

import pytest

from om2gen.formats.om2 import zipdir


def make_zip(entries, *, comment=b"", force_zip64=False) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.comment = comment
        for name, data, method in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # duplicate names
                with z.open(info, "w", force_zip64=force_zip64) as f:
                    f.write(data)
    return buf.getvalue()


GOOD = [("manifest.json", b'{"a": 1}', zipfile.ZIP_STORED), ("data/x.bin", b"\x00" * 300, zipfile.ZIP_DEFLATED),
        ("data/é.txt", "non-ascii".encode(), zipfile.ZIP_STORED)]


@pytest.mark.parametrize("force_zip64", [False, True])
def test_reads_what_zipfile_writes(force_zip64):
    data = make_zip(GOOD, force_zip64=force_zip64)
    entries = zipdir.read_directory(data)
    assert list(entries) == [n for n, _, _ in GOOD]
    for name, payload, method in GOOD:
        e = entries[name]
        assert (e.compress_type, e.file_size) == (method, len(payload))
        assert zipdir.read(data, e) == payload
    with zipfile.ZipFile(io.BytesIO(data)) as z:   # the same directory zipfile sees
        assert {i.filename: i.header_offset for i in z.infolist()} == {n: e.header_offset for n, e in entries.items()}


def test_zip64_end_records():
    """An archive with more than 65535 entries needs the ZIP64 end record; a small stand-in: the end
    record fields set to 0xFFFF/0xFFFFFFFF and a ZIP64 end record holding the real values."""
    data = make_zip(GOOD)
    eocd = data[-22:]
    _, _, _, n_here, n, cd_size, cd_offset, _ = zipdir.EOCD.unpack(eocd)
    z64_offset = len(data) - 22
    z64 = zipdir.ZIP64_EOCD.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, n_here, n, cd_size, cd_offset)
    locator = zipdir.ZIP64_LOCATOR.pack(b"PK\x06\x07", 0, z64_offset, 1)
    new_eocd = zipdir.EOCD.pack(b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, cd_size, 0xFFFFFFFF, 0)
    entries = zipdir.read_directory(data[:-22] + z64 + locator + new_eocd)
    assert list(entries) == [n for n, _, _ in GOOD]


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d + b"appended", "no ZIP end record at the end"),
    (lambda d: d[:-1], "no ZIP end record"),
    (lambda d: d[:10], "end record"),
    (lambda d: b"", "too short"),
    (lambda d: b"junk" + d, "does not end where|corrupt|runs"),
])
def test_refuses_damaged_files(mutate, match):
    with pytest.raises(zipdir.ZipError, match=match):
        zipdir.read_directory(mutate(make_zip(GOOD)))


def test_refuses_a_comment_duplicates_and_encryption():
    with pytest.raises(zipdir.ZipError, match="end record"):
        zipdir.read_directory(make_zip(GOOD, comment=b"hi"))
    with pytest.raises(zipdir.ZipError, match="appears twice"):
        zipdir.read_directory(make_zip(GOOD + [GOOD[0]]))
    data = bytearray(make_zip(GOOD))
    cd = data.index(b"PK\x01\x02")
    struct.pack_into("<H", data, cd + 8, struct.unpack_from("<H", data, cd + 8)[0] | 1)
    with pytest.raises(zipdir.ZipError, match="encrypted"):
        zipdir.read_directory(bytes(data))


def test_refuses_overlapping_entries():
    data = bytearray(make_zip(GOOD))
    second = data.index(b"PK\x01\x02", data.index(b"PK\x01\x02") + 4)
    struct.pack_into("<I", data, second + 42, 0)   # the second entry's local header offset -> the first's
    with pytest.raises(zipdir.ZipError, match="overlaps"):
        zipdir.read_directory(bytes(data))


def test_a_flipped_byte_in_a_deflated_entry_fails_its_crc():
    data = bytearray(make_zip(GOOD))
    entries = zipdir.read_directory(bytes(data))
    start, end = zipdir.data_span(data, entries["data/x.bin"])
    data[start + 1] ^= 0x40
    with pytest.raises(zipdir.ZipError, match="inflate|CRC"):
        zipdir.read(bytes(data), entries["data/x.bin"])


def test_mutants_of_a_real_archive_are_archive_errors_or_load(tmp_path):
    """Byte flips, truncations and appended bytes anywhere in a compiled archive: the reader either
    opens it or raises ArchiveError, never anything else (OM2GEN_TEST_SCALE=N: N times more)."""
    import os
    import random

    from helpers import make_model, rand
    from onnx import helper

    import om2gen
    from om2gen.formats.om2.reader import Archive
    path = tmp_path / "m.om2"
    om2gen.compile(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2, 8)}, ["y"]), path)
    data = path.read_bytes()
    rng = random.Random(11)
    outcomes = {"opened": 0, "ArchiveError": 0}
    for _ in range(600 * max(1, int(os.environ.get("OM2GEN_TEST_SCALE", "1")))):
        b = bytearray(data)
        kind = rng.random()
        if kind < 0.25:
            b = b[:rng.randrange(len(b))]
        elif kind < 0.9:   # half the flips in the last 600 bytes: the directory and end record
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b)) if rng.random() < 0.5 else len(b) - rng.randrange(1, 600)] ^= 1 << rng.randrange(8)
        else:
            b += bytes(rng.randrange(1, 64))
        try:
            with Archive(bytes(b)) as a:
                for name in a.names():
                    try:
                        a.read(name)
                    except om2gen.ArchiveError:
                        pass
            outcomes["opened"] += 1
        except om2gen.ArchiveError:
            outcomes["ArchiveError"] += 1
    assert outcomes["ArchiveError"] > outcomes["opened"] > 0, outcomes
