"""The KernelStore payload of the TBE_KERNELS / CUST_AICPU_KERNELS partitions (GE_FACTS §1.8).

A plain concatenation of items, no count header (little-endian, no padding, no NULs)::

    u32 magic = 0x5D776EFD (kKernelItemMagic)  u32 name_len  u32 bin_len  name[name_len]  bin[bin_len]

GE writes items in ``unordered_map`` order; om2gen writes them sorted by name (deterministic).
The loader is stricter than GE's (which stops silently at a short tail): any malformed byte is an
``ArchiveError`` naming the item.
"""
from __future__ import annotations

import struct
from typing import Iterable

from ...errors import ArchiveError

KERNEL_ITEM_MAGIC = 0x5D776EFD
_ITEM = struct.Struct("<III")
ITEM_HEAD_SIZE = _ITEM.size   # 12
_U32_MAX = 0xFFFFFFFF


def build(kernels: Iterable[tuple[str, bytes]]) -> bytes:
    """Serialize (name, binary) pairs, sorted by name. Names must be unique and non-empty."""
    items = sorted((str(n), bytes(b)) for n, b in kernels)
    out, seen = [], set()
    for name, data in items:
        raw = name.encode("utf-8")
        if not raw:
            raise ArchiveError("TBE_KERNELS: a kernel has an empty name")
        if name in seen:
            raise ArchiveError(f"TBE_KERNELS: kernel {name!r} appears twice")
        seen.add(name)
        if not data:
            raise ArchiveError(f"TBE_KERNELS: kernel {name!r} has an empty binary")
        if len(raw) > _U32_MAX or len(data) > _U32_MAX:
            raise ArchiveError(f"TBE_KERNELS: kernel {name!r} is too large for u32 lengths")
        out += (_ITEM.pack(KERNEL_ITEM_MAGIC, len(raw), len(data)), raw, data)
    return b"".join(out)


def load(data: bytes | bytearray | memoryview) -> list[tuple[str, bytes]]:
    """Parse a KernelStore payload into (name, binary) pairs in file order (empty → [])."""
    mv = memoryview(data).cast("B")
    size, off, items = len(mv), 0, []
    while off < size:
        where = f"TBE_KERNELS item {len(items)} (offset {off})"
        if size - off < _ITEM.size:
            raise ArchiveError(f"{where}: only {size - off} bytes left for the {_ITEM.size}-byte item head")
        magic, name_len, bin_len = _ITEM.unpack_from(mv, off)
        if magic != KERNEL_ITEM_MAGIC:
            raise ArchiveError(f"{where}: magic is 0x{magic:08X}, expected 0x{KERNEL_ITEM_MAGIC:08X}")
        body = off + _ITEM.size
        if name_len + bin_len > size - body:
            raise ArchiveError(f"{where}: name_len {name_len} + bin_len {bin_len} exceed the "
                               f"{size - body} bytes left; the partition is truncated")
        try:
            name = bytes(mv[body:body + name_len]).decode("utf-8")
        except UnicodeDecodeError:
            raise ArchiveError(f"{where}: the kernel name is not UTF-8") from None
        items.append((name, bytes(mv[body + name_len:body + name_len + bin_len])))
        off = body + name_len + bin_len
    return items
