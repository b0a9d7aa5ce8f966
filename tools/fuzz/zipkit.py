"""Reads an OM2 archive's ZIP structure and writes ZIP files with full control over every field, so a
mutant can look genuine (sizes, CRC-32 and the manifest's sha256 recomputed) or be wrong in exactly
one field. The layout om2gen writes (STORED + 64-byte aligned mapped entries, DEFLATE for the rest,
manifest first) comes from om2gen.formats.om2.layout, so a repack of an unchanged archive loads."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
import zlib

from om2gen.formats.om2 import layout, zipdir

MANIFEST = layout.MANIFEST
_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
_EOCD = struct.Struct("<4sHHHHIIH")


@dataclasses.dataclass
class Entry:
    """One entry of a parsed archive: its name, method and uncompressed bytes, and where it lies."""
    name: str
    method: int
    payload: bytes
    header_offset: int = 0
    data_start: int = 0
    data_end: int = 0
    central_offset: int = 0


def parse(data: bytes) -> list[Entry]:
    """The entries of a well-formed archive, in file order (with their offsets in `data`)."""
    infos = zipdir.read_directory(data)
    _, _, _, _, count, _, cd_offset, _ = _EOCD.unpack_from(data, len(data) - _EOCD.size)
    central, pos = {}, cd_offset
    for _ in range(count):
        fields = _CENTRAL.unpack_from(data, pos)
        name_len, extra_len, comment_len = fields[10:13]
        central[bytes(data[pos + _CENTRAL.size:pos + _CENTRAL.size + name_len]).decode("utf-8")] = pos
        pos += _CENTRAL.size + name_len + extra_len + comment_len
    out = []
    for name, info in infos.items():
        start, end = zipdir.data_span(data, info)
        out.append(Entry(name, info.compress_type, zipdir.read(data, info), info.header_offset, start, end,
                         central[name]))
    return sorted(out, key=lambda e: e.header_offset)


def central_directory_span(data: bytes) -> tuple[int, int]:
    _, _, _, _, _, cd_size, cd_offset, _ = _EOCD.unpack_from(data, len(data) - _EOCD.size)
    return cd_offset, cd_offset + cd_size


@dataclasses.dataclass
class Item:
    """An entry to write. `raw` replaces the bytes written (e.g. a hand-made deflate stream);
    `crc`, `usize`, `csize` override what the headers declare (None: the true values);
    `central_only` applies the overrides to the central directory record only."""
    name: str
    payload: bytes
    method: int | None = None      # None: as om2gen writes this name
    align: bool | None = None      # None: as om2gen writes this name
    raw: bytes | None = None
    crc: int | None = None
    usize: int | None = None
    csize: int | None = None
    central_only: bool = False


def _padding(offset: int, name: bytes) -> bytes:
    header_end = offset + _LOCAL.size + len(name)
    if header_end % layout.ALIGNMENT == 0:
        return b""
    pad = (-(header_end + 6)) % layout.ALIGNMENT
    return struct.pack("<HHH", 0xD935, 2 + pad, layout.ALIGNMENT) + bytes(pad)


def deflate(payload: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(payload) + c.flush()


def build(items: list[Item]) -> bytes:
    """A ZIP file of `items` in the given order, with the zipalign-style padding om2gen uses."""
    out, central = bytearray(), bytearray()
    for it in items:
        name = it.name.encode("utf-8")
        method = it.method if it.method is not None else (
            zipdir.STORED if layout.is_stored(it.name) else zipdir.DEFLATED)
        align = it.align if it.align is not None else layout.is_mapped(it.name)
        body = it.raw if it.raw is not None else (it.payload if method == zipdir.STORED else deflate(it.payload))
        true = (zlib.crc32(it.payload), len(it.payload), len(body))
        declared = (true[0] if it.crc is None else it.crc, true[1] if it.usize is None else it.usize,
                    true[2] if it.csize is None else it.csize)
        local_vals = true if it.central_only else declared
        offset = len(out)
        extra = _padding(offset, name) if align else b""
        flags = 0x800 if not name.isascii() else 0
        out += _LOCAL.pack(b"PK\x03\x04", 20, flags, method, 0, 0x21, local_vals[0], local_vals[2], local_vals[1],
                           len(name), len(extra)) + name + extra + body
        central += _CENTRAL.pack(b"PK\x01\x02", 0x314, 20, flags, method, 0, 0x21, declared[0], declared[2],
                                 declared[1], len(name), len(extra), 0, 0, 0, 0o100644 << 16, offset) + name + extra
    cd_offset = len(out)
    out += central
    out += _EOCD.pack(b"PK\x05\x06", 0, 0, len(items), len(items), len(central), cd_offset, 0)
    return bytes(out)


def _hasher(algo: str):
    if algo == "blake3":
        import blake3   # archives of om2gen versions that record BLAKE3 digests
        return blake3.blake3()
    return hashlib.new(algo)


DIGEST_KEYS = ("sha256", "blake3")


def redigest(rec: dict, data: bytes) -> None:
    """A manifest entry record made to match `data`: its size and every digest it records."""
    rec["size"] = len(data)
    for algo in DIGEST_KEYS:
        if algo in rec:
            h = _hasher(algo)
            h.update(data)
            rec[algo] = h.hexdigest()


_FILLS: dict = {}


def bomb(size: int, fill: bytes, suffix: bytes = b"") -> tuple[bytes, dict, int]:
    """(deflate stream, {algo: hex digest}, CRC-32) of `size` bytes of `fill` followed by `suffix`.
    The stream is one compressed MiB repeated (each copy refers only to the 32 KiB before it, all
    `fill`), so a 2 GiB bomb costs a few MiB to build; the fill's hash states are kept per
    (size, fill), so each suffix costs only its own bytes. JSON may start with whitespace, so a
    JSON bomb is spaces and then the real document."""
    key = (size, fill)
    if key not in _FILLS:
        unit = 1 << 20
        first = zlib.compressobj(9, zlib.DEFLATED, -15)
        head = first.compress(fill * unit) + first.flush(zlib.Z_SYNC_FLUSH)
        primed = zlib.compressobj(9, zlib.DEFLATED, -15, zdict=fill * 32768)
        body = primed.compress(fill * unit) + primed.flush(zlib.Z_SYNC_FLUSH)
        hashers, crc, chunk = {a: _hasher(a) for a in DIGEST_KEYS}, 0, fill * unit
        for _ in range(size // unit):
            for h in hashers.values():
                h.update(chunk)
            crc = zlib.crc32(chunk, crc)
        _FILLS[key] = (head + body * (size // unit - 1), hashers, crc)
    stream, hashers, crc = _FILLS[key]
    tail = bytearray()
    for i in range(0, max(len(suffix), 1), 65535):   # stored blocks, the last one final
        part = suffix[i:i + 65535]
        last = i + 65535 >= len(suffix)
        tail += bytes([1 if last else 0]) + struct.pack("<HH", len(part), len(part) ^ 0xFFFF) + part
    digests = {}
    for algo, h in hashers.items():
        h = h.copy()
        h.update(suffix)
        digests[algo] = h.hexdigest()
    return stream + bytes(tail), digests, zlib.crc32(suffix, crc)


def json_bytes(obj) -> bytes:
    return (json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def manifest_of(entries: list[Entry]) -> dict:
    return json.loads(next(e.payload for e in entries if e.name == MANIFEST))


def items_of(entries: list[Entry], changes: dict | None = None, *, fix_manifest: bool = True,
             manifest: dict | bytes | None = None) -> list[Item]:
    """The archive's entries as Items, with `changes` {name: new payload, or None to drop it}
    applied. fix_manifest: the manifest's size and sha256 of each changed entry are recomputed
    (the archive then looks genuine); `manifest` replaces the manifest outright (a dict is
    serialized as om2gen does, bytes are written as they are)."""
    changes = changes or {}
    payloads = {e.name: changes.get(e.name, e.payload) for e in entries}
    if manifest is None:
        m = manifest_of(entries)
        if fix_manifest:
            for rec in m.get("entries", []):
                if rec["name"] in changes and payloads[rec["name"]] is not None:
                    redigest(rec, payloads[rec["name"]])
            m["entries"] = [rec for rec in m.get("entries", []) if payloads.get(rec["name"]) is not None]
        manifest = m
    payloads[MANIFEST] = manifest if isinstance(manifest, bytes) else json_bytes(manifest)
    return [Item(e.name, payloads[e.name]) for e in entries if payloads[e.name] is not None]
