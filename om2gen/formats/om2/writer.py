"""Writes an OM2 archive: deterministic bytes, large entries STORED and aligned for mmap.

The archive is written to a temporary file next to the destination and renamed into place,
so a failure never leaves a half-written .om2 behind.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import blake3

from . import layout

_PAD_EXTRA_ID = 0xD935   # the extra-field id Android's zipalign uses for alignment padding


@dataclass
class Entry:
    name: str
    data: bytes = field(repr=False)

    @property
    def stored(self) -> bool:
        return layout.is_stored(self.name)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def blake3(self) -> str:
        """The digest the executor checks at load (several times faster than sha256 on large
        constants; sha256 stays for tools and executors before format 1.2)."""
        return blake3.blake3(self.data, max_threads=blake3.blake3.AUTO).hexdigest()


def json_bytes(obj) -> bytes:
    return (json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _padding(offset: int, name: bytes) -> bytes:
    """An extra field in zipalign's format (id, size, uint16 alignment, zero padding) that makes
    the entry's data start at a multiple of layout.ALIGNMENT."""
    header_end = offset + 30 + len(name)
    if header_end % layout.ALIGNMENT == 0:
        return b""
    pad = (-(header_end + 6)) % layout.ALIGNMENT
    return struct.pack("<HHH", _PAD_EXTRA_ID, 2 + pad, layout.ALIGNMENT) + bytes(pad)


def write(path: Path, entries: list[Entry]) -> None:
    path = Path(path)
    layout.check_entry_names((e.name for e in entries), path, writing=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(tmp, "wb") as f, zipfile.ZipFile(f, "w", allowZip64=True) as zf:
            for e in entries:
                info = zipfile.ZipInfo(e.name, date_time=layout.FIXED_DATE)
                info.create_system = 3
                info.external_attr = 0o100644 << 16  # a regular file, rw-r--r--
                if e.stored:
                    info.compress_type = zipfile.ZIP_STORED
                    if layout.is_mapped(e.name):
                        info.extra = _padding(f.tell(), e.name.encode("utf-8"))
                else:
                    info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, e.data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
