"""Reads an OM2 archive in place: the file is mmapped and STORED entries are viewed, not copied.

Everything read is validated: the ZIP structure, the manifest (format, version, entries with
sizes and digests) and every local header whose data is mapped. Problems raise ArchiveError
naming the entry and what to do.
"""
from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
from pathlib import Path

from ..errors import ArchiveError
from . import layout, zipdir

ZIP_MAGIC = b"PK\x03\x04"


def _version(text: str) -> tuple[int, int]:
    try:
        major, _, minor = text.partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        return (1 << 30, 0)  # unparseable: treat as newer than anything we know


def _major(text: str) -> int:
    return _version(text)[0]


def release_map(mapped) -> None:
    """Closes what map_file returned (None: nothing); returns None."""
    if isinstance(mapped, memoryview):
        mapped.release()
    elif mapped is not None:
        mapped.close()


def map_file(path):
    """The whole file, mapped read-only (the descriptor is closed at once: the mapping keeps the
    file). An empty file maps to no bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot open ({exc.strerror})") from None
    try:
        if os.fstat(fd).st_size == 0:
            return memoryview(b"")
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise ArchiveError(f"{path}: cannot map ({exc})") from None
    finally:
        os.close(fd)


class Archive:
    """An OM2 archive from a file (mapped) or from memory (bytes-like: used in place). `mapped`:
    the file at `path`, already mapped by map_file() (the archive takes it over)."""

    def __init__(self, path, *, mapped=None):
        self._map = None
        if not isinstance(path, (str, os.PathLike)):
            self.path = "<OM2 archive in memory>"
            self._map = memoryview(path).cast("B").toreadonly()
        else:
            self.path = Path(path)
            self._map = mapped if mapped is not None else map_file(self.path)
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        head = bytes(self._map[:4])
        if len(head) < 4:
            raise ArchiveError(f"{self.path}: {len(head)} bytes is too short to be an OM2 archive")
        if head != ZIP_MAGIC:
            from ..om import layout as om_layout
            if head == om_layout.MAGIC.to_bytes(4, "little"):
                raise ArchiveError(f"{self.path}: a classic OM file, not an OM2 archive; om2gen.load and "
                                   "`om2gen run` take either (they decide by content), `om2gen convert` turns it "
                                   "into an OM2 archive")
            raise ArchiveError(f"{self.path}: not an OM2 archive (starts with {head.hex()}, an .om2 starts with "
                               f"504b0304); compile the model with `om2gen compile`")
        try:
            self._infos = zipdir.read_directory(self._map)
        except (zipdir.ZipError, struct.error, UnicodeDecodeError) as exc:
            raise ArchiveError(f"{self.path}: corrupt or truncated OM2 archive ({exc}); recompile or re-download it") from None
        layout.check_entry_names(self._infos, self.path)
        if layout.MANIFEST not in self._infos:
            raise ArchiveError(f"{self.path}: no {layout.MANIFEST}; this ZIP is not an OM2 archive")
        self.manifest = self.read_json(layout.MANIFEST)
        self._check_manifest()

    def _check_manifest(self) -> None:
        m = self.manifest
        if not isinstance(m, dict) or m.get("format") != layout.FORMAT:
            raise ArchiveError(f"{self.path}: {layout.MANIFEST} does not describe an om2gen OM2 archive")
        version = str(m.get("format_version", ""))
        if _major(version) != _major(layout.FORMAT_VERSION):
            raise ArchiveError(f"{self.path}: archive format {version!r}, this om2gen reads {layout.FORMAT_VERSION}; "
                               "recompile the model with this om2gen")
        # GE's OM2 compatibility rule: refuse what a newer compiler requires of its executor.
        compat = m.get("compatibility")
        if not isinstance(compat, dict):
            raise ArchiveError(f"{self.path}: {layout.MANIFEST} has no compatibility section")
        required = str(compat.get("required_executor_version") or "0.0")
        if (_major(str(compat.get("compiler_version", "0"))) > _major(layout.EXECUTOR_VERSION)
                or _version(required) > _version(layout.EXECUTOR_VERSION)):
            raise ArchiveError(f"{self.path}: needs executor {required} (compiler {compat.get('compiler_version')}), "
                               f"this om2gen's executor is {layout.EXECUTOR_VERSION}; upgrade om2gen")
        entries = m.get("entries")
        if not isinstance(entries, list):
            raise ArchiveError(f"{self.path}: {layout.MANIFEST} has no entry list")
        self.entries = {}
        for e in entries:
            name = e.get("name") if isinstance(e, dict) else None
            if name not in self._infos:
                raise ArchiveError(f"{self.path}: entry {name!r} listed in the manifest is missing; the archive is "
                                   "truncated or was modified")
            if self._infos[name].file_size != e.get("size"):
                raise ArchiveError(f"{self.path}: entry {name!r} has {self._infos[name].file_size} bytes, the "
                                   f"manifest says {e.get('size')}; the archive was modified")
            self.entries[name] = e

    def names(self) -> list[str]:
        return list(self._infos)

    def info(self, name: str) -> zipdir.ZipEntry:
        try:
            return self._infos[name]
        except KeyError:
            raise ArchiveError(f"{self.path}: entry {name!r} is missing") from None

    def read(self, name: str) -> bytes:
        """An entry's bytes (inflated, checked against its CRC-32)."""
        try:
            return zipdir.read(self._map, self.info(name))
        except (zipdir.ZipError, struct.error) as exc:
            raise ArchiveError(f"{self.path}: entry {name!r} is corrupt ({exc})") from None

    def read_json(self, name: str):
        """A JSON entry, parsed (STORED ones straight from the mapping, as om2gen writes the
        manifest and model_meta.json)."""
        stored = self.info(name).compress_type == zipdir.STORED
        try:
            return json.loads(bytes(self.view(name)) if stored else self.read(name))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ArchiveError(f"{self.path}: entry {name!r} is not valid JSON ({exc})") from None

    def view(self, name: str) -> memoryview:
        """The bytes of a STORED entry, in place in the mapped file (no copy)."""
        info = self.info(name)
        if info.compress_type != zipdir.STORED:
            raise ArchiveError(f"{self.path}: entry {name!r} is compressed; om2gen writes it STORED")
        try:
            start, end = zipdir.data_span(self._map, info)
        except (zipdir.ZipError, struct.error) as exc:
            raise ArchiveError(f"{self.path}: {exc}; the archive is corrupt or truncated") from None
        return memoryview(self._map)[start:end]

    def verify(self, name: str) -> None:
        expected = self.entries.get(name, {}).get("sha256")
        if not expected:
            raise ArchiveError(f"{self.path}: entry {name!r} has no digest in the manifest")
        view = self.view(name) if self.info(name).compress_type == zipdir.STORED else self.read(name)
        if hashlib.sha256(view).hexdigest() != expected:
            raise ArchiveError(f"{self.path}: entry {name!r} does not match its sha256 in the manifest; the "
                               "archive is corrupt or was tampered with")

    def close(self) -> None:
        obj = self.__dict__.pop("_map", None)
        try:
            release_map(obj)
        except BufferError:
            # a view is still exported (a loaded model uses it): the mapping stays alive with it,
            # and goes when it goes
            self.__dict__["_map"] = obj

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
