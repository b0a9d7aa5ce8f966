"""Reads an OM2 archive from a private, read-only copy of its bytes (formats/image.py).

Everything read is validated: the ZIP structure, the manifest (schema, format, version, entries
with sizes and digests), model_meta.json, and every local header whose data is used. What the
executor uses is STORED and digest-checked in the copy, so what was checked is what runs.
Problems raise ArchiveError naming the entry and what to do.

Archives smaller than image.SMALL are remembered with their bytes: opening bytes equal to
remembered ones (compared in full, a few microseconds at that size) reuses what reading them
found (the directory, the manifest, which entries matched their digests, and what the executor
recorded in `memo`) instead of parsing and hashing them again. Every check is a function of the
bytes alone, so the answers are the same; what depends on anything else (the trusted keys of a
signed load) is checked on every load.
"""
from __future__ import annotations

import hashlib
import json
import struct
import threading
from collections import OrderedDict
from pathlib import Path

import blake3

from ...errors import ArchiveError
from .. import OM2_MAGIC, OM_MAGIC
from .. import image as image_mod
from . import layout, schema, zipdir

MAX_JSON = 64 << 20         # manifest.json / model_meta.json larger than this are refused
MAX_INFLATED = 1 << 30      # a DEFLATED entry read through read() inflates to at most this
_PARALLEL_DIGEST = 1 << 20  # entries from this size on are hashed on several threads
_MEMO_BYTES = 8 << 20       # small archives remembered, at most this many bytes of them; the least
                            # recently opened are forgotten first
_MEMO_TAIL = 256            # the last bytes of an archive (its ZIP directory's end, CRCs) pick the
                            # remembered one to compare with

_memo_lock = threading.Lock()
_memos: OrderedDict = OrderedDict()   # (size, tail) -> what opening those bytes found, with the bytes
_memo_bytes = 0


def _memo_key(view) -> tuple:
    return len(view), bytes(view[-_MEMO_TAIL:])


def _recall(view) -> dict | None:
    """What opening bytes equal to `view` found, if they were opened before."""
    key = _memo_key(view)
    with _memo_lock:
        memo = _memos.get(key)
        if memo is None:
            return None
        _memos.move_to_end(key)
    return memo if bytes(view) == memo["bytes"] else None


def _remember(view, memo: dict) -> dict:
    global _memo_bytes
    key = _memo_key(view)
    memo["bytes"] = bytes(view)
    with _memo_lock:
        old = _memos.pop(key, None)
        if old is not None:
            _memo_bytes -= len(old["bytes"])
        _memos[key] = memo
        _memo_bytes += len(memo["bytes"])
        while _memo_bytes > _MEMO_BYTES:
            _memo_bytes -= len(_memos.popitem(last=False)[1]["bytes"])
    return memo


def _version(text: str) -> tuple[int, int]:
    try:
        major, _, minor = text.partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        return (1 << 30, 0)  # unparseable: treat as newer than anything we know


def _major(text: str) -> int:
    return _version(text)[0]


def digest_matches(entry: dict, data) -> bool:
    """The entry's bytes against its manifest digest: BLAKE3 when the manifest records one
    (format 1.2), else sha256."""
    expected = entry.get("blake3")
    if expected is not None:
        threads = blake3.blake3.AUTO if len(data) >= _PARALLEL_DIGEST else 1
        return blake3.blake3(data, max_threads=threads).hexdigest() == expected
    return hashlib.sha256(data).hexdigest() == entry.get("sha256")


class Archive:
    """An OM2 archive: `source` is a path or a bytes-like object; `image` an Image of it that
    the archive takes over (the executor has read it already to tell the format)."""

    def __init__(self, source, *, image: image_mod.Image | None = None):
        in_memory = not isinstance(source, (str, Path)) and not hasattr(source, "__fspath__")
        self.path = "<OM2 archive in memory>" if in_memory else Path(source)
        if image is None:
            image = image_mod.read_buffer(source, self.path) if in_memory else image_mod.read_path(source)
        self.image = image
        self._map = image.view
        # what opening these bytes found, shared by every Archive of the same bytes (small ones):
        # "verified" (entries that matched their digests), "spans" (where each entry's data is),
        # and what the executor adds
        self.memo = None
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        head = bytes(self._map[:4])
        if len(head) < 4:
            raise ArchiveError(f"{self.path}: {len(head)} bytes is too short to be an OM2 archive")
        if head != OM2_MAGIC:
            if head == OM_MAGIC:
                raise ArchiveError(f"{self.path}: a classic OM file, not an OM2 archive; om2gen.load and "
                                   "`om2gen run` take either (they decide by content), `om2gen convert` turns it "
                                   "into an OM2 archive")
            raise ArchiveError(f"{self.path}: not an OM2 archive (starts with {head.hex()}, an .om2 starts with "
                               f"504b0304); compile the model with `om2gen compile`")
        small = len(self._map) < image_mod.SMALL
        memo = _recall(self._map) if small else None
        if memo is not None:
            self._infos, self.manifest, self.entries = memo["archive"]
            self.memo = memo
            return
        try:
            self._infos = zipdir.read_directory(self._map)
        except (zipdir.ZipError, struct.error, UnicodeDecodeError) as exc:
            raise ArchiveError(f"{self.path}: corrupt or truncated OM2 archive ({exc}); recompile or re-download it") from None
        layout.check_entry_names(self._infos, self.path)
        if layout.MANIFEST not in self._infos:
            raise ArchiveError(f"{self.path}: no {layout.MANIFEST}; this ZIP is not an OM2 archive")
        self.manifest = self.read_json(layout.MANIFEST)
        self._check_manifest()
        if small:
            self.memo = _remember(self._map, {"archive": (self._infos, self.manifest, self.entries),
                                              "verified": set(), "spans": {}})

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
        schema.validate(m, "manifest", self.path, layout.MANIFEST)
        infos = self._infos
        self.entries = entries = {}
        for i, e in enumerate(m["entries"]):
            name = e.get("name") if type(e) is dict else None
            if (type(name) is not str or type(e.get("size")) is not int or type(e.get("sha256")) is not str
                    or type(e.get("blake3", "")) is not str):
                raise ArchiveError(f"{self.path}: {layout.MANIFEST}: entries[{i}] needs a string name, an integer "
                                   "size and string digests; om2gen never writes such a file, so the archive is "
                                   "corrupt or was modified: recompile it or get it again")
            info = infos.get(name)
            if info is None:
                raise ArchiveError(f"{self.path}: entry {name!r} listed in the manifest is missing; the archive is "
                                   "truncated or was modified")
            if info.file_size != e["size"]:
                raise ArchiveError(f"{self.path}: entry {name!r} has {info.file_size} bytes, the "
                                   f"manifest says {e['size']}; the archive was modified")
            entries[name] = e

    def names(self) -> list[str]:
        return list(self._infos)

    def info(self, name: str) -> zipdir.ZipEntry:
        try:
            return self._infos[name]
        except KeyError:
            raise ArchiveError(f"{self.path}: entry {name!r} is missing") from None

    def read(self, name: str) -> bytes:
        """An entry's bytes (inflated, checked against its size, its CRC-32 and MAX_INFLATED)."""
        info = self.info(name)
        if info.file_size > MAX_INFLATED:
            raise ArchiveError(f"{self.path}: entry {name!r} says it inflates to {info.file_size} bytes, more than "
                               f"om2gen reads ({MAX_INFLATED}); the archive is corrupt or hostile")
        try:
            return zipdir.read(self._map, info)
        except (zipdir.ZipError, struct.error) as exc:
            raise ArchiveError(f"{self.path}: entry {name!r} is corrupt ({exc})") from None

    def read_json(self, name: str, *, verified: bool = False):
        """A JSON entry, parsed (STORED ones straight from the copy, as om2gen writes the
        manifest and model_meta.json); at most MAX_JSON bytes. verified: checked against its
        manifest digest first."""
        info = self.info(name)
        if info.file_size > MAX_JSON:
            raise ArchiveError(f"{self.path}: entry {name!r} has {info.file_size} bytes, more than a JSON entry om2gen "
                               f"reads ({MAX_JSON}); the archive is corrupt or hostile")
        data = self.view(name) if info.compress_type == zipdir.STORED else self.read(name)
        if verified:
            self._check_digest(name, data)
        try:
            return json.loads(bytes(data))
        except (UnicodeDecodeError, ValueError) as exc:   # JSONDecodeError, or an integer of >4300 digits
            raise ArchiveError(f"{self.path}: entry {name!r} is not valid JSON for om2gen ({exc})") from None
        except RecursionError:
            raise ArchiveError(f"{self.path}: entry {name!r} nests too deeply to be an om2gen file; the archive is "
                               "corrupt or hostile") from None

    def view(self, name: str) -> memoryview:
        """The bytes of a STORED entry, in place in the archive's copy (no further copy)."""
        span = self.memo["spans"].get(name) if self.memo is not None else None
        if span is None:
            info = self.info(name)
            if info.compress_type != zipdir.STORED:
                raise ArchiveError(f"{self.path}: entry {name!r} is compressed; om2gen writes it STORED")
            try:
                span = zipdir.data_span(self._map, info)
            except (zipdir.ZipError, struct.error) as exc:
                raise ArchiveError(f"{self.path}: {exc}; the archive is corrupt or truncated") from None
            if self.memo is not None:
                self.memo["spans"][name] = span
        return self._map[span[0]:span[1]]

    def verify(self, name: str) -> memoryview:
        """The STORED entry `name`, checked against its manifest digest; its bytes in the copy."""
        view = self.view(name)
        self._check_digest(name, view)
        return view

    def content_id(self, name: str) -> str:
        """The digest the manifest records for an entry, as "blake3:<hex>" (or "sha256:<hex>")."""
        entry = self.entries[name]
        return f"blake3:{entry['blake3']}" if "blake3" in entry else f"sha256:{entry['sha256']}"

    def _check_digest(self, name: str, data) -> None:
        memo = self.memo
        if memo is not None and name in memo["verified"]:
            return
        entry = self.entries.get(name)
        if entry is None:
            raise ArchiveError(f"{self.path}: entry {name!r} is not listed in the manifest; the archive was modified")
        if not digest_matches(entry, data):
            raise ArchiveError(f"{self.path}: entry {name!r} does not match its {'blake3' if 'blake3' in entry else 'sha256'} "
                               "digest in the manifest; the archive is corrupt or was tampered with")
        if memo is not None:
            memo["verified"].add(name)

    def close(self) -> None:
        """Releases the copy once nothing views it (a loaded model keeps the views it uses)."""
        img = self.__dict__.pop("image", None)
        self._map = None
        if img is not None:
            img.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
