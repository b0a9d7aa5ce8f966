"""Loaded models by id, and what acl.mdl.execute checks before it hands addresses to the executor.

A model id is a uint32 counted from 1 and never reused in a process, so a stale id (unloaded
model) is told apart from a live one. The model itself is om2gen's executor Model
(om2gen.load), which reads either format, .om2 or classic .om, by content.
"""
from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass, field

from .. import load as om2gen_load
from . import constants as C
from ._errors import AclFail, check, integer
from ._handles import DataBuffer, Dataset, registry
from ._native import address, ffi, lib


@dataclass
class LoadedModel:
    """A model and the lock its runs take. The model library itself orders runs: a run (and the
    unload) first waits for the model's previous asynchronous run, whose replay reads the same
    argument table."""
    model: object                      # om2gen.runtime.model.Model
    lock: threading.Lock = field(default_factory=threading.Lock)
    gear: int | None = None            # a gear model's gear, as set_dynamic_* set it last

    def run(self, ins: list[int], outs: list[int]) -> None:
        with self.lock:
            self.model.execute_raw(ins, outs)

    def run_async(self, ins: list[int], outs: list[int], stream: int) -> None:
        with self.lock:
            self.model.execute_raw_async(ins, outs, stream)

    def close(self) -> None:
        with self.lock:
            self.model.close()


class ModelTable:
    def __init__(self):
        self._lock = threading.Lock()
        self._models: dict[int, LoadedModel] = {}
        self._ids = itertools.count(1)

    def add(self, loaded: LoadedModel) -> int:
        with self._lock:
            model_id = next(self._ids)
            self._models[model_id] = loaded
            return model_id

    def get(self, model_id) -> LoadedModel:
        mid = integer(model_id, "model_id")
        with self._lock:
            loaded = self._models.get(mid)
        if loaded is None:
            raise _not_loaded(mid)
        return loaded

    def remove(self, model_id) -> LoadedModel:
        mid = integer(model_id, "model_id")
        with self._lock:
            loaded = self._models.pop(mid, None)
        if loaded is None:
            raise _not_loaded(mid)
        return loaded


def _not_loaded(model_id: int) -> AclFail:
    # ACL passes GE's code through for an unknown model id (aclmdlExecute, aclmdlUnload, aclmdlGetDesc)
    return AclFail(C.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID, f"model id {model_id} is not a loaded model (never "
                                                          f"loaded, or already unloaded)")


models = ModelTable()


def load(source) -> int:
    """Loads `source` (a path or bytes) with om2gen.load; returns the new model id."""
    return models.add(LoadedModel(om2gen_load(source)))


def check_model_file(path) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"model_path must be a str, not {type(path).__name__}")
    path = os.fspath(path)
    if not path:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, "model_path is empty")
    if not os.path.isfile(path):   # GE's code for a path it cannot read, as ACL returns it
        what = "is a directory" if os.path.isdir(path) else "does not exist"
        raise AclFail(C.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID, f"model file {path!r} {what}")
    if not os.access(path, os.R_OK):
        raise AclFail(C.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID, f"model file {path!r} is not readable by this user")
    return path


def tensor_text(info) -> str:
    return f"{info.name!r} {info.dtype}{list(info.shape)}"


def dataset_addresses(handle, infos, role: str, allocate: bool = False) -> list[int]:
    """The buffer addresses of the dataset `handle` for the model tensors `infos` (`role` is
    "input" or "output"), checked: one buffer per tensor (ACL_ERROR_INVALID_PARAM otherwise, as
    ACL's own OM2 path returns), each large enough, each non-NULL - except that with `allocate`
    (outputs of a synchronous run) a NULL buffer gets device memory of the output's size, which
    the caller frees, as aclmdlExecute does."""
    name = f"{role} dataset"
    dataset = registry.get(handle, Dataset, name)
    if len(dataset.buffers) != len(infos):
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"the {name} holds {len(dataset.buffers)} data buffer(s), the "
                                                 f"model has {len(infos)} {role}(s): "
                                                 f"{', '.join(tensor_text(t) for t in infos)}")
    buffers = [registry.get(h, DataBuffer, f"data buffer {i} of the {name}") for i, h in enumerate(dataset.buffers)]
    for i, (buf, info) in enumerate(zip(buffers, infos)):
        need = info.nbytes
        if buf.addr == 0 and need and not allocate:
            raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"data buffer {i} of the {name} has a NULL address")
        if buf.addr and buf.size < need:
            mismatch = C.ACL_ERROR_MODEL_INPUT_NOT_MATCH if role == "input" else C.ACL_ERROR_MODEL_OUTPUT_NOT_MATCH
            raise AclFail(mismatch, f"{role} {i} ({tensor_text(info)}) needs {need} bytes, its data buffer "
                                    f"holds {buf.size}; size buffers with acl.mdl.get_{role}_size_by_index")
    for buf, info in zip(buffers, infos):
        if buf.addr == 0 and info.nbytes:
            out = ffi.new("void **")
            check(lib.aclrtMalloc(out, info.nbytes, C.ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc")
            buf.addr, buf.size = address(out[0]), info.nbytes
    return [buf.addr for buf in buffers]
