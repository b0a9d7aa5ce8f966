"""Custom-operator libraries at compile time (the counterpart of ASCEND_CUSTOM_OPP_PATH).

A library is given with --custom-op-lib (or found in the directory $OM2GEN_CUSTOM_OP_PATH), ELF-
checked for the target, loaded into this process from memory (its REG_AUTO_MAPPING_OP
registrations land in the runtime's factory) and remembered by content: a library is loaded once
per process and stays resident, as the seed requires. While a model compiles, the op types of
its libraries are "active": nodes of those types compile as custom operators.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import CompileError, UnsupportedOpError
from .toolchain import elfcheck

ENV_PATH = "OM2GEN_CUSTOM_OP_PATH"
REGISTER_SYMBOL = "Om2RegisterCustomOpCreator"


@dataclass(frozen=True)
class CustomOpLibrary:
    name: str            # original file name
    data: bytes
    sha256: str
    op_types: tuple[str, ...]

    @property
    def archive_name(self) -> str:
        """The seed's naming: <file_size>_<file_hash>_<original_name>."""
        return f"{len(self.data)}_{self.sha256[:16]}_{self.name}"


_loaded: dict[str, CustomOpLibrary] = {}      # sha256 -> library (resident for the process)
_active: contextvars.ContextVar[dict[str, CustomOpLibrary]] = contextvars.ContextVar("om2gen_custom_ops", default={})


def _registered() -> set[str]:
    from .executor.native import ffi, lib
    n = lib.Om2ListCustomOps(ffi.NULL, 0)
    names = ffi.new("const char *[]", max(n, 1))
    lib.Om2ListCustomOps(names, n)
    return {ffi.string(names[i]).decode() for i in range(n)}


def load_library(path: Path, target) -> CustomOpLibrary:
    """Compile time: read, ELF-check and load a library given by path."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CompileError(f"custom-op library {path}: cannot read it ({exc.strerror})") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest not in _loaded:
        check(data, path.name, target)
    return load_bytes(data, path.name, CompileError)


def load_bytes(data, name: str, error=CompileError, digest: str | None = None) -> CustomOpLibrary:
    """Loads a library from memory (memfd + dlopen, never from disk) unless a library with the
    same content is already resident; libraries are never unloaded (their creators stay in the
    factory). `data` may be a view into a mapped archive."""
    digest = digest or hashlib.sha256(data).hexdigest()
    if digest in _loaded:
        return _loaded[digest]
    from .executor.native import ffi, lib, recent_runtime_error
    before = _registered()
    handle = ffi.new("void **")
    buf = ffi.from_buffer(data)
    try:
        if lib.om2rtLoadSharedObjectFromMemory(buf, len(data), 0, handle) != 0:
            raise error(f"custom-op library {name}: loading it failed: {recent_runtime_error()}")
    finally:
        ffi.release(buf)
    ops = tuple(sorted(_registered() - before))
    if not ops:
        raise error(f"custom-op library {name} registered no operator (does it use REG_AUTO_MAPPING_OP?)")
    library = CustomOpLibrary(name, bytes(data), digest, ops)
    _loaded[digest] = library
    return library


def check(data: bytes, name: str, target) -> None:
    """An ELF shared object for the target that imports the registration entry point."""
    try:
        info = elfcheck.describe(data)
    except Exception as exc:
        raise CompileError(f"custom-op library {name} is not an ELF shared object ({exc})") from None
    problems = []
    if info["type"] != "ET_DYN":
        problems.append(f"it is {info['type']}, not a shared object")
    if info["machine"] != target.elf_machine or info["class"] != 64:
        problems.append(f"it is built for {info['machine']} ({info['class']}-bit), the target {target.name} needs "
                        f"{target.elf_machine} (64-bit)")
    if REGISTER_SYMBOL not in info["imported"]:
        problems.append(f"it does not call {REGISTER_SYMBOL} (no REG_AUTO_MAPPING_OP registration)")
    if problems:
        raise CompileError(f"custom-op library {name}: {'; '.join(problems)}")


def find_libraries(paths) -> list[Path]:
    found = [Path(p) for p in (paths or [])]
    directory = os.environ.get(ENV_PATH)
    if directory:
        d = Path(directory)
        if not d.is_dir():
            raise CompileError(f"${ENV_PATH}={directory} is not a directory")
        found += sorted(p for p in d.glob("*.so") if p not in found)
    return found


@contextlib.contextmanager
def activated(libraries: list[CustomOpLibrary]):
    ops: dict[str, CustomOpLibrary] = {}
    for library in libraries:
        for op in library.op_types:
            ops.setdefault(op, library)
    token = _active.set(ops)
    try:
        yield ops
    finally:
        _active.reset(token)


def library_for(op_type: str) -> CustomOpLibrary | None:
    return _active.get().get(op_type)


def active_op_types() -> list[str]:
    return sorted(_active.get())


def require(node) -> CustomOpLibrary:
    library = library_for(node.op_type)
    if library is None:
        raise UnsupportedOpError(f"node {node.name!r}: {node.op_type} is not a custom operator of the given libraries")
    return library
