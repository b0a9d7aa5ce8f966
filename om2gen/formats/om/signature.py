"""Signed classic .om files: an Ed25519 signature in MODEL_DEF, checked before anything is mapped.

An OM has no manifest to sign, but om2gen records in MODEL_DEF the BLAKE3 digest of every
partition it runs from (integrity.PARTITION_BLAKE3: CUSTOM_OPS, WEIGHTS_DATA, TBE_KERNELS,
TASK_INFO) and the sha256 of each SO_BINS item, and the loader checks them all before any of it
is used. So, as the manifest of an .om2, MODEL_DEF is what gets signed; the signature covers the
rest through those digests. The signature document (the one signature.json holds in an .om2,
format "om-signature") is the string attr SIGNATURE_ATTR of MODEL_DEF, serialized as the *last*
field of the partition:

    MODEL_DEF partition = <MODEL_DEF as written> + <one ModelDef.attr map entry: SIGNATURE_ATTR>

Why an attr and not a partition of its own: GE ignores ModelDef attrs it does not know (om2gen's
digests live there already), while a partition type GE does not define is a file GE may refuse
(om2gen's own reader does; GE_FACTS says nothing of GE's). Why the last field: appending a field
to a protobuf message's bytes adds it to the message, so the signer changes no byte of what it
signs, and the loader checks the exact bytes before the attr (no re-serialization, whose output
protobuf does not promise to keep across versions).

The signed message (`message`) is text, one line each:

    om2gen-om-signature 1
    header <blake3 of the 256-byte header with length and model_length set to 0>
    <TYPE> <size> <blake3>        per partition, in table order; MODEL_DEF: the bytes before the attr
    <TYPE> <size> in MODEL_DEF    for the partitions MODEL_DEF digests (checked by the loader next)

so the header, the table (types, order, sizes) and every byte of every partition are covered;
only the lengths the signature attr itself adds are not.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ...errors import ArchiveError
from ..om2 import signing
from . import integrity, proto
from .container import OmFile, Partition, read_om, write_om
from .layout import ModelPartitionType as PT

SIGNATURE_ATTR = integrity.OM_SIGNATURE
FORMAT = "om-signature"
MESSAGE_HEAD = b"om2gen-om-signature 1\n"
_ATTR_FIELD = 11   # ModelDef.attr (GE_FACTS §2)


def _varint(buf, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ArchiveError("MODEL_DEF is not a valid protobuf message (a varint runs past its end)")
        b = buf[pos]
        value |= (b & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not b & 0x80:
            return value, pos


def _last_field(buf) -> tuple[int, int]:
    """(field number, start) of the last top-level field of a serialized message; (0, len) if
    it has none."""
    pos, last = 0, (0, len(buf))
    while pos < len(buf):
        start = pos
        key, pos = _varint(buf, pos)
        wire = key & 7
        if wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 2:
            n, pos = _varint(buf, pos)
            pos += n
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ArchiveError(f"MODEL_DEF is not a valid protobuf message (wire type {wire} at byte {start})")
        if pos > len(buf):
            raise ArchiveError("MODEL_DEF is not a valid protobuf message (a field runs past its end)")
        last = (key >> 3, start)
    return last


def split(model_def) -> tuple[memoryview, dict | None]:
    """MODEL_DEF's bytes → (the bytes before the signature attr, the signature document or None
    when the file is not signed)."""
    buf = memoryview(model_def)
    number, start = _last_field(buf)
    if number == _ATTR_FIELD:
        entry = proto.ModelDef()
        try:
            entry.ParseFromString(bytes(buf[start:]))
        except Exception:   # protobuf's DecodeError and its kin
            entry = None
        if entry is not None and list(entry.attr) == [SIGNATURE_ATTR]:
            a = entry.attr[SIGNATURE_ATTR]
            if a.WhichOneof("value") != "s" or len(a.s) > signing.MAX_SIGNATURE_ENTRY:
                raise ArchiveError(f"MODEL_DEF attr {SIGNATURE_ATTR} is not a signature document; the OM is corrupt")
            try:
                return buf[:start], json.loads(a.s)
            except ValueError:
                raise ArchiveError(f"MODEL_DEF attr {SIGNATURE_ATTR} is not a signature document; the OM is "
                                   "corrupt") from None
    return buf, None


def message(om: OmFile, signed_model_def) -> bytes:
    """The bytes an OM's signatures sign (the module's docstring)."""
    import blake3
    if len(om.models) != 1:
        raise ArchiveError(f"the OM holds {len(om.models)} models; om2gen signs and checks single-model OM files")
    header = dataclasses.replace(om.header, length=0, model_length=0).pack()
    lines = [MESSAGE_HEAD, b"header %s\n" % blake3.blake3(header).hexdigest().encode()]
    for p in om.partitions:
        data = signed_model_def if p.type == PT.MODEL_DEF else p.data
        if p.type.name in integrity.DIGESTED_PARTITIONS:
            lines.append(b"%s %d in MODEL_DEF\n" % (p.type.name.encode(), len(data)))
        else:
            lines.append(b"%s %d %s\n" % (p.type.name.encode(), len(data), blake3.blake3(data).hexdigest().encode()))
    return b"".join(lines)


def check(om: OmFile, keys: list[bytes], where) -> str:
    """Raises ArchiveError unless the OM (container.read_om) carries a valid signature by one
    of `keys`; returns the signer's key id. Reads bytes only: call it before anything of the
    OM is parsed further or mapped. What the signature covers through MODEL_DEF's digests is
    checked where they are (integrity.check_partitions, check_so_bins), before it is used."""
    try:
        signed, doc = split(om.partition(PT.MODEL_DEF))
        if doc is None and SIGNATURE_ATTR.encode() in bytes(signed):
            raise ArchiveError(f"MODEL_DEF holds a {SIGNATURE_ATTR} attr that is not its last field: MODEL_DEF "
                               "was rewritten after it was signed; do not use it")
        if doc is None:
            raise signing._not_signed(where, Path(str(where)).name)
        text = message(om, signed)
    except ArchiveError as e:
        raise ArchiveError(str(e) if str(e).startswith(str(where)) else f"{where}: {e}") from None
    return signing._verify(doc, FORMAT, text, keys, where, "the OM's header and partitions", "OM file")


def signers(om: OmFile) -> list[str]:
    """The key ids an OM's signature document lists (none checked); [] when it is not signed."""
    try:
        _, doc = split(om.partition(PT.MODEL_DEF))
    except ArchiveError:
        return []
    sigs = doc.get("signatures") if isinstance(doc, dict) else None
    return [s.get("key_id", "?") for s in sigs if isinstance(s, dict)] if isinstance(sigs, list) else []


def sign(path: Path, key, output: Path) -> Path:
    """Adds the signature of `key` (an Ed25519 private key) to the OM file at `path`, written to
    `output`. The header and every partition but MODEL_DEF stay byte for byte; MODEL_DEF gains
    (or has replaced) its signature attr at its end."""
    om = read_om(path, copy=True)
    signed, old = split(om.partition(PT.MODEL_DEF))
    md = proto.ModelDef()
    try:
        md.ParseFromString(bytes(signed))
    except Exception as e:
        raise ArchiveError(f"{path}: the MODEL_DEF partition is not a valid ModelDef ({e})") from None
    if SIGNATURE_ATTR in md.attr:
        raise ArchiveError(f"{path}: MODEL_DEF holds a {SIGNATURE_ATTR} attr that is not its last field: it was "
                           "rewritten after it was signed; sign the file as om2gen wrote it")
    if integrity.PARTITION_BLAKE3 not in md.attr:
        raise ArchiveError(f"{path}: MODEL_DEF records no partition digests ({integrity.PARTITION_BLAKE3}), so a "
                           "signature could not cover the partitions; recompile it with this om2gen")
    integrity.check_partitions(md, om, str(path))   # sign only what a load would accept
    doc = signing._signed_doc(old, key, message(om, signed), FORMAT)
    entry = proto.ModelDef()
    entry.attr[SIGNATURE_ATTR].s = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    model_def = bytes(signed) + entry.SerializeToString(deterministic=True)
    parts = [Partition(p.type, model_def if p.type == PT.MODEL_DEF else p.data) for p in om.partitions]
    write_om(output, parts, header=om.header)
    return output

