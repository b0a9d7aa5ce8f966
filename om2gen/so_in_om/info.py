"""SO in OM: what om2gen records about the platform of the shared objects a model packs, the four
kinds of packed SO, and the load-side entry points.

- ``info(target)``: the SoInOmInfo recorded at compile time (GE's ``SoInOmInfo``: CPU
  architecture, OS, runtime/operator-package version, compiler version), written to the OM2
  manifest (``so_in_om_info``) and to the OM's MODEL_DEF attrs (``host_env_cpu``,
  ``host_env_os``, ``opp_version``, ``compiler_version``).
- ``check(recorded, where, allow_mismatch)``: the load-time comparison with this machine and
  this om2gen; a difference is an AbiError naming each differing field and the override
  (``allow_platform_mismatch=True`` / ``--allow-platform-mismatch``).
- ``KINDS``: one row per SoBinType -- the op-package directory it is collected from, the
  exported symbol prefixes through which such a .so declares the op types it serves, and its
  load-time consumer (om2gen/so_in_om/providers.py collects, om2gen/so_in_om/loading.py consumes).
- ``bins_from_archive`` and ``bins_from_model_def`` read the packed SOs from an OM2 archive or
  an OM file; so_in_om/loading.py ``load_packed`` hands them to their consumers.
"""
from __future__ import annotations

import functools
import hashlib
import platform
from dataclasses import asdict, dataclass

from ..errors import AbiError, ArchiveError
from ..formats import op_so_store
from ..formats.om2 import integrity, layout
from ..formats.op_so_store import OpSoBin, SoBinType
from ..version import GENERATOR, KERNEL_ABI_VERSION, MODEL_ABI_VERSION, __version__

OVERRIDE_PY = "allow_platform_mismatch=True"
OVERRIDE_CLI = "--allow-platform-mismatch"
# MODEL_DEF attr keys (GE: host_env_os / host_env_cpu, opp_version, compiler_version)
MODEL_DEF_ATTRS = {"cpu_info": "host_env_cpu", "os_info": "host_env_os", "opp_version": "opp_version",
                   "compiler_version": "compiler_version"}
CUSTOM_OP_API_VERSION = 1   # om2/custom_op.h OM2_CUSTOM_OP_API_VERSION


@dataclass(frozen=True)
class SoInOmInfo:
    cpu_info: str           # CPU architecture the model's native code is for (`uname -m` spelling)
    os_info: str            # "linux"
    opp_version: str        # the runtime/operator package: om2gen's model, kernel and custom-op ABIs
    compiler_version: str   # the om2gen that compiled the model ("om2gen X.Y.Z")

    def to_json(self) -> dict:
        return asdict(self)

    def model_def_attrs(self) -> dict[str, str]:
        """The MODEL_DEF attrs a classic .om records it in (MODEL_DEF_ATTRS)."""
        return {key: getattr(self, field) for field, key in MODEL_DEF_ATTRS.items()}

    @classmethod
    def from_json(cls, value, where: str) -> SoInOmInfo:
        fields = tuple(cls.__dataclass_fields__)
        if not isinstance(value, dict) or any(not isinstance(value.get(f), str) for f in fields):
            raise ArchiveError(f"{where}: so_in_om_info must be an object with string fields "
                               f"{', '.join(fields)}; the model is corrupt")
        return cls(**{f: value[f] for f in fields})


def opp_version() -> str:
    """This runtime's operator-package version: what packed code and generated code link against."""
    return f"om2gen-runtime model-abi {MODEL_ABI_VERSION} kernel-abi {KERNEL_ABI_VERSION} " \
           f"custom-op-api {CUSTOM_OP_API_VERSION}"


def host_os() -> str:
    return platform.system().lower()


def info(target) -> SoInOmInfo:
    """What a model compiled for `target` records (the target's OS is Linux, om2gen's only one)."""
    return SoInOmInfo(cpu_info=target.arch, os_info="linux", opp_version=opp_version(), compiler_version=GENERATOR)


@functools.lru_cache(maxsize=1)
def host_info() -> SoInOmInfo:
    """This machine and this om2gen, in the same terms (the same for the whole process)."""
    return SoInOmInfo(cpu_info=platform.machine(), os_info=host_os(), opp_version=opp_version(),
                      compiler_version=GENERATOR)


def _release(version: str) -> tuple[int, ...] | None:
    """The part of "om2gen X.Y.Z" that must match: X, or X.Y while X is 0 (semantic versioning)."""
    name, _, number = version.partition(" ")
    parts = number.split(".")
    if name != "om2gen" or len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    major, minor = int(parts[0]), int(parts[1])
    return (major,) if major else (major, minor)


def differences(recorded: SoInOmInfo, here: SoInOmInfo | None = None) -> list[str]:
    """Each field of `recorded` that this machine cannot honour, as "field: recorded (this machine: x)"."""
    here = here or host_info()
    out = []
    for field, label in (("cpu_info", "CPU architecture"), ("os_info", "OS"),
                         ("opp_version", "runtime/operator package version")):
        if getattr(recorded, field) != getattr(here, field):
            out.append(f"{label} {field}={getattr(recorded, field)!r} (this machine: {getattr(here, field)!r})")
    want, have = _release(recorded.compiler_version), _release(here.compiler_version)
    if want is None or want != have:
        out.append(f"compiler version compiler_version={recorded.compiler_version!r} (this om2gen: "
                   f"{here.compiler_version!r}; the release {'.'.join(map(str, have or ()))}.x must match)")
    return out


def check(recorded: SoInOmInfo | None, where: str, allow_mismatch: bool = False) -> list[str]:
    """Compares the recorded SoInOmInfo with this machine. Returns the differences (empty when
    everything matches, or when the model records none: models from before this record).
    A difference is an AbiError unless allow_mismatch, in which case the caller goes on at its
    own risk (other checks, e.g. the ELF machine of every packed .so, still apply)."""
    if recorded is None:
        return []
    diffs = differences(recorded)
    if diffs and not allow_mismatch:
        raise AbiError(f"{where} was compiled for another platform: {'; '.join(diffs)}. Recompile the model "
                       f"with om2gen {__version__} for this machine ({platform.machine()}, {host_os()}), or load it "
                       f"anyway with {OVERRIDE_PY} (CLI: om2gen run {OVERRIDE_CLI})")
    return diffs


def from_model_def(model_def, where: str) -> SoInOmInfo | None:
    """The SoInOmInfo in a ge.proto.ModelDef's attrs; None if it records none (a GE-written OM
    without SOs, for example). Partially present or non-string attrs are corrupt."""
    from ..formats.om.model_def_attrs import model_def_attr  # the OM's protobuf code: not for an .om2
    present = {f: model_def_attr(model_def, k, "s", where).decode("utf-8", "replace")
               for f, k in MODEL_DEF_ATTRS.items() if k in model_def.attr}
    if not present or set(present) == {"compiler_version"}:
        return None
    missing = [MODEL_DEF_ATTRS[f] for f in MODEL_DEF_ATTRS if f not in present]
    if missing:
        raise ArchiveError(f"{where}: MODEL_DEF records the platform only partly (no {', '.join(missing)}); "
                           f"the model is corrupt")
    return SoInOmInfo(**present)


# --- the four kinds ---------------------------------------------------------------------------

@dataclass(frozen=True)
class SoKind:
    bin_type: SoBinType
    opp_dir: str                   # $OM2GEN_OPP_PATH/<arch>/<vendor>/<opp_dir>/*.so
    prefixes: tuple[str, ...]      # exported `<prefix><OpType>` symbols declare the served op types
    consumer: str                  # what takes it at load (so_loader)


KINDS = {k.bin_type: k for k in (
    SoKind(SoBinType.kSpaceRegistry, "op_host", ("Om2InferShape_", "Om2Tiling_"),
           "the model's SpaceRegistry: host infer-shape / tiling functions by op type"),
    SoKind(SoBinType.kOpMasterDevice, "op_master_device", ("Om2DeviceTiling_",),
           "the process-wide op-master cache (built-in by name, custom by content)"),
    SoKind(SoBinType.kAutofuse, "autofuse", ("Om2FusedKernel_",),
           "the model's autofuse store: guard_check.so bytes, fused-kernel libraries loaded on demand"),
    SoKind(SoBinType.kCustomOp, "custom_ops", (),
           "the model's custom-op registry (REG_AUTO_MAPPING_OP registrations of the library)"),
)}
GUARD_CHECK = "guard_check.so"       # GE's name for the autofuse guard-check library
BIN_FILE_PATH = "bin_file_path"       # GE's node attr naming the autofuse library ("vendor/so_name") of a fused node
# the entry points of om2gen's kAutofuse libraries (om2/om2_autofuse.h)
AUTOFUSE_ABI_SYMBOL = "Om2AutofuseAbiVersion"
GUARD_CHECK_SYMBOL = "Om2GuardCheck"
INFER_SHAPE_PREFIX = "Om2AutofuseInferShape_"
TILING_PREFIX = "Om2AutofuseTiling_"


def served_op_types(bin_type: SoBinType, exported) -> set[str]:
    """The op types a .so of this kind declares through its exported symbols."""
    prefixes = KINDS[SoBinType(bin_type)].prefixes
    return {s[len(p):] for s in exported for p in prefixes if s.startswith(p) and len(s) > len(p)}


def host_library_suffix(os_name: str, arch: str) -> str:
    """kSpaceRegistry libraries run on the host side: their names end with _<os>_<cpu>.so."""
    return f"_{os_name}_{arch}.so"


# --- load side ----------------------------------------------------------------------------------

def bins_from_archive(archive, meta: dict) -> list[OpSoBin]:
    """The SOs an OM2 archive packs: the OpSoStore in data/so_bins/ (digest-checked), whose
    kCustomOp items must be exactly the data/custom_ops/shared_libs/ entries; archives written
    before data/so_bins/ existed give their shared_libs as kCustomOp items."""
    where = str(archive.path)
    shared = list((meta.get("custom_ops") or {}).get("shared_libs", []))
    info = meta.get("so_bins")
    if info is None:
        return [OpSoBin(name.rsplit("/", 1)[1], "vendors/customize", SoBinType.kCustomOp, archive.view(name))
                for name in shared]
    if not isinstance(info, dict) or not isinstance(info.get("store"), str) or \
            not isinstance(info.get("so_in_om_flag"), int) or isinstance(info["so_in_om_flag"], bool):
        raise ArchiveError(f"{where}: model_meta so_bins must name the store and its so_in_om_flag; the archive is "
                           f"corrupt")
    archive.verify(info["store"])
    bins = op_so_store.load(archive.view(info["store"]))
    check_flag(bins, info["so_in_om_flag"], where)
    digests = [hashlib.sha256(b.data).hexdigest() for b in bins]
    custom = {d for b, d in zip(bins, digests) if b.bin_type == SoBinType.kCustomOp}
    listed = {archive.entries.get(n, {}).get("sha256") for n in shared}
    if custom != listed:
        raise ArchiveError(f"{where}: the kCustomOp libraries in {info['store']} differ from "
                           f"{layout.CUSTOM_OP_LIBRARIES_DIR}; the archive is inconsistent, recompile it")
    integrity.check_custom_names(bins, digests, where)
    return bins


def bins_from_model_def(so_bins_partition, model_def, where: str) -> list[OpSoBin]:
    """The SOs of a classic OM: its SO_BINS partition (bytes, possibly empty), checked against
    MODEL_DEF's so_in_om_flag."""
    bins = op_so_store.load(so_bins_partition)
    check_flag(bins, model_def, where)
    return bins


def check_flag(bins: list[OpSoBin], flag, where: str) -> None:
    """The so_in_om_flag (an int, or a ModelDef whose attr holds it) must declare exactly the
    packed types: a flag without its SOs, or SOs the flag hides, is a corrupt model."""
    if hasattr(flag, "attr"):
        from ..formats.om.model_def_attrs import flag_from_model_def
        flag = flag_from_model_def(flag, where)
    declared = set(op_so_store.types_of(flag))
    packed = {b.bin_type for b in bins}
    if declared != packed:
        def names(types):
            return ", ".join(t.name for t in sorted(types)) or "none"
        raise ArchiveError(f"{where}: so_in_om_flag 0x{flag:04X} declares {names(declared)}, but the packed SOs are "
                           f"{names(packed)}; the model is corrupt")
