"""acl.util: between Python objects and addresses, as pyACL's acl.util.

    ptr = acl.util.bytes_to_ptr(data)                 # the address of a bytes/bytearray's buffer
    data = acl.util.ptr_to_bytes(ptr, size)           # a copy of size bytes at ptr
    ptr = acl.util.numpy_to_ptr(array)                # the address of an ndarray's data
    array = acl.util.ptr_to_numpy(ptr, shape, npy_type)   # an ndarray over memory at ptr (no copy)

Like pyACL these trust the caller: the object behind an address must stay alive while the
address is used, and an address read from must be readable.
"""
from __future__ import annotations

import warnings

import numpy as np

from ._errors import integer
from ._native import address, ffi

# NPY_TYPES numbers (acl.util.ptr_to_numpy's `type`) -> dtype, from numpy itself
_NPY = {np.dtype(t).num: np.dtype(t) for t in
        ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "longlong",
         "ulonglong", "float32", "float64", "float16")}


def bytes_to_ptr(data) -> int:
    """ptr = bytes_to_ptr(data): the address of the buffer of `data` (bytes or bytearray)."""
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"bytes_to_ptr takes bytes or bytearray, not {type(data).__name__}")
    if not data:
        return 0
    return address(ffi.from_buffer(data))


def ptr_to_bytes(ptr, size) -> bytes:
    """data = ptr_to_bytes(ptr, size): a copy of `size` bytes at address `ptr`."""
    p, n = integer(ptr, "ptr"), integer(size, "size")
    if n < 0:
        raise ValueError(f"size must be >= 0, got {n}")
    if n == 0:
        return b""
    if p == 0:
        raise ValueError("ptr is NULL (0)")
    return bytes(ffi.buffer(ffi.cast("const char *", p), n))


def numpy_to_ptr(data) -> int:
    """ptr = numpy_to_ptr(array): the address of the array's data (warns if not C-contiguous)."""
    if not isinstance(data, np.ndarray):
        raise TypeError(f"numpy_to_ptr takes a numpy.ndarray, not {type(data).__name__}")
    if not data.flags.c_contiguous:
        warnings.warn("The input ndarray is discontiguous. Please use acl.util.numpy_contiguous_to_ptr instead.",
                      stacklevel=2)
    return int(data.ctypes.data)


def numpy_contiguous_to_ptr(data) -> tuple[int, np.ndarray]:
    """ptr, data_out = numpy_contiguous_to_ptr(array): data_out is the array itself, or a
    C-contiguous copy of it; ptr addresses data_out, which must be kept alive."""
    if not isinstance(data, np.ndarray):
        raise TypeError(f"numpy_contiguous_to_ptr takes a numpy.ndarray, not {type(data).__name__}")
    out = np.ascontiguousarray(data)
    return int(out.ctypes.data), out


def ptr_to_numpy(ptr, shape, type) -> np.ndarray:  # noqa: A002 - pyACL's parameter name
    """array = ptr_to_numpy(ptr, shape, npy_type): a writable array over the memory at `ptr`."""
    p, kind = integer(ptr, "ptr"), integer(type, "type")
    dtype = _NPY.get(kind)
    if dtype is None:
        raise ValueError(f"type {kind} is not a supported NPY_TYPES number "
                         f"(supported: {', '.join(f'{k} {v}' for k, v in sorted(_NPY.items()))})")
    dims = tuple(integer(d, "shape") for d in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {list(dims)} has a negative dimension")
    count = int(np.prod(dims, dtype=np.int64))
    if count == 0:
        return np.empty(dims, dtype)
    if p == 0:
        raise ValueError("ptr is NULL (0)")
    buf = ffi.buffer(ffi.cast("char *", p), count * dtype.itemsize)
    return np.frombuffer(buf, dtype, count).reshape(dims)
