"""A model file's bytes as a loaded model sees them: a private, read-only copy.

Loading reads the file (or the caller's buffer) once into anonymous memory, write-protects it,
and from then on parses, verifies and runs only that copy. So what was verified is what runs,
and the model no longer depends on the file: another process that rewrites, truncates or
replaces it changes nothing in a loaded model (a shared mapping of the file would show its new
bytes, or raise SIGBUS past a truncation). The copy is what ONNX Runtime and every other engine
pay too; copies of 4 MiB and more ask for transparent huge pages, which makes a 100 MiB copy
about three times faster.
"""
from __future__ import annotations

import mmap
import os
import stat

from ..errors import ArchiveError

SMALL = 256 << 10        # below this size, the copy lives on the heap (its pages are warm)
_HUGE = 4 << 20          # from this size on, ask for transparent huge pages
_CHUNK = 64 << 20        # one read at a time: a short read is retried from where it stopped
ALIGNMENT = 64           # the copy starts at a multiple of this (the archive aligns entries to it)


def _native():
    """The native module (imported on first use: the archive package is imported by the
    compiler too, which needs no runtime)."""
    from .. import native
    return native


class Image:
    """The bytes of one model file, private to this process and read-only (`view`).

    A small file is copied into a heap buffer: fresh anonymous pages cost a page fault each
    (about 5 us apiece in a VM, 50 us for a 45 KB archive), reused heap pages none. A large one
    gets its own anonymous mapping, write-protected once filled."""

    def __init__(self, where: str, size: int):
        self.where = where
        self._size = size
        if size < SMALL:
            self._buf = bytearray(size + ALIGNMENT)
            ffi = _native().ffi
            self._start = -int(ffi.cast("uintptr_t", ffi.from_buffer(self._buf))) % ALIGNMENT
        else:
            self._buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            self._start = 0
            if size >= _HUGE and hasattr(mmap, "MADV_HUGEPAGE"):
                self._buf.madvise(mmap.MADV_HUGEPAGE)
        self.view = None

    def _target(self) -> memoryview:
        """Where the bytes go (writable, before _seal)."""
        return memoryview(self._buf)[self._start:self._start + self._size]

    def _seal(self) -> None:
        if isinstance(self._buf, mmap.mmap):
            ffi, lib = _native().ffi, _native().lib
            if lib.om2x_protect_read_only(ffi.from_buffer(self._buf), len(self._buf)) != 0:
                raise ArchiveError(f"{self.where}: cannot write-protect the model's copy ({os.strerror(ffi.errno)})")
        self.view = memoryview(self._buf).toreadonly()[self._start:self._start + self._size]

    def close(self) -> None:
        """Drops the copy once nothing views it (a loaded model's views keep it until they go)."""
        if self.view is not None:
            self.view.release()
            self.view = None
        if isinstance(self._buf, mmap.mmap):
            try:
                self._buf.close()
            except BufferError:
                pass   # a view handed out is still alive: the mapping goes with it
        self._buf = None


def read_path(path) -> Image:
    """The file at `path`, copied. Refuses a file that shrinks while it is read."""
    try:   # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot open ({exc.strerror})") from None
    except ValueError:
        raise ArchiveError(f"{path!r}: not a file name (it holds a NUL character)") from None
    image = None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ArchiveError(f"{path}: not a regular file; om2gen loads model files (or their bytes: "
                               "om2gen.load(data))")
        size = st.st_size
        image = Image(str(path), size)
        out = image._target()
        done = 0
        while done < size:
            n = os.preadv(fd, [out[done:done + min(size - done, _CHUNK)]], done)
            if n == 0:
                raise ArchiveError(f"{path}: the file shrank from {size} bytes while it was read; load it again "
                                   "once whatever is writing it has finished")
            done += n
        out.release()
        # a file still being written is caught by what is read next: the ZIP end record or the OM
        # header's length, and the digests
        image._seal()
        return image
    except OSError as exc:
        if image is not None:
            image.close()
        raise ArchiveError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except BaseException:
        if image is not None:
            image.close()
        raise
    finally:
        os.close(fd)


def read_buffer(data, where: str) -> Image:
    """The caller's bytes-like object, copied (the caller may change or free it afterwards)."""
    src = memoryview(data).cast("B")
    image = Image(where, len(src))
    try:
        out = image._target()
        out[:] = src
        out.release()
        image._seal()
    except BaseException:
        image.close()
        raise
    return image
