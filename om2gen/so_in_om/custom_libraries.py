"""Custom-operator libraries (the counterpart of ASCEND_CUSTOM_OPP_PATH), at compile and load time.

A library is given with --custom-op-lib (or found in the directory $OM2GEN_CUSTOM_OP_PATH), ELF-
checked, loaded into this process from memory and remembered by content: a library is loaded once
per process and stays resident, as the seed requires. Its REG_AUTO_MAPPING_OP registrations land
in a registry owned by that library (om2/om2_so_in_om.h), not in a process-wide factory.

Which registries a lookup sees is a *scope* on the calling thread (`scope(libraries)`): while a
model compiles, its libraries are active (`activated`) -- nodes of their op types compile as
custom operators, and the factory calls made for them see those libraries only; while a model
loads, the executor activates the libraries packed in that model (so_loader.PackedSos). Two
models whose libraries register the same op type differently therefore each get their own.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CompileError, UnsupportedOpError
from ..toolchain import targets

ENV_PATH = "OM2GEN_CUSTOM_OP_PATH"
REGISTER_SYMBOL = "Om2RegisterCustomOpCreator"


@dataclass(frozen=True)
class CustomOpLibrary:
    name: str            # original file name
    data: bytes = field(repr=False)    # never in a repr or an error message: it is the whole library
    sha256: str
    op_types: tuple[str, ...]
    registry: object = field(default=None, compare=False, repr=False)   # the library's registry (cffi void *)

    @property
    def archive_name(self) -> str:
        """The seed's naming: <file_size>_<file_hash>_<original_name> (formats/om2/layout.py)."""
        from ..formats.om2 import layout
        return layout.custom_op_library_name(len(self.data), self.sha256, self.name)


_loaded: dict[str, CustomOpLibrary] = {}      # sha256 -> library (resident for the process)
_lock = threading.Lock()
_active: contextvars.ContextVar[dict[str, CustomOpLibrary]] = contextvars.ContextVar("om2gen_custom_ops", default={})
_given: contextvars.ContextVar[tuple[CustomOpLibrary, ...]] = contextvars.ContextVar("om2gen_custom_libs", default=())


def _registered(registry) -> tuple[str, ...]:
    from ..native import ffi, lib
    n = lib.om2x_custom_library_ops(registry, ffi.NULL, 0)
    names = ffi.new("const char *[]", max(n, 1))
    n = min(n, lib.om2x_custom_library_ops(registry, names, n))
    return tuple(ffi.string(names[i]).decode() for i in range(n))


def load_library(path: Path, target=None) -> CustomOpLibrary:
    """Compile time: read, ELF-check and load a library given by path. `target` is the machine
    the library runs on here (None: this one): when cross-compiling, the host (the target's own
    build is packed from the op package, so_providers)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CompileError(f"custom-op library {path}: cannot read it ({exc.strerror})") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest not in _loaded:
        if target is None:
            target = targets.default_target()
        check(data, path.name, target)
    return load_bytes(data, path.name, CompileError)


def load_bytes(data, name: str, error=CompileError, digest: str | None = None) -> CustomOpLibrary:
    """Loads a library from memory (memfd + dlopen, never from disk) into a registry of its own,
    unless a library with the same content is already resident; libraries are never unloaded
    (live instances use their code). `data` may be a view into a mapped archive."""
    digest = digest or hashlib.sha256(data).hexdigest()
    with _lock:
        if digest in _loaded:
            return _loaded[digest]
        from ..native import ffi, lib, string
        handle, registry = ffi.new("void **"), ffi.new("void **")
        err = ffi.new("char[]", 1024)
        buf = ffi.from_buffer(data)
        try:
            if lib.om2x_custom_library_load(buf, len(data), handle, registry, err, 1024) != 0:
                raise error(f"custom-op library {name}: {string(err)}")
        finally:
            ffi.release(buf)
        ops = _registered(registry[0])
        if not ops:
            raise error(f"custom-op library {name} registered no operator (does it use REG_AUTO_MAPPING_OP?)")
        library = CustomOpLibrary(name, bytes(data), digest, ops, registry[0])
        _loaded[digest] = library
        return library


def resident(digest: str) -> CustomOpLibrary:
    """The library loaded in this process whose content has sha256 `digest`: programs name their
    custom operators' libraries so (ir.program.CustomOpDef), never holding the live registry."""
    return _loaded[digest]


def check(data: bytes, name: str, target) -> None:
    """An ELF shared object for the target, loadable by its runtime, that imports the
    registration entry point."""
    from .elf_checks import check as check_elf
    summary = check_elf(data, f"custom-op library {name}", target.arch)
    if REGISTER_SYMBOL not in summary.imported:
        raise CompileError(f"custom-op library {name}: it does not call {REGISTER_SYMBOL} "
                           f"(no REG_AUTO_MAPPING_OP registration)")


def unique(libraries) -> list[CustomOpLibrary]:
    """`libraries` without repeats of the same content (the same file given twice, or a copy of it
    also in $OM2GEN_CUSTOM_OP_PATH): the first one stays, in order."""
    seen: dict[str, CustomOpLibrary] = {}
    for library in libraries:
        seen.setdefault(library.sha256, library)
    return list(seen.values())


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
def scope(libraries: list[CustomOpLibrary]):
    """On this thread, the runtime's custom-op factory sees exactly `libraries` (the first one
    registering an op type wins; none at all for an empty list) until the block ends."""
    from ..native import ffi, lib
    registries = ffi.new("void *[]", [library.registry for library in libraries] or [ffi.NULL])
    token = ffi.new("void **")
    if lib.om2x_custom_scope_enter(registries, len(libraries), token) != 0:
        raise MemoryError("om2x_custom_scope_enter failed")
    try:
        yield
    finally:
        lib.om2x_custom_scope_leave(token[0])


@contextlib.contextmanager
def activated(libraries: list[CustomOpLibrary]):
    """Compile time: `libraries` provide the custom operators (first library wins per op type),
    for the op registry (library_for) and for the factory (scope). A library given twice counts once."""
    libraries = unique(libraries)
    ops: dict[str, CustomOpLibrary] = {}
    for library in libraries:
        for op in library.op_types:
            ops.setdefault(op, library)
    token, given = _active.set(ops), _given.set(tuple(libraries))
    try:
        with scope(libraries):
            yield ops
    finally:
        _given.reset(given)
        _active.reset(token)


def library_for(op_type: str) -> CustomOpLibrary | None:
    return _active.get().get(op_type)


def active_op_types() -> list[str]:
    return sorted(_active.get())


def searched() -> str:
    """The active libraries and the op types each provides, for an error about an op none has:
    "libfoo.so (provides A, B), libbar.so (provides C)"; "" when no library is active."""
    return ", ".join(f"{lib.name} (provides {', '.join(lib.op_types)})" for lib in _given.get())


def require(node) -> CustomOpLibrary:
    library = library_for(node.op_type)
    if library is None:
        raise UnsupportedOpError(f"node {node.name!r}: {node.op_type} is not a custom operator of the given libraries")
    return library
