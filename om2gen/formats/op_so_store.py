"""SO in OM: the OpSoStore payload (classic OM ``SO_BINS`` partition, OM2 ``data/so_bins/``) and
the ``CUSTOM_OPS`` partition item format.

Byte layout (little-endian, no padding, no NUL terminators; GE_FACTS §4.2, GE_BEHAVIOURS A0)::

    SoStoreHead      u32 so_num
    so_num times:
      SoStoreItemHead  u32 magic = 0x5D776EFD
                       u16 so_name_len
                       u16 so_bin_type          (SoBinType value)
                       u32 vendor_name_len
                       u32 bin_len
      so_name[so_name_len] vendor_name[vendor_name_len] bin[bin_len]

``CUSTOM_OPS`` (GE_FACTS §1.8, GE_BEHAVIOURS A0/A6) is a plain concatenation, no count::

    u32 magic = 0x4B43534B ("KCSK")  u32 name_len  u32 bin_len  op_type[name_len]  kernel[bin_len]

The loaders are stricter than GE's (which skips the magic check, stops at a truncated item and
accepts unknown types): every malformed byte is an ``ArchiveError`` naming the item and the field.
An empty payload (partition present but size 0) is fine and loads as no items (GE_BEHAVIOURS A1).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable

from ..errors import ArchiveError

__all__ = [
    "SoBinType", "OpSoBin", "CustomOpKernel",
    "SO_ITEM_MAGIC", "CUSTOM_OP_ITEM_MAGIC", "SO_STORE_HEAD_SIZE", "SO_ITEM_HEAD_SIZE",
    "CUSTOM_OP_ITEM_HEAD_SIZE", "ALL_FLAGS",
    "flags_of", "types_of", "build", "load", "build_custom_ops", "load_custom_ops",
]

SO_ITEM_MAGIC = 0x5D776EFD          # same value as KernelStore's kKernelItemMagic
CUSTOM_OP_ITEM_MAGIC = 0x4B43534B   # GE calls it "KCSK"; little-endian on disk: b"KSCK"

_HEAD = struct.Struct("<I")              # SoStoreHead
_ITEM = struct.Struct("<IHHII")          # SoStoreItemHead
_CUSTOM = struct.Struct("<III")          # CustomKernelItemHeader
SO_STORE_HEAD_SIZE = _HEAD.size          # 4
SO_ITEM_HEAD_SIZE = _ITEM.size           # 16
CUSTOM_OP_ITEM_HEAD_SIZE = _CUSTOM.size  # 12

_U16_MAX = 0xFFFF
_U32_MAX = 0xFFFFFFFF


class SoBinType(IntEnum):
    """GE ``enum class SoBinType : uint16_t`` (GE_FACTS §4.1)."""

    kSpaceRegistry = 0   # host infer-shape / tiling so (RT2 dynamic shape)
    kOpMasterDevice = 1  # device-side tiling so ("op_master_device")
    kAutofuse = 2        # autofuse fused-op so, incl. guard_check.so
    kCustomOp = 3        # PortableOp custom-op so

    @property
    def flag(self) -> int:
        """This type's bit in the uint16 ``so_in_om_flag``: ``0x8000 >> type``."""
        return 0x8000 >> int(self)


ALL_FLAGS = 0
for _t in SoBinType:
    ALL_FLAGS |= _t.flag
del _t


def flags_of(types: Iterable[SoBinType | int]) -> int:
    """The ``so_in_om_flag`` with each of ``types`` enabled (duplicates allowed).
    ``flags_of([kSpaceRegistry, kOpMasterDevice]) == 0xC000``."""
    flags = 0
    for t in types:
        try:
            flags |= SoBinType(t).flag
        except ValueError:
            raise ArchiveError(f"so_in_om_flag: {t!r} is not a SoBinType "
                               f"(known: 0..{max(SoBinType)})") from None
    return flags


def types_of(flags: int) -> list[SoBinType]:
    """The SoBinTypes enabled in a ``so_in_om_flag``, in type order. ``0x6000`` →
    ``[kOpMasterDevice, kAutofuse]``. Bits no SoBinType owns are an error: this reader would
    otherwise silently ignore SOs the model needs."""
    if not isinstance(flags, int) or not 0 <= flags <= _U16_MAX:
        raise ArchiveError(f"so_in_om_flag {flags!r} is not a uint16")
    unknown = flags & ~ALL_FLAGS
    if unknown:
        raise ArchiveError(f"so_in_om_flag 0x{flags:04X} has unknown bits 0x{unknown:04X} "
                           f"(known: 0x{ALL_FLAGS:04X}); the model needs a newer om2gen")
    return [t for t in SoBinType if flags & t.flag]


@dataclass(frozen=True)
class OpSoBin:
    """One packed .so (GE ``OpSoBin``): file name, vendor directory (e.g. ``"built-in"``,
    ``"vendors/customize"``, or ``""`` for ``guard_check.so``), type and the file bytes."""

    name: str
    vendor: str
    bin_type: SoBinType
    data: bytes

    def __post_init__(self):
        object.__setattr__(self, "bin_type", SoBinType(self.bin_type))
        object.__setattr__(self, "data", bytes(self.data))


@dataclass(frozen=True)
class CustomOpKernel:
    """One ``CUSTOM_OPS`` item: the custom op type and its serialized kernel instance
    (``PortableOp::Serialize()`` bytes; opaque here, as in GE)."""

    op_type: str
    data: bytes

    def __post_init__(self):
        object.__setattr__(self, "data", bytes(self.data))


# --------------------------------------------------------------------------------------------
# SO_BINS


def _encode(text: str, what: str) -> bytes:
    if not isinstance(text, str):
        raise ArchiveError(f"{what} must be a str, not {type(text).__name__}")
    return text.encode("utf-8")


def build(bins: Iterable[OpSoBin]) -> bytes:
    """Serialize ``bins`` into an OpSoStore payload, in the given order. Refuses anything the
    loader (GE's or ours) would reject: empty name or binary, over-long fields."""
    bins = list(bins)
    if len(bins) > _U32_MAX:
        raise ArchiveError(f"SO_BINS: {len(bins)} items do not fit the u32 so_num")
    out = [_HEAD.pack(len(bins))]
    for i, b in enumerate(bins):
        if not isinstance(b, OpSoBin):
            raise ArchiveError(f"SO_BINS item {i}: expected an OpSoBin, got {type(b).__name__}")
        where = f"SO_BINS item {i} ({b.name!r})"
        name = _encode(b.name, f"{where} so_name")
        vendor = _encode(b.vendor, f"{where} vendor_name")
        if not name:
            raise ArchiveError(f"SO_BINS item {i}: so_name is empty; give the .so its file name")
        if len(name) > _U16_MAX:
            raise ArchiveError(f"{where}: so_name is {len(name)} bytes, more than the u16 "
                               f"so_name_len allows ({_U16_MAX})")
        if len(vendor) > _U32_MAX:
            raise ArchiveError(f"{where}: vendor_name is {len(vendor)} bytes, too long for u32")
        if not b.data:
            raise ArchiveError(f"{where}: binary is empty; GE rejects bin_len 0")
        if len(b.data) > _U32_MAX:
            raise ArchiveError(f"{where}: binary is {len(b.data)} bytes, too long for u32 bin_len")
        out.append(_ITEM.pack(SO_ITEM_MAGIC, len(name), int(b.bin_type), len(vendor), len(b.data)))
        out += (name, vendor, b.data)
    return b"".join(out)


def _decode(raw: bytes, where: str, field: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ArchiveError(f"{where}: {field} is not valid UTF-8 ({e.reason} at byte "
                           f"{e.start})") from None


def load(data: bytes | bytearray | memoryview) -> list[OpSoBin]:
    """Parse an OpSoStore payload. An empty payload is no items. Every inconsistency (short
    head, so_num vs. items, magic, lengths past the end, unknown type, empty binary, bytes
    after the last item, non-UTF-8 names) raises ArchiveError naming the item and field."""
    mv = memoryview(data).cast("B")
    size = len(mv)
    if size == 0:
        return []
    if size < _HEAD.size:
        raise ArchiveError(f"SO_BINS: {size} bytes is too short for the 4-byte SoStoreHead "
                           f"(so_num); the partition is truncated")
    (so_num,) = _HEAD.unpack_from(mv, 0)
    off = _HEAD.size
    if so_num * _ITEM.size > size - off:
        raise ArchiveError(f"SO_BINS: so_num is {so_num} but only {size - off} bytes follow the "
                           f"head, less than {so_num} item heads of {_ITEM.size} bytes need; "
                           f"the partition is truncated or so_num is wrong")
    bins: list[OpSoBin] = []
    for i in range(so_num):
        where = f"SO_BINS item {i} of {so_num} (offset {off})"
        if size - off < _ITEM.size:
            raise ArchiveError(f"{where}: only {size - off} bytes left for the {_ITEM.size}-byte "
                               f"SoStoreItemHead; the partition is truncated or so_num is wrong")
        magic, name_len, bin_type, vendor_len, bin_len = _ITEM.unpack_from(mv, off)
        if magic != SO_ITEM_MAGIC:
            raise ArchiveError(f"{where}: magic is 0x{magic:08X}, expected 0x{SO_ITEM_MAGIC:08X}; "
                               f"the payload is corrupt or not an OpSoStore")
        body = off + _ITEM.size
        need = name_len + vendor_len + bin_len
        if need > size - body:
            raise ArchiveError(f"{where}: so_name_len {name_len} + vendor_name_len {vendor_len} "
                               f"+ bin_len {bin_len} = {need} bytes, but only {size - body} "
                               f"bytes remain; a length field lies or the data is truncated")
        name = _decode(bytes(mv[body:body + name_len]), where, "so_name")
        where = f"SO_BINS item {i} of {so_num} ({name!r}, offset {off})"
        if name_len == 0:
            raise ArchiveError(f"{where}: so_name_len is 0; every packed .so needs a name")
        try:
            kind = SoBinType(bin_type)
        except ValueError:
            raise ArchiveError(f"{where}: so_bin_type {bin_type} is not a known SoBinType "
                               f"(0..{max(SoBinType)}); the model needs a newer om2gen") from None
        if bin_len == 0:
            raise ArchiveError(f"{where}: bin_len is 0; GE rejects an empty .so")
        p = body + name_len
        vendor = _decode(bytes(mv[p:p + vendor_len]), where, "vendor_name")
        p += vendor_len
        bins.append(OpSoBin(name, vendor, kind, bytes(mv[p:p + bin_len])))
        off = p + bin_len
    if off != size:
        raise ArchiveError(f"SO_BINS: {size - off} bytes follow the last of so_num={so_num} items "
                           f"(offset {off} of {size}); so_num is wrong or the data is corrupt")
    return bins


# --------------------------------------------------------------------------------------------
# CUSTOM_OPS


def build_custom_ops(kernels: Iterable[CustomOpKernel]) -> bytes:
    """Serialize CUSTOM_OPS items in the given order. Empty op type or kernel bytes are refused
    (GE fails on empty serialized bytes, GE_BEHAVIOURS A6)."""
    out = []
    for i, k in enumerate(kernels):
        if not isinstance(k, CustomOpKernel):
            raise ArchiveError(f"CUSTOM_OPS item {i}: expected a CustomOpKernel, "
                               f"got {type(k).__name__}")
        where = f"CUSTOM_OPS item {i} ({k.op_type!r})"
        name = _encode(k.op_type, f"{where} op type")
        if not name:
            raise ArchiveError(f"CUSTOM_OPS item {i}: op type is empty")
        if not k.data:
            raise ArchiveError(f"{where}: serialized kernel is empty; GE rejects it")
        for field, n in (("op type", len(name)), ("kernel", len(k.data))):
            if n > _U32_MAX:
                raise ArchiveError(f"{where}: {field} is {n} bytes, too long for a u32 length")
        out += (_CUSTOM.pack(CUSTOM_OP_ITEM_MAGIC, len(name), len(k.data)), name, k.data)
    return b"".join(out)


def load_custom_ops(data: bytes | bytearray | memoryview) -> list[CustomOpKernel]:
    """Parse a CUSTOM_OPS payload (empty → no items). Items must tile the payload exactly."""
    mv = memoryview(data).cast("B")
    size, off, items = len(mv), 0, []
    while off < size:
        i = len(items)
        where = f"CUSTOM_OPS item {i} (offset {off})"
        if size - off < _CUSTOM.size:
            raise ArchiveError(f"{where}: only {size - off} bytes left for the {_CUSTOM.size}-byte "
                               f"item head; the partition is truncated")
        magic, name_len, bin_len = _CUSTOM.unpack_from(mv, off)
        if magic != CUSTOM_OP_ITEM_MAGIC:
            raise ArchiveError(f"{where}: magic is 0x{magic:08X}, expected "
                               f"0x{CUSTOM_OP_ITEM_MAGIC:08X} (\"KCSK\"); the payload is corrupt")
        body = off + _CUSTOM.size
        if name_len + bin_len > size - body:
            raise ArchiveError(f"{where}: name_len {name_len} + bin_len {bin_len} = "
                               f"{name_len + bin_len} bytes, but only {size - body} bytes remain; "
                               f"a length field lies or the data is truncated")
        op_type = _decode(bytes(mv[body:body + name_len]), where, "op type")
        where = f"CUSTOM_OPS item {i} ({op_type!r}, offset {off})"
        if name_len == 0:
            raise ArchiveError(f"{where}: name_len is 0; every item names its op type")
        if bin_len == 0:
            raise ArchiveError(f"{where}: bin_len is 0; GE rejects an empty serialized kernel")
        p = body + name_len
        items.append(CustomOpKernel(op_type, bytes(mv[p:p + bin_len])))
        off = p + bin_len
    return items
