"""The OM2 archive layout: the one source of truth for every path, name pattern and version.

Writer, reader, executor, inspect and tests import from here. Paths and JSON keys are public
identifiers once published: never rename or reuse one; add new ones instead.

FORMAT_VERSION "major.minor": bump the minor for additions an older executor may ignore,
the major when an older executor must refuse the archive (it checks the major).
"""
from __future__ import annotations

import re

from ...errors import ArchiveError, CompileError

FORMAT = "om2"
# 1.1: data/so_bins/, manifest so_in_om_info, model_meta so_bins; 1.2: a blake3 digest per entry
FORMAT_VERSION = "1.2"
EXECUTOR_VERSION = "1.3"          # what this executor reads (GERT_EXECUTOR_VERSION in GE)
BASE_EXECUTOR_VERSION = "1.0"     # required by archives that use no feature of a later executor
# compatibility.used_features: a feature an executor must know -> the executor version it needs.
# Packed SOs other than custom-op libraries must reach their consumers (an executor 1.0 would
# ignore data/so_bins/), so an archive holding them requires executor 1.1.
SO_IN_OM_FEATURE = "so_in_om"
SO_IN_OM_EXECUTOR_VERSION = "1.1"
# Several kernel sets (--target x86_64-avx2,x86_64-avx512): one model_N per target, of which the
# executor runs the best this CPU supports; an executor before 1.3 would run model 0 whatever the CPU.
MULTI_ISA_FEATURE = "multi_isa"
MULTI_ISA_EXECUTOR_VERSION = "1.3"
ALIGNMENT = 64                    # STORED entries start at a multiple of this offset (mmap-able)
FIXED_DATE = (1980, 1, 1, 0, 0, 0)

MANIFEST = "manifest.json"
# Signatures of the manifest (formats/om2/signing.py); outside the manifest, which cannot list it.
SIGNATURE = "signature.json"
DATA = "data/"
CONSTANTS_DIR = "data/constants/"
CUSTOM_OPS_DIR = "data/custom_ops/"
SO_BINS_DIR = "data/so_bins/"
# The OpSoStore of every shared object the model packs (om2gen/formats/op_so_store.py): byte-identical
# to the classic OM's SO_BINS partition. Written only when the model packs SOs.
SO_STORE = f"{SO_BINS_DIR}op_so_store.bin"


def model_dir(index: int) -> str:
    return f"data/model_{index}/"


def model_meta(index: int) -> str:
    return f"{model_dir(index)}model_meta.json"


def op_attr(index: int) -> str:
    return f"{model_dir(index)}op_attr.json"


def runtime_dir(index: int) -> str:
    return f"{model_dir(index)}runtime/"


def csrc_dir(index: int) -> str:
    return f"{runtime_dir(index)}csrc/"


# The model library's sources in csrc_dir, by file name (the names it is compiled under too): the
# model's tables, <stem>_tables.cpp, and the load-and-run code every model library shares.
TABLES_SOURCE_SUFFIX = "_tables.cpp"
LOAD_AND_RUN_SOURCE = "om2_load_and_run.cpp"


def tables_source(stem: str) -> str:
    return f"{stem}{TABLES_SOURCE_SUFFIX}"


def build_commands(index: int) -> str:
    """The commands that rebuilt the model library and the kernels from csrc (STYLE 9)."""
    return f"{csrc_dir(index)}build_commands.json"


def model_library(index: int, stem: str) -> str:
    return f"{runtime_dir(index)}lib{stem}_om2.so"


def debug_dir(index: int) -> str:
    return f"{model_dir(index)}debug/"


def ge_model_json(index: int) -> str:
    return f"{debug_dir(index)}ge_model.json"


def task_info_json(index: int) -> str:
    return f"{debug_dir(index)}task_info.json"


def memory_plan_json(index: int) -> str:
    return f"{debug_dir(index)}memory_plan.json"


def kernels_dir(arch: str) -> str:
    return f"data/kernels_{arch}/"


def kernel_binary(arch: str, file_name: str) -> str:
    return f"{kernels_dir(arch)}{file_name}"


def model_kernels_dir(manifest: dict, model: dict) -> str:
    """Where a model's kernels are: data/kernels_<target>/ for one of several kernel sets (its
    manifest models[] entry names its target), else data/kernels_<arch>/."""
    target = model.get("target")
    if isinstance(target, dict):
        return kernels_dir(str(target.get("name", "?")))
    return kernels_dir(str(manifest.get("target", {}).get("arch", "?")))


def kernel_source(index: int, entry: str) -> str:
    """Kernel sources travel with the model's csrc for audit."""
    return f"{csrc_dir(index)}kernels/{entry}.c"


def custom_op_binaries_dir(arch: str) -> str:
    return f"{CUSTOM_OPS_DIR}binaries_{arch}/"


def custom_op_binary(arch: str, file_name: str) -> str:
    """A custom operator instance's serialized state: <OpType>_<hash>_CustomKernel.bin (the seed's naming)."""
    return f"{custom_op_binaries_dir(arch)}{file_name}"


def custom_op_bin_name(op_type: str, blob_digest: str) -> str:
    """The .bin of a custom operator instance: <OpType>_<hash>_CustomKernel.bin, with the op type
    made a safe name component (the op type is the user's: it may hold '/', '..', NUL, ...)."""
    return f"{safe_component(op_type)}_{blob_digest}_CustomKernel.bin"


def custom_op_library_name(size: int, sha256: str, original_name: str) -> str:
    """The seed's name of a packed custom-op library: <file_size>_<file_hash>_<original_name>, the
    original file name made a safe name component."""
    return f"{size}_{sha256[:16]}_{safe_component(original_name)}"


CUSTOM_OP_LIBRARIES_DIR = f"{CUSTOM_OPS_DIR}shared_libs/"


def custom_op_library(archive_name: str) -> str:
    """A custom-op shared library: <file_size>_<file_hash>_<original_name>.so (the seed's naming)."""
    return f"{CUSTOM_OP_LIBRARIES_DIR}{archive_name}"


# The size and hash in entry names. A library's <file_hash> is the start of the sha256 of its bytes;
# a kernel's <12 hex> digests its specialisation (codegen/kernels.py), not its bytes.
LIBRARY_HASH_DIGITS = 16
KERNEL_HASH_DIGITS = 12
_LIBRARY_NAME = re.compile(rf"(0|[1-9][0-9]*)_([0-9a-f]{{{LIBRARY_HASH_DIGITS}}})_(.+)")
_KERNEL_NAME = re.compile(rf"([A-Za-z_][A-Za-z0-9_]*)_([0-9a-f]{{{KERNEL_HASH_DIGITS}}})\.o")


def split_library_name(file_name: str) -> tuple[int, str, str] | None:
    """(file_size, file_hash, original_name) of <file_size>_<file_hash>_<original_name>; None if
    the name does not have that form."""
    m = _LIBRARY_NAME.fullmatch(file_name)
    return (int(m[1]), m[2], m[3]) if m else None


def split_kernel_name(file_name: str) -> tuple[str, str] | None:
    """(op name, specialisation hash) of a kernel binary's <OpName>_<12 hex>.o; None otherwise."""
    m = _KERNEL_NAME.fullmatch(file_name)
    return (m[1], m[2]) if m else None


def constants_config(index: int) -> str:
    return f"{CONSTANTS_DIR}model_{index}_constants_config.json"


def constants_blob(index: int) -> str:
    return f"{CONSTANTS_DIR}constants_{index}"


def model_constants_blob(config: dict, index: int) -> str | None:
    """The constants blob model `index` reads: the one its constants config's file_name names (GE's
    key; kernel sets with equal constants share one blob), constants_<index> when it has none;
    None when the consts name different blobs (om2gen packs a model's constants in one)."""
    consts = config.get("consts")
    named = {c.get("file_name") for c in consts.values() if isinstance(c, dict)} if isinstance(consts, dict) else set()
    if not named:
        return constants_blob(index)
    name = named.pop()
    return f"{CONSTANTS_DIR}{name}" if not named and isinstance(name, str) else None


def so_store(index: int) -> str:
    """The OpSoStore of model `index` when its shared objects differ from model 0's (kernel sets
    whose dynamic tiling libraries are built per target); equal stores share SO_STORE."""
    return f"{SO_BINS_DIR}model_{index}_op_so_store.bin"


# Entries whose bytes the executor maps instead of copying, and so writes STORED and aligned.
def is_mapped(name: str) -> bool:
    return (name.startswith(CONSTANTS_DIR) and not name.endswith(".json")) or name.endswith((".so", ".o", ".bin"))


# STORED: what is mapped, plus the small metadata read at every load (as GE's whitelist:
# manifest, signature, model_meta and the constants config);
# DEFLATE: sources, configs and debug dumps.
def is_stored(name: str) -> bool:
    return (is_mapped(name) or name in (MANIFEST, SIGNATURE) or name.endswith("/model_meta.json")
            or (name.startswith(CONSTANTS_DIR) and name.endswith("_constants_config.json")))


# --- entry names ------------------------------------------------------------------------------
# Every entry name is a relative path of non-empty components separated by '/', none of them '.'
# or '..', without backslashes, NUL or other control characters, and at most MAX_ENTRY_NAME bytes
# of UTF-8: an archive whose names escape its directory (or mean something else on Windows) is
# refused by the reader, and the writer never makes one. A part of a name that comes from the
# user (an op type, a node name, a library's file name) goes through safe_component().
MAX_ENTRY_NAME = 1024
MAX_COMPONENT = 96
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._+-]")
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


def safe_component(text: str) -> str:
    """`text` as one safe name component: ASCII letters, digits and ._+- only (anything else
    becomes '_'), not starting with '.', at most MAX_COMPONENT characters. A changed or shortened
    text gets the start of its sha256, so that two texts never share a component."""
    import hashlib
    safe = _UNSAFE_CHARS.sub("_", text).lstrip(".") or "_"
    if safe == text and len(safe) <= MAX_COMPONENT:
        return safe
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    stem, dot, ext = safe.rpartition(".")
    ext = f".{ext}" if dot and stem and ext.isalnum() and len(ext) <= 8 else ""   # kept: .so decides storage
    return f"{safe[:len(safe) - len(ext)][:MAX_COMPONENT - 13 - len(ext)]}~{digest}{ext}"


def _plainly_safe(name: str) -> bool:
    """A quick test that passes most safe names (printable, at most MAX_ENTRY_NAME / 4 characters,
    no backslash, not absolute, no empty, '.' or '..' component, no component starting with '.');
    unsafe_entry_name decides the rest."""
    return (0 < len(name) <= MAX_ENTRY_NAME // 4 and name.isprintable() and "\\" not in name and "//" not in name
            and "/." not in name and name[0] not in "/." and name[-1] != "/" and name[1:2] != ":")


def unsafe_entry_name(name: str) -> str | None:
    """Why `name` is not a safe entry name, or None when it is."""
    if _plainly_safe(name):
        return None
    if not name:
        return "it is empty"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_ENTRY_NAME:
        return f"it is longer than {MAX_ENTRY_NAME} bytes"
    if _CONTROL_CHARS.search(name):
        return "it holds a NUL or another control character"
    if "\\" in name:
        return "it holds a backslash"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "it is an absolute path"
    parts = name.split("/")
    if any(p == "" for p in parts[:-1]) or parts[-1] == "":
        return "it has an empty path component"
    if any(p in (".", "..") for p in parts):
        return "it has a '.' or '..' component"
    return None


def check_entry_names(names, where, writing: bool = False) -> None:
    """Raises for the first unsafe entry name among `names` of the archive `where`: ArchiveError
    when reading it, CompileError when om2gen was about to write it (a bug: report it)."""
    for name in names:
        why = unsafe_entry_name(name)
        if why is None:
            continue
        if writing:
            raise CompileError(f"{where}: refusing to write the entry name {name[:200]!r} ({why}); a user-given "
                               "name reached it unsanitised, please report this as an om2gen bug")
        raise ArchiveError(f"{where}: entry name {name[:200]!r} is unsafe ({why}); om2gen never writes such a "
                           "name, so the archive was made or modified by something else: do not use it")
