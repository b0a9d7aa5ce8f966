"""ELF checks of the shared objects a model packs (SO in OM), at compile time and again at load.

Every packed ``.so`` must be, for the CPU architecture it is meant for:
  - an ELF shared object (ET_DYN), 64-bit, of that machine (EM_X86_64 / EM_AARCH64) and for a
    Linux OS ABI (SYSV or GNU/Linux);
  - loadable from memory: each DT_NEEDED library must be one the target runtime provides
    (``RUNTIME_LIBRARIES``). A packed .so is dlopen'ed from a memfd, so it cannot find another
    packed .so, or a library next to it on disk, by name.

The runtime's own symbols (the ACL API, the Om2* custom-op factory) are provided by the process
that loads the model: om2gen's native module, loaded RTLD_GLOBAL. A .so leaves them undefined
and names no library for them; a DT_NEEDED on a CANN runtime library (``libascendcl.so``...)
cannot be satisfied here and is reported with that hint.
"""
from __future__ import annotations

import io
from dataclasses import dataclass

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ..errors import AbiError, ArchiveError, CompileError, Om2Error

# The glibc and GCC runtime libraries every Linux target has, plus its dynamic loader.
_COMMON = ("libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libstdc++.so.6",
           "libgcc_s.so.1")


@dataclass(frozen=True)
class ArchInfo:
    arch: str               # as `uname -m` prints it
    elf_machine: str        # pyelftools e_machine name
    loader: str             # the dynamic loader's soname


ARCHES = {a.arch: a for a in (
    ArchInfo("x86_64", "EM_X86_64", "ld-linux-x86-64.so.2"),
    ArchInfo("aarch64", "EM_AARCH64", "ld-linux-aarch64.so.1"),
)}
# What the target runtime provides to a packed .so, by architecture (DT_NEEDED names).
RUNTIME_LIBRARIES = {a.arch: frozenset((*_COMMON, a.loader)) for a in ARCHES.values()}
OS_ABIS = ("ELFOSABI_SYSV", "ELFOSABI_LINUX")
# Libraries whose symbols the loading process provides itself (never as a file).
IN_PROCESS = ("libascendcl.so", "libacl_rt.so", "libruntime.so", "libgraph.so", "libregister.so")


@dataclass(frozen=True)
class ElfSummary:
    machine: str
    exported: frozenset[str]
    imported: frozenset[str]
    needed: tuple[str, ...]


def summary(data) -> ElfSummary:
    """Machine, dynamic exports/imports and DT_NEEDED of an ELF file; ELFError if it is not one."""
    elf = ELFFile(io.BytesIO(bytes(data)))
    exported, imported = set(), set()
    dynsym = elf.get_section_by_name(".dynsym")
    if dynsym is not None:
        for sym in dynsym.iter_symbols():
            if sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK") and sym.name:
                (imported if sym["st_shndx"] == "SHN_UNDEF" else exported).add(sym.name)
    needed = []
    dynamic = elf.get_section_by_name(".dynamic")
    if dynamic is not None:
        needed = [t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    return ElfSummary(elf["e_machine"], frozenset(exported), frozenset(imported), tuple(needed))


def check(data, what: str, arch: str, *, at_load: bool = False) -> ElfSummary:
    """Checks one packed .so for `arch`; returns its summary. `what` names it in messages (e.g.
    "kSpaceRegistry libfoo.so"). Compile time: CompileError. Load time (at_load): a non-ELF is
    an ArchiveError (the archive is corrupt), anything built for another platform an AbiError.
    An architecture om2gen has no table for is itself an error (nothing can be checked)."""
    wrong: type[Om2Error] = AbiError if at_load else CompileError
    corrupt: type[Om2Error] = ArchiveError if at_load else CompileError
    info = ARCHES.get(arch)
    if info is None:
        raise wrong(f"{what}: om2gen cannot check shared objects for CPU {arch!r} (known: {', '.join(ARCHES)})")
    if len(data) < 4 or bytes(data[:4]) != b"\x7fELF":
        raise corrupt(f"{what} is not an ELF file (starts with {bytes(data[:4]).hex() or 'nothing'}); "
                      f"pack only shared objects built with -shared")
    try:
        elf = ELFFile(io.BytesIO(bytes(data)))
        header = (elf["e_type"], elf["e_machine"], elf.elfclass, elf["e_ident"]["EI_OSABI"])
        result = summary(data)
    except (ELFError, ValueError, KeyError, AssertionError) as exc:
        raise corrupt(f"{what} is a malformed ELF file ({exc}); rebuild it") from None
    e_type, machine, elf_class, osabi = header
    problems = []
    if e_type != "ET_DYN":
        problems.append(f"it is {e_type}, not a shared object (ET_DYN); link it with -shared")
    if machine != info.elf_machine or elf_class != 64:
        problems.append(f"it is built for {machine} ({elf_class}-bit), {arch} needs {info.elf_machine} (64-bit)")
    if osabi not in OS_ABIS:
        problems.append(f"its OS ABI is {osabi}, a Linux runtime needs {' or '.join(OS_ABIS)}")
    if problems:
        raise wrong(f"{what}: {'; '.join(problems)}")
    provided = RUNTIME_LIBRARIES[arch]
    for lib in result.needed:
        if lib in provided:
            continue
        if lib.split(".so")[0] + ".so" in IN_PROCESS:
            hint = ("om2gen's runtime provides the ACL and Om2* symbols in the loading process: link the .so "
                    f"without -l{lib[3:].split('.so')[0]} and leave those symbols undefined")
        else:
            hint = (f"the {arch} runtime provides only {', '.join(sorted(provided))}; a packed .so is loaded "
                    f"from memory and cannot find other libraries by name: link {lib} statically or drop it")
        raise wrong(f"{what} needs {lib} (DT_NEEDED), which the {arch} target runtime does not provide; {hint}")
    return result
