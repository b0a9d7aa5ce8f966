"""SO in OM at compile time: which shared objects a model needs, decided on demand, and the
OpSoStore that packs exactly those (GE's CheckAndSetNeedSoInOM + LoadAndStoreOppSo).

A registry of *SO providers* (``PROVIDERS``, ``@provider``) is asked, per compiled model, for
the SOs it needs; ``pack()`` runs them all, ELF-checks every SO for the target
(om2gen/so_in_om/elf_checks.py), names and orders them deterministically and returns an ``SoPack`` with
the bins, the ``so_in_om_flag`` and the OpSoStore bytes (the OM's SO_BINS partition, the OM2
archive's data/so_bins/ store).

Providers:
  - custom operators (kCustomOp): the custom-op libraries whose op types the model uses. For a
    cross-compile target the loaded (host) library only serves the compiler; the target build
    of the same file name comes from the op package directory (below).
  - op packages (kSpaceRegistry, kOpMasterDevice, kAutofuse): the operator package directory
    named by $OM2GEN_OPP_PATH (om2gen's ASCEND_OPP_PATH / ASCEND_CUSTOM_OPP_PATH), laid out as

        $OM2GEN_OPP_PATH/<arch>/built-in/<kind dir>/*.so
        $OM2GEN_OPP_PATH/<arch>/vendors/<name>/<kind dir>/*.so

    with kind dirs ``op_host`` (kSpaceRegistry), ``op_master_device`` (kOpMasterDevice),
    ``autofuse`` (kAutofuse) and ``custom_ops`` (kCustomOp target builds). A .so declares the op
    types it serves by exporting ``<prefix><OpType>`` symbols (so_in_om.KINDS). A model needs,
    per kind and per op type of its graph, the first .so that serves it, vendors (sorted by
    name) before built-in; a .so serving none of its op types is not packed. ``guard_check.so``
    in an autofuse dir is packed (vendor "", as GE) when a fused-kernel library of that vendor is.
    kSpaceRegistry libraries are host code: their packed names end with ``_<os>_<cpu>.so``.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CompileError
from ..formats import op_so_store
from ..formats.op_so_store import OpSoBin, SoBinType
from . import elf_checks
from .custom_libraries import REGISTER_SYMBOL, resident, unique
from .info import BIN_FILE_PATH, GUARD_CHECK, KINDS, host_library_suffix, served_op_types

ENV_OPP = "OM2GEN_OPP_PATH"
BUILT_IN = "built-in"
CUSTOM_VENDOR = "vendors/customize"     # vendor of --custom-op-lib libraries (GE's default custom vendor)
TARGET_OS = "linux"
_SUFFIX = re.compile(r"_(linux|windows)_([A-Za-z0-9_]+)\.so$")


@dataclass
class PackContext:
    """What providers see of the compiled model."""
    program: object                       # lower.program.Program
    target: object                        # toolchain.targets.Target
    libraries: list = field(default_factory=list)   # custom_ops.CustomOpLibrary, in the compile's priority order
    model_op_types: frozenset | None = None         # the model's op types (graph_op_types), before fusion

    @property
    def cross(self) -> bool:
        from ..toolchain.targets import host_arch
        return self.target.arch != host_arch()

    @property
    def op_types(self) -> frozenset[str]:
        if self.model_op_types is not None:
            return self.model_op_types
        return frozenset(n["op_type"] for n in self.program.graph_json["nodes"])

    def used_libraries(self) -> list:
        """The custom-op libraries some node uses, in priority order (then first use)."""
        used = dict.fromkeys(c.library for c in self.program.custom_ops)    # their sha256s, in first use
        order = [lib for lib in unique(self.libraries) if lib.sha256 in used]     # each content once
        # a program names its libraries by content; one not given here is still resident
        order += [resident(digest) for digest in used if digest not in {o.sha256 for o in order}]
        return order


@dataclass(frozen=True)
class SoPack:
    bins: tuple[OpSoBin, ...]
    flag: int                                  # so_in_om_flag
    custom_names: dict                         # compile-time library sha256 -> packed kCustomOp so_name

    @property
    def store(self) -> bytes:
        return op_so_store.build(self.bins) if self.bins else b""

    def of_type(self, bin_type: SoBinType) -> list[OpSoBin]:
        return [b for b in self.bins if b.bin_type == bin_type]


PROVIDERS: list = []


def provider(cls):
    """Registers an SO provider: an object with `bin_type` and `collect(ctx) -> [OpSoBin]`."""
    PROVIDERS.append(cls())
    return cls


def graph_op_types(graph) -> frozenset[str]:
    """Every op type of an ir.Graph, If/Loop regions included: what the model is made of, taken
    before fusion passes replace groups of nodes by om2gen's own fused op types."""
    from ..ir.graph import REGIONS
    found, todo = set(), list(graph.nodes)
    while todo:
        node = todo.pop()
        found.add(node.op_type)
        for nodes, _ in (node.attrs.get(REGIONS) or {}).values():
            todo.extend(nodes)
    return frozenset(found)


def pack(program, target, libraries=(), op_types=None) -> SoPack:
    """The SOs `program` needs, from every provider, checked for `target`. `op_types`: the
    model's op types (graph_op_types before fusion); default: the compiled graph's node types."""
    ctx = PackContext(program, target, list(libraries), None if op_types is None else frozenset(op_types))
    bins: list[OpSoBin] = []
    for p in PROVIDERS:
        for b in p.collect(ctx):
            _check(b, target)
            bins.append(b)
    seen: dict[tuple[str, str], OpSoBin] = {}
    for b in bins:
        key = (b.vendor, b.name)
        if key in seen and seen[key].data != b.data:
            raise CompileError(f"two different shared objects would be packed as {b.vendor or '<no vendor>'}/{b.name} "
                               f"({seen[key].bin_type.name} and {b.bin_type.name}); rename one")
        seen.setdefault(key, b)
    bins = [b for b in bins if seen[(b.vendor, b.name)] is b]
    bins.sort(key=lambda b: int(b.bin_type))   # stable: providers' order within a type
    custom = [b for b in bins if b.bin_type == SoBinType.kCustomOp]
    libraries = ctx.used_libraries()
    if len(custom) != len(libraries):   # two libraries' target builds are one and the same file
        raise CompileError(f"the custom-op libraries {', '.join(lib.name for lib in libraries)} would be packed as "
                           f"{len(custom)} shared object(s) ({', '.join(b.name for b in custom)}); give each "
                           f"library once, and a target build of its own")
    names = {lib.sha256: b.name for lib, b in zip(libraries, custom)}
    return SoPack(tuple(bins), op_so_store.flags_of(b.bin_type for b in bins), names)


def _check(b: OpSoBin, target) -> None:
    what = f"{b.bin_type.name} shared object {b.vendor + '/' if b.vendor else ''}{b.name}"
    summary = elf_checks.check(b.data, what, target.arch)
    if b.bin_type == SoBinType.kCustomOp and REGISTER_SYMBOL not in summary.imported:
        raise CompileError(f"{what}: it does not call {REGISTER_SYMBOL} (no REG_AUTO_MAPPING_OP registration)")
    if b.bin_type == SoBinType.kSpaceRegistry and not b.name.endswith(host_library_suffix(TARGET_OS, target.arch)):
        raise CompileError(f"{what}: a host infer-shape/tiling library for {TARGET_OS}/{target.arch} must be named "
                           f"*{host_library_suffix(TARGET_OS, target.arch)}")


def archive_name(name: str, data: bytes) -> str:
    """The seed's name of a packed custom-op library: <file_size>_<sha256[:16]>_<original_name>."""
    from ..formats.om2 import layout
    return layout.custom_op_library_name(len(data), hashlib.sha256(data).hexdigest(), name)


# --- the op package directory ------------------------------------------------------------------

@dataclass(frozen=True)
class OppSo:
    vendor: str
    path: Path
    data: bytes = field(repr=False)
    serves: frozenset[str]


def opp_root(required_for: str | None = None) -> Path | None:
    """$OM2GEN_OPP_PATH as a directory, None when unset (an error naming `required_for` then)."""
    value = os.environ.get(ENV_OPP)
    if not value:
        if required_for:
            raise CompileError(f"{required_for}: set ${ENV_OPP} to the operator package directory "
                               f"(${ENV_OPP}/<arch>/<vendor>/<kind>/*.so)")
        return None
    root = Path(value)
    if not root.is_dir():
        raise CompileError(f"${ENV_OPP}={value} is not a directory")
    return root


def vendors(root: Path, arch: str) -> list[tuple[str, Path]]:
    """(vendor name, directory) for `arch`, in priority order: vendors/* by name, then built-in."""
    base = root / arch
    found = [(f"vendors/{d.name}", d) for d in sorted((base / "vendors").iterdir()) if d.is_dir()] \
        if (base / "vendors").is_dir() else []
    if (base / BUILT_IN).is_dir():
        found.append((BUILT_IN, base / BUILT_IN))
    return found


def scan(root: Path, arch: str, bin_type: SoBinType) -> list[OppSo]:
    """Every .so of one kind for `arch`, in priority order, with the op types it serves."""
    kind = KINDS[bin_type]
    out = []
    for vendor, directory in vendors(root, arch):
        for path in sorted((directory / kind.opp_dir).glob("*.so")):
            data = _read(path)
            try:
                exported = elf_checks.summary(data).exported
            except Exception as exc:   # pyelftools raises several types on garbage
                raise CompileError(f"{path} in the op package is not an ELF shared object ({exc}); remove it "
                                   f"or replace it with a {arch} build") from None
            serves = frozenset(served_op_types(bin_type, exported))
            out.append(OppSo(vendor, path, data, serves))
    return out


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CompileError(f"cannot read {path} ({exc.strerror})") from None


# --- providers ---------------------------------------------------------------------------------

@provider
class CustomOpProvider:
    """kCustomOp: the libraries of the custom operators the model uses (GE CheckAndSetCustomOpSo)."""
    bin_type = SoBinType.kCustomOp

    def collect(self, ctx: PackContext) -> list[OpSoBin]:
        libraries = ctx.used_libraries()
        if not libraries:
            return []
        if not ctx.cross:
            return [OpSoBin(lib.archive_name, CUSTOM_VENDOR, self.bin_type, lib.data) for lib in libraries]
        # cross-compiling: the host build served InferShape/Compile; pack the target's build
        arch = ctx.target.arch
        root = opp_root(f"cross-compiling custom operators for {arch}")
        kind_dir = KINDS[self.bin_type].opp_dir
        out = []
        for lib in libraries:
            candidates = [(v, d / kind_dir / lib.name) for v, d in vendors(root, arch)]
            found = next(((v, p) for v, p in candidates if p.is_file()), None)
            if found is None:
                ops = sorted({c.op_type for c in ctx.program.custom_ops if c.library == lib.sha256})
                raise CompileError(f"cross-compiling for {arch}: custom-op library {lib.name} (ops {', '.join(ops)}) "
                                   f"has no {arch} build: put it at ${ENV_OPP}/{arch}/<vendor>/{kind_dir}/{lib.name}")
            vendor, path = found
            data = _read(path)
            out.append(OpSoBin(archive_name(lib.name, data), vendor, self.bin_type, data))
        return out


class _OppProvider:
    """A kind collected from the op package: per used op type, the first .so serving it."""
    bin_type: SoBinType

    def chosen(self, ctx: PackContext) -> list[OppSo]:
        root = opp_root()
        if root is None:
            return []
        sos = scan(root, ctx.target.arch, self.bin_type)
        needed: list[OppSo] = []
        for op_type in sorted(ctx.op_types):
            so = next((s for s in sos if op_type in s.serves), None)
            if so is not None and so not in needed:
                needed.append(so)
        return sorted(needed, key=sos.index)

    def collect(self, ctx: PackContext) -> list[OpSoBin]:
        return [OpSoBin(self.name_of(s, ctx.target), s.vendor, self.bin_type, s.data) for s in self.chosen(ctx)]

    def name_of(self, so: OppSo, target) -> str:
        return so.path.name


@provider
class SpaceRegistryProvider(_OppProvider):
    """kSpaceRegistry: host infer-shape/tiling libraries, named *_<os>_<cpu>.so (host code). By the
    seed's rule (CheckAndSetSpaceRegistry) a dynamic-shape model needs one: a classic .om's own
    host op library (codegen/host_library.py), vendor OM2GEN_VENDOR; then those of the op package."""
    bin_type = SoBinType.kSpaceRegistry

    def collect(self, ctx: PackContext) -> list[OpSoBin]:
        d = getattr(ctx.program, "dynamic", None)
        own = [OpSoBin(d.host_library, OM2GEN_VENDOR, self.bin_type, d.host_binary)] if d and d.host_binary else []
        return own + super().collect(ctx)

    def name_of(self, so: OppSo, target) -> str:
        suffix = host_library_suffix(TARGET_OS, target.arch)
        if so.path.name.endswith(suffix):
            return so.path.name
        m = _SUFFIX.search(so.path.name)
        if m:
            raise CompileError(f"{so.path}: named for {m.group(1)}/{m.group(2)}, but it is in the {target.arch} op "
                               f"package; a host library for this target ends with {suffix}")
        return so.path.name[:-len(".so")] + suffix


@provider
class OpMasterDeviceProvider(_OppProvider):
    """kOpMasterDevice: device-side tiling libraries, run by PREPROCESS_KERNEL tasks. By the seed's
    rule (CheckAndSetOpMasterDevice) a model needs one when a task of type PREPROCESS_KERNEL names
    it: a dynamic model's own library (codegen/tiling_library.py), vendor OM2GEN_VENDOR; then
    those of the op package."""
    bin_type = SoBinType.kOpMasterDevice

    def collect(self, ctx: PackContext) -> list[OpSoBin]:
        from ..ir.tasks import ModelTaskType
        program = ctx.program
        named = {program.kernels[t.kernel].file_name for t in getattr(program, "tasks", ())
                 if t.task_type == ModelTaskType.MODEL_TASK_PREPROCESS_KERNEL}
        own = []
        if named:
            d = program.dynamic
            assert d is not None and named == {d.tiling_library}, f"PREPROCESS_KERNEL tasks name {sorted(named)}"
            own.append(OpSoBin(d.tiling_library, OM2GEN_VENDOR, self.bin_type, d.tiling_binary))
        return own + super().collect(ctx)


OM2GEN_VENDOR = "vendors/om2gen"    # the vendor of the libraries om2gen produces for a model


@provider
class AutofuseProvider(_OppProvider):
    """kAutofuse: om2gen's autofuse library and guard_check.so of a dynamic model (vendor
    OM2GEN_VENDOR, and "" as GE), then the op package's fused-kernel libraries, plus
    guard_check.so of each vendor that has one needed."""
    bin_type = SoBinType.kAutofuse

    def collect(self, ctx: PackContext) -> list[OpSoBin]:
        return self.own(ctx) + self.from_op_package(ctx)

    def own(self, ctx: PackContext) -> list[OpSoBin]:
        """om2gen's own, by the seed's rule: the autofuse library when a node has bin_file_path
        naming it, guard_check.so (vendor "") when the model's _guard_check_so_data is non-empty
        (codegen/autofuse_library.py)."""
        d = getattr(ctx.program, "dynamic", None)
        if d is None:
            return []
        named = {n["attrs"][BIN_FILE_PATH] for n in ctx.program.graph_json.get("nodes", ())
                 if BIN_FILE_PATH in n.get("attrs", {})}
        out = []
        if d.autofuse_library and f"{OM2GEN_VENDOR}/{d.autofuse_library}" in named:
            out.append(OpSoBin(d.autofuse_library, OM2GEN_VENDOR, self.bin_type, d.autofuse_binary))
        if d.guard_check_so_data:
            out.append(OpSoBin(GUARD_CHECK, "", self.bin_type, d.guard_check_so_data))
        return out

    def from_op_package(self, ctx: PackContext) -> list[OpSoBin]:
        chosen = [s for s in self.chosen(ctx) if s.path.name != GUARD_CHECK]
        out = [OpSoBin(s.path.name, s.vendor, self.bin_type, s.data) for s in chosen]
        guards = {}
        for s in chosen:
            guard = s.path.parent / GUARD_CHECK
            if guard.is_file() and guard not in guards:
                guards[guard] = _read(guard)
        if len({g for g in guards.values()}) > 1:
            raise CompileError(f"the model needs fused kernels of vendors with different {GUARD_CHECK} files "
                               f"({', '.join(str(p) for p in guards)}); GE packs one guard check per model")
        if guards:
            out.append(OpSoBin(GUARD_CHECK, "", self.bin_type, next(iter(guards.values()))))
        return out
