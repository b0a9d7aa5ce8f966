"""ELF checks with pyelftools: every binary om2gen packs is a shared object for the target."""
from __future__ import annotations

import io

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ..errors import AbiError, CompileError


def describe(data: bytes) -> dict:
    try:
        elf = ELFFile(io.BytesIO(data))
    except ELFError as exc:
        raise AbiError(f"not an ELF file ({exc})") from None
    dynsym = elf.get_section_by_name(".dynsym")
    exported, imported = set(), set()
    if dynsym is not None:
        for sym in dynsym.iter_symbols():
            if sym["st_info"]["bind"] not in ("STB_GLOBAL", "STB_WEAK") or not sym.name:
                continue
            (imported if sym["st_shndx"] == "SHN_UNDEF" else exported).add(sym.name)
    needed = []
    dynamic = elf.get_section_by_name(".dynamic")
    if dynamic is not None:
        needed = [t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    return {"machine": elf["e_machine"], "class": elf.elfclass, "type": elf["e_type"],
            "osabi": elf["e_ident"]["EI_OSABI"], "exported": exported, "imported": imported, "needed": needed}


def check_shared_object(data: bytes, what: str, target, exports: tuple[str, ...]) -> None:
    info = describe(data)
    problems = []
    if info["type"] != "ET_DYN":
        problems.append(f"type {info['type']} (expected ET_DYN)")
    if info["machine"] != target.elf_machine:
        problems.append(f"machine {info['machine']} (target {target.name} needs {target.elf_machine})")
    if info["class"] != 64:
        problems.append(f"ELF class {info['class']} (expected 64)")
    missing = [s for s in exports if s not in info["exported"]]
    if missing:
        problems.append(f"does not export {', '.join(missing)}")
    if problems:
        raise CompileError(f"{what}: the built binary is wrong: {'; '.join(problems)}")
