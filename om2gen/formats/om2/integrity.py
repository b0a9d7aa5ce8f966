"""OM2 load-time checks that what an archive's names say about its code matches the bytes
(docs/archive-format.md §3).

The manifest's per-entry digests (formats/om2/reader.py ``verify``) catch corruption. These
checks catch the inconsistent edits they cannot: an entry renamed, or its bytes replaced with the
manifest digest recomputed but not the name. None of this is a signature: anyone can recompute
every digest.

- A custom-op library's name ``<file_size>_<sha256[:16]>_<original_name>.so`` (OM2
  ``data/custom_ops/shared_libs/`` entries, and kCustomOp items of an OpSoStore in either format)
  must give its length and the start of its sha256.
- A kernel's ``<OpName>_<12 hex>.o`` digests its *specialisation* (template, parameters, target,
  compiler, headers: codegen/kernels.py), not its bytes, so only its form and directory can be
  checked at load; the runtime refuses a binary that does not define the entry it names.
"""
from __future__ import annotations

import hashlib

from ...errors import ArchiveError
from . import layout

RECOMPILE = "recompile the model or get an intact copy"


def check_library_name(file_name: str, size: int, sha256: str, what: str) -> None:
    """`file_name` (a custom-op library's base name) against its length and sha256 (hex)."""
    parts = layout.split_library_name(file_name)
    if parts is None:
        raise ArchiveError(f"{what}: {file_name!r} is not named <file_size>_<sha256[:16]>_<name> as om2gen "
                           f"names custom-op libraries; it was renamed: {RECOMPILE}")
    named_size, named_hash, _ = parts
    problems = []
    if named_size != size:
        problems.append(f"its name says {named_size} bytes, it has {size}")
    if named_hash != sha256[:layout.LIBRARY_HASH_DIGITS]:
        problems.append(f"its name says sha256 {named_hash}..., its bytes hash to "
                        f"{sha256[:layout.LIBRARY_HASH_DIGITS]}...")
    if problems:
        raise ArchiveError(f"{what}: {'; '.join(problems)}; the entry was renamed or its bytes replaced: {RECOMPILE}")


def check_entry_names(archive, meta: dict, directory: str) -> None:
    """OM2, before any entry named here is used: the custom-op libraries' names against their
    bytes (the name carries a sha256 prefix), the custom-op instances' and kernels' names in form
    and directory (`directory`: the model's kernel set, layout.model_kernels_dir)."""
    where = archive.path
    prefix = layout.custom_op_library("")
    for name in (meta.get("custom_ops") or {}).get("shared_libs", []):
        if not name.startswith(prefix) or "/" in name[len(prefix):]:
            raise ArchiveError(f"{where}: custom-op library entry {name!r} is not in {prefix}; {RECOMPILE}")
        check_library_name(name[len(prefix):], archive.info(name).file_size,
                           hashlib.sha256(archive.view(name)).hexdigest(), f"{where}: entry {name!r}")
    binaries = layout.custom_op_binary(archive.manifest.get("target", {}).get("arch", "?"), "")
    for name in (meta.get("custom_ops") or {}).get("binaries", []):
        if not name.startswith(binaries) or "/" in name[len(binaries):] or name == binaries:
            raise ArchiveError(f"{where}: custom-op instance entry {name!r} is not in {binaries}; {RECOMPILE}")
    for name in meta["kernels"]:
        if not name.startswith(directory) or layout.split_kernel_name(name[len(directory):]) is None:
            raise ArchiveError(f"{where}: kernel entry {name!r} is not {directory}<OpName>_<12 hex>.o as om2gen "
                               f"names the target's kernels; it was renamed: {RECOMPILE}")


def check_custom_names(bins, digests: list[str], where: str) -> None:
    """The kCustomOp items of an OpSoStore (their so_name is the library's archive name) against
    their bytes; `digests` are the items' sha256, in order."""
    for b, digest in zip(bins, digests):
        if b.bin_type.name == "kCustomOp":
            check_library_name(b.name, len(b.data), digest, f"{where}: packed kCustomOp {b.vendor}/{b.name}")
