"""OpSoStore (SO_BINS) and CUSTOM_OPS payloads: GE_FACTS §4 / §1.8, GE_BEHAVIOURS A0, A1, A6."""
from __future__ import annotations

import struct

import pytest

from om2gen.errors import ArchiveError
from om2gen.formats import op_so_store
from om2gen.formats.op_so_store import CustomOpKernel, OpSoBin, SoBinType

T = SoBinType


# ---------------------------------------------------------------------------------- flags (A0)

def test_enum_values_and_flags():
    assert [int(t) for t in T] == [0, 1, 2, 3]
    assert [t.flag for t in T] == [0x8000, 0x4000, 0x2000, 0x1000]
    assert op_so_store.ALL_FLAGS == 0xF000


@pytest.mark.parametrize("types, flags", [
    ([], 0),
    ([T.kSpaceRegistry, T.kOpMasterDevice], 0xC000),
    ([T.kOpMasterDevice, T.kAutofuse], 0x6000),
    ([T.kCustomOp], 0x1000),
    ([T.kCustomOp, T.kSpaceRegistry, T.kCustomOp], 0x9000),
    (list(T), 0xF000),
])
def test_flags_round_trip(types, flags):
    assert op_so_store.flags_of(types) == flags
    assert op_so_store.types_of(flags) == sorted(set(types))


def test_flags_of_accepts_plain_ints_and_bins():
    bins = [OpSoBin("a.so", "built-in", T.kOpMasterDevice, b"x"),
            OpSoBin("b.so", "", T.kAutofuse, b"y")]
    assert op_so_store.flags_of(b.bin_type for b in bins) == 0x6000
    assert op_so_store.flags_of([0, 1]) == 0xC000
    with pytest.raises(ArchiveError, match="not a SoBinType"):
        op_so_store.flags_of([4])


@pytest.mark.parametrize("flags", [0x0800, 0x8001, 0xC0FF])
def test_types_of_rejects_unknown_bits(flags):
    with pytest.raises(ArchiveError, match="unknown bits"):
        op_so_store.types_of(flags)


@pytest.mark.parametrize("flags", [-1, 0x10000, "0x8000"])
def test_types_of_rejects_non_uint16(flags):
    with pytest.raises(ArchiveError, match="uint16"):
        op_so_store.types_of(flags)


# ------------------------------------------------------------------------------ layout (A0/A1)

TWO = [
    OpSoBin("libopmaster.so", "built-in", T.kOpMasterDevice, b"\x7fELF-one"),
    OpSoBin("g.so", "vendors/cust", T.kCustomOp, b"\x01\x02\x03"),
]


def hand_packed_two() -> bytes:
    """The 2-item store, packed field by field from GE_FACTS §4.2."""
    return (
        b"\x02\x00\x00\x00"                      # so_num = 2
        + b"\xfd\x6e\x77\x5d"                    # magic 0x5D776EFD, little-endian
        + b"\x0e\x00"                            # so_name_len = 14
        + b"\x01\x00"                            # so_bin_type = kOpMasterDevice
        + b"\x08\x00\x00\x00"                    # vendor_name_len = 8
        + b"\x08\x00\x00\x00"                    # bin_len = 8
        + b"libopmaster.so" + b"built-in" + b"\x7fELF-one"
        + b"\xfd\x6e\x77\x5d"
        + b"\x04\x00" + b"\x03\x00"              # so_name_len 4, kCustomOp
        + b"\x0c\x00\x00\x00" + b"\x03\x00\x00\x00"
        + b"g.so" + b"vendors/cust" + b"\x01\x02\x03"
    )


def test_head_sizes():
    assert op_so_store.SO_STORE_HEAD_SIZE == 4
    assert op_so_store.SO_ITEM_HEAD_SIZE == 16
    assert op_so_store.CUSTOM_OP_ITEM_HEAD_SIZE == 12


def test_build_is_byte_exact():
    data = op_so_store.build(TWO)
    assert data == hand_packed_two()
    assert len(data) == 4 + 2 * 16 + (14 + 8 + 8) + (4 + 12 + 3)


def test_load_hand_packed():
    assert op_so_store.load(hand_packed_two()) == TWO
    assert op_so_store.load(bytearray(hand_packed_two())) == TWO
    assert op_so_store.load(memoryview(hand_packed_two())) == TWO


def test_round_trip_all_types():
    bins = [
        OpSoBin("libopsproto_rt2.0.so", "built-in/op_proto/lib/linux/x86_64", T.kSpaceRegistry,
                bytes(range(256)) * 3),
        OpSoBin("Ascend-V7.6-libopmaster.so", "built_in", T.kOpMasterDevice, b"\x00"),
        OpSoBin("guard_check.so", "", T.kAutofuse, b"guard"),
        OpSoBin("autofuse_ä.so", "vendors/ü", T.kAutofuse, b"\xff" * 10),
        OpSoBin("libcust.so", "vendors/cust-0", T.kCustomOp, b"same"),
        OpSoBin("libcust.so", "vendors/cust-1", T.kCustomOp, b"same"),   # duplicates are fine
    ]
    data = op_so_store.build(bins)
    back = op_so_store.load(data)
    assert back == bins
    assert all(type(b.bin_type) is SoBinType for b in back)
    assert op_so_store.build(back) == data


def test_no_items_is_fine():
    assert op_so_store.build([]) == b"\x00\x00\x00\x00"
    assert op_so_store.load(b"\x00\x00\x00\x00") == []
    assert op_so_store.load(b"") == []          # partition present with size 0 (A1)


def test_ge_a1_count_without_item():
    with pytest.raises(ArchiveError, match="so_num is 1"):
        op_so_store.load(bytes([1, 0, 0, 0, 0]))


def test_ge_a1_sixty_four_zero_bytes():
    with pytest.raises(ArchiveError, match="SO_BINS"):
        op_so_store.load(bytes(64))


def test_ge_a1_item_with_empty_binary_rejected():
    data = struct.pack("<IIHHII", 1, 0x5D776EFD, 4, 2, 0, 0) + b"a.so"
    with pytest.raises(ArchiveError, match=r"item 0 of 1 \('a.so'.*bin_len is 0"):
        op_so_store.load(data)


# ------------------------------------------------------------------------------- corruption

def _patch(data: bytes, offset: int, fmt: str, value) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


def _ids(value):
    return "data" if isinstance(value, bytes) else value


GOOD = hand_packed_two()
ITEM1 = 4 + 16 + 14 + 8 + 8          # offset of the second item head


@pytest.mark.parametrize("data, pattern", [
    (_patch(GOOD, 4, "<I", 0x5D776EFE), r"item 0 of 2 \(offset 4\): magic is 0x5D776EFE"),
    (_patch(GOOD, ITEM1, "<I", 0), rf"item 1 of 2 \(offset {ITEM1}\): magic is 0x00000000"),
    (_patch(GOOD, 4 + 6, "<H", 4), r"item 0 .*so_bin_type 4 is not a known SoBinType"),
    (_patch(GOOD, ITEM1 + 6, "<H", 0xFFFF), r"item 1 .*'g.so'.*so_bin_type 65535"),
    (_patch(GOOD, 4 + 4, "<H", 0xFFFF), r"item 0 .*so_name_len 65535 .* lies"),
    (_patch(GOOD, 4 + 8, "<I", 1 << 31), r"item 0 .*vendor_name_len 2147483648"),
    (_patch(GOOD, ITEM1 + 12, "<I", 4), r"item 1 .*bin_len 4 .* only 19 bytes remain"),
    (_patch(GOOD, 4 + 12, "<I", 7), r"item 1 of 2 .*magic"),   # short bin_len desyncs item 1
    (_patch(GOOD, ITEM1 + 12, "<I", 2), r"1 bytes follow the last of so_num=2"),
    (_patch(GOOD, 0, "<I", 3), r"item 2 of 3 .*only 0 bytes left"),
    (_patch(GOOD, 0, "<I", 6), r"so_num is 6 but only 81 bytes follow"),
    (_patch(GOOD, 0, "<I", 0xFFFFFFFF), r"so_num is 4294967295"),
    (_patch(GOOD, 0, "<I", 1), rf"{len(GOOD) - ITEM1} bytes follow the last of so_num=1"),
    (_patch(GOOD, 4 + 4, "<H", 0), r"item 0 .*so_name_len is 0"),
    (GOOD[:4 + 16] + b"\xff" + GOOD[4 + 17:], r"item 0 .*so_name is not valid UTF-8"),
    (GOOD + b"\x00", r"1 bytes follow the last"),
    (b"\x01\x00", r"2 bytes is too short for the 4-byte SoStoreHead"),
], ids=_ids)
def test_corruption_is_a_typed_error(data, pattern):
    with pytest.raises(ArchiveError, match=pattern):
        op_so_store.load(data)


def test_every_truncation_is_an_error():
    for n in range(1, len(GOOD)):
        with pytest.raises(ArchiveError, match="SO_BINS"):
            op_so_store.load(GOOD[:n])


def test_item_with_zero_magic_and_lengths_named():
    data = struct.pack("<I", 1) + bytes(16)
    with pytest.raises(ArchiveError, match=r"item 0 of 1 \(offset 4\): magic is 0x00000000"):
        op_so_store.load(data)


@pytest.mark.parametrize("bad, pattern", [
    (OpSoBin("x.so", "v", T.kAutofuse, b""), r"item 0 \('x.so'\): binary is empty"),
    (OpSoBin("", "v", T.kAutofuse, b"x"), r"item 0: so_name is empty"),
    (OpSoBin("n" * 65536, "v", T.kAutofuse, b"x"), r"so_name is 65536 bytes"),
])
def test_build_refuses_unloadable_items(bad, pattern):
    with pytest.raises(ArchiveError, match=pattern):
        op_so_store.build([bad])


def test_build_accepts_max_name_and_rejects_non_bins():
    data = op_so_store.build([OpSoBin("n" * 65535, "", T.kSpaceRegistry, b"x")])
    assert op_so_store.load(data)[0].name == "n" * 65535
    with pytest.raises(ArchiveError, match="expected an OpSoBin"):
        op_so_store.build([("a.so", "", 0, b"x")])


def test_opsobin_normalises_type_and_data():
    b = OpSoBin("a.so", "", 3, bytearray(b"xy"))
    assert b.bin_type is T.kCustomOp and isinstance(b.data, bytes)
    with pytest.raises(ValueError):
        OpSoBin("a.so", "", 9, b"x")


# --------------------------------------------------------------------------------- CUSTOM_OPS

KERNELS = [CustomOpKernel("MyAdd", b"\x10\x20\x30"), CustomOpKernel("MyMul", b"blob")]


def hand_packed_custom() -> bytes:
    return (b"KSCK" + b"\x05\x00\x00\x00" + b"\x03\x00\x00\x00" + b"MyAdd" + b"\x10\x20\x30"
            + b"\x4b\x53\x43\x4b" + struct.pack("<II", 5, 4) + b"MyMul" + b"blob")


def test_custom_ops_byte_exact():
    assert struct.unpack("<I", b"KSCK")[0] == op_so_store.CUSTOM_OP_ITEM_MAGIC == 0x4B43534B
    assert op_so_store.build_custom_ops(KERNELS) == hand_packed_custom()
    assert op_so_store.load_custom_ops(hand_packed_custom()) == KERNELS


def test_custom_ops_empty():
    assert op_so_store.build_custom_ops([]) == b""
    assert op_so_store.load_custom_ops(b"") == []


@pytest.mark.parametrize("data, pattern", [
    (b"KCSK" + hand_packed_custom()[4:], r"item 0 \(offset 0\): magic is 0x4B53434B"),
    (_patch(hand_packed_custom(), 4, "<I", 100), r"item 0 .*name_len 100 \+ bin_len 3"),
    (_patch(hand_packed_custom(), 8, "<I", 0), r"item 0 \('MyAdd'.*bin_len is 0"),
    (_patch(hand_packed_custom(), 4, "<I", 0), r"item 0 .*name_len is 0"),
    (hand_packed_custom() + b"KSCK", r"item 2 .*only 4 bytes left"),
    (hand_packed_custom()[:12] + b"\xfe" + hand_packed_custom()[13:],
     r"op type is not valid UTF-8"),
], ids=_ids)
def test_custom_ops_corruption(data, pattern):
    with pytest.raises(ArchiveError, match=pattern):
        op_so_store.load_custom_ops(data)


def test_custom_ops_every_truncation_is_an_error():
    data = hand_packed_custom()
    for n in range(1, len(data)):
        if n == 12 + 5 + 3:           # exactly one whole item: a valid 1-item payload
            assert op_so_store.load_custom_ops(data[:n]) == KERNELS[:1]
            continue
        with pytest.raises(ArchiveError, match="CUSTOM_OPS"):
            op_so_store.load_custom_ops(data[:n])


@pytest.mark.parametrize("bad, pattern", [
    (CustomOpKernel("MyAdd", b""), r"serialized kernel is empty"),
    (CustomOpKernel("", b"x"), r"op type is empty"),
])
def test_build_custom_ops_refuses(bad, pattern):
    with pytest.raises(ArchiveError, match=pattern):
        op_so_store.build_custom_ops([bad])
