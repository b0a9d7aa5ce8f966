"""Write and read the OM (v1) container: ModelFileHeader, partition table(s), partitions.

Pure Python, no GE code. The byte layout comes from `layout` (GE_FACTS §1); this module only
applies it. The reader validates every header field it can and every table entry, and never
indexes past the data it has: any corruption is an `ArchiveError` naming the field and values.

Body layout (§1.6): for each of `model_num` models, a partition table (num, entries) followed by
that model's partitions back to back in table order. `mem_offset` is relative to the end of its
table. GE's loader ignores `mem_offset` and walks `mem_size`; the reader here requires both to
agree (contiguous, in table order), so no file reads differently here and in GE.
"""
from __future__ import annotations

import dataclasses
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence, Union

from ...errors import ArchiveError
from . import layout as L
from .layout import ModelHeaderType, ModelPartitionType

_HEADER = struct.Struct(L.HEADER_FORMAT)
_BYTES_SIZE = {name: struct.calcsize("<" + code) for name, _, code in L.HEADER_FIELDS
               if code.endswith("s")}
_INT_MAX = {name: (1 << (8 * struct.calcsize("<" + code))) - 1 for name, _, code in L.HEADER_FIELDS
            if not code.endswith("s")}
# Written by the writer itself; callers may not pass them to write_om.
_COMPUTED = frozenset({"magic", "headsize", "version", "length", "model_num", "model_length"})
# Text fields GE reads as C strings: the writer keeps a terminating NUL inside the field.
_C_STRINGS = ("name", "platform_version")


@dataclass(frozen=True)
class ModelFileHeader:
    """Every field of the 256-byte header (§1.2), in file order.

    Byte-array fields hold their bytes with trailing NULs trimmed (packing pads them back), so
    unpack → pack reproduces the header exactly, `padd` and `reserved` included. `name`,
    `userdefineinfo` and `platform_version` also accept `str` (UTF-8).
    """

    magic: int = L.MAGIC
    headsize: int = L.HEADER_SIZE
    version: int = L.MODEL_VERSION
    checksum: bytes = b""
    length: int = 0
    is_encrypt: int = L.ModelEncryptType.UNENCRYPTED
    is_checksum: int = L.ModelCheckType.CHECK
    modeltype: int = ModelHeaderType.IR_MODEL
    genmode: int = 0
    name: bytes = b""
    ops: int = 0
    userdefineinfo: bytes = b""
    om_ir_version: int = 0
    model_num: int = 1
    platform_version: bytes = b""
    platform_type: int = 0
    padd: bytes = b""
    model_length: int = 0
    need_check_os_cpu_info: int = L.OsCpuInfoCheckType.NO_CHECK
    is_unknow_model: int = 0
    reserved: bytes = b""

    def __post_init__(self):
        for name in _BYTES_SIZE:
            value = getattr(self, name)
            if isinstance(value, str):
                value = value.encode("utf-8")
            object.__setattr__(self, name, bytes(value).rstrip(b"\0"))
        for name in _INT_MAX:
            object.__setattr__(self, name, int(getattr(self, name)))

    @property
    def model_name(self) -> str:
        return self.name.split(b"\0", 1)[0].decode("utf-8", "replace")

    def pack(self) -> bytes:
        for name, size in _BYTES_SIZE.items():
            if len(getattr(self, name)) > size:
                raise ArchiveError(f"OM header field {name} is {len(getattr(self, name))} bytes; "
                                   f"it holds at most {size}")
        for name, top in _INT_MAX.items():
            if not 0 <= getattr(self, name) <= top:
                raise ArchiveError(f"OM header field {name} = {getattr(self, name)} does not fit "
                                   f"its field (0..{top})")
        return _HEADER.pack(*(getattr(self, name) for name, _, _ in L.HEADER_FIELDS))

    @classmethod
    def unpack(cls, data: bytes) -> "ModelFileHeader":
        if len(data) < L.HEADER_SIZE:
            raise ArchiveError(f"OM header needs {L.HEADER_SIZE} bytes, got {len(data)}")
        values = _HEADER.unpack_from(data, 0)
        return cls(**{name: v for (name, _, _), v in zip(L.HEADER_FIELDS, values)})


# The field names of the dataclass and of the layout table must be the same, in the same order.
assert tuple(f.name for f in dataclasses.fields(ModelFileHeader)) == \
    tuple(name for name, _, _ in L.HEADER_FIELDS)


@dataclass(frozen=True)
class Partition:
    type: ModelPartitionType
    data: bytes

    def __post_init__(self):
        object.__setattr__(self, "type", _partition_type(self.type, "partition"))
        object.__setattr__(self, "data", bytes(self.data))

    def __repr__(self) -> str:
        return f"Partition({self.type.name}, {len(self.data)} bytes)"

    @classmethod
    def view(cls, ptype: ModelPartitionType, data: memoryview) -> "Partition":
        """A partition whose data is a read-only view into the file's bytes (no copy)."""
        p = object.__new__(cls)
        object.__setattr__(p, "type", ptype)
        object.__setattr__(p, "data", data)
        return p


@dataclass(frozen=True)
class OmFile:
    """A read OM file: its header and, per model, its partitions in table order."""

    header: ModelFileHeader
    models: tuple[tuple[Partition, ...], ...]

    @property
    def partitions(self) -> tuple[Partition, ...]:
        """The partitions of model 0 (the only model of a static OM)."""
        return self.models[0]

    def partition(self, ptype: ModelPartitionType | int, model: int = 0) -> bytes:
        """The payload of a partition type. Like GE's `GetModelPartition`, a missing partition of
        an optional type (`missing_ok` in layout) reads as empty; any other missing one is an error."""
        ptype = _partition_type(ptype, "requested partition")
        if not 0 <= model < len(self.models):
            raise ArchiveError(f"OM has no model {model}; model_num is {len(self.models)}")
        for p in self.models[model]:
            if p.type == ptype:
                return p.data
        if ptype.missing_ok:
            return b""
        raise ArchiveError(f"OM model {model} has no {ptype.name} partition "
                           f"(it has {', '.join(p.type.name for p in self.models[model])})")

    def write(self, path: str | os.PathLike | None = None) -> bytes:
        """Write the same content back (header fields preserved; sizes recomputed)."""
        return write_om(path, self.models[0], submodels=self.models[1:], header=self.header)


# --------------------------------------------------------------------------------------------
# writer

def write_om(path: str | os.PathLike | None, partitions: Iterable[Partition], *,
             submodels: Sequence[Iterable[Partition]] = (), header: ModelFileHeader | None = None,
             **header_fields) -> bytes:
    """Build an OM file and return its bytes; also write it to `path` (atomically) if given.

    `partitions` are model 0's, in table order; `submodels` add further models (dynamic OMs,
    §1.6; model_num = 1 + len(submodels)). Header fields come from `header` (e.g. one read from
    a file) overridden by `header_fields` (name="...", platform_version="...", ...). The writer
    itself sets magic, headsize, version, model_num, model_length and length, and every
    partition table's offsets and sizes. Same input, same bytes.
    """
    computed = _COMPUTED.intersection(header_fields)
    if computed:
        raise TypeError(f"write_om sets {', '.join(sorted(computed))} itself; do not pass them")
    models = [tuple(partitions)] + [tuple(m) for m in submodels]
    base = header if header is not None else ModelFileHeader()
    try:
        base = dataclasses.replace(base, **header_fields)
    except TypeError as e:
        raise TypeError(f"write_om: unknown ModelFileHeader field ({e})") from None
    _check_header_fields(base, "cannot write OM")
    max_parts = _max_partitions(base)

    body = bytearray()
    for index, parts in enumerate(models):
        where = f"model {index} " if len(models) > 1 else ""
        if not L.MIN_PARTITIONS <= len(parts) <= max_parts:
            raise ArchiveError(f"cannot write OM: {where}has {len(parts)} partitions; GE accepts "
                               f"{L.MIN_PARTITIONS}..{max_parts} per model")
        seen = set()
        for i, p in enumerate(parts):
            if not isinstance(p, Partition):
                raise TypeError(f"write_om: {where}partition {i} is {type(p).__name__}, not Partition")
            if p.type in seen:
                raise ArchiveError(f"cannot write OM: {where}has two {p.type.name} partitions")
            seen.add(p.type)
            if not p.data:
                raise ArchiveError(f"cannot write OM: {where}partition {i} ({p.type.name}) is empty; "
                                   f"GE never writes an empty partition, leave it out")
        body += struct.pack(L.TABLE_HEAD_FORMAT, len(parts))
        offset = 0
        for p in parts:
            body += struct.pack(L.TABLE_ENTRY_FORMAT, p.type, offset, len(p.data))
            offset += len(p.data)
        for p in parts:
            body += p.data

    model_length = len(body)
    final = dataclasses.replace(
        base, magic=L.MAGIC, headsize=L.HEADER_SIZE, version=L.MODEL_VERSION,
        model_num=len(models), model_length=model_length,
        # legacy total (GE fills it too); readers use model_length whenever it is non-zero
        length=model_length if model_length <= L.UINT32_MAX else 0)
    data = final.pack() + bytes(body)
    if path is not None:
        _write_atomically(Path(path), data)
    return data


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------------------------
# reader

def read_om(data_or_path: Union[bytes, bytearray, memoryview, str, os.PathLike], *, copy: bool = True) -> OmFile:
    """Parse and validate an OM file (bytes or a path). Raises ArchiveError on any corruption.

    copy=False: the partitions are read-only memoryviews into the data (which must then be
    bytes, or a read-only buffer such as an mmap view, that outlives the OmFile)."""
    if isinstance(data_or_path, (bytes, bytearray, memoryview)):
        data, source = (data_or_path if not copy and isinstance(data_or_path, (bytes, memoryview))
                        else bytes(data_or_path)), "OM data"
    else:
        source = f"OM file {os.fspath(data_or_path)}"
        try:
            data = Path(data_or_path).read_bytes()
        except OSError as e:
            raise ArchiveError(f"cannot read {source}: {e.strerror or e}") from e
    try:
        return _parse(data, copy)
    except ArchiveError as e:
        raise ArchiveError(f"{source} is invalid: {e}") from None


def _parse(data: bytes, copy: bool = True) -> OmFile:
    size = len(data)
    if size == 0:
        raise ArchiveError(f"file is empty; an OM file starts with a {L.HEADER_SIZE}-byte header")
    if size < L.HEADER_SIZE:
        raise ArchiveError(f"file is {size} bytes, shorter than the {L.HEADER_SIZE}-byte header")
    h = ModelFileHeader.unpack(data)
    if h.magic != L.MAGIC:
        raise ArchiveError(f"magic is 0x{h.magic:08X} ({data[:4]!r}), expected 0x{L.MAGIC:08X} "
                           f"(b'IMOD'); this is not an OM file")
    if h.headsize != L.HEADER_SIZE:
        raise ArchiveError(f"headsize is {h.headsize}, expected {L.HEADER_SIZE}")
    if h.version != L.MODEL_VERSION:
        raise ArchiveError(f"version is 0x{h.version:08X}; only 0x{L.MODEL_VERSION:08X} is supported")
    _check_header_fields(h, "header")
    if h.model_num < 1:
        raise ArchiveError(f"model_num is {h.model_num}; an OM holds at least one model")

    # §1.4: a zero model_length marks a legacy file with 12-byte table entries sized by `length`.
    # The body length is model_length, or the legacy `length` field when model_length is 0.
    legacy = h.model_length == 0 and h.modeltype != ModelHeaderType.FLOW_MODEL
    length_field = "model_length" if h.model_length else "length (model_length is 0)"
    data_len = h.model_length or h.length
    if data_len != size - L.HEADER_SIZE:
        raise ArchiveError(f"{length_field} is {data_len} but the file holds {size - L.HEADER_SIZE} "
                           f"bytes after the {L.HEADER_SIZE}-byte header (file size {size})")
    if legacy:
        head_fmt, entry_fmt = L.TINY_TABLE_HEAD_FORMAT, L.TINY_TABLE_ENTRY_FORMAT
    else:
        head_fmt, entry_fmt = L.TABLE_HEAD_FORMAT, L.TABLE_ENTRY_FORMAT
    head_size, entry_size = struct.calcsize(head_fmt), struct.calcsize(entry_fmt)
    max_parts = _max_partitions(h)
    body = memoryview(data)[L.HEADER_SIZE:]  # positions below are relative to the body

    models = []
    pos = 0
    for index in range(h.model_num):
        where = f"model {index}: " if h.model_num > 1 else ""
        if pos + head_size > data_len:
            raise ArchiveError(f"{where}partition table at offset {pos} needs {head_size} bytes but "
                               f"{length_field} is {data_len} (model_num is {h.model_num})")
        (num,) = struct.unpack_from(head_fmt, body, pos)
        if not L.MIN_PARTITIONS <= num <= max_parts:
            raise ArchiveError(f"{where}partition table declares {num} partitions; GE accepts "
                               f"{L.MIN_PARTITIONS}..{max_parts}")
        table_end = pos + head_size + entry_size * num
        if table_end > data_len:
            raise ArchiveError(f"{where}partition table of {num} entries ends at {table_end} but "
                               f"{length_field} is {data_len}")
        entries = [struct.unpack_from(entry_fmt, body, pos + head_size + entry_size * i)
                   for i in range(num)]
        parts = []
        prev_end, prev_name = table_end, "the partition table"
        for i, (ptype, mem_offset, mem_size) in enumerate(entries):
            ptype = _partition_type(ptype, f"{where}partition {i}")
            label = f"partition {i} ({ptype.name})"
            start, end = table_end + mem_offset, table_end + mem_offset + mem_size
            if end > data_len:
                raise ArchiveError(f"{where}{label} ends at {end} but {length_field} is {data_len}")
            if start < prev_end:
                raise ArchiveError(f"{where}{label} at {start}..{end} overlaps {prev_name}, "
                                   f"which ends at {prev_end}")
            if start > prev_end:
                raise ArchiveError(f"{where}{label} starts at {start} but {prev_name} ends at "
                                   f"{prev_end}; partitions must follow each other without gaps "
                                   f"(GE reads them back to back)")
            if any(p.type == ptype for p in parts):
                raise ArchiveError(f"{where}{label} repeats partition type {ptype.name}")
            parts.append(Partition(ptype, body[start:end]) if copy else
                         Partition.view(ptype, body[start:end].toreadonly()))
            prev_end, prev_name = end, label
        models.append(tuple(parts))
        pos = prev_end
    if pos != data_len:
        raise ArchiveError(f"the {h.model_num} model(s) end at {pos} but {length_field} is "
                           f"{data_len}: {data_len - pos} unaccounted bytes")
    return OmFile(h, tuple(models))


# --------------------------------------------------------------------------------------------
# shared checks

def _partition_type(value, what: str) -> ModelPartitionType:
    try:
        return ModelPartitionType(value)
    except ValueError:
        raise ArchiveError(f"{what} has unknown partition type {value!r}; known: "
                           f"{', '.join(f'{t.name}={t.value}' for t in ModelPartitionType)}") from None


def _check_header_fields(h: ModelFileHeader, what: str) -> None:
    """Fields with a defined value set: C strings, enumerations, flags. Writer and reader share
    this, so the writer never produces a header the reader rejects."""
    for name in _C_STRINGS:
        size = _BYTES_SIZE[name]
        if len(getattr(h, name)) >= size:
            raise ArchiveError(f"{what}: {name} is {len(getattr(h, name))} bytes with no terminating "
                               f"NUL; the field holds at most {size - 1} plus the NUL")
    for name, enum in (("is_encrypt", L.ModelEncryptType), ("is_checksum", L.ModelCheckType),
                       ("modeltype", ModelHeaderType),
                       ("need_check_os_cpu_info", L.OsCpuInfoCheckType)):
        value = getattr(h, name)
        if value not in enum._value2member_map_:
            raise ArchiveError(f"{what}: {name} is {value}; known values are "
                               f"{', '.join(f'{m.value} ({m.name})' for m in enum)}")
    for name in ("genmode", "is_unknow_model"):
        if getattr(h, name) not in (0, 1):
            raise ArchiveError(f"{what}: {name} is {getattr(h, name)}; it is a 0/1 flag")
    if h.is_encrypt == L.ModelEncryptType.ENCRYPTED:
        raise ArchiveError(f"{what}: is_encrypt is 1 (ENCRYPTED); encrypted OM files are not "
                           f"supported (public GE cannot decrypt them either)")
    if h.modeltype == ModelHeaderType.BUNDLE_MODEL:
        raise ArchiveError(f"{what}: modeltype is 5 (BUNDLE_MODEL); bundle OMs use another body "
                           f"layout and are not supported (GE's root-model loader rejects them too)")


def _max_partitions(h: ModelFileHeader) -> int:
    return L.MAX_FLOW_PARTITIONS if h.modeltype == ModelHeaderType.FLOW_MODEL else L.MAX_PARTITIONS
