"""om2gen.load: open an .om2 archive and run it through the model library's C ABI.

Load (the seed's sequence): map the archive, check manifest/ABI/ISA and the digests of code,
dlopen the model library from a memfd, resolve GertModel*, hand it the kernel binaries and the
mapped constants, and call GertModelLoad, which captures the task list. Each run is then one
native call (GertModelRun): inputs and outputs are passed by address, nothing is copied.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import custom_ops, dtypes
from ..archive import layout
from ..archive.reader import Archive
from ..errors import AbiError, ArchiveError, InputError, RuntimeFailure
from ..toolchain import targets
from ..version import KERNEL_ABI_VERSION, MODEL_ABI_VERSION
from .native import ffi, lib, string

_ERR_LEN = 1024


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]


class Model:
    """A loaded OM2 model. Use as a context manager, or call close()."""

    def __init__(self, path, threads: int | None = None):
        self.path = str(path)
        self._archive = Archive(path)
        self._handle = None
        self._lib = None
        self._keep = []
        try:
            self._load(threads)
        except BaseException:
            self.close()
            raise

    # ---- loading ----
    def _load(self, threads):
        a = self._archive
        m = a.manifest
        if m.get("abi_version") != MODEL_ABI_VERSION:
            raise AbiError(f"{self.path}: built for model ABI {m.get('abi_version')}, this om2gen runs ABI "
                           f"{MODEL_ABI_VERSION}; recompile the model with this om2gen")
        if m.get("kernel_abi_version") != KERNEL_ABI_VERSION:
            raise AbiError(f"{self.path}: kernels built for kernel ABI {m.get('kernel_abi_version')}, this runtime runs "
                           f"{KERNEL_ABI_VERSION}; recompile the model with this om2gen")
        target = m.get("target", {})
        missing = targets.missing_features(target.get("arch", "?"), target.get("isa_features", []))
        if missing:
            raise AbiError(f"{self.path}: built for target {target.get('name')}, but this CPU lacks "
                           f"{', '.join(missing)}; recompile with --target matching this machine")
        models = m.get("models") or []
        if len(models) != 1:
            raise ArchiveError(f"{self.path}: holds {len(models)} models; om2gen.load runs single-model archives")
        meta = self.meta = _check_meta(a, models[0].get("meta", ""))
        self.inputs = [TensorInfo(d["name"], np.dtype(d["dtype"]), tuple(d["shape"])) for d in meta["inputs"]]
        self.outputs = [TensorInfo(d["name"], np.dtype(d["dtype"]), tuple(d["shape"])) for d in meta["outputs"]]
        self._input_index = {t.name: i for i, t in enumerate(self.inputs)}

        custom = meta.get("custom_ops") or {}
        custom_libs, custom_bins = list(custom.get("shared_libs", [])), list(custom.get("binaries", []))
        code = [meta["library"]] + list(meta["kernels"]) + custom_libs + custom_bins
        for name in code:
            a.verify(name)

        if threads is not None:
            if threads < 1:
                raise InputError(f"threads must be >= 1, got {threads}")
            lib.om2rtSetThreadCount(threads)

        # custom-op libraries first (the seed's order): their registrations must exist before the
        # model library captures; same content is loaded once per process and stays resident
        for name in custom_libs:
            custom_ops.load_bytes(a.view(name), name.rsplit("/", 1)[1], RuntimeFailure,
                                  digest=a.entries[name]["sha256"])

        # the model library, from memory
        so = a.view(meta["library"])
        so_buf = ffi.from_buffer(so)
        handle = ffi.new("void **")
        err = ffi.new("char[]", _ERR_LEN)
        if lib.om2x_dlopen_from_memory(so_buf, len(so), meta["library"].rsplit("/", 1)[1].encode(), 0,
                                       handle, err, _ERR_LEN) != 0:
            raise RuntimeFailure(f"{self.path}: {string(err)}")
        self._lib = handle[0]
        self._ep = ffi.new("Om2xEntryPoints *")
        if lib.om2x_resolve_entry_points(self._lib, self._ep, err, _ERR_LEN) != 0:
            raise AbiError(f"{self.path}: {string(err)}")
        abi = lib.om2x_abi_version(self._ep)
        if abi != MODEL_ABI_VERSION:
            raise AbiError(f"{self.path}: the model library reports ABI {abi}, expected {MODEL_ABI_VERSION}")

        # kernel binaries and constants: pointers into the mapped archive
        kernels = list(meta["kernels"]) + custom_bins  # custom-op .bin files follow the kernels
        names = [ffi.new("char[]", k.rsplit("/", 1)[1].encode()) for k in kernels]
        views = [ffi.from_buffer(a.view(k)) for k in kernels]
        n = max(len(kernels), 1)
        bin_files = ffi.new("const char *[]", n)
        bin_data = ffi.new("const void *[]", n)
        bin_size = ffi.new("uint64_t[]", n)
        for i, (nm, v) in enumerate(zip(names, views)):
            bin_files[i], bin_data[i], bin_size[i] = nm, v, len(v)
        blob = a.view(layout.constants_blob(0))
        blob_buf = ffi.from_buffer(blob) if len(blob) else ffi.new("char[]", 64)
        constants = ffi.new("void *[]", [blob_buf])

        self._callbacks = ffi.new("GertModelLoadCallbacks *")
        lib.om2x_fill_load_callbacks(self._callbacks)
        self._instance = ffi.new("Om2xInstance *")
        cfg = ffi.new("GertModelLoadConfig *")
        cfg.struct_size = ffi.sizeof("GertModelLoadConfig")
        cfg.bin_files, cfg.bin_data, cfg.bin_size, cfg.bin_num = bin_files, bin_data, bin_size, len(kernels)
        cfg.constants, cfg.constant_num = constants, 1
        cfg.instance_handle = self._instance
        cfg.callbacks = self._callbacks
        model = ffi.new("GertModelHandle *")
        rc = lib.om2x_model_load(self._ep, cfg, model)
        if rc != 0:
            raise RuntimeFailure(f"{self.path}: GertModelLoad failed ({rc}): {string(lib.om2x_last_error(self._ep))}")
        self._handle = model[0]
        # the mapped constants must outlive the model; kernel bytes were copied by the runtime
        self._keep = [so_buf, blob_buf, constants]
        for v in views:
            ffi.release(v)
        self._prepare_run()

    def _prepare_run(self):
        def tensors(infos):
            arr = ffi.new("GertTensor[]", max(len(infos), 1))
            ptrs = ffi.new("GertTensor *[]", max(len(infos), 1))
            dims = []
            for i, t in enumerate(infos):
                d = ffi.new("int64_t[]", list(t.shape) or [0])
                dims.append(d)
                arr[i].struct_size = ffi.sizeof("GertTensor")
                arr[i].size = int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize
                arr[i].data_type = dtypes.from_numpy(t.dtype).acl
                arr[i].dim_num = len(t.shape)
                arr[i].dims = d
                ptrs[i] = arr + i
            return arr, ptrs, dims
        self._in_t, in_ptrs, in_dims = tensors(self.inputs)
        self._out_t, out_ptrs, out_dims = tensors(self.outputs)
        self._run_cfg = ffi.new("GertModelRunConfig *")
        self._run_cfg.struct_size = ffi.sizeof("GertModelRunConfig")
        self._run_cfg.input_count = len(self.inputs)
        self._run_cfg.input_data = in_ptrs
        self._run_cfg.output_count = len(self.outputs)
        self._run_cfg.output_data = out_ptrs
        self._keep += [in_ptrs, out_ptrs, in_dims, out_dims]

    # ---- running ----
    def run(self, feeds: dict) -> dict[str, np.ndarray]:
        """Runs the model once; returns {output name: array}."""
        if self._handle is None:
            raise RuntimeFailure(f"{self.path}: the model is closed")
        if not isinstance(feeds, dict):
            raise InputError("run() takes a dict {input name: array}")
        if len(feeds) != len(self.inputs) or any(k not in self._input_index for k in feeds):
            unknown = [k for k in feeds if k not in self._input_index]
            missing = [t.name for t in self.inputs if t.name not in feeds]
            parts = []
            if unknown:
                parts.append(f"unknown input(s) {', '.join(map(repr, unknown))}")
            if missing:
                parts.append(f"missing input(s) {', '.join(map(repr, missing))}")
            raise InputError(f"{'; '.join(parts)}; the model's inputs are "
                             f"{', '.join(f'{t.name} {t.dtype}{list(t.shape)}' for t in self.inputs)}")
        keep = []
        for i, t in enumerate(self.inputs):
            arr = feeds[t.name]
            if not isinstance(arr, np.ndarray):
                arr = np.asarray(arr)
            if arr.dtype != t.dtype:
                raise InputError(f"input {t.name!r} is {arr.dtype}, the model expects {t.dtype}; "
                                 f"convert it with .astype(np.{t.dtype})")
            if arr.shape != t.shape:
                raise InputError(f"input {t.name!r} has shape {list(arr.shape)}, the model was compiled for "
                                 f"{list(t.shape)}; recompile with --input-shape {t.name}:"
                                 f"{','.join(map(str, arr.shape))} to change it")
            if not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr)
            buf = ffi.from_buffer(arr)
            keep.append(buf)
            self._in_t[i].data = buf
        results = {}
        for i, t in enumerate(self.outputs):
            arr = np.empty(t.shape, t.dtype)
            buf = ffi.from_buffer(arr)
            keep.append(buf)
            self._out_t[i].data = buf
            results[t.name] = arr
        rc = lib.om2x_model_run(self._ep, self._handle, self._run_cfg)
        if rc != 0:
            raise RuntimeFailure(f"{self.path}: GertModelRun failed ({rc}): {string(lib.om2x_last_error(self._ep))}")
        return results

    # ---- lifetime ----
    def close(self) -> None:
        if self._handle is not None:
            rc = lib.om2x_model_unload(self._ep, self._handle)
            self._handle = None
            if rc != 0:
                raise RuntimeFailure(f"{self.path}: GertModelUnload failed ({rc}): "
                                     f"{string(lib.om2x_last_error(self._ep))}")
        if self._lib is not None:
            lib.om2x_dlclose(self._lib)
            self._lib = None
        for k in self._keep:
            if isinstance(k, ffi.CData) and ffi.typeof(k).kind == "array" and ffi.typeof(k).item.cname == "char":
                try:
                    ffi.release(k)
                except (TypeError, ValueError):
                    pass
        self._keep = []
        if getattr(self, "_archive", None) is not None:
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


def _check_meta(a: Archive, name: str) -> dict:
    """model_meta.json with every key the executor reads, of the right kind."""
    meta = a.read_json(name)

    def bad(what):
        return ArchiveError(f"{a.path}: {name}: {what}; the archive is corrupt or from an incompatible tool")

    if not isinstance(meta, dict):
        raise bad("not a JSON object")
    for key, kind in (("inputs", list), ("outputs", list), ("library", str), ("kernels", list)):
        if not isinstance(meta.get(key), kind):
            raise bad(f"missing or invalid {key!r}")
    for io in meta["inputs"] + meta["outputs"]:
        if not (isinstance(io, dict) and isinstance(io.get("name"), str) and isinstance(io.get("shape"), list)
                and io.get("dtype") in dtypes.BY_NAME and all(isinstance(d, int) and d >= 0 for d in io["shape"])):
            raise bad(f"invalid input/output description {io!r}")
    return meta


def load(path, threads: int | None = None) -> Model:
    return Model(path, threads)
