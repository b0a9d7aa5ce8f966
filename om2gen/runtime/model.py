"""om2gen.load: open an .om2 archive or a classic .om file and run it through the model C ABI.

The format is decided by content (an OM2 archive is a ZIP, an OM file starts with "IMOD").

Either way the file is first read into a private, read-only copy (formats/image.py): what is
verified is what runs, and a loaded model no longer depends on the file.

OM2 (the seed's sequence): check manifest/ABI/ISA and the digest of every entry the load uses
(model_meta.json, code and constants), dlopen the model library from a sealed memfd, resolve
GertModel*, hand it the kernel binaries and the constants in place in the copy, and call
GertModelLoad, which captures the task list.

Classic OM (GE's sequence, runtime/om_loader.py): read the file, walk the partition table, parse
MODEL_DEF and TASK_INFO, take the kernels out of TBE_KERNELS, place WEIGHTS_DATA in device
memory and build the task tables; om2gen's native module then runs the same load-and-run code
every OM2 model library carries, driven by those tables.

Either way each run is one native call (GertModelRun): inputs and outputs are passed by
address, nothing is copied. `load_phases` lists how long each loading stage took.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib
import math
import os
import threading
import time
from dataclasses import dataclass

import numpy as np

from .. import advice
from ..errors import AbiError, ArchiveError, InputError, ModelClosedError, RuntimeFailure
from ..formats import OM2_MAGIC, OM_MAGIC
from ..formats import image as image_mod
from ..formats.om2 import integrity, layout, schema, signing
from ..formats.om2.reader import Archive
from ..ir import dtypes
from ..native import ffi, lib, recent_runtime_error, string
from ..so_in_om import custom_libraries as custom_ops
from ..so_in_om import info as so_in_om
from ..version import KERNEL_ABI_VERSION, MODEL_ABI_VERSION
from . import dynamic as dynamic_mod
from . import gears as gears_mod
from . import isa as isa_mod
from . import libraries as model_libraries

_ERR_LEN = 1024
# every load validates model_meta.json with the schemas' generated code (formats/om2/schema.py
# imports it on first use): imported with the executor, not inside the first load
importlib.import_module("om2gen.formats.om2._schema_code")


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]                  # -1 where a gear or the run decides (dynamic dims)
    max_shape: tuple[int, ...] | None = None   # a dynamic tensor's largest shape (gear, or range)

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor; of its largest gear for a dynamic one (what a buffer must hold); 0
        for one with an unbounded dim (a classic .om's -1: each run's shapes decide)."""
        return math.prod(max(d, 0) for d in (self.max_shape or self.shape)) * self.dtype.itemsize

    def describe(self) -> str:
        """"x float32[1, 3, 224, 224]"; a dynamic one's largest shape after it."""
        largest = f" (at most {list(self.max_shape)})" if self.max_shape is not None else ""
        return f"{self.name} {self.dtype}{list(self.shape)}{largest}"

    @property
    def acl_dtype(self) -> int:
        """The aclDataType code of dtype."""
        return _ACL_DTYPE[self.dtype]


@dataclass(frozen=True)
class _Run:
    """The native side of one run shape (a static model has one, a gear model one per gear)."""
    in_t: object       # GertTensor[] of io_inputs
    out_t: object      # GertTensor[] of the outputs
    cfg: object        # GertModelRunConfig *
    in_spec: list      # (name, dtype, shape, GertTensor, TensorInfo) per fed input
    out_spec: list     # (name, dtype, shape, GertTensor) per output
    call: tuple        # om2x_model_run's arguments
    # (GertTensor, buffer) of inputs run() does not feed but points at the model's own data before
    # each run: a gear model's ascend_mbatch_shape_data (execute_raw points it at the caller's)
    own: tuple = ()


def _tensor_infos(described) -> list[TensorInfo]:
    """A dynamic model's tensors show -1 where the run decides, with their largest shape."""
    return [TensorInfo(d["name"], np.dtype(d["dtype"]), tuple(map(int, d["shape"])), dynamic_mod.max_shape(d))
            for d in described]


_ACL_DTYPE = {np.dtype(name): dt.acl for name, dt in dtypes.BY_NAME.items()}
_GERT_TENSOR_SIZE = ffi.sizeof("GertTensor")
_RUN_CONFIG_SIZE = ffi.sizeof("GertModelRunConfig")


def _gert_tensors(infos: list[TensorInfo]):
    """GertTensor[] describing `infos` (data pointers set per run), GertTensor *[] pointing at
    them, and the int64_t[] their dims point into."""
    n = max(len(infos), 1)
    dims = ffi.new("int64_t[]", [d for t in infos for d in t.shape] or [0])
    described, at = [], 0
    for t in infos:
        described.append((_GERT_TENSOR_SIZE, ffi.NULL, t.nbytes, t.acl_dtype, len(t.shape), dims + at))
        at += len(t.shape)
    arr = ffi.new("GertTensor[]", described or n)
    ptrs = ffi.new("GertTensor *[]", [arr + i for i in range(len(infos))] or n)
    return arr, ptrs, dims


def format_of(head: bytes, where: str) -> str:
    """"om2" or "om", from a model file's first four bytes."""
    if head == OM2_MAGIC:
        return "om2"
    if head == OM_MAGIC:
        return "om"
    raise ArchiveError(f"{where}: neither an OM2 archive (starts with 504b0304) nor a classic OM file (starts with "
                       f"494d4f44, 'IMOD'); it starts with {head.hex() or 'nothing'}. Compile a model with "
                       "`om2gen compile`")


def detect_format(source) -> str:
    """"om2" or "om", from the first bytes of a path or a bytes-like object."""
    if not isinstance(source, (str, os.PathLike)):
        return format_of(bytes(memoryview(source).cast("B")[:4]), "the model data")
    try:
        fd = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
        try:
            head = os.pread(fd, 4, 0)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ArchiveError(f"{source}: cannot open ({exc.strerror})") from None
    return format_of(head, str(source))


_SCRATCH = threading.local()


def _scratch():
    """Per-thread buffers that every load needs and none keeps: the runtime's stage marks and an
    error text (allocated once per thread, not per load)."""
    s = _SCRATCH.__dict__
    if not s:
        s["marks"] = ffi.new("Om2rtProfMark[]", lib.OM2RT_MAX_PROF_MARKS)
        s["err"] = ffi.new("char[]", _ERR_LEN)
    return _SCRATCH


class _PhaseClock:
    """Load stages and their durations, in order (om2gen bench --phases). Times are taken while
    loading; the runtime's stage marks are decoded only when `phases` is read."""

    def __init__(self):
        self._stages: list = []   # (name, ns) or (raw Om2rtProfMark bytes, count, ns before them)
        self._last = time.monotonic_ns()

    def __call__(self, name: str) -> None:
        now = time.monotonic_ns()
        self._stages.append((name, now - self._last))
        self._last = now

    def native(self, call):
        """Runs call() (GertModelLoad) and splits its time by the stage marks it records."""
        marks = _scratch().marks
        lib.om2rtTakeProfMarks(marks, lib.OM2RT_MAX_PROF_MARKS)   # drop stale marks of this thread
        self._last = start = time.monotonic_ns()
        result = call()
        n = lib.om2rtTakeProfMarks(marks, lib.OM2RT_MAX_PROF_MARKS)
        if n:
            self._stages.append((ffi.buffer(marks, n * ffi.sizeof("Om2rtProfMark"))[:], n, start))
            self._last = marks[n - 1].time_ns
        self("hand back the model")
        return result

    @property
    def phases(self) -> list[tuple[str, float]]:
        out = []
        for stage in self._stages:
            if len(stage) == 2:
                out.append((stage[0], stage[1] / 1e9))
                continue
            raw, n, last = stage
            marks = ffi.from_buffer("Om2rtProfMark[]", raw)
            for i in range(n):
                name = ffi.string(marks[i].msg).decode("utf-8", "replace").removeprefix("GertModelLoad: ")
                out.append((name, max(marks[i].time_ns - last, 0) / 1e9))
                last = marks[i].time_ns
        return out


class Model:
    """A loaded model (OM2 archive or classic OM). Use as a context manager, or call close()."""

    def __init__(self, source, threads: int | None = None, *, allow_platform_mismatch: bool = False,
                 trusted_keys=None, pad_to_gear: bool = False, isa: str | None = None):
        in_memory = not isinstance(source, (str, os.PathLike))
        if in_memory:
            try:
                source = memoryview(source).cast("B")
            except TypeError:
                raise InputError(f"om2gen.load takes a file path or the model's bytes (a bytes-like object), "
                                 f"not {type(source).__name__}") from None
        self.path = "<model in memory>" if in_memory else str(source)
        self._meta = {}
        # one lock orders run(), execute_raw() and close(): a run never sees a half-closed model,
        # and two closes at once unload once
        self._run_lock = threading.Lock()
        self._archive = None
        self._om = None
        self._sos = None   # so_loader.PackedSos: the model's packed shared objects
        self._handle = None
        self._library = None   # libraries.Library: the mapped model library (OM2)
        self._keep = []
        self.allow_platform_mismatch = allow_platform_mismatch
        self._gears = None   # runtime/gears.Gears of a model compiled with gears, else None
        self._dynamic = None   # runtime/dynamic.Dynamic of a dynamic-shape model, else None
        self._rt2 = None       # runtime/rt2.Rt2Runner of a dynamic-shape classic OM, else None
        self._pad_to_gear = bool(pad_to_gear)
        self.signed_by = None   # the key id of the trusted signature a signed load checked
        self._isa = isa         # the kernel set asked for (runtime/isa.py); None: the best this CPU runs
        self.isa = None         # the kernel set (target name) that runs: one of kernel_sets
        self.kernel_sets = []   # the targets the model carries kernels for
        clock = _PhaseClock()
        image = None
        try:
            keys = signing.trusted_keys(trusted_keys)
            image = image_mod.read_buffer(source, self.path) if in_memory else image_mod.read_path(source)
            self.format = format_of(bytes(image.view[:4]), self.path)
            clock("read the file")
            self.threads = _check_threads(threads)
            # the model is captured with its own thread count and replays with it, whatever
            # models loaded later ask for (om2rtSetIssueThreadCount)
            previous = lib.om2rtGetIssueThreadCount()
            if lib.om2rtSetIssueThreadCount(self.threads or 0) != 0:
                raise InputError(f"threads={threads}: {recent_runtime_error()}")
            try:
                given, image = image, None   # the loader owns the copy from here on
                if self.format == "om2":
                    self._load_om2(source, clock, given, keys)
                else:
                    self._load_om(given, clock, keys)
            finally:
                lib.om2rtSetIssueThreadCount(previous)
            self._prepare_run()
        except BaseException:
            if image is not None:
                image.close()
            self._close_locked()
            raise
        self._clock = clock

    @property
    def load_phases(self) -> list[tuple[str, float]]:
        """The loading stages and how long each took (seconds), in order."""
        return self._clock.phases

    @property
    def meta(self) -> dict:
        """The model's description (model_meta.json of an OM2 archive); a copy: changing it
        changes nothing."""
        return copy.deepcopy(self._meta)

    def _set_io(self, inputs, outputs):
        self.io_inputs, self.outputs = _tensor_infos(inputs), _tensor_infos(outputs)
        self._index_inputs()

    def _index_inputs(self):
        """`inputs`: what run() is fed. A gear model's io_inputs end with ascend_mbatch_shape_data,
        which run() fills itself; its dynamic inputs show -1 where a gear decides."""
        if self._gears is None:
            self.inputs = self.io_inputs
        else:
            if self._pad_to_gear and self._gears.dynamic_type != gears_mod.DYNAMIC_BATCH:
                raise InputError(f"{self.path}: pad_to_gear=True needs a model with gears of the batch "
                                 f"(dynamic_batch_size); this one has {gears_mod.TYPE_NAMES[self._gears.dynamic_type]} "
                                 "gears, which padding would change the results of")
            self.inputs = [TensorInfo(t.name, t.dtype, self._gears.origin_dims[t.name], t.shape)
                           if -1 in self._gears.origin_dims[t.name] else t for t in self.io_inputs[:-1]]
        self._input_index = {t.name: i for i, t in enumerate(self.inputs)}
        self._input_names = self._input_index.keys()

    @property
    def gears(self) -> list[dict[str, tuple[int, ...]]]:
        """The shapes the model was compiled for, one {input: shape} per gear ([] for a static model)."""
        g = self._gears
        return [] if g is None else [dict(s) for s in g.input_shapes]

    # ---- loading an OM2 archive ----
    def _load_om2(self, source, clock, image, trusted_keys=None):
        a = self._archive = Archive(source, image=image)
        clock("open the archive")
        if trusted_keys is not None:   # before any of its code is mapped
            self.signed_by = signing.check(a, trusted_keys)
            clock("check the signature")
        # the checks below depend on the bytes alone (and on allow_platform_mismatch): a small
        # archive loaded before in this process has passed them (formats/om2/reader.py, Archive.memo)
        memo = a.memo if a.memo is not None else {}
        sets = isa_mod.sets_of(a.manifest, self.path)
        index = isa_mod.choose(sets, self.path, self._isa)   # the kernel set this CPU runs best, or the forced one
        self.kernel_sets, self.isa = [s["name"] for s in sets], sets[index]["name"]
        key = ("checked", self.allow_platform_mismatch, index)
        checked = memo.get(key)
        first = checked is None
        if first:
            meta = _check_manifest(a, self.path, self.allow_platform_mismatch, index)
            checked = (meta, _tensor_infos(meta["inputs"]), _tensor_infos(meta["outputs"]),
                       gears_mod.from_meta(meta, self.path), dynamic_mod.from_meta(meta, self.path),
                       _constants_blob(a, meta, index))
        meta, self.io_inputs, self.outputs, self._gears, self._dynamic, blob_name = checked
        self._meta = meta   # shared with other loads of the same bytes: read, never changed
        self._index_inputs()

        # every entry the load uses is checked against its digest, in the private copy
        custom = meta.get("custom_ops") or {}
        custom_bins = list(custom.get("binaries", []))
        kernels = list(meta["kernels"]) + custom_bins  # custom-op .bin files follow the kernels
        so = a.verify(meta["library"])
        bins = [(k.rsplit("/", 1)[1], a.verify(k), a.entries[k]["sha256"]) for k in kernels]
        for name in custom.get("shared_libs", []):
            a.verify(name)
        blob = a.verify(blob_name)
        if first:
            _check_constants(a, meta, len(blob))
        clock("check digests")

        # packed shared objects first (the seed's order), each handed to its consumer; custom-op
        # libraries register into registries of their own, resident for the process (so_loader)
        packed = so_in_om.bins_from_archive(a, meta)
        libraries = ()
        if packed:
            from ..so_in_om import loading as so_loading  # pyelftools: only for a model that packs SOs
            self._sos = so_loading.load_packed(packed, self.path)
            libraries = self._sos.custom_libraries
            clock("load packed shared objects")
        if self._dynamic is not None and self._dynamic.tiling_library:   # its PREPROCESS_KERNEL tasks run it
            bins.append(_tiling_library(packed, self._dynamic.tiling_library, self.path))

        # the model library: mapped from a sealed memfd, once per content (runtime/libraries.py)
        self._library = model_libraries.acquire(a.content_id(meta["library"]), so, meta["library"].rsplit("/", 1)[1],
                                                self.path, _scratch().err, _ERR_LEN)
        self._ep = self._library.entry_points
        if first:
            _check_io_against_library(self.path, meta, ffi.cast("const Om2ModelTables *",
                                                                lib.om2x_model_tables(self._library.handle)))
        clock("load the model library")

        # kernel binaries and constants: pointers into the copy
        blob_buf = ffi.from_buffer(blob) if len(blob) else ffi.new("char[]", 64)
        self._keep.append(blob_buf)   # the constants must outlive the model
        self._native_load(lambda cfg, out: lib.om2x_model_load(self._ep, cfg, out), bins, blob_buf, clock, libraries)
        memo[key] = checked

    # ---- loading a classic OM file (runtime/om_loader.py reads and places it) ----
    def _load_om(self, image, clock, trusted_keys=None):
        from . import om_loader  # the OM reader and its protobuf code: only for a classic .om
        om = self._om = om_loader.read(image, self.path, clock, trusted_keys, self.allow_platform_mismatch, self._isa)
        self.signed_by = om.signed_by
        self.isa, self.kernel_sets = om.isa, [om.isa]
        self._meta = {"name": om.name, "format": "om"}
        self._gears = om.gears   # a gear model: run, gears, pad_to_gear and ACL as for an OM2 archive
        self._set_io(om.inputs, om.outputs)
        self._ep = om.entry_points
        self._sos, om.sos = om.sos, None   # the model's packed shared objects, as for an OM2 archive
        if om.rt2 is not None:   # a dynamic-shape OM: run the RT2 way (runtime/rt2.py), nothing captured
            self._rt2, self._dynamic = om.rt2, om.dynamic
            self.io_inputs, self.outputs = ([TensorInfo(d["name"], np.dtype(d["dtype"]), tuple(d["shape"]),
                                                        d["max_shape"]) for d in ios] for ios in (om.inputs, om.outputs))
            self._index_inputs()
            return
        self._native_load(om.load, om.bins, om.weights, clock, om.custom_libraries)

    # ---- the native half, common to both formats ----
    def _native_load(self, load, bins, constants_ptr, clock, custom_libraries=()):
        """GertModelLoad with the kernel binaries [(file name, buffer, content digest)] and one
        constants blob; the custom operators it creates come from `custom_libraries` only (the
        model's own). The digests key the process-wide bin-handle store (Om2xInstance)."""
        n = max(len(bins), 1)
        names = [ffi.new("char[]", name.encode()) for name, _, _ in bins]
        digests = [ffi.new("char[]", digest.encode()) for _, _, digest in bins]
        views = [ffi.from_buffer(data) for _, data, _ in bins]
        bin_files = ffi.new("const char *[]", names or [ffi.NULL])
        bin_digests = ffi.new("const char *[]", digests or [ffi.NULL])
        bin_data = ffi.new("const void *[]", n)
        bin_size = ffi.new("uint64_t[]", n)
        for i, v in enumerate(views):
            bin_data[i], bin_size[i] = v, len(v)
        constants = ffi.new("void *[]", [constants_ptr])

        self._callbacks = ffi.new("GertModelLoadCallbacks *")
        lib.om2x_fill_load_callbacks(self._callbacks)
        self._instance = ffi.new("Om2xInstance *")
        self._instance.bin_files, self._instance.bin_digests, self._instance.bin_num = bin_files, bin_digests, len(bins)
        self._keep += [names, digests, bin_files, bin_digests]   # the store reads them until the unload
        cfg = ffi.new("GertModelLoadConfig *")
        cfg.struct_size = ffi.sizeof("GertModelLoadConfig")
        cfg.bin_files, cfg.bin_data, cfg.bin_size, cfg.bin_num = bin_files, bin_data, bin_size, len(bins)
        cfg.constants, cfg.constant_num = constants, 1
        cfg.instance_handle = self._instance
        cfg.callbacks = self._callbacks
        model = ffi.new("GertModelHandle *")
        with custom_ops.scope(list(custom_libraries)):
            rc = clock.native(lambda: load(cfg, model))
        if rc != 0:
            raise RuntimeFailure(f"{self.path}: GertModelLoad failed ({rc}): {string(lib.om2x_last_error(self._ep))}")
        self._handle = model[0]
        self._keep.append(constants)
        for v in views:   # kernel bytes were copied by the runtime
            ffi.release(v)

    def _prepare_run(self):
        """What a run touches, prepared once (per gear for a gear model): the GertTensors, the run
        config and, per tensor, (name, dtype, shape, GertTensor[, TensorInfo])."""
        if self._rt2 is not None:   # prepared per run, natively
            self._runs = []
            return
        if self._dynamic is not None:   # where the model reports each run's output dims
            rows = [ffi.new("int64_t[]", max(1, len(t.shape))) for t in self.outputs]
            self._out_dims = ffi.new("int64_t *[]", rows or [ffi.NULL])
            self._keep += [rows, self._out_dims]
        if self._gears is None:
            self._runs = [self._prepare_shapes(self.io_inputs, self.outputs)]
        else:
            g = self._gears
            self._runs = []
            for i, data in enumerate(gears_mod.shape_data(g)):
                ins = [TensorInfo(t.name, t.dtype, g.input_shapes[i].get(t.name, t.shape)) for t in self.io_inputs]
                outs = [TensorInfo(t.name, t.dtype, s) for t, s in zip(self.outputs, g.output_shapes[i])]
                run = self._prepare_shapes(ins, outs)
                own = (run.in_t[len(ins) - 1], ffi.from_buffer(data))   # ascend_mbatch_shape_data: this gear's
                self._keep.append(data)
                self._runs.append(dataclasses.replace(run, own=(own,)))

    def _prepare_shapes(self, ins: list[TensorInfo], outs: list[TensorInfo]) -> "_Run":
        in_t, in_ptrs, in_dims = _gert_tensors(ins)
        out_t, out_ptrs, out_dims = _gert_tensors(outs)
        cfg = ffi.new("GertModelRunConfig *", {
            "struct_size": _RUN_CONFIG_SIZE, "input_count": len(ins), "input_data": in_ptrs,
            "output_count": len(outs), "output_data": out_ptrs})
        self._keep += [in_ptrs, out_ptrs, in_dims, out_dims]
        fed = self.inputs if self._gears is None else ins[:-1]   # run() feeds all but the shape data
        return _Run(in_t, out_t, cfg, [(t.name, t.dtype, t.shape, in_t[i], t) for i, t in enumerate(fed)],
                    [(t.name, t.dtype, t.shape, out_t[i]) for i, t in enumerate(outs)],
                    (self._ep, self._handle, cfg))

    # ---- running ----
    def run(self, feeds: dict) -> dict[str, np.ndarray]:
        """Runs the model once; returns {output name: array}.

        The common case (a dict with exactly the model's inputs, C-contiguous arrays of the right
        dtype and shape) takes a fast path: per input one pointer, per output one np.empty."""
        if type(feeds) is not dict or feeds.keys() != self._input_names:
            self._check_feed_names(feeds)
        if self._gears is not None:
            return self._run_gear(feeds)
        if self._rt2 is not None:
            return self._run_rt2(feeds)
        if self._dynamic is not None:
            return self._run_dynamic(feeds)
        with self._run_lock:
            return self._run_locked(feeds, self._runs[0])

    def _run_dynamic(self, feeds: dict) -> dict[str, np.ndarray]:
        """A dynamic model: the fed shapes go with the inputs; each output comes back at the dims
        the model reports for this run (runtime/dynamic.py)."""
        arrays = self._dynamic_feeds(feeds)
        with self._run_lock:
            if self._handle is None:
                raise ModelClosedError(f"{self.path}: the model is closed; load it again to run it")
            run = self._runs[0]
            keep, flat = [], []
            for (name, dtype, shape, tensor, info), arr in zip(run.in_spec, arrays):
                dims = arr.shape    # (ascontiguousarray makes a scalar [1], one dim more than its GertTensor holds)
                arr = np.ascontiguousarray(arr)
                buf = ffi.from_buffer(arr)
                keep.append(buf)
                tensor.data, tensor.size = buf, arr.nbytes
                for k, d in enumerate(dims):
                    tensor.dims[k] = d
            for (name, dtype, shape, tensor), t in zip(run.out_spec, self.outputs):
                out = np.empty(dynamic_mod.elements(t.max_shape or t.shape), dtype)
                buf = ffi.from_buffer(out)
                keep.append(buf)
                tensor.data, tensor.size = buf, out.nbytes
                flat.append(out)
            rc = lib.om2x_model_run_dims(*run.call, self._out_dims, len(self.outputs))
            if rc != 0:   # (the shapes were checked: what the model refuses then is an assumption of its guard)
                error = InputError if rc == lib.ACL_ERROR_INVALID_PARAM else RuntimeFailure
                raise error(f"{self.path}: GertModelRun failed ({rc}): {string(lib.om2x_last_error(self._ep))}")
            results = {}
            for j, (t, out) in enumerate(zip(self.outputs, flat)):
                dims = tuple(self._out_dims[j][k] for k in range(len(t.shape)))
                results[t.name] = out[:dynamic_mod.elements(dims)].reshape(dims)
            return results

    def _dynamic_feeds(self, feeds: dict) -> list[np.ndarray]:
        """A dynamic model's inputs as arrays, in order, each of the model's dtype, their shapes
        checked against the ranges (runtime/dynamic.py)."""
        arrays = [feeds[t.name] for t in self.inputs]
        arrays = [a if type(a) is np.ndarray else np.asarray(a) for a in arrays]
        for t, a in zip(self.inputs, arrays):
            if a.dtype != t.dtype:
                raise InputError(f"input {t.name!r} is {a.dtype}, the model expects {t.dtype}; convert it with "
                                 f".astype(np.{t.dtype})")
        self._dynamic.check(self.inputs, [a.shape for a in arrays])
        return arrays

    def _run_rt2(self, feeds: dict) -> dict[str, np.ndarray]:
        """A dynamic-shape OM (runtime/rt2.py): the fed shapes checked, InferShape, Tiling and the
        arena plan natively, the outputs allocated at their inferred shapes, the kernels launched."""
        arrays = [np.ascontiguousarray(a) for a in self._dynamic_feeds(feeds)]
        with self._run_lock:
            outs = self._rt2_run_locked([ffi.from_buffer(a) for a in arrays], [a.shape for a in arrays])
        return {t.name: out for t, out in zip(self.outputs, outs)}

    def _rt2_run_locked(self, inputs, shapes, outputs_for=None) -> list:
        """prepare, then execute over the buffers outputs_for(each output's (dims, bytes)) gives as
        (addresses, their bytes), or over new arrays at the inferred shapes (returned); the
        model's thread count for the launches. Returns the arrays, or the outputs' dims."""
        if self._rt2 is None:
            raise ModelClosedError(f"{self.path}: the model is closed; load it again to run it")
        prepared = self._rt2.prepare(shapes)   # (a data-dependent count at its bound)
        made = []
        if outputs_for is None:
            made = [np.empty(dims, t.dtype) for t, (dims, _) in zip(self.outputs, prepared)]
            outputs, capacities = [ffi.from_buffer(a) for a in made], [a.nbytes for a in made]
        else:
            outputs, capacities = outputs_for(prepared)
        previous = lib.om2rtGetIssueThreadCount()
        lib.om2rtSetIssueThreadCount(self.threads or 0)
        try:
            got = self._rt2.execute(inputs, outputs, capacities)
        finally:
            lib.om2rtSetIssueThreadCount(previous)
        if not made:
            return got
        return [a if a.shape == dims else a.reshape(-1)[:dynamic_mod.elements(dims)].reshape(dims)
                for a, dims in zip(made, got)]

    def execute_raw_shapes(self, input_ptrs, input_shapes, outputs_for) -> list[tuple[int, ...]]:
        """A dynamic-shape classic OM on caller buffers: each input's address and shape (ACL's
        aclmdlSetDatasetTensorDesc); outputs_for(each output's (dims, bytes) this run) returns
        the output addresses and their bytes. Returns the outputs' dims."""
        if self._rt2 is None:
            raise InputError(f"{self.path}: execute_raw_shapes runs a dynamic-shape classic OM; this model takes "
                             "execute_raw")
        self._dynamic.check(self.inputs, [tuple(s) for s in input_shapes])
        with self._run_lock:
            return self._rt2_run_locked(list(input_ptrs), [tuple(s) for s in input_shapes], outputs_for)

    @property
    def rt2_stats(self) -> dict | None:
        """A dynamic-shape OM's arena and timing counters (runtime/rt2.py), else None."""
        return None if self._rt2 is None else self._rt2.stats()

    def _run_gear(self, feeds: dict) -> dict[str, np.ndarray]:
        """A gear model: the gear is the one of the fed shapes (with pad_to_gear, a smaller batch
        runs zero-padded on the next gear up and its results are cut back to it)."""
        g = self._gears
        shapes = {n: np.shape(feeds[n]) for n in g.dynamic}
        gear = g.find(shapes)
        if gear is not None or not self._pad_to_gear:
            with self._run_lock:
                return self._run_locked(feeds, self._runs[g.select(shapes) if gear is None else gear])
        gear = g.gear_up(shapes)
        if gear is None:
            g.select(shapes)   # the error listing the gears
        batch = int(shapes[g.dynamic[0]][0])
        padded = dict(feeds)
        for n in g.dynamic:
            arr = np.asarray(feeds[n])
            full = np.zeros(g.input_shapes[gear][n], dtype=arr.dtype)
            full[:batch] = arr
            padded[n] = full
        with self._run_lock:
            results = self._run_locked(padded, self._runs[gear])
        return {name: arr[:batch] if j in g.batch_outputs else arr
                for j, (name, arr) in enumerate(results.items())}

    def _run_locked(self, feeds: dict, run: "_Run") -> dict[str, np.ndarray]:
        if self._handle is None:
            raise ModelClosedError(f"{self.path}: the model is closed; load it again to run it")
        for tensor, buf in run.own:
            tensor.data = buf
        keep = []
        for name, dtype, shape, tensor, info in run.in_spec:
            arr = feeds[name]
            if type(arr) is not np.ndarray or arr.dtype is not dtype or arr.shape != shape:
                arr = self._convert_input(info, arr)
            try:
                buf = ffi.from_buffer(arr)
            except (BufferError, ValueError, TypeError):   # not C-contiguous
                buf = ffi.from_buffer(np.ascontiguousarray(arr))
            keep.append(buf)
            tensor.data = buf
        results = {}
        for name, dtype, shape, tensor in run.out_spec:
            arr = results[name] = np.empty(shape, dtype)
            buf = ffi.from_buffer(arr)
            keep.append(buf)
            tensor.data = buf
        rc = lib.om2x_model_run(*run.call)
        if rc != 0:
            raise RuntimeFailure(f"{self.path}: GertModelRun failed ({rc}): {string(lib.om2x_last_error(self._ep))}")
        return results

    def _check_feed_names(self, feeds) -> None:
        if not isinstance(feeds, dict):
            raise InputError("run() takes a dict {input name: array}")
        if feeds.keys() != self._input_names:
            unknown = [k for k in feeds if k not in self._input_index]
            missing = [t.name for t in self.inputs if t.name not in feeds]
            parts = []
            if unknown:
                parts.append(f"unknown input(s) {', '.join(map(repr, unknown))}")
            if missing:
                parts.append(f"missing input(s) {', '.join(map(repr, missing))}")
            raise InputError(f"{'; '.join(parts)}; the model's inputs are "
                             f"{', '.join(t.describe() for t in self.inputs)}")

    @staticmethod
    def _convert_input(t: TensorInfo, arr) -> np.ndarray:
        """The slow path of run(): array-likes, and the errors for a wrong dtype or shape."""
        if not isinstance(arr, np.ndarray):
            arr = np.asarray(arr)
        if arr.dtype != t.dtype:
            raise InputError(f"input {t.name!r} is {arr.dtype}, the model expects {t.dtype}; "
                             f"convert it with .astype(np.{t.dtype})")
        if arr.shape != t.shape:
            raise InputError(f"input {t.name!r} has shape {list(arr.shape)}, the model was compiled for "
                             f"{list(t.shape)}; recompile with {advice.shape_option(t.name, arr.shape)} to change "
                             "it")
        return arr

    def _bind_raw(self, input_ptrs, output_ptrs) -> "_Run":
        """The run config of caller buffers given by address (io_inputs, then outputs); a gear
        model's gear is the one its ascend_mbatch_shape_data buffer names."""
        if self._handle is None:
            raise ModelClosedError(f"{self.path}: the model is closed; load it again to run it")
        if not all(hasattr(p, "__len__") and hasattr(p, "__getitem__") for p in (input_ptrs, output_ptrs)):
            raise InputError("execute_raw takes two sequences (lists or tuples) of buffer addresses (ints), inputs then "
                             "outputs")
        if len(input_ptrs) != len(self.io_inputs) or len(output_ptrs) != len(self.outputs):
            raise InputError(f"the model has {len(self.io_inputs)} inputs and {len(self.outputs)} outputs; got "
                             f"{len(input_ptrs)} input and {len(output_ptrs)} output addresses")
        for i, p in enumerate([*input_ptrs, *output_ptrs]):
            if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or not 0 < p < 1 << 64:
                raise InputError(f"execute_raw: address {i} is {type(p).__name__} {str(p)[:40]}, not a buffer "
                                 "address (a positive int, e.g. arr.ctypes.data); for arrays use run()")
        if self._rt2 is not None:
            raise InputError(f"{self.path}: a dynamic-shape classic OM runs on caller buffers with their shapes: "
                             "execute_raw_shapes (ACL: set each input's shape with acl.mdl.set_dataset_tensor_desc)")
        run = self._runs[0] if self._gears is None else self._runs[self._raw_gear(int(input_ptrs[-1]))]
        for tensors, ptrs in ((run.in_t, input_ptrs), (run.out_t, output_ptrs)):
            for i, p in enumerate(ptrs):
                tensors[i].data = ffi.cast("void *", int(p))
        return run

    def _raw_gear(self, shape_data: int) -> int:
        """The gear whose values the ascend_mbatch_shape_data buffer at `shape_data` holds."""
        g = self._gears
        values = list(ffi.cast("const int32_t *", shape_data)[0:len(g.values[0])])
        gear = g.find_values(values)
        if gear is None:
            raise InputError(f"{gears_mod.SHAPE_DATA_INPUT} holds {values}, which is no gear of this model; its gears "
                             f"are {[list(v) for v in g.values]} ({g.listing()}); set it with "
                             "acl.mdl.set_dynamic_batch_size / set_dynamic_hw_size / set_input_dynamic_dims")
        return gear

    def execute_raw(self, input_ptrs, output_ptrs) -> None:
        """Runs the model on caller buffers given by address (each at least its tensor's nbytes,
        in io_inputs order, then outputs); the ACL-style API (om2gen.acl) runs models this way."""
        with self._run_lock:
            run = self._bind_raw(input_ptrs, output_ptrs)
            rc = lib.om2x_model_run(self._ep, self._handle, run.cfg)
        if rc != 0:
            raise RuntimeFailure(f"{self.path}: GertModelRun failed ({rc}): {string(lib.om2x_last_error(self._ep))}")

    def execute_raw_async(self, input_ptrs, output_ptrs, stream: int) -> None:
        """Queues a run on an aclrtStream (its address); aclrtSynchronizeStream(stream) waits for it.
        The buffers must stay valid until then."""
        with self._run_lock:
            run = self._bind_raw(input_ptrs, output_ptrs)
            rc = lib.om2x_model_run_async(self._ep, self._handle, ffi.cast("aclrtStream", stream), run.cfg)
        if rc != 0:
            raise RuntimeFailure(f"{self.path}: GertModelRunAsync failed ({rc}): "
                                 f"{string(lib.om2x_last_error(self._ep))}")

    # ---- lifetime ----
    def close(self) -> None:
        """Unloads the model (waits for a run in progress; closing twice is harmless)."""
        lock = self.__dict__.get("_run_lock")
        if lock is None:   # __init__ failed before it made one
            return
        with lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            rc = lib.om2x_model_unload(self._ep, handle)
            if rc != 0:
                raise RuntimeFailure(f"{self.path}: GertModelUnload failed ({rc}): "
                                     f"{string(lib.om2x_last_error(self._ep))}")
        if self._library is not None:
            model_libraries.release(self._library)
            self._library = None
        self._rt2 = None            # closed with the OM (it runs its weights and kernels)
        if self._om is not None:   # after the unload: the captured tasks read its weights
            self._om.close()
            self._om = None
        if self._sos is not None:  # after the unload: its instances used the packed SOs
            self._sos.close()
            self._sos = None
        for k in self._keep:
            if isinstance(k, ffi.CData) and ffi.typeof(k).kind == "array" and ffi.typeof(k).item.cname == "char":
                try:
                    ffi.release(k)
                except (TypeError, ValueError):
                    pass
        self._keep = []
        if self._archive is not None:
            self._archive.close()
            self._archive = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _check_manifest(a: Archive, where: str, allow_platform_mismatch: bool, index: int) -> dict:
    """What the manifest says this executor must be, then model `index`'s model_meta.json (its
    kernel set was chosen for this CPU: runtime/isa.py) and the names it gives; returns the
    model's description."""
    m = a.manifest
    if m["abi_version"] != MODEL_ABI_VERSION:
        raise AbiError(f"{where}: built for model ABI {m['abi_version']}, this om2gen runs ABI "
                       f"{MODEL_ABI_VERSION}; recompile the model with this om2gen")
    if m["kernel_abi_version"] != KERNEL_ABI_VERSION:
        raise AbiError(f"{where}: kernels built for kernel ABI {m['kernel_abi_version']}, this runtime runs "
                       f"{KERNEL_ABI_VERSION}; recompile the model with this om2gen")
    if "so_in_om_info" in m:   # archives before format 1.1 record none
        so_in_om.check(so_in_om.SoInOmInfo.from_json(m["so_in_om_info"], where), where, allow_platform_mismatch)
    model = m["models"][index]
    meta = _check_meta(a, model["meta"])
    integrity.check_entry_names(a, meta, layout.model_kernels_dir(m, model))   # names vs entries and sizes/hashes
    return meta


def _constants_blob(a: Archive, meta: dict, index: int) -> str:
    """The constants blob model `index` reads, as its constants config names it (kernel sets with
    equal constants share one)."""
    name = meta.get("constants_config")
    if not isinstance(name, str):
        raise ArchiveError(f"{a.path}: model_meta.json names no constants config; the archive is corrupt")
    config = a.read_json(name, verified=True)
    blob = layout.model_constants_blob(config, index) if isinstance(config, dict) else None
    if blob is None or blob not in a.entries:
        raise ArchiveError(f"{a.path}: {name} names no constants blob of the archive ({blob!r}); the archive is "
                           "corrupt or was modified: recompile it or get it again")
    return blob


def _check_meta(a: Archive, name: str) -> dict:
    """model_meta.json, digest-checked, valid against its schema, with known dtypes and sizes
    that agree with the shapes."""
    meta = a.read_json(name, verified=True)
    schema.validate(meta, "meta", a.path, name)
    for io in meta["inputs"] + meta["outputs"]:
        dt = dtypes.BY_NAME.get(io["dtype"])
        shape = dynamic_mod.max_shape(io) if -1 in io["shape"] else io["shape"]   # a dynamic one: its largest
        if dt is None or shape is None or math.prod(shape) * np.dtype(io["dtype"]).itemsize != io["size"]:
            raise ArchiveError(f"{a.path}: {name}: tensor {io['name']!r} has dtype {io['dtype']!r}, shape "
                               f"{io['shape']} and size {io['size']}, which do not agree; the archive is corrupt")
    return meta


def _tiling_library(packed, name: str, where: str) -> tuple:
    """(file name, bytes, sha256) of a dynamic model's device tiling library, from its packed
    kOpMasterDevice SOs, to register with its kernels."""
    import hashlib

    from ..formats.op_so_store import SoBinType
    for b in packed:
        if b.bin_type == SoBinType.kOpMasterDevice and b.name == name:
            return name, b.data, hashlib.sha256(b.data).hexdigest()
    raise ArchiveError(f"{where}: the model's PREPROCESS_KERNEL tasks run {name}, which its so_bins do not hold as "
                       "a kOpMasterDevice library; the archive is corrupt: recompile it")


def _check_io_against_library(where: str, meta: dict, tables) -> None:
    """model_meta.json's inputs and outputs must be the ones the library was generated with
    (name, dtype, shape, bytes): the executor feeds and allocates by the description, the code
    reads and writes by its own tables. Libraries without Om2ModelGetTables are not checked."""
    if tables == ffi.NULL:
        return
    for kind, described, count, descs in (("input", meta["inputs"], tables.input_num, tables.inputs),
                                          ("output", meta["outputs"], tables.output_num, tables.outputs)):
        if len(described) != count:
            raise ArchiveError(f"{where}: model_meta.json describes {len(described)} {kind}s, the model library has "
                               f"{count}; the archive is inconsistent: recompile it")
        for i, io in enumerate(described):
            d = descs[i]
            code = (ffi.string(d.name).decode("utf-8", "replace"), int(d.data_type), int(d.size),
                    [d.dims[k] for k in range(d.dim_num)])
            said = (io["name"], dtypes.BY_NAME[io["dtype"]].acl, io["size"], list(io["shape"]))
            if code != said:
                raise ArchiveError(f"{where}: model_meta.json describes {kind} {i} as {said[0]!r} {io['dtype']}"
                                   f"{said[3]}, the model library was generated for {code[0]!r} {code[3]} (aclDataType "
                                   f"{code[1]}, {code[2]} bytes); the archive is inconsistent: recompile it")


def _check_constants(a: Archive, meta: dict, size: int) -> None:
    """The constants blob must have the size its config records (GE's internal_weight_size):
    the model library reads that many bytes."""
    name = meta.get("constants_config")
    if not isinstance(name, str):
        raise ArchiveError(f"{a.path}: model_meta.json names no constants config; the archive is corrupt")
    config = a.read_json(name, verified=True)
    want = config.get("internal_weight_size") if isinstance(config, dict) else None
    if type(want) is not int or want != size:
        raise ArchiveError(f"{a.path}: the constants blob has {size} bytes, {name} says {want!r}; the archive is "
                           "corrupt or was modified: recompile it or get it again")


def _check_threads(threads) -> int | None:
    """threads=: None (every core the process may use) or a positive int."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise InputError(f"threads must be a positive int or None, not {type(threads).__name__}")
    if not 1 <= threads <= lib.OM2RT_MAX_THREADS:
        raise InputError(f"threads must be between 1 and {lib.OM2RT_MAX_THREADS}, got {threads}")
    return int(threads)


def load(source, threads: int | None = None, *, allow_platform_mismatch: bool = False, trusted_keys=None,
         pad_to_gear: bool = False, isa: str | None = None) -> Model:
    """Loads an .om2 archive or a classic .om file (path or bytes). trusted_keys: public keys
    (formats/om2/signing.py) of which one must have signed the archive; None: those named by
    $OM2GEN_TRUSTED_KEYS, or no signature needed when it is unset. pad_to_gear (a model with
    gears of the batch): a batch that is no gear runs zero-padded on the next gear up, and its
    results are cut back to it. isa: the kernel set to run (an archive compiled for several
    targets); None: $OM2GEN_ISA, else the best this CPU supports (runtime/isa.py)."""
    return Model(source, threads, allow_platform_mismatch=allow_platform_mismatch, trusted_keys=trusted_keys,
                 pad_to_gear=pad_to_gear, isa=isa)
