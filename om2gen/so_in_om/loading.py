"""SO in OM at load time: the packed SOs of a model, taken out by type and handed to their
consumers (GE's LoadOpSoBin + ModelManager::InitOpMasterDeviceSo + CustomOpSoLoader).

Every .so is ELF-checked for this machine first (om2gen/so_in_om/elf_checks.py) and then loaded from
memory -- written to a memfd and dlopen'ed by the runtime's om2rtLoadSharedObjectFromMemory --
never from a file on disk. Each gets a custom-op registry of its own (om2x_so_load /
om2x_custom_library_load): a creator it registers never reaches the process registry, and for
the kinds below that are unloaded (om2x_so_unload) its registrations go with it.

  kCustomOp        custom_ops.load_bytes: resident for the process, one per content; its
                   REG_AUTO_MAPPING_OP registrations live in the library's own registry. The
                   model's scope (``PackedSos.activated()``) makes exactly its libraries visible to
                   Om2CreateCustomOp while it loads -- an empty scope for a model without any.
  kSpaceRegistry   the model's SpaceRegistry: op type -> Om2InferShape_/Om2Tiling_ functions.
                   The library must be host code for this OS/CPU (name *_<os>_<cpu>.so). One
                   that exports Om2OpHostGetTable is om2gen's host op library of a dynamic .om
                   (om2/om2_op_host.h): it goes to the RT2 executor (runtime/rt2.py) too.
                   Shared across models by content, released with the last model using it.
  kOpMasterDevice  the process-wide op-master cache: built-in SOs (vendor contains "built-in")
                   deduplicated by name (the first loaded wins), custom ones by content under
                   GE's unique name <n>_vendors_<vendor>_<so>, n a process-wide counter (never
                   reused, so no two live SOs share a name); each model holds a lease, released
                   with the model.
  kAutofuse        ``guard_check.so`` kept as bytes (GE restores it to _guard_check_so_data;
                   the model library compiles the same check in: GertModelRun runs it); the
                   other fused-kernel libraries kept by "vendor/so_name" and loaded on
                   demand, per model, closed with the model.
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import threading
from dataclasses import dataclass, field

from ..errors import AbiError, RuntimeFailure
from ..formats.op_so_store import OpSoBin, SoBinType
from . import elf_checks
from .info import GUARD_CHECK, host_library_suffix, host_os, served_op_types

BUILT_IN_MARK = "built-in"


@dataclass(eq=False)
class LoadedSo:
    """One packed .so loaded from memory; shared by the models holding it (refs)."""
    name: str                  # the name it is known by (for custom op-master SOs: the first one loaded)
    vendor: str
    bin_type: SoBinType
    sha256: str
    handle: object             # dlopen handle (cffi void *)
    exports: frozenset[str]
    registry: object = None    # its own custom-op registry (om2x_so_load), freed with it
    refs: int = 0

    def symbol(self, name: str) -> int:
        """Address of a symbol this .so defines itself, 0 if none (or it is closed)."""
        from ..native import ffi, lib
        if self.handle is None:
            return 0
        return int(ffi.cast("uintptr_t", lib.om2x_so_symbol(self.handle, name.encode())))


_ERR_LEN = 1024


def _dlopen(b: OpSoBin, where: str, exports: frozenset[str], digest: str) -> LoadedSo:
    """Loads b from memory into a custom-op registry of its own (whatever it registers stays
    there and is freed by _dlclose)."""
    from ..native import ffi, lib, string
    handle, registry = ffi.new("void **"), ffi.new("void **")
    err = ffi.new("char[]", _ERR_LEN)
    buf = ffi.from_buffer(b.data)
    try:
        if lib.om2x_so_load(buf, len(b.data), handle, registry, err, _ERR_LEN) != 0:
            raise RuntimeFailure(f"{where}: packed {b.bin_type.name} {b.name}: {string(err)}")
    finally:
        ffi.release(buf)
    return LoadedSo(b.name, b.vendor, b.bin_type, digest, handle[0], exports, registry=registry[0])


def _dlclose(so: LoadedSo) -> None:
    from ..native import lib
    if so.handle is not None:
        lib.om2x_so_unload(so.registry)
        so.handle = None
        so.registry = None


class _SharedCache:
    """Process-wide loaded SOs of one kind, keyed as the kind deduplicates; refcounted."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_key: dict[object, LoadedSo] = {}
        self.serial = itertools.count()     # numbers the SOs ever loaded; never reused

    def acquire(self, key, b: OpSoBin, where: str, exports: frozenset[str], digest: str, rename=None) -> LoadedSo:
        """The loaded SO for key, loading b if none is; rename(n) names a new one, n unique among
        every SO this cache has loaded in the process (live or released)."""
        with self.lock:
            so = self.by_key.get(key)
            if so is None:
                so = _dlopen(b, where, exports, digest)
                if rename is not None:
                    so.name = rename(next(self.serial))
                self.by_key[key] = so
            so.refs += 1
            return so

    def release(self, so: LoadedSo) -> None:
        with self.lock:
            so.refs -= 1
            if so.refs == 0:
                for key, value in list(self.by_key.items()):
                    if value is so:
                        del self.by_key[key]
                _dlclose(so)

    def loaded(self) -> list[LoadedSo]:
        with self.lock:
            return list(self.by_key.values())


SPACE_REGISTRY_CACHE = _SharedCache()        # key: sha256 of the content
OP_MASTER_BUILT_IN = _SharedCache()          # key: so name
OP_MASTER_CUSTOM = _SharedCache()            # key: sha256 of the content


def op_master_loaded() -> dict[str, list[str]]:
    """The op-master SOs loaded in this process: {"built-in": names, "custom": unique names}."""
    return {"built-in": sorted(s.name for s in OP_MASTER_BUILT_IN.loaded()),
            "custom": sorted(s.name for s in OP_MASTER_CUSTOM.loaded())}


@dataclass
class SpaceRegistry:
    """A model's host infer-shape/tiling functions by op type (GE's OpImplSpaceRegistry)."""
    libraries: list[LoadedSo] = field(default_factory=list)

    def function(self, op_type: str, which: str = "Tiling") -> int:
        """Address of Om2<which>_<op_type> from the first library serving it, 0 if none."""
        for so in self.libraries:
            address = so.symbol(f"Om2{which}_{op_type}")
            if address:
                return address
        return 0

    def op_types(self) -> set[str]:
        return set().union(*(served_op_types(SoBinType.kSpaceRegistry, s.exports) for s in self.libraries))


@dataclass
class OpMasterDevice:
    """A model's leases on process-wide op-master SOs; unique_names maps "vendor/name" to the
    name of the loaded SO it resolved to."""
    leases: list[tuple[_SharedCache, LoadedSo]] = field(default_factory=list)
    unique_names: dict[str, str] = field(default_factory=dict)

    def function(self, op_type: str) -> int:
        for _, so in self.leases:
            address = so.symbol(f"Om2DeviceTiling_{op_type}")
            if address:
                return address
        return 0


@dataclass
class Autofuse:
    """guard_check.so bytes, and the fused-kernel libraries by "vendor/so_name", loaded on demand."""
    guard_check: bytes | None = None
    buffers: dict[str, OpSoBin] = field(default_factory=dict)
    loaded: dict[str, LoadedSo] = field(default_factory=dict)
    where: str = ""

    def load(self, key: str) -> LoadedSo:
        if key not in self.loaded:
            if key not in self.buffers:
                raise RuntimeFailure(f"{self.where}: no packed autofuse library {key!r} (packed: "
                                     f"{', '.join(sorted(self.buffers)) or 'none'})")
            b = self.buffers[key]
            digest = hashlib.sha256(b.data).hexdigest()
            summary = checked(b.data, digest, f"{self.where}: packed kAutofuse {key}", _host_arch())
            self.loaded[key] = _dlopen(b, self.where, summary.exported, digest)
        return self.loaded[key]

    def function(self, key: str, symbol: str) -> int:
        return self.load(key).symbol(symbol)

    def close(self) -> None:
        for so in self.loaded.values():
            _dlclose(so)
        self.loaded.clear()


class PackedSos:
    """What one loaded model holds of its packed SOs. close() releases everything it acquired."""

    def __init__(self, where: str):
        self.where = where
        self.custom_libraries: list = []
        self.custom_by_name: dict = {}      # packed so_name -> custom_ops.CustomOpLibrary
        self.space_registry = SpaceRegistry()
        self.op_master = OpMasterDevice()
        self.autofuse = Autofuse(where=where)
        self.op_host: list[LoadedSo] = []   # om2gen host op libraries (a dynamic .om's RT2 path)
        self._space_leases: list[LoadedSo] = []
        self._closed = False

    @contextlib.contextmanager
    def activated(self):
        """The model's custom-op scope on this thread: Om2CreateCustomOp sees exactly the model's
        libraries (none for a model without custom operators), never the process registry."""
        from .custom_libraries import scope
        with scope(self.custom_libraries):
            yield self

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.autofuse.close()
        for so in self._space_leases:
            SPACE_REGISTRY_CACHE.release(so)
        self._space_leases.clear()
        self.space_registry.libraries.clear()
        self.op_host.clear()
        for cache, so in self.op_master.leases:
            cache.release(so)
        self.op_master.leases.clear()
        # custom-op libraries stay resident (their creators may be referenced by live instances)
        self.custom_libraries = []
        self.custom_by_name = {}


def _custom(packed: PackedSos, b: OpSoBin, digest: str, exports) -> None:
    from .custom_libraries import load_bytes
    library = load_bytes(b.data, b.name, RuntimeFailure, digest=digest)
    packed.custom_by_name[b.name] = library
    if library not in packed.custom_libraries:
        packed.custom_libraries.append(library)


def _space_registry(packed: PackedSos, b: OpSoBin, digest: str, exports) -> None:
    so = SPACE_REGISTRY_CACHE.acquire(digest, b, packed.where, exports, digest)
    packed._space_leases.append(so)
    packed.space_registry.libraries.append(so)
    if OP_HOST_ENTRY in exports:   # om2gen's host op library: the RT2 executor's (runtime/rt2.py)
        packed.op_host.append(so)


OP_HOST_ENTRY = "Om2OpHostGetTable"    # om2/om2_op_host.h OM2_OP_HOST_ENTRY


def _op_master(packed: PackedSos, b: OpSoBin, digest: str, exports) -> None:
    key = f"{b.vendor}/{b.name}"
    if BUILT_IN_MARK in b.vendor.replace("_", "-"):
        so = OP_MASTER_BUILT_IN.acquire(b.name, b, packed.where, exports, digest)
        cache = OP_MASTER_BUILT_IN
    else:
        # GE's unique name of a custom op-master SO: <n>_vendors_<vendor>_<so>
        vendor = b.vendor.replace("/", "_")
        so = OP_MASTER_CUSTOM.acquire(digest, b, packed.where, exports, digest,
                                      rename=lambda n: f"{n}_{vendor}_{b.name}")
        cache = OP_MASTER_CUSTOM
    packed.op_master.leases.append((cache, so))
    packed.op_master.unique_names[key] = so.name


def _autofuse(packed: PackedSos, b: OpSoBin, digest: str, exports) -> None:
    if b.name == GUARD_CHECK:
        packed.autofuse.guard_check = b.data
    else:
        packed.autofuse.buffers[f"{b.vendor}/{b.name}"] = b


CONSUMERS = {
    SoBinType.kCustomOp: _custom,
    SoBinType.kSpaceRegistry: _space_registry,
    SoBinType.kOpMasterDevice: _op_master,
    SoBinType.kAutofuse: _autofuse,
}


def _host_arch() -> str:
    from ..toolchain.targets import host_arch
    return host_arch()


# (sha256, arch) of bytes that passed so_check.check at load -> their summary. pyelftools takes
# 20-60 ms a library, so the same bytes are checked once per process; new bytes are always
# checked before they are dlopen'ed, and bytes that fail are not remembered.
_CHECKED: dict[tuple[str, str], elf_checks.ElfSummary] = {}


def checked(data: bytes, digest: str, what: str, arch: str) -> elf_checks.ElfSummary:
    """so_check.check(data, what, arch, at_load=True), once per digest (the sha256 of `data`)."""
    summary = _CHECKED.get((digest, arch))
    if summary is None:
        summary = _CHECKED[digest, arch] = elf_checks.check(data, what, arch, at_load=True)
    return summary


def _before_loading(b: OpSoBin, summary: elf_checks.ElfSummary, what: str) -> None:
    """What can refuse a packed SO without running it: dlopen runs its constructors, so every
    check its ELF file can answer comes before any SO of the model is loaded."""
    from .custom_libraries import REGISTER_SYMBOL
    if b.bin_type == SoBinType.kCustomOp and REGISTER_SYMBOL not in summary.imported:
        raise AbiError(f"{what}: it does not call {REGISTER_SYMBOL} (no REG_AUTO_MAPPING_OP registration), so it "
                       "is no custom-op library; refused before loading it")
    if b.bin_type == SoBinType.kSpaceRegistry:
        suffix = host_library_suffix(host_os(), _host_arch())
        if not b.name.endswith(suffix):
            raise AbiError(f"{what} is host code for another platform; this machine needs *{suffix}. Recompile the "
                           "model for this machine")


def load_packed(bins: list[OpSoBin], where: str) -> PackedSos:
    """Checks every bin for this machine (ELF structure, machine, what its type needs), then hands
    each to its consumer, in store order. On any failure everything acquired so far is released
    and the error propagates."""
    arch = _host_arch()
    checks = []
    for b in bins:
        what = f"{where}: packed {b.bin_type.name} {b.vendor + '/' if b.vendor else ''}{b.name}"
        digest = hashlib.sha256(b.data).hexdigest()   # of the bytes the consumer loads (immutable)
        summary = checked(b.data, digest, what, arch)
        _before_loading(b, summary, what)
        checks.append((b, digest, summary.exported))
    packed = PackedSos(where)
    try:
        for b, digest, exports in checks:
            CONSUMERS[b.bin_type](packed, b, digest, exports)
    except BaseException:
        packed.close()
        raise
    return packed
