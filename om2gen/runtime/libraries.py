"""Model libraries, mapped once per content per process.

A model library keeps no state of its own for a loaded model: GertModelLoad returns all of it
in the model's handle, and the last-error text is per thread. So the models loaded from library
bytes with the same digest share one mapping of them: a second load of a model skips the memfd,
the ELF check and the dlopen, and N instances of a model in a server cost one copy of its code.

When the last model using a library closes, the library stays mapped while it is one of the
IDLE_KEPT most recently released (and smaller than IDLE_MAX_BYTES): a model loaded again, as a
server reloading its model or a test loading one per case does, then skips the dlopen (about
0.1 ms, a quarter of loading a small model). The rest are unmapped, so a process that loads and
closes models for hours keeps a bounded number of mappings.

The digest is the one the manifest records and the archive checked the bytes against
(formats/om2/reader.py) before they come here.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..errors import AbiError, ArchiveError
from ..native import ffi, lib, string
from ..version import MODEL_ABI_VERSION


@dataclass(eq=False)
class Library:
    """One mapped model library and the models using it."""
    digest: str
    size: int        # bytes of the ELF file
    handle: object   # the dlopen handle (void *)
    entry_points: object   # Om2xEntryPoints *
    users: int = 1


IDLE_KEPT = 4
IDLE_MAX_BYTES = 4 << 20

_lock = threading.Lock()
_mapped: dict[str, Library] = {}        # in use
_idle: OrderedDict = OrderedDict()      # digest -> Library no model uses, the most recent last


def acquire(digest: str, data, file_name: str, where: str, err, err_len: int) -> Library:
    """The library whose verified bytes are `data` (a buffer) with content digest `digest`:
    the mapping already made for that digest, or a new one from a sealed memfd."""
    with _lock:
        found = _mapped.get(digest)
        if found is not None:
            found.users += 1
            return found
        found = _idle.pop(digest, None)
        if found is not None:
            found.users = 1
            _mapped[digest] = found
            return found
        handle = ffi.new("void **")
        if lib.om2x_dlopen_from_memory(ffi.from_buffer(data), len(data), file_name.encode(), 0, handle, err,
                                       err_len) != 0:
            raise ArchiveError(f"{where}: {string(err)}")
        try:
            entry_points = _entry_points(handle[0], where, err, err_len)
        except BaseException:
            lib.om2x_dlclose(handle[0])
            raise
        found = _mapped[digest] = Library(digest, len(data), handle[0], entry_points)
        return found


def _entry_points(handle, where: str, err, err_len: int):
    entry_points = ffi.new("Om2xEntryPoints *")
    if lib.om2x_resolve_entry_points(handle, entry_points, err, err_len) != 0:
        raise AbiError(f"{where}: {string(err)}")
    abi = lib.om2x_abi_version(entry_points)
    if abi != MODEL_ABI_VERSION:
        raise AbiError(f"{where}: the model library reports ABI {abi}, expected {MODEL_ABI_VERSION}")
    return entry_points


def release(library: Library) -> None:
    """One model fewer uses `library`; after the last one it is kept idle or unmapped."""
    with _lock:
        library.users -= 1
        if library.users:
            return
        del _mapped[library.digest]
        if library.size < IDLE_MAX_BYTES:
            _idle[library.digest] = library
        else:
            lib.om2x_dlclose(library.handle)
        while len(_idle) > IDLE_KEPT:
            lib.om2x_dlclose(_idle.popitem(last=False)[1].handle)


def unmap_idle() -> int:
    """Unmaps every library no loaded model uses; returns how many there were."""
    with _lock:
        count = len(_idle)
        while _idle:
            lib.om2x_dlclose(_idle.popitem(last=False)[1].handle)
        return count


def mapped_count() -> tuple[int, int]:
    """(in use, idle) model libraries mapped."""
    with _lock:
        return len(_mapped), len(_idle)
