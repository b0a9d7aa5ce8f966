"""The OM (v1) container: header, partition table(s), partitions (GE_FACTS §1).

Offsets and numbers below are spelled as literals from GE_FACTS on purpose, so these tests check
`om2gen.formats.om.layout` against the facts instead of against itself.
"""
from __future__ import annotations

import dataclasses
import os
import random
import struct

import pytest

from om2gen.errors import ArchiveError
from om2gen.formats.om import layout
from om2gen.formats.om.container import ModelFileHeader, OmFile, Partition, read_om, write_om
from om2gen.formats.om.layout import ModelPartitionType as T

PARTS = [Partition(T.MODEL_DEF, b"M" * 10), Partition(T.WEIGHTS_DATA, b"W" * 7),
         Partition(T.TASK_INFO, b"T" * 5)]
# body: table 8 + 3*24 = 80 bytes, then partitions at body offsets 80, 90, 97; ends at 102
BODY_LEN = 102
ENTRY = 256 + 8        # file offset of the first table entry; entry i at ENTRY + 24*i


def sample(**fields) -> bytes:
    return write_om(None, PARTS, name="sample", platform_version="Ascend910B", **fields)


def patch(data: bytes, offset: int, fmt: str, value) -> bytes:
    b = bytearray(data)
    struct.pack_into("<" + fmt, b, offset, value)
    return bytes(b)


def legacy_om(parts, *, length_delta=0) -> bytes:
    """A pre-2022 OM: model_length 0, `length` = body size, 4-byte table head, 12-byte entries."""
    table = struct.pack("<I", len(parts))
    off = 0
    for p in parts:
        table += struct.pack("<III", p.type, off, len(p.data))
        off += len(p.data)
    body = table + b"".join(p.data for p in parts)
    header = bytearray(256)
    struct.pack_into("<III", header, 0, 0x444F4D49, 256, 0x20000000)
    struct.pack_into("<I", header, 76, len(body) + length_delta)
    struct.pack_into("<I", header, 156, 1)
    header[84:88] = b"old\0"
    return bytes(header) + body


# --------------------------------------------------------------------------------------------
# layout tables vs GE_FACTS

def test_header_layout_matches_ge_facts_1_2():
    assert layout.HEADER_SIZE == 256 and struct.calcsize(layout.HEADER_FORMAT) == 256
    assert layout.HEADER_OFFSETS == {
        "magic": 0, "headsize": 4, "version": 8, "checksum": 12, "length": 76, "is_encrypt": 80,
        "is_checksum": 81, "modeltype": 82, "genmode": 83, "name": 84, "ops": 116,
        "userdefineinfo": 120, "om_ir_version": 152, "model_num": 156, "platform_version": 160,
        "platform_type": 180, "padd": 181, "model_length": 184, "need_check_os_cpu_info": 192,
        "is_unknow_model": 193, "reserved": 194}
    assert (layout.MAGIC, layout.MODEL_VERSION) == (0x444F4D49, 0x20000000)


def test_partition_type_numbers_match_ge_facts_1_5():
    assert {t.name: t.value for t in T} == {
        "MODEL_DEF": 0, "WEIGHTS_DATA": 1, "TASK_INFO": 2, "TBE_KERNELS": 3,
        "CUST_AICPU_KERNELS": 4, "SO_BINS": 5, "FLOW_MODEL": 6, "FLOW_SUBMODEL": 7,
        "MODEL_INOUT_INFO": 8, "STATIC_TASK_DESC": 9, "DYNAMIC_TASK_DESC": 10, "TASK_PARAM": 11,
        "TILING_DATA": 12, "PRE_MODEL_DESC": 20, "PRE_MODEL_SQE": 21, "PRE_KERNEL_ARGS": 22,
        "PRE_MODEL_DESC_EXTEND": 23, "BUNDLE_MODEL_INFO": 24, "BUNDLE_MODEL_VAR_INFO": 25,
        "CUSTOM_OPS": 26}
    # GetModelPartition's "missing means empty" set (§1.5)
    assert {t.name for t in T if t.missing_ok} == {
        "TBE_KERNELS", "WEIGHTS_DATA", "CUST_AICPU_KERNELS", "SO_BINS", "MODEL_INOUT_INFO",
        "TASK_INFO", "TILING_DATA", "CUSTOM_OPS"}
    assert [m.value for m in layout.ModelHeaderType] == [0, 1, 2, 3, 4, 5, 6]


# --------------------------------------------------------------------------------------------
# header bytes

FULL_HEADER = dict(
    checksum=bytes(range(1, 65)), is_checksum=1, genmode=1, name="resnet50",
    ops=0x01020304, userdefineinfo=b"user\0defined", om_ir_version=2,
    platform_version="Ascend910B", platform_type=1, padd=b"\x07\x08\x09",
    need_check_os_cpu_info=1, is_unknow_model=1, reserved=b"\xAA" * 61 + b"\x55")


def test_header_fields_land_at_ge_offsets():
    data = write_om(None, PARTS, **FULL_HEADER)
    u32 = lambda off: struct.unpack_from("<I", data, off)[0]  # noqa: E731
    assert data[0:4] == b"IMOD"
    assert (u32(4), u32(8)) == (256, 0x20000000)
    assert data[12:76] == bytes(range(1, 65))
    assert u32(76) == BODY_LEN                                   # legacy length, same value
    assert data[80:84] == bytes([0, 1, 0, 1])                    # encrypt, checksum, type, genmode
    assert data[84:116] == b"resnet50".ljust(32, b"\0")
    assert u32(116) == 0x01020304
    assert data[120:152] == b"user\0defined".ljust(32, b"\0")
    assert (u32(152), u32(156)) == (2, 1)
    assert data[160:180] == b"Ascend910B".ljust(20, b"\0")
    assert data[180:184] == b"\x01\x07\x08\x09"
    assert struct.unpack_from("<Q", data, 184)[0] == BODY_LEN == len(data) - 256
    assert data[192:194] == b"\x01\x01"
    assert data[194:256] == b"\xAA" * 61 + b"\x55"


def test_header_pack_unpack_is_exact_for_arbitrary_bytes():
    raw = bytearray(random.Random(7).randbytes(256))
    h = ModelFileHeader.unpack(bytes(raw))
    assert h.pack() == bytes(raw)


def test_header_pack_rejects_values_that_do_not_fit():
    with pytest.raises(ArchiveError, match="ops = 4294967296"):
        ModelFileHeader(ops=1 << 32).pack()
    with pytest.raises(ArchiveError, match="reserved is 63 bytes; it holds at most 62"):
        ModelFileHeader(reserved=b"x" * 63).pack()


# --------------------------------------------------------------------------------------------
# round trip and layout

def test_round_trip_preserves_every_field_and_bytes(tmp_path):
    first = write_om(tmp_path / "a.om", PARTS, **FULL_HEADER)
    om = read_om(tmp_path / "a.om")
    for name, value in FULL_HEADER.items():
        expected = value.encode() if isinstance(value, str) else value
        assert getattr(om.header, name) == expected, name
    assert om.header.model_name == "resnet50"
    assert om.partitions == tuple(PARTS)
    assert om.write() == first
    assert write_om(None, om.partitions, header=om.header) == first
    assert sample() == sample()                               # deterministic


def test_single_model_body_layout_ge_facts_1_6():
    data = sample()
    assert len(data) == 256 + BODY_LEN
    assert data[256:264] == struct.pack("<I", 3) + b"\0" * 4      # num + 4 pad bytes
    offset = 0
    for i, p in enumerate(PARTS):
        e = data[ENTRY + 24 * i:ENTRY + 24 * (i + 1)]
        assert e[4:8] == b"\0" * 4
        assert struct.unpack("<I4xQQ", e) == (p.type, offset, len(p.data))  # offset from table end
        offset += len(p.data)
    assert data[256 + 80:] == b"".join(p.data for p in PARTS)   # back to back, table order


def test_multi_model_layout_and_round_trip():
    sub = [Partition(T.MODEL_DEF, b"sub-model"), Partition(T.TASK_INFO, b"sub-tasks")]
    data = write_om(None, PARTS, submodels=[sub], is_unknow_model=1)
    assert struct.unpack_from("<I", data, 156)[0] == 2
    second_table = 256 + BODY_LEN
    assert struct.unpack_from("<I4xQQ", data, second_table + 8 + 24) == (2, 9, 9)
    om = read_om(data)
    assert om.models == (tuple(PARTS), tuple(sub))
    assert om.partition(T.TASK_INFO, model=1) == b"sub-tasks"
    assert om.write() == data


def test_legacy_tiny_table_is_read_and_rewritten_in_current_form():
    om = read_om(legacy_om(PARTS))
    assert om.header.model_length == 0 and om.partitions == tuple(PARTS)
    modern = read_om(om.write())
    assert modern.partitions == tuple(PARTS) and modern.header.model_length == BODY_LEN
    assert modern.header.model_name == "old"


def test_write_to_path_is_atomic_and_matches_returned_bytes(tmp_path):
    path = tmp_path / "m.om"
    path.write_bytes(b"old content")
    data = write_om(path, PARTS)
    assert path.read_bytes() == data
    assert os.listdir(tmp_path) == ["m.om"]                    # no temp file left behind


def test_missing_partition_lookup_follows_ge_rules():
    om = read_om(write_om(None, [Partition(T.TASK_INFO, b"t")]))
    assert om.partition(T.SO_BINS) == b""                       # optional → empty
    with pytest.raises(ArchiveError, match="no MODEL_DEF partition"):
        om.partition(T.MODEL_DEF)
    with pytest.raises(ArchiveError, match="no model 1; model_num is 1"):
        om.partition(T.TASK_INFO, model=1)


def test_partition_types_by_number_and_unknown_number():
    assert Partition(26, b"x").type is T.CUSTOM_OPS
    with pytest.raises(ArchiveError, match="unknown partition type 13"):
        Partition(13, b"x")


# --------------------------------------------------------------------------------------------
# writer refusals

@pytest.mark.parametrize("parts, kwargs, message", [
    ([], {}, "has 0 partitions; GE accepts 1..8"),
    ([Partition(t, b"x") for t in list(T)[:9]], {}, "has 9 partitions; GE accepts 1..8"),
    ([Partition(T.MODEL_DEF, b"")], {}, r"partition 0 \(MODEL_DEF\) is empty"),
    ([Partition(T.MODEL_DEF, b"a"), Partition(T.MODEL_DEF, b"b")], {}, "two MODEL_DEF"),
    (PARTS, {"name": "n" * 32}, "name is 32 bytes with no terminating NUL; the field holds at most 31"),
    (PARTS, {"modeltype": 5}, "BUNDLE_MODEL"),
    (PARTS, {"is_encrypt": 1}, "ENCRYPTED"),
    (PARTS, {"is_unknow_model": 2}, "is_unknow_model is 2"),
], ids=["0-parts", "9-parts", "empty-part", "duplicate", "long-name", "bundle", "encrypted",
        "flag"])
def test_writer_refuses_what_the_reader_would_reject(parts, kwargs, message):
    with pytest.raises(ArchiveError, match=message):
        write_om(None, parts, **kwargs)


def test_writer_owns_computed_fields():
    with pytest.raises(TypeError, match="model_length"):
        write_om(None, PARTS, model_length=5)
    with pytest.raises(TypeError, match="unknown ModelFileHeader field"):
        write_om(None, PARTS, colour="red")


# --------------------------------------------------------------------------------------------
# reader: every corruption is a typed, located ArchiveError

def _table_num(n):
    return lambda d: patch(d, 256, "I", n)


def _entry(i, field, value):
    return lambda d: patch(d, ENTRY + 24 * i + {"type": 0, "offset": 8, "size": 16}[field],
                           "I" if field == "type" else "Q", value)


def _header(name, fmt, value):
    return lambda d: patch(d, layout.HEADER_OFFSETS[name], fmt, value)


CORRUPTIONS = {
    "empty": (lambda d: b"", "file is empty"),
    "truncated-header": (lambda d: d[:100], "file is 100 bytes, shorter than the 256-byte header"),
    "header-only": (lambda d: d[:256], f"model_length is {BODY_LEN} but the file holds 0 bytes"),
    "bad-magic": (lambda d: b"PK\x03\x04" + d[4:], "magic is 0x04034B50"),
    "bad-headsize": (_header("headsize", "I", 128), "headsize is 128, expected 256"),
    "bad-version": (_header("version", "I", 0x10000000), "version is 0x10000000"),
    "model-num-0": (_header("model_num", "I", 0), "model_num is 0"),
    "model-num-lies": (_header("model_num", "I", 2),
                       f"model 1: partition table at offset {BODY_LEN} needs 8 bytes"),
    "unknown-modeltype": (_header("modeltype", "B", 9), "modeltype is 9; known values"),
    "bundle": (_header("modeltype", "B", 5), "BUNDLE_MODEL"),
    "encrypted": (_header("is_encrypt", "B", 1), "ENCRYPTED"),
    "bad-flag": (_header("is_unknow_model", "B", 7), "is_unknow_model is 7"),
    "unterminated-name": (lambda d: d[:84] + b"n" * 32 + d[116:],
                          "name is 32 bytes with no terminating NUL"),
    "model-length-larger": (_header("model_length", "Q", BODY_LEN + 10),
                            f"model_length is {BODY_LEN + 10} but the file holds {BODY_LEN} bytes"),
    "model-length-smaller": (_header("model_length", "Q", BODY_LEN - 1),
                             f"model_length is {BODY_LEN - 1} but the file holds {BODY_LEN}"),
    "file-longer": (lambda d: d + b"\0" * 16, f"the file holds {BODY_LEN + 16} bytes"),
    "trailing-bytes": (lambda d: patch(d, 184, "Q", BODY_LEN + 4) + b"junk",
                       "model\\(s\\) end at 102 but model_length is 106: 4 unaccounted bytes"),
    "truncated-table": (lambda d: patch(d[:256 + 30], 184, "Q", 30),
                        "partition table of 3 entries ends at 80 but model_length is 30"),
    "table-head-cut": (lambda d: patch(d[:256 + 5], 184, "Q", 5),
                       "partition table at offset 0 needs 8 bytes but model_length is 5"),
    "0-partitions": (_table_num(0), "declares 0 partitions; GE accepts 1..8"),
    "9-partitions": (_table_num(9), "declares 9 partitions; GE accepts 1..8"),
    "huge-count": (_table_num(0xFFFFFFFF), "declares 4294967295 partitions"),
    "partition-past-end": (_entry(2, "size", 4096),
                           r"partition 2 \(TASK_INFO\) ends at 4193 but model_length is 102"),
    "offset-past-end": (_entry(1, "offset", 1 << 63), r"partition 1 \(WEIGHTS_DATA\) ends at"),
    "overlap": (_entry(1, "offset", 5),
                r"partition 1 \(WEIGHTS_DATA\) at 85..92 overlaps partition 0 \(MODEL_DEF\), "
                "which ends at 90"),
    "gap": (lambda d: _entry(1, "size", 6)(_entry(1, "offset", 11)(d)),
            r"partition 1 \(WEIGHTS_DATA\) starts at 91 but partition 0 \(MODEL_DEF\) ends at 90"),
    "sizes-short": (_entry(2, "size", 4), "end at 101 but model_length is 102: 1 unaccounted"),
    "unknown-type": (_entry(1, "type", 13), "partition 1 has unknown partition type 13"),
    "duplicate-type": (_entry(1, "type", 0), r"partition 1 \(MODEL_DEF\) repeats"),
    "legacy-length-lies": (lambda d: legacy_om(PARTS, length_delta=3),
                           r"length \(model_length is 0\) is 65 but the file holds 62"),
}


@pytest.mark.parametrize("mutate, message", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_corruption_is_a_typed_located_error(mutate, message):
    with pytest.raises(ArchiveError, match=message) as info:
        read_om(mutate(sample()))
    assert str(info.value).startswith("OM data is invalid: ")


def test_unreadable_path_is_an_archive_error(tmp_path):
    with pytest.raises(ArchiveError, match="cannot read OM file .*missing.om"):
        read_om(tmp_path / "missing.om")


def test_every_truncation_and_random_damage_is_an_archive_error_or_parses():
    data = sample()
    for n in range(len(data)):
        with pytest.raises(ArchiveError):
            read_om(data[:n])
    rng = random.Random(2024)
    for _ in range(3000):
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(256, len(b)) if rng.random() < 0.7 else rng.randrange(256)] = rng.randrange(256)
        try:
            om = read_om(bytes(b))
        except ArchiveError:
            continue
        # Whatever parses rewrites to the same content. Not byte-exact: the writer recomputes the
        # legacy `length` (unchecked when model_length is set, as in GE) and zeroes table padding.
        again = read_om(om.write())
        assert isinstance(om, OmFile) and again.models == om.models
        assert again.header == dataclasses.replace(om.header, length=again.header.length)
