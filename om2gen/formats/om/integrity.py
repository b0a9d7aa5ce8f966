"""Classic .om load-time checks (docs/om-format.md): the digests MODEL_DEF records of the other
partitions and of the SO_BINS items, checked before anything is parsed further or dlopen'ed, and
both required (an OM without them is refused). They catch corruption, not a tamperer, who can
recompute them: only a signature (formats/om/signature.py) does that.

- ``SO_BINS_SHA256``: the sha256 of each SO_BINS item; kCustomOp items' names are checked too
  (formats/om2/integrity.py, as in an .om2).
- ``PARTITION_BLAKE3``: the BLAKE3 of CUSTOM_OPS, WEIGHTS_DATA, TBE_KERNELS, TASK_INFO and
  MODEL_DEF itself.
"""
from __future__ import annotations

import hashlib

from ...errors import ArchiveError
from ..om2.integrity import RECOMPILE, check_custom_names

# MODEL_DEF attr: list of strings, the hex sha256 of each SO_BINS item in store order. GE's own
# private attrs start with "_"; the om2gen prefix keeps it apart from any GE key.
SO_BINS_SHA256 = "_om2gen_so_bins_sha256"


def so_bins_digests(bins) -> list[str]:
    """What a classic .om records in SO_BINS_SHA256 for its SO_BINS items."""
    return [hashlib.sha256(b.data).hexdigest() for b in bins]


def check_so_bins(model_def, bins, where: str) -> None:
    """A classic .om's SO_BINS items, before any is loaded: against the digests MODEL_DEF records
    and, for kCustomOp items, their names. An OM written before om2gen recorded digests (no attr)
    is refused, as for the partition digests (check_partitions)."""
    digests = so_bins_digests(bins)
    if bins and SO_BINS_SHA256 not in model_def.attr:
        raise ArchiveError(f"{where}: MODEL_DEF records no digests of its {len(bins)} SO_BINS items (attr "
                           f"{SO_BINS_SHA256}), which om2gen writes into every .om that packs shared objects; the "
                           f"attr was removed or renamed, or an om2gen older than the check wrote the file: "
                           f"{RECOMPILE}")
    if SO_BINS_SHA256 in model_def.attr:
        attr = model_def.attr[SO_BINS_SHA256]
        recorded = list(attr.list.s) if attr.WhichOneof("value") == "list" else None
        if recorded is None or len(recorded) != len(bins):
            held = "not a list of strings" if recorded is None else f"{len(recorded)} digests"
            raise ArchiveError(f"{where}: MODEL_DEF attr {SO_BINS_SHA256} holds {held} for {len(bins)} SO_BINS "
                               f"items; the OM is corrupt or was modified: {RECOMPILE}")
        for i, (b, want, have) in enumerate(zip(bins, recorded, digests)):
            if want.decode("ascii", "replace") != have:
                raise ArchiveError(f"{where}: SO_BINS item {i} ({b.bin_type.name} "
                                   f"{b.vendor + '/' if b.vendor else ''}{b.name}) does not match the sha256 "
                                   f"MODEL_DEF records for it ({SO_BINS_SHA256}); the OM is corrupt or the shared "
                                   f"object was replaced: {RECOMPILE} (om2gen compile --format om)")
    check_custom_names(bins, digests, where)


# MODEL_DEF attr: list of strings "<PARTITION TYPE>:<blake3 hex>", one per partition the model
# uses besides SO_BINS (whose items have SO_BINS_SHA256), then "MODEL_DEF:<blake3 hex>" of MODEL_DEF
# itself serialized without this attr (deterministic protobuf, as the writer serializes it). GE
# ignores attrs it does not know.
PARTITION_BLAKE3 = "_om2gen_partition_blake3"
# MODEL_DEF attr: the signature document of a signed .om (formats/om/signature.py), MODEL_DEF's last field.
# Neither digest covers it: signing adds it after both were recorded.
OM_SIGNATURE = "_om2gen_signature"
DIGESTED_PARTITIONS = ("CUSTOM_OPS", "WEIGHTS_DATA", "TBE_KERNELS", "TASK_INFO")


def _blake3(data) -> str:
    import blake3
    return blake3.blake3(data, max_threads=blake3.blake3.AUTO).hexdigest()


def model_def_digest(model_def) -> str:
    """BLAKE3 of MODEL_DEF without PARTITION_BLAKE3 (the attr cannot digest itself) and
    OM_SIGNATURE (added after it)."""
    md = type(model_def)()
    md.CopyFrom(model_def)
    for name in (PARTITION_BLAKE3, OM_SIGNATURE):
        if name in md.attr:
            del md.attr[name]
    return _blake3(md.SerializeToString(deterministic=True))


def partition_digests(partitions: dict, model_def=None) -> list[str]:
    """What a classic .om records in PARTITION_BLAKE3: `partitions` {type name: bytes}; with
    `model_def`, its digest last."""
    out = [f"{name}:{_blake3(partitions.get(name, b''))}" for name in DIGESTED_PARTITIONS]
    if model_def is not None:
        out.append(f"MODEL_DEF:{model_def_digest(model_def)}")
    return out


def check_partitions(model_def, om, where: str) -> None:
    """A classic .om's partitions and MODEL_DEF against the digests MODEL_DEF records, before
    any is parsed further. The digests are required: were a file without them loaded unchecked,
    one changed byte in the attr's name would turn the check off (fuzz case om-7224)."""
    from .layout import ModelPartitionType as PT
    prefix = f"{where}: " if where else ""
    if PARTITION_BLAKE3 not in model_def.attr:
        raise ArchiveError(f"{prefix}MODEL_DEF records no partition digests (attr {PARTITION_BLAKE3}), which om2gen "
                           f"writes into every .om; the attr was removed or renamed, or an om2gen older than the "
                           f"check wrote the file: {RECOMPILE}")
    attr = model_def.attr[PARTITION_BLAKE3]
    recorded = [v.decode("ascii", "replace") for v in attr.list.s] if attr.WhichOneof("value") == "list" else []
    actual = partition_digests({name: om.partition(PT[name]) for name in DIGESTED_PARTITIONS}, model_def)
    if len(recorded) != len(actual):
        raise ArchiveError(f"{prefix}MODEL_DEF attr {PARTITION_BLAKE3} holds {len(recorded)} digests, om2gen records "
                           f"{len(actual)}; the OM is corrupt or was modified: {RECOMPILE}")
    for want, have in zip(recorded, actual):
        if want != have:
            raise ArchiveError(f"{prefix}partition {have.split(':')[0]} does not match the blake3 digest MODEL_DEF "
                               f"records for it ({PARTITION_BLAKE3}); the OM is corrupt or was modified: {RECOMPILE}")
