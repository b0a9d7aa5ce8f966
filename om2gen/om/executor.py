"""Loads a classic OM file the way GE does, onto om2gen's CPU runtime.

GE's sequence (ModelHelper::LoadModel, DavinciModel::Init): read the file → check the header and
walk the partition table → parse MODEL_DEF → take the kernels out of TBE_KERNELS → parse TASK_INFO
→ place WEIGHTS_DATA in device memory → build each task's args → capture the tasks. The parsing
is om/reader.py; here the weights go to device memory (aclrtMalloc + aclrtMemcpy: OM partitions
are packed back to back, unaligned, so unlike an OM2 archive they cannot be used in place), the
task tables are built in memory (executor/tables.py), and om2gen's native module — the same
load-and-run code every OM2 model library carries — registers, captures and runs them.
"""
from __future__ import annotations

import mmap

from .. import integrity, so_in_om
from ..errors import ArchiveError, RuntimeFailure
from ..executor.native import ffi, lib, string
from ..executor.tables import Tables
from . import reader
from .container import read_om


class OmResources:
    """What a loaded OM keeps until its model is unloaded: the file mapping, the weights in
    device memory and the task tables."""

    def __init__(self):
        self.file = self.map = self.view = None
        self.weights = None
        self.tables = None

    def close(self) -> None:
        if self.weights is not None:
            lib.aclrtFree(self.weights)
            self.weights = None
        self.tables = None
        if self.view is not None:
            self.view.release()
            self.view = None
        if self.map is not None:
            try:
                self.map.close()
            except BufferError:
                pass   # a view of the file is still referenced; the mapping goes with it
        if self.file is not None:
            self.file.close()   # the mapping keeps its own reference to the file
        self.map = self.file = None


def _read(source, res: OmResources) -> memoryview:
    if isinstance(source, memoryview):
        res.view = source.cast("B").toreadonly()
        return res.view
    try:
        res.file = open(source, "rb")
        res.map = mmap.mmap(res.file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise ArchiveError(f"{source}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    res.view = memoryview(res.map)
    return res.view


def _target(om_model, where: str) -> None:
    """The OM's soc_version names the om2gen target it was built for; it must run here."""
    target = reader.target_of(om_model.model_def, where)
    from ..executor.model import check_target
    check_target(where, target.name, target.arch, target.isa_features)


def load_om(model, source, clock) -> None:
    """Fills `model` (executor.model.Model) from an OM file: path or bytes-like."""
    res = model._om = OmResources()
    where = model.path
    data = _read(source, res)
    clock("read the file")
    try:
        om = read_om(data, copy=False)
    except ArchiveError as e:
        raise ArchiveError(str(e).replace("OM data", where, 1)) from None
    clock("parse the partition table")
    parsed = reader.read(om, where, clock)
    so_in_om.check(so_in_om.from_model_def(parsed.model_def, where), where, model.allow_platform_mismatch)
    _target(parsed, where)
    program = parsed.program
    model.meta = {"name": program.name, "format": "om"}
    model._set_io([{"name": d.name, "dtype": d.dtype, "shape": list(d.shape)} for d in program.inputs],
                  [{"name": d.name, "dtype": d.dtype, "shape": list(d.shape)} for d in program.outputs])

    # SO_BINS before the model captures (the seed's order): each packed SO to its consumer;
    # custom-op libraries register into registries of their own (so_loader)
    so_in_om.check_flag(parsed.so_bins, parsed.model_def, where)
    integrity.check_so_bins(parsed.model_def, parsed.so_bins, where)
    model._sos = so_in_om.load_packed(parsed.so_bins, where)
    libraries = model._sos.custom_by_name
    for c, so_name in zip(program.custom_ops, parsed.custom_op_refs):
        if so_name not in libraries:
            raise ArchiveError(f"{where}: custom operator {c['op_type']} needs {so_name!r}, which SO_BINS does not hold")
        c["library"] = libraries[so_name]
    if parsed.so_bins:
        clock("load packed shared objects")

    # WEIGHTS_DATA → device memory
    size = max(len(parsed.weights), 64)
    dev = ffi.new("void **")
    if lib.aclrtMalloc(dev, size, lib.ACL_MEM_MALLOC_HUGE_FIRST) != 0:
        raise RuntimeFailure(f"{where}: aclrtMalloc of {size} bytes for the weights failed: "
                             f"{string(lib.aclGetRecentErrMsg())}")
    res.weights = dev[0]
    if len(parsed.weights) and lib.aclrtMemcpy(res.weights, size, ffi.from_buffer(parsed.weights),
                                               len(parsed.weights), lib.ACL_MEMCPY_HOST_TO_DEVICE) != 0:
        raise RuntimeFailure(f"{where}: copying the weights to device memory failed: "
                             f"{string(lib.aclGetRecentErrMsg())}")
    clock("place weights")

    res.tables = Tables(program)
    model._ep = ffi.new("Om2xEntryPoints *")
    lib.om2x_tables_entry_points(model._ep)
    bins = [(k.file_name, k.binary) for k in program.kernels]
    bins += list({c["bin_name"]: (c["bin_name"], c["blob"]) for c in program.custom_ops}.values())
    clock("build the model tables")
    tables = res.tables.ptr
    model._native_load(lambda cfg, out: lib.om2x_tables_model_load(tables, cfg, out), bins, res.weights, clock,
                       model._sos.custom_libraries)
