"""Handles: the ints pyACL hands out for aclDataBuffer, aclmdlDataset, aclmdlDesc and contexts.

pyACL returns C pointers as ints; om2gen.acl returns ints from one process-wide counter instead,
never reused, so a handle of the wrong kind, a destroyed one or a made-up number is recognised
and refused with an error code rather than dereferenced. Model ids are a separate numbering
(see _models.py), as in ACL, where they are not pointers.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

from . import constants as C
from ._errors import AclFail, integer

# far from small ints (model ids, sizes, indices) so that passing one for a handle is caught
_FIRST_HANDLE = 0xAC100000
_STEP = 0x10


@dataclass
class DataBuffer:
    """aclDataBuffer: an address and a size, both owned by the caller."""
    addr: int
    size: int


@dataclass
class Dataset:
    """aclmdlDataset: the data buffers in order, by handle (resolved when the dataset is used),
    and the tensor descriptions set on them (aclmdlSetDatasetTensorDesc), by buffer index."""
    buffers: list[int] = field(default_factory=list)
    descs: dict[int, "TensorDesc"] = field(default_factory=dict)


@dataclass(frozen=True)
class TensorDesc:
    """aclTensorDesc: a tensor's data type, dims and format."""
    data_type: int
    dims: tuple[int, ...]
    format: int


@dataclass
class ModelDesc:
    """aclmdlDesc: a copy of a loaded model's input/output descriptions, made by get_desc."""
    model_id: int = 0
    inputs: list = field(default_factory=list)     # TensorInfo
    outputs: list = field(default_factory=list)
    filled: bool = False
    gears: object = None    # runtime/gears.Gears of a model compiled with gears


@dataclass
class Context:
    device_id: int


_KIND_NAMES = {DataBuffer: "data buffer", Dataset: "dataset", ModelDesc: "model description", Context: "context",
               TensorDesc: "tensor description"}


class Registry:
    def __init__(self):
        self._lock = threading.Lock()
        self._objects: dict[int, object] = {}
        self._ids = itertools.count(_FIRST_HANDLE, _STEP)

    def add(self, obj) -> int:
        with self._lock:
            handle = next(self._ids)
            self._objects[handle] = obj
            return handle

    def get(self, handle, kind, name: str):
        """The live object of `kind` behind `handle`; AclFail(INVALID_PARAM) naming what is wrong."""
        h = integer(handle, name)
        with self._lock:
            obj = self._objects.get(h)
        if isinstance(obj, kind):
            return obj
        what = _KIND_NAMES[kind]
        if h == 0:
            raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"{name} is NULL (0); pass a {what} created by om2gen.acl")
        if obj is None:
            raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"{name} {h:#x} is not a live {what} "
                                                     f"(never created, or already destroyed)")
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"{name} {h:#x} is a {_KIND_NAMES[type(obj)]}, not a {what}")

    def remove(self, handle, kind, name: str):
        obj = self.get(handle, kind, name)
        h = integer(handle, name)
        with self._lock:
            if self._objects.get(h) is not obj:   # destroyed meanwhile by another thread
                raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"{name} {h:#x} was already destroyed")
            del self._objects[h]
        return obj


registry = Registry()
