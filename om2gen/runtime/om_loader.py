"""Loads a classic OM file the way GE does, onto om2gen's CPU runtime.

GE's sequence (ModelHelper::LoadModel, DavinciModel::Init): read the file → check the header and
walk the partition table → parse MODEL_DEF → take the kernels out of TBE_KERNELS → parse TASK_INFO
→ place WEIGHTS_DATA in device memory → build each task's args → capture the tasks. The parsing
is formats/om/reader.py; here the weights go to device memory (aclrtMalloc + aclrtMemcpy: OM partitions
are packed back to back, unaligned, so unlike an OM2 archive they cannot be used in place), the
task tables are built in memory (runtime/tables.py), and om2gen's native module — the same
load-and-run code every OM2 model library carries — registers, captures and runs them.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..errors import ArchiveError, RuntimeFailure
from ..formats.om import dynamic_shapes, integrity, reader, signature
from ..formats.om.container import read_om
from ..native import ffi, lib, string
from ..so_in_om import info, loading
from . import gears
from . import isa as isa_mod
from . import rt2
from .tables import Tables


@dataclass
class LoadedOm:
    """An OM file read and placed, ready for GertModelLoad: what the Model takes over. close()
    releases, after the model is unloaded, the weights in device memory, the task tables, the
    packed shared objects and the file's private copy (formats/image.py)."""
    name: str
    inputs: list[dict]             # {"name", "dtype", "shape"}, as model_meta.json describes them
    outputs: list[dict]
    gears: object                  # runtime/gears.Gears of a gear model (MODEL_DEF's Case), else None
    signed_by: str | None          # the key id of the trusted signature a signed load checked
    bins: list[tuple]              # (file name, bytes, sha256) of the kernels, then the custom-op blobs
    entry_points: object           # Om2xEntryPoints * of the table-driven load-and-run code
    image: object = None
    weights: object = None         # device memory (aclrtMalloc)
    tables: Tables | None = None
    sos: object = None             # so_in_om.loading.PackedSos
    custom_libraries: tuple = ()
    # a dynamic-shape OM (the RT2 path, runtime/rt2.py): its runner and what runs are checked by
    rt2: object = None
    dynamic: object = None
    isa: str = ""                  # the target (kernel set) it was built for

    def load(self, config, handle) -> int:
        """GertModelLoad of the table-driven model."""
        return lib.om2x_tables_model_load(self.tables.ptr, config, handle)

    def close(self) -> None:
        if self.rt2 is not None:   # before the weights and the kernels it runs
            self.rt2.close()
            self.rt2 = None
        if self.weights is not None:
            lib.aclrtFree(self.weights)
            self.weights = None
        self.tables = None
        if self.sos is not None:   # after the unload: its instances used the packed SOs
            self.sos.close()
            self.sos = None
        if self.image is not None:
            self.image.close()
            self.image = None


def _target(om_model, where: str, isa: str | None = None) -> str:
    """The OM's soc_version names the om2gen target it was built for, its one kernel set (GE's
    TBE_KERNELS): it must run here, and be the set forced (isa=, $OM2GEN_ISA) if one is."""
    t = reader.target_of(om_model.model_def, where)
    isa_mod.choose([{"name": t.name, "arch": t.arch, "isa_features": list(t.isa_features)}], where, isa)
    return t.name


def read(image, where: str, clock, trusted_keys=None, allow_platform_mismatch: bool = False,
         isa: str | None = None) -> LoadedOm:
    """An OM file's private copy (formats/image.py, which this takes over), checked, parsed and
    placed. trusted_keys: as for an OM2 archive (formats/om2/signing.py). On an error, everything
    made so far is released."""
    om_model = LoadedOm("", [], [], None, None, [], ffi.new("Om2xEntryPoints *"), image=image)
    try:
        _read(om_model, where, clock, trusted_keys, allow_platform_mismatch, isa)
    except BaseException:
        om_model.close()
        raise
    return om_model


def _read(res: LoadedOm, where: str, clock, trusted_keys, allow_platform_mismatch: bool, isa) -> None:
    try:
        om = read_om(res.image.view, copy=False)
    except ArchiveError as e:
        raise ArchiveError(str(e).replace("OM data", where, 1)) from None
    clock("parse the partition table")
    if trusted_keys is not None:   # before MODEL_DEF is parsed, anything is placed or any code mapped
        res.signed_by = signature.check(om, trusted_keys, where)
        clock("check the signature")
    parsed = reader.read(om, where, clock)
    info.check(info.from_model_def(parsed.model_def, where), where, allow_platform_mismatch)
    res.isa = _target(parsed, where, isa)
    program = parsed.program
    res.name = program.name
    res.inputs = [{"name": d.name, "dtype": d.dtype, "shape": list(d.shape)} for d in program.inputs]
    res.outputs = [{"name": d.name, "dtype": d.dtype, "shape": list(d.shape)} for d in program.outputs]
    if program.gears is not None:
        res.gears = gears.from_table(program.gears, [d.name for d in program.inputs], where)

    # SO_BINS before the model captures (the seed's order): each packed SO to its consumer;
    # custom-op libraries register into registries of their own (so_in_om/loading.py)
    info.check_flag(parsed.so_bins, parsed.model_def, where)
    integrity.check_so_bins(parsed.model_def, parsed.so_bins, where)
    res.sos = loading.load_packed(parsed.so_bins, where)
    libraries = res.sos.custom_by_name
    for c, so_name in zip(program.custom_ops, parsed.custom_op_refs):
        if so_name not in libraries:
            raise ArchiveError(f"{where}: custom operator {c.op_type} needs {so_name!r}, which SO_BINS does not hold")
    res.custom_libraries = tuple(res.sos.custom_libraries)
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

    # the RT2 path: dims -1, or static inputs and outputs over sizes inside that the run decides
    # (a run-time Slice in a Loop, say), which its host op library (kSpaceRegistry) says
    if res.sos.op_host or any(-1 in d.shape for d in (*program.inputs, *program.outputs)):
        _rt2(res, program, *dynamic_shapes.ranges(parsed.model_def.graph[0]), where)
        clock("load the model the RT2 way")
        return
    res.tables = Tables(program)
    lib.om2x_tables_entry_points(res.entry_points)
    res.bins = [(k.file_name, k.binary, hashlib.sha256(k.binary).hexdigest()) for k in program.kernels]
    res.bins += list({c.bin_name: (c.bin_name, c.blob, hashlib.sha256(c.blob).hexdigest())
                      for c in program.custom_ops}.values())
    clock("build the model tables")


def _rt2(res: LoadedOm, program, ranges: dict, out_ranges: dict, where: str) -> None:
    """A dynamic-shape OM: its host op library (kSpaceRegistry) from SO_BINS, checked against
    TASK_INFO, drives the native RT2 executor (runtime/rt2.py)."""
    if len(res.sos.op_host) != 1:
        raise ArchiveError(f"{where}: a dynamic-shape OM (dims -1) needs its host op library (an om2gen "
                           f"kSpaceRegistry library exporting Om2OpHostGetTable) in SO_BINS; it packs "
                           f"{len(res.sos.op_host)}: recompile the model")
    table = rt2.host_table(res.sos.op_host[0], where)
    if table.input_num != len(program.inputs) or table.output_num != len(program.outputs):
        raise ArchiveError(f"{where}: its host op library has {table.input_num} inputs and {table.output_num} outputs, "
                           f"MODEL_DEF {len(program.inputs)} and {len(program.outputs)}; the OM is inconsistent")
    rt2.check_tasks(table, program, where)
    res.dynamic = rt2.dynamic_of(table, res.inputs)
    for ios, known in ((res.inputs, ranges), (res.outputs, out_ranges)):
        for io, most in zip(ios, rt2.max_shapes(known, ios)):
            io["max_shape"] = most
    res.rt2 = rt2.Rt2Runner(table, program, res.weights, where)
