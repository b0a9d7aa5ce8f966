"""MODEL_INOUT_INFO (om2gen.formats.om.inout_info; docs/om-format.md, *MODEL_INOUT_INFO*): GE's TLV
"model introduction" of the inputs, outputs and gears. Its byte layout against bytes spelled out
from GE_FACTS §1.8 and GE's ge_model_inout_types.h, and the parser's refusal of anything but the
form the writer writes, whatever the bytes."""
import random
import struct

import pytest

from om2gen.errors import ArchiveError
from om2gen.formats.om import inout_info
from om2gen.formats.om.inout_info import InOutInfo, TensorInfo

X = TensorInfo("x", 24, 2, 0, (-1, 3), (-1, 3))
FULL = InOutInfo(inputs=(X, TensorInfo("ids", 64, 2, 9, (1, 8), (1, 8), ((1, 1), (1, 16)))),
                 outputs=(TensorInfo("y", 40, 2, 0, (2, 5), (2, 5)),), dynamic_batch=(1, 2, 4),
                 dynamic_hw=((16, 16), (24, 32)), dynamic_dims=((8, 1), (16, 2)),
                 dynamic_output_shape=("0,0,1,10", "-1,1,2"), data_name_order=("x", "ids"))


# ---- byte layout ---------------------------------------------------------------------------------

def test_an_input_desc_block_is_laid_out_as_ge_writes_it():
    assert inout_info.build(InOutInfo(inputs=(X,))) == bytes.fromhex(
        "00000000" "45000000"            # type MODEL_INPUT_DESC, length 4 + 32 + 1 + 16 + 16 = 69
        "01000000"                       # one tensor desc
        "1800000000000000"               # size_t size 24
        "02000000" "00000000"            # Format FORMAT_ND, DataType DT_FLOAT
        "01000000" "10000000" "10000000" "00000000"  # name_len, dims_len, dimsV2_len, shape_range_len
        "78"                             # "x"
        "ffffffffffffffff" "0300000000000000"        # dims -1, 3
        "ffffffffffffffff" "0300000000000000")       # dimsV2


def test_the_gear_blocks_are_laid_out_as_ge_writes_them():
    assert inout_info.build(InOutInfo(dynamic_batch=(1, 2, 4))) == bytes.fromhex(
        "02000000" "1c000000" "03000000" "0100000000000000" "0200000000000000" "0400000000000000")
    assert inout_info.build(InOutInfo(dynamic_hw=((16, 16), (24, 32)))) == bytes.fromhex(
        "03000000" "2c000000" "02000000" "02000000" "02000000"   # 2 gears of 2 values each
        "1000000000000000" "1000000000000000" "1800000000000000" "2000000000000000")
    assert inout_info.build(InOutInfo(dynamic_dims=((8,), (16,)))) == bytes.fromhex(
        "04000000" "1c000000" "02000000" "01000000" "01000000" "0800000000000000" "1000000000000000")
    assert inout_info.build(InOutInfo(data_name_order=("x", "ids"))) == bytes.fromhex(
        "06000000" "10000000" "02000000" "01000000" "03000000" "78" "696473")
    assert inout_info.build(InOutInfo(dynamic_output_shape=("-1,0,2",))) == bytes.fromhex(
        "05000000" "0e000000" "01000000" "06000000") + b"-1,0,2"


def test_blocks_come_in_type_order_and_read_back():
    data = inout_info.build(FULL)
    types, pos = [], 0
    while pos < len(data):
        t, n = struct.unpack_from("<iI", data, pos)
        types.append(t)
        pos += 8 + n
    assert types == [0, 1, 2, 3, 4, 5, 6] and pos == len(data)
    assert inout_info.parse(data) == FULL
    assert inout_info.build(InOutInfo()) == b"" and inout_info.parse(b"") == InOutInfo()


# ---- hostile bytes ---------------------------------------------------------------------------------

def _block(t: int, value: bytes, length: int | None = None) -> bytes:
    return struct.pack("<iI", t, len(value) if length is None else length) + value


def _desc(name=b"x", dims=(1,), size=4, dims_len=None, v2_len=None, range_len=0) -> bytes:
    d = struct.pack(f"<{len(dims)}q", *dims)
    return struct.pack("<QiiIIII", size, 2, 0, len(name), len(d) if dims_len is None else dims_len,
                       len(d) if v2_len is None else v2_len, range_len) + name + d + d


HOSTILE = {
    "a partial block header": (b"\0\0\0\0\x05", "5 bytes, too few for a block header"),
    "an unknown block type": (_block(7, b"\1\0\0\0"), "block type 7, which GE's ModelDescType does not have"),
    "a negative block type": (_block(-1, b""), "block type -1"),
    "a block longer than the partition": (_block(2, b"\1\0\0\0", length=0xFFFFFFFF),
                                          "says 4294967295 bytes, the partition has 4 left"),
    "a huge tensor count": (_block(0, struct.pack("<I", 0xFFFFFFFF) + _desc()),
                            "4294967295 entries need at least 137438953440 bytes"),
    "a huge dims_len": (_block(0, struct.pack("<I", 1) + _desc(dims_len=0xFFFFFFF8)),
                        r"dims \(536870911 values\) needs 4294967288 bytes"),
    "a dims_len not of whole int64s": (_block(0, struct.pack("<I", 1) + _desc(dims_len=7)),
                                       "dims_len 7 is not a multiple of 8"),
    "a shape_range_len not of whole pairs": (_block(0, struct.pack("<I", 1) + _desc(range_len=8)),
                                             "shape_range_len 8 is not a multiple of 16"),
    "a name that is not UTF-8": (_block(0, struct.pack("<I", 1) + _desc(name=b"\xff\xfe")), "name is not UTF-8"),
    "an empty block": (_block(1, struct.pack("<I", 0)), "0 entries; GE leaves an empty block out"),
    "a huge gear count": (_block(2, struct.pack("<I", 0x20000000)), "536870912 entries need at least"),
    "a huge part size": (_block(3, struct.pack("<II", 1, 0xFFFFFFFF)), r"part 0 \(4294967295 values\) needs"),
    "a huge string length": (_block(6, struct.pack("<II", 1, 0xFFFFFFFF) + b"x"), "string 0 needs 4294967295 bytes"),
    "bytes after the entries": (_block(2, struct.pack("<IQ", 1, 2) + b"\0"), "1 bytes before the block does"),
    "a repeated block": (_block(2, struct.pack("<IQ", 1, 2)) * 2,
                         "a MODEL_DYNAMIC_BATCH block after the MODEL_DYNAMIC_BATCH block"),
    "blocks out of order": (_block(2, struct.pack("<IQ", 1, 2)) + _block(1, struct.pack("<I", 1) + _desc()),
                            "a MODEL_OUTPUT_DESC block after the MODEL_DYNAMIC_BATCH block"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_malformed_partition_is_an_archive_error_naming_what_is_wrong(case):
    data, match = HOSTILE[case]
    with pytest.raises(ArchiveError, match=match):
        inout_info.parse(data)


def test_no_truncation_or_changed_byte_makes_the_parser_fail_otherwise():
    """Every prefix of a valid partition, and 3000 copies with a few bytes changed (lengths and
    counts among them), either parse or are an ArchiveError; a prefix parses only where a block
    ends, and then as the blocks before it."""
    data = inout_info.build(FULL)
    ends = set()
    pos = 0
    while pos < len(data):
        pos += 8 + struct.unpack_from("<I", data, pos + 4)[0]
        ends.add(pos)
    for n in range(len(data)):
        try:
            got = inout_info.parse(data[:n])
        except ArchiveError:
            assert n not in ends | {0}, n
        else:
            assert n in ends | {0}, n
            assert inout_info.build(got) == data[:n]
    rng = random.Random(8)
    for _ in range(3000):
        d = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(d))
            d[at] = rng.choice((0, 0xFF, d[at] ^ (1 << rng.randrange(8)), rng.randrange(256)))
        try:
            got = inout_info.parse(bytes(d))
        except ArchiveError:
            continue
        assert inout_info.build(got) == bytes(d)   # whatever parses is exactly what build writes for it
