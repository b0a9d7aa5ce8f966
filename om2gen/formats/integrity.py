"""Load-time checks that what a model says about its code matches the bytes (docs/archive-format.md §3).

The manifest's per-entry sha256 (formats/om2/reader.py ``verify``) catches corruption. These checks
catch the inconsistent edits it cannot: an entry renamed, or its bytes replaced with the
manifest digest recomputed but not the name; and, in a classic .om, the SO_BINS libraries,
which no manifest covers. None of this is a signature: anyone can recompute every digest.

- A custom-op library's name ``<file_size>_<sha256[:16]>_<original_name>.so`` (OM2
  ``data/custom_ops/shared_libs/`` entries, and kCustomOp items of an OpSoStore) must give its
  length and the start of its sha256.
- A kernel's ``<OpName>_<12 hex>.o`` digests its *specialisation* (template, parameters, target,
  compiler, headers: codegen/kernels.py), not its bytes, so only its form and directory can be
  checked at load; the runtime refuses a binary that does not define the entry it names.
- A classic .om records the sha256 of each SO_BINS item in MODEL_DEF attr ``SO_BINS_SHA256``,
  and the BLAKE3 of its other partitions in ``PARTITION_BLAKE3``, both checked before anything is
  dlopen'ed, and both required (an OM without them is refused).
"""
from __future__ import annotations

import hashlib

from ..errors import ArchiveError
from .om2 import layout

# MODEL_DEF attr: list of strings, the hex sha256 of each SO_BINS item in store order. GE's own
# private attrs start with "_"; the om2gen prefix keeps it apart from any GE key.
SO_BINS_SHA256 = "_om2gen_so_bins_sha256"
_RECOMPILE = "recompile the model or get an intact copy"


def check_library_name(file_name: str, size: int, sha256: str, what: str) -> None:
    """`file_name` (a custom-op library's base name) against its length and sha256 (hex)."""
    parts = layout.split_library_name(file_name)
    if parts is None:
        raise ArchiveError(f"{what}: {file_name!r} is not named <file_size>_<sha256[:16]>_<name> as om2gen "
                           f"names custom-op libraries; it was renamed: {_RECOMPILE}")
    named_size, named_hash, _ = parts
    problems = []
    if named_size != size:
        problems.append(f"its name says {named_size} bytes, it has {size}")
    if named_hash != sha256[:layout.LIBRARY_HASH_DIGITS]:
        problems.append(f"its name says sha256 {named_hash}..., its bytes hash to "
                        f"{sha256[:layout.LIBRARY_HASH_DIGITS]}...")
    if problems:
        raise ArchiveError(f"{what}: {'; '.join(problems)}; the entry was renamed or its bytes replaced: {_RECOMPILE}")


def check_entry_names(archive, meta: dict) -> None:
    """OM2, before any entry named here is used: the custom-op libraries' names against their
    bytes (the name carries a sha256 prefix), the custom-op instances' and kernels' names in form
    and directory."""
    where = archive.path
    prefix = layout.custom_op_library("")
    for name in (meta.get("custom_ops") or {}).get("shared_libs", []):
        if not name.startswith(prefix) or "/" in name[len(prefix):]:
            raise ArchiveError(f"{where}: custom-op library entry {name!r} is not in {prefix}; {_RECOMPILE}")
        check_library_name(name[len(prefix):], archive.info(name).file_size,
                           hashlib.sha256(archive.view(name)).hexdigest(), f"{where}: entry {name!r}")
    binaries = layout.custom_op_binary(archive.manifest.get("target", {}).get("arch", "?"), "")
    for name in (meta.get("custom_ops") or {}).get("binaries", []):
        if not name.startswith(binaries) or "/" in name[len(binaries):] or name == binaries:
            raise ArchiveError(f"{where}: custom-op instance entry {name!r} is not in {binaries}; {_RECOMPILE}")
    directory = layout.kernels_dir(archive.manifest.get("target", {}).get("arch", "?"))
    for name in meta["kernels"]:
        if not name.startswith(directory) or layout.split_kernel_name(name[len(directory):]) is None:
            raise ArchiveError(f"{where}: kernel entry {name!r} is not {directory}<OpName>_<12 hex>.o as om2gen "
                               f"names the target's kernels; it was renamed: {_RECOMPILE}")


def check_custom_names(bins, digests: list[str], where: str) -> None:
    """The kCustomOp items of an OpSoStore (their so_name is the library's archive name) against
    their bytes; `digests` are the items' sha256, in order."""
    for b, digest in zip(bins, digests):
        if b.bin_type.name == "kCustomOp":
            check_library_name(b.name, len(b.data), digest, f"{where}: packed kCustomOp {b.vendor}/{b.name}")


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
                           f"{_RECOMPILE}")
    if SO_BINS_SHA256 in model_def.attr:
        attr = model_def.attr[SO_BINS_SHA256]
        recorded = list(attr.list.s) if attr.WhichOneof("value") == "list" else None
        if recorded is None or len(recorded) != len(bins):
            held = "not a list of strings" if recorded is None else f"{len(recorded)} digests"
            raise ArchiveError(f"{where}: MODEL_DEF attr {SO_BINS_SHA256} holds {held} for {len(bins)} SO_BINS "
                               f"items; the OM is corrupt or was modified: {_RECOMPILE}")
        for i, (b, want, have) in enumerate(zip(bins, recorded, digests)):
            if want.decode("ascii", "replace") != have:
                raise ArchiveError(f"{where}: SO_BINS item {i} ({b.bin_type.name} "
                                   f"{b.vendor + '/' if b.vendor else ''}{b.name}) does not match the sha256 "
                                   f"MODEL_DEF records for it ({SO_BINS_SHA256}); the OM is corrupt or the shared "
                                   f"object was replaced: {_RECOMPILE} (om2gen compile --format om)")
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
    from .om.layout import ModelPartitionType as PT
    prefix = f"{where}: " if where else ""
    if PARTITION_BLAKE3 not in model_def.attr:
        raise ArchiveError(f"{prefix}MODEL_DEF records no partition digests (attr {PARTITION_BLAKE3}), which om2gen "
                           f"writes into every .om; the attr was removed or renamed, or an om2gen older than the "
                           f"check wrote the file: {_RECOMPILE}")
    attr = model_def.attr[PARTITION_BLAKE3]
    recorded = [v.decode("ascii", "replace") for v in attr.list.s] if attr.WhichOneof("value") == "list" else []
    actual = partition_digests({name: om.partition(PT[name]) for name in DIGESTED_PARTITIONS}, model_def)
    if len(recorded) != len(actual):
        raise ArchiveError(f"{prefix}MODEL_DEF attr {PARTITION_BLAKE3} holds {len(recorded)} digests, om2gen records "
                           f"{len(actual)}; the OM is corrupt or was modified: {_RECOMPILE}")
    for want, have in zip(recorded, actual):
        if want != have:
            raise ArchiveError(f"{prefix}partition {have.split(':')[0]} does not match the blake3 digest MODEL_DEF "
                               f"records for it ({PARTITION_BLAKE3}); the OM is corrupt or was modified: {_RECOMPILE}")
